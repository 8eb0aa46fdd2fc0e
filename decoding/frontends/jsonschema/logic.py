"""Exact sub-languages of JSON Schemas, for intersection and complement.

The generation grammar of a schema (:mod:`decoding.frontends.jsonschema.compile`) is a
*subset* of the valid instances (declared key order, bounded free values, policies), which
is sound for intersection but not for complement.  This module builds, for a schema ``S``
and a nesting budget ``d``, a Ref-free node ``E(S, d)`` that is **exact relative to the
universe** ``U(d)``:

- ``U(d)`` (:meth:`Logic.universe`) is every JSON value nested at most ``d`` levels, with
  the compiler's whitespace, strings spelled canonically (one spelling per character),
  object members in any order, and numbers spelled as integers (``0``, ``-?[1-9][0-9]*``)
  or as decimals ``I.F`` of at most 15 digits whose last digit is not 0 (no exponent), so
  that every number spelling denotes one value and compares with double bounds as the
  validator does;
- for every string ``x`` of ``U(d)``: ``x`` is in ``E(S, d)`` iff the value ``x`` denotes
  is valid against ``S`` (``jsonschema``'s verdict); strings outside ``U(d)`` that
  ``E(S, d)`` accepts are valid too (sound).

Then ``not S`` is ``Diff(U(d), E(S, d))``, exactly-one ``oneOf`` is
``∪_i E_i ∖ ∪_{j≠i} E_j``, ``if/then/else`` is ``(E_if ∩ then) ∪ ((U ∖ E_if) ∩ else)``,
``contains`` splits each item into ``E_C`` and ``U ∖ E_C`` and counts the first kind.
Keywords that cannot be built exactly here raise :class:`SchemaError` (the caller
refuses the schema as before).  Objects with duplicate member names are outside the
guarantee (the validator sees the last value only); canonical instances never have them.

``d`` is :data:`BOOLEAN_DEPTH` where a complement is taken: values under ``not``, the
``else`` side of ``if``, the non-matching items of ``contains`` nest at most that deep
(a documented subset of the valid instances).

Where only a language to *avoid* is needed (the other branches of an overlapping
``oneOf``, the inside of a ``not``), :meth:`Logic.over` gives ``O(S, d)``, a superset
relative to ``U(d)``: every string of ``U(d)`` valid against ``S`` is in it.  It is
``E(S, d)`` with what cannot be built exactly widened: a ``format`` by the superset of
what the checker accepts (:data:`~decoding.frontends.jsonschema.formats.FORMAT_SUPERSETS`),
``oneOf`` by ``anyOf``, ``if/then/else`` by ``then | else``, ``contains`` and
``uniqueItems`` dropped, and any other subschema that raises by ``U(d)``.  Positions that
are complemented inside it (a nested ``not``) are built exactly again.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Any

from decoding.errors import SchemaError
from decoding.frontends.json_validator import exact_value, validator_class
from decoding.frontends.jsonschema.formats import format_regex, format_superset
from decoding.frontends.jsonschema.jsonstr import any_json_char, json_char, quote, string_of
from decoding.frontends.jsonschema.merge import TYPES, normalize
from decoding.frontends.jsonschema.numbers import INTEGER, integer_bounds, integer_range, number_range
from decoding.frontends.jsonschema.refs import pointer_join
from decoding.ir import (EMPTY, NOTHING, Dfa, Node, complement_ranges, Ref, Repeat, Seq, Choice, byteset, choice, diff, inter,
                         lit, opt, rep, seq, star)
from decoding.text.regex import PatternError, parse_pattern, rx_to_ir

__all__ = ["Logic", "peel_not", "BOOLEAN_DEPTH", "U_NUMBER", "multiple_of", "count_list", "not_in", "name_trie",
           "other_char", "one_char"]

#: nesting budget of values inside a complemented position (see the module docstring)
BOOLEAN_DEPTH = 2
#: most digits of a decimal spelling in the universe (doubles keep 15 digits exactly)
MAX_DEC_DIGITS = 15
#: most schemas of patternProperties split into key classes (2**n classes)
MAX_PATTERN_CLASSES = 4
#: largest remainder automaton of multipleOf (states = modulus x fraction positions)
MAX_MULTIPLE_STATES = 20_000

_D = byteset([(48, 57)])
_D19 = byteset([(49, 57)])


def _decimals() -> Node:
    alts: list[Node] = [seq(lit("0."), rep(_D, 0, MAX_DEC_DIGITS - 2), _D19)]
    for i in range(1, MAX_DEC_DIGITS):
        alts.append(seq(_D19, rep(_D, i - 1, i - 1), lit("."), rep(_D, 0, MAX_DEC_DIGITS - i - 1), _D19))
    return seq(opt(lit("-")), choice(*alts))


#: the universe's numbers: canonical integers and short decimals (see module docstring)
U_NUMBER: Node = choice(INTEGER, _decimals())

OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties", "minProperties",
             "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
             "unevaluatedProperties")
ARRAY_KW = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
            "maxContains", "unevaluatedItems", "additionalItems")
STRING_KW = ("minLength", "maxLength", "pattern", "format")
NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
APPLICATORS = ("allOf", "anyOf", "oneOf", "not", "if", "$ref")
_SEMANTIC = frozenset(OBJECT_KW + ARRAY_KW + STRING_KW + NUMBER_KW + APPLICATORS +
                      ("type", "enum", "const", "then", "else", "$dynamicRef", "$recursiveRef"))


def count_list(x: Node, y: Node, lo: int, hi: int | None, comma: Node) -> Node:
    """Comma-separated lists of items from ``x`` or ``y`` (disjoint languages) with between
    ``lo`` and ``hi`` (None: no bound) items from ``x``; the empty list when ``lo == 0``."""
    if hi is not None and hi < lo:
        return NOTHING
    ys = star(seq(comma, y))
    xs = seq(comma, x, ys)
    alts: list[Node] = []
    alts.append(seq(y, ys, rep(xs, lo, hi)))
    if hi is None or hi >= 1:
        alts.append(seq(x, ys, rep(xs, max(0, lo - 1), None if hi is None else hi - 1)))
    if lo == 0:
        alts.append(EMPTY)
    return choice(*alts)


def multiple_of(m: int | float | Fraction, integer_only: bool) -> Node:
    """The spellings (canonical integers, and decimals ending in a non-zero digit, no
    exponent) of the multiples of ``m`` in the specification's sense (the decimal value
    divided by ``m`` is an integer: :mod:`decoding.frontends.json_validator`), as a
    remainder automaton (a :class:`~decoding.ir.Dfa` leaf).  ``m`` is the number the
    schema wrote: an ``int``, a ``float`` (the decimal of its ``repr``, so ``0.01`` is
    1/100) or a decimal ``Fraction``.  With ``m = p / 10**k`` (``k`` least), a decimal is
    a multiple iff it has at most ``k`` fraction digits and its digits, read as an integer
    scaled by ``10**k``, are divisible by ``p``: the states are the remainders modulo
    ``p`` times the digit positions.  Decimals (with a fraction part) keep at most
    :data:`MAX_DEC_DIGITS` significant digits, so a validator that reads them as doubles
    gets the same decimal back (``repr``); integers may be longer (``json`` reads them
    exactly).  ``integer_only``: integers only (the multiples of ``p / gcd(p, 10**k)``).
    Raises ValueError where ``m`` is not a positive decimal or the automaton would have
    more than :data:`MAX_MULTIPLE_STATES` states.  The node depends only on the exact value
    and ``integer_only``: it is made once per process for each (at most 256 kept; errors are
    raised again, not kept), and shared, as IR nodes are immutable."""
    return _multiple_of(exact_value(m), integer_only)


@functools.lru_cache(maxsize=256)
def _multiple_of(m: Fraction, integer_only: bool) -> Node:
    if m <= 0:
        raise ValueError("multipleOf must be positive")
    p, q = m.numerator, m.denominator
    k = 0
    while q % 10 == 0 or q % 2 == 0 or q % 5 == 0:
        if q % 10 == 0:
            q //= 10
        elif q % 2 == 0:
            q, p = q // 2, p * 5
        else:
            q, p = q // 5, p * 2
        k += 1
    if q != 1:
        raise ValueError(f"{m} is not a decimal")
    if integer_only:
        p, k = p // math.gcd(p, 10 ** k), 0  # n * 10**k divisible by p
    if k == 0 and p == 1:
        return INTEGER
    too_large = ValueError(f"needs a remainder automaton of more than {MAX_MULTIPLE_STATES} states "
                           f"(limit MAX_MULTIPLE_STATES; the digits are read modulo {p})")
    if p > MAX_MULTIPLE_STATES:  # every remainder of an integer part is reachable
        raise too_large
    budget = MAX_DEC_DIGITS
    index: dict[tuple, int] = {}
    order: list[tuple] = []

    def sid(key: tuple) -> int:
        if key not in index:
            if len(order) >= MAX_MULTIPLE_STATES:
                raise too_large
            index[key] = len(order)
            order.append(key)
        return index[key]

    # ("int", r, n): integer digits read, value mod p, n of them (k > 0 only; saturates at
    # budget); ("frac", r, f, left, nz): f fraction digits, digits mod p, ``left`` more
    # significant digits allowed (``budget`` while only zeros follow "0."), last one non-zero
    sid(("start",))
    edges: list[tuple[tuple[int, int, int], ...]] = []
    accept: list[int] = []
    i = 0
    while i < len(order):
        key = order[i]
        out: list[tuple[int, int, int]] = []
        kind = key[0]
        if kind in ("start", "neg"):
            if kind == "start":
                out.append((45, 45, sid(("neg",))))
            out.append((48, 48, sid(("zero",) if kind == "start" else ("negzero",))))
            for g in range(1, 10):
                out.append((48 + g, 48 + g, sid(("int", g % p, 1 if k else 0))))
        elif kind == "negzero":  # "-0" is no spelling; "-0.5" is
            if k > 0:
                out.append((46, 46, sid(("frac", 0, 0, budget, False))))
        elif kind in ("zero", "int"):
            r = 0 if kind == "zero" else key[1]
            if r * 10 ** k % p == 0:
                accept.append(i)
            if kind == "int":
                for g in range(10):
                    out.append((48 + g, 48 + g, sid(("int", (r * 10 + g) % p, min(key[2] + 1, budget) if k else 0))))
            left = budget if kind == "zero" else budget - key[2]
            if k > 0 and left > 0:
                out.append((46, 46, sid(("frac", r, 0, left, False))))
        else:
            _, r, f, left, nz = key
            if nz and r * 10 ** (k - f) % p == 0:
                accept.append(i)
            if f < min(k, 307) and left > 0:  # 1e-307 and above: normal doubles keep 15 digits
                for g in range(10):
                    used = left < budget or g != 0  # zeros right after "0." are not significant
                    out.append((48 + g, 48 + g, sid(("frac", (r * 10 + g) % p, f + 1, left - used, g != 0))))
        edges.append(tuple(out))
        i += 1
    return Dfa(tuple(edges), tuple(sorted(accept)))


def peel_not(sub: Any, ptr: str) -> tuple[Any, str, bool]:
    """``(inner, its pointer, negated)`` of the value ``sub`` of a ``not`` at ``ptr``, with
    double negations ``{"not": {"not": X}}`` (no other semantic keyword) removed: the
    exact language of ``not not X`` relative to ``U(d)`` is ``E(X, d)`` itself, so a chain
    of ``n`` nots costs one complement at most (not ``n``)."""
    neg = True
    while isinstance(sub, dict) and "not" in sub and not (set(sub) - {"not"}) & _SEMANTIC:
        sub, ptr, neg = sub["not"], pointer_join(ptr, "not"), not neg
    return sub, ptr, neg


class Logic:
    """Exact languages ``E(S, d)`` for one compiler (its whitespace, root and refs)."""

    def __init__(self, c: Any) -> None:
        """``c``: the JSON Schema compiler (its whitespace, ``rules``, ``resolve``,
        ``number_bounds``, ``multiple``, ``list_body``... ; duck-typed: compile imports us)."""
        self.c = c
        self._u: dict[int, Node] = {}
        self._stack: list[tuple] = []
        #: building O(S, d) (see the module docstring) rather than E(S, d)
        self.widen = False

    # ------------------------------------------------------------------ the universe
    def universe(self, d: int) -> Node:
        hit = self._u.get(d)
        if hit is not None:
            return hit
        c = self.c
        alts: list[Node] = [lit("null"), lit("true"), lit("false"), U_NUMBER, string_of(star(any_json_char()))]
        if d > 0:
            v = self.universe(d - 1)
            alts.append(seq(lit("["), c.ws, opt(seq(v, star(seq(c.comma, v)))), c.ws, lit("]")))
            m = seq(string_of(star(any_json_char())), c.colon, v)
            alts.append(seq(lit("{"), c.ws, opt(seq(m, star(seq(c.comma, m)))), c.ws, lit("}")))
        node = choice(*alts)
        self._u[d] = node
        return node

    def kind_universe(self, kind: str, d: int) -> Node:
        c = self.c
        if kind == "null":
            return lit("null")
        if kind == "boolean":
            return choice(lit("true"), lit("false"))
        if kind == "integer":
            return INTEGER
        if kind == "number":
            return U_NUMBER
        if kind == "string":
            return string_of(star(any_json_char()))
        if d <= 0:
            return NOTHING
        v = self.universe(d - 1)
        if kind == "array":
            return seq(lit("["), c.ws, opt(seq(v, star(seq(c.comma, v)))), c.ws, lit("]"))
        m = seq(string_of(star(any_json_char())), c.colon, v)
        return seq(lit("{"), c.ws, opt(seq(m, star(seq(c.comma, m)))), c.ws, lit("}"))

    # ------------------------------------------------------------------ inlining
    def inline(self, node: Node, d: int) -> Node:
        """``node`` with every Ref replaced by its rule body (free-value rules by the
        universe of at most ``d`` levels; a rule inside itself by nothing): a Ref-free
        subset of ``node``'s language."""
        memo: dict[str, Node] = {}
        seen: dict[int, Node] = {}
        active: set[str] = set()
        rules = self.c.rules

        def go(n: Node) -> Node:
            hit = seen.get(id(n))
            if hit is not None:
                return hit
            out = _go(n)
            if not active:  # a result cut at an active rule depends on the path: not shared
                seen[id(n)] = out
            return out

        def _go(n: Node) -> Node:
            if isinstance(n, Ref):
                name = n.name
                if name.startswith("free:"):
                    return self.universe_free(min(int(name.split(":")[1]), d))
                if name in memo:
                    return memo[name]
                if name in active:
                    return NOTHING
                active.add(name)
                try:
                    out = go(rules[name])
                finally:
                    active.discard(name)
                memo[name] = out
                return out
            if isinstance(n, (Seq, Choice)):
                items = [go(x) for x in n.items]
                return seq(*items) if isinstance(n, Seq) else choice(*items)
            if isinstance(n, Repeat):
                return Repeat(go(n.item), n.min, n.max)
            return n

        return go(node)

    def universe_free(self, d: int) -> Node:
        """Like :meth:`universe` but with the generation grammar's numbers (any JSON
        number): the inlined form of the compiler's free values (a subset of them)."""
        return self.universe(d)

    # ------------------------------------------------------------------ exact languages
    def over(self, s: Any, ptr: str, d: int) -> Node:
        """``O(s, d)``: a superset of the valid strings of ``U(d)`` (module docstring).
        Ref-free; never raises SchemaError for what it cannot build (it widens)."""
        return self._with_widen(True, s, ptr, d)

    def _exactly(self, s: Any, ptr: str, d: int) -> Node:
        """``E(s, d)`` even inside :meth:`over` (a complemented position)."""
        return self._with_widen(False, s, ptr, d)

    def _with_widen(self, widen: bool, s: Any, ptr: str, d: int) -> Node:
        saved, self.widen = self.widen, widen
        try:
            return self.exact(s, ptr, d)
        finally:
            self.widen = saved

    def exact(self, s: Any, ptr: str, d: int) -> Node:
        """``E(s, d)``: see the module docstring (``O(s, d)`` inside :meth:`over`).  Ref-free."""
        if not self.widen:
            return self._exact_top(s, ptr, d)
        try:
            return self._exact_top(s, ptr, d)
        except SchemaError:
            if s is not True and not isinstance(s, (bool, dict)):
                raise  # not a schema at all
            return self.universe(d)  # widened: every value

    def _exact_top(self, s: Any, ptr: str, d: int) -> Node:
        if s is True:
            return self.universe(d)
        if s is False or d < 0:
            return NOTHING
        if not isinstance(s, dict):
            raise SchemaError(ptr, None, f"a schema must be an object or a boolean, got {type(s).__name__}")
        c = self.c
        s = c.ref_only(s)
        if "$id" in s or "id" in s:  # a new base URI first, then the references in it
            with c.subschema(s):
                return self._exact_ref({k: v for k, v in s.items() if k not in ("$id", "id")}, ptr, d)
        return self._exact_ref(s, ptr, d)

    def _exact_ref(self, s: dict, ptr: str, d: int) -> Node:
        c = self.c
        rkw = "$ref" if "$ref" in s else "$dynamicRef" if "$dynamicRef" in s else None
        if rkw is None:
            return self._exact(s, ptr, d)
        tptr, target = c.resolve(s[rkw], pointer_join(ptr, rkw))
        key = (c.ref_key(target), d)
        if key in self._stack:
            raise SchemaError(ptr, rkw, "a recursive reference inside not/if/oneOf/contains "
                              "that does not descend into a value cannot be complemented")
        self._stack.append(key)
        try:
            with c.scope_of(target):
                ref_lang = self.exact(target, tptr, d)
        finally:
            self._stack.pop()
        rest = {k: v for k, v in s.items() if k != rkw}
        return inter(ref_lang, self._exact_ref(rest, ptr, d)) if set(rest) & _SEMANTIC else ref_lang

    def _exact(self, s: dict, ptr: str, d: int) -> Node:
        c = self.c
        for k in ("$recursiveRef", "unevaluatedProperties", "unevaluatedItems",
                  "dependentSchemas"):
            if k in s and not (k.startswith("uneval") and s[k] in (True, {})):
                if not self.widen:
                    raise SchemaError(ptr, k, f"'{k}' inside not/if/oneOf/contains is not supported")
                s = {x: v for x, v in s.items() if x != k}  # widened: dropped
        s = normalize(s)
        parts: list[Node] = []
        if "allOf" in s:
            for i, p in enumerate(s["allOf"]):
                parts.append(self.exact(p, pointer_join(ptr, "allOf", i), d))
        if "anyOf" in s:
            parts.append(choice(*[self.exact(p, pointer_join(ptr, "anyOf", i), d)
                                  for i, p in enumerate(s["anyOf"])]))
        if "oneOf" in s:
            es = [self.exact(p, pointer_join(ptr, "oneOf", i), d) for i, p in enumerate(s["oneOf"])]
            parts.append(choice(*es) if self.widen else self.exactly_one(es))
        if "not" in s:
            inner, p, neg = peel_not(s["not"], pointer_join(ptr, "not"))
            e = self._exactly(inner, p, d) if neg else self.exact(inner, p, d)
            parts.append(diff(self.universe(d), e) if neg else e)
        if "if" in s and ("then" in s or "else" in s) and self.widen:
            parts.append(choice(self.exact(s.get("then", True), pointer_join(ptr, "then"), d),
                                self.exact(s.get("else", True), pointer_join(ptr, "else"), d)))
        elif "if" in s and ("then" in s or "else" in s):
            ei = self.exact(s["if"], pointer_join(ptr, "if"), d)
            th = self.exact(s.get("then", True), pointer_join(ptr, "then"), d)
            el = self.exact(s.get("else", True), pointer_join(ptr, "else"), d)
            parts.append(choice(inter(ei, th), inter(diff(self.universe(d), ei), el)))
        parts.append(self.base(s, ptr, d))
        if any(p == NOTHING for p in parts):
            return NOTHING
        return inter(*parts)

    def exactly_one(self, es: list[Node]) -> Node:
        alts = []
        for i, e in enumerate(es):
            others = [x for j, x in enumerate(es) if j != i and x != NOTHING]
            alts.append(diff(e, choice(*others)) if others else e)
        alts = [a for a in alts if a != NOTHING]
        return choice(*alts) if alts else NOTHING

    def base(self, s: dict, ptr: str, d: int) -> Node:
        t = s.get("type")
        kinds = set(TYPES) if t is None else ({t} if isinstance(t, str) else set(t))
        if not kinds <= set(TYPES):
            raise SchemaError(ptr, "type", f"unknown type {t!r}")
        if "number" in kinds:
            kinds.discard("integer")
        if "const" in s or "enum" in s:
            return self.values(s, ptr, d, kinds)
        alts: list[Node] = []
        for kind in ("null", "boolean", "string", "integer", "number", "array", "object"):
            if kind in kinds:
                alts.append(self.kind(kind, s, ptr, d))
        alts = [a for a in alts if a != NOTHING]
        return choice(*alts) if alts else NOTHING

    def values(self, s: dict, ptr: str, d: int, kinds: set[str]) -> Node:
        import jsonschema
        vals = [s["const"]] if "const" in s else s["enum"]
        if not isinstance(vals, list):
            raise SchemaError(ptr, "enum", "must be an array")
        rest = {k: v for k, v in s.items() if k not in ("enum", "const") and k in _SEMANTIC}
        if "$ref" in str(rest):
            if not self.widen:
                raise SchemaError(ptr, "enum", "enum/const with references next to it is not supported here")
            rest = {}  # widened: every listed value
        v = validator_class(cls=jsonschema.Draft202012Validator)(rest, format_checker=self.c.format_checker())
        alts = []
        for x in vals:
            if v.is_valid(x) and ("const" not in s or "enum" not in s or x in s["enum"]):
                alts.append(self.value(x, ptr, d))
        return choice(*alts) if alts else NOTHING

    def value(self, x: Any, ptr: str, d: int) -> Node:
        """Every spelling in U(d) of the JSON value ``x``."""
        c = self.c
        if x is None or isinstance(x, bool):
            return lit("null" if x is None else "true" if x else "false")
        if isinstance(x, (int, float)):
            f = Fraction(x)
            return number_range(f, False, f, False)
        if isinstance(x, str):
            return lit(quote(x))
        if d <= 0:
            return NOTHING
        if isinstance(x, list):
            if not x:
                return seq(lit("["), c.ws, c.ws, lit("]"))
            items = [self.value(v, ptr, d - 1) for v in x]
            body = [items[0]]
            for it in items[1:]:
                body += [c.comma, it]
            return seq(lit("["), c.ws, *body, c.ws, lit("]"))
        if isinstance(x, dict):
            if len(x) > 1:
                raise SchemaError(ptr, "enum", "an enum/const object with several members cannot be "
                                  "matched in every member order here")
            if not x:
                return seq(lit("{"), c.ws, c.ws, lit("}"))
            (k, v), = x.items()
            return seq(lit("{"), c.ws, lit(quote(k)), c.colon, self.value(v, ptr, d - 1), c.ws, lit("}"))
        raise SchemaError(ptr, "enum", f"not a JSON value: {x!r}")

    def kind(self, kind: str, s: dict, ptr: str, d: int) -> Node:
        if kind in ("null", "boolean"):
            return self.kind_universe(kind, d)
        if kind == "string":
            return self.string(s, ptr)
        if kind in ("integer", "number"):
            return self.number(s, ptr, kind == "integer")
        if kind == "array":
            return self.array(s, ptr, d)
        return self.obj(s, ptr, d)

    def string(self, s: dict, ptr: str) -> Node:
        c = self.c
        parts: list[Node] = [string_of(rep(any_json_char(), int(s.get("minLength", 0)),
                                           None if s.get("maxLength") is None else int(s["maxLength"])))]
        if "pattern" in s:
            try:
                parts.append(string_of(rx_to_ir(parse_pattern(s["pattern"]), json_char)))
            except (PatternError, re.error) as e:
                raise SchemaError(ptr, "pattern", str(e)) from None
        fmt = s.get("format")
        if isinstance(fmt, str) and c.format_asserts() and self.widen:
            # a format the installed checker does not check is valid for every string
            checked = fmt in getattr(c.format_checker(), "checkers", ())
            sup = format_superset(fmt) if checked else None  # None: every string may be valid
            if sup is not None:
                parts.append(string_of(rx_to_ir(parse_pattern(sup, anchored=True), json_char)))
        elif isinstance(fmt, str) and c.format_asserts():
            src = format_regex(fmt)
            if src is None or not c.format_exact(fmt):
                raise SchemaError(ptr, "format", f"format {fmt!r} cannot be complemented exactly")
            parts.append(string_of(rx_to_ir(parse_pattern(src, anchored=True), json_char)))
        return inter(*parts)

    def number(self, s: dict, ptr: str, integer: bool) -> Node:
        lo, lo_x, hi, hi_x = self.c.number_bounds(s, ptr)
        parts: list[Node] = []
        if integer:
            a, b = integer_bounds(lo, lo_x, hi, hi_x)
            if a is not None and b is not None and a > b:
                return NOTHING
            parts.append(integer_range(a, b) if a is not None or b is not None else INTEGER)
        else:
            parts.append(U_NUMBER if lo is None and hi is None else inter(number_range(lo, lo_x, hi, hi_x), U_NUMBER))
        mo = s.get("multipleOf")
        if mo is not None:
            parts.append(self.c.multiple(mo, ptr, integer, exact=True))
        return inter(*parts)

    def array(self, s: dict, ptr: str, d: int) -> Node:
        c = self.c
        if d <= 0:
            return NOTHING
        if s.get("uniqueItems") is True and not (isinstance(s.get("maxItems"), int) and s["maxItems"] <= 1) \
                and not self.widen:  # widened: dropped
            raise SchemaError(ptr, "uniqueItems", "uniqueItems inside not/if/oneOf/contains is not supported")
        prefix = s.get("prefixItems", [])
        elems = [self.exact(p, pointer_join(ptr, "prefixItems", i), d - 1) for i, p in enumerate(prefix)]
        tail = self.exact(s.get("items", True), pointer_join(ptr, "items"), d - 1)
        mn = int(s.get("minItems", 0))
        mx = None if s.get("maxItems") is None else int(s["maxItems"])
        parts = [seq(lit("["), c.ws, c.list_body(elems, tail, mn, mx), c.ws, lit("]"))]
        if "contains" in s and not self.widen:  # widened: dropped
            parts.append(self.contains(s, ptr, d))
        return inter(*parts)

    def contains(self, s: dict, ptr: str, d: int) -> Node:
        """Arrays (items in U(d-1)) with between minContains and maxContains items valid
        against ``contains`` (exact relative to U(d))."""
        c = self.c
        lo, hi = c.contains_bounds(s, ptr)
        x = self.exact(s["contains"], pointer_join(ptr, "contains"), d - 1)
        y = diff(self.universe(d - 1), x)
        return seq(lit("["), c.ws, count_list(x, y, lo, hi, c.comma), c.ws, lit("]"))

    def obj(self, s: dict, ptr: str, d: int) -> Node:
        """Objects in any member order (exact relative to U(d)): every member's value is
        valid against the schemas its name selects, required names are present, the
        member count is within bounds, names are valid against propertyNames."""
        c = self.c
        if d <= 0:
            return NOTHING
        if not any(k in s for k in OBJECT_KW):
            return self.kind_universe("object", d)
        props = s.get("properties", {}) or {}
        pp = s.get("patternProperties", {}) or {}
        addl = s.get("additionalProperties", True)
        required = list(s.get("required", []) or [])
        deps = c._dep_required(s, ptr)
        if len(pp) > MAX_PATTERN_CLASSES:
            raise SchemaError(ptr, "patternProperties", f"more than {MAX_PATTERN_CLASSES} patterns "
                              "inside not/if/oneOf/contains")
        anystr = star(any_json_char())
        names = list(props)
        try:
            rxs = {p: rx_to_ir(parse_pattern(p), json_char) for p in pp}
        except (PatternError, re.error) as e:
            raise SchemaError(ptr, "patternProperties", str(e)) from None
        pn = s.get("propertyNames")
        pn_lang = None if pn is None else self.exact(pn, pointer_join(ptr, "propertyNames"), 0)
        members: list[Node] = []
        for k in names:
            vs = [self.exact(props[k], pointer_join(ptr, "properties", k), d - 1)]
            vs += [self.exact(v, pointer_join(ptr, "patternProperties", p), d - 1)
                   for p, v in pp.items() if re.search(p, k)]
            key = lit(quote(k))
            if pn_lang is not None:
                key = inter(key, pn_lang)
            members.append(seq(key, c.colon, inter(*vs)))
        # undeclared names: split by which patterns they match
        undeclared = c.not_in(names)  # (with its shared parts' estimates, see _Compiler.not_in)
        plist = list(pp)
        for mask in range(1 << len(plist)):
            vs: list[Node] = [self.exact(pp[p], pointer_join(ptr, "patternProperties", p), d - 1)
                              for i, p in enumerate(plist) if mask >> i & 1]
            pos = [undeclared] + [rxs[p] for i, p in enumerate(plist) if mask >> i & 1]
            neg = [rxs[p] for i, p in enumerate(plist) if not mask >> i & 1]
            keys = inter(*pos)
            if neg:
                keys = diff(keys, choice(*neg))
            if not vs:
                vs = [self.exact(addl, pointer_join(ptr, "additionalProperties"), d - 1)]
            key = string_of(keys)
            if pn_lang is not None:
                key = inter(key, pn_lang)
            members.append(seq(key, c.colon, inter(*vs)))
        members = [m for m in members if m != NOTHING]
        mall = choice(*members) if members else NOTHING
        anym = seq(string_of(anystr), c.colon, self.universe(d - 1))
        lo = int(s.get("minProperties", 0))
        hi = None if s.get("maxProperties") is None else int(s["maxProperties"])
        body = c.list_body([], mall, lo, hi) if mall != NOTHING else (EMPTY if lo == 0 else NOTHING)
        parts = [seq(lit("{"), c.ws, body, c.ws, lit("}"))]
        for r in required:
            mr = seq(lit(quote(r)), c.colon, self.universe(d - 1))
            parts.append(seq(lit("{"), c.ws, star(seq(anym, c.comma)), mr, star(seq(c.comma, anym)), c.ws, lit("}")))
        for t, ds in deps.items():
            # t absent, or every name of ds present
            mt = seq(lit(quote(t)), c.colon, self.universe(d - 1))
            has_t = seq(lit("{"), c.ws, star(seq(anym, c.comma)), mt, star(seq(c.comma, anym)), c.ws, lit("}"))
            need = [seq(lit("{"), c.ws, star(seq(anym, c.comma)), seq(lit(quote(x)), c.colon, self.universe(d - 1)),
                        star(seq(c.comma, anym)), c.ws, lit("}")) for x in ds]
            anyobj = self.kind_universe("object", d)
            parts.append(choice(diff(anyobj, has_t), inter(anyobj, *need) if need else anyobj))
        return inter(*parts)


#: per process (at most NOT_IN_MEMO each): the JSON character node of one character, and of
#: every character but some (keyed by them, in trie order) followed by any string content;
#: pure functions of their keys, made from immutable nodes (see :func:`not_in`)
_ONE_CHAR: dict[str, Node] = {}
_OTHER_CHAR: dict[str, Node] = {}
_ANY_CONTENT: list[Node] = []
NOT_IN_MEMO = 4096


def name_trie(names: list[str]) -> dict:
    """The trie of ``names`` by character: ``{char: subtrie}``, ``""`` marking a name's end."""
    trie: dict = {}
    for n in names:
        t = trie
        for ch in n:
            t = t.setdefault(ch, {})
        t[""] = {}
    return trie


def any_content() -> Node:
    """Any JSON string content (one node per process)."""
    if not _ANY_CONTENT:
        _ANY_CONTENT.append(star(any_json_char()))
    return _ANY_CONTENT[0]


def other_char(kids: str) -> Node:
    """A JSON character that is none of ``kids``, then any content (memoized per process)."""
    other = _OTHER_CHAR.get(kids)
    if other is None:
        comp = complement_ranges((ord(c), ord(c)) for c in kids)
        other = seq(json_char(comp), any_content())
        if len(_OTHER_CHAR) < NOT_IN_MEMO:
            _OTHER_CHAR[kids] = other
    return other


def one_char(c: str) -> Node:
    """The JSON character ``c`` (memoized per process)."""
    one = _ONE_CHAR.get(c)
    if one is None:
        one = json_char([(ord(c), ord(c))])
        if len(_ONE_CHAR) < NOT_IN_MEMO:
            _ONE_CHAR[c] = one
    return one


def not_in(names: list[str], shared: dict[int, Node] | None = None) -> Node:
    """Content of a JSON string whose decoded value is not one of ``names``: at each node of
    their trie (:func:`name_trie`), the end (unless a name ends there), a character that
    continues no name (:func:`other_char`), or one that continues some (:func:`one_char`)
    and the rest.  ``shared`` (by id) receives the per-process nodes (see
    :data:`NOT_IN_MEMO`) the result is made of, the same objects for every compile: what is
    learnt of them may be kept."""
    if not names:
        return star(any_json_char())
    trie = name_trie(names)

    def build(t: dict) -> Node:
        alts: list[Node] = []
        if "" not in t:
            alts.append(EMPTY)
        kids = "".join(c for c in t if c)  # (each key but "" is one character)
        other = other_char(kids)
        alts.append(other)
        if shared is not None:
            shared[id(other)] = other
        for c in kids:
            one = one_char(c)
            if shared is not None:
                shared[id(one)] = one
            alts.append(seq(one, build(t[c])))
        return choice(*alts)

    return build(trie)
