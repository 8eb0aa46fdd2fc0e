"""Checks of a counted grammar against its oracle, the unrolled DFA of the same grammar
(shared by tests/test_counted_tail.py and tests/test_counted_medium.py)."""

from __future__ import annotations

import numpy as np

from decoding.runtime.matcher import Matcher
from decoding.testing import random_walk


def assert_same_language_at_bounds(cg, oracle, seed: int = 3, walks: int = 60) -> None:
    """``cg`` accepts exactly what ``oracle`` accepts among the oracle's random finished
    words and their near misses (a byte doubled, added or dropped at the ends: the bounds)."""
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(walks):
        w = random_walk(oracle, rng, max_steps=300).text
        words += [w, w[:-1] + w[-2:-1] + w[-1:], w[:1] + w, w[:-2] + w[-1:]]
    assert [cg.accepts(w) for w in words] == [oracle.accepts(w) for w in words]


def assert_budgeted_walks(cg, oracle, extra: int, walks: int = 15) -> None:
    """With ``max_tokens`` = ``cg``'s minimum cost + ``extra`` (at least the oracle's),
    budgeted random walks under ``cg`` finish within it, and the unrolled DFA takes the same
    tokens to acceptance."""
    budget = cg.completion_cost(0) + extra
    assert budget >= oracle.completion_cost(0)
    rng = np.random.default_rng(extra)
    for _ in range(walks):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished and len(w.tokens) <= budget
        m = Matcher(oracle)
        assert all(m.advance(t) for t in w.tokens) and m.is_accepting()
