"""A finite set of byte strings as one IR leaf: its minimal automaton.

A ``Choice`` of thousands of ``Lit`` costs every pass over the IR (size estimates, walks,
the NFA build, the subset construction) time per literal; :func:`literal_set` gives the
same language as one :class:`~decoding.ir.Dfa` leaf: the minimal acyclic DFA of the words,
built by the incremental construction from sorted input (Daciuk, Mihov, Watson & Watson
2000) in one pass.

The IR layer is pure Python (front-ends run without the C extension): :func:`build_minimal`
is the reference builder.  A layer allowed to load ``decoding._native`` may install a
faster builder with :func:`use_builder` (the back-ends install ``gd_literal_dfa_build``,
native/src/literal_dfa.c); it must return exactly what :func:`build_minimal` returns, so
the IR (and its digest) never depends on which one ran.

Invariants
- ``literal_set(ws)`` accepts exactly the strings of ``ws`` (duplicates and order do not
  matter); nothing is widened or narrowed.
- The leaf is canonical: the minimal DFA, state 0 the start, states numbered in
  breadth-first order following edges by increasing byte, a state's edges as byte ranges
  in increasing order (consecutive bytes with one target merged).  Equal sets give equal IR.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from decoding.errors import GrammarError
from decoding.ir.nodes import NOTHING, Dfa, Lit, Node

__all__ = ["literal_set", "build_minimal", "use_builder", "Minimal", "Builder"]

#: (off, lab, tgt, final): the edges of state s are ``lab/tgt[off[s]:off[s+1]]`` by
#: increasing label; ``final[s]`` whether s accepts; states in BFS order from 0
Minimal = tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int]]
#: a builder: the strictly increasing words -> their minimal DFA
Builder = Callable[[list[bytes]], Minimal]

_builder: list[Builder | None] = [None]  # installed by a layer above (see the module docstring)


def use_builder(builder: Builder | None) -> None:
    """Build minimal DFAs with ``builder`` (None: :func:`build_minimal`)."""
    _builder[0] = builder


def literal_set(words: Iterable[bytes]) -> Node:
    """The language of exactly ``words``: NOTHING for none, a ``Lit`` for one, else the
    canonical minimal :class:`~decoding.ir.Dfa` leaf."""
    ws = sorted(set(words))
    if not ws:
        return NOTHING
    if len(ws) == 1:
        return Lit(ws[0])
    off, lab, tgt, final = (_builder[0] or build_minimal)(ws)
    return Dfa(_ranges(off, lab, tgt), tuple(s for s, f in enumerate(final) if f))


def _lcp(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    m = min(len(a), len(b))
    x = int.from_bytes(a[:m], "big") ^ int.from_bytes(b[:m], "big")
    return m - (x.bit_length() + 7) // 8


def build_minimal(words: list[bytes]) -> Minimal:
    """The reference builder: the minimal DFA of ``words`` (strictly increasing bytewise,
    else GrammarError).  A state on the path of the last word stays open (its last edge
    pending) until a word leaves that path; then it is frozen: merged with the registered
    state of equal finality and edges, or registered."""
    register: dict[tuple, int] = {}
    frozen: list[tuple[bool, tuple[tuple[int, int], ...]]] = []

    def freeze(o: list) -> int:
        sig = (o[0], tuple(o[1]))
        s = register.get(sig)
        if s is None:
            s = register[sig] = len(frozen)
            frozen.append(sig)
        return s

    def close(path: list[list], depth: int) -> None:
        for d in range(len(path) - 1, depth, -1):
            edges = path[d - 1][1]
            edges[-1] = (edges[-1][0], freeze(path[d]))
        del path[depth + 1:]

    path: list[list] = [[False, []]]  # per depth: [final, [(label, target), ...]]
    prev = b""
    for i, w in enumerate(words):
        if i and w <= prev:
            raise GrammarError("build_minimal: the words must be strictly increasing")
        close(path, _lcp(prev, w) if i else 0)
        for d in range(len(path) - 1, len(w)):
            path[d][1].append((w[d], -1))
            path.append([False, []])
        path[len(w)][0] = True
        prev = w
    close(path, 0)
    return _bfs(frozen, freeze(path[0]))


def _bfs(frozen: list[tuple[bool, tuple[tuple[int, int], ...]]], root: int) -> Minimal:
    """``frozen`` renumbered breadth-first from ``root`` as (off, lab, tgt, final)."""
    ids = {root: 0}
    order = [root]
    off, lab, tgt, final = [0], [], [], []
    for s in order:  # grows while iterated: a queue
        f, edges = frozen[s]
        final.append(int(f))
        for b, t in edges:
            j = ids.get(t)
            if j is None:
                j = ids[t] = len(order)
                order.append(t)
            lab.append(b)
            tgt.append(j)
        off.append(len(lab))
    return off, lab, tgt, final


def _ranges(off: Sequence[int], lab: Sequence[int], tgt: Sequence[int]) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """Per state its edges as ``(lo, hi, target)`` ranges: runs of consecutive labels with
    one target merged (labels increase within a state)."""
    out = []
    for s in range(len(off) - 1):
        es: list[tuple[int, int, int]] = []
        for j in range(off[s], off[s + 1]):
            b, t = lab[j], tgt[j]
            if es and es[-1][1] + 1 == b and es[-1][2] == t:
                es[-1] = (es[-1][0], b, t)
            else:
                es.append((b, b, t))
        out.append(tuple(es))
    return tuple(out)
