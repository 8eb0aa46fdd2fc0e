"""Pushdown back-end (issue 14): Ref-free rules with equal bodies share one automaton.

A JSON Schema with many properties of the same string schema gets one rule per property;
Snowplow sp_137/sp_138 had 99 rules of 18 distinct bodies, 525,405 states together (over
``max_dfa_states``), 77,847 shared.  Structural equality is decided by interning (linear in
the IR, no recursion); rules that call others keep their own automaton (recursion counts
are per rule)."""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import numpy as np
import pytest

from decoding.backends.automaton import compile_dfa
from decoding.backends.pushdown.index import _SameBody, compile_pushdown
from decoding.backends.select import compile_grammar
from decoding.errors import LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Ref, byteset, lit, rep, seq
from decoding.limits import DEFAULT_LIMITS
from decoding.testing import budgeted_walks
from tests.conftest import get_vocab

AZ = byteset([(97, 122)])


def test_same_body_numbers():
    s = _SameBody()
    a = seq(lit('"'), rep(AZ, 0, 40), lit('"'))
    b = seq(lit('"'), rep(byteset([(97, 122)]), 0, 40), lit('"'))  # equal, other objects
    c = seq(lit('"'), rep(AZ, 0, 41), lit('"'))
    assert s.key(a) == s.key(b) != s.key(c)
    assert s.key(seq(a, Ref("x"))) is None
    assert s.first(a, 3) == 3 and s.first(b, 7) == 3 and s.first(c, 8) == 8
    assert s.first(seq(a, Ref("x")), 9) == 9 and s.first(seq(a, Ref("x")), 10) == 10
    deep = lit("x")
    for _ in range(50_000):  # no recursion
        deep = seq(deep, lit("y"))
    assert s.key(deep) is not None


def _schema(n: int) -> dict:
    props = {f"p{i}": {"type": "string", "maxLength": 300} for i in range(n)}
    props["q"] = {"type": "string", "maxLength": 200}
    return {"type": "object", "properties": props, "required": ["p0", "q"], "additionalProperties": False}


def test_equal_rules_share_one_automaton():
    g = compile_schema(_schema(40)).grammar
    pd = compile_pushdown(g)
    sizes = sorted(d.n_states for d in pd.dfas)
    # the 40 equal string rules are one automaton; the other string and the object are two
    assert len(pd.dfas) <= 4, (len(g.rules), sizes)
    # same language as the inlined DFA
    d = compile_dfa(g, limits=replace(DEFAULT_LIMITS, max_dfa_states=10**6), max_states=10**6)
    cg = compile_grammar(g, get_vocab("llama-bpe"), backend="pushdown")
    for text in (b'{"p0":"","q":""}', b'{"p0":"ab","p3":"' + b"x" * 300 + b'","q":"c"}',
                 b'{"p0":"ab","p3":"' + b"x" * 301 + b'","q":"c"}', b'{"p3":"a","q":""}'):
        assert cg.accepts(text) == d.accepts(text), text


def test_many_equal_properties_compile_within_max_dfa_states(monkeypatch):
    """Over ``max_dfa_states`` one automaton per rule, well under shared (the Snowplow shape);
    budgeted random walks validate with jsonschema."""
    schema = _schema(150)
    g = compile_schema(schema).grammar
    lim = replace(DEFAULT_LIMITS, max_dfa_states=60_000)
    pd = compile_pushdown(g, limits=lim)
    assert pd.n_states < 60_000
    cg = compile_grammar(g, get_vocab("llama-bpe"), backend="pushdown", limits=lim)
    walks = budgeted_walks(cg, np.random.default_rng(5), 8, 200)
    assert walks and all(w.finished for w in walks)
    for w in walks:
        jsonschema.validate(json.loads(w.text), schema)
    with monkeypatch.context() as m:  # one automaton per rule: over the limit
        m.setattr(_SameBody, "first", lambda self, body, k: k)
        with pytest.raises(LimitError, match="max_dfa_states"):
            compile_pushdown(g, limits=lim)
