"""Size estimates of grammar IR, used to fail fast and to choose a back-end.

The unit is a rough Thompson-NFA state count: a literal byte, a byte set or a special is
one state, a choice adds two plus one per branch, ``item{m,n}`` costs the item ``n``
times (``m + 1`` for unbounded) plus two, and the separated-list shape ``x (S x)*`` (the
automaton builds it as one loop) counts ``x`` once.

- :func:`node_size`: one rule, each :class:`~decoding.ir.Ref` counted as one symbol (a
  call of the pushdown back-end);
- :func:`estimate_size`: a whole grammar as the explicit DFA back-end unrolls it, refs
  expanded and a recursive rule counted ``max_depth`` times.

Both are memoized per object id, so IR that shares subtrees costs time linear in its
distinct nodes.  Estimates only: never used to decide a language.
"""

from __future__ import annotations

from typing import Callable

from decoding.ir.nodes import Choice, Grammar, Lit, Node, Ref, Repeat, Seq

__all__ = ["estimate_size", "node_size", "is_sep_loop"]


def is_sep_loop(x: Node, r: Node) -> bool:
    """``x`` followed by ``r = (S x)*`` where ``x`` is a Ref (a separated list)."""
    return isinstance(x, Ref) and isinstance(r, Repeat) and r.min == 0 and r.max is None and \
        isinstance(r.item, Seq) and len(r.item.items) >= 2 and r.item.items[-1] == x


def _shape_size(n: Node, size: Callable[[Node], int]) -> int:
    """Rough NFA-state count of a non-Ref node, ``size`` giving its children's."""
    if isinstance(n, Lit):
        return len(n.data)
    if isinstance(n, Seq):
        items = n.items
        return sum(size(x) for i, x in enumerate(items) if not (i > 0 and is_sep_loop(items[i - 1], x)))
    if isinstance(n, Choice):
        return 2 + sum(size(x) + 1 for x in n.items)
    if isinstance(n, Repeat):
        return size(n.item) * (n.min + (1 if n.max is None else n.max - n.min)) + 2
    return 1  # ByteSet, Special


def node_size(node: Node) -> int:
    """Rough NFA-state count of ``node`` with each Ref counted as one symbol (a call of the
    pushdown back-end)."""
    memo: dict[int, int] = {}

    def size(n: Node) -> int:
        hit = memo.get(id(n))
        if hit is None:
            hit = memo[id(n)] = 1 if isinstance(n, Ref) else _shape_size(n, size)
        return hit

    return size(node)


def estimate_size(g: Grammar, *, inline: bool = True) -> int:
    """Rough NFA-state count of ``g`` for the explicit DFA back-end: refs expanded, a
    recursive rule counted ``max_depth`` times.  With ``inline=False``: the largest single
    rule (:func:`node_size`, the pushdown back-end's per-rule automata).  Used to fail fast
    or to choose a back-end instead of compiling for long."""
    if not inline:
        return max(node_size(node) for _, node in g.rules)
    memo: dict[int, int] = {}
    rule_size: dict[str, int] = {}
    active: set[str] = set()
    recursive: set[str] = set()

    def size(n: Node) -> int:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        if isinstance(n, Ref):
            if n.name in active:
                recursive.add(n.name)
                return 0
            if n.name not in rule_size:
                active.add(n.name)
                body = size(g.rule(n.name))
                active.discard(n.name)
                rule_size[n.name] = body * (g.max_depth if n.name in recursive else 1)
            return rule_size[n.name]
        r = _shape_size(n, size)
        if not active:
            memo[id(n)] = r
        return r

    return size(g.rule(g.start))
