"""Canonical grammar keys: equal grammars share one artifact and one cache entry.

The canonical form of a grammar is its IR (:func:`decoding.ir.to_data`) written as JSON
with sorted keys and no whitespace (:func:`canonical_text`).  Every front-end option that
changes the language (whitespace policy, depth bounds, DTD root, text patterns, ...) is
already in the IR, and everything that does not (JSON whitespace and keyword order, DTD and
GBNF whitespace and comments, parameter-entity indirection) is gone from it.  So:

- ``grammar_digest(g)`` identifies the language exactly (rule names included);
- ``grammar_key(g, fingerprint, version=...)`` adds the artifact format version, the
  tokenizer fingerprint and the index options: it names one artifact.

Note: the order of the members of a JSON Schema ``properties`` object *is* part of the
language (the compiler emits properties in that order), so reordering properties gives a
different key; reordering keywords does not.

``source_key`` is a cheap alias (whitespace-normalized source text + options) used only to
skip the front-end on repeated identical requests; it never decides equality of grammars.

This module knows nothing of the artifact format: callers pass its version in.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from decoding.ir.nodes import Grammar, to_data

__all__ = ["canonical_text", "grammar_digest", "grammar_key", "source_key"]


def canonical_text(obj: Any) -> str:
    """JSON text with sorted keys, no insignificant whitespace, non-ASCII kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def grammar_digest(grammar: Grammar) -> str:
    """sha256 of the canonical IR of ``grammar``."""
    return _sha(canonical_text(to_data(grammar)))


def grammar_key(grammar: Grammar | str, fingerprint: str, *, version: int,
                index_options: dict | None = None) -> str:
    """Key of the artifact (format ``version``) of ``grammar`` (or of its digest) for the
    tokenizer ``fingerprint``."""
    digest = grammar if isinstance(grammar, str) else grammar_digest(grammar)
    return _sha(canonical_text({"format": version, "grammar": digest, "vocab": fingerprint,
                                "index": index_options or {}}))[:40]


def source_key(text: str, kind: str, options: dict, fingerprint: str, *, version: int) -> str:
    """Alias of one exact request (JSON sources are whitespace-normalized by the caller)."""
    return _sha(canonical_text({"format": version, "kind": kind, "text": text, "options": options,
                                "vocab": fingerprint}))
