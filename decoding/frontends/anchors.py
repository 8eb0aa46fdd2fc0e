"""Wrap a grammar in anchor tokens such as ``<|xml_start|>`` ... ``<|xml_end|>``.

- ``mode="strict"``: the output is exactly ``START document END``.
- ``mode="lazy"``: ``FREE (START document END FREE){min_regions,max_regions}``: free text,
  then constrained regions, each followed by free text again.  ``max_regions=None`` means
  unbounded.  Every region that is opened is closed (the end anchor is required).

Anchors are :class:`decoding.ir.Special` nodes: the automaton matches one as a single
token when the vocabulary has it, otherwise as its literal text (``compile_dfa(...,
literal_specials=...)``).  Free text is any byte string that does *not contain the start
anchor's text* (built with :func:`text_without`, a KMP automaton turned into IR by state
elimination), so a literal anchor is never ambiguous and the model cannot spell the anchor
out in prose.  The document grammar is assumed not to contain the end anchor's text (true
for XML, where ``<`` in text is always escaped).
"""

from __future__ import annotations

from typing import Literal

from decoding.errors import GrammarError
from decoding.ir import EMPTY, Grammar, Node, Ref, Special, byteset, choice, rep, seq, star

__all__ = ["anchored", "text_without"]


def text_without(word: bytes) -> Node:
    """IR for every byte string that does not contain ``word`` as a substring."""
    m = len(word)
    if m == 0:
        raise GrammarError("text_without(): the forbidden word is empty")
    # KMP failure function and transition table over bytes
    fail = [0] * m
    k = 0
    for i in range(1, m):
        while k and word[i] != word[k]:
            k = fail[k - 1]
        if word[i] == word[k]:
            k += 1
        fail[i] = k

    def delta(state: int, b: int) -> int:
        while state and word[state] != b:
            state = fail[state - 1]
        return state + 1 if word[state] == b else 0

    final = m  # an extra state standing for "end of string" (every KMP state accepts)
    edges: dict[tuple[int, int], Node] = {}
    for i in range(m):
        by_target: dict[int, list[tuple[int, int]]] = {}
        for b in range(256):
            j = delta(i, b)
            if j < m:
                by_target.setdefault(j, []).append((b, b))
        for j, rs in by_target.items():
            edges[(i, j)] = byteset(rs)
        edges[(i, final)] = EMPTY
    for k in range(m - 1, 0, -1):  # eliminate KMP states m-1 .. 1
        loop = edges.pop((k, k), None)
        mid = star(loop) if loop is not None else EMPTY
        ins = [(p, n) for (p, q), n in edges.items() if q == k]
        outs = [(q, n) for (p, q), n in edges.items() if p == k]
        for p, _ in ins:
            del edges[(p, k)]
        for q, _ in outs:
            del edges[(k, q)]
        for p, a in ins:
            for q, b in outs:
                path = seq(a, mid, b)
                edges[(p, q)] = choice(edges[(p, q)], path) if (p, q) in edges else path
    loop0 = edges.get((0, 0))
    return seq(star(loop0) if loop0 is not None else EMPTY, edges[(0, final)])


def anchored(grammar: Grammar, start: str = "<|xml_start|>", end: str = "<|xml_end|>", *,
             mode: Literal["strict", "lazy"] = "strict", max_regions: int | None = 1,
             min_regions: int = 0) -> Grammar:
    """``grammar`` delimited by anchors (see the module docstring)."""
    if not start or not end:
        raise GrammarError("anchored(): the start and end anchors must be non-empty")
    if mode not in ("strict", "lazy"):
        raise GrammarError(f"anchored(): mode must be 'strict' or 'lazy', not {mode!r}")
    if max_regions is not None and (max_regions < 1 or max_regions < min_regions):
        raise GrammarError("anchored(): max_regions must be >= 1 and >= min_regions")
    if min_regions < 0:
        raise GrammarError("anchored(): min_regions must be >= 0")
    names = set(grammar.names)
    top, inner = "anchored", "anchored_document"
    while top in names or inner in names:
        top, inner = "_" + top, "_" + inner
    region = seq(Special(start), Ref(inner), Special(end))
    if mode == "strict":
        body = region
    else:
        free = text_without(start.encode("utf-8"))
        body = seq(free, rep(seq(region, free), min_regions, max_regions))
    rules = ((top, body), (inner, Ref(grammar.start))) + grammar.rules
    return Grammar(top, rules, grammar.max_depth)
