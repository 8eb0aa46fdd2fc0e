"""logic.multiple_of is made once per process per (exact value, integer_only): a hit is the
node a fresh construction gives, equal spellings of one value share it, errors recur."""

from fractions import Fraction

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.frontends.jsonschema import logic
from decoding.ir import Grammar

VALUES = [0.01, 0.5, 3, 2.5, Fraction(7, 4), 1e-3]


def _lang(node):
    return compile_dfa(Grammar("n", (("n", node),)))


@pytest.mark.parametrize("m", VALUES)
@pytest.mark.parametrize("integer_only", [False, True])
def test_hit_equals_a_fresh_construction(m, integer_only):
    hit = logic.multiple_of(m, integer_only)
    assert logic.multiple_of(m, integer_only) is hit
    fresh = logic._multiple_of.__wrapped__(logic.exact_value(m), integer_only)
    assert fresh == hit  # (structurally: the same IR, made anew)


@pytest.mark.parametrize("text,m,ok", [
    ("0.03", 0.01, True), ("0.035", 0.01, False), ("12", 0.01, True), ("1.5", 0.5, True),
    ("1.25", 0.5, False), ("9", 3, True), ("10", 3, False), ("3.5", Fraction(7, 4), True),
    ("0.007", 1e-3, True), ("0.0071", 1e-3, False)])
def test_language(text, m, ok):
    d = _lang(logic.multiple_of(m, False))
    assert d.accepts(text.encode()) is ok


def test_equal_values_share_one_node():
    assert logic.multiple_of(0.01, False) is logic.multiple_of(Fraction(1, 100), False)
    assert logic.multiple_of(2, True) is logic.multiple_of(2.0, True)
    assert logic.multiple_of(0.01, True) is not logic.multiple_of(0.01, False)


def test_errors_are_raised_every_time():
    for _ in range(2):
        with pytest.raises(ValueError):
            logic.multiple_of(-1, False)
        with pytest.raises(ValueError):
            logic.multiple_of(Fraction(1, 3), False)
