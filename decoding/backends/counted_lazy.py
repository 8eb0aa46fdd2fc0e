"""Counted strings over the lazy DFA (issue 14): a JSON Schema fast-path program whose long
strings are counted loops (``"`` ``U{lo}`` ``<en_i>`` ``U*`` ``(<tp_i> U{0,T})?`` ``"``, as
:func:`~decoding.backends.counted.counted_program` takes it) compiled with no explicit
automaton: its NFA is built once and determinised on demand, and the counter lives in the
runtime state.  Compiling costs the NFA; the eager counted back-end's subset construction of
the explicit tails and of the objects around them (quadratic in their optional properties) is
not made.

Invariants
- Two lazy automata over the one NFA: the *free* one reads ``<en>`` and ``<tp>`` as epsilons,
  so its language is the program's with every loop unbounded: the eager back-end's mask
  automaton (``<en>`` transparent, ``<tp>`` never crossed by a token); the *marked* one keeps
  ``<en_i>`` as a column, so its walk tells where loop ``i``'s middle is entered.
- A state is (free state, marked state, loop ``k`` or -1, units ``c`` started in the middle,
  the state ``q`` of the walk of ``U*``: :class:`~decoding.backends.counted._UnitWalk`).  The
  middle is left exactly when that walk dies (the closing quote at a unit's boundary); a step
  that starts unit ``r_k + 1`` is refused.  A byte the marked state has no move for, from a
  state with an ``<en_i>`` move, takes ``<en_i>`` first: the program writes ``<en_i>`` after the
  opening quote and ``lo`` units, with no other way on (the caller takes no program holding a
  union, where two strings could start at one place).
- Masks are exact: every loop allows ``r >= M`` units (``M``: the longest token's bytes), so a
  token can overrun only the middle it starts in (one that enters a middle starts fewer than
  ``M`` units there).  With ``r_k - c >= M`` the free automaton's mask is the mask; else it
  loses the tokens that start more than ``r_k - c`` units before the walk dies (from the unit
  walk's table for ``q``: a prefix of one order, :meth:`_UnitWalk.by_units`).
- Costs are the free automaton's fewest moves to acceptance: an upper bound that one token per
  byte keeps (the shortest way out of a middle starts no unit; ``lo`` is at most the fast
  path's small bound).  Forced bytes only outside middles (the free automaton's).
- Not thread-safe beyond the lazy grammar's lock: every state is made under ``_lock``.
"""

from __future__ import annotations

import threading
from array import array
from typing import Sequence

import numpy as np

from decoding.backends.automaton import program_nfa
from decoding.backends.contract import COST_UNREACHABLE, EOG, FORBIDDEN, worst_text_cost
from decoding.backends.counted import Loop, _unit, _unit_walk, _UnitWalk
from decoding.backends.dfa.lazy import LazyDFA, LazyDFAGrammar, lazy_dfa_of_nfa
from decoding.backends.masks import DEFAULT_MAX_MASKS, MaskTable
from decoding.ir import Dfa, Grammar, Node
from decoding.limits import Limits
from decoding.vocab import Vocab

__all__ = ["LazyCountedGrammar", "lazy_counted_program"]


class _Epsilons:
    """The flat NFA ``nfa`` with its special edges read as epsilons (same states)."""

    def __init__(self, nfa) -> None:  # type: ignore[no-untyped-def]
        self.n = nfa.n
        self.eps_src = array("i", nfa.eps_src) + array("i", nfa.sp_src)
        self.eps_tgt = array("i", nfa.eps_tgt) + array("i", nfa.sp_tgt)
        self.e_src, self.e_lo, self.e_hi, self.e_tgt = nfa.e_src, nfa.e_lo, nfa.e_hi, nfa.e_tgt
        self.sp_src, self.sp_k, self.sp_tgt = array("i"), array("i"), array("i")


class LazyCountedGrammar:
    """A compiled grammar (:class:`~decoding.backends.contract.CompiledGrammar`) of counted
    long strings over two lazy automata (module docstring)."""

    def __init__(self, free: LazyDFAGrammar, marked: LazyDFA, room: Sequence[int], walk: _UnitWalk, *,
                 grammar_key: str = "", meta: dict | None = None, max_masks: int = DEFAULT_MAX_MASKS) -> None:
        self.free = free
        self.marked = marked
        self.room = tuple(room)
        self.vocab = free.vocab
        self.grammar_key = grammar_key
        self.meta = dict(meta or {})
        self.special_token_ids: tuple[int, ...] = ()
        self._walk = walk
        self._ustep = walk.step
        self._ustart = walk.starts
        self._m = self.vocab.max_token_bytes
        self._states: list[tuple[int, int, int, int, int]] = [(0, 0, -1, 0, 0)]
        self._ids: dict[tuple[int, int, int, int, int], int] = {self._states[0]: 0}
        self._next: dict[tuple[int, int], int] = {}
        self._entry: dict[int, int] = {}
        self._near: dict[tuple[int, int, int], int] = {}
        self._off: dict[tuple[int, int], np.ndarray] = {}
        self._masks = MaskTable(self.vocab.n_tokens, max_masks=max_masks, where="lazy counted near-end masks")
        self._tb = self.vocab.token_bytes
        self._eog = frozenset(self.vocab.eog_ids)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ contract
    @property
    def backend(self) -> str:
        return "counted"

    @property
    def n_words(self) -> int:
        return self.vocab.n_words

    def mask(self, state: int) -> np.ndarray:
        mid = self._near_mask(state)
        return self.free.mask(self._states[state][0]) if mid is None else self._masks[mid]

    def allowed_ids(self, state: int) -> np.ndarray:
        mid = self._near_mask(state)
        return self.free.allowed_ids(self._states[state][0]) if mid is None else self._masks.ids(mid)

    def next_state(self, state: int, token: int) -> int:
        key = (state, token)
        hit = self._next.get(key)
        if hit is not None:
            return hit
        t = self._states[state]
        if token in self._eog:
            ns = EOG if self.free.is_accepting(t[0]) else FORBIDDEN
        else:
            f = self.free.next_state(t[0], token)
            data = self._tb[token] if 0 <= token < len(self._tb) else b""
            ns = FORBIDDEN
            if f >= 0 and data:
                with self._lock:
                    r = self._run(t, data)
                    if r is not None:
                        ns = self._intern((f,) + r)
        self._next[key] = ns
        return ns

    def is_accepting(self, state: int) -> bool:
        return self.free.is_accepting(self._states[state][0])

    def accepts(self, data: bytes) -> bool:
        with self._lock:
            return self.free.accepts(data) and self._run(self._states[0], data) is not None

    def forced_bytes(self, state: int) -> bytes:
        t = self._states[state]
        return self.free.forced_bytes(t[0]) if t[2] < 0 else b""

    def completion_cost(self, state: int) -> int:
        c = self.free.dfa.min_moves(self._states[state][0])
        return COST_UNREACHABLE if c < 0 else c

    def successor_costs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        return self.free.bound_costs(self._states[state][0], self.allowed_ids(state))

    def worst_successor_cost(self, state: int) -> int:
        return worst_text_cost(self.successor_costs(state)[1])

    def precompute(self) -> "LazyCountedGrammar":
        self.mask(0)
        return self

    def stats(self) -> dict:
        fs = self.free.stats()
        return {"backend": "counted", "lazy": True, "states": len(self._states), "loops": len(self.room),
                "free_states": fs["states"], "marked_states": self.marked.n_states,
                "distinct_masks": fs["distinct_masks"] + len(self._masks),
                "mask_bytes": fs["mask_bytes"] + self._masks.nbytes, "vocab": self.vocab.name,
                "fingerprint": self.vocab.fingerprint}

    # ------------------------------------------------------------------ internals
    def _intern(self, t: tuple[int, int, int, int, int]) -> int:
        i = self._ids.get(t)
        if i is None:
            i = self._ids[t] = len(self._states)
            self._states.append(t)
        return i

    def _loop_entered(self, s: int) -> int:
        """The loop whose ``<en>`` marked state ``s`` has a move on (-1: none)."""
        hit = self._entry.get(s)
        if hit is None:
            row = self.marked.row(s)
            nc = self.marked.n_classes
            on = [i for i in range(len(self.room)) if row[nc + 2 * i] >= 0]
            if len(on) > 1:  # (the fast path writes one <en> per string start: never)
                raise RuntimeError(f"lazy counted grammar: marked state {s} enters loops {on}")
            hit = self._entry[s] = on[0] if on else -1
        return hit

    def _run(self, t: tuple[int, ...], data: bytes) -> tuple[int, int, int, int] | None:
        """(marked state, loop, units, unit state) after ``data`` from state ``t``, or None
        where a byte has no move or starts a unit past its loop's room."""
        mk, step, start, room = self.marked, self._ustep, self._ustart, self.room
        s, k, c, q = t[1], t[2], t[3], t[4]
        for b in data:
            if k < 0:
                n = mk.step(s, b)
                if n >= 0:
                    s = n
                    continue
                k = self._loop_entered(s)
                if k < 0:
                    return None
                s, c, q = mk.step_special(s, 2 * k), 0, 0
            nq = int(step[q, b])
            if nq < 0:  # the walk of U* dies: the middle is left (the closing quote)
                k = -1
                s = mk.step(s, b)
                if s < 0:
                    return None
                continue
            if start[q, b]:
                c += 1
                if c > room[k]:
                    return None
            q = nq
            s = mk.step(s, b)
            if s < 0:
                return None
        return s, k, c, q

    def _near_mask(self, state: int) -> int | None:
        """The mask id of ``state`` near the end of its middle (None: the free mask)."""
        f, _, k, c, q = self._states[state]
        if k < 0 or self.room[k] - c >= self._m:
            return None
        left = self.room[k] - c
        ids, units = self._walk.by_units(q)
        n = int(np.searchsorted(-units, -left, side="left"))  # ids[:n]: more units than are left
        if n == 0:
            return None
        key = (f, q, n)
        mid = self._near.get(key)
        if mid is None:
            m = self.free.mask(f) & ~self._removed(q, n)
            with self._lock:
                mid = self._near[key] = self._masks.intern(m)
        return mid

    def _removed(self, q: int, n: int) -> np.ndarray:
        """The bitmask of the ``n`` tokens that start the most units from unit state ``q``."""
        key = (q, n)
        hit = self._off.get(key)
        if hit is None:
            bits = np.zeros(self.n_words * 32, dtype=bool)
            bits[self._walk.by_units(q)[0][:n]] = True
            hit = np.packbits(bits, bitorder="little").view("<u4").astype(np.uint32)
            with self._lock:
                if len(self._off) >= 256:
                    self._off.clear()
                self._off[key] = hit
        return hit


def lazy_counted_program(code: Sequence[int], lits: bytes, root: int, xs: Sequence[int], tail: int, unit_item: Node,
                         vocab: Vocab, *, limits: Limits | None = None, max_nfa: int | None = None,
                         grammar_key: str = "", meta: dict | None = None, max_masks: int = DEFAULT_MAX_MASKS,
                         leaves: Sequence[Dfa] = (), leaf_at: Sequence[int] = ()) -> LazyCountedGrammar | None:
    """The grammar of a program with counted loops (``counted_program``'s arguments) over lazy
    automata, or None where it does not apply: a loop with room for fewer units than the
    longest token's bytes, a unit that does not qualify, or ``program_nfa``'s None."""
    found = _unit(unit_item, Grammar.single(unit_item), limits)
    room = tuple(int(x) + tail for x in xs)
    if found is None or not room or min(room) < vocab.max_token_bytes:
        return None
    first, unit = found
    loops = tuple(Loop(i, x, False, first, unit, tail=tail) for i, x in enumerate(xs))
    specials = tuple(t for lp in loops for t in (lp.en, lp.tp))
    built = program_nfa(array("i", code), lits, root, limits=limits, max_nfa=max_nfa, specials=specials,
                        leaves=leaves, leaf_at=leaf_at)
    if built is None:
        return None
    nfa, start, end, lim, _, what = built
    usable = vocab.single_byte_tokens()
    marked = lazy_dfa_of_nfa(nfa, start, end, specials, usable_bytes=usable, limits=lim, what=what)
    free = lazy_dfa_of_nfa(_Epsilons(nfa), start, end, (), usable_bytes=usable, limits=lim, what=what)
    m = dict(meta or {}, backend="counted")
    fg = LazyDFAGrammar(free, vocab, (), grammar_key=grammar_key, meta=m, max_masks=max_masks)
    return LazyCountedGrammar(fg, marked, room, _unit_walk(unit, vocab, 1), grammar_key=grammar_key, meta=m,
                              max_masks=max_masks)
