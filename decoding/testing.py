"""Token-level random walks under the mask (property tests and evals).

:func:`random_walk` samples, at every step, one token uniformly among the tokens the
mask allows, until an end-of-generation token is drawn.  It asserts the core guarantee on
the way: the mask is never empty before the output is complete.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decoding.errors import DecodingError
from decoding.backends.dfa.index import CompiledGrammar
from decoding.runtime.matcher import Matcher

__all__ = ["WalkResult", "random_walk", "allowed_ids"]


@dataclass(frozen=True)
class WalkResult:
    tokens: tuple[int, ...]  # without the final end-of-generation token
    text: bytes  # bytes of the text tokens (specials rendered by their text)
    finished: bool  # an end-of-generation token was drawn


def allowed_ids(compiled: CompiledGrammar, state: int) -> np.ndarray:
    """Sorted token ids allowed in ``state`` (cached per distinct mask)."""
    return compiled.allowed_ids(state)


def random_walk(compiled: CompiledGrammar, rng: np.random.Generator, *, max_steps: int = 10_000,
                budget: int | None = None) -> WalkResult:
    """One uniform random walk.  Raises DecodingError if the mask is ever empty while the
    output is incomplete, or if an allowed token is refused by the matcher."""
    m = Matcher(compiled)
    if budget is not None:
        from decoding.runtime.budget import BudgetMatcher  # noqa: PLC0415 - optional feature

        m = BudgetMatcher(compiled, budget)  # type: ignore[assignment]
    toks: list[int] = []
    out = bytearray()
    vocab = compiled.vocab
    specials = {tid: t for t, tid in vocab.special_ids.items()}
    for _ in range(max_steps):
        ids = m.allowed_ids() if budget is not None else allowed_ids(compiled, m.state)  # type: ignore[attr-defined]
        if len(ids) == 0:
            raise DecodingError(f"empty mask in state {m.state} after {len(toks)} tokens: {bytes(out)[-80:]!r}")
        t = int(ids[rng.integers(len(ids))])
        if not m.advance(t):
            raise DecodingError(f"allowed token {t} refused in state {m.state}")
        if m.finished:
            return WalkResult(tuple(toks), bytes(out), True)
        toks.append(t)
        out += vocab.token_bytes[t] or specials.get(t, "").encode()
    return WalkResult(tuple(toks), bytes(out), False)
