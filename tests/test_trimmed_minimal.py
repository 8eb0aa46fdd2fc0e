"""``automaton._trimmed_minimal`` (minimise first, trim only to check) is
``_minimize(_prune(dfa, None))``: the same table, acceptance, byte classes, dtype and
read-only flags, on the subset constructions of hand-written and JSONSchemaBench schemas,
on hand-made DFAs with dead states (the fallback) and on an empty language (the same error)."""

from __future__ import annotations

import numpy as np
import pytest

import decoding.backends.automaton as A
from decoding.errors import GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.limits import DEFAULT_LIMITS

from conftest import DFA_SCHEMAS, assert_same_dfa

SCHEMAS = DFA_SCHEMAS


def _old(d: A.DFA) -> A.DFA:
    return A._minimize(A._prune(d, None))


def _subset(name: str) -> A.DFA:
    """The subset construction of the grammar's NFA as :func:`A.compile_dfa` builds it (its
    native path no longer calls ``_determinize``: ``nfa_determinize_coo(minimal=True)``)."""
    g = compile_schema(SCHEMAS[name]).grammar
    lim = DEFAULT_LIMITS
    dl = A._Deadline(lim.max_compile_seconds, "test")
    nfa, start, end, specials = A.grammar_nfa(g, lim, dl, max_dfa=lim.max_dfa_states, rule_dfas=True)
    return A._determinize(nfa, start, end, specials, dl, lim.max_dfa_states * A.SUBSET_STATES_FACTOR, "test",
                          lim.max_subset_bytes)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_same_as_trim_then_minimize(name):
    d = _subset(name)
    assert_same_dfa(A._trimmed_minimal(d, None), _old(d), read_only=True)


def _dfa(trans, accepting) -> A.DFA:
    t = np.array(trans, dtype=np.int32)
    t.setflags(write=False)
    a = np.array(accepting, dtype=bool)
    a.setflags(write=False)
    bc = np.zeros(256, dtype=np.uint16)
    bc[ord("b")] = 1
    bc.setflags(write=False)
    return A.DFA(bc, t, a, (), 2)


@pytest.mark.parametrize("trans,accepting", [
    ([[1, 2], [-1, -1], [2, 2]], [False, True, False]),  # state 2 dead: the fallback
    ([[1, 2], [1, -1], [3, -1], [-1, -1]], [False, True, False, False]),  # a dead chain
    ([[1, -1], [-1, -1]], [False, True]),  # already minimal, all live
    ([[1, 2], [-1, -1], [-1, -1]], [False, True, True]),  # two equivalent accepting states
])
def test_hand_made(trans, accepting):
    d = _dfa(trans, accepting)
    assert_same_dfa(A._trimmed_minimal(d, None), _old(d), read_only=True)


def test_empty_language_same_error():
    d = _dfa([[1, -1], [1, -1]], [False, False])
    with pytest.raises(GrammarError) as old:
        _old(d)
    with pytest.raises(GrammarError) as new:
        A._trimmed_minimal(d, None)
    assert str(new.value) == str(old.value)
