"""Exact digit automata for bounded integers and numbers.

Spellings (the canonical ones, see docs/json-schema.md):
- integer: ``0`` or ``-?[1-9][0-9]*`` (no ``-0``, no exponent, no ``.0``);
- unbounded number: the JSON number grammar (``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``);
- bounded number: no exponent; an integer, or ``I.F`` with ``F`` ending in a non-zero digit.

Bounds are exact for integers.  For numbers every accepted spelling lies within the
bounds; values between a non-integral bound and the nearest integer are not generated
(a documented subset, never a superset).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..ir import EMPTY, NOTHING, Node, byteset, choice, lit, opt, plus, rep, seq, star

__all__ = ["integer_range", "number_range", "INTEGER", "NUMBER"]

_D = byteset([(48, 57)])
_D19 = byteset([(49, 57)])


def _digits(lo: int, hi: int) -> Node:
    return byteset([(48 + lo, 48 + hi)]) if lo <= hi else NOTHING


def _ge(u: str) -> Node:
    """Digit strings of length len(u) that are >= u (leading zeros allowed)."""
    if not u:
        return EMPTY
    if set(u) == {"0"}:
        return rep(_D, len(u), len(u))
    d = int(u[0])
    return choice(seq(lit(u[0]), _ge(u[1:])), seq(_digits(d + 1, 9), rep(_D, len(u) - 1, len(u) - 1)))


def _le(u: str) -> Node:
    if not u:
        return EMPTY
    if set(u) == {"9"}:
        return rep(_D, len(u), len(u))
    d = int(u[0])
    return choice(seq(_digits(0, d - 1), rep(_D, len(u) - 1, len(u) - 1)), seq(lit(u[0]), _le(u[1:])))


def _between(s: str, t: str) -> Node:
    """Digit strings of equal length n with s <= x <= t."""
    k = 0
    while k < len(s) and s[k] == t[k]:
        k += 1
    if k == len(s):
        return lit(s)
    pre, a, b = s[:k], int(s[k]), int(t[k])
    m = len(s) - k - 1
    return seq(lit(pre), choice(seq(lit(str(a)), _ge(s[k + 1:])),
                                seq(_digits(a + 1, b - 1), rep(_D, m, m)),
                                seq(lit(str(b)), _le(t[k + 1:]))))


def _nonneg(a: int, b: int | None) -> Node:
    """Canonical spellings of integers in [a, b] (0 <= a; b None = unbounded)."""
    if b is not None and b < a:
        return NOTHING
    alts: list[Node] = []
    la = len(str(a))
    lb = None if b is None else len(str(b))
    top = lb if lb is not None else la
    for n in range(la, top + 1):
        lo = max(a, 0 if n == 1 else 10 ** (n - 1))
        hi = 10 ** n - 1 if b is None else min(b, 10 ** n - 1)
        if lo <= hi:
            alts.append(_between(str(lo), str(hi)))
    if b is None:
        alts.append(seq(_D19, rep(_D, la, None)))
    return choice(*alts) if alts else NOTHING


def integer_range(lo: int | None, hi: int | None) -> Node:
    """Canonical spellings of the integers in [lo, hi] (None = unbounded side)."""
    alts: list[Node] = []
    if hi is None or hi >= 0:
        alts.append(_nonneg(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        # negative part: -(n) with n in [max(1, -hi), -lo]
        a = max(1, -hi) if hi is not None else 1
        b = None if lo is None else -lo
        if b is None or a <= b:
            alts.append(seq(lit("-"), _nonneg(a, b)))
    alts = [x for x in alts if x != NOTHING]
    return choice(*alts) if alts else NOTHING


INTEGER: Node = choice(lit("0"), seq(opt(lit("-")), _D19, star(_D)))
NUMBER: Node = seq(opt(lit("-")), choice(lit("0"), seq(_D19, star(_D))),
                   opt(seq(lit("."), plus(_D))),
                   opt(seq(byteset([(69, 69), (101, 101)]), opt(byteset([(43, 43), (45, 45)])), plus(_D))))
_FRAC: Node = seq(lit("."), star(_D), _D19)


def _int_bounds(lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool) -> tuple[int | None, int | None]:
    a = None
    if lo is not None:
        a = math.floor(lo) + 1 if lo_x and lo.denominator == 1 else math.ceil(lo)
    b = None
    if hi is not None:
        b = math.ceil(hi) - 1 if hi_x and hi.denominator == 1 else math.floor(hi)
    return a, b


def _pos_fractional(lo: Fraction | None, hi: Fraction | None) -> Node:
    """Spellings I.F (F nonzero) of non-integral values in (lo, hi) for x > 0 side: I >= 0."""
    a = 0 if lo is None else max(0, math.ceil(lo))
    b = None if hi is None else math.floor(hi) - 1
    if b is not None and b < a:
        return NOTHING
    return seq(_nonneg(a, b), _FRAC)


def number_range(lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool) -> Node:
    """Bounded numbers (no exponent): every accepted spelling denotes x with the bounds held."""
    if lo is None and hi is None:
        return NUMBER
    ia, ib = _int_bounds(lo, lo_x, hi, hi_x)
    alts: list[Node] = [integer_range(ia, ib)]
    # non-integral, non-negative: x = I.F in (I, I+1)
    if hi is None or hi > 0:
        alts.append(_pos_fractional(lo if lo is not None and lo > 0 else None, hi))
    # non-integral, negative: x = -(I.F), y = -x in (max(0,-hi), -lo)
    if lo is None or lo < 0:
        ylo = -hi if hi is not None and hi < 0 else None
        yhi = -lo if lo is not None else None
        neg = _pos_fractional(ylo, yhi)
        if neg != NOTHING:
            alts.append(seq(lit("-"), neg))
    alts = [x for x in alts if x != NOTHING]
    return choice(*alts) if alts else NOTHING
