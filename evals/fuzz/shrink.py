"""Delta-debugging shrinkers for reproducers: smaller JSON values and shorter texts that
still give the same outcome.

``shrink_json(value, still_fails, budget)`` greedily hoists subtrees to the top, deletes
object members and array elements, and halves long arrays and strings; ``shrink_text``
removes chunks of halving size (ddmin without the complement step).  ``still_fails`` is
the predicate (same outcome kind and signature); ``Budget`` bounds the evaluations and the
seconds spent.  The result is always an input for which ``still_fails`` held.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterator

__all__ = ["Budget", "shrink_json", "shrink_text"]


class Budget:
    """At most ``evals`` predicate calls and ``seconds`` of wall time."""

    def __init__(self, evals: int = 200, seconds: float = 30.0) -> None:
        self.evals = evals
        self.deadline = time.monotonic() + seconds

    def spend(self) -> bool:
        """Take one evaluation; False when the budget is exhausted."""
        if self.evals <= 0 or time.monotonic() >= self.deadline:
            return False
        self.evals -= 1
        return True


def _paths(doc: Any, limit: int = 3000) -> list[tuple]:
    """Paths of every node, breadth first (shallow nodes first)."""
    out: list[tuple] = []
    frontier = [((), doc)]
    while frontier and len(out) < limit:
        nxt = []
        for p, n in frontier:
            out.append(p)
            if isinstance(n, dict):
                nxt.extend((p + (k,), v) for k, v in n.items())
            elif isinstance(n, list):
                nxt.extend((p + (i,), v) for i, v in enumerate(n))
        frontier = nxt
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    doc = json.loads(json.dumps(doc))
    parent = _get(doc, path[:-1])
    parent[path[-1]] = value
    return doc


def _delete(doc: Any, path: tuple) -> Any:
    doc = json.loads(json.dumps(doc))
    parent = _get(doc, path[:-1])
    del parent[path[-1]]
    return doc


def _candidates(doc: Any, path: tuple) -> Iterator[Any]:
    node = _get(doc, path)
    if path:
        yield node                                 # hoist the subtree to the top
        yield _delete(doc, path)
    if isinstance(node, list) and len(node) > 1:
        yield _replace(doc, path, node[: len(node) // 2])
        yield _replace(doc, path, node[len(node) // 2:])
    elif isinstance(node, dict) and len(node) > 1:
        items = list(node.items())
        yield _replace(doc, path, dict(items[: len(items) // 2]))
        yield _replace(doc, path, dict(items[len(items) // 2:]))
    elif isinstance(node, str) and len(node) > 4:
        yield _replace(doc, path, node[: len(node) // 2])


def shrink_json(value: Any, still_fails: Callable[[Any], bool], budget: Budget) -> Any:
    """A smaller JSON value for which ``still_fails`` holds (``value`` itself at worst)."""
    i = 0
    while True:
        paths = _paths(value)
        if i >= len(paths):
            return value
        for cand in _candidates(value, paths[i]):
            if not budget.spend():
                return value
            if still_fails(cand):
                value = cand
                i = 0
                break
        else:
            i += 1


def shrink_text(text: str, still_fails: Callable[[str], bool], budget: Budget) -> str:
    """A shorter text for which ``still_fails`` holds (``text`` itself at worst)."""
    chunk = max(1, len(text) // 2)
    while chunk >= 1 and text:
        i = 0
        progressed = False
        while i < len(text):
            cand = text[:i] + text[i + chunk:]
            if not budget.spend():
                return text
            if cand != text and still_fails(cand):
                text = cand
                progressed = True
            else:
                i += chunk
        if not progressed:
            if chunk == 1:
                break
            chunk //= 2
        else:
            chunk = min(chunk, max(1, len(text) // 2))
    return text
