"""``size._choice`` (plain loops) gives the estimate of the earlier formula (comprehensions
over the branches) on every Choice of a corpus sample, with and without Refs inlined
(issue 14: the choice's head test was a third of the estimates' time)."""

from __future__ import annotations

import dataclasses

import pytest

import decoding.ir.size as S
from decoding.errors import GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar
from decoding.ir.nodes import Choice, Ref, lit, seq, choice, byteset, rep, walk

from conftest import HAND_SCHEMAS, bench_schemas

SCHEMAS = {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **bench_schemas(12, offset=5)}


def _lead_reference(n) -> bytes:
    if isinstance(n, S.Lit):
        return n.data
    if isinstance(n, S.Seq):
        out = b""
        for x in n.items:
            if not isinstance(x, S.Lit):
                break
            out += x.data
        return out
    return b""


def _choice_reference(n: Choice, kids: list) -> tuple:
    """The choice estimate as it was computed before the loops (the same fields, in order)."""
    states = 2 + sum(e.states + 1 for e in kids)
    lo = min(e.lo for e in kids)
    his = [e.hi for e in kids]
    hi = None if None in his else max([0, *his])
    work = sum(e.work for e in kids)
    amb = any(e.amb for e in kids)
    first = dup = 0
    for e in kids:
        dup |= first & e.first
        first |= e.first
    heads_differ = True
    if dup:
        alike = [(x, e) for x, e in zip(n.items, kids) if e.first & dup]
        heads_differ = False
        if all(e.first != S._ALL and e.lo > 0 for _, e in alike):
            leads = sorted(_lead_reference(x) for x, _ in alike)
            heads_differ = all(leads) and not any(b.startswith(a) for a, b in zip(leads, leads[1:]))
            if not heads_differ and not (S.SET_STRINGS_SHORTCUT and any(
                    e.hi is None or e.hi > S.SET_STRING_LEN_MAX or e.refs for _, e in alike)):
                heads_differ = S._set_strings_differ([x for x, _ in alike])
            amb = amb or not heads_differ
    pf = all(e.pf for e in kids)
    if pf and len(kids) > 1:
        pf = heads_differ and all(e.lo > 0 and e.first != S._ALL for e in kids)
    return (states, lo, hi, work, amb, first, any(e.refs for e in kids), pf, any(e.cut for e in kids))


def _check_choices(g: Grammar, memo: dict) -> int:
    """Compare every Choice of ``g`` whose branches ``memo`` estimated; the count compared."""
    n_checked = 0
    for _, body in g.rules:
        for n in walk(body):
            if n.__class__ is Choice and n.items:
                kids = [S._ONE if isinstance(x, Ref) else memo.get(id(x)) for x in n.items]
                if any(k is None for k in kids):
                    continue
                assert dataclasses.astuple(S._choice(n, kids)) == _choice_reference(n, kids), n
                n_checked += 1
    return n_checked


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_choice_as_before(name: str) -> None:
    try:
        g = compile_schema(SCHEMAS[name]).grammar
    except GrammarError as e:  # a refusal (documented, with its reason) leaves no grammar to check
        assert str(e)
        return
    for counted in (False, True):
        memo: dict = {}
        keep: list = []
        for _, body in g.rules:
            S._node_fold(body, counted, memo, keep)
        _check_choices(g, memo)


def test_choice_heads() -> None:
    """Heads that tell branches apart, one a prefix of another, an empty head, set strings."""
    az = byteset([(97, 122)])
    cases = [
        choice(lit("ab"), lit("ac"), lit("b")),          # distinct heads: a prefix code
        choice(lit("ab"), lit("abc")),                   # one head a prefix of the other
        choice(seq(lit("a"), az), lit("ab")),            # a head shorter than the other's
        choice(az, lit("xy")),                           # set strings: ambiguous
        choice(seq(lit("x"), rep(az, 0, 3)), lit("xy")),
        choice(seq(byteset([(97, 98)]), lit("c")), seq(byteset([(99, 100)]), lit("c")), lit("ab")),
        choice(seq(), lit("a"), lit("a")),
        choice(Ref("r"), lit("a")),
    ]
    for n in cases:
        memo: dict = {}
        S._node_fold(n, False, memo, [])
        kids = [S._ONE if isinstance(x, Ref) else memo[id(x)] for x in n.items]
        assert dataclasses.astuple(S._choice(n, kids)) == _choice_reference(n, kids), n
