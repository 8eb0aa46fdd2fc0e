"""JSON string encoding at byte level, and canonical JSON spelling of values.

Invariant: the grammar spells every character of a JSON string in exactly one way,
the way ``json.dumps(..., ensure_ascii=False)`` does: ``\\"``, ``\\\\``, the short
escapes ``\\b \\f \\n \\r \\t``, ``\\u00xx`` (lowercase hex) for other control
characters, and the raw UTF-8 bytes of everything else.  So every accepted string
decodes to the characters the grammar meant, and canonical serialisations are accepted.

:func:`json_char` is the JSON Schema front-end's encoder for :mod:`decoding.text.regex`.
:func:`dumps` / :func:`number_text` raise :class:`~decoding.errors.UsageError` (also a
``ValueError``) naming the JSON pointer of a value that is not JSON.
"""

from __future__ import annotations

import json
import json.encoder
import math
from functools import lru_cache
from typing import Iterable

from decoding.errors import UsageError
from decoding.ir import MAX_CP, NOTHING, Node, char_class, choice, complement_ranges, lit, normalize_ranges, seq

__all__ = ["json_char", "any_json_char", "string_of", "quote", "dumps", "number_text", "encode_str"]

_SHORT = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
          0x22: '\\"', 0x5C: "\\\\"}
_SPECIAL = sorted(set(range(0x20)) | {0x22, 0x5C})
#: ``json.dumps(s, ensure_ascii=False)`` for a str ``s``, without building an encoder per call
#: (what ``JSONEncoder(ensure_ascii=False).encode`` calls for a str: the same text)
encode_str = json.encoder.encode_basestring


def _escape(cp: int) -> str:
    return _SHORT.get(cp) or f"\\u{cp:04x}"


@lru_cache(maxsize=4096)
def _json_char(ranges: tuple[tuple[int, int], ...]) -> Node:
    raw: list[tuple[int, int]] = []
    specials: list[int] = []
    for lo, hi in ranges:
        # cut out 0x00-0x1f, '"' and '\\'
        cur = lo
        for sp in _SPECIAL:
            if sp < cur or sp > hi:
                continue
            if sp > cur:
                raw.append((cur, sp - 1))
            specials.append(sp)
            cur = sp + 1
        if cur <= hi:
            raw.append((cur, hi))
    alts: list[Node] = []
    if raw:
        alts.append(char_class(raw))
    sp = set(specials)
    controls = {c for c in sp if c < 0x20 and c not in _SHORT}
    full_ctrl = {c for c in range(0x20) if c not in _SHORT}
    for c in sorted(sp - controls):
        alts.append(lit(_escape(c)))
    if controls == full_ctrl:
        alts.append(seq(lit("\\u00"), choice(seq(lit("0"), char_class([(0x30, 0x37), (0x62, 0x62),
                                                                           (0x65, 0x66)])),
                                            seq(lit("1"), char_class([(0x30, 0x39), (0x61, 0x66)])))))
    else:
        for c in sorted(controls):
            alts.append(lit(_escape(c)))
    if not alts:
        return NOTHING
    return choice(*alts)


def json_char(ranges: Iterable[tuple[int, int]]) -> Node:
    """One character whose code point is in ``ranges``, spelled canonically inside a JSON string."""
    return _json_char(normalize_ranges((max(lo, 0), min(hi, MAX_CP)) for lo, hi in ranges))


def any_json_char() -> Node:
    return _json_char(((0, MAX_CP),))


#: :func:`non_ascii_json_char`'s node (one per process: a registered plain node)
_NON_ASCII: list[Node] = []
#: printable ASCII: the characters a JSON string holds as themselves, bar ``"`` and ``\\``
PRINTABLE_ASCII = (0x20, 0x7E)


def non_ascii_json_char() -> Node:
    """One JSON string character outside printable ASCII: a control character's escape or a
    non-ASCII character (one node per process).  With :func:`json_char` of a set of printable
    ASCII characters it spells the characters of the union (the spellings are per character)."""
    if not _NON_ASCII:
        _NON_ASCII.append(json_char(complement_ranges((PRINTABLE_ASCII,))))
    return _NON_ASCII[0]


def string_of(body: Node) -> Node:
    """A JSON string whose (encoded) content is ``body``."""
    return seq(lit('"'), body, lit('"'))


def quote(s: str) -> bytes:
    return encode_str(s).encode("utf-8")


class _NotJSON(Exception):
    """Internal: ``reason`` for the value at ``path`` (innermost key last, built on unwinding)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.path: list[str] = []


def _pointer(path: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in reversed(path)) or "/"


def _number_text(x: int | float) -> str:
    if isinstance(x, bool):
        raise _NotJSON("bool is not a number")
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        raise _NotJSON("NaN/Infinity are not JSON")
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def number_text(x: int | float) -> str:
    """Canonical number spelling: integral values as integers, others as Python ``repr``."""
    try:
        return _number_text(x)
    except _NotJSON as e:
        raise UsageError(f"number {x!r}: {e.reason}") from None


def _dumps(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, str):
        return encode_str(value)
    if isinstance(value, list):
        parts = []
        for i, v in enumerate(value):
            try:
                parts.append(_dumps(v))
            except _NotJSON as e:
                e.path.append(str(i))
                raise
        return "[" + ",".join(parts) + "]"
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            try:
                parts.append(encode_str(str(k)) + ":" + _dumps(v))
            except _NotJSON as e:
                e.path.append(str(k))
                raise
        return "{" + ",".join(parts) + "}"
    raise _NotJSON(f"not a JSON value: {type(value).__name__}")


def dumps(value: object) -> str:
    """Compact canonical JSON of ``value`` with object keys in their given order."""
    try:
        return _dumps(value)
    except _NotJSON as e:
        raise UsageError(f"JSON value at {_pointer(e.path)}: {e.reason}") from None
