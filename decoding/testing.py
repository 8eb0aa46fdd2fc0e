"""Token-level random walks under the mask, for property tests and evals (public API).

:func:`random_walk` works on any compiled grammar (every back-end, through the contract of
:mod:`decoding.backends.contract`), with or without a token budget.  At every step it draws
one token uniformly among the tokens the matcher allows, until an end-of-generation token
is drawn, and checks the core guarantees on the way: the mask is never empty before the
output is complete, and every allowed token is accepted by the matcher.  With ``budget``
it also checks that the walk ends complete within ``budget`` text tokens.

Example::

    import numpy as np
    from decoding.testing import random_walk

    w = random_walk(compiled, np.random.default_rng(0), budget=64)
    assert w.finished and compiled.accepts(w.text)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decoding.backends.contract import CompiledGrammar
from decoding.errors import DecodingError, GrammarError
from decoding.runtime.budget import BudgetMatcher
from decoding.runtime.matcher import Matcher

__all__ = ["WalkResult", "random_walk", "budgeted_walks"]


@dataclass(frozen=True)
class WalkResult:
    """One walk: ``tokens`` (without the final end-of-generation token), ``text`` (bytes of
    the text tokens; specials rendered by their text) and whether an end-of-generation
    token was drawn (``finished``: the output is complete)."""

    tokens: tuple[int, ...]
    text: bytes
    finished: bool


def random_walk(compiled: CompiledGrammar, rng: np.random.Generator, *, max_steps: int = 10_000,
                budget: int | None = None) -> WalkResult:
    """One uniform random walk over the tokens ``compiled`` allows.

    ``rng``: a :class:`numpy.random.Generator` (the walk is a pure function of it).
    ``max_steps``: stop unfinished after that many tokens (``finished=False``).
    ``budget``: walk under a :class:`~decoding.runtime.budget.BudgetMatcher` of that many
    text tokens (GrammarError if the grammar cannot be completed within it).

    Raises :class:`~decoding.errors.DecodingError` if the mask is ever empty while the
    output is incomplete, if an allowed token is refused, if the grammar raised inside the
    matcher (its sticky error), or if a budgeted walk exceeds its budget."""
    m = Matcher(compiled) if budget is None else BudgetMatcher(compiled, budget)
    toks: list[int] = []
    out = bytearray()
    vocab = compiled.vocab
    specials = {tid: t for t, tid in vocab.special_ids.items()}
    for _ in range(max_steps):
        ids = m.allowed_ids()
        m.raise_if_failed()
        if len(ids) == 0:
            raise DecodingError(f"random_walk: empty mask in state {m.state} after {len(toks)} tokens: "
                                f"{bytes(out)[-80:]!r}")
        t = int(ids[rng.integers(len(ids))])
        if not m.advance(t):
            m.raise_if_failed()
            raise DecodingError(f"random_walk: allowed token {t} refused in state {m.state}")
        if m.finished:
            return WalkResult(tuple(toks), bytes(out), True)
        toks.append(t)
        if budget is not None and len(toks) > budget:
            raise DecodingError(f"random_walk: {len(toks)} tokens exceed the budget of {budget}")
        out += vocab.token_bytes[t] or specials.get(t, "").encode()
    return WalkResult(tuple(toks), bytes(out), False)


def budgeted_walks(compiled: CompiledGrammar, rng: np.random.Generator, n: int, budget: int) -> list[WalkResult]:
    """``n`` random walks (:func:`random_walk`) under a budget of ``budget`` text tokens, or
    none when the grammar cannot be completed within that budget from its start (the
    budget's GrammarError).  Every other failure of a walk raises."""
    try:
        BudgetMatcher(compiled, budget)
    except GrammarError:
        return []
    return [random_walk(compiled, rng, budget=budget) for _ in range(n)]

