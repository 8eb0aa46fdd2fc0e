"""``_Inline``'s own fold (``size.INLINE_FAST``, issue 14) is exactly the generic ``_fold``
with callbacks: the same whole-grammar estimate (every field, ``cut`` included), the same
per-rule estimates in the same completion order (so check_size names the same rule), the
same recursion counts and the same memo; with and without a front-end's attached
estimates (the seed), counted or not, on hand-written recursive grammars, GBNF and real
schemas."""

from __future__ import annotations

import json
from dataclasses import astuple, replace

import pytest

import decoding.ir.size as S
from decoding.errors import DecodingError
from decoding.frontends.gbnf.parse import parse_gbnf
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, Special, byteset, choice, diff, lit, rep, seq, star
from decoding.ir.nodes import Inter
from decoding.limits import DEFAULT_LIMITS

from conftest import CORPORA, HAND_SCHEMAS

AZ = byteset([(97, 122)])
WORD = seq(lit('"'), rep(AZ, 1, 20), lit('"'))
SEP_V = rep(seq(lit(","), Ref("v")), 0, 2)
N_A = rep(seq(lit("n"), Ref("a")), 0, 2)  # (a Repeat: seq() would flatten a Seq) memoized outside every rule, then met inside one (a Ref below it)


def _g(start: str, **rules) -> Grammar:
    return Grammar(start, tuple(rules.items()))


HAND = {
    "inside_and_outside": _g("root", root=seq(Ref("v"), SEP_V, SEP_V), v=choice(WORD, seq(lit("["), SEP_V, lit("]")))),
    "recursive": _g("root", root=Ref("v"), v=choice(WORD, seq(lit("["), Ref("v"), star(seq(lit(","), Ref("v"))),
                                                             lit("]")))),
    "mutual": _g("root", root=Ref("a"), a=seq(WORD, rep(Ref("b"), 0, 3)), b=choice(WORD, seq(lit("("), Ref("a"),
                                                                                          lit(")")))),
    "both_ways": _g("root", root=seq(Ref("x"), Ref("y")), x=seq(WORD, Ref("y")), y=seq(WORD, Ref("x"))),
    "ref_to_ref": _g("root", root=Ref("a"), a=Ref("b"), b=seq(WORD, rep(AZ, 200, 400))),
    "logic": _g("root", root=seq(Ref("a"), Inter((star(AZ), rep(AZ, 2, 5))), diff(star(AZ), lit("ab")),
                                 Special("<|x|>")), a=choice(lit(""), seq())),
    "memo_hit_with_ref": _g("root", root=seq(N_A, Ref("r")), a=lit("x"), r=choice(N_A, lit("y"))),
    "counted": _g("root", root=rep(seq(WORD, Ref("a")), 0, 500), a=rep(AZ, 0, 300)),
}
GBNF = ['root ::= "(" root? "," root? ")"', 'root ::= "{" (root | "a") (root | "b") (root | "c") "}"',
        'root ::= a b\na ::= "x" b?\nb ::= [a-z]{2,300} | "(" a ")"']


def _run(g: Grammar, counted: bool, seed, fast: bool, monkeypatch) -> tuple:
    with monkeypatch.context() as m:
        m.setattr(S, "INLINE_FAST", fast)
        ev = S._Inline(g, counted, seed)
        est = ev.run()
    return (astuple(est), [(n, astuple(e)) for n, e in ev.done], dict(ev.recursive),
            {i: astuple(e) for i, e in ev.memo.items()}, {n: astuple(e) for n, e in ev.rule.items()})


def _same(g: Grammar, monkeypatch, seeds=(None,)) -> None:
    for counted in (False, True):
        for seed in seeds:
            assert _run(g, counted, seed, True, monkeypatch) == _run(g, counted, seed, False, monkeypatch)


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_grammars(name, monkeypatch):
    _same(HAND[name], monkeypatch)


@pytest.mark.parametrize("text", GBNF)
@pytest.mark.parametrize("depth", [1, 3])
def test_gbnf(text, depth, monkeypatch):
    _same(replace(parse_gbnf(text), max_depth=depth), monkeypatch)


def _schemas() -> list[object]:
    out: list[object] = list(HAND_SCHEMAS.values())
    for split in ("Kubernetes", "Snowplow", "Github_easy", "Glaiveai2K"):
        files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
        out += [json.loads(f.read_text(encoding="utf-8"))["schema"] for f in files[::max(1, len(files) // 12)][:12]]
    return out


def test_schemas_with_and_without_the_front_end_estimates(monkeypatch):
    seen = 0
    for s in _schemas():
        try:
            g = compile_schema(s).grammar
        except DecodingError:
            continue
        seeds = [None] + [S._attached(g, c, True) for c in (False, True)]
        _same(g, monkeypatch, seeds)
        seen += 1
    assert seen >= 40


def test_check_size_same_error(monkeypatch):
    """The first rule over a limit (in completion order) is the one named."""
    g = _g("root", root=seq(Ref("a"), Ref("b")), a=rep(WORD, 0, 40), b=rep(seq(WORD, Ref("a")), 0, 40))
    lim = replace(DEFAULT_LIMITS, max_nfa_states=500)
    msgs = []
    for fast in (True, False):
        monkeypatch.setattr(S, "INLINE_FAST", fast)
        with pytest.raises(DecodingError) as e:
            S.check_size(g, lim)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "rule 'a'" in msgs[0]
