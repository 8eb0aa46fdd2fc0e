"""Matcher: the cheap per-request cursor over a :class:`~decoding.backends.dfa.index.CompiledGrammar`.

Invariants
- ``state`` is always a live automaton state (it can reach acceptance) until the
  matcher is finished (an end-of-generation token was accepted).
- :meth:`advance` never moves into a state outside the grammar: a disallowed token
  returns ``False`` and leaves the matcher unchanged.
- ``rollback(n)`` undoes the last ``n`` accepted tokens exactly.
"""

from __future__ import annotations

import numpy as np

from decoding import _native
from decoding.errors import DecodingError
from decoding.backends.dfa.index import CompiledGrammar

__all__ = ["Matcher"]


class Matcher:
    __slots__ = ("compiled", "state", "finished", "_history")

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.state = 0
        self.finished = False
        self._history: list[int] = []

    def reset(self) -> None:
        self.state = 0
        self.finished = False
        self._history.clear()

    # ------------------------------------------------------------------ queries
    def mask(self) -> np.ndarray:
        """Read-only uint32 bitmask of allowed tokens (shared; do not modify)."""
        if self.finished:
            return np.zeros(self.compiled.n_words, dtype=np.uint32)
        return self.compiled.mask(self.state)

    def fill_mask(self, out: np.ndarray) -> None:
        """Write the allowed-token bitmask into the caller-owned uint32 buffer ``out``."""
        if out.dtype != np.uint32 or out.ndim != 1 or not out.flags.c_contiguous:
            raise DecodingError("mask buffer must be a 1-D C-contiguous uint32 array")
        if out.shape[0] != self.compiled.n_words:
            raise DecodingError(f"mask buffer has {out.shape[0]} words, vocabulary needs "
                                f"{self.compiled.n_words} (= ceil({self.compiled.vocab.n_tokens}/32))")
        out[:] = self.mask()

    def is_allowed(self, token: int) -> bool:
        m = self.mask()
        return 0 <= token < self.compiled.vocab.n_tokens and bool((int(m[token >> 5]) >> (token & 31)) & 1)

    def allowed_tokens(self) -> np.ndarray:
        """Sorted ids of the allowed tokens (read-only)."""
        if self.finished:
            return np.zeros(0, dtype=np.intp)
        return self.compiled.allowed_ids(self.state)

    def n_allowed(self) -> int:
        return int(_native.mask_count(self.mask(), self.compiled.vocab.n_tokens))

    def is_accepting(self) -> bool:
        return self.finished or self.compiled.is_accepting(self.state)

    # ------------------------------------------------------------------ moves
    def advance(self, token: int) -> bool:
        """Consume ``token``.  Returns False (and changes nothing) if it is not allowed."""
        if self.finished:
            return False
        ns = self.compiled.next_state(self.state, int(token))
        if ns == -1:
            return False
        self._history.append(self.state)
        if ns == -2:
            self.finished = True
        else:
            self.state = ns
        return True

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self._history):
            raise DecodingError(f"cannot roll back {n} tokens; {len(self._history)} were accepted")
        for _ in range(n):
            self.state = self._history.pop()
            self.finished = False

    def forced_bytes(self) -> bytes:
        """The bytes every continuation must start with (empty if there is a choice or the
        state is accepting).  Specials are not included."""
        if self.finished:
            return b""
        return self.compiled.forced_bytes(self.state)
