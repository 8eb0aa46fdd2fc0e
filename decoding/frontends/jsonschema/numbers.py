"""Exact digit automata for bounded integers and numbers.

Spellings (the canonical ones, see docs/json-schema.md):
- integer: ``0`` or ``-?[1-9][0-9]*`` (no ``-0``, no exponent, no ``.0``);
- unbounded number: the JSON number grammar (``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``);
- bounded number: no exponent; an integer, or ``I.F`` with ``F`` ending in a non-zero digit.

Bounds are exact: for integers by digit automata, for numbers also on the fractional
digits (``I.F`` next to a non-integral bound compares ``F`` digit by digit with the
bound's decimal digits).  Validators (``jsonschema``) compare an instance with the
*double* a float bound parses to: bounds arrive here as exact values (``Fraction(1e308)``
is the double, not 10**308).  Integer spellings parse to exact integers and are compared
exactly.  ``I.F`` spellings parse to doubles, so they are bounded by the nearest doubles
inside the bounds (written as their shortest decimals, inclusive): a long ``F`` that rounds
onto or past a bound is never generated.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

from decoding.errors import LimitError
from decoding.ir import EMPTY, NOTHING, Dfa, Node, byteset, choice, lit, opt, plus, rep, seq, star

__all__ = ["integer_range", "number_range", "integer_bounds", "INTEGER", "NUMBER"]


def integer_bounds(lo: Fraction | None, lo_x: bool, hi: Fraction | None,
                   hi_x: bool) -> tuple[int | None, int | None]:
    """The least and greatest integers within exact bounds (``*_x``: exclusive); None: none."""
    a = None
    if lo is not None:
        a = int(lo) + 1 if lo_x and lo.denominator == 1 else -((-lo.numerator) // lo.denominator)
    b = None
    if hi is not None:
        b = int(hi) - 1 if hi_x and hi.denominator == 1 else hi.numerator // hi.denominator
    return a, b


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


_SIG = 17  # significant digits kept by _inward


def _inward(lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
    """[lo, hi] with each bound of more than 17 significant digits rounded inward to 17
    (lo up, hi down), when the range stays non-empty: the exact double bound 1e308 has 309
    "random" digits whose digit automaton costs O(digits^2) states; the rounded one is
    mostly trailing zeros.  A subset (the integers cut off are never generated)."""
    def rnd(x: int, up: bool) -> int:
        n = len(str(abs(x)))
        if n <= _SIG:
            return x
        q = 10 ** (n - _SIG)
        return -((-x) // q) * q if up else (x // q) * q
    a = None if lo is None else rnd(lo, True)
    b = None if hi is None else rnd(hi, False)
    if a is not None and b is not None and a > b:
        return lo, hi
    return a, b


#: :func:`integer_range` results by ``(lo, hi)``: the same few ranges recur across schemas
#: (int32, int64, uint16 bounds: 13 distinct in the 95 ranges of Snowplow, Kubernetes and
#: Github_easy 60 each) and a 19-digit one takes ~2 ms to build.  The nodes are immutable, so
#: sharing them between grammars is sound; at most ``_RANGES_MAX`` entries (cleared when full).
_RANGES: dict[tuple[int | None, int | None], Node] = {}
_RANGES_MAX = 256


def integer_range(lo: int | None, hi: int | None) -> Node:
    """Canonical spellings of the integers in [lo, hi] (None = unbounded side); bounds of
    more than 17 significant digits are rounded inward where the range stays non-empty.
    Memoized per process (:data:`_RANGES`)."""
    key = (lo, hi)
    hit = _RANGES.get(key)
    if hit is None:
        if len(_RANGES) >= _RANGES_MAX:
            _RANGES.clear()
        hit = _RANGES[key] = _integer_range(lo, hi)
    return hit


#: a range whose finite bound has at least this many digits is one automaton leaf
#: (:func:`_range_dfa`, the same language): int32/int64 bounds made a choice of up to 57
#: digit sequences that every pass then walked (Snowplow's sp_151: 1.6 of its 2.7 ms)
RANGE_DFA_DIGITS = 6


def _integer_range(lo: int | None, hi: int | None) -> Node:
    lo, hi = _inward(lo, hi)
    bounds = [abs(x) for x in (lo, hi) if x is not None]
    if bounds and len(str(max(bounds))) >= RANGE_DFA_DIGITS:
        return _range_dfa(lo, hi)
    return _range_ir(lo, hi)


def _range_ir(lo: int | None, hi: int | None) -> Node:
    """The canonical spellings of the integers in [lo, hi] as a choice of digit sequences."""
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


def _range_dfa(lo: int | None, hi: int | None) -> Node:
    """The canonical spellings of the integers in [lo, hi] (None: unbounded side) as one
    minimal automaton leaf (:class:`~decoding.ir.Dfa`), NOTHING when there is none.

    A magnitude's prefix ``p`` of ``i`` digits (the first non-zero) has the same
    continuations as every prefix of ``i`` digits that compares the same way with the first
    ``i`` digits of the bounds' magnitudes (``-1``/``0``/``1``; None past a bound's length):
    a number of the lower bound's length is at least it when its prefix is greater, or equal
    and the rest is at least the rest; longer numbers always are (and the same for the upper
    bound).  So the states are ``(side, i, cmp lower, cmp upper)``, plus a zero and, with no
    upper bound, one looping state past the lower bound's length; dead states are dropped
    and the rest minimised (Moore)."""
    sides = []  # (sign, lowest magnitude, highest or None); zero is in when the lowest is 0
    if hi is None or hi >= 0:
        sides.append(("+", max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        a = max(1, -hi) if hi is not None else 1
        b = None if lo is None else -lo
        if b is None or a <= b:
            sides.append(("-", a, b))
    if not sides:
        return NOTHING
    keys: dict = {"start": 0}
    order: list = ["start"]
    edges: list[dict[int, int]] = [{}]
    accept: list[bool] = [False]

    def sid(key, acc: bool) -> int:
        i = keys.get(key)
        if i is None:
            i = keys[key] = len(order)
            order.append(key)
            edges.append({})
            accept.append(acc)
        return i

    def cmp(x: int, y: int) -> int:
        return (x > y) - (x < y)

    for sign, a, b in sides:
        sa = str(max(a, 1))
        sb = None if b is None else str(b)
        la, lb = len(sa), None if sb is None else len(sb)
        pre = 0 if sign == "+" else sid((sign, "pre"), False)
        if sign == "-":
            edges[0][45] = pre
        if a == 0:
            edges[pre][48] = sid((sign, "zero"), True)
        if b is not None and b < 1:
            continue
        todo = [(pre, 0, 0, 0)]
        while todo:
            s, i, ca, cb = todo.pop()
            if lb is not None and i + 1 > lb:
                continue
            for d in range(1 if i == 0 else 0, 10):
                ca2 = None if i + 1 > la else (ca if ca != 0 else cmp(d, int(sa[i])))
                cb2 = None if sb is None or i + 1 > lb else (cb if cb != 0 else cmp(d, int(sb[i])))
                if sb is None and i + 1 > la:
                    key = (sign, "big")  # past the lower bound's length, no upper bound: any digits
                    t = sid(key, True)
                    edges[s][48 + d] = t
                    for e in range(10):
                        edges[t][48 + e] = t
                    continue
                n = i + 1
                acc = n >= la and (lb is None or n <= lb) and (n != la or ca2 >= 0) and (n != lb or cb2 <= 0)
                key = (sign, n, ca2, cb2)
                fresh = key not in keys
                t = sid(key, acc)
                edges[s][48 + d] = t
                if fresh:
                    todo.append((t, n, ca2, cb2))
    # Classes bottom-up (Revuz): the automaton is acyclic but for the "big" loop, and every
    # move goes to a longer prefix (or to "zero"/"big"), so a state's residual language is
    # named by its (accepting, class per symbol) signature once its targets' are known; the
    # "big" states (any digits, accepting) are class 0, as is any state of that signature
    # (accepting, every digit to class 0: any digits).  -1: dead (accepts nothing).
    n = len(order)
    syms = sorted({c for es in edges for c in es})
    cls = [-1] * n
    sigs: dict[tuple, int] = {}
    bigs = {s for s in range(n) if order[s] != "start" and order[s][1] == "big"}
    if bigs:
        for s in bigs:
            cls[s] = 0
        sigs[(True,) + tuple(0 if 48 <= c <= 57 else -1 for c in syms)] = 0

    def height(s: int) -> int:  # (the prefix's length: targets are longer; "zero" has no moves)
        key = order[s]
        if key == "start":
            return -1
        k = key[1]
        return k if type(k) is int else 0 if k == "pre" else 1 << 30
    for s in sorted((s for s in range(n) if s not in bigs), key=height, reverse=True):
        es = edges[s]
        row = tuple(cls[es[c]] if c in es else -1 for c in syms)
        if accept[s] or any(x >= 0 for x in row):
            cls[s] = sigs.setdefault((accept[s],) + row, len(sigs))
    if cls[0] < 0:
        return NOTHING
    # renumber the classes in breadth-first order from the start (state 0)
    num = {cls[0]: 0}
    queue = [0]
    out: list[tuple[tuple[int, int, int], ...]] = []
    acc_out: list[int] = []
    while queue:
        s = queue.pop(0)
        row2: list[tuple[int, int, int]] = []
        es = edges[s]
        for c in syms:
            t = es.get(c)
            if t is None or cls[t] < 0:
                continue
            bt = cls[t]
            j = num.get(bt)
            if j is None:
                j = num[bt] = len(num)
                queue.append(t)
            if row2 and row2[-1][1] == c - 1 and row2[-1][2] == j:
                row2[-1] = (row2[-1][0], c, j)
            else:
                row2.append((c, c, j))
        out.append(tuple(row2))
        if accept[s]:
            acc_out.append(len(out) - 1)
    return Dfa(tuple(out), tuple(acc_out))


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


_FREE_FRAC: Node = seq(star(_D), _D19)  # fractional digits: nonempty, ending in a non-zero digit


def _frac_digits(x: Fraction) -> str:
    """Fractional decimal digits of ``x`` (a finite decimal), without trailing zeros."""
    f = x - math.floor(x)
    out = []
    while f:
        f *= 10
        d = math.floor(f)
        out.append(str(d))
        f -= d
        if len(out) > 400:
            raise LimitError(f"number bound {float(x)!r}: its decimal expansion is longer than "
                             "400 fractional digits (or infinite)")
    return "".join(out)


def _ge_frac(lo: str, strict: bool) -> Node:
    """F (nonempty, ending non-zero) with 0.F >= 0.lo (> if strict); ``lo`` ends non-zero.
    Flat: one alternative per run of equal digits of ``lo`` (so 5e-324 stays small)."""
    alts: list[Node] = [seq(lit(lo), _FREE_FRAC)]  # longer than lo: greater
    if not strict:
        alts.append(lit(lo))
    i = 0
    while i < len(lo):
        j = i
        while j < len(lo) and lo[j] == lo[i]:
            j += 1
        c = int(lo[i])
        if c < 9:  # F = lo[:k] + (digit > c) + tail, for k in [i, j)
            alts.append(seq(lit(lo[:i]), rep(lit(lo[i]), 0, j - i - 1), _digits(c + 1, 9), opt(_FREE_FRAC)))
        i = j
    return choice(*alts)


def _le_frac(hi: str, strict: bool) -> Node:
    """F (nonempty, ending non-zero) with 0.F <= 0.hi (< if strict); ``hi`` ends non-zero."""
    alts: list[Node] = [] if strict else [lit(hi)]
    i = 0
    while i < len(hi):
        j = i
        while j < len(hi) and hi[j] == hi[i]:
            j += 1
        c = int(hi[i])
        if c > 0:  # F = hi[:k] + (digit < c) + tail, or F = hi[:k] ending in c (k in (i, j])
            reps = rep(lit(hi[i]), 0, j - i - 1)
            if c > 1:
                alts.append(seq(lit(hi[:i]), reps, _digits(1, c - 1), opt(_FREE_FRAC)))
            alts.append(seq(lit(hi[:i]), reps, lit("0"), _FREE_FRAC))
            last = j if j < len(hi) else j - 1  # hi itself is handled above
            if last > i:
                alts.append(seq(lit(hi[:i]), rep(lit(hi[i]), 1, last - i)))
        i = j
    return choice(*alts) if alts else NOTHING


def _frac(lo: str | None, lo_x: bool, hi: str | None, hi_x: bool) -> Node:
    """Fractional digit strings F (nonempty, last digit non-zero) with 0.lo <= 0.F <= 0.hi
    (strict where ``*_x``); ``None`` = no bound on that side."""
    if lo is None and hi is None:
        return _FREE_FRAC
    if hi is None:
        return _ge_frac(lo, lo_x)  # type: ignore[arg-type]
    if lo is None:
        return _le_frac(hi, hi_x)
    n = max(len(lo), len(hi))
    if lo.ljust(n, "0") > hi.ljust(n, "0") or (lo == hi and (lo_x or hi_x)):
        return NOTHING
    k = 0
    while k < len(lo) and k < len(hi) and lo[k] == hi[k]:
        k += 1
    c = hi[:k]
    if k == len(lo):  # lo is a prefix of hi: F = lo, or lo + G with 0.G <= 0.hi[k:]
        alts = [seq(lit(lo), _le_frac(hi[k:], hi_x))] if k < len(hi) else []
        if not lo_x and (k < len(hi) or not hi_x):
            alts.append(lit(lo))
        return choice(*alts) if alts else NOTHING
    a, b = int(lo[k]), int(hi[k])  # a < b (lo < hi)
    rest_lo = lo[k + 1:]
    alts = []
    if rest_lo:
        alts.append(seq(lit(c + lo[k]), _ge_frac(rest_lo, lo_x)))
    else:  # F = c + a (if allowed), or longer: greater
        alts.append(seq(lit(c + lo[k]), _FREE_FRAC))
        if not lo_x:
            alts.append(lit(c + lo[k]))
    if b - a > 1:
        alts.append(seq(lit(c), _digits(a + 1, b - 1), opt(_FREE_FRAC)))
    rest_hi = hi[k + 1:]
    if rest_hi:
        alts.append(seq(lit(c + hi[k]), _le_frac(rest_hi, hi_x)))
        alts.append(lit(c + hi[k]))  # b > 0 and hi continues: smaller than hi
    elif not hi_x:
        alts.append(lit(c + hi[k]))
    return choice(*[x for x in alts if x != NOTHING])


def _pos_fractional(lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool) -> Node:
    """Spellings ``I.F`` (F ending non-zero) of the non-integral values y > 0 within the
    bounds (``lo`` None or negative: no lower bound above 0)."""
    if lo is not None and lo < 0:
        lo, lo_x = None, False
    i_lo = 0 if lo is None else math.floor(lo)
    if hi is None:
        i_hi = None
    else:
        i_hi = math.floor(hi) - (1 if hi.denominator == 1 else 0)
    if i_hi is not None and i_hi < i_lo:
        return NOTHING
    lo_tight = lo is not None and lo.denominator != 1  # the integer part floor(lo) needs F >= lo's digits
    hi_tight = hi is not None and hi.denominator != 1
    alts: list[Node] = []
    special = set()
    if lo_tight:
        special.add(i_lo)
    if hi_tight and i_hi is not None:
        special.add(i_hi)
    for i in sorted(special):
        ld = _frac_digits(lo) if lo_tight and i == i_lo else None  # type: ignore[arg-type]
        hd = _frac_digits(hi) if hi_tight and i == i_hi else None  # type: ignore[arg-type]
        f = _frac(ld, lo_x, hd, hi_x)
        if f != NOTHING:
            alts.append(seq(lit(str(i)), lit("."), f))
    a = i_lo + 1 if lo_tight else i_lo
    b = None if i_hi is None else (i_hi - 1 if hi_tight else i_hi)
    if b is None or a <= b:
        alts.append(seq(_nonneg(a, b), lit("."), _FREE_FRAC))
    return choice(*alts) if alts else NOTHING


def _double_inside(b: Fraction, lower: bool, excl: bool) -> Fraction | None:
    """The bound that fractional spellings must meet, inclusive: the double nearest to ``b``
    on its allowed side (``>= b`` for a lower bound, ``<= b`` for an upper one, strictly
    when ``excl``), as its shortest decimal; None if no finite double is on that side.
    Validators parse ``I.F`` as a double: ``x >= d`` for the decimal of a double ``d``
    gives ``float(x) >= d`` (rounding is monotone), and ``d`` satisfies the bound."""
    try:
        f = float(b)
    except OverflowError:
        f = math.inf if b > 0 else -math.inf
    if math.isinf(f):
        if (f > 0) == lower:
            return None  # a lower bound above every double (or an upper one below)
        f = math.copysign(sys.float_info.max, f)
    fb = Fraction(f)
    if lower and (fb < b or excl and fb == b):
        f = math.nextafter(f, math.inf)
    elif not lower and (fb > b or excl and fb == b):
        f = math.nextafter(f, -math.inf)
    if math.isinf(f):
        return None
    return Fraction(repr(f))


def number_range(lo: Fraction | None, lo_x: bool, hi: Fraction | None, hi_x: bool) -> Node:
    """Bounded numbers (no exponent): exactly the canonical spellings of the values within
    the bounds (``lo``/``hi`` finite decimals; ``*_x`` = exclusive)."""
    if lo is None and hi is None:
        return NUMBER
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_x or hi_x))):
        return NOTHING
    ia, ib = _int_bounds(lo, lo_x, hi, hi_x)
    alts: list[Node] = [integer_range(ia, ib)]
    # integer spellings parse to exact integers, compared exactly with the bounds; fractional
    # ones parse to doubles: they get the nearest doubles inside the bounds, inclusive
    flo = None if lo is None else _double_inside(lo, True, lo_x)
    fhi = None if hi is None else _double_inside(hi, False, hi_x)
    if (lo is not None and flo is None) or (hi is not None and fhi is None) or \
            (flo is not None and fhi is not None and flo > fhi):
        alts = [x for x in alts if x != NOTHING]
        return choice(*alts) if alts else NOTHING
    # non-integral, positive: x = I.F
    if fhi is None or fhi > 0:
        alts.append(_pos_fractional(flo, False, fhi, False))
    # non-integral, negative: x = -(I.F), y = -x in [-hi, -lo] (bounds swap sides)
    if flo is None or flo < 0:
        ylo = -fhi if fhi is not None else None
        yhi = -flo if flo is not None else None
        neg = _pos_fractional(ylo, False, yhi, False)
        if neg != NOTHING:
            alts.append(seq(lit("-"), neg))
    alts = [x for x in alts if x != NOTHING]
    return choice(*alts) if alts else NOTHING
