"""Productive rules: which rules of a grammar derive at least one finite string.

A rule is *productive* when its body can match with every :class:`~decoding.ir.Ref` in the
match naming a productive rule (a least fixpoint).  A grammar whose start rule is not
productive accepts no string at all, whatever ``max_depth``; :func:`find_empty` says which
rule is to blame and why (``root ::= "x" root`` only recurses), so front-ends and
back-ends can report the place instead of "accepts no string".

Invariants
- Iterative walks only (no ``RecursionError`` on deep IR or long rule chains).
- Linear-ish: rules are evaluated callees first (a DFS post-order from the start), then a
  worklist re-evaluates a rule only after one of its callees became productive.
- Only decides emptiness of the unbounded language; the DFA back-end may still find a
  productive grammar empty when its strings need recursion deeper than ``max_depth``.
"""

from __future__ import annotations

from decoding.errors import GrammarError
from decoding.ir.nodes import ByteSet, Choice, Dfa, Diff, Grammar, Inter, Lit, Node, Ref, Repeat, Seq, Special, plain_ids

__all__ = ["productive_rules", "find_empty", "check_productive", "known_productive"]


def _derives(node: Node, ok: set[str], true: set[int] | None = None) -> bool:
    """Whether ``node`` matches some string using only rules in ``ok``.  ``true``: ids of
    nodes known to (a set that only grows while ``ok`` does; updated with the sequences and
    choices found to, the caller keeps them alive); registered plain nodes
    (:func:`decoding.ir.nodes.register_plain`) always do."""
    plain = plain_ids()
    if true is None:
        true = set()
    out: list[bool] = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if done:
            k = len(n.items)  # type: ignore[union-attr]
            vals = out[len(out) - k:]
            del out[len(out) - k:]
            v = all(vals) if isinstance(n, Seq) else any(vals)
            if v:
                true.add(id(n))
            out.append(v)
        elif id(n) in plain or id(n) in true:
            out.append(True)
        elif isinstance(n, (Lit, Special, Inter, Diff, Dfa)):
            out.append(True)  # Inter/Diff: emptiness needs their automaton (the back-end's prune)
        elif isinstance(n, ByteSet):
            out.append(bool(n.ranges))
        elif isinstance(n, Ref):
            out.append(n.name in ok)
        elif isinstance(n, Repeat):
            if n.min == 0 or (n.max is not None and n.max < n.min):
                out.append(n.min == 0)
            else:
                stack.append((n.item, False))  # the Repeat's value is its item's
        elif isinstance(n, (Seq, Choice)):
            if not n.items:
                out.append(isinstance(n, Seq))
            else:
                stack.append((n, True))
                stack.extend((c, False) for c in reversed(n.items))
        else:  # pragma: no cover - the node algebra is closed
            raise GrammarError(f"unknown IR node {type(n).__name__}")
    return out[0]


def _reachable_postorder(g: Grammar) -> tuple[list[str], dict[str, list[str]]]:
    """Rules reachable from the start, callees before callers where acyclic, and each
    rule's referenced rules."""
    refs: dict[str, list[str]] = {}
    order: list[str] = []
    seen = {g.start}
    stack: list[tuple[str, int]] = [(g.start, 0)]
    refs[g.start] = list(g.rule_refs(g.start))
    while stack:
        name, i = stack.pop()
        kids = refs[name]
        if i < len(kids):
            stack.append((name, i + 1))
            k = kids[i]
            if k not in seen:
                seen.add(k)
                refs[k] = list(g.rule_refs(k))
                stack.append((k, 0))
        else:
            order.append(name)
    return order, refs


def productive_rules(g: Grammar) -> set[str]:
    """The productive rules among those reachable from ``g.start``."""
    order, refs = _reachable_postorder(g)
    callers: dict[str, list[str]] = {n: [] for n in order}
    for n in order:
        for k in refs[n]:
            callers[k].append(n)
    ok: set[str] = set()
    true: set[int] = set()  # nodes found to derive a string (``ok`` only grows: they still do)
    todo = list(reversed(order))  # popped from the end: callees first
    queued = set(order)
    while todo:
        n = todo.pop()
        queued.discard(n)
        if n in ok or not _derives(g.rule(n), ok, true):
            continue
        ok.add(n)
        for c in callers[n]:
            if c not in ok and c not in queued:
                queued.add(c)
                todo.append(c)
    return ok


def find_empty(g: Grammar) -> tuple[str, str] | None:
    """``None`` when ``g`` accepts some string (ignoring ``max_depth``), else ``(rule,
    reason)``: the rule to blame and why, e.g. ``("r", "every expansion recurses into 'r'
    (no finite string)")``.  Computed once per grammar object (a front-end's check and a
    back-end's find it once), or known from :func:`known_productive`."""
    known = g._empty
    if not known:
        known = (_find_empty(g),)
        object.__setattr__(g, "_empty", known)
    return known[0]


def known_productive(g: Grammar) -> None:
    """Record that ``g``'s start rule is productive, as the front-end that built ``g`` found
    with the rules of :func:`_derives` (the least fixpoint over the rules the start reaches):
    :func:`find_empty` of ``g`` is then None without walking ``g`` again."""
    object.__setattr__(g, "_empty", (None,))


def _find_empty(g: Grammar) -> tuple[str, str] | None:
    ok = productive_rules(g)
    if g.start in ok:
        return None
    path = [g.start]
    on_path = {g.start: 0}
    while True:
        cur = path[-1]
        blocking = [k for k in g.rule_refs(cur) if k not in ok]
        if not blocking:
            reason = "accepts no string"
            break
        nxt = blocking[0]
        if nxt in on_path:
            cycle = path[on_path[nxt]:] + [nxt]
            cur = nxt
            if len(cycle) == 2:
                reason = f"every expansion recurses into '{nxt}' (no finite string)"
            else:
                reason = ("every expansion recurses through "
                          + " -> ".join(f"'{c}'" for c in cycle) + " (no finite string)")
            path = path[:on_path[nxt] + 1]
            break
        on_path[nxt] = len(path)
        path.append(nxt)
    if len(path) > 1:
        shown = path if len(path) <= 6 else path[:3] + ["..."] + path[-2:]
        reason += "; needed by " + " -> ".join(shown[:-1])
    return cur, reason


def check_productive(g: Grammar, *, where: str = "") -> None:
    """Raise :class:`GrammarError` ``"[where: ]rule 'x': <reason>"`` when ``g`` accepts no
    string (see :func:`find_empty`)."""
    bad = find_empty(g)
    if bad is not None:
        prefix = f"{where}: " if where else ""
        raise GrammarError(f"{prefix}rule '{bad[0]}': {bad[1]}")
