"""Byte-level DFA compiled from the grammar IR.

Pipeline: IR -> Thompson NFA (refs inlined, recursion unrolled to ``max_depth``)
-> subset construction over byte equivalence classes -> Moore minimisation -> pruning.

``Inter``/``Diff`` nodes (regular operands, no Ref/Special) are built by
:func:`regular_dfa`: each operand is determinised on its own, the operands are combined by
product construction (intersection: both accept; difference: the base accepts and the
subtracted operand does not, a dead state of it counting as rejecting), the product is
minimised, and its states are embedded in the enclosing NFA (one NFA state per DFA state,
an epsilon edge from each accepting one to the node's end).  The same code serves the
pushdown back-end, whose per-rule automata are built here too.

Limits (:class:`decoding.limits.Limits`, checked by :func:`compile_dfa`): the IR is
estimated first (:func:`decoding.ir.size.check_size`: ``max_nfa_states`` and
``max_compile_work``), refs are inlined at most ``max_nesting`` deep, the NFA stops at
``max_nfa_states``, the DFA at ``max_dfa_states`` (or ``max_states``), and the NFA build,
the subset construction and the minimisation check a ``max_compile_seconds`` deadline.
Each is a :class:`~decoding.errors.LimitError` naming the rule (when known) and the limit;
never a ``RecursionError``.

Invariants of a :class:`DFA`
- state 0 is the start state; ``-1`` in ``trans`` means "no transition" (dead);
- every state is reachable from the start and can reach an accepting state, so a
  walk that only follows existing transitions never gets stuck before acceptance;
- columns ``0..n_classes-1`` of ``trans`` are byte classes (``byte_class[b]`` maps a
  byte to its class); columns ``n_classes + k`` are the special symbols ``specials[k]``;
- arrays are read-only; the object is immutable and picklable;
- ``trans`` is int16 when there are fewer than 32,767 states, else int32.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from decoding import _native
from decoding.errors import GrammarError, LimitError
from decoding.ir import ByteSet, Choice, Dfa, Diff, Grammar, Inter, Lit, Node, Ref, Repeat, Seq, Special, map_leaves
from decoding.ir.productive import check_productive
from decoding.ir.size import check_size, estimate_size, node_size
from decoding.ir.size import is_sep_loop as _sep_loop
from decoding.limits import DEFAULT_LIMITS, Limits

__all__ = ["DFA", "NFAMatcher", "compile_dfa", "regular_dfa", "state_dtype", "estimate_size", "node_size",
           "DEFAULT_MAX_STATES"]

DEFAULT_MAX_STATES = DEFAULT_LIMITS.max_dfa_states
_DEFAULT_MAX_NFA = DEFAULT_LIMITS.max_nfa_states


@dataclass(frozen=True, eq=False)
class DFA:
    byte_class: np.ndarray  # uint16[256]
    trans: np.ndarray  # int32[n_states, n_classes + len(specials)]
    accepting: np.ndarray  # bool[n_states]
    specials: tuple[str, ...]
    n_classes: int

    @property
    def n_states(self) -> int:
        return int(self.trans.shape[0])

    def step(self, state: int, byte: int) -> int:
        return int(self.trans[state, self.byte_class[byte]])

    def step_special(self, state: int, k: int) -> int:
        return int(self.trans[state, self.n_classes + k])

    def run(self, data: bytes, state: int = 0) -> int:
        """State after consuming ``data`` from ``state``, or -1 if rejected on the way."""
        trans, bc = self.trans, self.byte_class
        for b in data:
            state = int(trans[state, bc[b]])
            if state < 0:
                return -1
        return state

    def accepts(self, data: bytes) -> bool:
        s = self.run(data)
        return s >= 0 and bool(self.accepting[s])

    def full_table(self) -> np.ndarray:
        """int32[n_states, 256] transition table over raw bytes (for the native trie walk)."""
        return np.ascontiguousarray(self.trans[:, self.byte_class.astype(np.intp)], dtype=np.int32)

    def prune(self, usable_bytes: Sequence[bool] | None = None) -> "DFA":
        """Drop states that cannot reach acceptance using only ``usable_bytes`` (default all)
        and specials, then drop unreachable states.  Raises if the start state dies."""
        return _prune(self, usable_bytes)

    def min_steps_to_accept(self) -> np.ndarray:
        """int32[n_states]: fewest transitions from each state to an accepting state."""
        n = self.n_states
        dist = np.full(n, -1, dtype=np.int32)
        rev = _reverse_edges(self.trans)
        frontier = list(np.nonzero(self.accepting)[0])
        for s in frontier:
            dist[s] = 0
        d = 0
        while frontier:
            d += 1
            nxt = []
            for t in frontier:
                for s in rev[t]:
                    if dist[s] < 0:
                        dist[s] = d
                        nxt.append(s)
            frontier = nxt
        return dist


# ----------------------------------------------------------------------------- NFA

class _Deadline:
    """``check()`` raises LimitError once ``seconds`` have passed since construction."""
    __slots__ = ("seconds", "at", "what")

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.what = what

    def check(self, step: str) -> None:
        if time.monotonic() > self.at:
            raise LimitError(f"{self.what}: compiling took longer than max_compile_seconds="
                             f"{self.seconds:g} (during {step}); simplify the grammar or raise "
                             "the limit")


class _NFA:
    __slots__ = ("eps", "edges", "spec", "max_states", "grammar", "special_ids", "depth",
                 "rules", "max_nesting", "deadline", "regular", "max_dfa")

    def __init__(self, grammar: Grammar, special_ids: dict[str, int], max_states: int, *,
                 max_nesting: int = DEFAULT_LIMITS.max_nesting,
                 deadline: _Deadline | None = None) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []  # (lo, hi, target)
        self.spec: list[list[tuple[int, int]]] = []  # (special index, target)
        self.max_states = max_states
        self.grammar = grammar
        self.special_ids = special_ids
        self.depth: dict[str, int] = {}
        self.rules: list[str] = [grammar.start]  # rules being inlined, outermost first
        self.max_nesting = max_nesting
        self.deadline = deadline
        self.regular: dict[int, tuple[Node, DFA | None]] = {}  # id(Inter/Diff) -> its DFA
        self.max_dfa = DEFAULT_MAX_STATES

    def new(self) -> int:
        self.eps.append([])
        self.edges.append([])
        self.spec.append([])
        n = len(self.eps)
        if n > self.max_states:
            raise LimitError(f"rule '{self.rules[-1]}': grammar expands to more than "
                             f"{self.max_states} NFA states (limit max_nfa_states); lower the "
                             "recursion depth or bounded repetitions")
        if not n & 0xFFF and self.deadline is not None:
            self.deadline.check(f"the NFA of rule '{self.rules[-1]}'")
        return n - 1

    def build_start(self, s: int) -> int | None:
        """Build the start rule from ``s``; a grammar nested deeper than Python's stack
        allows is a LimitError naming the innermost rule, never a RecursionError."""
        try:
            return self.build(self.grammar.rule(self.grammar.start), s)
        except RecursionError:
            raise LimitError(f"rule '{self.rules[-1]}': grammar nested too deeply to inline "
                             f"(rules {len(self.rules)} deep; limit max_nesting="
                             f"{self.max_nesting})") from None

    def build_sep_loop(self, x: Node, sep: tuple[Node, ...], s: int) -> int | None:
        """``x (sep x)*`` with one copy of ``x``: a fresh entry state ``a`` (only ``s`` and
        the back edge lead into it, so entering it always starts ``x`` afresh), ``x`` from
        ``a`` to ``e``, ``sep`` from ``e`` to ``e2`` and an epsilon edge ``e2 -> a``; the
        list ends at ``e``.  Same language as the two-copy construction."""
        a = self.new()
        self.eps[s].append(a)
        e = self.build(x, a)
        if e is None:
            return None
        e2 = e
        for it in sep:
            e2 = self.build(it, e2)
            if e2 is None:
                return e  # the separator is empty-language: just one x
        self.eps[e2].append(a)
        return e

    def build(self, node: Node, s: int) -> int | None:
        """Add ``node`` starting at state ``s``; return its end state, or None if empty language."""
        if isinstance(node, Lit):
            for b in node.data:
                t = self.new()
                self.edges[s].append((b, b, t))
                s = t
            return s
        if isinstance(node, ByteSet):
            if not node.ranges:
                return None
            t = self.new()
            for lo, hi in node.ranges:
                self.edges[s].append((lo, hi, t))
            return t
        if isinstance(node, Seq):
            items = node.items
            i = 0
            while i < len(items):
                it = items[i]
                if i + 1 < len(items) and _sep_loop(it, items[i + 1]):
                    e = self.build_sep_loop(it, items[i + 1].item.items[:-1], s)  # type: ignore[union-attr]
                    i += 2
                else:
                    e = self.build(it, s)
                    i += 1
                if e is None:
                    return None
                s = e
            return s
        if isinstance(node, Choice):
            end = None
            for it in node.items:
                a = self.new()
                self.eps[s].append(a)
                e = self.build(it, a)
                if e is None:
                    continue
                if end is None:
                    end = self.new()
                self.eps[e].append(end)
            return end
        if isinstance(node, Repeat):
            lo, hi = node.min, node.max
            for _ in range(lo):
                e = self.build(node.item, s)
                if e is None:
                    return None
                s = e
            if hi is None:
                a = self.new()
                self.eps[s].append(a)
                e = self.build(node.item, a)
                if e is not None:
                    self.eps[e].append(a)
                return a
            ends = [s]
            for _ in range(hi - lo):
                e = self.build(node.item, s)
                if e is None:
                    break
                ends.append(e)
                s = e
            if len(ends) == 1:
                return ends[0]
            end = self.new()
            for e in ends:
                self.eps[e].append(end)
            return end
        if isinstance(node, Ref):
            d = self.depth.get(node.name, 0)
            if d >= self.grammar.max_depth:
                return None  # recursion bound reached: empty language here
            if len(self.rules) > self.max_nesting:
                raise LimitError(f"rule '{node.name}': rules nested more than max_nesting="
                                 f"{self.max_nesting} deep when inlined (referenced from "
                                 f"'{self.rules[-1]}')")
            self.depth[node.name] = d + 1
            self.rules.append(node.name)
            try:
                return self.build(self.grammar.rule(node.name), s)
            finally:
                self.rules.pop()
                self.depth[node.name] = d
        if isinstance(node, Special):
            k = self.special_ids[node.text]
            t = self.new()
            self.spec[s].append((k, t))
            return t
        if isinstance(node, Dfa):
            ids = [self.new() for _ in node.edges]
            self.eps[s].append(ids[0])
            for i, es in enumerate(node.edges):
                self.edges[ids[i]].extend((lo, hi, ids[t]) for lo, hi, t in es)
            end = self.new()
            for a in node.accept:
                self.eps[ids[a]].append(end)
            return end
        if isinstance(node, (Inter, Diff)):
            hit = self.regular.get(id(node))
            if hit is None:
                hit = (node, regular_dfa(node, max_states=self.max_dfa, max_nfa=self.max_states,
                                         deadline=self.deadline, where=f"rule '{self.rules[-1]}'"))
                self.regular[id(node)] = hit
            return self.embed(hit[1], s)
        raise GrammarError(f"not an IR node: {node!r}")

    def embed(self, dfa: "DFA | None", s: int) -> int | None:
        """The states of ``dfa`` (byte classes only) added from ``s``; its end state."""
        if dfa is None:
            return None
        bounds: list[list[tuple[int, int]]] = [[] for _ in range(dfa.n_classes)]
        bc = dfa.byte_class.tolist()
        lo = 0
        for b in range(1, 257):
            if b == 256 or bc[b] != bc[lo]:
                bounds[bc[lo]].append((lo, b - 1))
                lo = b
        ids = [self.new() for _ in range(dfa.n_states)]
        self.eps[s].append(ids[0])
        end = self.new()
        trans = dfa.trans.tolist()
        for i, row in enumerate(trans):
            es = self.edges[ids[i]]
            for c, t in enumerate(row[:dfa.n_classes]):
                if t >= 0:
                    for a, b in bounds[c]:
                        es.append((a, b, ids[t]))
            if dfa.accepting[i]:
                self.eps[ids[i]].append(end)
        return end


def _byte_classes(edges: list[list[tuple[int, int, int]]]) -> tuple[np.ndarray, int]:
    cuts = {0, 256}
    for es in edges:
        for lo, hi, _ in es:
            cuts.add(lo)
            cuts.add(hi + 1)
    bounds = sorted(cuts)
    bc = np.zeros(256, dtype=np.uint16)
    for i in range(len(bounds) - 1):
        bc[bounds[i]:bounds[i + 1]] = i
    return bc, len(bounds) - 1


class NFAMatcher:
    """The same automaton as :func:`compile_dfa`, simulated without determinising it.

    For grammars whose DFA would exceed ``max_states`` (e.g. large DTD content models),
    this answers membership exactly: the Thompson NFA is built by the same code (refs
    unrolled to ``max_depth``), and a set of NFA states is advanced byte by byte.
    Specials are not supported here (byte strings only).
    """

    def __init__(self, grammar: Grammar, *, max_nfa: int = _DEFAULT_MAX_NFA,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        nfa = _NFA(grammar, {}, max_nfa, max_nesting=limits.max_nesting,
                   deadline=_Deadline(limits.max_compile_seconds, f"grammar '{grammar.start}'"))
        self._start = nfa.new()
        end = nfa.build_start(self._start)
        if end is None:
            raise GrammarError(f"grammar '{grammar.start}' accepts no string")
        self._end = end
        self._eps = nfa.eps
        self._edges = nfa.edges
        self.n_states = len(nfa.eps)

    def _closure(self, states: Iterable[int]) -> set[int]:
        seen = set(states)
        stack = list(seen)
        eps = self._eps
        while stack:
            for y in eps[stack.pop()]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return seen

    def accepts(self, data: bytes) -> bool:
        cur = self._closure([self._start])
        edges = self._edges
        for b in data:
            nxt = [t for x in cur for lo, hi, t in edges[x] if lo <= b <= hi]
            if not nxt:
                return False
            cur = self._closure(nxt)
        return self._end in cur


def compile_dfa(grammar: Grammar, *, max_states: int | None = None,
                literal_specials: Iterable[str] = (), limits: Limits | None = None) -> DFA:
    """Compile ``grammar`` to a minimal, pruned byte DFA.

    ``literal_specials``: texts of :class:`Special` nodes to match as their UTF-8 bytes
    (because the vocabulary has no single token for them); the others become special
    symbols.  ``limits`` (default :data:`~decoding.limits.DEFAULT_LIMITS`) bounds the work
    as the module docstring says; ``max_states`` overrides ``limits.max_dfa_states``.
    Raises LimitError (rule and limit named) or GrammarError (empty language).
    """
    lim = DEFAULT_LIMITS if limits is None else limits
    if max_states is None:
        max_states = lim.max_dfa_states
    deadline = _Deadline(lim.max_compile_seconds, f"grammar '{grammar.start}'")
    check_size(grammar, lim)
    check_productive(grammar)  # an empty language names its rule, not "max_depth?"
    lit_specials = set(literal_specials)
    if lit_specials:
        grammar = _replace_specials(grammar, lit_specials)
    specials = tuple(grammar.specials())
    sid = {t: i for i, t in enumerate(specials)}
    nfa = _NFA(grammar, sid, lim.max_nfa_states, max_nesting=lim.max_nesting, deadline=deadline)
    nfa.max_dfa = max_states
    start = nfa.new()
    end = nfa.build_start(start)
    if end is None:
        raise GrammarError(f"grammar '{grammar.start}' accepts no string "
                           f"(recursion deeper than max_depth={grammar.max_depth}?)")
    dfa = _determinize(nfa, start, end, specials, deadline, max_states, f"grammar '{grammar.start}'")
    return _minimize(_prune(dfa, None), deadline)


def _pure_python_dfa() -> bool:
    """``GD_PURE_PYTHON_DFA=1``: determinise and minimise in Python (the reference)."""
    return os.environ.get("GD_PURE_PYTHON_DFA", "") == "1"


def _budget(deadline: "_Deadline | None") -> float:
    """Seconds left before ``deadline`` for the native code (inf: none)."""
    return math.inf if deadline is None else deadline.at - time.monotonic()


def _deadline_passed(deadline: "_Deadline | None", step: str) -> LimitError:
    """The LimitError of ``deadline.check(step)``, once the native code found the budget spent."""
    if deadline is not None:
        deadline.check(step)
        seconds, what = deadline.seconds, deadline.what
    else:  # unreachable: without a deadline the budget is infinite
        seconds, what = math.inf, "grammar"
    return LimitError(f"{what}: compiling took longer than max_compile_seconds={seconds:g} (during "
                      f"{step}); simplify the grammar or raise the limit")


def _nfa_arrays(nfa: "_NFA") -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``nfa`` as CSR int32 arrays for the native subset construction: (byte_class, n_classes,
    eps_off, eps_tgt, mv_off, mv) where ``mv`` holds (symbol, target) pairs, a symbol being
    a byte class or ``n_classes + special index``.  Same classes and moves as
    :func:`_byte_classes` and the move lists of :func:`_determinize_py`, built in numpy."""
    n = len(nfa.eps)
    chain = itertools.chain.from_iterable
    eps_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, nfa.eps), dtype=np.int32, count=n), out=eps_off[1:])
    eps_tgt = np.fromiter(chain(nfa.eps), dtype=np.int32, count=int(eps_off[-1]))
    e_len = np.fromiter(map(len, nfa.edges), dtype=np.int64, count=n)
    ne = int(e_len.sum())
    ed = np.fromiter(chain(chain(nfa.edges)), dtype=np.int32, count=3 * ne).reshape(ne, 3)
    lo, hi = ed[:, 0], ed[:, 1]
    cut = np.zeros(257, dtype=bool)  # a class starts at 0 and at every lo and hi + 1
    cut[0] = True
    cut[lo] = True
    cut[hi + 1] = True
    bc = (np.cumsum(cut[:256]) - 1).astype(np.uint16)
    ncls = int(bc[255]) + 1
    clo = bc[lo].astype(np.int64)
    cnt = bc[hi].astype(np.int64) - clo + 1
    total = int(cnt.sum())
    src = np.repeat(np.repeat(np.arange(n, dtype=np.int64), e_len), cnt)
    sym = np.repeat(clo - (np.cumsum(cnt) - cnt), cnt) + np.arange(total, dtype=np.int64)
    tgt = np.repeat(ed[:, 2], cnt)
    if any(nfa.spec):
        s_len = np.fromiter(map(len, nfa.spec), dtype=np.int64, count=n)
        ns = int(s_len.sum())
        sp = np.fromiter(chain(chain(nfa.spec)), dtype=np.int32, count=2 * ns).reshape(ns, 2)
        src = np.concatenate((src, np.repeat(np.arange(n, dtype=np.int64), s_len)))
        sym = np.concatenate((sym, ncls + sp[:, 0].astype(np.int64)))
        tgt = np.concatenate((tgt, sp[:, 1]))
        order = np.argsort(src, kind="stable")
        src, sym, tgt = src[order], sym[order], tgt[order]
    mv_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(src, minlength=n), out=mv_off[1:])
    mv = np.empty(2 * len(sym), dtype=np.int32)
    mv[0::2] = sym
    mv[1::2] = tgt
    return bc, ncls, eps_off, eps_tgt, mv_off, mv


def _determinize(nfa: "_NFA", start: int, end: int, specials: tuple[str, ...], deadline: _Deadline,
                 max_states: int, what: str) -> DFA:
    """Subset construction of ``nfa`` from ``start`` (accepting where ``end`` is reached), in
    C (``native/src/dfa_build.c``; the GIL is released): the same DFA, state numbering
    included, as :func:`_determinize_py`, which ``GD_PURE_PYTHON_DFA=1`` selects."""
    if _pure_python_dfa():
        return _determinize_py(nfa, start, end, specials, deadline, max_states, what)
    step = "the subset construction"
    if deadline is not None:
        deadline.check(step)
    bc, ncls, eps_off, eps_tgt, mv_off, mv = _nfa_arrays(nfa)
    nsym = ncls + len(specials)
    failed: type[Exception] | None = None
    try:
        tb, ab = _native.nfa_determinize(eps_off, eps_tgt, mv_off, mv, start, end, nsym,
                                         min(max_states, 2**31 - 1), _budget(deadline))
    except (OverflowError, TimeoutError) as e:  # past max_states / past the deadline
        failed = type(e)
    if failed is TimeoutError:
        raise _deadline_passed(deadline, step)
    if failed is OverflowError:
        raise LimitError(f"{what}: automaton exceeds max_states={max_states} DFA states (limit "
                         "max_dfa_states); simplify the grammar or raise the limit")
    trans = np.frombuffer(tb, dtype=np.int32).reshape(len(ab), nsym)
    dfa = DFA(bc, trans, np.frombuffer(ab, dtype=bool), specials, ncls)
    if deadline is not None:
        deadline.check(step)
    return dfa


def _determinize_py(nfa: "_NFA", start: int, end: int, specials: tuple[str, ...], deadline: _Deadline,
                    max_states: int, what: str) -> DFA:
    """Subset construction of ``nfa`` from ``start`` (accepting where ``end`` is reached), in
    Python: the reference of the native :func:`_determinize`.  States are numbered in BFS
    order, the symbols of a state in increasing order."""
    bc, ncls = _byte_classes(nfa.edges)
    nsym = ncls + len(specials)

    # per-NFA-state moves over classes
    moves: list[list[tuple[int, int]]] = []
    for s in range(len(nfa.eps)):
        mv = []
        for lo, hi, t in nfa.edges[s]:
            for c in range(int(bc[lo]), int(bc[hi]) + 1):
                mv.append((c, t))
        for k, t in nfa.spec[s]:
            mv.append((ncls + k, t))
        moves.append(mv)

    eps = nfa.eps
    closure_cache: dict[frozenset, frozenset] = {}

    def closure(states: Iterable[int]) -> frozenset:
        key = frozenset(states)
        hit = closure_cache.get(key)
        if hit is not None:
            return hit
        deadline.check("the subset construction")  # a miss costs O(NFA): cheap to check
        seen = set(key)
        stack = list(key)
        while stack:
            x = stack.pop()
            for y in eps[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        # keep only states that matter: those with moves, or the end state
        res = frozenset(x for x in seen if moves[x] or x == end)
        closure_cache[key] = res
        return res

    s0 = closure([start])
    index = {s0: 0}
    order = [s0]
    rows: list[list[int]] = []
    acc: list[bool] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        deadline.check("the subset construction")  # every DFA state: one may be large
        row = [-1] * nsym
        by_sym: dict[int, set[int]] = {}
        for x in cur:
            for c, t in moves[x]:
                by_sym.setdefault(c, set()).add(t)
        for c in sorted(by_sym):
            tgt = closure(by_sym[c])
            j = index.get(tgt)
            if j is None:
                j = len(order)
                if j >= max_states:
                    raise LimitError(f"{what}: automaton exceeds max_states="
                                     f"{max_states} DFA states (limit max_dfa_states); simplify "
                                     "the grammar or raise the limit")
                index[tgt] = j
                order.append(tgt)
            row[c] = j
        rows.append(row)
        acc.append(end in cur)
    trans = np.array(rows, dtype=np.int32).reshape(len(rows), nsym)
    dfa = DFA(bc, trans, np.array(acc, dtype=bool), specials, ncls)
    deadline.check("the subset construction")
    return dfa


def _operand_dfa(node: Node, max_states: int, max_nfa: int, deadline: _Deadline, where: str) -> DFA | None:
    """Minimal DFA of a Ref-free, Special-free node, or None for the empty language."""
    g = Grammar("operand", (("operand", node),))
    nfa = _NFA(g, {}, max_nfa, deadline=deadline)
    nfa.max_dfa = max_states
    nfa.rules = [where.removeprefix("rule '").removesuffix("'")]
    start = nfa.new()
    end = nfa.build(node, start)
    if end is None:
        return None
    dfa = _determinize(nfa, start, end, (), deadline, max_states, where)
    if not _reaches_accept(dfa):
        return None
    return _minimize(_prune(dfa, None), deadline)


def _reaches_accept(dfa: DFA) -> bool:
    seen = {0}
    stack = [0]
    trans = dfa.trans
    while stack:
        s = stack.pop()
        if dfa.accepting[s]:
            return True
        for t in set(trans[s].tolist()):
            if t >= 0 and t not in seen:
                seen.add(t)
                stack.append(t)
    return False


def _product(a: DFA, b: DFA | None, *, keep_b_dead: bool, accept: Callable[[bool, bool], bool],
             max_states: int, deadline: _Deadline, where: str) -> DFA | None:
    """Product of ``a`` and ``b`` (``b`` None: the empty language).  States are pairs; with
    ``keep_b_dead`` a pair may have ``b`` dead (-1), else such pairs are dropped.  None if
    no accepting pair is reachable."""
    if b is None:
        if not keep_b_dead:
            return None
        b = DFA(np.zeros(256, dtype=np.uint16), np.full((1, 1), -1, dtype=np.int32),
                np.zeros(1, dtype=bool), (), 1)
        b_start = -1
    else:
        b_start = 0
    pairs = np.stack([a.byte_class.astype(np.int64), b.byte_class.astype(np.int64)], axis=1)
    uniq, cls = np.unique(pairs, axis=0, return_inverse=True)
    cls = cls.reshape(-1)
    ncls = len(uniq)
    ca = uniq[:, 0].tolist()
    cb = uniq[:, 1].tolist()
    ta = a.trans.tolist()
    tb = b.trans.tolist()
    index = {(0, b_start): 0}
    order = [(0, b_start)]
    rows: list[list[int]] = []
    acc: list[bool] = []
    i = 0
    while i < len(order):
        x, y = order[i]
        i += 1
        if not i & 0xFF:
            deadline.check("an intersection/difference product")
        row = [-1] * ncls
        rx = ta[x]
        ry = tb[y] if y >= 0 else None
        for c in range(ncls):
            nx = rx[ca[c]]
            if nx < 0:
                continue
            ny = ry[cb[c]] if ry is not None else -1
            if ny < 0 and not keep_b_dead:
                continue
            key = (nx, ny)
            j = index.get(key)
            if j is None:
                j = len(order)
                if j >= max_states:
                    raise LimitError(f"{where}: an intersection/difference exceeds max_states="
                                     f"{max_states} DFA states (limit max_dfa_states)")
                index[key] = j
                order.append(key)
            row[c] = j
        rows.append(row)
        acc.append(accept(bool(a.accepting[x]), y >= 0 and bool(b.accepting[y])))
    dfa = DFA(cls.astype(np.uint16), np.array(rows, dtype=np.int32).reshape(len(rows), ncls),
              np.array(acc, dtype=bool), (), ncls)
    if not _reaches_accept(dfa):
        return None
    return _minimize(_prune(dfa, None), deadline)


def regular_dfa(node: Node, *, max_states: int = DEFAULT_MAX_STATES, max_nfa: int = _DEFAULT_MAX_NFA,
                deadline: "_Deadline | None" = None, where: str = "grammar") -> DFA | None:
    """Minimal byte DFA of a regular node (no Ref, no Special), Inter/Diff included; None
    for the empty language.  Each product is bounded by ``max_states`` (LimitError)."""
    dl = deadline if deadline is not None else _Deadline(DEFAULT_LIMITS.max_compile_seconds, where)
    if isinstance(node, Inter):
        acc = _operand_dfa(node.items[0], max_states, max_nfa, dl, where)
        for x in node.items[1:]:
            if acc is None:
                return None
            other = _operand_dfa(x, max_states, max_nfa, dl, where)
            acc = _product(acc, other, keep_b_dead=False, accept=lambda p, q: p and q,
                           max_states=max_states, deadline=dl, where=where)
        return acc
    if isinstance(node, Diff):
        base = _operand_dfa(node.base, max_states, max_nfa, dl, where)
        if base is None:
            return None
        minus = _operand_dfa(node.minus, max_states, max_nfa, dl, where)
        return _product(base, minus, keep_b_dead=True, accept=lambda p, q: p and not q,
                        max_states=max_states, deadline=dl, where=where)
    return _operand_dfa(node, max_states, max_nfa, dl, where)


def state_dtype(n_states: int) -> type:
    """Smallest signed dtype holding every state id and -1: int16 below 32,767 states (half
    the memory of the transition table), else int32."""
    return np.int16 if n_states < 32767 else np.int32


def _replace_specials(g: Grammar, texts: set[str]) -> Grammar:
    def rw(n: Node) -> Node:
        return Lit(n.text.encode("utf-8")) if isinstance(n, Special) and n.text in texts else n
    return Grammar(g.start, tuple((name, map_leaves(node, rw)) for name, node in g.rules), g.max_depth)


def _adjacency(trans: np.ndarray, *, reverse: bool) -> list[list[int]]:
    """Distinct successors (or predecessors with ``reverse``) of each state.  Edges are
    deduplicated in numpy first: a state has few distinct targets but up to hundreds of
    symbols, so a Python loop over every (state, symbol) was the slow part of large DFAs."""
    n = trans.shape[0]
    src, col = np.nonzero(trans >= 0)
    dst = trans[src, col].astype(np.int64)
    a, b = (dst, src.astype(np.int64)) if reverse else (src.astype(np.int64), dst)
    key = np.unique(a * n + b)
    head = key // n
    bounds = np.searchsorted(head, np.arange(n + 1)).tolist()
    tail = (key % n).tolist()
    return [tail[bounds[i]:bounds[i + 1]] for i in range(n)]


def _reverse_edges(trans: np.ndarray) -> list[list[int]]:
    return _adjacency(trans, reverse=True)


def _prune(dfa: DFA, usable_bytes: Sequence[bool] | None) -> DFA:
    trans = dfa.trans
    if usable_bytes is not None:
        usable_cls = np.zeros(trans.shape[1], dtype=bool)
        usable_cls[dfa.n_classes:] = True
        for b in range(256):
            if usable_bytes[b]:
                usable_cls[dfa.byte_class[b]] = True
        live_trans = np.where(usable_cls[None, :], trans, -1)
    else:
        live_trans = trans
    n = trans.shape[0]
    rev = _reverse_edges(live_trans)
    live = np.zeros(n, dtype=bool)
    stack = list(np.nonzero(dfa.accepting)[0])
    live[stack] = True
    while stack:
        t = stack.pop()
        for s in rev[t]:
            if not live[s]:
                live[s] = True
                stack.append(s)
    if not live[0]:
        raise GrammarError("grammar accepts no string that this vocabulary can spell"
                           if usable_bytes is not None else "grammar accepts no string")
    t2 = np.where((trans >= 0) & live[np.maximum(trans, 0)], trans, -1)
    # reachability from 0
    fwd = _adjacency(t2, reverse=False)
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    stack = [0]
    while stack:
        s = stack.pop()
        for t in fwd[s]:
            if not reach[t]:
                reach[t] = True
                stack.append(t)
    keep = live & reach
    return _renumber(dfa, t2, keep)


def _renumber(dfa: DFA, trans: np.ndarray, keep: np.ndarray) -> DFA:
    new_id = np.full(trans.shape[0] + 1, -1, dtype=np.int32)
    idx = np.nonzero(keep)[0]
    new_id[idx] = np.arange(len(idx), dtype=np.int32)
    t = trans[idx]
    t = np.where(t >= 0, new_id[t], -1).astype(state_dtype(len(idx)))
    t.setflags(write=False)
    acc = dfa.accepting[idx].copy()
    acc.setflags(write=False)
    bc = dfa.byte_class.copy()
    bc.setflags(write=False)
    return DFA(bc, t, acc, dfa.specials, dfa.n_classes)


def _row_classes(key: np.ndarray, rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact equivalence classes of the rows ``(key[i], *rows[i])`` (int64), numbered 0..m-1.
    Returns (class of each row, first row of each class).

    Rows are hashed with random 64-bit weights (wrapping arithmetic), grouped by hash, and
    every row is then compared with its group's first row; only if some hash collides is
    the exact (slower) ``np.unique(axis=0)`` used."""
    with np.errstate(over="ignore"):
        h = key * weights[0] + (rows * weights[None, 1:]).sum(axis=1, dtype=np.int64)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    rep = first[inv]
    if np.array_equal(key, key[rep]) and np.array_equal(rows, rows[rep]):
        return inv, first
    _, first, inv = np.unique(np.column_stack([key, rows]), axis=0, return_index=True,
                              return_inverse=True)
    return inv.reshape(-1), first


def _minimize(dfa: DFA, deadline: _Deadline | None = None) -> DFA:
    """Minimal DFA of ``dfa``, state 0 kept as the start: Valmari's partition refinement in C
    (``native/src/dfa_build.c``; the GIL is released).  The result, state numbering included,
    is that of :func:`_minimize_py`, which ``GD_PURE_PYTHON_DFA=1`` selects."""
    if _pure_python_dfa():
        return _minimize_py(dfa, deadline)
    step = "the minimisation"
    if deadline is not None:
        deadline.check(step)
    n = dfa.n_states
    trans = dfa.trans
    block = np.empty(n, dtype=np.int32)
    try:
        nblocks = _native.dfa_minimize(np.ascontiguousarray(trans, dtype=np.int32).reshape(-1),
                                       trans.shape[1], np.ascontiguousarray(dfa.accepting, dtype=np.uint8),
                                       block, _budget(deadline))
    except TimeoutError:
        nblocks = -1
    if nblocks < 0:
        raise _deadline_passed(deadline, step)
    if nblocks == n:
        return dfa
    # blocks are numbered by their first state: that state represents the block
    reps = np.unique(block, return_index=True)[1]
    t = trans[reps]
    t = np.where(t >= 0, block[np.maximum(t, 0)], -1).astype(state_dtype(nblocks))
    t.setflags(write=False)
    acc = dfa.accepting[reps].copy()
    acc.setflags(write=False)
    return DFA(dfa.byte_class, t, acc, dfa.specials, dfa.n_classes)


def _minimize_py(dfa: DFA, deadline: _Deadline | None = None) -> DFA:
    """Moore partition refinement, exact, with a worklist: block ids are stable (a block
    that splits keeps its id for the part holding its first state), and a round only
    re-examines the blocks holding a predecessor of a state whose id changed in the last
    round; the others cannot split.  Stops when no id changes, so every block is uniform
    in (block, successor blocks): the coarsest congruence, i.e. the minimal DFA.  Keeps
    state 0 as the start."""
    n = dfa.n_states
    trans = dfa.trans
    _, part = np.unique(dfa.accepting, return_inverse=True)
    part = part.reshape(-1).astype(np.int64)
    nblocks = int(part.max()) + 1 if n else 0
    weights = np.random.default_rng(0x5EED).integers(1, 2**62, trans.shape[1] + 1, dtype=np.int64) | 1
    # a missing transition (-1) goes to the extra index n, whose block is -1
    ext = np.where(trans < 0, n, trans)
    src, col = np.nonzero(trans >= 0)
    dst = trans[src, col]
    part_ext = np.empty(n + 1, dtype=np.int64)
    part_ext[n] = -1
    cand = np.arange(n)
    while len(cand):
        if deadline is not None:
            deadline.check("the minimisation")
        part_ext[:n] = part
        blocks = np.zeros(nblocks, dtype=bool)
        blocks[part[cand]] = True
        idx = np.nonzero(blocks[part])[0]
        key = part[idx]
        cls, first = _row_classes(key, part_ext[ext[idx]], weights)
        gblock = key[first]
        order = np.lexsort((first, gblock))
        keep = np.ones(len(order), dtype=bool)
        keep[1:] = gblock[order][1:] != gblock[order][:-1]
        gid = np.empty(len(order), dtype=np.int64)
        n_new = int((~keep).sum())
        gid[order] = np.where(keep, gblock[order], 0)
        gid[order[~keep]] = nblocks + np.arange(n_new)
        nblocks += n_new
        newp = gid[cls]
        moved = idx[newp != key]
        part[idx] = newp
        if not len(moved):
            break
        changed = np.zeros(n, dtype=bool)
        changed[moved] = True
        cand = np.unique(src[changed[dst]])
    if nblocks == n:
        return dfa
    # representative per block, block of state 0 first, others by first occurrence
    order: list[int] = []
    seen: dict[int, int] = {}
    for s in range(n):
        b = int(part[s])
        if b not in seen:
            seen[b] = len(order)
            order.append(s)
    block_new = np.zeros(nblocks, dtype=np.int32)
    for b, i in seen.items():
        block_new[b] = i
    reps = np.array(order)
    t = trans[reps]
    t = np.where(t >= 0, block_new[part[np.maximum(t, 0)]], -1).astype(state_dtype(nblocks))
    t.setflags(write=False)
    acc = dfa.accepting[reps].copy()
    acc.setflags(write=False)
    return DFA(dfa.byte_class, t, acc, dfa.specials, dfa.n_classes)
