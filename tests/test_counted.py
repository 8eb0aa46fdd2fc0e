"""Counted repetition (decoding.backends.counted): large bounded loops compiled with a counter.

The oracle is the explicit DFA back-end on the same grammar (every unit unrolled): on a tiny
hand-built vocabulary (longest token 3 bytes, so the window ``K`` is 4 and counts above 5
are counted) the counted grammar must give the same masks, the same acceptance and the same
end-of-generation decisions at every step of random walks, and keep the back-end contract
(costs included).  On the real llama-bpe vocabulary, the issue's sizes (``maxLength:
131072``, ``maxItems: 100000``) compile, and walks validate with jsonschema.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from conftest import get_vocab
from decoding.backends.counted import CountedGrammar, rewrite, window
from decoding.backends.select import compile_grammar
from decoding.errors import GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Special, byteset, choice, lit, rep, seq
from decoding.runtime.matcher import Matcher
from decoding.testing import random_walk
from decoding.vocab import Vocab
from test_contract import _check_state, _visited_states

TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in b'"abc,[]0123x'], b"ab", b"abc", b"cc", b",1", b'a"',
                         b'"a', b"1,1", b"]", b"bca", b"\xc3", b"\xa9", b"\xc3\xa9a"],
                        eog_ids=[0], special={"<|end|>": 22})
A_C = byteset([(ord("a"), ord("c"))])
DIGITS = rep(byteset([(ord("0"), ord("3"))]), 1, None)
EACUTE = seq(byteset([(0xC3, 0xC3)]), byteset([(0xA9, 0xA9)]))

GRAMMARS = {  # name: (grammar, number of counted loops)
    "room": (Grammar.single(seq(lit('"'), rep(A_C, 0, 20), lit('"'))), 1),
    "need": (Grammar.single(seq(lit('"'), rep(A_C, 12, 12), lit('"'))), 1),
    "need_room": (Grammar.single(seq(lit('"'), rep(choice(A_C, EACUTE), 7, 25), lit('"'))), 2),
    "need_open": (Grammar.single(seq(lit("x"), rep(lit("ab"), 9, None), lit("x"))), 1),
    "units": (Grammar.single(seq(lit("["), rep(choice(lit("ab"), lit("c")), 0, 14), lit("]"))), 1),
    "array": (Grammar.single(seq(lit("["), DIGITS, rep(seq(lit(","), DIGITS), 0, 11), lit("]"))), 1),
    "array_need": (Grammar.single(seq(lit("["), DIGITS, rep(seq(lit(","), DIGITS), 8, 16), lit("]"))), 2),
    "top_level": (Grammar.single(rep(A_C, 3, 40)), 1),
    "special_after": (Grammar.single(seq(rep(A_C, 0, 15), Special("<|end|>"), lit("x"))), 1),
    "two_strings": (Grammar.single(seq(lit('"'), rep(A_C, 0, 9), lit('","'), rep(A_C, 6, 30), lit('"'))), 3),
    "ambiguous_unit": (Grammar.single(seq(lit('"'), rep(choice(lit("a"), lit("ab"), lit("b")), 0, 12), lit('"'))), 0),
    # equal repetitions (distinct objects) share one loop: the same string in two branches
    # (Snowplow sp_334: anyOf branches with the same "message"), then in sequence
    "same_in_two_branches": (Grammar.single(choice(seq(lit('["'), rep(A_C, 0, 20), lit('"]')),
                                                   seq(lit('["'), rep(A_C, 0, 20), lit('"x')))), 1),
    "same_need_in_two_branches": (Grammar.single(choice(seq(lit("["), rep(A_C, 12, 12), lit("]")),
                                                        seq(lit("["), rep(A_C, 12, 12), lit("x"), rep(A_C, 0, 2)))), 1),
    "same_in_sequence": (Grammar.single(seq(lit('"'), rep(A_C, 0, 20), lit('","'), rep(A_C, 0, 20), lit('"'))), 1),
}


def _pair(name: str) -> tuple:
    g, _ = GRAMMARS[name]
    if GRAMMARS[name][1] == 0:
        return compile_grammar(g, TINY), compile_grammar(g, TINY, backend="dfa")
    return compile_grammar(g, TINY, backend="counted"), compile_grammar(g, TINY, backend="dfa")


def _words(g: Grammar, n: int, seed: int) -> list[bytes]:
    """Strings near and across the bounds: walks of the explicit DFA plus edits of them."""
    cg = compile_grammar(g, TINY, backend="dfa")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        w = random_walk(cg, rng, max_steps=200)
        t = w.text
        out += [t, t + t[-1:], t[:-1], t[1:], t[:-2] + t[-1:], t[:1] + t]
    return out


def test_nothing_to_count_is_a_grammar_error():
    with pytest.raises(GrammarError, match="no repetition it can count"):
        compile_grammar(GRAMMARS["ambiguous_unit"][0], TINY, backend="counted")
    with pytest.raises(GrammarError, match="no repetition it can count"):
        compile_grammar(Grammar.single(rep(A_C, 0, 5)), TINY, backend="counted")  # 5 <= K + 1


def test_a_shared_loop_entered_at_different_offsets_is_not_counted():
    """``"a" R | R "b"`` with R one loop: after "a" one branch has not started R and the other
    has counted one unit; the counter cannot be both, so the counted form is refused (the
    same check as for two loops entered from one state) and "auto" stays exact."""
    g = Grammar.single(choice(seq(lit("a"), rep(A_C, 0, 20)), seq(rep(A_C, 0, 20), lit("x"))))
    assert len(rewrite(g, window(TINY))[1]) == 1
    with pytest.raises(GrammarError, match="no repetition it can count"):
        compile_grammar(g, TINY, backend="counted")
    cg, oracle = compile_grammar(g, TINY), compile_grammar(g, TINY, backend="dfa")
    words = _words(g, 40, seed=4)
    assert [cg.accepts(w) for w in words] == [oracle.accepts(w) for w in words]


def test_auto_counts_only_what_is_large_unrolled():
    v = get_vocab("llama-bpe")
    assert compile_grammar(compile_schema({"type": "string", "maxLength": 100}).grammar, v).backend == "dfa"
    assert compile_grammar(compile_schema({"type": "string", "maxLength": 3000}).grammar, v).backend == "counted"


def test_the_window_is_one_more_than_the_longest_token():
    assert window(TINY) == 4 and window(get_vocab("llama-bpe")) == 129


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_rewrite_counts_only_large_unambiguous_loops(name):
    g, n_loops = GRAMMARS[name]
    _, loops = rewrite(g, window(TINY))
    assert len(loops) == n_loops
    cg, oracle = _pair(name)
    assert isinstance(cg, CountedGrammar) == (n_loops > 0)
    assert oracle.backend == "dfa"
    if n_loops:
        assert cg.dfa.n_states < 4 * oracle.dfa.n_states


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_language_as_the_unrolled_dfa(name):
    g, _ = GRAMMARS[name]
    cg, oracle = _pair(name)
    words = _words(g, 40, seed=1)
    if not oracle.special_token_ids:  # accepts() reads text only: specials never match there
        assert sum(oracle.accepts(w) for w in words) >= 40
    assert [cg.accepts(w) for w in words] == [oracle.accepts(w) for w in words]


def same_walks(cg, oracle, seed: int, walks: int = 60) -> int:
    """Walks under ``cg``'s mask comparing every step (mask, acceptance, forced bytes) with
    ``oracle``; the number of walks that finished (shared by the counted test files)."""
    rng = np.random.default_rng(seed)
    finished = 0
    for _ in range(walks):
        a, b = Matcher(cg), Matcher(oracle)
        for _ in range(120):
            ids = a.allowed_ids()
            assert np.array_equal(ids, b.allowed_ids()), (bytes(a.state), a.state)
            assert a.is_accepting() == b.is_accepting()
            assert a.forced_bytes() == b.forced_bytes()
            t = int(ids[rng.integers(len(ids))])
            assert a.advance(t) and b.advance(t)
            if a.finished:
                finished += 1
                break
    return finished


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_masks_as_the_unrolled_dfa_along_random_walks(name):
    cg, oracle = _pair(name)
    assert same_walks(cg, oracle, seed=2) >= 10


@pytest.mark.parametrize("name", [n for n, (_, k) in GRAMMARS.items() if k])
def test_contract_and_costs(name):
    cg, oracle = _pair(name)
    for s in _visited_states(cg, seed=3, walks=25, steps=60):
        _check_state(cg, s, range(TINY.n_tokens))
    # a fresh start costs what the unrolled DFA says, or more (an upper bound in a need middle)
    assert cg.completion_cost(0) >= oracle.completion_cost(0)


@pytest.mark.parametrize("name", [n for n, (_, k) in GRAMMARS.items() if k])
@pytest.mark.parametrize("extra", [0, 3])
def test_budgeted_walks_finish_within_max_tokens(name, extra):
    cg, _ = _pair(name)
    budget = cg.completion_cost(0) + extra
    rng = np.random.default_rng(extra)
    for _ in range(20):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished and len(w.tokens) <= budget


# ----------------------------------------------------------------------------- real vocabulary

BIG = [
    {"type": "string", "maxLength": 131072},
    {"type": "array", "maxItems": 100000, "items": {"type": "integer"}},
    {"type": "string", "minLength": 5000},
    {"type": "object", "properties": {"body": {"type": "string", "minLength": 200, "maxLength": 131072},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 4000}},
     "required": ["body", "tags"], "additionalProperties": False},
]


@pytest.mark.parametrize("schema", BIG, ids=["maxLength", "maxItems", "minLength", "object"])
def test_large_bounds_compile_counted_and_walks_validate(schema):
    v = get_vocab("llama-bpe")
    cg = compile_grammar(compile_schema(schema).grammar, v)
    assert cg.backend == "counted" and cg.dfa.n_states < 5000
    rng = np.random.default_rng(4)
    budget = cg.completion_cost(0) + 40
    for _ in range(4):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished
        jsonschema.validate(json.loads(w.text), schema)


@pytest.mark.parametrize("n, ok", [(0, True), (131071, True), (131072, True), (131073, False), (140000, False)])
def test_max_length_boundary_in_bytes_and_characters(n, ok):
    cg = compile_grammar(compile_schema({"type": "string", "maxLength": 131072}).grammar, get_vocab("llama-bpe"))
    assert cg.accepts(json.dumps("a" * n).encode()) == ok
    assert cg.accepts(json.dumps("北" * n, ensure_ascii=False).encode()) == ok


@pytest.mark.parametrize("n, ok", [(4999, False), (5000, True), (5001, True), (300, False)])
def test_min_length_boundary(n, ok):
    cg = compile_grammar(compile_schema({"type": "string", "minLength": 5000}).grammar, get_vocab("llama-bpe"))
    assert cg.accepts(json.dumps("é" * n, ensure_ascii=False).encode()) == ok


@pytest.mark.parametrize("n, ok", [(0, True), (1, True), (100000, True), (100001, False)])
def test_max_items_boundary(n, ok):
    cg = compile_grammar(compile_schema({"type": "array", "maxItems": 100000, "items": {"type": "integer"}}).grammar,
                         get_vocab("llama-bpe"))
    assert cg.accepts(json.dumps(list(range(n)), separators=(",", ":")).encode()) == ok


def test_min_length_costs_use_long_tokens():
    """minLength 5000 closes in a few dozen tokens (runs of up to 128 characters), not 5000."""
    cg = compile_grammar(compile_schema({"type": "string", "minLength": 5000}).grammar, get_vocab("llama-bpe"))
    assert 5000 // 128 < cg.completion_cost(0) < 100
