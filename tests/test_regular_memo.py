"""automaton.regular_dfa's per-process memo of Inter/Diff products: a hit is the DFA a fresh
product gives, keyed by structure and both bounds; failures are not kept; arrays read-only."""

import dataclasses
import numpy as np
import pytest

from decoding.backends import automaton
from decoding.backends.automaton import regular_dfa
from decoding.errors import LimitError
from decoding.ir import ByteSet, Diff, Inter, Lit, Repeat, Seq

DIGITS = Repeat(ByteSet(((48, 57),)), 1, None)
LOWER = Repeat(ByteSet(((97, 122),)), 0, None)
ANY = Repeat(ByteSet(((32, 126),)), 0, None)

CASES = {
    "digits-not-007": Diff(DIGITS, Lit(b"007")),
    "len3-and-lower": Inter((Repeat(ByteSet(((32, 126),)), 3, 3), LOWER)),
    "any-minus-prefix": Diff(ANY, Seq((Lit(b"ab"), ANY))),
}
STRINGS = ["", "007", "07", "0070", "abc", "ab", "abz", "Abc", "xyz", "a", "12345"]


def _fresh(node, **kw):
    automaton._regular_memo.clear()
    return regular_dfa(node, **kw)


def _same(a, b):
    return (a is None and b is None) or (
        np.array_equal(a.trans, b.trans) and np.array_equal(a.accepting, b.accepting)
        and np.array_equal(a.byte_class, b.byte_class) and a.specials == b.specials)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hit_is_the_same_language(name):
    node = CASES[name]
    first = _fresh(node)
    # an equal node built anew (another schema's pattern) hits the memo
    rebuilt = type(node)(*[getattr(node, f.name) for f in dataclasses.fields(node) if f.init])
    assert rebuilt is not node and rebuilt == node
    hit = regular_dfa(rebuilt)
    assert hit is first
    again = _fresh(rebuilt)
    assert _same(hit, again)
    for s in STRINGS:
        assert hit.accepts(s.encode()) == again.accepts(s.encode()), s
    assert not hit.trans.flags.writeable and not hit.accepting.flags.writeable


@pytest.mark.parametrize("s,ok", [("123", True), ("007", False), ("0070", True), ("", False), ("a", False)])
def test_diff_language(s, ok):
    d = _fresh(CASES["digits-not-007"])
    assert d.accepts(s.encode()) is ok
    assert regular_dfa(CASES["digits-not-007"]).accepts(s.encode()) is ok


def test_bounds_are_part_of_the_key_and_limits_are_not_kept():
    node = Inter((Repeat(ByteSet(((97, 122),)), 0, 40), Repeat(Lit(b"ab"), 0, None)))
    automaton._regular_memo.clear()
    with pytest.raises(LimitError):
        regular_dfa(node, max_states=5)
    assert all(k[0] != node for k in automaton._regular_memo)  # the failure is not remembered
    big = regular_dfa(node)  # a larger bound is another key: it compiles
    assert big is not None and big.accepts(b"abab") and not big.accepts(b"aba")
    with pytest.raises(LimitError):  # and the small bound still fails
        regular_dfa(node, max_states=5)


def test_memo_is_bounded():
    automaton._regular_memo.clear()
    for k in range(automaton.REGULAR_MEMO_MAX + 10):
        regular_dfa(Diff(DIGITS, Lit(str(k).encode())))
    assert len(automaton._regular_memo) == automaton.REGULAR_MEMO_MAX
