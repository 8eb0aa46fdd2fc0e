"""Replayed NFA fragments (``automaton._NFA._replayed``): a repeated item or a rule that
cannot reach a recursive rule is built once and copied with shifted state numbers for
its other uses.  The arrays must be exactly those of building it again (states, edges and
their order, end state), and the limits (max_nfa_states, max_nesting) must stop the build
at the same point with the same error."""

from __future__ import annotations

import json

import numpy as np
import pytest

import decoding.backends.automaton as A
from decoding.errors import DecodingError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Choice, Grammar, Ref, Seq, Special, byteset, choice, lit, rep, seq
from decoding.limits import DEFAULT_LIMITS

from conftest import CORPORA
from test_nfa_arrays import GRAMMARS, _multi

D = byteset([(48, 57)])
AZ = byteset([(97, 122)])
BIG = seq(lit('{"name":"'), rep(AZ, 1, 12), lit('","n":'), rep(D, 1, 5), lit("}"))  # > _FRAG_MIN states


def _arrays(g: Grammar, max_states: int = DEFAULT_LIMITS.max_nfa_states, **kw):
    specials = tuple(g.specials())
    nfa = A._NFA(g, {t: i for i, t in enumerate(specials)}, max_states, **kw)
    start = nfa.new()
    end = nfa.build_start(start)
    cols = ("eps_src", "eps_tgt", "e_src", "e_lo", "e_hi", "e_tgt", "sp_src", "sp_k", "sp_tgt")
    replays = sum(1 for f in nfa.frags.values() if f is not None)
    return (nfa.n, end, tuple(bytes(getattr(nfa, c)) for c in cols)), replays


def _outcome(g: Grammar, **kw):
    try:
        return _arrays(g, **kw)[0]
    except DecodingError as e:
        return type(e), str(e)


def _both(g: Grammar, monkeypatch, **kw):
    with monkeypatch.context() as m:
        m.setattr(A, "_FRAG_MIN", 10 ** 9)  # never replayed: every use built
        plain = _outcome(g, **kw)
    return plain, _outcome(g, **kw)


REPLAYED = {
    "repeated_item": Grammar.single(rep(BIG, 2, 6)),
    "list_item": Grammar.single(seq(BIG, rep(seq(lit(","), BIG), 0, 3))),
    "safe_rule_used_often": _multi("root", root=seq(Ref("obj"), lit(","), Ref("obj"), rep(Ref("obj"), 0, 3)),
                                   obj=seq(BIG, Ref("leaf")), leaf=choice(lit("x" * 30), rep(D, 2, 30))),
    "specials_inside": Grammar.single(rep(seq(Special("<s>"), BIG, Special("</s>")), 1, 4)),
    "empty_language_item": Grammar.single(choice(rep(Seq((BIG, Choice(()))), 0, 4), lit("ok"))),
    "recursive_next_to_safe": _multi("root", root=seq(Ref("tree"), Ref("obj"), Ref("obj")),
                                     tree=choice(lit("()"), seq(lit("("), Ref("tree"), Ref("obj"), lit(")"))),
                                     obj=rep(BIG, 1, 2)),
    "safe_rule_calls_recursive": _multi("root", root=rep(Ref("wrap"), 1, 3), wrap=seq(BIG, Ref("rec")),
                                        rec=choice(lit("z"), seq(lit("["), Ref("rec"), lit("]")))),
}


@pytest.mark.parametrize("name", sorted(GRAMMARS) + sorted(REPLAYED))
def test_replay_gives_the_same_arrays(name, monkeypatch):
    g = REPLAYED.get(name) or GRAMMARS[name]
    plain, replayed = _both(g, monkeypatch)
    assert replayed == plain


@pytest.mark.parametrize("name", sorted(set(REPLAYED) - {"safe_rule_calls_recursive"}))
def test_fragments_are_recorded(name):
    assert _arrays(REPLAYED[name])[1] >= 1


def test_recursive_rules_are_not_replayed():
    g = REPLAYED["safe_rule_calls_recursive"]
    nfa = A._NFA(g, {}, DEFAULT_LIMITS.max_nfa_states)
    nfa.build_start(nfa.new())
    assert ("ref", "rec") not in nfa.frags and ("ref", "wrap") not in nfa.frags
    assert A._acyclic_rules(g) == frozenset()  # every rule reaches 'rec', which is recursive
    assert A._acyclic_rules(REPLAYED["safe_rule_used_often"]) == {"root", "obj", "leaf"}


@pytest.mark.parametrize("max_states", [40, 100, 333, 1000])
def test_state_limit_stops_at_the_same_point(max_states, monkeypatch):
    plain, replayed = _both(REPLAYED["safe_rule_used_often"], monkeypatch, max_states=max_states)
    assert replayed == plain
    if max_states < 1000:
        assert plain[0] is LimitError


def test_max_nesting_is_enforced_where_a_fragment_is_replayed_deeper(monkeypatch):
    """A rule recorded at nesting 2 and used again at nesting 5 with max_nesting 5: its own
    two levels of rules cross the limit there, so the replay must refuse as the build does."""
    rules = {"root": seq(Ref("deep"), Ref("b")), "b": seq(Ref("c"), BIG), "c": seq(BIG, Ref("d")), "d": lit("x" * 30),
             "deep": seq(Ref("l1")), "l1": Ref("l2"), "l2": Ref("l3"), "l3": Ref("b")}
    g = _multi("root", **rules)
    for nest in (3, 4, 5, 6, 50):
        plain, replayed = _both(g, monkeypatch, max_nesting=nest)
        assert replayed == plain, nest
    assert _outcome(g, max_nesting=4)[0] is LimitError


def test_schemas_give_the_same_arrays(monkeypatch):
    """Real schemas (Kubernetes and Glaiveai2K, evenly spaced): the DFA back-end's NFAs."""
    seen = 0
    for split, k in (("Kubernetes", 12), ("Glaiveai2K", 12)):
        files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
        for f in files[::max(1, len(files) // k)][:k]:
            try:
                g = compile_schema(json.loads(f.read_text(encoding="utf-8"))["schema"]).grammar
            except DecodingError:
                continue
            plain, replayed = _both(g, monkeypatch, max_states=400_000)
            assert replayed == plain, f.name
            seen += 1
    assert seen >= 18


def test_compiled_dfa_unchanged(monkeypatch):
    g = REPLAYED["safe_rule_used_often"]
    with monkeypatch.context() as m:
        m.setattr(A, "_FRAG_MIN", 10 ** 9)
        a = A.compile_dfa(g)
    b = A.compile_dfa(g)
    assert np.array_equal(a.trans, b.trans) and np.array_equal(a.accepting, b.accepting)
