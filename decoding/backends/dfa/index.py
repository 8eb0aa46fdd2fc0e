"""DFA back-end: one explicit byte DFA plus, for each state, the set of allowed tokens.

:func:`compile_dfa_grammar` turns an IR grammar plus a :class:`~decoding.vocab.Vocab` into
a :class:`DFAGrammar` (a :class:`~decoding.backends.contract.CompiledGrammar`).  Masks are
computed by the native trie walk the first time a state is visited and stored once per
distinct mask in a :class:`~decoding.backends.masks.MaskTable`.

Invariants
- Allowed text tokens are exactly those whose whole byte string the DFA can consume from
  the state.  The DFA is pruned against the bytes this vocabulary can spell one token at a
  time, so every state reached by an allowed token can still reach acceptance: the mask
  is never empty before acceptance.
- A special (anchor) token is allowed when its special symbol has a transition; tokens
  used as specials never match as text.
- End-of-generation tokens are allowed exactly in accepting states.
- Budgets are exact: :class:`BudgetTable` holds the fewest text tokens from every state
  reachable from the start to acceptance (a shortest path over the token graph).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from decoding import _native
from decoding.backends.automaton import DFA, DEFAULT_MAX_STATES, _pure_python_dfa, compile_dfa
from decoding.backends.contract import COST_UNREACHABLE, EOG, FORBIDDEN
from decoding.backends.textloop import UNBOUNDED, PlainLoops, char_pairs, plain_chain, plain_chain_py, walk_tokens
from decoding.backends.masks import DEFAULT_MAX_MASKS, SPARSE_MAX, MaskTable
from decoding.backends.tables import PROBES, PROFILES, vocab_tables
from decoding.errors import LimitError, VocabError
from decoding.limits import Limits
from decoding.ir import Grammar
from decoding.vocab import Vocab

__all__ = ["DFAGrammar", "BudgetTable", "compile_dfa_grammar", "dfa_grammar"]

#: :meth:`DFAGrammar.successor_states` reads a state through the plain chain of the state "a"
#: leads to when their rows differ on at most this many byte classes (a declared key name's
#: next character, see ``_near_chain``)
NEAR_CHAIN_CLASSES = 4

@dataclass(frozen=True, eq=False)
class BudgetTable:
    """Exact budget figures of a :class:`DFAGrammar` (read-only int32 arrays, one entry per
    automaton state).

    ``min_tokens[s]``: fewest text tokens from ``s`` to an accepting state
    (``COST_UNREACHABLE`` for states not reachable from the start or that cannot finish);
    ``worst_successor[s]``: the largest ``min_tokens`` among the states the allowed text
    tokens of ``s`` lead to (0 if there are none)."""

    min_tokens: np.ndarray
    worst_successor: np.ndarray

    def __post_init__(self) -> None:
        for a in (self.min_tokens, self.worst_successor):
            if a.dtype != np.int32 or a.ndim != 1 or a.shape != self.min_tokens.shape:
                raise VocabError("budget table: min_tokens and worst_successor must be int32 arrays "
                                 "of one entry per automaton state")
            if a.flags.writeable:
                a.setflags(write=False)


@dataclass(eq=False)
class DFAGrammar:
    """A grammar compiled for one tokenizer: DFA + lazily memoized token masks.

    Satisfies :class:`~decoding.backends.contract.CompiledGrammar`.  Shareable between
    requests and threads; per-request state lives in
    :class:`~decoding.runtime.matcher.Matcher`.  The memos only ever grow with values that
    are a pure function of (DFA, vocabulary), so sharing them is safe.
    """

    dfa: DFA
    vocab: Vocab
    special_token_ids: tuple[int, ...]  # per DFA special symbol
    grammar_key: str = ""
    meta: dict = field(default_factory=dict)
    max_masks: int = DEFAULT_MAX_MASKS
    _state_mask: list = field(init=False, repr=False)  # mask id per state, -1: not computed (Python ints: cheap reads)
    _masks: MaskTable = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False)
    _classes: np.ndarray = field(init=False, repr=False)
    _table: np.ndarray = field(init=False, repr=False)
    _next: dict = field(init=False, repr=False)
    _budget: BudgetTable | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        d = self.dfa
        if d.n_classes > 256:
            raise LimitError("DFA back-end: more than 256 byte classes")
        t = np.ascontiguousarray(d.trans)
        if t.size and (t.min() < -1 or t.max() >= d.n_states):
            raise VocabError("DFA back-end: automaton table refers to a state that does not exist")
        self._table = t
        self._classes = np.ascontiguousarray(d.byte_class, dtype=np.uint8)
        self._state_mask = [-1] * d.n_states
        self._masks = MaskTable(self.vocab.n_tokens, max_masks=self.max_masks, where="DFA token index")
        self._lock = threading.Lock()
        self._budget_lock = threading.Lock()
        self._next = {}
        self._forced: dict[int, bytes] = {}  # forced_bytes per state
        self._special_set = frozenset(self.special_token_ids)
        self._eog_set = self.vocab.eog_ids  # (a frozenset)
        self._token_bytes = self.vocab.token_bytes
        self._special_col = {tid: d.n_classes + k for k, tid in enumerate(self.special_token_ids)}
        self._eog = np.array(sorted(self.vocab.eog_ids), dtype=np.int64)
        self._n_words = self.vocab.n_words
        # the end-of-generation bits of accepting states (one mask per vocabulary, shared)
        self._eog_mask: np.ndarray | None = vocab_tables(self.vocab).eog_mask if len(self._eog) else None
        self._tabs = None  # the vocabulary's tables (on the first walk)
        self._pure = False  # GD_PURE_PYTHON_DFA=1, read on the first walk
        self._masker = None  # the native state masker (False: the Python composition)
        self._ids_buf = np.empty(SPARSE_MAX, dtype=np.uint32)  # its digest's ids (under the lock)
        self._native_on = True
        self._profiles_tried = tuple(PROFILES)
        self._plain_steps: dict[str, dict[int, int | None]] = {}  # (the Python reference's memo)
        self._char_pairs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._loops: PlainLoops | None = None  # whole plain subtrees in full walks (native only)
        self._wide_tables: dict[int, np.ndarray] = {}  # per thread: the table and two scratch rows (_near_chain)

    @classmethod
    def from_precomputed(cls, dfa: DFA, vocab: Vocab, special_token_ids: Sequence[int],
                         state_mask: np.ndarray, masks: Sequence[np.ndarray], *, grammar_key: str = "",
                         meta: dict | None = None, budget: BudgetTable | None = None) -> "DFAGrammar":
        """A grammar whose masks were all computed at build time (see :mod:`decoding.artifacts.format`).

        ``state_mask[s]`` is the index in ``masks`` (a sequence of read-only uint32 arrays of
        ``vocab.n_words`` words; it may expand them lazily) of the mask of state ``s``.  Every
        state must have one, so no trie walk ever runs for this grammar.  ``budget``: the
        stored :class:`BudgetTable` (else computed on first use).
        """
        cg = cls(dfa, vocab, tuple(int(t) for t in special_token_ids), grammar_key=grammar_key,
                 meta=dict(meta or {}))
        sm = np.asarray(state_mask, dtype=np.int32)
        if sm.shape != (dfa.n_states,) or (sm.size and (int(sm.min()) < 0 or int(sm.max()) >= len(masks))):
            raise VocabError("DFA back-end: precomputed token index does not cover every automaton state")
        if budget is not None and budget.min_tokens.shape != (dfa.n_states,):
            raise VocabError("DFA back-end: precomputed budget table does not cover every automaton state")
        cg._state_mask = sm.tolist()
        cg._masks = MaskTable(vocab.n_tokens, max_masks=max(cg.max_masks, len(masks)), stored=masks,
                              where="DFA token index")
        cg._budget = budget
        return cg

    @property
    def native_masker(self) -> bool:
        """Whether masks are made by one native call per state (``_native.state_mask``); False:
        the Python composition, the reference (tests).  Setting it drops the masker."""
        return self._native_on

    @native_masker.setter
    def native_masker(self, on: bool) -> None:
        self._native_on = bool(on)
        self._masker = None

    @property
    def _loop_profiles(self) -> tuple[str, ...]:
        """The plain-text shortcuts tried, in order (tests clear them; setting drops the masker)."""
        return self._profiles_tried

    @_loop_profiles.setter
    def _loop_profiles(self, names: tuple[str, ...]) -> None:
        self._profiles_tried = tuple(names)
        self._masker = None

    # ------------------------------------------------------------------ contract
    @property
    def backend(self) -> str:
        return "dfa"

    @property
    def n_words(self) -> int:
        return self.vocab.n_words

    def mask(self, state: int) -> np.ndarray:
        """Read-only uint32 bitmask of the tokens allowed in ``state`` (memoized)."""
        mid = self._state_mask[state]
        if mid >= 0:
            return self._masks[mid]
        mid, m = self._compute_mask(state)
        return self._masks[mid] if m is None else m

    def allowed_ids(self, state: int) -> np.ndarray:
        """Sorted ids of the tokens allowed in ``state`` (cached per distinct mask)."""
        mid = self._state_mask[state]
        if mid < 0:
            mid = self._compute(state)
        return self._masks.ids(mid)

    def next_state(self, state: int, token: int) -> int:
        """State after ``token`` from ``state``; -1 if not allowed; -2 for end-of-generation
        in an accepting state."""
        key = (state, token)
        hit = self._next.get(key)
        if hit is not None:
            return hit
        tb = self._token_bytes
        if token in self._special_set:
            ns = int(self._table[state, self._special_col[token]])
        elif token in self._eog_set:
            ns = EOG if self.dfa.accepting[state] else FORBIDDEN
        elif 0 <= token < len(tb) and tb[token]:
            # natively over the masker's table once there is one (compiled grammars make it at
            # compile time; a grammar loaded with all its masks never needs one: no profiles)
            masker = self._masker
            ns = _native.state_run(masker, state, tb[token]) if masker else self.dfa.run(tb[token], state)
        else:
            ns = FORBIDDEN
        self._next[key] = ns
        return ns

    def is_accepting(self, state: int) -> bool:
        return bool(self.dfa.accepting[state])

    def accepts(self, data: bytes) -> bool:
        """Byte-level membership of ``data`` (no specials)."""
        return self.dfa.accepts(data)

    def forced_bytes(self, state: int) -> bytes:
        """The bytes every continuation from ``state`` must start with (empty if there is a
        choice or the state is accepting).  Specials are not included."""
        hit = self._forced.get(state)
        if hit is not None:
            return hit
        dfa = self.dfa
        out = bytearray()
        s = state
        while not dfa.accepting[s] and len(out) < 4096:
            row = dfa.trans[s]
            live = np.nonzero(row >= 0)[0]
            if len(live) != 1 or live[0] >= dfa.n_classes:
                break
            c = int(live[0])
            members = np.nonzero(dfa.byte_class == c)[0]
            if len(members) != 1:
                break
            out.append(int(members[0]))
            s = int(row[c])
        hit = self._forced[state] = bytes(out)  # (a pure function of the state)
        return hit

    def completion_cost(self, state: int) -> int:
        """Fewest text tokens that complete the output from ``state`` (exact)."""
        return int(self.budget_table().min_tokens[state])

    def successor_costs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed ids, exact completion cost after each; -2 for end-of-generation)."""
        ids, nxt = self.successors(state)
        mt = self.budget_table().min_tokens
        costs = np.where(nxt == EOG, EOG, np.where(nxt >= 0, mt[np.maximum(nxt, 0)], COST_UNREACHABLE))
        costs = costs.astype(np.int64)
        costs.setflags(write=False)
        return ids, costs

    def worst_successor_cost(self, state: int) -> int:
        """The largest cost among the text tokens allowed in ``state`` (exact; read from the
        budget table, which holds it for every state)."""
        return int(self.budget_table().worst_successor[state])

    def precompute(self) -> "DFAGrammar":
        """Compute the masks of every state now (build time)."""
        for s in range(self.dfa.n_states):
            self.mask(s)
        return self

    def stats(self) -> dict:
        return {
            "backend": self.backend,
            "states": self.dfa.n_states,
            "classes": self.dfa.n_classes,
            "masks_computed": sum(1 for mid in self._state_mask if mid >= 0),
            "distinct_masks": len(self._masks),
            "mask_bytes": self._masks.nbytes,
            "table_bytes": int(self._table.nbytes),
            "vocab": self.vocab.name,
            "fingerprint": self.vocab.fingerprint,
        }

    # ------------------------------------------------------------------ DFA-only
    @property
    def masks(self) -> MaskTable:
        """The distinct masks (indexed by :meth:`state_masks`)."""
        return self._masks

    def state_masks(self) -> np.ndarray:
        """int32[n_states]: the mask id of every state, ``-1`` where not computed yet (a copy)."""
        return np.array(self._state_mask, dtype=np.int32)

    def has_mask(self, state: int) -> bool:
        """Whether the mask of ``state`` is already computed (benchmarks: cold vs warm)."""
        return self._state_mask[state] >= 0

    def successors(self, state: int, bufs: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(allowed token ids, state after each) for ``state``; end-of-generation tokens map to
        -2.  Computed by one native trie walk (not memoized: used at build time and by budgets).
        ``bufs``: a (next-state int32[32 * n_words], scratch uint32[n_words]) pair to reuse
        across calls (only the entries at the allowed ids, written here, are read)."""
        ids = self.allowed_ids(state)
        if bufs is None:
            bufs = (np.full(self.n_words * 32, FORBIDDEN, dtype=np.int32), np.zeros(self.n_words, dtype=np.uint32))
        nxt_all, scratch = bufs
        _native.trie_walk(vocab_tables(self.vocab).trie, self._classes, self._table.reshape(-1),
                          self._table.shape[1], int(state), scratch, nxt_all)
        for k, tid in enumerate(self.special_token_ids):
            nxt_all[tid] = self._table[state, self.dfa.n_classes + k]
        for tid in self._eog:
            if int(tid) not in self._special_set:
                nxt_all[int(tid)] = EOG
        return ids, nxt_all[ids]

    def successor_states(self, state: int, bufs: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """The distinct states one text token or special leads to from ``state`` (sorted
        int32; end of generation left out): ``successors``' states, without its mask and,
        for a state on a uniform chain of plain characters (a string body: the states whose
        full trie walk is most of the walks' time), without walking the plain tokens: a plain
        token of ``m`` characters leads to the ``m``-th state of the chain (each plain
        character takes every chain state to the next one, as "a" does; see
        :mod:`decoding.backends.textloop`), so those are the chain's states at the plain
        tokens' character counts, and only the profile's small trie of other tokens is
        walked; a state that moves like a plain self-loop state except on a few byte classes
        is read through that state (:meth:`_near_chain`).  The walks' allowed tokens mark their
        states natively (``mask_mark_next``).  ``bufs``: as :meth:`successors`' (one pair per
        thread)."""
        if bufs is None:
            bufs = (np.full(self.n_words * 32, FORBIDDEN, dtype=np.int32), np.zeros(self.n_words, dtype=np.uint32))
        nxt_all, scratch = bufs
        tabs = self._tabs or vocab_tables(self.vocab)
        mark = np.zeros(self.dfa.n_states, dtype=np.uint8)  # (a sort of ~100k next states costs more)
        walks: list[tuple] = [(tabs.trie, self._table, int(state))]  # (trie, table, row) to walk
        if self._loop_profiles and not self._pure:
            row = self._table[state]
            cls = self._classes
            a = int(row[cls[0x61]])
            if a >= 0:
                for name in self._loop_profiles:
                    if any(row[cls[b]] != a for b in PROBES[name]):
                        continue
                    k = self._plain_chain(name, state)
                    if k is not None:
                        prof = tabs.profile(name)
                        mark[self._chain_states(state, min(k, prof.max_chars), prof)] = True
                        walks = [(prof.other_trie, self._table, int(state))]
                        break
                else:
                    if a != state:
                        walks = self._near_chain(state, a, tabs, mark) or walks
        flat_of: dict[int, np.ndarray] = {}
        for trie, table, r in walks:
            flat = flat_of.get(id(table))
            if flat is None:
                flat = flat_of[id(table)] = table.reshape(-1)
            _native.trie_walk(trie, self._classes, flat, table.shape[1], r, scratch, nxt_all)
            _native.mask_mark_next(scratch, self.vocab.n_tokens, nxt_all, mark)  # (the allowed tokens' states)
        if self.special_token_ids:
            sp = self._table[state, self.dfa.n_classes:]
            mark[sp[sp >= 0]] = True
        return np.flatnonzero(mark.view(bool)).astype(np.int32)  # (bool: numpy's fast nonzero)

    def _near_chain(self, state: int, t: int, tabs, mark: np.ndarray) -> list[tuple] | None:
        """The walks left for ``state`` when it moves like ``t``, a state that every plain
        character leads back to itself (where "a" leads: a map key's state inside a declared
        name's prefix, where every character but the name's next one goes on as any key),
        except on at most ``NEAR_CHAIN_CLASSES`` byte classes ``E``.  A token whose first
        byte is not in ``E`` goes where it goes from ``t``: the plain ones to ``t`` itself (set
        in ``mark`` when some plain token starts outside ``E``), the others by the profile's
        trie from ``state``'s row without ``E``; the tokens starting in ``E`` by the whole trie
        from ``state``'s row with ``E`` only (both rows added below the table, :meth:`_wide`).
        None: not such a state."""
        nb = self.dfa.n_classes
        row, rowt = self._table[state, :nb], self._table[t, :nb]
        diff = np.flatnonzero(row != rowt)
        cls = self._classes
        if not 0 < len(diff) <= NEAR_CHAIN_CLASSES or rowt[cls[0x61]] != t:  # (t loops on "a")
            return None
        for name in self._loop_profiles:
            if any(rowt[cls[b]] != t for b in PROBES[name]) or self._plain_chain(name, t) != UNBOUNDED:
                continue
            prof = tabs.profile(name)
            in_e = np.isin(cls, diff)
            if prof.first_bytes[~in_e].any():
                mark[t] = True
            # (a table of its own per call: the scratch rows are written here and read by the
            # walks, and another thread may be reading its own)
            wide = self._wide()
            r1, r2 = len(wide) - 2, len(wide) - 1
            wide[r1, :nb] = row
            wide[r1, diff] = -1
            wide[r2, :nb] = -1
            wide[r2, diff] = row[diff]
            return [(prof.other_trie, wide, r1), (tabs.trie, wide, r2)]
        return None

    def _wide(self) -> np.ndarray:
        """The table with two scratch rows below it (:meth:`_near_chain`), one per thread: made
        once by the thread's first call, dropped with :meth:`_drop_wide` (the budget table
        done)."""
        tables = self._wide_tables
        key = threading.get_ident()
        w = tables.get(key)
        if w is None:
            t = self._table
            w = tables[key] = np.concatenate([t, np.full((2, t.shape[1]), -1, dtype=t.dtype)])
        return w

    def _drop_wide(self) -> None:
        """Free this thread's table of :meth:`_wide`."""
        self._wide_tables.pop(threading.get_ident(), None)

    def _chain_states(self, state: int, upto: int, prof) -> np.ndarray:
        """The states after ``m`` plain characters from ``state``, for every character count
        ``m <= upto`` that some plain token of ``prof`` has (the chain of uniform steps, read
        along "a"; a cycle is followed once round)."""
        counts = prof.char_counts
        col = int(self._classes[0x61])
        chain = [int(state)]
        seen = {int(state): 0}
        s = int(state)
        for _ in range(upto):
            s = int(self._table[s, col])
            if s < 0:
                break
            if s in seen:  # a cycle: the states repeat from seen[s] on
                start = seen[s]
                period = len(chain) - start
                idx = counts[counts <= upto]
                idx = np.where(idx < len(chain), idx, start + (idx - start) % period)
                return np.asarray(chain, dtype=np.int32)[idx]
            seen[s] = len(chain)
            chain.append(s)
        idx = counts[counts < len(chain)]
        return np.asarray(chain, dtype=np.int32)[idx]

    def budget_table(self) -> BudgetTable:
        """The exact :class:`BudgetTable` (computed on first use over every state reachable
        from the start, or loaded from an artifact)."""
        if self._budget is None:
            with self._budget_lock:
                if self._budget is None:
                    self._budget = self._compute_budget()
        return self._budget

    # ------------------------------------------------------------------ internals
    def _compute_budget(self) -> BudgetTable:
        n = self.dfa.n_states
        succ: dict[int, np.ndarray] = {}
        seen = np.zeros(n, dtype=bool)
        seen[0] = True
        todo = deque([0])
        # each state's distinct successors (:meth:`successor_states`, with one reused pair of
        # buffers instead of a fresh vocabulary-wide array per state)
        bufs = (np.full(self.n_words * 32, FORBIDDEN, dtype=np.int32), np.zeros(self.n_words, dtype=np.uint32))
        while todo:
            s = todo.popleft()
            nxt = self.successor_states(s, bufs)
            succ[s] = nxt
            for t in nxt.tolist():
                if not seen[t]:
                    seen[t] = True
                    todo.append(t)
        self._drop_wide()
        rev: dict[int, list[int]] = {}
        for s, nxt in succ.items():
            for t in nxt.tolist():
                rev.setdefault(t, []).append(s)
        dist = np.full(n, COST_UNREACHABLE, dtype=np.int64)
        frontier = deque(int(s) for s in np.nonzero(self.dfa.accepting)[0])
        for s in frontier:
            dist[s] = 0
        while frontier:
            t = frontier.popleft()
            for s in rev.get(t, ()):
                if dist[s] == COST_UNREACHABLE:
                    dist[s] = dist[t] + 1
                    frontier.append(s)
        mt = dist.astype(np.int32)
        worst = np.zeros(n, dtype=np.int32)
        for s, nxt in succ.items():
            if len(nxt):
                worst[s] = int(mt[nxt].max())
        return BudgetTable(mt, worst)

    def _compute(self, state: int) -> int:
        """Mask id of ``state``, computing and interning its mask if needed."""
        return self._compute_mask(state)[0]

    def _compute_mask(self, state: int) -> tuple[int, np.ndarray | None]:
        """(mask id of ``state``, the read-only mask when this call made it natively, else
        None), computing and interning the mask if needed."""
        with self._lock:
            mid = self._state_mask[state]
            if mid >= 0:
                return mid, None
            m = np.empty(self._n_words, dtype=np.uint32)
            masker = self._masker if self._masker is not None else self._make_masker()
            if masker:
                # one native call: the mask, its digest and, when sparse, its id (the lock is
                # held: one call at a time uses the ids buffer)
                mid = self._masks.intern_state(masker, int(state), m, self._ids_buf)
                self._state_mask[state] = mid
                return mid, m
            self._walk(int(state), m)
            if self.special_token_ids:
                row = self._table[state]
                for k, tid in enumerate(self.special_token_ids):
                    m[tid >> 5] &= ~np.uint32(1 << (tid & 31))
                    if row[self.dfa.n_classes + k] >= 0:
                        m[tid >> 5] |= np.uint32(1 << (tid & 31))
            if self._eog_mask is not None and self.dfa.accepting[state]:
                _native.mask_or(m, m, self._eog_mask)
            mid = self._masks.intern(m)
            self._state_mask[state] = mid
            return mid, None

    def prepare(self) -> "DFAGrammar":
        """Make the state masker now (the compilers call it: its objects are warm then, and the
        first mask request is not the one to pay it)."""
        if self._masker is None:
            with self._lock:
                if self._masker is None:
                    self._make_masker()
        return self

    def _make_masker(self):
        """The native state masker (``_native.state_mask``: walk, plain tokens, special and
        end-of-generation bits and digest in one call, the same masks as :meth:`_walk` and the
        bits :meth:`_compute` adds), or False under ``GD_PURE_PYTHON_DFA=1`` or when
        ``native_masker`` is off (tests: the reference composition)."""
        tabs = self._tabs = self._tabs or vocab_tables(self.vocab)
        self._pure = _pure_python_dfa()
        if self._pure or not self.native_masker:
            self._masker = False
            return False
        # (the loop memos in self._loops, as the Python composition keeps them; the character
        # pairs are made natively, when first needed)
        loops = self._loops = PlainLoops(self.dfa.n_states, self._loop_profiles[0] if self._loop_profiles else "",
                                         self._char_pairs)
        n = self.dfa.n_states
        memos = tuple(loops.memo.setdefault(name, np.zeros(n, dtype=np.uint8)) for name in self._loop_profiles)
        self._masker = _native.state_masker(
            tabs.masker_profiles(tuple(self._loop_profiles)), self._classes, self._table.reshape(-1),
            self._table.shape[1], self.dfa.n_classes, np.array(self.special_token_ids, dtype=np.uint32),
            np.ascontiguousarray(self.dfa.accepting).view(np.uint8), self._eog_mask, memos)
        return self._masker

    def _walk(self, state: int, m: np.ndarray) -> None:
        """Text-token bits of ``state`` into ``m`` (overwritten): a walk of the whole vocabulary
        trie or, for a state on a uniform chain of plain characters (string bodies, XML text;
        see :mod:`decoding.backends.textloop`), the precomputed plain tokens of at most
        ``k`` characters plus a walk of the small trie of the other tokens."""
        tabs = self._tabs
        if tabs is None:
            tabs = self._tabs = vocab_tables(self.vocab)
            self._pure = _pure_python_dfa()
            if self._loop_profiles and not self._pure:
                self._loops = PlainLoops(self.dfa.n_states, self._loop_profiles[0], self._char_pairs)
        walk_tokens(tabs, self._classes, self._table, state, m, self._plain_chain, self._loop_profiles,
                    loops=self._loops if self._loop_profiles else None)

    def _plain_chain(self, name: str, state: int) -> int | None:
        """Plain characters consumable from ``state`` along uniform steps (UNBOUNDED if the
        chain cycles), or None if some step is not uniform (native; the Python reference
        :func:`~decoding.backends.textloop.plain_chain_py` with ``GD_PURE_PYTHON_DFA=1``)."""
        if self._pure:
            char_dfa = vocab_tables(self.vocab).profile(name).char_dfa
            return plain_chain_py(char_dfa, self.dfa.byte_class, self._table, state,
                                  self._plain_steps.setdefault(name, {}))
        pairs = self._char_pairs.get(name)
        if pairs is None:
            pairs = self._char_pairs[name] = char_pairs(vocab_tables(self.vocab).profile(name).char_dfa,
                                                        self.dfa.byte_class)
        tabs = self._tabs or vocab_tables(self.vocab)
        return plain_chain(pairs, self._table, state, max(1, tabs.profile(name).max_chars))


def compile_dfa_grammar(grammar: Grammar, vocab: Vocab, *, max_states: int = DEFAULT_MAX_STATES,
                        eager: bool = False, grammar_key: str = "", meta: dict | None = None,
                        max_masks: int = DEFAULT_MAX_MASKS, limits: Limits | None = None,
                        size_checked: bool = False) -> DFAGrammar:
    """Compile ``grammar`` for ``vocab`` with the DFA back-end (refs inlined, recursion
    unrolled to the grammar's depth bound; LimitError above ``max_states``).  Specials that
    are one control/user-defined token of the vocabulary are matched as that token, the
    others as literal text.  ``eager`` computes every mask now."""
    specials = grammar.specials()
    literal = [t for t in specials if vocab.special_token(t) is None]
    dfa = compile_dfa(grammar, max_states=max_states, literal_specials=literal, limits=limits,
                      size_checked=size_checked)
    return dfa_grammar(dfa, vocab, eager=eager, grammar_key=grammar_key, meta=meta, max_masks=max_masks)


def dfa_grammar(dfa: DFA, vocab: Vocab, *, eager: bool = False, grammar_key: str = "", meta: dict | None = None,
                max_masks: int = DEFAULT_MAX_MASKS) -> DFAGrammar:
    """The compiled grammar of a minimal byte DFA made already (:func:`compile_dfa`, or
    :func:`~decoding.backends.automaton.program_dfa`): pruned to the bytes ``vocab`` can
    produce, its specials matched as their tokens.  ``eager`` computes every mask now."""
    dfa = dfa.prune(vocab.single_byte_tokens())
    ids = tuple(int(vocab.special_token(t)) for t in dfa.specials)  # type: ignore[arg-type]
    cg = DFAGrammar(dfa, vocab, ids, grammar_key=grammar_key, meta=dict(meta or {}), max_masks=max_masks)
    cg.prepare()
    return cg.precompute() if eager else cg
