"""Element content models as small automata over child-element names.

A :class:`~decoding.frontends.xml.model.Particle` compiles (Thompson construction) to an NFA
whose labels are element names; it is run as a lazily built DFA over frozensets of
NFA states, so non-deterministic models (hibernate-mapping's repeated ``filter-def*``)
are checked exactly and no input can cause backtracking blow-up.

Invariants: state sets are epsilon-closed; ``step`` returns None once no NFA state
survives; results are memoized per (state set, name).
"""

from __future__ import annotations

from decoding.frontends.xml.model import Particle

__all__ = ["ContentModel", "render_particle"]


def render_particle(p: Particle) -> str:
    """The particle in DTD syntax, e.g. ``(user_id,action)`` or ``(a|b)*``."""
    if p.kind == "name":
        return f"{p.name}{p.occur}"
    sep = "," if p.kind == "seq" else "|"
    return "(" + sep.join(render_particle(c) for c in p.children) + ")" + p.occur


class ContentModel:
    """Deterministic simulation of a content-model NFA."""

    def __init__(self, particle: Particle) -> None:
        self.text = render_particle(particle)
        self._eps: list[list[int]] = []
        self._lab: list[list[tuple[str, int]]] = []
        start, self._final = self._build(particle)
        self.start = self._closure({start})
        self._memo: dict[tuple[frozenset, str], frozenset | None] = {}
        # read-only views for hot loops: ``transitions[(state, name)]`` is ``step``'s
        # memo (missing until first computed); ``final in state`` == ``accepting(state)``
        self.transitions = self._memo
        self.final = self._final

    def _new(self) -> int:
        self._eps.append([])
        self._lab.append([])
        return len(self._eps) - 1

    def _build(self, p: Particle) -> tuple[int, int]:
        if p.kind == "name":
            s, e = self._new(), self._new()
            self._lab[s].append((p.name or "", e))
        elif p.kind == "seq":
            s = e = self._new()
            for c in p.children:
                cs, ce = self._build(c)
                self._eps[e].append(cs)
                e = ce
        else:
            s, e = self._new(), self._new()
            for c in p.children:
                cs, ce = self._build(c)
                self._eps[s].append(cs)
                self._eps[ce].append(e)
        if p.occur in ("?", "*"):
            self._eps[s].append(e)
        if p.occur in ("+", "*"):
            self._eps[e].append(s)
        if p.occur:
            s2, e2 = self._new(), self._new()
            self._eps[s2].append(s)
            self._eps[e].append(e2)
            s, e = s2, e2
        return s, e

    def _closure(self, states) -> frozenset:
        seen = set(states)
        todo = list(states)
        while todo:
            for t in self._eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)

    def step(self, state: frozenset, name: str) -> frozenset | None:
        key = (state, name)
        try:
            return self._memo[key]
        except KeyError:
            pass
        nxt = {t for s in state for (lab, t) in self._lab[s] if lab == name}
        out = self._closure(nxt) if nxt else None
        self._memo[key] = out
        return out

    def accepting(self, state: frozenset) -> bool:
        return self._final in state

    def expected(self, state: frozenset) -> list[str]:
        """Element names that may come next, in first-seen order."""
        names: list[str] = []
        for s in sorted(state):
            for lab, _ in self._lab[s]:
                if lab not in names:
                    names.append(lab)
        return names
