"""The counted back-end's compile shortcuts (issue 14) give what the plain steps give.

- :func:`decoding.backends.counted._unit` is memoized per process for Ref-free items (by
  structure): the same leaf as :func:`_unit_of`; an item holding a Ref is not shared between
  grammars (its rule may differ); a unit that meets a limit is not remembered.
- :func:`_marker_moves` (one read of the special columns) is the per-column scan.
- The mask automaton's merged ``<en>`` rows (all chains a step at a time) are the rows the
  sequential merge makes, adjacent nullable loops (a chain of ``<en>``) included.
- The rewritten grammar is marked productive only when the grammar is: an empty language
  still fails with the rule the productive check names.
- Whole compiles with the memos cold and warm give the same automaton.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_vocab
from decoding.backends import counted
from decoding.backends.counted import CountedGrammar, MARK, compile_counted
from decoding.backends.select import compile_grammar
from decoding.errors import GrammarError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Diff, Grammar, Inter, Ref, Special, byteset, choice, lit, rep, seq, walk
from decoding.ir.productive import check_productive
from decoding.limits import Limits
from decoding.vocab import Vocab

TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in b'"abcx,[]0123'], b"ab", b"abc", b"\xc3", b"\xa9"], eog_ids=[0])
A_C = byteset([(ord("a"), ord("c"))])
Q = lit('"')


def _eacute():
    return seq(byteset([(0xC3, 0xC3)]), byteset([(0xA9, 0xA9)]))


GRAMMARS = {
    "room": Grammar.single(seq(Q, rep(A_C, 0, 40), Q)),
    "need_room": Grammar.single(seq(Q, rep(choice(A_C, _eacute()), 7, 45), Q)),
    "adjacent": Grammar.single(seq(Q, rep(A_C, 0, 9), rep(lit("x"), 0, 30), Q)),  # an <en> chain
    "two": Grammar.single(seq(lit("["), rep(A_C, 0, 30), lit(","), rep(choice(A_C, _eacute()), 0, 30), lit("]"))),
}


@pytest.fixture
def cold_units():
    counted._UNITS.clear()
    yield
    counted._UNITS.clear()


def test_unit_memo_is_structural(cold_units):
    g = Grammar.single(lit("x"))
    a, b = choice(A_C, _eacute()), choice(A_C, _eacute())  # equal, distinct objects
    assert a is not b and a == b
    ua = counted._unit(a, g, None)
    assert ua is not None and counted._unit(b, g, None) is ua  # (the memo's)
    assert counted._unit_of(b, g, None) == ua  # what the unmemoized build makes


def test_unit_with_a_ref_is_not_shared(cold_units):
    item = Ref("c")
    ga = Grammar("r", (("r", rep(item, 0, 50)), ("c", lit("a"))))
    gb = Grammar("r", (("r", rep(item, 0, 50)), ("c", lit("b"))))
    fa, fb = counted._unit(item, ga, None), counted._unit(item, gb, None)
    assert fa is not None and fb is not None
    assert fa[0] == frozenset(b"a") and fb[0] == frozenset(b"b")


def test_a_unit_over_a_limit_is_not_remembered(cold_units):
    g = Grammar.single(lit("x"))
    item = seq(lit("x"), rep(A_C, 0, 30), lit("y"))  # ~34 NFA states
    assert counted._unit(item, g, Limits(max_nfa_states=8)) is None
    assert counted._unit(item, g, None) is not None  # the default limits: a unit


def test_marker_moves_are_the_column_scan():
    for g in GRAMMARS.values():
        cg = compile_grammar(g, TINY, backend="counted")
        d = cg.dfa
        moves = counted._marker_moves(d)
        for j, t in enumerate(d.specials):
            src = np.flatnonzero(d.trans[:, d.n_classes + j] >= 0)
            if not t.startswith(MARK) or not len(src):
                assert j not in moves
                continue
            got_s, got_t = moves[j]
            assert got_s.dtype == np.int32 and got_t.dtype == np.int32
            assert np.array_equal(got_s, src) and np.array_equal(got_t, d.trans[src, d.n_classes + j])


def _merged_rows(cg: CountedGrammar) -> tuple[np.ndarray, np.ndarray]:
    """The mask automaton's table and acceptance merged one ``<en>`` state at a time, as the
    module docstring says (its own row, then the rows of the chain it starts)."""
    d = cg.dfa
    ncls = d.n_classes
    keep = [j for j, t in enumerate(d.specials) if not t.startswith(MARK)]
    trans2 = d.trans[:, list(range(ncls)) + [ncls + j for j in keep]].copy()
    acc2 = d.accepting.copy()
    en_to: dict[int, int] = {}
    for lp in cg.loops:
        if lp.en in d.specials:
            c = ncls + d.specials.index(lp.en)
            for s in np.flatnonzero(d.trans[:, c] >= 0).tolist():
                en_to[s] = int(d.trans[s, c])
    own = {s: trans2[s].copy() for s in en_to}
    for s in en_to:
        row, acc, h, seen = own[s].copy(), bool(d.accepting[s]), en_to[s], {s}
        while True:
            there = own[h] if h in own else trans2[h]
            assert not ((row >= 0) & (there >= 0) & (row != there)).any()
            row = np.where(row >= 0, row, there)
            acc = acc or bool(d.accepting[h])
            if h not in en_to or h in seen:
                break
            seen.add(h)
            h = en_to[h]
        trans2[s] = row
        acc2[s] = acc
    return trans2, acc2


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_merged_en_rows_are_the_sequential_merge(name):
    cg = compile_grammar(GRAMMARS[name], TINY, backend="counted")
    assert isinstance(cg, CountedGrammar) and cg._own
    trans2, acc2 = _merged_rows(cg)
    assert np.array_equal(cg.inner.dfa.trans, trans2)
    assert np.array_equal(cg.inner.dfa.accepting, acc2)


def test_chains_are_merged():
    cg = compile_grammar(GRAMMARS["adjacent"], TINY, backend="counted")
    assert any(cg._en[t] >= 0 for t in (cg._en[s] for s in cg._own))  # an <en> target with its own <en>


def test_an_empty_language_names_its_rule():
    g = Grammar("root", (("root", seq(rep(A_C, 0, 40), Ref("loop"))), ("loop", seq(lit("x"), Ref("loop")))))
    with pytest.raises(GrammarError) as want:
        check_productive(g)
    with pytest.raises(GrammarError) as got:
        compile_counted(g, TINY)
    assert str(want.value) in str(got.value)


def _table(cg) -> tuple:
    d = cg.dfa
    return d.byte_class.tobytes(), d.trans.tobytes(), d.accepting.tobytes(), d.specials, \
        cg.inner.dfa.trans.tobytes(), tuple(cg._mid), tuple((lp.x, lp.need, lp.tail, lp.first) for lp in cg.loops)


def _plain_unit(item, grammar, limits):
    """:func:`counted._unit` as it was before the memo."""
    if any(isinstance(x, (Special, Inter, Diff)) for x in walk(item)):
        return None
    try:
        return counted._unit_of(item, grammar, limits)
    except LimitError:
        return None


SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 500},
                                      "b": {"type": "array", "items": {"type": "string", "maxLength": 300}},
                                      "c": {"type": "string", "minLength": 200, "maxLength": 400}},
     "required": ["a"]},
    {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 3},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_cold_and_warm_compiles_agree(schema, monkeypatch):
    vocab = get_vocab("llama-bpe")
    g = compile_schema(schema).grammar
    counted._UNITS.clear()
    cold = compile_counted(g, vocab)
    warm = compile_counted(g, vocab)  # (units from the memo)
    monkeypatch.setattr(counted, "_unit", _plain_unit)
    plain = compile_counted(g, vocab)  # no memo at all
    assert cold is not None and warm is not None and plain is not None
    assert _table(cold) == _table(warm) == _table(plain)


def _all_grammars() -> list:
    import test_counted
    import test_counted_medium
    out = [(f"tiny/{k}", g, TINY) for k, g in GRAMMARS.items()]
    out += [(f"counted/{k}", g, test_counted.TINY) for k, (g, n) in test_counted.GRAMMARS.items() if n]
    out += [(f"medium/{k}", g, test_counted_medium.MED) for k, g in test_counted_medium.GRAMMARS.items()]
    return out


@pytest.mark.parametrize("name,g,vocab", _all_grammars(), ids=lambda x: x if isinstance(x, str) else "")
def test_walked_region_holds_the_middles(name, g, vocab, monkeypatch):
    """The region found by walking from the ``<en>`` targets holds every state that reaches a
    ``<tp>`` move by bytes (the whole table's reverse search), and the compile is the same."""
    calls = []
    walked = counted._walked_region

    def spy(d, loops, col, moves, any_tp):
        region = walked(d, loops, col, moves, any_tp)
        col_ok = np.zeros(d.trans.shape[1], dtype=bool)
        col_ok[:d.n_classes] = True
        ref = counted._automaton._bfs(d.trans, any_tp, reverse=True, col_ok=col_ok) >= 0
        calls.append(region is not None and set(np.flatnonzero(ref).tolist()) <= set(region.tolist()))
        return region

    if name.startswith("medium/"):
        monkeypatch.setattr(counted, "TAIL", 3)  # (as test_counted_medium: its loops are medium)
    monkeypatch.setattr(counted, "_walked_region", spy)
    a = compile_grammar(g, vocab, backend="counted")
    assert calls and all(calls)
    monkeypatch.setattr(counted, "WALK_MIDDLES", False)
    b = compile_grammar(g, vocab, backend="counted")
    assert _table(a) == _table(b)
