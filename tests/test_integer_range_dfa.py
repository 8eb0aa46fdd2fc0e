"""Integer ranges with a bound of ``RANGE_DFA_DIGITS`` digits or more are one minimal
automaton leaf (``numbers._range_dfa``): the same language as the choice of digit sequences
(``numbers._range_ir``), compared exactly (a walk of the two minimal DFAs in lockstep over
every byte), on the int32/int64 bounds, sides left open, empty and one-value ranges, bounds
rounded inward (``_inward``) and random ranges; the leaf has the minimal DFA's state count."""

from __future__ import annotations

import random

import pytest

import decoding.frontends.jsonschema.numbers as nb
from decoding.backends.automaton import compile_dfa
from decoding.ir import NOTHING, Dfa, Grammar


def _same_language(a, b) -> bool:
    if a == NOTHING or b == NOTHING:
        return a == b
    da, db = compile_dfa(Grammar.single(a)), compile_dfa(Grammar.single(b))
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        x, y = todo.pop()
        if bool(da.accepting[x]) != bool(db.accepting[y]):
            return False
        for byte in range(256):
            tx, ty = int(da.trans[x, da.byte_class[byte]]), int(db.trans[y, db.byte_class[byte]])
            if (tx < 0) != (ty < 0):
                return False
            if tx >= 0 and (tx, ty) not in seen:
                seen.add((tx, ty))
                todo.append((tx, ty))
    return True


FIXED = [(0, 2147483647), (-2147483648, 2147483647), (0, 9223372036854775807), (-9223372036854775808, 9223372036854775807),
         (0, 4294967295), (0, None), (None, -5), (None, 5), (-5, None), (None, None), (1, 1), (0, 0), (-1, -1), (5, 3),
         (-100000, -99999), (123456, 1234567), (999999, 1000000), (100000, None), (None, -100000), (-999999, -1),
         (10**25, 10**25 + 10**8), (-10**30, None)]


def _random_ranges(n: int, seed: int) -> list:
    rnd = random.Random(seed)

    def bound():
        if rnd.random() < 0.2:
            return None
        return rnd.choice([-1, 1]) * rnd.randrange(10 ** rnd.randrange(1, 21))
    out = []
    for _ in range(n):
        a, b = bound(), bound()
        if a is not None and b is not None and a > b and rnd.random() < 0.8:
            a, b = b, a
        out.append((a, b))
    return out


@pytest.mark.parametrize("lo,hi", FIXED + _random_ranges(60, 7))
def test_leaf_is_the_choice_of_digit_sequences(lo, hi):
    lo2, hi2 = nb._inward(lo, hi)
    leaf = nb._range_dfa(lo2, hi2)
    assert _same_language(leaf, nb._range_ir(lo2, hi2)), (lo, hi)
    if leaf != NOTHING:
        assert isinstance(leaf, Dfa)
        assert len(leaf.edges) == compile_dfa(Grammar.single(leaf)).n_states  # minimal


@pytest.mark.parametrize("lo,hi,leaf", [(0, 99999, False), (0, 100000, True), (-100000, 5, True), (None, 12345, False),
                                        (0, 9223372036854775807, True), (None, None, False)])
def test_which_ranges_are_leaves(lo, hi, leaf):
    node = nb._integer_range(lo, hi)
    assert isinstance(node, Dfa) == leaf
