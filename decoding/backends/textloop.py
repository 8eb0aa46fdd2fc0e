"""Shortcut for "free text" states (string bodies, XML text): exact masks without walking
the whole vocabulary.

The per-vocabulary side (the plain-text profiles: the mask of *plain tokens*, the number of
characters of each, and a trie of all the other tokens) lives in
:mod:`decoding.backends.tables`; this module is the automaton side.

Invariant (checked per state by :func:`plain_step`): if every plain character leads from
``s`` to one and the same state ``s'`` (a *uniform* step), and the chain of uniform steps
from ``s`` allows ``k`` plain characters (``k`` infinite when the chain cycles, as in an
unbounded string body), then exactly the plain tokens of at most ``k`` characters are
allowed, so ``mask(s) = plain_upto(k) | walk(other_trie, s)``.  Bounded strings
(``maxLength``) are chains of length ``k``; other states get the full trie walk.

The chain is computed natively (``_native.plain_chain``, over the profile's character
automaton compressed to the grammar's byte classes by :func:`char_pairs`); :func:`plain_step`
and :func:`plain_chain_py` are the Python reference it is tested against.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from decoding import _native
from decoding.backends.tables import PROBES

__all__ = ["plain_step", "plain_chain_py", "plain_chain", "char_pairs", "char_pairs_py", "walk_tokens", "PlainLoops", "UNBOUNDED",
           "MAX_CHAIN"]

#: chain length of a state on a cycle of uniform steps
UNBOUNDED = 1 << 30
#: longest chain followed; a longer one counts as this long (exact: every plain token is shorter)
MAX_CHAIN = 4096


def plain_step(char_dfa: np.ndarray, byte_class: np.ndarray, trans: np.ndarray, state: int) -> int | None:
    """The state every plain character leads to from ``state``; -1 if no plain character is
    allowed at all; None if plain characters lead to different states or only some die."""
    bc = byte_class.astype(np.intp)
    seen = {(0, state)}
    todo = [(0, state)]
    target = None
    while todo:
        p, d = todo.pop()
        prow = char_dfa[p]
        ok = np.nonzero(prow >= 0)[0]
        dn = trans[d, bc[ok]]
        dead = dn < 0
        if dead.any():
            if p == 0 and d == state and dead.all():
                return -1
            return None
        pn = prow[ok]
        back = pn == 0
        ends = np.unique(dn[back])
        if len(ends) > 1 or (len(ends) == 1 and target is not None and int(ends[0]) != target):
            return None
        if len(ends) == 1:
            target = int(ends[0])
        for pp, dd in set(zip(pn[~back].tolist(), dn[~back].tolist())):
            if (pp, dd) not in seen:
                seen.add((pp, dd))
                todo.append((pp, dd))
    return target


def plain_chain_py(char_dfa: np.ndarray, byte_class: np.ndarray, trans: np.ndarray, state: int,
                   steps: dict[int, int | None] | None = None, max_len: int = MAX_CHAIN) -> int | None:
    """Plain characters consumable from ``state`` along uniform steps (UNBOUNDED if the chain
    cycles), or None if some step is not uniform; a chain of at least ``max_len`` steps gives
    ``max_len`` (its mask is that of any longer chain once ``max_len`` is at least the longest
    plain token).  ``steps`` memoizes :func:`plain_step` per state."""
    steps = {} if steps is None else steps
    chain: list[int] = []
    on_chain: set[int] = set()
    s = state
    while True:
        if s in on_chain:
            return UNBOUNDED
        nxt = steps.get(s, -2)
        if nxt == -2:
            nxt = plain_step(char_dfa, byte_class, trans, s)
            steps[s] = nxt
        if nxt is None:
            return None
        if nxt == -1:
            return len(chain)
        chain.append(s)
        on_chain.add(s)
        s = nxt
        if len(chain) >= max_len:
            return max_len


def char_pairs(char_dfa: np.ndarray, byte_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``char_dfa`` compressed to the byte classes of one grammar automaton: for character
    state ``p`` the distinct (class, next character state) pairs of the bytes it allows are
    ``pair_cls[j], pair_next[j]`` for ``j`` in ``row_off[p]:row_off[p+1]``, sorted by (class,
    next) (the native chain's input; same steps as :func:`plain_step` over bytes).  Native
    (about 2 µs; a grammar's first string state used to pay ~250 µs of numpy here);
    :func:`char_pairs_py` is the reference."""
    cd = np.ascontiguousarray(char_dfa, dtype=np.int16).reshape(-1)
    n_char = cd.shape[0] // 256
    row_off = np.empty(n_char + 1, dtype=np.int32)
    cls = np.empty(n_char * 256, dtype=np.uint8)
    nxt = np.empty(n_char * 256, dtype=np.int16)
    n = _native.char_pairs(cd, np.ascontiguousarray(byte_class, dtype=np.uint16), row_off, cls, nxt)
    return row_off, cls[:n].copy(), nxt[:n].copy()


def char_pairs_py(char_dfa: np.ndarray, byte_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`char_pairs` in numpy (the reference)."""
    bc = np.asarray(byte_class, dtype=np.int64)
    if bc.size and int(bc.max()) > 255:
        raise ValueError("char_pairs: more than 256 byte classes")
    cd = np.asarray(char_dfa, dtype=np.int64)
    p, b = np.nonzero(cd >= 0)  # one sort of every (state, class, next) triple
    keys = np.unique((p * 256 + bc[b]) * 256 + cd[p, b])
    row_off = np.searchsorted(keys >> 16, np.arange(cd.shape[0] + 1)).astype(np.int32)
    return row_off, ((keys >> 8) & 255).astype(np.uint8), (keys & 255).astype(np.int16)


def plain_chain(pairs: tuple[np.ndarray, np.ndarray, np.ndarray], table: np.ndarray, state: int,
                max_len: int = MAX_CHAIN) -> int | None:
    """:func:`plain_chain_py` natively: ``pairs`` from :func:`char_pairs` for the automaton
    whose ``table`` (n_states x columns, byte classes first; int32 or int16) is given."""
    k = _native.plain_chain(pairs[0], pairs[1], pairs[2], table.reshape(-1), table.shape[1], state, max_len)
    if k == -3:
        return UNBOUNDED
    return None if k < 0 else int(k)


class PlainLoops:
    """Per automaton table: which plain-text profile's whole-subtree shortcut its full trie
    walks use (``bulk``: the last profile seen on a string-body loop, json-string first), that
    profile's character pairs, and the native walk's memo of plain self-loop states (one byte
    per state, 0 = not yet known).  Only ever grows with facts of the table: safe to share."""

    __slots__ = ("n_states", "bulk", "pairs", "memo", "_opts")

    def __init__(self, n_states: int, bulk: str,
                 pairs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None) -> None:
        self.n_states = n_states
        self.bulk = bulk
        self.pairs = {} if pairs is None else pairs  # shared with the table's chain computation
        self.memo: dict[str, np.ndarray] = {}
        self._opts: dict[tuple[str, int], tuple] = {}

    def opts(self, name: str, node_plain: np.ndarray, byte_class: np.ndarray, char_dfa: np.ndarray) -> tuple:
        """The ``plain`` argument of ``_native.trie_walk`` for profile ``name`` (cached per
        profile and trie: ``node_plain`` is the profile's array of the whole or the other trie)."""
        key = (name, id(node_plain))
        hit = self._opts.get(key)
        if hit is not None and hit[0] is node_plain:
            return hit
        pairs = self.pairs.get(name)
        if pairs is None:
            pairs = self.pairs[name] = char_pairs(char_dfa, byte_class)
        memo = self.memo.get(name)
        if memo is None:
            memo = self.memo[name] = np.zeros(self.n_states, dtype=np.uint8)
        hit = self._opts[key] = (node_plain, pairs[0], pairs[1], pairs[2], memo)
        return hit


def walk_tokens(tabs: Any, classes: np.ndarray, table: np.ndarray, state: int, m: np.ndarray,
                chain: Callable[[str, int], int | None], profiles: Iterable[str], sink: int = -1,
                loops: PlainLoops | None = None) -> None:
    """Text-token bits of ``state`` into ``m`` (overwritten): for a state on a uniform chain
    of plain characters (``chain(profile, state)`` not None) the profile's plain tokens of at
    most that many characters plus a walk of the small trie of its other tokens, else a walk
    of the whole vocabulary trie (``tabs``: the vocabulary's
    :class:`~decoding.backends.tables.VocabTables`).  ``table``: n_states x columns, byte
    classes first (``classes[byte]``); ``sink``: an absorbing state of ``table`` or -1;
    ``loops``: the walks add whole subtrees of plain continuations at plain self-loop states
    (exact: a token continuing with plain characters from such a state stays in it)."""
    flat = table.reshape(-1)
    ncols = table.shape[1]
    # cheap filter: a plain-text state must at least allow "a" (plain in every profile)
    row = table[state]
    a = row[classes[0x61]]
    if a >= 0:
        for name in profiles:
            # necessary for a uniform first step: the profile's probe characters go where "a" goes
            for b in PROBES[name]:
                if row[classes[b]] != a:
                    break
            else:
                k = chain(name, state)
                if k is not None:
                    prof = tabs.profile(name)
                    if loops is not None and k == UNBOUNDED:
                        loops.bulk = name
                    opts = None if loops is None or loops.bulk != name else \
                        loops.opts(name, prof.other_node_plain, classes, prof.char_dfa)
                    _native.trie_walk(prof.other_trie, classes, flat, ncols, state, m, None, sink, opts)
                    _native.mask_or(m, m, prof.plain_upto(k))
                    return
    opts = None
    if loops is not None:
        prof = tabs.profile(loops.bulk)
        opts = loops.opts(loops.bulk, prof.node_plain, classes, prof.char_dfa)
    _native.trie_walk(tabs.trie, classes, flat, ncols, state, m, None, sink, opts)
