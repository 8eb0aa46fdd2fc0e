"""The counted back-end's per-compile shortcuts of issue 14 (helper D) give what the plain
steps give.

- :class:`decoding.backends.counted._Key`: structural equality with the hash computed once;
  the rewrite's ``same`` memo keyed by it still shares a loop between *equal* (not only
  identical) repetitions, and keeps repetitions of other counts or items apart.
- :func:`_walked_region` marks the pairs it has seen in an array (small tables) or a set
  (``WALK_MARK_MAX``): the same region either way.
- :func:`_unit_step` memoized by the unit's id: the walk of an equal unit.
- A grammar with medium loops compiles to the same automaton and cross information with the
  memos cold and warm; :func:`_moves_into` (a gather) is ``np.isin`` against the states, the
  last state and missing moves (-1) included.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_vocab
from decoding.backends import counted
from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, byteset, choice, lit, rep, seq
from test_counted_compile import _all_grammars, _table

A_C = byteset([(ord("a"), ord("c"))])
Q = lit('"')


def _fresh_rep(lo, hi):
    """A repetition equal to every other ``_fresh_rep(lo, hi)`` but never identical to one."""
    return rep(seq(byteset([(ord("a"), ord("c"))])), lo, hi)


def test_key_equality_and_hash():
    a, b = _fresh_rep(0, 400), _fresh_rep(0, 400)
    assert a is not b and a == b
    ka, kb = counted._Key(a), counted._Key(b)
    assert hash(ka) == hash(kb) == hash(a) and ka == kb
    assert counted._Key(_fresh_rep(0, 401)) != ka
    assert ka != a  # (a key equals keys only)
    assert {ka: 1}.get(kb) == 1


def test_equal_repetitions_share_one_loop():
    # two anyOf-like branches, each with its own (equal, not identical) string repetition
    g = Grammar.single(choice(seq(lit("x"), Q, _fresh_rep(0, 400), Q), seq(lit("y"), Q, _fresh_rep(0, 400), Q)))
    _, loops, _ = counted.rewrite_products(g, 10, tail=4)
    assert len(loops) == 1
    # other counts: other loops
    g = Grammar.single(choice(seq(lit("x"), Q, _fresh_rep(0, 400), Q), seq(lit("y"), Q, _fresh_rep(0, 300), Q)))
    _, loops, _ = counted.rewrite_products(g, 10, tail=4)
    assert sorted(lp.x for lp in loops) == [296, 396]
    # another item: another loop
    other = rep(byteset([(ord("a"), ord("d"))]), 0, 400)
    g = Grammar.single(choice(seq(lit("x"), Q, _fresh_rep(0, 400), Q), seq(lit("y"), Q, other, Q)))
    _, loops, _ = counted.rewrite_products(g, 10, tail=4)
    assert len(loops) == 2


def test_unit_memo_by_structure_survives_fresh_items():
    counted._UNITS.clear()
    g1 = Grammar.single(seq(Q, _fresh_rep(0, 400), Q))
    g2 = Grammar.single(seq(Q, _fresh_rep(0, 400), Q))
    _, l1, _ = counted.rewrite_products(g1, 10, tail=4)
    _, l2, _ = counted.rewrite_products(g2, 10, tail=4)
    assert l1[0].unit is l2[0].unit  # (the second from the process memo, by structure)


@pytest.mark.parametrize("name,g,vocab", _all_grammars(), ids=lambda x: x if isinstance(x, str) else "")
def test_walked_region_mark_array_and_set_agree(name, g, vocab, monkeypatch):
    regions: dict[str, list] = {"array": [], "set": []}
    walked = counted._walked_region
    which = ["array"]

    def spy(d, loops, col, moves, any_tp):
        region = walked(d, loops, col, moves, any_tp)
        regions[which[0]].append(None if region is None else region.tolist())
        return region

    if name.startswith("medium/"):
        monkeypatch.setattr(counted, "TAIL", 3)
    monkeypatch.setattr(counted, "_walked_region", spy)
    a = compile_grammar(g, vocab, backend="counted")
    which[0] = "set"
    monkeypatch.setattr(counted, "WALK_MARK_MAX", 0)
    b = compile_grammar(g, vocab, backend="counted")
    assert regions["array"] and regions["array"] == regions["set"]
    assert _table(a) == _table(b)


def test_unit_step_by_id_is_the_walk_of_an_equal_unit():
    counted._STEPS.clear()
    counted._STEPS_ID.clear()
    g1 = Grammar.single(seq(Q, _fresh_rep(0, 400), Q))
    counted._UNITS.clear()
    u1 = counted.rewrite_products(g1, 10, tail=4)[1][0].unit
    counted._UNITS.clear()
    u2 = counted.rewrite_products(g1, 10, tail=4)[1][0].unit
    assert u1 is not u2 and u1 == u2
    s1 = counted._unit_step(u1)
    assert counted._unit_step(u1) is s1  # (by id)
    s2 = counted._unit_step(u2)
    assert np.array_equal(s1, s2)
    assert not s1.flags.writeable


def _cross_tuple(cg):
    c = cg._cross_info()
    return (tuple((k, v.tolist()) for k, v in sorted(c.zero.items())), c.yids.tolist(), c.ymax.tolist(),
            c.ymax_all, c.dist.tolist())


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 60},
                                      "b": {"type": "string", "maxLength": 90},
                                      "c": {"type": "string", "minLength": 3, "maxLength": 50}}},
    {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 4},
])
def test_medium_loops_cross_info_cold_and_warm(schema):
    """Medium loops (``maxLength`` 35..127 on llama-bpe): the cross information (read from
    the mask table by a gather) is the same on a cold and a warm compile, and names exactly
    the states each loop's ``<en>`` is reached from by a byte."""
    vocab = get_vocab("llama-bpe")
    g = compile_schema(schema).grammar
    counted._UNITS.clear()
    counted._STEPS_ID.clear()
    cold = counted.compile_counted(g, vocab)
    warm = counted.compile_counted(g, vocab)
    assert cold is not None and warm is not None and cold._any_short
    assert _table(cold) == _table(warm)
    assert _cross_tuple(cold) == _cross_tuple(warm)
    m = cold.inner.dfa
    ens = [ss for ss, _ in cold._en_src.values()]
    assert np.array_equal(counted._moves_into(m.trans[:, :m.n_classes], ens),
                          np.isin(m.trans[:, :m.n_classes], np.concatenate(ens)))


@pytest.mark.parametrize("dtype", [np.int16, np.int32])
def test_moves_into_is_isin(dtype):
    rng = np.random.default_rng(7)
    n = 40
    trans = rng.integers(-1, n, size=(n, 9)).astype(dtype)
    trans[:, 0] = -1  # (missing moves, read as the extra flag)
    for targets in ([np.array([n - 1])], [np.array([0, 3]), np.array([n - 1, 5])], [np.array([], dtype=np.int64)],
                    [np.arange(n)]):
        want = np.isin(trans, np.concatenate(targets))
        assert np.array_equal(counted._moves_into(trans, targets), want)
