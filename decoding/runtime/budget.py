"""Budget-aware closing: never start what cannot be finished within ``max_tokens``.

One :class:`BudgetMatcher` for every back-end: it uses only the contract's
``completion_cost`` and ``successor_costs`` (:mod:`decoding.backends.contract`).  With
``r`` tokens left it allows a text token only if the cost after it is at most ``r - 1``;
end-of-generation is allowed in accepting states.

Invariant: if ``completion_cost(0) <= max_tokens``, every walk under the budgeted mask ends
complete after at most ``max_tokens`` text tokens (the contract guarantees that from a state
of cost ``c > 0`` some allowed token has cost ``<= c - 1``).  Costs are exact on the DFA
back-end, an upper bound (bytes) on pushdown and inside a counted minimum on the counted
back-end (:mod:`decoding.backends.counted`), so there a budget may forbid a token that could
in fact still close.

Per compiled grammar, the largest successor cost of each state and the budgeted masks
(a pure function of state and tokens left) are shared by all its matchers in a
:class:`BudgetMemo` held in a weak-key map (nothing is stored in ``meta``).
"""

from __future__ import annotations

import threading

import numpy as np

from decoding import _native
from decoding.backends.contract import EOG, CompiledGrammar
from decoding.errors import GrammarError
from decoding.runtime.matcher import Matcher
from decoding.weakmemo import WeakMemo

__all__ = ["BudgetMatcher", "BudgetMemo", "budget_memo"]

_MAX_CACHED_MASKS = 2048
#: how each back-end's cost is counted, for the "too small" message
_COST_NOTE = {"pushdown": ", counting one token per byte",
              "counted": ", an upper bound where a minimum count is still to reach"}  # budgeted masks kept per compiled grammar (each holds one mask)


class BudgetMemo:
    """Budget data of one compiled grammar, shared by its matchers (thread-safe; every
    entry is a pure function of the grammar)."""

    __slots__ = ("_worst", "_masks", "_lock", "__weakref__")

    def __init__(self) -> None:
        self._worst: dict[int, int] = {}
        self._masks: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def worst(self, cg: CompiledGrammar, state: int) -> int:
        """Largest cost among the text tokens allowed in ``state`` (0 if none; an upper bound
        where the back-end gives one: then the budget is checked for fewer states, never
        wrongly skipped)."""
        hit = self._worst.get(state)
        if hit is None:
            hit = self._worst[state] = int(cg.worst_successor_cost(state))
        return hit

    def budgeted(self, cg: CompiledGrammar, state: int, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(mask, sorted ids) of the tokens allowed in ``state`` with ``r`` tokens left."""
        key = (state, r)
        hit = self._masks.get(key)
        if hit is None:
            ids, costs = cg.successor_costs(state)
            keep = np.ascontiguousarray(ids[(costs == EOG) | ((costs >= 0) & (costs <= r - 1))])
            m = np.empty(cg.n_words, dtype=np.uint32)
            _native.mask_from_ids(m, keep.astype(np.uint32))  # (np.bitwise_or.at: ms for 100k ids)
            m.setflags(write=False)
            keep.setflags(write=False)
            hit = (m, keep)
            with self._lock:
                if len(self._masks) >= _MAX_CACHED_MASKS:
                    self._masks.clear()
                self._masks[key] = hit
        return hit


#: the :class:`BudgetMemo` of a compiled grammar (one per grammar, freed with it)
budget_memo: "WeakMemo[CompiledGrammar, BudgetMemo]" = WeakMemo(lambda cg: BudgetMemo())


class BudgetMatcher(Matcher):
    """A :class:`~decoding.runtime.matcher.Matcher` that also enforces ``max_tokens`` text
    tokens in total.  Raises GrammarError if the start cannot be completed within them."""

    __slots__ = ("max_tokens", "_memo")

    def __init__(self, compiled: CompiledGrammar, max_tokens: int) -> None:
        super().__init__(compiled)
        self.max_tokens = int(max_tokens)
        need = compiled.completion_cost(0)
        if need > self.max_tokens:
            raise GrammarError(f"max_tokens={max_tokens} is too small: the shortest complete output "
                               f"needs {need} tokens with this vocabulary ({compiled.backend} back-end"
                               f"{_COST_NOTE.get(compiled.backend, '')})")
        self._memo = budget_memo(compiled)

    @property
    def remaining(self) -> int:
        return self.max_tokens - len(self._history)

    def _budgeted(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(mask, ids) when the budget restricts the plain mask now; None when every
        successor can still be completed (the plain mask is exact), when finished, or after
        an error (recorded as the sticky error)."""
        if self.finished or self.error is not None:
            return None
        try:
            r = self.remaining
            if r - 1 >= self._memo.worst(self.compiled, self.state):
                return None
            return self._memo.budgeted(self.compiled, self.state, r)
        except Exception as e:  # noqa: BLE001 - sticky error, see decoding.runtime.matcher
            self.fail(e)
            return None

    def mask(self) -> np.ndarray:
        hit = self._budgeted()
        return super().mask() if hit is None else hit[0]

    def allowed_ids(self) -> np.ndarray:
        hit = self._budgeted()
        return super().allowed_ids() if hit is None else hit[1]

    def advance(self, token: int) -> bool:
        token = int(token)
        if token not in self.compiled.vocab.eog_ids:
            hit = self._budgeted()
            if hit is not None:
                ids = hit[1]
                i = np.searchsorted(ids, token)
                if i >= len(ids) or ids[i] != token:
                    return False
        return super().advance(token)
