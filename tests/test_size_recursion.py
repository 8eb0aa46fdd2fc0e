"""The unrolled size estimate of recursive rules (decoding/ir/size.py ``_Inline``): a rule that
refers to itself ``k`` times is unrolled into ``1 + k + ... + k**(max_depth - 1)`` copies, so
the estimate must grow that way too and stay at or above the NFA the builder really makes
(an estimate linear in the depth sent a 14-way recursive schema, kb_192, to DFA and lazy
attempts whose NFAs passed 2M states before the pushdown back-end got it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from decoding.backends.automaton import _Deadline, grammar_nfa
from decoding.frontends.gbnf.parse import parse_gbnf
from decoding.ir.size import estimate_size
from decoding.limits import DEFAULT_LIMITS

GRAMMARS = {
    1: 'root ::= "[" root? "]"',
    2: 'root ::= "(" root? "," root? ")"',
    3: 'root ::= "<" root? root? root? ">"',
    5: 'root ::= "{" (root | "a") (root | "b") (root | "c") (root | "d") (root | "e") "}"',
}


def _nfa_states(g) -> int:
    nfa, _, _, _ = grammar_nfa(g, DEFAULT_LIMITS, _Deadline(60.0, "test"), size_checked=True)
    return nfa.n if hasattr(nfa, "n") else len(nfa.eps)


@pytest.mark.parametrize("k", sorted(GRAMMARS))
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_estimate_covers_the_unrolled_nfa(k, depth):
    g = replace(parse_gbnf(GRAMMARS[k]), max_depth=depth)
    assert estimate_size(g) >= _nfa_states(g)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_estimate_grows_like_the_copies(k):
    sizes = [estimate_size(replace(parse_gbnf(GRAMMARS[k]), max_depth=d)) for d in (2, 3, 4)]
    assert sizes[1] > (k - 0.5) * sizes[0] and sizes[2] > (k - 0.5) * sizes[1], sizes
