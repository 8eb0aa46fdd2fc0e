"""Medium room loops (decoding.backends.counted, "Medium loops"): a room part ``U{0,r}`` with
``T + 1 < r < M`` (``M``: the longest token's bytes) is counted with a short tail although a
long token may overrun it after crossing its ``<en>`` (at the token's first byte, or after a
closing quote and a comma inside it); those tokens are masked off where they can
(:meth:`CountedGrammar._cross_bad`), and the near-end check covers a whole middle.

The oracle is the explicit DFA back-end (every unit unrolled) on a vocabulary whose longest
token has 12 bytes (``M`` = 12) and many long tokens that cross ``<en>`` (``"aaaa...``,
``","aaa...``, ``[1,2,3,...``), with ``T`` of 2 and 3: the same masks at every step of
walks that favour long tokens, the contract in every state met, the same language at the
bounds, budgeted walks that finish.  On llama-bpe (``M`` = 128) JSON schemas with
``maxLength`` 35..127 compile with the medium loops counted; masks equal the unrolled DFA's
and walks validate with jsonschema.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from decoding.backends import counted
from decoding.backends.counted import CountedGrammar, window
from decoding.backends.select import compile_grammar
from decoding.ir import Grammar, Inter, byteset, choice, lit, rep, seq, star
from decoding.runtime.matcher import Matcher
from decoding.vocab import Vocab
from counted_oracle import assert_budgeted_walks, assert_same_language_at_bounds
from test_contract import _check_state

_LONG = [b'"aaaaaaaaaaa', b"aaaaaaaaaaaa", b"abcabcabcab", b"aaaaaaa", b'","aaaaaaaa', b'"abcabc', b'a","abcabca',
         b'aa","bbbbbb', b",1,2,3,1,2,3", b"[1,2,3,1,2,", b'":"aaaaaaaa', b'{"a":"aaaaa', b"xxxxxxxxxx", b"aaaxxxxxxxx",
         b"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9a", b'"\xc3\xa9aaaaaaaa', b"ab", b"abc", b'a"', b'aaaa"', b'","',
         b",1", b"1,1", b'"]', b'a"]', b'"aaaaa"]', b'["aaaaaaaaa', b'"],["aaaaa', b"aaaaaaaaa\"}", b"bbbbbbbbbbbb", b'"xxxxxxxxxx']
MED = Vocab.from_bytes([b"", *[bytes([c]) for c in b'"abcx,[]{}:0123'], b"\xc3", b"\xa9", *_LONG, b"<|end|>"],
                       eog_ids=[0], special={"<|end|>": 18 + len(_LONG)})
A_C = byteset([(ord("a"), ord("c"))])
CHAR = choice(A_C, seq(byteset([(0xC3, 0xC3)]), byteset([(0xA9, 0xA9)])))
DIGITS = rep(byteset([(ord("0"), ord("3"))]), 1, None)
Q = lit('"')


def _s(lo: int, hi: int, unit=A_C):
    return seq(Q, rep(unit, lo, hi), Q)


GRAMMARS = {  # name: grammar (every one has a room loop with T + 1 < r < M = 12)
    "string": Grammar.single(_s(0, 6)),
    "utf8_string": Grammar.single(_s(0, 7, CHAR)),
    "object": Grammar.single(seq(lit('{"a":'), _s(0, 5), lit(',"b":'), _s(0, 9), lit("}"))),
    "array_of_strings": Grammar.single(seq(lit("["), _s(0, 5), star(seq(lit(","), _s(0, 5))), lit("]"))),
    "array_of_arrays": Grammar.single(seq(lit("["), seq(lit("["), _s(0, 6), lit("]")),
                                          star(seq(lit(","), lit("["), _s(0, 6), lit("]"))), lit("]"))),
    "min_length": Grammar.single(_s(2, 9)),  # the <en> after two units: any letter leads to it
    "items": Grammar.single(seq(lit("["), DIGITS, rep(seq(lit(","), DIGITS), 0, 5), lit("]"))),
    "adjacent": Grammar.single(seq(Q, rep(A_C, 0, 6), rep(lit("x"), 0, 7), Q)),  # an <en> inside a middle
    "top_level": Grammar.single(rep(A_C, 0, 8)),
    "medium_and_big": Grammar.single(seq(lit("["), _s(0, 40), lit(","), _s(0, 7), lit("]"))),
    "after_product": Grammar.single(seq(lit("["), Inter((_s(0, 30), seq(Q, lit("a"), star(A_C), Q))), lit(","),
                                        _s(0, 6), lit("]"))),
    "object_in_array": Grammar.single(seq(lit("["), star(seq(lit('{"a":'), _s(0, 5), lit("},"))), lit('{"a":'),
                                          _s(0, 5), lit("}]"))),
}
TAILS = [2, 3]


@pytest.fixture(params=TAILS, ids=[f"T{t}" for t in TAILS])
def tail(request, monkeypatch):
    monkeypatch.setattr(counted, "TAIL", request.param)
    return request.param


def _pair(name: str) -> tuple:
    g = GRAMMARS[name]
    return compile_grammar(g, MED, backend="counted"), compile_grammar(g, MED, backend="dfa")


def _walks(cg, oracle, seed: int, walks: int = 40, steps: int = 120) -> None:
    """Walks that favour long tokens (so they cross <en> with many units and reach the
    bounds), comparing the masks and acceptance with the oracle at every step."""
    rng = np.random.default_rng(seed)
    lens = np.array([len(b) for b in MED.token_bytes])
    for _ in range(walks):
        a, b = Matcher(cg), Matcher(oracle)
        for _ in range(steps):
            ids = a.allowed_ids()
            assert np.array_equal(ids, b.allowed_ids()), (a.state, ids, b.allowed_ids())
            assert a.is_accepting() == b.is_accepting()
            long = [int(t) for t in ids.tolist() if lens[t] >= 4]
            pool = long if long and rng.random() < 0.7 else ids.tolist()
            t = int(pool[rng.integers(len(pool))])
            assert a.advance(t) and b.advance(t)
            if a.finished:
                break


def _removed_by_crossing(cg) -> int:
    return sum(len(cg._cross_bad(s)) for s, _ in cg._states if cg._any_short)


def test_the_vocabulary_and_window():
    assert MED.max_token_bytes == 12 and window(MED) == 13


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_medium_loops_are_counted(name, tail):
    cg, _ = _pair(name)
    assert isinstance(cg, CountedGrammar)
    medium = [lp for lp in cg.loops if not lp.need and lp.tail == tail and lp.x + lp.tail < MED.max_token_bytes]
    assert medium and any(cg._short)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_masks_as_the_unrolled_dfa(name, tail):
    cg, oracle = _pair(name)
    _walks(cg, oracle, seed=1)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_contract_in_every_state_met(name, tail):
    cg, oracle = _pair(name)
    _walks(cg, oracle, seed=2, walks=15)
    for sid in range(len(cg._states)):
        _check_state(cg, sid, range(MED.n_tokens))
        assert np.array_equal(cg.allowed_ids(sid), np.flatnonzero(
            [cg.next_state(sid, t) >= 0 or cg.next_state(sid, t) == -2 for t in range(MED.n_tokens)]))


def test_tokens_crossing_en_are_masked_off(tail):
    """The walks reach states where a long token that crosses <en> is removed (the check is
    exercised), and a broken check (nothing removed) would be caught by the oracle."""
    total = 0
    for name in GRAMMARS:
        cg, oracle = _pair(name)
        _walks(cg, oracle, seed=1)
        total += _removed_by_crossing(cg)
    assert total


@pytest.mark.parametrize("name", ["string", "object", "array_of_strings", "min_length", "adjacent",
                                  "object_in_array"])
def test_a_broken_crossing_check_is_caught(name, monkeypatch):
    """With :meth:`_cross_bad` removing nothing, the masks differ from the oracle's."""
    monkeypatch.setattr(counted, "TAIL", 2)
    monkeypatch.setattr(CountedGrammar, "_cross_bad", lambda self, s, ids=None: counted._NO_IDS)
    cg, oracle = _pair(name)
    with pytest.raises(AssertionError):
        _walks(cg, oracle, seed=1)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_language_on_words_at_the_bounds(name, tail):
    assert_same_language_at_bounds(*_pair(name))


@pytest.mark.parametrize("name", list(GRAMMARS))
@pytest.mark.parametrize("extra", [0, 4])
def test_budgeted_walks_finish_within_max_tokens(name, extra, tail):
    assert_budgeted_walks(*_pair(name), extra)


def test_unit_table_matches_stepping(tail):
    """The units a long token starts from a middle state, from the unit walk's table, equal
    the stepped ones (:meth:`CountedGrammar._units_in_middle`)."""
    checked = 0
    for name in GRAMMARS:
        cg, oracle = _pair(name)
        _walks(cg, oracle, seed=4, walks=10)
        for k in range(len(cg.loops)):
            qm = cg._unit_states(k)
            if qm is None:
                continue
            w = cg._walk_of(k)
            for s in np.flatnonzero(qm >= 0).tolist():
                for j, t in enumerate(w.ids.tolist()):
                    if cg.inner.mask(s)[t >> 5] >> (t & 31) & 1:
                        assert w.from_state(int(qm[s]))[j] == cg._units_in_middle(s, MED.token_bytes[t])
                        checked += 1
    assert checked > 100


# ----------------------------------------------------------------------------- real vocabulary

REAL = {
    "string50": {"type": "string", "maxLength": 50},
    "object": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 40},
                                                "b": {"type": "string", "maxLength": 100},
                                                "c": {"type": "string", "minLength": 2, "maxLength": 60}},
               "required": ["a", "b", "c"], "additionalProperties": False},
    "array": {"type": "array", "items": {"type": "string", "maxLength": 36}, "maxItems": 3},
    "pattern": {"type": "object", "properties": {"p": {"type": "string", "pattern": "^[a-z ]+$", "maxLength": 70},
                                                 "q": {"type": "string", "maxLength": 45}},
                "required": ["p", "q"], "additionalProperties": False},
}


@pytest.mark.parametrize("name", list(REAL))
def test_real_vocabulary_masks_match_the_unrolled_dfa(name):
    """llama-bpe (``M`` = 128, ``T`` = 33): walks that favour long tokens; the masks at every
    step equal the unrolled DFA's, some long tokens are removed at a string's start, and
    every finished walk validates."""
    from conftest import get_vocab
    from decoding.frontends.jsonschema import compile_schema

    v = get_vocab("llama-bpe")
    schema = REAL[name]
    g = compile_schema(schema).grammar
    cg, oracle = compile_grammar(g, v, backend="counted"), compile_grammar(g, v, backend="dfa")
    assert cg.backend == "counted" and any(cg._short)
    lens = np.array([len(b) for b in v.token_bytes])
    rng = np.random.default_rng(5)
    removed = 0
    for _ in range(6):
        a, b = Matcher(cg), Matcher(oracle)
        out = bytearray()
        for _ in range(300):
            ids = a.allowed_ids()
            assert np.array_equal(ids, b.allowed_ids())
            assert a.is_accepting() == b.is_accepting()
            s, _ = cg._states[a.state]
            removed += len(cg.inner.allowed_ids(s)) - len(ids)
            long = ids[lens[ids] >= 20]
            pool = long if len(long) and rng.random() < 0.6 else ids
            t = int(pool[rng.integers(len(pool))])
            assert a.advance(t) and b.advance(t)
            out += v.token_bytes[t] if t not in v.eog_ids else b""
            if a.finished:
                jsonschema.validate(json.loads(out.decode()), schema)
                break
    assert removed, "no long token was masked off"
