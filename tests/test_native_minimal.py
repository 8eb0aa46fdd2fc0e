"""``automaton.minimal_dfa``'s native path (``nfa_determinize_coo(..., minimal=True)``,
``gd_nfa_minimal_coo``: the subset construction minimised from its sparse rows, no table
between) gives what ``_trimmed_minimal(_determinize(...))`` gives: the same table, dtype,
acceptance, byte classes, read-only flags, marked trimmed; on schema grammars, on NFAs whose
subset construction has dead states (the table comes back to be trimmed), on the empty
language, and the same limits."""

from __future__ import annotations

import pytest

import decoding.backends.automaton as A
from decoding.errors import GrammarError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import ByteSet, Choice, Grammar, Lit, Ref, Repeat, Seq
from decoding.limits import DEFAULT_LIMITS

from conftest import DFA_SCHEMAS, assert_same_dfa


def _nfa(g: Grammar):
    lim = DEFAULT_LIMITS
    dl = A._Deadline(lim.max_compile_seconds, "test")
    return (*A.grammar_nfa(g, lim, dl, max_dfa=lim.max_dfa_states, rule_dfas=True), dl)


def _both(g: Grammar, max_states: int = DEFAULT_LIMITS.max_dfa_states, empty_ok: bool = False):
    nfa, start, end, specials, dl = _nfa(g)
    new = A.minimal_dfa(nfa, start, end, specials, dl, max_states, "g", DEFAULT_LIMITS.max_subset_bytes,
                         empty_ok=empty_ok)
    sub = A._determinize(nfa, start, end, specials, dl, max_states * A.SUBSET_STATES_FACTOR, "g",
                         DEFAULT_LIMITS.max_subset_bytes)
    if empty_ok and not A._reaches_accept(sub):
        return new, None
    return new, A._trimmed_minimal(sub, dl)


@pytest.mark.parametrize("name", sorted(DFA_SCHEMAS))
def test_schema_grammars(name):
    new, old = _both(compile_schema(DFA_SCHEMAS[name]).grammar)
    assert_same_dfa(new, old, read_only=True)
    assert new.trimmed
    assert new.trans.dtype == A.state_dtype(new.n_states)


DIGITS = ByteSet(((48, 57),))
# recursion cut off at max_depth: the subset construction has states that cannot reach acceptance
DEAD = Grammar("r", (("r", Choice((Seq((Lit(b"["), Ref("r"), Lit(b"]"))), Repeat(DIGITS, 1, 3)))),), max_depth=3)


@pytest.mark.parametrize("g", [
    DEAD,
    Grammar.single(Seq((Lit(b"ab"), Repeat(Choice((Lit(b"x"), Lit(b"xy"), DIGITS)), 0, 4), Lit(b"z")))),
    Grammar.single(Repeat(Choice((Lit(b"a"), Lit(b"aa"))), 2, None)),
])
def test_small_grammars(g):
    new, old = _both(g)
    assert_same_dfa(new, old, read_only=True)


def test_dead_states_come_back_to_be_trimmed(monkeypatch):
    """A subset construction with a state that cannot reach acceptance: the native call
    hands its table back (not trimmed) and the caller trims then minimises it."""
    seen = []
    real = A._native_minimal

    def spy(*a, **k):
        d = real(*a, **k)
        seen.append(d.trimmed)
        return d

    monkeypatch.setattr(A, "_native_minimal", spy)
    found = False
    for name in sorted(DFA_SCHEMAS):
        seen.clear()
        new, old = _both(compile_schema(DFA_SCHEMAS[name]).grammar)
        assert_same_dfa(new, old, read_only=True)
        found |= False in seen
    new, old = _both(DEAD)
    assert_same_dfa(new, old, read_only=True)
    found |= False in seen
    assert found, "no grammar had a dead state in its subset construction: the fallback is not tested"


def test_limits_same_messages():
    g = Grammar.single(Seq((Repeat(ByteSet(((97, 122),)), 0, 40), Lit(b"!"), Repeat(ByteSet(((97, 122),)), 0, 40))))
    nfa, start, end, specials, dl = _nfa(g)
    errs = []
    for fn in (lambda: A.minimal_dfa(nfa, start, end, specials, dl, 5, "g", DEFAULT_LIMITS.max_subset_bytes),
               lambda: A.minimal_dfa(nfa, start, end, specials, dl, 10**6, "g", 3000)):
        with pytest.raises(LimitError) as e:
            fn()
        errs.append(e.value)
    old = []
    for sub, mb in ((5 * A.SUBSET_STATES_FACTOR, DEFAULT_LIMITS.max_subset_bytes),
                    (10**6 * A.SUBSET_STATES_FACTOR, 3000)):
        with pytest.raises(LimitError) as e:
            try:
                A._determinize(nfa, start, end, specials, dl, sub, "g", mb)
            except LimitError as x:
                raise A._subset_limit(x, sub, sub // A.SUBSET_STATES_FACTOR, "g") from None
        old.append(e.value)
    assert [(str(e), e.limit) for e in errs] == [(str(e), e.limit) for e in old]
    assert errs[0].limit == "max_dfa_states" and errs[1].limit == "max_subset_bytes"


def test_deadline_passed():
    nfa, start, end, specials, dl = _nfa(Grammar.single(Repeat(Lit(b"ab"), 0, 50)))
    dl.at = 0.0  # spent
    with pytest.raises(LimitError, match="max_compile_seconds"):
        A.minimal_dfa(nfa, start, end, specials, dl, 1000, "g", 0)


def test_empty_ok():
    # every path of the NFA reaches the end: not empty; the language is the same either way
    new, old = _both(Grammar.single(Lit(b"x")), empty_ok=True)
    assert_same_dfa(new, old, read_only=True)
    with pytest.raises(GrammarError):
        A.compile_dfa(Grammar.single(Seq((Lit(b"x"), ByteSet(())))))
