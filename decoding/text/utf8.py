"""UTF-8 tables: reading code points back out of byte-level IR.

The grammar IR is over bytes; code-point views (GBNF, which llama.cpp reads over code
points) need to translate back:

- :data:`UTF8_SEQUENCES`: the well-formed UTF-8 byte sequences (Unicode Table 3-7);
- :func:`payload_ranges`: the code points a product of per-position byte ranges spells;
- :func:`charset_of` recognises IR nodes whose language is a set of single, well-formed
  UTF-8 characters (as built by :func:`decoding.ir.char_class`) and returns the
  code-point ranges.

Invariants: ranges are sorted, disjoint, inclusive ``(lo, hi)`` code-point pairs;
surrogates (U+D800..U+DFFF) and overlong encodings never appear in a result.  Code-point
set algebra (``MAX_CP``, normalize, complement) lives in :mod:`decoding.ir`.
"""

from __future__ import annotations

from typing import Sequence

from decoding.ir import MAX_CP, ByteSet, Choice, Lit, Node, Seq, normalize_ranges

__all__ = ["UTF8_SEQUENCES", "payload_ranges", "charset_of"]

_MIN_FOR_LEN = {1: 0, 2: 0x80, 3: 0x800, 4: 0x10000}
_MAX_FOR_LEN = {1: 0x7F, 2: 0x7FF, 3: 0xFFFF, 4: MAX_CP}

# Well-formed UTF-8 byte sequences (Unicode Table 3-7), as per-position byte ranges.
UTF8_SEQUENCES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0x00, 0x7F),),
    ((0xC2, 0xDF), (0x80, 0xBF)),
    ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)


def payload_ranges(byte_ranges: Sequence[Sequence[tuple[int, int]]]) -> list[tuple[int, int]] | None:
    """Code points spelled by the product of per-position byte range sets, or None if
    the product is not a set of well-formed UTF-8 characters of one length."""
    n = len(byte_ranges)
    if not 1 <= n <= 4:
        return None
    lead_mask = {1: 0x7F, 2: 0x1F, 3: 0x0F, 4: 0x07}[n]
    lead_lo = {1: 0x00, 2: 0xC0, 3: 0xE0, 4: 0xF0}[n]
    for lo, hi in byte_ranges[0]:
        if lo < lead_lo or hi > lead_lo + lead_mask:
            return None
    for pos in byte_ranges[1:]:
        for lo, hi in pos:
            if lo < 0x80 or hi > 0xBF:
                return None
    cur = [(lo & lead_mask, hi & lead_mask) for lo, hi in byte_ranges[0]]
    for pos in byte_ranges[1:]:
        nxt: list[tuple[int, int]] = []
        for plo, phi in cur:
            for blo, bhi in pos:
                a, b = blo & 0x3F, bhi & 0x3F
                if a == 0 and b == 0x3F:
                    nxt.append((plo << 6, (phi << 6) | 0x3F))
                else:
                    if phi - plo > 4096:
                        return None
                    nxt.extend(((p << 6) | a, (p << 6) | b) for p in range(plo, phi + 1))
        cur = list(normalize_ranges(nxt))
    for lo, hi in cur:
        if lo < _MIN_FOR_LEN[n] or hi > _MAX_FOR_LEN[n]:
            return None  # overlong or out of range
        if lo <= 0xDFFF and hi >= 0xD800:
            return None  # surrogates
    return cur


def charset_of(node: Node) -> list[tuple[int, int]] | None:
    """Code-point ranges if ``node`` matches exactly the UTF-8 encodings of a set of
    characters (each one character long), else None."""
    if isinstance(node, ByteSet):
        return payload_ranges([node.ranges])
    if isinstance(node, Lit):
        try:
            s = node.data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return [(ord(s), ord(s))] if len(s) == 1 else None
    if isinstance(node, Seq):
        if not node.items or not all(isinstance(x, (ByteSet, Lit)) for x in node.items):
            return None
        per_pos: list[Sequence[tuple[int, int]]] = []
        for x in node.items:
            if isinstance(x, ByteSet):
                per_pos.append(x.ranges)
            else:
                per_pos.extend([((b, b),) for b in x.data])  # type: ignore[union-attr]
        return payload_ranges(per_pos)
    if isinstance(node, Choice):
        if not node.items:
            return None
        acc: list[tuple[int, int]] = []
        for x in node.items:
            r = charset_of(x)
            if r is None:
                return None
            acc.extend(r)
        return list(normalize_ranges(acc))
    return None
