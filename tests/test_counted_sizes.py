"""Counted back-end sizes (issue 14): what decides whether a grammar with large bounded
loops compiles counted, and that the smaller forms keep masks exact.

- A unit holding a ``Dfa`` IR leaf (an enum of more than 256 values) is counted like any
  regular unit (``decoding.backends.counted._unit``).
- A repetition too small to count (or unbounded) of an item that qualifies as a unit gets the
  unit's minimal automaton as its item (``SMALL_AS_LEAF``): the same language with far fewer
  NFA states, so the counted grammar's estimate and build shrink (Snowplow schemas with tens of
  ``maxLength: 128`` strings next to larger ones were refused on the estimate alone).
- The conformance runner's generation mode compiles with the library's ``max_states``.

The oracle is the explicit DFA back-end on the same grammar on a tiny vocabulary (window
``K`` = 4); on llama-bpe, reduced Snowplow shapes (written here) compile counted and their
random walks validate with ``jsonschema``.  No wall-clock assertion.
"""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import numpy as np
import pytest

from conftest import get_vocab
from decoding.backends import counted
from decoding.backends.automaton import DEFAULT_MAX_STATES
from decoding.backends.counted import CountedGrammar, rewrite, window
from decoding.backends.select import compile_grammar
from decoding.errors import LimitError
from decoding.limits import DEFAULT_LIMITS
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Dfa, Grammar, Repeat, byteset, choice, lit, rep, seq, walk
from decoding.ir.literals import literal_set
from decoding.limits import DEFAULT_LIMITS
from decoding.testing import random_walk
from decoding.vocab import Vocab
from test_counted import same_walks
from evals.conformance import run

TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in b'"abc,[]0123x'], b"ab", b"abc", b"cc", b",1", b'a"',
                         b'"a', b"1,1", b"]", b"bca", b"\xc3", b"\xa9", b"\xc3\xa9a", b",a", b"a,b"],
                        eog_ids=[0])
A_C = byteset([(ord("a"), ord("c"))])
EACUTE = seq(byteset([(0xC3, 0xC3)]), byteset([(0xA9, 0xA9)]))
#: a regular leaf as the enum front-end makes it: "a", "ab", "b", "cab", "é"
WORDS = literal_set({b"a", b"ab", b"b", b"cab", b"\xc3\xa9"})
CHAR = choice(A_C, EACUTE)

GRAMMARS = {  # name: (grammar, counted loops)
    # a Dfa leaf as the unit of a large list
    "dfa_unit": (Grammar.single(seq(lit("["), WORDS, rep(seq(lit(","), WORDS), 0, 14), lit("]"))), 1),
    # ... and as the whole unit, with a separator inside the leaf's own bytes
    "dfa_unit_bare": (Grammar.single(seq(lit('"'), rep(literal_set({b"a", b"bc", b"\xc3\xa9"}), 0, 17),
                                         lit('"'))), 1),
    "dfa_unit_need": (Grammar.single(seq(lit("["), WORDS, rep(seq(lit(","), WORDS), 9, 20), lit("]"))), 2),
    # a small unbounded loop next to a counted one: its item becomes the unit's leaf
    "small_open": (Grammar.single(seq(lit('"'), rep(CHAR, 0, None), lit('","'), rep(CHAR, 0, 20), lit('"'))), 1),
    "small_open_need": (Grammar.single(seq(lit('"'), rep(CHAR, 2, None), lit('","'), rep(CHAR, 8, 11), lit('"'))), 1),
}


def _pair(name: str) -> tuple:
    g, _ = GRAMMARS[name]
    return compile_grammar(g, TINY, backend="counted"), compile_grammar(g, TINY, backend="dfa")


def test_a_dfa_leaf_is_a_unit():
    found = counted._unit(seq(lit(","), WORDS), Grammar.single(WORDS), DEFAULT_LIMITS)
    assert found is not None
    first, leaf = found
    assert first == frozenset(b",") and isinstance(leaf, Dfa)
    bare = literal_set({b"a", b"bc", b"\xc3\xa9"})
    assert counted._unit(bare, Grammar.single(bare), DEFAULT_LIMITS)[0] == frozenset(b"ab\xc3")
    # "a" then "b" also reads as "ab": ambiguous units stay unrolled, leaf or not
    assert counted._unit(WORDS, Grammar.single(WORDS), DEFAULT_LIMITS) is None


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_rewrite_counts_the_loops(name):
    g, n_loops = GRAMMARS[name]
    _, loops = rewrite(g, window(TINY))
    assert len(loops) == n_loops
    assert isinstance(_pair(name)[0], CountedGrammar)


@pytest.mark.parametrize("name", ["small_open", "small_open_need"])
def test_small_loops_next_to_a_counted_one_get_the_unit_leaf(name):
    g, _ = GRAMMARS[name]
    g2, _ = rewrite(g, window(TINY))
    small = [x for x in walk(g2.rule(g2.start)) if isinstance(x, Repeat) and x.max is None]
    assert small and all(isinstance(x.item, Dfa) for x in small)
    assert not any(isinstance(x, Repeat) and x.item == CHAR for x in walk(g2.rule(g2.start)))


def test_nothing_counted_leaves_small_loops_alone():
    g = Grammar.single(seq(lit('"'), rep(CHAR, 0, None), lit('"')))
    assert rewrite(g, window(TINY)) == (g, ())


def _words(g: Grammar, n: int, seed: int) -> list[bytes]:
    cg = compile_grammar(g, TINY, backend="dfa")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t = random_walk(cg, rng, max_steps=200).text
        out += [t, t + t[-1:], t[:-1], t[1:], t[:-2] + t[-1:], t[:1] + t]
    return out


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_language_as_the_unrolled_dfa(name):
    g, _ = GRAMMARS[name]
    cg, oracle = _pair(name)
    words = _words(g, 40, seed=1)
    assert sum(oracle.accepts(w) for w in words) >= 40
    assert [cg.accepts(w) for w in words] == [oracle.accepts(w) for w in words]


FIXED = {  # name: (accepted, rejected)
    "dfa_unit": ([b"[a]", b"[cab," + b",".join([b"ab"] * 14) + b"]", b"[\xc3\xa9,b]"],
                 [b"[]", b"[a," + b",".join([b"b"] * 15) + b"]", b"[ca]", b"[a,,b]", b"[\xc3]"]),
    "dfa_unit_bare": ([b'""', b'"' + b"bc" * 17 + b'"', b'"a\xc3\xa9bc"'],
                      [b'"' + b"a" * 18 + b'"', b'"b"', b'"\xa9"']),
    "dfa_unit_need": ([b"[a" + b",b" * 9 + b"]", b"[a" + b",cab" * 20 + b"]"],
                      [b"[a" + b",b" * 8 + b"]", b"[a" + b",b" * 21 + b"]"]),
    "small_open": ([b'"","' + b"a" * 20 + b'"', b'"' + b"\xc3\xa9" * 40 + b'",""'],
                   [b'"","' + b"a" * 21 + b'"', b'"\xc3","a"']),
    "small_open_need": ([b'"ab","' + b"c" * 8 + b'"', b'"' + b"a" * 30 + b'","' + b"\xc3\xa9" * 11 + b'"'],
                        [b'"a","' + b"c" * 8 + b'"', b'"ab","' + b"c" * 7 + b'"', b'"ab","' + b"c" * 12 + b'"']),
}


@pytest.mark.parametrize("name,text,ok", [(n, t, ok) for n, (acc, rej) in FIXED.items()
                                          for ok, ts in ((True, acc), (False, rej)) for t in ts])
def test_fixed_strings(name, text, ok):
    cg, oracle = _pair(name)
    assert oracle.accepts(text) == ok  # the oracle agrees with the test's own reading
    assert cg.accepts(text) == ok


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_masks_as_the_unrolled_dfa_along_random_walks(name):
    cg, oracle = _pair(name)
    assert same_walks(cg, oracle, seed=2) >= 10


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_budgeted_walks_finish(name):
    cg, oracle = _pair(name)
    budget = cg.completion_cost(0)
    assert budget >= oracle.completion_cost(0)
    rng = np.random.default_rng(5)
    for _ in range(15):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished and len(w.tokens) <= budget


# ----------------------------------------------------------------------------- Snowplow shapes

def _props(n: int, max_length: int, prefix: str) -> dict:
    return {f"{prefix}{i}": {"type": "string", "maxLength": max_length} for i in range(n)}


#: reduced from Snowplow sp_172 / sp_0 (Segment context, many short bounded strings next to
#: long ones: refused before on the estimate of the unrolled 128-character strings, 9,220 NFA
#: states each), sp_96 / sp_81 (an array of item objects with 4096-character strings) and
#: sp_331 / sp_342 (header strings of maxLength 256 in an array)
SHAPES = {
    "many_short_strings": {"type": "object", "additionalProperties": False,
                           "properties": {**_props(34, 128, "s"), "content": {"type": "string", "maxLength": 8192}}},
    "item_objects": {"type": "object", "additionalProperties": False,
                     "properties": {"items": {"type": "array", "items": {
                         "type": "object", "additionalProperties": False,
                         "properties": {**_props(6, 4096, "item_"),
                                        "currency": {"type": ["string", "null"], "minLength": 3, "maxLength": 3}}}}}},
    "headers": {"type": "object", "additionalProperties": False, "required": ["headers"],
                "properties": {"headers": {"type": "array", "items": {"type": "string", "maxLength": 256}},
                               "body": {"type": ["string", "null"], "maxLength": 1000}}},
}


def test_many_short_strings_estimate_below_the_counted_cap():
    g = compile_schema(SHAPES["many_short_strings"]).grammar
    g2, loops = rewrite(g, window(get_vocab("llama-bpe")))
    from decoding.ir.size import check_size
    assert len(loops) == 1 and check_size(g2).states <= counted.COUNTED_AT_MOST


@pytest.mark.parametrize("name", list(SHAPES))
def test_snowplow_shapes_compile_counted_and_walks_validate(name):
    v = get_vocab("llama-bpe")
    schema = SHAPES[name]
    cg = compile_grammar(compile_schema(schema).grammar, v)
    assert cg.backend == "counted"
    rng = np.random.default_rng(7)
    for _ in range(3):
        w = random_walk(cg, rng, max_steps=300, budget=200)
        assert w.finished
        jsonschema.validate(json.loads(w.text), schema)


def test_generation_mode_uses_the_library_max_states():
    assert run.max_states_for(run.GENERATION_OPTIONS) == DEFAULT_MAX_STATES
    assert run.max_states_for(run.BENCH_OPTIONS) == run.max_states_for(None) == run.MAX_STATES


def test_decimal_multiple_of_compiles():
    """``multipleOf: 0.01`` (Snowplow sp_34) is exact decimal arithmetic (issue 15): it
    compiles, and 0.07 is a multiple, as the project's validator says (jsonschema's float
    division does not: tests/test_multiple_of_decimal.py)."""
    from decoding.frontends.json_validator import validator
    schema = {"type": "object", "properties": {"revenue": {"type": "number", "multipleOf": 0.01}}}
    cg = compile_grammar(compile_schema(schema).grammar, get_vocab("llama-bpe"))
    assert cg.accepts(b'{"revenue":0.07}') and not cg.accepts(b'{"revenue":0.071}')
    assert validator(schema).is_valid({"revenue": 0.07})
    assert not jsonschema.Draft202012Validator({"multipleOf": 0.01}).is_valid(0.07)


def test_a_limit_of_the_counted_form_is_named_when_nothing_compiles():
    """The counted form over ``max_states`` (Snowplow sp_261: its automaton is over
    max_dfa_states before minimisation), then the other back-ends refused too: the error names
    both limits, not only the unrolled size.  (The pushdown back-end now compiles these strings
    split into counting helper rules, ~38k states: its own bound is lowered so it refuses too.)"""
    g = compile_schema({"type": "object", "properties": _props(3, 100_000, "s")}).grammar
    with pytest.raises(LimitError) as e:
        compile_grammar(g, get_vocab("llama-bpe"), max_states=500,
                        limits=replace(DEFAULT_LIMITS, max_dfa_states=20_000))
    assert "the counted form was tried first" in str(e.value) and "max_states=500" in str(e.value)
