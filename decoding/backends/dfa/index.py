"""Token index: for each automaton state, the set of allowed tokens (a bitmask).

:func:`compile_grammar` turns an IR grammar plus a :class:`~decoding.vocab.Vocab` into a
:class:`CompiledGrammar`.  Masks are computed by the native trie walk the first time a
state is visited and memoized; identical masks are stored once.

Invariants
- Allowed text tokens are exactly those whose whole byte string the DFA can consume from
  the state.  The DFA is pruned against the bytes this vocabulary can spell one token at a
  time, so every state reached by an allowed token can still reach acceptance: the mask
  is never empty before acceptance.
- A special (anchor) token is allowed when its special symbol has a transition; tokens
  used as specials never match as text.
- End-of-generation tokens are allowed exactly in accepting states.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decoding import _native
from decoding.backends.dfa.automaton import DFA, DEFAULT_MAX_STATES, compile_dfa, estimate_size
from decoding.errors import GrammarError, LimitError, VocabError
from decoding.ir import Grammar
from decoding.backends.dfa.textloop import PROFILES, UNBOUNDED, plain_step, plain_tables
from decoding.vocab import Vocab

__all__ = ["CompiledGrammar", "compile_grammar", "prepare", "DEFAULT_MAX_MASKS", "BACKENDS"]

DEFAULT_MAX_MASKS = 65_536


def _trie(vocab: Vocab) -> Any:
    """The native trie of all token byte strings of ``vocab`` (built once, cached on it)."""
    for item in vocab._native_cache:
        if isinstance(item, tuple) and item[0] == "trie":
            return item[1]
    blob, off = vocab.blob()
    cap = _native.trie_build(blob, off)
    vocab._native_cache.append(("trie", cap))
    return cap


def prepare(vocab: Vocab) -> None:
    """Build the per-vocabulary structures now (the trie and the plain-text tables of
    :mod:`decoding.backends.dfa.textloop`) instead of on the first mask that needs them."""
    _trie(vocab)
    for name in PROFILES:
        plain_tables(vocab, name)


def mask_ids(m: np.ndarray, n_tokens: int) -> np.ndarray:
    """Sorted ids (read-only) of the bits set in the uint32 bitmask ``m``."""
    ids = np.nonzero(np.unpackbits(m.view(np.uint8), bitorder="little")[:n_tokens])[0]
    ids.setflags(write=False)
    return ids


@dataclass(eq=False)
class CompiledGrammar:
    """A grammar compiled for one tokenizer: DFA + lazily memoized token masks.

    Shareable between requests and threads; per-request state lives in
    :class:`~decoding.runtime.matcher.Matcher`.  The memo only ever grows with masks that are a
    pure function of (DFA, vocabulary), so sharing it is safe.
    """

    dfa: DFA
    vocab: Vocab
    special_token_ids: tuple[int, ...]  # per DFA special symbol
    grammar_key: str = ""
    meta: dict = field(default_factory=dict)
    max_masks: int = DEFAULT_MAX_MASKS
    _state_mask: np.ndarray = field(init=False, repr=False)
    _masks: list = field(init=False, repr=False)
    _mask_ids: dict = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False)
    _classes: np.ndarray = field(init=False, repr=False)
    _table: np.ndarray = field(init=False, repr=False)
    _next: dict = field(init=False, repr=False)
    _ids: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        d = self.dfa
        if d.n_classes > 256:
            raise LimitError("more than 256 byte classes")
        t = np.ascontiguousarray(d.trans)
        if t.size and (t.min() < -1 or t.max() >= d.n_states):
            raise VocabError("automaton table refers to a state that does not exist")
        self._table = t
        self._classes = np.ascontiguousarray(d.byte_class, dtype=np.uint8)
        self._state_mask = np.full(d.n_states, -1, dtype=np.int32)
        self._masks = []
        self._mask_ids = {}
        self._lock = threading.Lock()
        self._next = {}
        self._ids = {}
        self._special_set = frozenset(self.special_token_ids)
        self._special_col = {tid: d.n_classes + k for k, tid in enumerate(self.special_token_ids)}
        self._eog = np.array(sorted(self.vocab.eog_ids), dtype=np.int64)
        self._loop_profiles = tuple(PROFILES)
        self._plain_steps: dict[str, dict[int, int | None]] = {}

    @classmethod
    def from_precomputed(cls, dfa: DFA, vocab: Vocab, special_token_ids: tuple[int, ...],
                         state_mask: np.ndarray, masks: Any, *, grammar_key: str = "",
                         meta: dict | None = None) -> "CompiledGrammar":
        """A grammar whose masks were all computed at build time (see :mod:`decoding.artifacts.format`).

        ``state_mask[s]`` is the index in ``masks`` (a sequence of read-only uint32 arrays of
        ``vocab.n_words`` words; it may expand them lazily) of the mask of state ``s``.  Every
        state must have one, so no trie walk ever runs for this grammar.
        """
        cg = cls(dfa, vocab, tuple(int(t) for t in special_token_ids), grammar_key=grammar_key,
                 meta=dict(meta or {}))
        sm = np.asarray(state_mask, dtype=np.int32)
        if sm.shape != (dfa.n_states,) or (sm.size and (int(sm.min()) < 0 or int(sm.max()) >= len(masks))):
            raise VocabError("precomputed token index does not cover every automaton state")
        cg._state_mask = sm
        cg._masks = masks
        return cg

    # ------------------------------------------------------------------ masks
    @property
    def n_words(self) -> int:
        return self.vocab.n_words

    def mask(self, state: int) -> np.ndarray:
        """Read-only uint32 bitmask of the tokens allowed in ``state`` (memoized)."""
        mid = self._state_mask[state]
        if mid >= 0:
            return self._masks[mid]
        return self._compute(state)

    def _compute(self, state: int) -> np.ndarray:
        with self._lock:
            mid = self._state_mask[state]
            if mid >= 0:
                return self._masks[mid]
            m = np.empty(self.n_words, dtype=np.uint32)
            self._walk(int(state), m)
            for k, tid in enumerate(self.special_token_ids):
                m[tid >> 5] &= ~np.uint32(1 << (tid & 31))
                if self._table[state, self.dfa.n_classes + k] >= 0:
                    m[tid >> 5] |= np.uint32(1 << (tid & 31))
            if self.dfa.accepting[state]:
                for tid in self._eog:
                    m[tid >> 5] |= np.uint32(1 << (int(tid) & 31))
            key = zlib.crc32(m)
            mid = next((i for i in self._mask_ids.get(key, ()) if np.array_equal(self._masks[i], m)), None)
            if mid is None:
                if len(self._masks) >= self.max_masks:
                    raise LimitError(f"token index exceeds max_masks={self.max_masks} distinct masks")
                mid = len(self._masks)
                m.setflags(write=False)
                self._masks.append(m)
                self._mask_ids.setdefault(key, []).append(mid)
            self._state_mask[state] = mid
            return self._masks[mid]

    def _walk(self, state: int, m: np.ndarray) -> None:
        """Text-token bits of ``state`` into ``m`` (overwritten): a walk of the whole vocabulary
        trie or, for a state on a uniform chain of plain characters (string bodies, XML text;
        see :mod:`decoding.backends.dfa.textloop`), the precomputed plain tokens of at most ``k`` characters
        plus a walk of the small trie of the other tokens."""
        table = self._table.reshape(-1)
        # cheap filter: a plain-text state must at least allow "a" (plain in every profile)
        if self._table[state, self._classes[0x61]] >= 0:
            for name in self._loop_profiles:
                k = self._plain_chain(name, state)
                if k is not None:
                    prof = plain_tables(self.vocab, name)
                    _native.trie_walk(prof.other_trie, self._classes, table, self._table.shape[1], state, m)
                    _native.mask_or(m, m, prof.plain_upto(k))
                    return
        _native.trie_walk(_trie(self.vocab), self._classes, table, self._table.shape[1], state, m)

    def _plain_chain(self, name: str, state: int) -> int | None:
        """Plain characters consumable from ``state`` along uniform steps (UNBOUNDED if the
        chain cycles), or None if some step is not uniform."""
        steps = self._plain_steps.setdefault(name, {})
        char_dfa = plain_tables(self.vocab, name).char_dfa
        chain: list[int] = []
        s = state
        while True:
            if s in chain:
                return UNBOUNDED
            nxt = steps.get(s, -2)
            if nxt == -2:
                nxt = plain_step(char_dfa, self.dfa.byte_class, self._table, s)
                steps[s] = nxt
            if nxt is None:
                return None
            if nxt == -1:
                return len(chain)
            chain.append(s)
            s = nxt
            if len(chain) > 4096:
                return None

    def allowed_ids(self, state: int) -> np.ndarray:
        """Sorted ids of the tokens allowed in ``state`` (cached per distinct mask)."""
        m = self.mask(state)
        mid = int(self._state_mask[state])
        ids = self._ids.get(mid)
        if ids is None:
            ids = self._ids[mid] = mask_ids(m, self.vocab.n_tokens)
        return ids

    def successors(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed token ids, state after each) for ``state``; end-of-generation tokens map to
        -2.  Computed by one native trie walk (not memoized: used at build time and by budgets)."""
        ids = self.allowed_ids(state)
        nxt_all = np.full(self.n_words * 32, -1, dtype=np.int32)
        scratch = np.zeros(self.n_words, dtype=np.uint32)
        _native.trie_walk(_trie(self.vocab), self._classes, self._table.reshape(-1), self._table.shape[1],
                          int(state), scratch, nxt_all)
        for k, tid in enumerate(self.special_token_ids):
            nxt_all[tid] = self._table[state, self.dfa.n_classes + k]
        for tid in self._eog:
            if int(tid) not in self._special_set:
                nxt_all[int(tid)] = -2
        return ids, nxt_all[ids]

    def precompute(self) -> "CompiledGrammar":
        """Compute the masks of every state now (build time)."""
        for s in range(self.dfa.n_states):
            self.mask(s)
        return self

    def is_accepting(self, state: int) -> bool:
        return bool(self.dfa.accepting[state])

    def accepts(self, data: bytes) -> bool:
        """Byte-level membership of ``data`` (no specials)."""
        return self.dfa.accepts(data)

    def forced_bytes(self, state: int) -> bytes:
        """The bytes every continuation from ``state`` must start with (empty if there is a
        choice or the state is accepting).  Specials are not included."""
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
        return bytes(out)

    # ------------------------------------------------------------------ transitions
    def next_state(self, state: int, token: int) -> int:
        """State after ``token`` from ``state``; -1 if not allowed; -2 for end-of-generation
        in an accepting state."""
        key = (state, token)
        hit = self._next.get(key)
        if hit is not None:
            return hit
        if token in self.vocab.eog_ids and token not in self._special_set:
            ns = -2 if self.dfa.accepting[state] else -1
        elif token in self._special_set:
            ns = int(self._table[state, self._special_col[token]])
        elif 0 <= token < self.vocab.n_tokens and self.vocab.token_bytes[token]:
            ns = self.dfa.run(self.vocab.token_bytes[token], state)
        else:
            ns = -1
        self._next[key] = ns
        return ns

    def stats(self) -> dict:
        return {
            "states": self.dfa.n_states,
            "classes": self.dfa.n_classes,
            "masks_computed": int((self._state_mask >= 0).sum()),
            "distinct_masks": len(self._masks),
            "mask_bytes": len(self._masks) * self.n_words * 4,
            "table_bytes": int(self._table.nbytes),
            "vocab": self.vocab.name,
            "fingerprint": self.vocab.fingerprint,
        }


BACKENDS = ("auto", "dfa", "pushdown")
#: above this IR size estimate (NFA states with refs expanded) ``backend="auto"`` goes
#: straight to the pushdown back-end instead of trying to build the explicit DFA first
AUTO_PUSHDOWN_ABOVE = 300_000


def compile_grammar(grammar: Grammar, vocab: Vocab, *, max_states: int = DEFAULT_MAX_STATES,
                    eager: bool = False, grammar_key: str = "", meta: dict | None = None,
                    backend: str = "auto") -> Any:
    """Compile ``grammar`` for ``vocab``.  Specials that are one control/user-defined token of
    the vocabulary are matched as that token, the others as literal text.

    ``backend``: ``"dfa"`` (one explicit byte DFA, refs inlined: fastest masks, can be
    precompiled to artifacts; LimitError above ``max_states``), ``"pushdown"``
    (:mod:`decoding.backends.pushdown.index`: one small DFA per rule plus a stack; same language, for
    grammars too large to unroll) or ``"auto"`` (the DFA when it fits, else pushdown).
    Returns a :class:`CompiledGrammar` or a :class:`~decoding.backends.pushdown.index.CompiledPushdown`
    (same interface)."""
    if backend not in BACKENDS:
        raise GrammarError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "auto":
        if estimate_size(grammar) > AUTO_PUSHDOWN_ABOVE:
            backend = "pushdown"
    if backend == "pushdown":
        from decoding.backends.pushdown.index import compile_grammar_pushdown
        return compile_grammar_pushdown(grammar, vocab, grammar_key=grammar_key,
                                        meta=dict(meta or {}, backend="pushdown"))
    specials = grammar.specials()
    literal = [t for t in specials if vocab.special_token(t) is None]
    try:
        dfa = compile_dfa(grammar, max_states=max_states, literal_specials=literal)
    except LimitError:
        if backend == "dfa":
            raise
        from decoding.backends.pushdown.index import compile_grammar_pushdown
        return compile_grammar_pushdown(grammar, vocab, grammar_key=grammar_key,
                                        meta=dict(meta or {}, backend="pushdown"))
    dfa = dfa.prune(vocab.single_byte_tokens())
    ids = tuple(int(vocab.special_token(t)) for t in dfa.specials)  # type: ignore[arg-type]
    cg = CompiledGrammar(dfa, vocab, ids, grammar_key=grammar_key, meta=dict(meta or {}))
    return cg.precompute() if eager else cg
