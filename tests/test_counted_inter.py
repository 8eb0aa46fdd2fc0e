"""Counted repetition inside ``Inter``/``Diff`` (decoding.backends.counted): ``maxLength`` with a
``pattern`` or ``format``.

The loop of one operand is counted and the other operands ignore its markers; the product
is checked (:func:`decoding.backends.counted._mirrors_agree`) so that no token can tell the
counter.  The oracle is the unrolled explicit DFA on the tiny vocabulary of
``tests/test_counted.py`` (window ``K`` = 4): same language, same masks, acceptance and forced
bytes along random walks, the back-end contract and budgets.  On llama-bpe the real bounds
compile counted and walks validate with jsonschema.
"""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

from conftest import get_vocab
from decoding.backends import counted
from decoding.backends.counted import CountedGrammar, rewrite, window
from decoding.backends.select import compile_grammar
from decoding.errors import GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Diff, Grammar, Inter, choice, lit, rep, seq
from decoding.testing import random_walk
from test_contract import _check_state, _visited_states
from test_counted import A_C, TINY, _words, same_walks

Q = lit('"')
CH = choice(A_C, lit(","))


def _string(*body):
    return seq(Q, *body, Q)


GRAMMARS = {  # name: (grammar, counted loops)
    # a prefix pattern: finishes at once from anywhere in the loop
    "prefix": (Grammar.single(Inter((_string(lit("a"), rep(A_C, 0, None)), _string(rep(A_C, 0, 20))))), 1),
    # the pattern needs two more units to finish ("," and a letter): the explicit part grows
    "needs_suffix": (Grammar.single(Inter((_string(rep(CH, 0, None), lit(","), A_C), _string(rep(CH, 0, 30))))), 1),
    # the counted operand second, and three operands
    "three": (Grammar.single(Inter((_string(rep(A_C, 0, None), lit("c")), _string(lit("a"), rep(A_C, 0, None)),
                                    _string(rep(A_C, 2, 24))))), 1),
    # a difference: strings of at most 20 letters not starting with "b"
    "diff": (Grammar.single(Diff(_string(rep(A_C, 0, 20)), _string(lit("b"), rep(A_C, 0, None)))), 1),
    # inside a larger grammar, next to a plain counted loop
    "nested": (Grammar.single(seq(lit("["), Inter((_string(lit("a"), rep(A_C, 0, None)), _string(rep(A_C, 0, 20)))),
                                  lit(","), _string(rep(A_C, 0, 14)), lit("]"))), 2),
}

#: the other operand needs up to 24 units to finish (lengths are multiples of 25): no window
#: passes the check, so the loop is not counted
MULTIPLES = Grammar.single(Inter((_string(rep(rep(A_C, 25, 25), 0, None)), _string(rep(A_C, 0, 60)))))


def _pair(name: str) -> tuple:
    g, _ = GRAMMARS[name]
    cg = compile_grammar(g, TINY, backend="counted")
    assert any(lp.product for lp in cg.loops)  # the loop inside the Inter/Diff is one of them
    return cg, compile_grammar(g, TINY, backend="dfa")


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_the_loop_inside_the_product_is_counted(name):
    g, n_loops = GRAMMARS[name]
    _, loops = rewrite(g, window(TINY))
    assert len(loops) == n_loops and any(lp.product for lp in loops)
    cg, oracle = _pair(name)
    assert isinstance(cg, CountedGrammar) and oracle.backend == "dfa"


@pytest.mark.parametrize("name, good, bad", [
    ("prefix", [b'"a"', b'"a' + b"b" * 19 + b'"', b'"abc"'], [b'""', b'"b"', b'"a' + b"b" * 20 + b'"']),
    ("needs_suffix", [b'",a"', b'"' + b"ab" * 14 + b',c"', b'"' + b"a" * 28 + b',c"'],
     [b'"a"', b'"' + b"a" * 29 + b',c"', b'","', b'"a,"']),
    ("three", [b'"ac"', b'"a' + b"b" * 22 + b'c"'], [b'"a"', b'"c"', b'"a' + b"b" * 23 + b'c"', b'"bc"']),
    ("diff", [b'""', b'"a"', b'"' + b"c" * 20 + b'"'], [b'"b"', b'"bc"', b'"' + b"a" * 21 + b'"']),
    ("nested", [b'["a",""]', b'["a' + b"c" * 19 + b'","' + b"b" * 14 + b'"]'],
     [b'["",""]', b'["a' + b"c" * 20 + b'",""]', b'["a","' + b"b" * 15 + b'"]']),
])
def test_accepts_and_rejects(name, good, bad):
    cg, oracle = _pair(name)
    assert [cg.accepts(w) for w in good + bad] == [True] * len(good) + [False] * len(bad)
    assert [oracle.accepts(w) for w in good + bad] == [True] * len(good) + [False] * len(bad)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_language_as_the_unrolled_dfa(name):
    g, _ = GRAMMARS[name]
    cg, oracle = _pair(name)
    words = _words(g, 40, seed=5)
    assert sum(oracle.accepts(w) for w in words) >= 40
    assert [cg.accepts(w) for w in words] == [oracle.accepts(w) for w in words]


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_masks_as_the_unrolled_dfa_along_random_walks(name):
    cg, oracle = _pair(name)
    assert same_walks(cg, oracle, seed=6) >= 10


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_contract_and_costs(name):
    cg, oracle = _pair(name)
    for s in _visited_states(cg, seed=7, walks=25, steps=60):
        _check_state(cg, s, range(TINY.n_tokens))
    assert cg.completion_cost(0) >= oracle.completion_cost(0)


@pytest.mark.parametrize("name", list(GRAMMARS))
@pytest.mark.parametrize("extra", [0, 3])
def test_budgeted_walks_finish_within_max_tokens(name, extra):
    cg, _ = _pair(name)
    budget = cg.completion_cost(0) + extra
    rng = np.random.default_rng(extra)
    for _ in range(20):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished and len(w.tokens) <= budget


# ----------------------------------------------------------------------------- fallback

def test_a_product_a_token_could_tell_is_not_counted():
    _, loops = rewrite(MULTIPLES, window(TINY))
    assert loops == ()
    with pytest.raises(GrammarError, match="no repetition it can count"):
        compile_grammar(MULTIPLES, TINY, backend="counted")
    assert compile_grammar(MULTIPLES, TINY).backend == "dfa"


def test_without_the_check_that_product_would_give_wrong_masks(monkeypatch):
    """The check is what keeps the masks exact: skipped, the same product is counted and a
    walk finds a mask that differs from the unrolled DFA's."""
    monkeypatch.setattr(counted, "_mirrors_agree", lambda d, lp, k: True)
    cg = compile_grammar(MULTIPLES, TINY, backend="counted")
    oracle = compile_grammar(MULTIPLES, TINY, backend="dfa")
    with pytest.raises(AssertionError):
        same_walks(cg, oracle, seed=8, walks=200)


# ----------------------------------------------------------------------------- real vocabulary

BIG = [
    {"type": "string", "maxLength": 131072, "format": "email"},
    {"type": "string", "maxLength": 300, "pattern": "^[a-z]"},
    {"type": "string", "maxLength": 131072, "pattern": "^iglu:[a-zA-Z0-9-_.]+/[a-zA-Z0-9-_]+/"},
    {"type": "object", "properties": {"to": {"type": "string", "format": "email", "maxLength": 4096},
                                      "id": {"type": "string", "pattern": "^x-", "maxLength": 2000}},
     "required": ["to", "id"], "additionalProperties": False},
]


@pytest.mark.parametrize("schema", BIG, ids=["email", "prefix300", "iglu", "object"])
def test_large_bounds_with_a_pattern_compile_counted_and_walks_validate(schema):
    v = get_vocab("llama-bpe")
    cg = compile_grammar(compile_schema(schema).grammar, v)
    assert cg.backend == "counted" and cg.dfa.n_states < 20000
    assert any(lp.product for lp in cg.loops)
    rng = np.random.default_rng(9)
    budget = cg.completion_cost(0) + 40
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for _ in range(4):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished
        checker.validate(json.loads(w.text))


@pytest.mark.parametrize("n, ok", [(0, False), (100, True), (131072 - 5, True), (131072 - 4, False)])
def test_email_max_length_boundary(n, ok):
    cg = compile_grammar(compile_schema({"type": "string", "maxLength": 131072, "format": "email"}).grammar,
                         get_vocab("llama-bpe"))
    assert cg.accepts(json.dumps("a" * n + "@b.co").encode()) == ok  # "@b.co" is 5 characters


@pytest.mark.parametrize("text, ok", [("a", True), ("A", False), ("a" + "é" * 299, True), ("a" + "é" * 300, False)])
def test_prefix_pattern_max_length_in_characters(text, ok):
    schema = {"type": "string", "maxLength": 300, "pattern": "^[a-z]"}
    cg = compile_grammar(compile_schema(schema).grammar, get_vocab("llama-bpe"))
    assert cg.backend == "counted"
    assert cg.accepts(json.dumps(text, ensure_ascii=False).encode()) == ok
    assert ok == (len(text) <= 300 and re.match("^[a-z]", text) is not None)
