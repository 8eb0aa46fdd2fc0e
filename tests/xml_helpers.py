"""Test utilities for the XML front-ends: byte-level random walks over a DFA and a
reference (pushdown, unbounded-recursion) recognizer for grammar IR.

``random_walk_bytes`` is the helper the token-level walks reuse: it follows random
*existing* transitions only, so (the DFA being pruned) it always ends in acceptance.
"""

from __future__ import annotations

import random
import weakref
from pathlib import Path

import numpy as np

from decoding.backends.automaton import DFA
from decoding.ir import ByteSet, Choice, Grammar, Lit, Node, Ref, Repeat, Seq, Special

__all__ = ["random_walk_bytes", "ir_accepts", "SHARED", "DTD_DIR"]

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
DTD_DIR = SHARED / "corpora" / "dtd"
_WALK_CACHE: "weakref.WeakKeyDictionary[DFA, tuple]" = weakref.WeakKeyDictionary()


def random_walk_bytes(dfa: DFA, rng: random.Random, *, stop_prob: float = 0.3,
                      max_len: int = 400, specials_as: dict[str, bytes] | None = None
                      ) -> bytes:
    """A random accepted string of ``dfa``.

    At each step: in an accepting state stop with probability ``stop_prob``; otherwise
    take a uniformly random existing transition (byte class, then a byte in it; special
    columns yield ``specials_as[text]`` or ``text`` encoded).  After ``max_len`` bytes the
    walk follows a shortest path to acceptance, so it always terminates accepted.
    """
    cached = _WALK_CACHE.get(dfa)
    if cached is None:
        inv: dict[int, list[int]] = {}
        for b in range(256):
            inv.setdefault(int(dfa.byte_class[b]), []).append(b)
        cached = _WALK_CACHE[dfa] = (dfa.min_steps_to_accept(), inv)
    dist, inv = cached
    out = bytearray()
    s = 0
    specials_as = specials_as or {}
    while True:
        if dfa.accepting[s] and (len(out) >= max_len or rng.random() < stop_prob):
            return bytes(out)
        row = dfa.trans[s]
        cols = np.nonzero(row >= 0)[0]
        if len(cols) == 0:  # accepting dead end (pruned DFA: nothing else is possible)
            return bytes(out)
        if len(out) >= max_len:
            cols = [c for c in cols if dist[row[c]] < dist[s]]
        c = int(cols[rng.randrange(len(cols))])
        if c < dfa.n_classes:
            out.append(rng.choice(inv[c]))
        else:
            text = dfa.specials[c - dfa.n_classes]
            out += specials_as.get(text, text.encode("utf-8"))
        s = int(row[c])


def ir_accepts(grammar: Grammar, data: bytes) -> bool:
    """Reference recognizer: does ``grammar`` (recursion *not* bounded) accept ``data``?

    Memoized sets of end positions per (node, start); fine for grammars that are not
    left-recursive (every XML element starts with ``<name``).  Specials match as text.
    """
    memo: dict[tuple[int, int], frozenset[int]] = {}
    keep: list[Node] = []

    def ends(node: Node, i: int) -> frozenset[int]:
        key = (id(node), i)
        hit = memo.get(key)
        if hit is not None:
            return hit
        keep.append(node)
        r: frozenset[int]
        if isinstance(node, Lit):
            r = frozenset([i + len(node.data)]) if data.startswith(node.data, i) else frozenset()
        elif isinstance(node, Special):
            t = node.text.encode("utf-8")
            r = frozenset([i + len(t)]) if data.startswith(t, i) else frozenset()
        elif isinstance(node, ByteSet):
            r = frozenset([i + 1]) if i < len(data) and any(
                lo <= data[i] <= hi for lo, hi in node.ranges) else frozenset()
        elif isinstance(node, Seq):
            cur = {i}
            for it in node.items:
                cur = {e for j in cur for e in ends(it, j)}
                if not cur:
                    break
            r = frozenset(cur)
        elif isinstance(node, Choice):
            r = frozenset(e for it in node.items for e in ends(it, i))
        elif isinstance(node, Repeat):
            cur, acc, seen, k = {i}, set(), set(), 0
            while cur and (node.max is None or k <= node.max):
                if k >= node.min:
                    acc |= cur
                if node.max is not None and k == node.max:
                    break
                nxt = {e for j in cur for e in ends(node.item, j)}
                if node.max is None and k >= node.min:
                    nxt -= seen
                    seen |= nxt
                cur, k = nxt, k + 1
            r = frozenset(acc)
        elif isinstance(node, Ref):
            memo[key] = frozenset()  # no left recursion: a re-entry at i consumes nothing
            r = ends(grammar.rule(node.name), i)
        else:
            raise TypeError(node)
        memo[key] = r
        return r

    return len(data) in ends(grammar.rule(grammar.start), 0)
