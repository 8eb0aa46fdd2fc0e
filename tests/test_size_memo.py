"""Size estimates with Ref-free subtrees memoized inside rules (``size.CACHE_REF_FREE``)
are exactly the estimates without that memo: the same whole-grammar estimate and the same
per-rule estimates in the same order (so the same LimitError names the same rule), on
recursive hand-written grammars and real schemas."""

from __future__ import annotations

import json

import pytest

import decoding.ir.size as S
from decoding.errors import DecodingError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, byteset, choice, lit, rep, seq, star

from conftest import CORPORA

AZ = byteset([(97, 122)])
WORD = seq(lit('"'), rep(AZ, 1, 20), lit('"'))  # one object, shared by every rule below


def _g(start: str, **rules) -> Grammar:
    return Grammar(start, tuple(rules.items()))


SEP_V = rep(seq(lit(","), Ref("v")), 0, 2)  # shared (a Repeat: seq() would flatten a Seq): inside 'v' (where 'v' is recursive) and outside it

HAND = {
    "subtree_inside_and_outside_its_rule": _g("root", root=seq(Ref("v"), SEP_V, SEP_V),
                                              v=choice(WORD, seq(lit("["), SEP_V, lit("]")))),
    "shared_leaf": _g("root", root=seq(WORD, Ref("a"), WORD), a=choice(WORD, seq(WORD, lit(","), WORD))),
    "recursive": _g("root", root=Ref("v"), v=choice(WORD, seq(lit("["), Ref("v"), star(seq(lit(","), Ref("v"))),
                                                             lit("]")))),
    "mutual": _g("root", root=Ref("a"), a=seq(WORD, rep(Ref("b"), 0, 3)), b=choice(WORD, seq(lit("("), Ref("a"),
                                                                                          lit(")")))),
    "shared_with_ref": _g("root", root=seq(Ref("x"), Ref("y")), x=seq(WORD, Ref("y")), y=seq(WORD, Ref("x"))),
}


def _both(g: Grammar, counted: bool, monkeypatch):
    def run():
        ev = S._Inline(g, counted)
        return ev.run(), list(ev.done)
    with monkeypatch.context() as m:
        m.setattr(S, "CACHE_REF_FREE", False)
        old = run()
    return old, run()


@pytest.mark.parametrize("counted", [False, True])
@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_grammars_same_estimates(name, counted, monkeypatch):
    old, new = _both(HAND[name], counted, monkeypatch)
    assert new == old


@pytest.mark.parametrize("split", ["Kubernetes", "Snowplow", "Github_easy"])
def test_schemas_same_estimates(split, monkeypatch):
    files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
    seen = 0
    for f in files[::max(1, len(files) // 15)][:15]:
        try:
            g = compile_schema(json.loads(f.read_text(encoding="utf-8"))["schema"]).grammar
        except DecodingError:
            continue
        for counted in (False, True):
            old, new = _both(g, counted, monkeypatch)
            assert new == old, f.name
        seen += 1
    assert seen >= 10
