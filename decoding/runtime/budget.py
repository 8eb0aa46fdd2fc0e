"""Budget-aware closing: never start what cannot be finished within ``max_tokens``.

For each automaton state the index knows the fewest tokens needed to reach acceptance
(``min_tokens``, a shortest path over the token-level transition graph).  A
:class:`BudgetMatcher` with ``r`` tokens left allows a text token only if the state after
it can still be completed with ``r - 1`` tokens; end-of-generation is allowed in accepting
states.  Invariant: if the start state can be completed within the budget, every walk
under the budgeted mask ends complete after at most ``max_tokens`` text tokens.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from decoding.errors import GrammarError
from decoding.backends.dfa.index import CompiledGrammar
from decoding.runtime.matcher import Matcher

__all__ = ["min_tokens", "BudgetMatcher"]

_UNREACHABLE = np.iinfo(np.int32).max


def min_tokens(compiled: CompiledGrammar) -> np.ndarray:
    """int32[n_states]: fewest text tokens from each state to an accepting state
    (memoized on ``compiled``; unreachable states hold int32 max)."""
    memo = compiled.meta.get("_min_tokens")
    if memo is not None:
        return memo
    n = compiled.dfa.n_states
    succ: dict[int, np.ndarray] = {}
    seen = np.zeros(n, dtype=bool)
    seen[0] = True
    todo = deque([0])
    while todo:
        s = todo.popleft()
        _, nxt = compiled.successors(s)
        nxt = np.unique(nxt[nxt >= 0])
        succ[s] = nxt
        for t in nxt.tolist():
            if not seen[t]:
                seen[t] = True
                todo.append(t)
    rev: dict[int, list[int]] = {}
    for s, nxt in succ.items():
        for t in nxt.tolist():
            rev.setdefault(t, []).append(s)
    dist = np.full(n, _UNREACHABLE, dtype=np.int64)
    frontier = deque(int(s) for s in np.nonzero(compiled.dfa.accepting)[0])
    for s in frontier:
        dist[s] = 0
    while frontier:
        t = frontier.popleft()
        for s in rev.get(t, ()):
            if dist[s] == _UNREACHABLE:
                dist[s] = dist[t] + 1
                frontier.append(s)
    out = dist.astype(np.int32)
    worst = np.zeros(n, dtype=np.int32)  # largest min_tokens among a state's successors
    for s, nxt in succ.items():
        if len(nxt):
            worst[s] = int(out[nxt].max())
    out.setflags(write=False)
    worst.setflags(write=False)
    compiled.meta["_min_tokens"] = out
    compiled.meta["_worst_successor"] = worst
    return out


class BudgetMatcher(Matcher):
    """A :class:`Matcher` that also enforces ``max_tokens`` text tokens in total.  For a
    pushdown grammar (:mod:`decoding.backends.pushdown.index`) it is a :class:`PushdownBudgetMatcher`."""

    __slots__ = ("max_tokens", "dist", "worst", "_cache")

    def __new__(cls, compiled: CompiledGrammar, max_tokens: int) -> "BudgetMatcher":
        if cls is BudgetMatcher and not isinstance(compiled, CompiledGrammar):
            cls = PushdownBudgetMatcher
        return object.__new__(cls)

    def __init__(self, compiled: CompiledGrammar, max_tokens: int) -> None:
        super().__init__(compiled)
        self.max_tokens = int(max_tokens)
        self.dist = min_tokens(compiled)
        self.worst = compiled.meta["_worst_successor"]
        if self.dist[0] > self.max_tokens:
            raise GrammarError(f"max_tokens={max_tokens} is too small: the shortest complete output "
                               f"needs {int(self.dist[0])} tokens with this vocabulary")
        # budgeted masks are a pure function of (state, tokens left): shared by every matcher
        # of this compiled grammar, so later requests do not walk the trie again
        self._cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = \
            compiled.meta.setdefault("_budget_masks", {})

    @property
    def remaining(self) -> int:
        return self.max_tokens - len(self._history)

    def _budgeted(self) -> tuple[np.ndarray, np.ndarray]:
        r = self.remaining
        key = (self.state, r)
        hit = self._cache.get(key)
        if hit is None:
            ids, ok = self._within(r)
            keep = ids[ok]
            m = np.zeros(self.compiled.n_words, dtype=np.uint32)
            np.bitwise_or.at(m, keep >> 5, (np.uint32(1) << (keep & 31).astype(np.uint32)))
            m.setflags(write=False)
            keep.setflags(write=False)
            hit = (m, keep)
            if len(self._cache) > 2048:  # bound the memory (each entry holds one mask)
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _within(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed ids, which of them leave a structure completable with ``r - 1`` tokens;
        end-of-generation always)."""
        ids, nxt = self.compiled.successors(self.state)
        if r <= 0:
            return ids, nxt == -2
        return ids, (nxt == -2) | ((nxt >= 0) & (self.dist[np.maximum(nxt, 0)] <= r - 1))

    def _loose(self) -> bool:
        """True when every successor can still be completed: the plain mask is exact."""
        return self.remaining - 1 >= int(self.worst[self.state])

    def mask(self) -> np.ndarray:
        if self.finished or self._loose():
            return super().mask()
        return self._budgeted()[0]

    def allowed_ids(self) -> np.ndarray:
        if self.finished:
            return np.zeros(0, dtype=np.intp)
        if self._loose():
            return self.compiled.allowed_ids(self.state)
        return self._budgeted()[1]

    def allowed_tokens(self) -> np.ndarray:
        return self.allowed_ids()

    def advance(self, token: int) -> bool:
        if not self.finished and not self._loose() and token not in self.compiled.vocab.eog_ids:
            ids = self.allowed_ids()
            i = np.searchsorted(ids, token)
            if i >= len(ids) or ids[i] != token:
                return False
        return super().advance(token)


class PushdownBudgetMatcher(BudgetMatcher):
    """Budget for a pushdown grammar: a text token is allowed only if the configuration
    after it can be completed with ``min_bytes`` <= tokens left - 1 (every byte of a
    completion is a single token, so this is sufficient; it is conservative when
    multi-byte tokens could close faster)."""

    __slots__ = ()

    def __init__(self, compiled: Any, max_tokens: int) -> None:
        Matcher.__init__(self, compiled)
        self.max_tokens = int(max_tokens)
        need = compiled.min_bytes(0)
        if need > self.max_tokens:
            raise GrammarError(f"max_tokens={max_tokens} is too small: the shortest complete output "
                               f"needs {need} bytes (budgets of pushdown grammars count one token "
                               "per byte)")
        self._cache = compiled.meta.setdefault("_budget_masks", {})

    def _loose(self) -> bool:
        return self.remaining - 1 >= self.compiled.worst_successor_bytes(self.state)

    def _within(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        ids, nb = self.compiled.successor_min_bytes(self.state)
        if r <= 0:
            return ids, nb == -2
        return ids, (nb == -2) | ((nb >= 0) & (nb <= r - 1))
