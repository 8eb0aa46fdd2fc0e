"""An empty language that only the automaton finds (not the IR's productivity check) is a
GrammarError whose reason fits the grammar: an empty intersection/difference, recursion
deeper than max_depth, or both; never a recursion hint for a grammar without recursion."""

from __future__ import annotations

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import GrammarError
from decoding.ir import Grammar, Ref, byteset, choice, diff, inter, lit, seq, star

AZ = byteset([(97, 122)])


def _msg(g: Grammar) -> str:
    with pytest.raises(GrammarError) as ei:
        compile_dfa(g)
    return str(ei.value)


def test_empty_intersection_names_the_logic_not_recursion():
    m = _msg(Grammar.single(seq(lit("{"), inter(lit("a"), lit("b")), lit("}"))))
    assert "accepts no string" in m and "intersection or difference" in m and "recursion" not in m


def test_empty_difference_names_the_logic():
    m = _msg(Grammar.single(diff(lit("ab"), choice(lit("ab"), lit("x")))))
    assert "intersection or difference" in m and "recursion" not in m


def test_recursion_too_deep_names_max_depth():
    # a = "(" a ")" | "(" a a ")": every string needs unbounded nesting
    g = Grammar("a", (("a", choice(seq(lit("("), Ref("a"), lit(")")), seq(lit("["), Ref("a"), Ref("a"), lit("]")))),),
                max_depth=3)
    try:
        compile_dfa(g)
    except GrammarError as e:
        m = str(e)
        assert "intersection" not in m
        if "recursion" in m:  # (the IR check may name the rule instead: no path out)
            assert "max_depth=3" in m
    else:
        pytest.fail("an unproductive recursive grammar compiled")


def test_both():
    # a = "(" a ")" | ("x" & "y"): its only way out is an empty intersection
    g = Grammar("a", (("a", choice(seq(lit("("), Ref("a"), lit(")")), inter(lit("x"), lit("y")))),), max_depth=2)
    m = _msg(g)
    assert "accepts no string" in m
    assert "intersection or difference" in m and "recursion deeper than max_depth=2" in m
