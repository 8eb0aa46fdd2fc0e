"""Grammar cache: an in-process LRU of compiled grammars plus an on-disk artifact directory.

Both are keyed by :func:`decoding.ir.key.grammar_key` (canonical IR + tokenizer
fingerprint + format version), so equal grammars share one entry whatever their source
formatting.  The directory is ``GUARDED_DECODING_CACHE`` if set, else
``$XDG_CACHE_HOME/guarded-decoding``, else ``~/.cache/guarded-decoding``.

Invariants
- an entry is only ever produced by compiling its grammar or by loading a verified
  artifact with the same key and tokenizer fingerprint;
- a corrupt or mismatched file in the directory is never used: it is recompiled and
  replaced (counted in ``stats["disk_errors"]``);
- files are written atomically (temporary file + rename), so concurrent processes see
  either no artifact or a whole one.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from decoding.compiler import as_vocab
from decoding.artifacts.format import ARTIFACT_SUFFIX, load_artifact, write_artifact
from decoding.errors import ArtifactError
from decoding.ir.key import grammar_digest, grammar_key, source_key
from decoding.backends.dfa.index import CompiledGrammar, compile_grammar
from decoding.frontends.sources import build_grammar, kind_of, normalized_text, read_source

__all__ = ["GrammarCache", "default_cache_dir", "default_cache", "load_or_compile", "compile_source"]

ENV_VAR = "GUARDED_DECODING_CACHE"


def default_cache_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "guarded-decoding"


def compile_source(source: Any, kind: str, vocab: Any, *, name: str | None = None,
                   base_dir: str | os.PathLike | None = None, eager: bool = True,
                   **options: Any) -> CompiledGrammar:
    """Front-end + automaton + token index for ``source`` (no cache).  The result carries
    its canonical key, digest, depth bound and front-end options in ``meta``."""
    v = as_vocab(vocab)
    g, meta = build_grammar(source, kind, name=name, base_dir=base_dir, **options)
    digest = grammar_digest(g)
    meta.update(grammar_digest=digest, max_depth=g.max_depth, options=options)
    return compile_grammar(g, v, eager=eager, grammar_key=grammar_key(digest, v.fingerprint), meta=meta)


class GrammarCache:
    """LRU of ``capacity`` compiled grammars in memory, backed by ``directory`` on disk
    (``directory=None``: the default cache dir; ``False``: memory only)."""

    def __init__(self, directory: str | os.PathLike | None | bool = None, *, capacity: int = 32) -> None:
        if directory is None or directory is True:
            directory = default_cache_dir()
        self.directory = None if directory is False else Path(directory)
        self.capacity = max(1, int(capacity))
        self._lru: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._alias: dict[str, str] = {}
        self._lock = threading.Lock()
        self.stats = {"memory_hits": 0, "disk_hits": 0, "compiles": 0, "disk_errors": 0}

    def path_for(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}{ARTIFACT_SUFFIX}"

    def get(self, key: str) -> CompiledGrammar | None:
        with self._lock:
            cg = self._lru.get(key)
            if cg is not None:
                self._lru.move_to_end(key)
            return cg

    def put(self, cg: CompiledGrammar) -> None:
        with self._lock:
            self._lru[cg.grammar_key] = cg
            self._lru.move_to_end(cg.grammar_key)
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)

    def clear_memory(self) -> None:
        with self._lock:
            self._lru.clear()
            self._alias.clear()

    def __len__(self) -> int:
        return len(self._lru)

    def load_or_compile(self, source: Any, kind: str | None, tokenizer: Any, **options: Any) -> CompiledGrammar:
        """The compiled grammar of ``source`` for ``tokenizer``: from memory, else from the
        cache directory, else compiled (and written there).

        ``source``: a ``Path`` (kind from the extension when ``kind`` is None), a ``str``
        that is a path when ``kind`` is None and source text otherwise, or a parsed JSON
        Schema (dict/bool).  ``options`` go to the front-end (``root`` for DTDs)."""
        vocab = as_vocab(tokenizer)
        fp = vocab.fingerprint
        name, base_dir = None, None
        if isinstance(source, os.PathLike) or (isinstance(source, str) and kind is None):
            name, base_dir = os.fspath(source), os.path.dirname(os.path.abspath(source))
            kind = kind_of(source, kind)
            source = read_source(source)
        kind = kind_of("", kind)
        alias = source_key(normalized_text(source, kind), kind, {**options, "_base": base_dir}, fp)
        with self._lock:
            key = self._alias.get(alias)
        if key is not None:
            cg = self.get(key)
            if cg is not None:
                self.stats["memory_hits"] += 1
                return cg
        g, meta = build_grammar(source, kind, name=name, base_dir=base_dir, **options)
        digest = grammar_digest(g)
        key = grammar_key(digest, fp)
        with self._lock:
            self._alias[alias] = key
        cg = self.get(key)
        if cg is not None:
            self.stats["memory_hits"] += 1
            return cg
        path = self.path_for(key)
        if path is not None and path.is_file():
            try:
                cg = load_artifact(path, vocab, expect_key=key)
                self.stats["disk_hits"] += 1
                self.put(cg)
                return cg
            except ArtifactError:
                self.stats["disk_errors"] += 1
        meta.update(grammar_digest=digest, max_depth=g.max_depth, options=options)
        cg = compile_grammar(g, vocab, eager=True, grammar_key=key, meta=meta)
        self.stats["compiles"] += 1
        if path is not None and isinstance(cg, CompiledGrammar):  # pushdown grammars stay in memory
            write_artifact(cg, path, name=Path(name).stem if name else "", kind=kind, options=options,
                           source={"name": name or "", "kind": kind, "text": normalized_text(source, kind),
                                   "options": options})
        self.put(cg)
        return cg


_default: list[GrammarCache] = []
_default_lock = threading.Lock()


def default_cache() -> GrammarCache:
    """The process-wide cache (default directory, 32 grammars in memory)."""
    with _default_lock:
        if not _default:
            _default.append(GrammarCache())
        return _default[0]


def load_or_compile(source: Any, kind: str | None, tokenizer: Any, *, cache: GrammarCache | None = None,
                    **options: Any) -> CompiledGrammar:
    """:meth:`GrammarCache.load_or_compile` on ``cache`` (default: the process-wide cache)."""
    return (cache or default_cache()).load_or_compile(source, kind, tokenizer, **options)
