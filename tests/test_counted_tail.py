"""Short tails (decoding.backends.counted.TAIL): a room loop outside products is followed by
``T`` explicit units instead of ``K``; a *long* token (more than ``T - 1`` bytes) could then
overrun the tail in the last ``M - T`` units of the middle, and there its mask bit comes from
the units it would start (:meth:`CountedGrammar._near_end`).

The oracle is the explicit DFA back-end (every unit unrolled) on a vocabulary whose longest
token has 8 bytes (``M`` = 8, ``K`` = 9), with ``T`` of 2, 3 and 5: the same masks at every step
of walks that mostly stay inside the loops (so they reach the bounds and the near-end states),
the contract in every state met (every token's step against its mask bit, the costs), and
budgeted walks that finish within their budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from decoding.backends import counted
from decoding.backends.counted import CountedGrammar, window
from decoding.backends.select import compile_grammar
from decoding.ir import Grammar, Special, byteset, choice, lit, rep, seq
from decoding.runtime.matcher import Matcher
from decoding.vocab import Vocab
from counted_oracle import assert_budgeted_walks, assert_same_language_at_bounds
from test_contract import _check_state

_LONG = [b"ab", b"abc", b"cc", b"aaaa", b"abcab", b"cccccc", b"abcabcab", b"aaaaaaa", b'a"', b'ab"', b'aaaa"',
         b'"a', b'"abcabc', b'abcab","', b'","', b",1", b"1,1", b"1,11,1", b",12,3,", b"]", b"bca", b"\xc3\xa9a",
         b"aa\xc3\xa9", b"x", b"xx", b"aaax"]
MED = Vocab.from_bytes([b"", *[bytes([c]) for c in b'"abcx,[]0123'], b"\xc3", b"\xa9", *_LONG, b"<|end|>"],
                       eog_ids=[0], special={"<|end|>": 15 + len(_LONG)})
A_C = byteset([(ord("a"), ord("c"))])
DIGITS = rep(byteset([(ord("0"), ord("3"))]), 1, None)
EACUTE = seq(byteset([(0xC3, 0xC3)]), byteset([(0xA9, 0xA9)]))

GRAMMARS = {  # name: grammar (every one has a room loop of at least M = 8 units)
    "room": Grammar.single(seq(lit('"'), rep(A_C, 0, 30), lit('"'))),
    "room_exactly_m": Grammar.single(seq(lit('"'), rep(A_C, 0, 8), lit('"'))),
    "room_after_need": Grammar.single(seq(lit('"'), rep(choice(A_C, EACUTE), 12, 40), lit('"'))),
    "units": Grammar.single(seq(lit("["), rep(choice(lit("ab"), lit("c")), 0, 20), lit("]"))),
    "array": Grammar.single(seq(lit("["), DIGITS, rep(seq(lit(","), DIGITS), 0, 15), lit("]"))),
    "top_level": Grammar.single(rep(A_C, 3, 40)),
    "special_after": Grammar.single(seq(rep(A_C, 0, 15), Special("<|end|>"), lit("x"))),
    "two_strings": Grammar.single(seq(lit('"'), rep(A_C, 0, 9), lit('","'), rep(A_C, 2, 30), lit('"'))),
    "same_in_sequence": Grammar.single(seq(lit('"'), rep(A_C, 0, 20), lit('","'), rep(A_C, 0, 20), lit('"'))),
    "x_after": Grammar.single(seq(rep(A_C, 0, 25), rep(lit("x"), 1, 3))),
}
TAILS = [2, 3, 5]


@pytest.fixture(params=TAILS, ids=[f"T{t}" for t in TAILS])
def tail(request, monkeypatch):
    monkeypatch.setattr(counted, "TAIL", request.param)
    return request.param


def _pair(name: str) -> tuple:
    g = GRAMMARS[name]
    return compile_grammar(g, MED, backend="counted"), compile_grammar(g, MED, backend="dfa")


def _stay_walks(cg, oracle, seed: int, walks: int = 40) -> None:
    """Walks that mostly take tokens without a closing byte (so they reach the bounds),
    comparing the masks and acceptance with the oracle at every step."""
    rng = np.random.default_rng(seed)
    for _ in range(walks):
        a, b = Matcher(cg), Matcher(oracle)
        for _ in range(150):
            ids = a.allowed_ids()
            assert np.array_equal(ids, b.allowed_ids()), (bytes(a.state) if hasattr(a, "state") else None)
            assert a.is_accepting() == b.is_accepting()
            stay = [int(t) for t in ids.tolist()
                    if MED.token_bytes[t] and not any(x in MED.token_bytes[t] for x in b'"]x')]
            pool = stay if stay and rng.random() < 0.95 else ids.tolist()
            t = int(pool[rng.integers(len(pool))])
            assert a.advance(t) and b.advance(t)
            if a.finished:
                break


def test_the_vocabulary_and_window():
    assert MED.max_token_bytes == 8 and window(MED) == 9


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_room_loops_get_the_short_tail(name, tail):
    cg, _ = _pair(name)
    assert isinstance(cg, CountedGrammar)
    rooms = [lp for lp in cg.loops if not lp.need]
    assert rooms and all(lp.tail == tail for lp in rooms)
    assert all(lp.tail == window(MED) for lp in cg.loops if lp.need)


def test_a_room_part_shorter_than_the_longest_token_is_counted_above_the_tail(monkeypatch):
    """Room below ``M`` (a medium loop) is counted above ``T + 1`` units: the long tokens that
    would overrun it after its ``<en>`` are masked off (tests/test_counted_medium.py)."""
    monkeypatch.setattr(counted, "TAIL", 2)
    g = Grammar.single(seq(lit('"'), rep(A_C, 0, 7), lit('"')))
    assert [(lp.x, lp.tail) for lp in counted.rewrite(g, window(MED), tail=2)[1]] == [(5, 2)]
    assert counted.rewrite(Grammar.single(seq(lit('"'), rep(A_C, 0, 3), lit('"'))), window(MED), tail=2)[1] == ()
    assert counted.rewrite(GRAMMARS["room_exactly_m"], window(MED), tail=2)[1][0].tail == 2
    assert counted.rewrite(GRAMMARS["room_exactly_m"], window(MED))[1] == ()  # T = K: room above K + 1 only


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_masks_as_the_unrolled_dfa_to_the_bounds(name, tail):
    cg, oracle = _pair(name)
    _stay_walks(cg, oracle, seed=1)
    near = [sid for sid, (s, c) in enumerate(cg._states)
            if cg._mid[s] >= 0 and cg._near[cg._mid[s]] is not None and c > cg._near[cg._mid[s]]]
    if tail < 5 or name not in ("room_exactly_m", "units", "array"):
        assert near, "the walks reached no near-end state"


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_contract_in_every_state_met(name, tail):
    cg, oracle = _pair(name)
    _stay_walks(cg, oracle, seed=2, walks=15)
    removed = 0
    for sid in range(len(cg._states)):
        _check_state(cg, sid, range(MED.n_tokens))
        removed += len(cg.inner.allowed_ids(cg._states[sid][0])) - len(cg.allowed_ids(sid))
    if tail == 2 and name in ("room", "top_level", "two_strings"):
        assert removed, "no long token was ever masked off near the end"


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_language_on_words_at_the_bounds(name, tail):
    assert_same_language_at_bounds(*_pair(name))


@pytest.mark.parametrize("name", list(GRAMMARS))
@pytest.mark.parametrize("extra", [0, 4])
def test_budgeted_walks_finish_within_max_tokens(name, extra, tail):
    assert_budgeted_walks(*_pair(name), extra)


# ----------------------------------------------------------------------------- real vocabulary

REAL = [
    {"type": "string", "maxLength": 300},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 160}, "b": {"type": "string", "maxLength": 130}},
     "required": ["a", "b"], "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "maxLength": 128}, "maxItems": 2},
]


@pytest.mark.parametrize("schema", REAL, ids=["string300", "two_strings", "array_of_128"])
def test_real_vocabulary_masks_match_the_unrolled_dfa_to_the_bound(schema):
    """llama-bpe (``M`` = 128, ``T`` = ``tail_for``: 16): walks that favour long tokens inside the strings
    reach the last ``M - T`` units, where long tokens are masked off one by one; every mask on
    the way equals the unrolled DFA's."""
    from conftest import get_vocab
    from decoding.frontends.jsonschema import compile_schema

    v = get_vocab("llama-bpe")
    g = compile_schema(schema).grammar
    cg, oracle = compile_grammar(g, v, backend="counted"), compile_grammar(g, v, backend="dfa")
    assert cg.backend == "counted" and all(lp.tail == counted.tail_for(v) for lp in cg.loops)
    lens = np.array([len(b) for b in v.token_bytes])
    rng = np.random.default_rng(5)
    removed = 0
    for _ in range(4):
        a, b = Matcher(cg), Matcher(oracle)
        for _ in range(400):
            ids = a.allowed_ids()
            assert np.array_equal(ids, b.allowed_ids())
            assert a.is_accepting() == b.is_accepting()
            s, c = cg._states[a.state]
            removed += len(cg.inner.allowed_ids(s)) - len(ids)
            inside = [int(t) for t in ids[lens[ids] >= 8][:4000].tolist()
                      if b'"' not in v.token_bytes[t] and b"\\" not in v.token_bytes[t]]
            pool = inside if inside and rng.random() < 0.9 else ids.tolist()
            t = int(pool[rng.integers(len(pool))])
            assert a.advance(t) and b.advance(t)
            if a.finished:
                break
    assert removed, "no long token was masked off near the end"


# ----------------------------------------------------------------------------- the tail per vocabulary

def _lengths_vocab(counts: dict[int, int]) -> Vocab:
    """A vocabulary of ``counts[n]`` distinct tokens of ``n`` bytes each (plus every byte)."""
    toks = [bytes([b]) for b in range(256)]
    for n, c in counts.items():
        toks += [i.to_bytes(4, "big") + b"x" * (n - 4) for i in range(c)]
    return Vocab.from_bytes(toks)


@pytest.mark.parametrize("counts, most, expect", [
    ({10: 5, 20: 5, 30: 5}, 10, 11),   # >= 11 bytes: 10 tokens (20, 30): the first within 10
    ({10: 5, 20: 5, 30: 5}, 15, 9),    # every token fits under 15: the smallest tail
    ({10: 5, 20: 5, 30: 5}, 4, 31),    # 5 tokens of 30 bytes stay long below 31: the window
    ({12: 3, 13: 3}, 3, 13),
    ({12: 3, 13: 3}, 2, 14),           # the window (longest 13 + 1)
])
def test_tail_for_is_the_shortest_tail_with_at_most_the_bound_of_long_tokens(counts, most, expect, monkeypatch):
    monkeypatch.setattr(counted, "LONG_TOKENS_MAX", most)
    v = _lengths_vocab(counts)
    assert counted.tail_for(v) == expect == min(expect, window(v))


@pytest.mark.parametrize("name", ["llama-bpe", "gemma-4", "qwen35", "phi-3"])
def test_tail_for_real_vocabularies(name):
    from conftest import get_vocab

    v = get_vocab(name)
    t = counted.tail_for(v)
    lens = np.array([len(b) for b in v.token_bytes])
    assert counted.MIN_TAIL <= t <= window(v)
    assert int((lens >= t).sum()) <= counted.LONG_TOKENS_MAX
    assert t == counted.MIN_TAIL or int((lens >= t - 1).sum()) > counted.LONG_TOKENS_MAX


def test_tail_setting_overrides_the_vocabulary(monkeypatch):
    monkeypatch.setattr(counted, "TAIL", 7)
    assert counted.tail_for(MED) == 7


# ----------------------------------------------------------------------------- the Compiler's warm-up

@pytest.mark.parametrize("name", ["llama-bpe", "gemma-4", "phi-3", "gpt-2"])
def test_compiler_warms_the_json_string_walk(name):
    """``Compiler(vocab)`` makes the counted back-end's walk of the long tokens through a JSON
    string character (from the unit's start, and after an opening quote): a schema's first
    counted compile with a medium string loop reads both, and must find them made (the same
    objects as the warm-up's, not made again)."""
    from conftest import get_vocab
    from decoding.compiler import WARM_STRING_ABOVE_TAIL, Compiler

    vocab = get_vocab(name)
    c = Compiler(vocab, cache=False)
    walks = list(counted._WALKS(vocab).values())
    assert walks, "the warm-up made no unit walk"
    quote = np.zeros(256, dtype=bool)
    quote[ord('"')] = True
    key = np.packbits(quote).tobytes()
    warm = [w for w in walks if 0 in w._rows and key in w._suf]
    assert warm, "no walk with the unit's start and the opening quote read"
    before = {id(w): (dict(w._rows), dict(w._suf)) for w in warm}
    n = counted.tail_for(vocab) + WARM_STRING_ABOVE_TAIL + 1  # another medium string, in an object
    cg = c.compile_json_schema({"type": "object", "properties": {"s": {"type": "string", "maxLength": n}},
                                "required": ["s"]}, backend="counted")
    assert isinstance(cg, CountedGrammar)
    used = [w for w in cg._walks.values()]
    assert used and all(id(w) in before for w in used), "the compile made a unit walk of its own"
    for w in used:
        rows, suf = before[id(w)]
        assert all(w._rows[q] is rows[q] for q in rows) and all(w._suf[k] is suf[k] for k in suf)


def test_compiler_on_a_vocabulary_too_small_to_count():
    """The warm-up on a hand-built vocabulary of single bytes: the Compiler is made, and
    compiles as usual."""
    from decoding.compiler import Compiler

    tiny = Vocab.from_bytes([b"", *[bytes([c]) for c in b'"abc{}:,'], b"<|end|>"], eog_ids=[0],
                            special={"<|end|>": 9})
    c = Compiler(tiny, cache=False)
    cg = c.compile_json_schema({"type": "string", "maxLength": 3})
    assert cg.accepts(b'"ab"') and not cg.accepts(b'"abca"')
