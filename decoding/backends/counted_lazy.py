"""Counted strings over the lazy DFA (issue 14): a JSON Schema fast-path program whose long
strings are counted loops (``"`` ``U{lo}`` ``<en_i>`` ``U*`` ``(<tp_i> U{0,T})?`` ``"``, as
:func:`~decoding.backends.counted.counted_program` takes it) compiled with no explicit
automaton: its NFA is built once and determinised on demand, and the counter lives in the
runtime state.  Compiling costs the NFA; the eager counted back-end's subset construction of
the explicit tails and of the objects around them (quadratic in their optional properties) is
not made.

Invariants
- One lazy automaton over the NFA with each marker edge read both as an epsilon and as a move
  on its column: its subsets are those of the *free* automaton (every loop unbounded: the
  eager back-end's mask automaton, ``<en>`` transparent, ``<tp>`` never crossed by a token),
  so its masks are the free masks, and the ``<en_i>`` column of a state's row says that its
  subset holds the point where loop ``i``'s middle is entered.
- A state is (automaton state, loop ``k`` or -1, units ``c`` started in the middle, the state
  ``q`` of the walk of ``U*``: :class:`~decoding.backends.counted._UnitWalk`).  The middle is
  left exactly when that walk dies (the closing quote at a unit's boundary); a step that
  starts unit ``r_k + 1`` is refused.  Outside a middle, the next byte of a state whose row
  has an ``<en_i>`` move is in loop ``i``'s middle (counter 0): the program writes ``<en_i>``
  after the opening quote and ``lo`` units, with nothing else read there (checked on the NFA:
  no byte or epsilon edge leaves an ``<en>`` source), and the caller takes no program
  holding a union, where two strings could start at one place.
- Masks are exact.  A token the free automaton allows is really allowed exactly when each
  stretch of it inside a middle (from the state it starts in, with ``c`` units done, or from
  an ``<en_i>`` it crosses, with 0) starts at most ``r_i - c`` units: after a middle is left
  the rest reads the same states either way.  The first stretch (the middle the token starts
  in, or enters at its first byte) overruns only when ``r_k - c < M`` (``M``: the longest
  token's bytes): those tokens are a prefix of the unit walk's order for ``q``
  (:meth:`_UnitWalk.by_units`).  A later stretch holds at most ``M - 1`` bytes, so it
  overruns only a *medium* loop (``r_i < M - 1``), and only for the few tokens with such a
  suffix after a byte that can lead to that loop's ``<en_i>`` (``cross_ids``, at most
  :data:`CROSS_MAX`, found once at compile time): those are stepped exactly, the first
  stretch uncounted, once per (automaton state, loop, unit state) they are allowed in.
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
from decoding.backends.counted import Loop, _unit, _unit_walk, _UnitWalk, _walk
from decoding.backends.dfa.lazy import LazyDFAGrammar, lazy_dfa_of_nfa
from decoding.backends.masks import DEFAULT_MAX_MASKS, MaskTable
from decoding.errors import GrammarError
from decoding.ir import Dfa, Grammar, Node
from decoding.limits import Limits
from decoding.vocab import Vocab
from decoding.weakmemo import WeakMemo

__all__ = ["LazyCountedGrammar", "lazy_counted_program"]

#: the most tokens that may overrun a medium loop (room for fewer units than the longest
#: token) after crossing into it past their first byte; above it the program stays explicit
#: (each is stepped exactly once per state it is allowed in: :meth:`LazyCountedGrammar._later`)
CROSS_MAX = 32
_UNSET = object()
_NO_IDS = np.zeros(0, dtype=np.int64)


class _Both:
    """The flat NFA ``nfa`` with its special edges read both as epsilons and as moves on their
    columns (same states): its subsets are the free automaton's, and a state's row tells which
    markers its subset holds the source of."""

    def __init__(self, nfa) -> None:  # type: ignore[no-untyped-def]
        self.n = nfa.n
        self.eps_src = array("i", nfa.eps_src) + array("i", nfa.sp_src)
        self.eps_tgt = array("i", nfa.eps_tgt) + array("i", nfa.sp_tgt)
        self.e_src, self.e_lo, self.e_hi, self.e_tgt = nfa.e_src, nfa.e_lo, nfa.e_hi, nfa.e_tgt
        self.sp_src, self.sp_k, self.sp_tgt = nfa.sp_src, nfa.sp_k, nfa.sp_tgt


class LazyCountedGrammar:
    """A compiled grammar (:class:`~decoding.backends.contract.CompiledGrammar`) of counted
    strings over one lazy automaton (module docstring)."""

    def __init__(self, free: LazyDFAGrammar, room: Sequence[int], walk: _UnitWalk, *, cross_ids: Sequence[int] = (),
                 grammar_key: str = "", meta: dict | None = None, max_masks: int = DEFAULT_MAX_MASKS) -> None:
        self.free = free
        self._dfa = free.dfa
        self.room = tuple(room)
        self.vocab = free.vocab
        self.grammar_key = grammar_key
        self.meta = dict(meta or {})
        self.special_token_ids: tuple[int, ...] = ()
        self._walk = walk
        self._ustep = walk.step
        self._ustart = walk.starts
        self._m = self.vocab.max_token_bytes
        self._states: list[tuple[int, int, int, int]] = [(0, -1, 0, 0)]
        self._ids: dict[tuple[int, int, int, int], int] = {self._states[0]: 0}
        self._next: dict[tuple[int, int], int] = {}
        self._entry: dict[int, int] = {}
        self._near: dict[tuple[int, int, int, bytes], int] = {}
        self._off: dict[tuple[int, int], np.ndarray] = {}
        self._masks = MaskTable(self.vocab.n_tokens, max_masks=max_masks, where="lazy counted near-end masks")
        self._tb = self.vocab.token_bytes
        self._eog = frozenset(self.vocab.eog_ids)
        self._lock = threading.RLock()
        self._mask_of: dict[int, int | None] = {}
        self._later_of: dict[tuple[int, int, int], np.ndarray] = {}
        self._cross_ids = np.asarray(cross_ids, dtype=np.int64)

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
            data = self._tb[token] if 0 <= token < len(self._tb) else b""
            ns = FORBIDDEN
            if data:  # (the walk below steps the automaton the free masks read: no other step)
                with self._lock:
                    r = self._run(t, data)
                    if r is not None:
                        ns = self._intern(r)
        self._next[key] = ns
        return ns

    def is_accepting(self, state: int) -> bool:
        return self.free.is_accepting(self._states[state][0])

    def accepts(self, data: bytes) -> bool:
        with self._lock:
            r = self._run(self._states[0], data)
            return r is not None and self._dfa.accepting(r[0])

    def forced_bytes(self, state: int) -> bytes:
        t = self._states[state]
        return self.free.forced_bytes(t[0]) if t[1] < 0 else b""

    def completion_cost(self, state: int) -> int:
        c = self._dfa.min_moves(self._states[state][0])
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
                "free_states": fs["states"], "distinct_masks": fs["distinct_masks"] + len(self._masks),
                "mask_bytes": fs["mask_bytes"] + self._masks.nbytes, "vocab": self.vocab.name,
                "fingerprint": self.vocab.fingerprint}

    # ------------------------------------------------------------------ internals
    def _intern(self, t: tuple[int, int, int, int]) -> int:
        i = self._ids.get(t)
        if i is None:
            i = self._ids[t] = len(self._states)
            self._states.append(t)
        return i

    def _loop_entered(self, f: int) -> int:
        """The loop whose ``<en>`` source state ``f``'s subset holds (-1: none): outside a
        middle, the loop the next byte is in."""
        hit = self._entry.get(f)
        if hit is None:
            row = self._dfa.row(f)
            nc = self._dfa.n_classes
            on = [i for i in range(len(self.room)) if row[nc + 2 * i] >= 0]
            if len(on) > 1:  # (the fast path writes one <en> per string start, and no union: never)
                raise GrammarError(f"lazy counted grammar: state {f} is where loops {on} start (a union of "
                                   "counted strings, which the compiler does not give this back-end)")
            hit = self._entry[f] = on[0] if on else -1
        return hit

    def _run(self, t: tuple[int, ...], data: bytes, free_first: bool = False) -> tuple[int, int, int, int] | None:
        """The state after ``data`` from state ``t``, or None where a byte has no move or
        starts a unit past its loop's room.  ``free_first``: the units of the first stretch
        (the middle the token starts in, or enters at its first byte) are not counted
        (:meth:`_later`)."""
        dfa, step, start, room = self._dfa, self._ustep, self._ustart, self.room
        f, k, c, q = t
        counting = not free_first
        for j, b in enumerate(data):
            if k < 0:
                k = self._loop_entered(f)
                if k >= 0:
                    c = q = 0
                    if j:
                        counting = True
                else:
                    counting = True
            if k >= 0:
                nq = int(step[q, b])
                if nq < 0:  # the walk of U* dies: the middle is left (the closing quote)
                    k, c, q = -1, 0, 0
                    counting = True
                else:
                    if start[q, b]:
                        c += 1
                        if c > room[k] and counting:
                            return None
                    q = nq
            f = dfa.step(f, b)
            if f < 0:
                return None
        return f, k, c, q

    def _near_mask(self, state: int) -> int | None:
        """The mask id of ``state`` (None: the free automaton's): the free mask less the tokens
        that overrun the middle they start in or enter at their first byte (a prefix of the
        unit walk's order) and those that overrun a later one (:meth:`_later`)."""
        hit = self._mask_of.get(state, _UNSET)
        if hit is not _UNSET:
            return hit  # type: ignore[return-value]
        f, k, c, q = self._states[state]
        n = 0
        later = self._later(state) if self._cross_ids.size else _NO_IDS
        if k < 0:
            k = self._loop_entered(f)
            c = q = 0
        if k >= 0 and self.room[k] - c < self._m:
            ids, units = self._walk.by_units(q)
            n = int(np.searchsorted(-units, -(self.room[k] - c), side="left"))  # ids[:n]: more units than are left
        mid = None
        if n or later.size:
            key = (f, q, n, later.tobytes())
            mid = self._near.get(key)
            if mid is None:
                m = self.free.mask(f)
                if n:
                    m = m & ~self._removed(q, n)
                if later.size:
                    m = m.copy()
                    np.bitwise_and.at(m, later >> 5, ~(np.uint32(1) << (later & 31).astype(np.uint32)))
                with self._lock:
                    mid = self._near[key] = self._masks.intern(m)
        self._mask_of[state] = mid
        return mid

    def _later(self, state: int) -> np.ndarray:
        """The tokens of :attr:`_cross_ids` the free mask of ``state`` allows that overrun a
        middle they cross into after their first byte (memoized per state less its count:
        a crossing starts its count at 0)."""
        f, k, _, q = self._states[state]
        key = (f, k, q)
        hit = self._later_of.get(key)
        if hit is None:
            m = self.free.mask(f)
            ys = self._cross_ids
            ys = ys[(m[ys >> 5] >> (ys & 31).astype(np.uint32)) & 1 == 1]
            t = (f, k, 0, q)
            with self._lock:
                bad = [y for y in ys.tolist() if self._run(t, self._tb[y], free_first=True) is None]
                hit = self._later_of[key] = np.array(bad, dtype=np.int64)
        return hit

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


def _befores(nfa, ks: Sequence[int]) -> dict[int, np.ndarray]:  # type: ignore[no-untyped-def]
    """Per special ``k`` of ``ks``: bool[256], the bytes after which the NFA may take ``k``
    next (byte moves into a state that reaches one of its sources by epsilons or other
    specials): a superset of the bytes before a crossing of that marker."""
    def arr(a: array) -> np.ndarray:
        return np.frombuffer(a, dtype=a.typecode) if len(a) else np.zeros(0, dtype=a.typecode)

    sp_src, sp_k, sp_tgt = arr(nfa.sp_src), arr(nfa.sp_k), arr(nfa.sp_tgt)
    eps_src, eps_tgt = arr(nfa.eps_src), arr(nfa.eps_tgt)
    e_lo, e_hi, e_tgt = arr(nfa.e_lo).astype(np.int64), arr(nfa.e_hi).astype(np.int64), arr(nfa.e_tgt)
    out = {}
    for k in ks:
        other = sp_k != k
        src = np.concatenate([eps_src, sp_src[other]])
        tgt = np.concatenate([eps_tgt, sp_tgt[other]])
        seen = np.zeros(nfa.n, dtype=bool)
        seen[sp_src[~other]] = True
        while True:  # (backwards over epsilons: one pass per link of the longest chain)
            new = src[seen[tgt] & ~seen[src]]
            if not len(new):
                break
            seen[new] = True
        on = seen[e_tgt]
        d = np.zeros(257, dtype=np.int32)
        np.add.at(d, e_lo[on], 1)
        np.add.at(d, e_hi[on] + 1, -1)
        out[k] = np.cumsum(d[:256]) > 0
    return out


#: per unit walk (one per vocabulary and unit) and set of bytes ``before``: the tokens with a
#: suffix of more than :data:`_CROSS_FLOOR` bytes after a byte of ``before``, and the most
#: units such a suffix starts (:func:`_crossing`; about a ms once per process)
_CROSS_MEMO: "WeakMemo[_UnitWalk, dict]" = WeakMemo(lambda w: {})
_CROSS_FLOOR = 16


def _crossing(walk: _UnitWalk, vocab: Vocab, before: np.ndarray, room: int) -> np.ndarray:
    """The tokens with a suffix after a byte of ``before`` (offset 1 or more) that starts more
    than ``room`` units from a unit's start: those that may overrun a loop of that room after
    crossing into it past their first byte."""
    floor = min(room, _CROSS_FLOOR)
    memo = _CROSS_MEMO(walk)
    key = (np.packbits(before).tobytes(), floor)
    hit = memo.get(key)
    if hit is None:
        blob, off = vocab.blob()
        data = np.frombuffer(blob, dtype=np.uint8)
        st, end = off[:-1].astype(np.int64), off[1:].astype(np.int64)
        tok = np.flatnonzero(end - st >= floor + 2)  # (a suffix of at most ``floor`` bytes starts at most that many)
        n = end[tok] - st[tok] - floor - 1  # (per token: the bytes ``before`` may be, its suffix still long enough)
        tok = np.repeat(tok, n)
        pos = st[tok] + np.arange(len(tok)) - np.repeat(np.cumsum(n) - n, n)
        keep = before[data[pos]]
        pos, tok, end = pos[keep], tok[keep], end[tok[keep]]
        units = _walk(walk.step, walk.starts, data, pos + 1, end - pos - 1, 0)
        most = np.zeros(vocab.n_tokens, dtype=np.int64)
        np.maximum.at(most, tok, units)
        ids = np.flatnonzero(most > floor)
        hit = memo[key] = (ids, most[ids])
        if len(memo) >= 64:
            memo.clear()
            memo[key] = hit
    ids, most = hit
    return ids[most > room]


def lazy_counted_program(code: Sequence[int], lits: bytes, root: int, xs: Sequence[int], tail: int, unit_item: Node,
                         vocab: Vocab, *, limits: Limits | None = None, max_nfa: int | None = None,
                         grammar_key: str = "", meta: dict | None = None, max_masks: int = DEFAULT_MAX_MASKS,
                         leaves: Sequence[Dfa] = (), leaf_at: Sequence[int] = (),
                         lows: Sequence[int] | None = None) -> LazyCountedGrammar | None:
    """The grammar of a program with counted loops (``counted_program``'s arguments) over a
    lazy automaton, or None where it does not apply: a unit that does not qualify,
    ``program_nfa``'s None, a byte read where a middle is entered, or more than
    :data:`CROSS_MAX` tokens that may overrun a medium loop after crossing into it past their
    first byte (a ``minLength`` before it: the unit's bytes lead to its ``<en>``).  ``lows``:
    per loop, the units its string writes before its ``<en>`` as the JSON Schema fast path
    writes them (0: the opening quote right before it), which tells the bytes before a
    crossing without reading the NFA (:func:`_befores`)."""
    found = _unit(unit_item, Grammar.single(unit_item), limits)
    room = tuple(int(x) + tail for x in xs)
    if found is None or not room:
        return None
    first, unit = found
    loops = tuple(Loop(i, x, False, first, unit, tail=tail) for i, x in enumerate(xs))
    specials = tuple(t for lp in loops for t in (lp.en, lp.tp))
    built = program_nfa(array("i", code), lits, root, limits=limits, max_nfa=max_nfa, specials=specials,
                        leaves=leaves, leaf_at=leaf_at)
    if built is None:
        return None
    nfa, start, end, lim, _, what = built
    sp_src, sp_k = np.frombuffer(nfa.sp_src, dtype=np.int32), np.frombuffer(nfa.sp_k, dtype=np.int32)
    en_src = np.zeros(nfa.n, dtype=bool)
    en_src[sp_src[sp_k % 2 == 0]] = True
    if any(len(a) and en_src[np.frombuffer(a, dtype=np.int32)].any() for a in (nfa.e_src, nfa.eps_src)):
        return None  # (a byte read where a middle is entered, not in it: not the fast path's strings)
    walk = _unit_walk(unit, vocab, 1)
    crossing: set[int] = set()
    medium = [i for i, r in enumerate(room) if r + 1 < vocab.max_token_bytes]  # (a suffix past the first
    if medium:  # byte has at most M - 1 bytes)
        if lows is not None:  # (the fast path's layout: ``"`` right before <en_i>, or lows[i] units)
            quote = np.zeros(256, dtype=bool)
            quote[0x22] = True
            every = np.ones(256, dtype=bool)
            before = {2 * i: quote if lows[i] == 0 else every for i in medium}
        else:
            before = _befores(nfa, [2 * i for i in medium])
        for i in medium:
            crossing.update(_crossing(walk, vocab, before[2 * i], room[i]).tolist())
            if len(crossing) > CROSS_MAX:
                return None
    cross = np.array(sorted(crossing), dtype=np.int64)
    usable = vocab.single_byte_tokens()
    both = lazy_dfa_of_nfa(_Both(nfa), start, end, specials, usable_bytes=usable, limits=lim, what=what)
    m = dict(meta or {}, backend="counted")
    fg = LazyDFAGrammar(both, vocab, (), grammar_key=grammar_key, meta=m, max_masks=max_masks)
    return LazyCountedGrammar(fg, room, walk, cross_ids=cross, grammar_key=grammar_key, meta=m, max_masks=max_masks)
