"""Lazy DFA back-end: the grammar's byte DFA determinised one state at a time, when a mask
walk, a token or a budget query first reaches it (``native/src/dfa_build.c``, ``gd_lazy``).

Compiling builds only the Thompson NFA (in C) and trims it; no subset construction, no
minimisation.  A grammar whose explicit DFA would take long to build or a lot of memory
(Kubernetes' large objects: 100-500 ms eagerly) compiles in the time of its NFA, and pays for
the states a generation visits.

Invariants
- The NFA is trimmed before any state is made: an NFA state that cannot reach the end over
  *usable* symbols (a byte some token spells on its own, or a special) is dropped, so every
  DFA state made is live: it reaches acceptance over usable symbols, and the mask is never
  empty before acceptance (the eager back-end's prune, done on the NFA).
- A state's mask is one native call (``_native.lazy_masker``, ``gd_lazy_state_mask``); the
  composition of :meth:`LazyDFAGrammar._walk` plus the special and end-of-generation bits in
  Python is its reference (``native_masker = False``, or ``GD_PURE_PYTHON_DFA=1``).
- Same language and same masks as :class:`~decoding.backends.dfa.index.DFAGrammar` over the
  eager DFA of the same grammar (every byte of a byte-level vocabulary is a token on its own);
  states are numbered in the order they are made, not minimised (equal masks are interned).
- Budgets are exact (the fewest text tokens, as the eager back-end's) once a budget query
  (``completion_cost``, ``successor_costs``, ``worst_successor_cost``) has made the automaton
  explicit: every reachable state, minimised, and a
  :class:`~decoding.backends.dfa.index.DFAGrammar` over the minimal DFA for the
  :class:`~decoding.backends.dfa.index.BudgetTable`, read through each state's block; only
  when it has more than :data:`EXACT_BUDGET_STATES` states is ``completion_cost(s)`` the
  upper bound of the fewest *moves* (bytes or specials) from ``s`` to acceptance, each of
  which one token can make.
- The automaton object is not thread-safe; every native call on it holds the GIL and the
  grammar's lock.  Its size is bounded by ``Limits.max_subset_bytes`` (a memory bound): past
  it a mask or a step raises :class:`~decoding.errors.LimitError`.
- Artifacts hold explicit DFAs: :meth:`LazyDFAGrammar.to_dfa_grammar` makes every reachable
  state and minimises (the artifact writer calls it).
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from decoding import _native
from decoding.backends.automaton import (DFA, SUBSET_STATES_FACTOR, _Deadline, _pure_python_dfa, _trimmed_minimal,
                                         grammar_nfa, minimal_dfa, program_nfa)
from decoding.backends.contract import COST_UNREACHABLE, EOG, FORBIDDEN, worst_text_cost
from decoding.backends.dfa.index import DFAGrammar, dfa_grammar
from decoding.backends.masks import DEFAULT_MAX_MASKS, SPARSE_MAX, MaskTable
from decoding.backends.tables import PROBES, PROFILES, vocab_tables
from decoding.backends.textloop import UNBOUNDED, char_pairs
from decoding.errors import GrammarError, LimitError
from decoding.ir import Dfa, Grammar
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.vocab import Vocab

__all__ = ["LazyDFA", "LazyDFAGrammar", "compile_lazy_dfa", "compile_lazy_grammar", "lazy_dfa_of_nfa", "program_grammar"]

_SLOTS = {name: k for k, name in enumerate(PROFILES)}  # the native plain-loop memo of each profile
#: a budget query makes the automaton explicit for exact budgets when it has at most this many
#: states, then minimises it (paid by the first budget query; the budget table reads each
#: minimal state's successor states, with the plain-chain shortcuts of
#: :meth:`DFAGrammar.successor_states`: kb_1110, 7,505 states made, ~0.2-0.3 s); above, the
#: move-count bound (an upper bound: one token per byte)
EXACT_BUDGET_STATES = 10_000


class LazyDFA:
    """A byte DFA made on demand (``gd_lazy``).  State 0 is the start; ``-1``: no transition.
    Columns ``0..n_classes-1`` are byte classes (``byte_class[b]``), ``n_classes + k`` the
    special ``specials[k]``."""

    def __init__(self, cap: object, specials: tuple[str, ...], what: str) -> None:
        self._cap = cap
        self.specials = specials
        self.what = what
        _, _, self.n_classes, self.nsym, _, bcb = _native.lazy_info(cap)
        self.byte_class = np.frombuffer(bcb, dtype=np.uint16)
        self.classes_u8 = self.byte_class.astype(np.uint8)

    def _call(self, fn, *args):  # type: ignore[no-untyped-def]
        try:
            return fn(self._cap, *args)
        except OverflowError as e:
            raise LimitError(f"{self.what}: the lazily made automaton exceeds its memory bound "
                             f"(limit max_subset_bytes; {e})", limit="max_subset_bytes") from None

    @property
    def n_states(self) -> int:
        """States made so far."""
        return int(_native.lazy_info(self._cap)[0])

    def info(self) -> dict:
        n, expanded, ncls, nsym, nbytes, _ = _native.lazy_info(self._cap)
        return {"states": n, "expanded": expanded, "classes": ncls, "bytes": nbytes}

    def step(self, state: int, byte: int) -> int:
        return int(self._call(_native.lazy_step, state, int(self.byte_class[byte])))

    def step_special(self, state: int, k: int) -> int:
        return int(self._call(_native.lazy_step, state, self.n_classes + k))

    def run(self, data: bytes, state: int = 0) -> int:
        return int(self._call(_native.lazy_run, state, data))

    def accepts(self, data: bytes) -> bool:
        s = self.run(data)
        return s >= 0 and self.accepting(s)

    def accepting(self, state: int) -> bool:
        return bool(_native.lazy_state(self._cap, state)[0])

    def min_moves(self, state: int) -> int:
        """Fewest moves (usable bytes or specials) from ``state`` to acceptance."""
        return int(_native.lazy_state(self._cap, state)[1])

    def row(self, state: int) -> np.ndarray:
        out = np.empty(self.nsym, dtype=np.int32)
        self._call(_native.lazy_row, state, out)
        return out

    def explicit(self, max_states: int | None = None) -> DFA | None:
        """Every state reachable from the start, made now, as an explicit :class:`DFA` (same
        numbering; not minimised); None once more than ``max_states`` (None: no bound) exist."""
        rows = []
        s = 0
        while s < self.n_states:
            if max_states is not None and self.n_states > max_states:
                return None
            rows.append(self.row(s))
            s += 1
        trans = np.stack(rows) if rows else np.zeros((0, self.nsym), dtype=np.int32)
        acc = np.array([self.accepting(i) for i in range(len(rows))], dtype=bool)
        bc = self.byte_class.copy()
        for a in (trans, acc, bc):
            a.setflags(write=False)
        return DFA(bc, trans, acc, self.specials, self.n_classes, trimmed=True)


def compile_lazy_dfa(grammar: Grammar, *, usable_bytes: np.ndarray | None = None,
                     literal_specials: Iterable[str] = (), limits: Limits | None = None,
                     size_checked: bool = False) -> LazyDFA:
    """The NFA of ``grammar`` (as :func:`~decoding.backends.automaton.compile_dfa` builds it)
    as a :class:`LazyDFA`, trimmed to ``usable_bytes`` (bool[256]; None: every byte).
    GrammarError if no usable string is accepted; LimitError past the NFA limits."""
    lim = DEFAULT_LIMITS if limits is None else limits
    what = f"grammar '{grammar.start}'"
    nfa, start, end, specials = grammar_nfa(grammar, lim, _Deadline(lim.max_compile_seconds, what),
                                            literal_specials=literal_specials, size_checked=size_checked,
                                            max_dfa=lim.max_dfa_states, flat=True)
    return lazy_dfa_of_nfa(nfa, start, end, specials, usable_bytes=usable_bytes, limits=lim, what=what)


def lazy_dfa_of_nfa(nfa, start: int, end: int, specials: tuple[str, ...], *,  # type: ignore[no-untyped-def]
                    usable_bytes: np.ndarray | None, limits: Limits, what: str) -> LazyDFA:
    """The :class:`LazyDFA` of a flat NFA built already (``grammar_nfa``, ``program_nfa``),
    trimmed to ``usable_bytes``; the errors of :func:`compile_lazy_dfa`."""
    ok = None if usable_bytes is None else np.ascontiguousarray(usable_bytes[:256], dtype=np.uint8)
    max_states = min(max(1, limits.max_dfa_states) * SUBSET_STATES_FACTOR, 2**31 - 1)
    try:
        cap = _native.lazy_new(nfa.n, start, end, nfa.eps_src, nfa.eps_tgt, nfa.e_src, nfa.e_lo, nfa.e_hi,
                               nfa.e_tgt, nfa.sp_src, nfa.sp_k, nfa.sp_tgt, len(specials), ok, max_states,
                               max(0, int(limits.max_subset_bytes)))
    except ValueError as e:
        if "empty" in str(e):
            raise GrammarError(f"{what} accepts no string that this vocabulary can spell") from None
        raise
    except OverflowError as e:  # its start state alone is past the memory bound
        raise LimitError(f"{what}: the lazily made automaton exceeds its memory bound (limit max_subset_bytes; "
                         f"{e})", limit="max_subset_bytes", value=limits.max_subset_bytes) from None
    return LazyDFA(cap, specials, what)


def program_grammar(code: array, lits: bytes, root: int, vocab: Vocab, *, lazy_above: int | None,
                    limits: Limits | None = None, max_nfa: int | None = None, max_states: int | None = None,
                    leaves: Sequence[Dfa] = (), leaf_at: Sequence[int] = (), grammar_key: str = "",
                    meta: dict | None = None, max_masks: int = DEFAULT_MAX_MASKS,
                    eager: bool = False) -> "DFAGrammar | LazyDFAGrammar | None":
    """The compiled grammar of a program (:func:`~decoding.backends.automaton.program_dfa`'s
    arguments, no specials): its NFA built once, then determinised lazily
    (:class:`LazyDFAGrammar`, meta ``backend="lazy"``) when it has more than ``lazy_above``
    states, else the minimal DFA (:func:`~decoding.backends.dfa.index.dfa_grammar`).  The
    same language either way (the lazy one's subset construction is the eager one's, made
    state by state).  None where ``program_dfa`` returns None."""
    built = program_nfa(code, lits, root, limits=limits, max_nfa=max_nfa, leaves=leaves, leaf_at=leaf_at)
    if built is None:
        return None
    nfa, start, end, lim, deadline, what = built
    if lazy_above is not None and nfa.n > lazy_above:
        d = lazy_dfa_of_nfa(nfa, start, end, (), usable_bytes=vocab.single_byte_tokens(), limits=lim, what=what)
        cg = LazyDFAGrammar(d, vocab, (), grammar_key=grammar_key, meta=dict(meta or {}, backend="lazy"),
                            max_masks=max_masks)
        return cg.precompute() if eager else cg
    dfa = minimal_dfa(nfa, start, end, (), deadline, lim.max_dfa_states if max_states is None else max_states, what,
                      lim.max_subset_bytes)
    return dfa_grammar(dfa, vocab, eager=eager, grammar_key=grammar_key, meta=meta, max_masks=max_masks)


#: the token of a special column no token spells (the native masker skips it)
NO_TOKEN = 0xFFFFFFFF


@dataclass(eq=False)
class LazyDFAGrammar:
    """A grammar compiled for one tokenizer over a :class:`LazyDFA` (satisfies
    :class:`~decoding.backends.contract.CompiledGrammar`; shareable between requests and
    threads: the automaton and the memos only grow, under one lock)."""

    dfa: LazyDFA
    vocab: Vocab
    special_token_ids: tuple[int, ...]
    grammar_key: str = ""
    meta: dict = field(default_factory=dict)
    max_masks: int = DEFAULT_MAX_MASKS
    _lock: threading.RLock = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()
        self._state_mask: dict[int, int] = {}
        self._masks = MaskTable(self.vocab.n_tokens, max_masks=self.max_masks, where="lazy DFA token index")
        self._next: dict[tuple[int, int], int] = {}
        self._special_set = frozenset(self.special_token_ids)
        self._special_col = {tid: self.dfa.n_classes + k for k, tid in enumerate(self.special_token_ids)}
        self._eog = sorted(self.vocab.eog_ids)
        self._eog_set = frozenset(self._eog)
        self._token_bytes = self.vocab.token_bytes
        self._eog_mask = vocab_tables(self.vocab).eog_mask if self._eog else None
        self._pairs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._bulk = next(iter(PROFILES))  # the profile of the whole-subtree shortcut (see textloop.PlainLoops)
        self._exact_cg: DFAGrammar | bool | None = None  # (see _exact; False: too many states)
        self._forced: dict[int, bytes] = {}  # forced_bytes per state
        #: the native masker (``_native.lazy_masker``: the composition of :meth:`_walk` plus the
        #: special and end-of-generation bits and the digest in one call), made on the first
        #: mask; False: the Python composition (``GD_PURE_PYTHON_DFA=1``, or ``native_masker``
        #: off: the tests' reference)
        self._masker = None
        self.native_masker = True
        self._ids_buf = np.empty(SPARSE_MAX, dtype=np.uint32)

    # ------------------------------------------------------------------ contract
    @property
    def backend(self) -> str:
        return "lazy"

    @property
    def n_words(self) -> int:
        return self.vocab.n_words

    def mask(self, state: int) -> np.ndarray:
        """Read-only uint32 bitmask of the tokens allowed in ``state`` (memoized)."""
        mid = self._state_mask.get(state)
        if mid is not None:
            return self._masks[mid]
        mid, m = self._compute_mask(state)
        return self._masks[mid] if m is None else m

    def allowed_ids(self, state: int) -> np.ndarray:
        mid = self._state_mask.get(state)
        return self._masks.ids(self._compute(state) if mid is None else mid)

    def next_state(self, state: int, token: int) -> int:
        key = (state, token)
        hit = self._next.get(key)
        if hit is not None:
            return hit
        tb = self._token_bytes
        with self._lock:
            if token in self._special_set:
                ns = self.dfa._call(_native.lazy_step, state, self._special_col[token])
            elif token in self._eog_set:
                ns = EOG if self.dfa.accepting(state) else FORBIDDEN
            elif 0 <= token < len(tb) and tb[token]:
                ns = self.dfa._call(_native.lazy_run, state, tb[token])
            else:
                ns = FORBIDDEN
        ns = int(ns)
        self._next[key] = ns
        return ns

    def is_accepting(self, state: int) -> bool:
        return self.dfa.accepting(state)

    def accepts(self, data: bytes) -> bool:
        with self._lock:
            return self.dfa.accepts(data)

    def forced_bytes(self, state: int) -> bytes:
        """The bytes every continuation from ``state`` must start with (specials excluded;
        memoized per state: a pure function of the automaton)."""
        hit = self._forced.get(state)
        if hit is not None:
            return hit
        out = bytearray()
        s = state
        with self._lock:
            while not self.dfa.accepting(s) and len(out) < 4096:
                row = self.dfa.row(s)
                live = np.nonzero(row >= 0)[0]
                if len(live) != 1 or live[0] >= self.dfa.n_classes:
                    break
                members = np.nonzero(self.dfa.byte_class == live[0])[0]
                if len(members) != 1:
                    break
                out.append(int(members[0]))
                s = int(row[live[0]])
        forced = self._forced[state] = bytes(out)
        return forced

    def completion_cost(self, state: int) -> int:
        """The fewest text tokens that complete from ``state`` (exact: see :meth:`_exact`);
        above :data:`EXACT_BUDGET_STATES` states, its fewest moves to acceptance (an upper
        bound: one token per byte)."""
        ex = self._exact()
        if ex is not None:
            return ex[0].completion_cost(int(ex[1][state]))
        c = self.dfa.min_moves(state)
        return COST_UNREACHABLE if c < 0 else c

    def successor_costs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        ex = self._exact()
        if ex is not None:
            return ex[0].successor_costs(int(ex[1][state]))
        return self.bound_costs(state, self.allowed_ids(state))

    def bound_costs(self, state: int, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(``ids``, the fewest moves to acceptance from the state each leads to): the upper
        bounds of :meth:`completion_cost` without the exact table (``EOG`` for
        end-of-generation, ``COST_UNREACHABLE`` where a token leads nowhere)."""
        nxt_all = np.full(self.n_words * 32, FORBIDDEN, dtype=np.int32)
        scratch = np.zeros(self.n_words, dtype=np.uint32)
        with self._lock:
            self.dfa._call(lambda cap, *a: _native.lazy_walk(vocab_tables(self.vocab).trie, self.dfa.classes_u8,
                                                              cap, *a), state, scratch, nxt_all)
            for tid in self.special_token_ids:
                nxt_all[tid] = self.dfa._call(_native.lazy_step, state, self._special_col[tid])
        acc = self.dfa.accepting(state)
        for tid in self._eog:
            if tid not in self._special_set:
                nxt_all[tid] = EOG if acc else FORBIDDEN
        nxt = nxt_all[ids]
        costs = np.full(len(ids), COST_UNREACHABLE, dtype=np.int64)
        costs[nxt == EOG] = EOG
        memo: dict[int, int] = {}
        for i, t in enumerate(nxt.tolist()):
            if t >= 0:
                c = memo.get(t)
                if c is None:
                    c = self.dfa.min_moves(t)
                    c = memo[t] = COST_UNREACHABLE if c < 0 else c
                costs[i] = c
        costs.setflags(write=False)
        return ids, costs

    def worst_successor_cost(self, state: int) -> int:
        """The largest cost among the text tokens allowed in ``state`` (from :meth:`successor_costs`)."""
        ex = self._exact()
        if ex is not None:
            return ex[0].worst_successor_cost(int(ex[1][state]))
        return worst_text_cost(self.successor_costs(state)[1])

    def _exact(self) -> tuple[DFAGrammar, np.ndarray] | None:
        """(the grammar over the minimal DFA of the explicit automaton, the minimal state of
        each state of this grammar) whose exact budget table the budget queries read; made on
        the first of them: every reachable state made (none is made later), then minimised
        (the states the lazy numbering keeps apart, often several times the minimal ones,
        would each cost the table a walk).  Equivalent states have the same tokens, the same
        successors' classes and the same costs.  None when the automaton has more than
        :data:`EXACT_BUDGET_STATES` states."""
        ex = self._exact_cg
        if ex is None:
            with self._lock:
                ex = self._exact_cg
                if ex is None:
                    d = self.dfa.explicit(EXACT_BUDGET_STATES)
                    if d is None:
                        ex = self._exact_cg = False
                    else:
                        m, block = _minimal_with_blocks(d)
                        ex = self._exact_cg = (DFAGrammar(m, self.vocab, self.special_token_ids,
                                                          max_masks=self.max_masks), block)
        return ex or None

    def to_dfa_grammar(self, max_states: int | None = None) -> DFAGrammar:
        """This grammar on the DFA back-end: every reachable state made, then minimised
        (what an artifact holds; same language and masks).  LimitError above ``max_states``
        (default ``Limits.max_dfa_states``) states before minimising."""
        cap = DEFAULT_LIMITS.max_dfa_states if max_states is None else max_states
        with self._lock:
            d = self.dfa.explicit(cap)
        if d is None:
            raise LimitError(f"{self.dfa.what}: more than {cap} states to make explicit (limit max_dfa_states)",
                             limit="max_dfa_states", value=cap)
        m = _automaton_minimal(d)
        return DFAGrammar(m, self.vocab, self.special_token_ids, grammar_key=self.grammar_key,
                          meta=dict(self.meta, backend="dfa"), max_masks=self.max_masks).prepare()

    def precompute(self) -> "LazyDFAGrammar":
        """Make every reachable state and compute its mask now."""
        s = 0
        while s < self.dfa.n_states:
            self.mask(s)
            s += 1
        return self

    def stats(self) -> dict:
        info = self.dfa.info()
        return {
            "backend": self.backend,
            "states": info["states"],
            "expanded": info["expanded"],
            "classes": info["classes"],
            "masks_computed": len(self._state_mask),
            "distinct_masks": len(self._masks),
            "mask_bytes": self._masks.nbytes,
            "table_bytes": info["bytes"],
            "vocab": self.vocab.name,
            "fingerprint": self.vocab.fingerprint,
        }

    # ------------------------------------------------------------------ internals
    def _compute(self, state: int) -> int:
        return self._compute_mask(state)[0]

    def _compute_mask(self, state: int) -> tuple[int, np.ndarray | None]:
        """(mask id of ``state``, the read-only mask when this call made it natively, else
        None), computing and interning the mask if needed (a sparse mask is kept as its ids:
        returning the one just made saves expanding them again)."""
        with self._lock:
            mid = self._state_mask.get(state)
            if mid is not None:
                return mid, None
            m = np.empty(self.vocab.n_words, dtype=np.uint32)
            masker = self._masker
            if masker is None:
                masker = self._masker = False if (_pure_python_dfa() or not self.native_masker) else \
                    _native.lazy_masker(vocab_tables(self.vocab).masker_profiles(tuple(PROFILES)), self.dfa.classes_u8,
                                        self.dfa._cap, self._masker_specials(), self._eog_mask)
            if masker:
                mid = self._state_mask[state] = self.dfa._call(
                    lambda _cap: self._masks.intern_state(masker, int(state), m, self._ids_buf))
                return mid, m
            self._walk(state, m)
            if self.special_token_ids:
                row = self.dfa.row(state)
                for k, tid in enumerate(self.special_token_ids):
                    m[tid >> 5] &= ~np.uint32(1 << (tid & 31))
                    if row[self.dfa.n_classes + k] >= 0:
                        m[tid >> 5] |= np.uint32(1 << (tid & 31))
            if self._eog_mask is not None and self.dfa.accepting(state):
                _native.mask_or(m, m, self._eog_mask)
            mid = self._state_mask[state] = self._masks.intern(m)
            return mid, None

    def _masker_specials(self) -> np.ndarray:
        """The token of each special column (``NO_TOKEN`` past :attr:`special_token_ids`: a
        column no token spells, such as the markers of counted strings)."""
        n = self.dfa.nsym - self.dfa.n_classes
        ids = list(self.special_token_ids[:n]) + [NO_TOKEN] * (n - len(self.special_token_ids))
        return np.array(ids, dtype=np.uint32)

    def _pairs_of(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = self._pairs.get(name)
        if p is None:
            p = self._pairs[name] = char_pairs(vocab_tables(self.vocab).profile(name).char_dfa, self.dfa.byte_class)
        return p

    def _walk(self, state: int, m: np.ndarray) -> None:
        """Text-token bits of ``state`` into ``m``: the plain-text shortcut of
        :func:`~decoding.backends.textloop.walk_tokens` (string bodies: the plain tokens of at
        most ``k`` characters plus a walk of the other tokens), else a walk of the whole trie
        with whole plain subtrees at plain self-loop states; rows are made as the walk reads them."""
        tabs = vocab_tables(self.vocab)
        cls = self.dfa.classes_u8
        row = self.dfa.row(state)
        a = row[cls[0x61]]
        if a >= 0:
            for name in PROFILES:
                if any(row[cls[b]] != a for b in PROBES[name]):
                    continue
                p = self._pairs_of(name)
                k = self.dfa._call(lambda c, *x: _native.lazy_plain_chain(p[0], p[1], p[2], c, *x), state,
                                   max(1, tabs.profile(name).max_chars))
                if k == -3:
                    k = UNBOUNDED
                elif k < 0:
                    continue
                prof = tabs.profile(name)
                if k == UNBOUNDED:
                    self._bulk = name
                opts = (prof.other_node_plain, p[0], p[1], p[2], _SLOTS[name]) if self._bulk == name else None
                self.dfa._call(lambda c, *x: _native.lazy_walk(prof.other_trie, cls, c, *x), state, m, None, opts)
                _native.mask_or(m, m, prof.plain_upto(int(k)))
                return
        prof = tabs.profile(self._bulk)
        p = self._pairs_of(self._bulk)
        self.dfa._call(lambda c, *x: _native.lazy_walk(tabs.trie, cls, c, *x), state, m, None,
                       (prof.node_plain, p[0], p[1], p[2], _SLOTS[self._bulk]))


def _minimal_with_blocks(d: DFA) -> tuple[DFA, np.ndarray]:
    """(the minimal DFA of an explicit lazy automaton ``d``, the block of each state of ``d``:
    its state there).  Blocks are numbered by their first state (block 0 holds the start), and
    a block's row is its first state's with the targets mapped; every state of ``d`` is
    reachable and live, so the quotient is trimmed."""
    n, nsym = d.trans.shape
    table = np.ascontiguousarray(d.trans, dtype=np.int32)
    block = np.empty(n, dtype=np.int32)
    nb = _native.dfa_minimize(table.reshape(-1), nsym, np.ascontiguousarray(d.accepting, dtype=np.uint8), block,
                              1e9)
    first = np.empty(nb, dtype=np.int64)
    first[block[::-1]] = np.arange(n - 1, -1, -1)
    rows = table[first]
    q = np.where(rows >= 0, block[np.maximum(rows, 0)], -1).astype(np.int32)
    acc = np.asarray(d.accepting, dtype=bool)[first]
    for a in (q, acc, block):
        a.setflags(write=False)
    return DFA(d.byte_class, q, acc, d.specials, d.n_classes, trimmed=True), block


def _automaton_minimal(d: DFA) -> DFA:
    """The minimal DFA of an explicit lazy automaton (trimmed: every state reachable and live)."""
    m = _trimmed_minimal(d, None)
    return m if m.trimmed else DFA(m.byte_class, m.trans, m.accepting, m.specials, m.n_classes, trimmed=True)


def compile_lazy_grammar(grammar: Grammar, vocab: Vocab, *, grammar_key: str = "", meta: dict | None = None,
                         max_masks: int = DEFAULT_MAX_MASKS, limits: Limits | None = None,
                         size_checked: bool = False, eager: bool = False) -> LazyDFAGrammar:
    """Compile ``grammar`` for ``vocab`` with the lazy DFA back-end (specials that are one
    token of the vocabulary are matched as that token, the others as literal text)."""
    specials = grammar.specials()
    literal = [t for t in specials if vocab.special_token(t) is None]
    d = compile_lazy_dfa(grammar, usable_bytes=vocab.single_byte_tokens(), literal_specials=literal, limits=limits,
                         size_checked=size_checked)
    ids = tuple(int(vocab.special_token(t)) for t in d.specials)  # type: ignore[arg-type]
    cg = LazyDFAGrammar(d, vocab, ids, grammar_key=grammar_key, meta=dict(meta or {}), max_masks=max_masks)
    return cg.precompute() if eager else cg
