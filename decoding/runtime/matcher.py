"""Matcher: the cheap per-request cursor over a compiled grammar
(any :class:`~decoding.backends.contract.CompiledGrammar`).

Invariants
- ``state`` is always a live state (it can reach acceptance) until the matcher is
  finished (an end-of-generation token was accepted).
- :meth:`advance` never moves into a state outside the grammar: a disallowed token
  returns ``False`` and leaves the matcher unchanged.
- ``rollback(n)`` undoes the last ``n`` accepted tokens exactly.
- Sticky error (as llguidance): an exception raised by the compiled grammar inside
  :meth:`mask` / :meth:`allowed_ids` / :meth:`advance` / :meth:`forced_bytes`, or reported
  with :meth:`fail`, is recorded in ``error`` (the first one wins).  From then on only
  end-of-generation tokens are allowed, the output is not complete, and
  :meth:`raise_if_failed` raises :class:`~decoding.errors.ProcessorError` from it.
  :meth:`reset` clears it.
"""

from __future__ import annotations

import numpy as np

from decoding.backends.contract import EOG, FORBIDDEN, CompiledGrammar
from decoding.errors import DecodingError, ProcessorError

__all__ = ["Matcher"]


class Matcher:
    __slots__ = ("compiled", "state", "finished", "error", "_history", "_eog_mask", "_eog_ids")

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.state = 0
        self.finished = False
        self.error: BaseException | None = None
        self._history: list[int] = []
        self._eog_mask: np.ndarray | None = None
        self._eog_ids: np.ndarray | None = None

    def reset(self) -> None:
        """Start a new generation (forgets the history and any sticky error)."""
        self.state = 0
        self.finished = False
        self.error = None
        self._history.clear()

    # ------------------------------------------------------------------ sticky error
    def fail(self, error: BaseException) -> None:
        """Record ``error`` (unless one is already recorded): from now on only
        end-of-generation tokens are allowed."""
        if self.error is None:
            self.error = error

    def raise_if_failed(self) -> None:
        """Raise :class:`~decoding.errors.ProcessorError` from the recorded error, if any."""
        if self.error is not None:
            err = self.error
            raise ProcessorError(f"constrained decoding failed: {err}") from err

    def _eog_only(self) -> np.ndarray:
        if self._eog_mask is None:
            v = self.compiled.vocab
            ids = np.array(sorted(t for t in v.eog_ids if 0 <= t < v.n_tokens), dtype=np.intp)
            m = np.zeros(self.compiled.n_words, dtype=np.uint32)
            for t in ids.tolist():
                m[t >> 5] |= np.uint32(1 << (t & 31))
            m.setflags(write=False)
            ids.setflags(write=False)
            self._eog_mask, self._eog_ids = m, ids
        return self._eog_mask

    # ------------------------------------------------------------------ queries
    def mask(self) -> np.ndarray:
        """Read-only uint32 bitmask of allowed tokens (shared; do not modify)."""
        if self.finished:
            return np.zeros(self.compiled.n_words, dtype=np.uint32)
        if self.error is None:
            try:
                return self.compiled.mask(self.state)
            except Exception as e:  # noqa: BLE001 - sticky error, see the module docstring
                self.fail(e)
        return self._eog_only()

    def fill_mask(self, out: np.ndarray) -> None:
        """Write the allowed-token bitmask into the caller-owned uint32 buffer ``out``."""
        if out.dtype != np.uint32 or out.ndim != 1 or not out.flags.c_contiguous:
            raise DecodingError("Matcher.fill_mask: mask buffer must be a 1-D C-contiguous uint32 array")
        if out.shape[0] != self.compiled.n_words:
            raise DecodingError(f"Matcher.fill_mask: mask buffer has {out.shape[0]} words, vocabulary needs "
                                f"{self.compiled.n_words} (= ceil({self.compiled.vocab.n_tokens}/32))")
        out[:] = self.mask()

    def is_allowed(self, token: int) -> bool:
        m = self.mask()
        return 0 <= token < self.compiled.vocab.n_tokens and bool((int(m[token >> 5]) >> (token & 31)) & 1)

    def allowed_ids(self) -> np.ndarray:
        """Sorted ids of the allowed tokens (read-only)."""
        if self.finished:
            return np.zeros(0, dtype=np.intp)
        if self.error is None:
            try:
                return self.compiled.allowed_ids(self.state)
            except Exception as e:  # noqa: BLE001 - sticky error
                self.fail(e)
        self._eog_only()
        assert self._eog_ids is not None
        return self._eog_ids

    def is_accepting(self) -> bool:
        """True once the output is complete (never after an error, unless it ended first)."""
        if self.finished:
            return self.error is None
        if self.error is not None:
            return False
        try:
            return self.compiled.is_accepting(self.state)
        except Exception as e:  # noqa: BLE001 - sticky error
            self.fail(e)
            return False

    # ------------------------------------------------------------------ moves
    def advance(self, token: int) -> bool:
        """Consume ``token``.  Returns False (and changes nothing) if it is not allowed."""
        if self.finished:
            return False
        token = int(token)
        if self.error is not None:
            ns = EOG if token in self.compiled.vocab.eog_ids else FORBIDDEN
        else:
            try:
                ns = self.compiled.next_state(self.state, token)
            except Exception as e:  # noqa: BLE001 - sticky error
                self.fail(e)
                return False
        if ns == FORBIDDEN:
            return False
        self._history.append(self.state)
        if ns == EOG:
            self.finished = True
        else:
            self.state = ns
        return True

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self._history):
            raise DecodingError(f"Matcher.rollback: cannot roll back {n} tokens; {len(self._history)} were accepted")
        for _ in range(n):
            self.state = self._history.pop()
            self.finished = False

    def forced_bytes(self) -> bytes:
        """The bytes every continuation must start with (empty if there is a choice, the
        state is accepting, or after an error).  Specials are not included."""
        if self.finished or self.error is not None:
            return b""
        try:
            return self.compiled.forced_bytes(self.state)
        except Exception as e:  # noqa: BLE001 - sticky error
            self.fail(e)
            return b""
