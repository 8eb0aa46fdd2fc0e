"""XML 1.0 (5th edition) ``Name`` and ``Nmtoken``: the one definition.

Used by the DTD front-end (parsing names and building the grammar's name IR), the
schema-to-XML front-end (checking element names) and the post-hoc guard (lexing tags), so
the guard accepts exactly the names the grammars can produce.

- ``NameStartChar``: ``:`` ``A-Z`` ``_`` ``a-z`` and the non-ASCII ranges of
  :data:`NAME_START_RANGES`; ``NameChar`` adds ``-`` ``.`` ``0-9`` U+00B7 and the
  combining ranges of :data:`NAME_RANGES`.
- A ``Name`` is a NameStartChar followed by NameChars; an ``Nmtoken`` is one or more
  NameChars.  Ranges are sorted, disjoint, inclusive code-point pairs.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from decoding.ir import normalize_ranges

__all__ = ["NAME_START_RANGES", "NAME_RANGES", "NAME_RE", "NMTOKEN_RE", "NAME_RUN",
           "is_name_start", "is_name_char", "is_name"]

#: NameStartChar as code-point ranges (``:`` included).
NAME_START_RANGES: tuple[tuple[int, int], ...] = (
    (0x3A, 0x3A), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A), (0xC0, 0xD6), (0xD8, 0xF6),
    (0xF8, 0x2FF), (0x370, 0x37D), (0x37F, 0x1FFF), (0x200C, 0x200D), (0x2070, 0x218F),
    (0x2C00, 0x2FEF), (0x3001, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFFD),
    (0x10000, 0xEFFFF),
)
#: NameChar as code-point ranges (sorted and merged).
NAME_RANGES: tuple[tuple[int, int], ...] = normalize_ranges(NAME_START_RANGES + (
    (0x2D, 0x2E), (0x30, 0x39), (0xB7, 0xB7), (0x300, 0x36F), (0x203F, 0x2040),
))


def _cls(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


#: One Name (``.match`` / ``.fullmatch``).
NAME_RE = re.compile(f"[{_cls(NAME_START_RANGES)}][{_cls(NAME_RANGES)}]*")
#: One Nmtoken.
NMTOKEN_RE = re.compile(f"[{_cls(NAME_RANGES)}]+")
#: A Name or nothing: ``NAME_RUN.match(s, i).end()`` is where the Name at ``i`` ends, or
#: ``i`` itself when none starts there (it always matches), for hand-written lexers.
NAME_RUN = re.compile(f"(?:{NAME_RE.pattern})?")

_ASCII_START = frozenset(":ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")
_ASCII_CHAR = _ASCII_START | frozenset("-.0123456789")
_START_LO = [lo for lo, _ in NAME_START_RANGES]
_CHAR_LO = [lo for lo, _ in NAME_RANGES]


def _in(cp: int, ranges: tuple[tuple[int, int], ...], los: list[int]) -> bool:
    k = bisect_right(los, cp) - 1
    return k >= 0 and cp <= ranges[k][1]


def is_name_start(c: str) -> bool:
    """Whether the one character ``c`` is a NameStartChar."""
    if c < "\x80":
        return c in _ASCII_START
    return _in(ord(c), NAME_START_RANGES, _START_LO)


def is_name_char(c: str) -> bool:
    """Whether the one character ``c`` is a NameChar."""
    if c < "\x80":
        return c in _ASCII_CHAR
    return _in(ord(c), NAME_RANGES, _CHAR_LO)


def is_name(s: str) -> bool:
    """Whether ``s`` is an XML Name."""
    return NAME_RE.fullmatch(s) is not None

