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
"""

from __future__ import annotations

import numpy as np

__all__ = ["plain_step", "UNBOUNDED"]

#: chain length of a state on a cycle of uniform steps
UNBOUNDED = 1 << 30


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
