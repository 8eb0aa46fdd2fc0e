"""Byte-level DFA compiled from the grammar IR.

Pipeline: IR -> Thompson NFA (refs inlined, recursion unrolled to ``max_depth``)
-> subset construction over byte equivalence classes -> pruning -> minimisation.

Where the work runs: the IR reachable from the start rule is serialised once into flat
records (:func:`_nfa_program`; Dfa leaves and Inter/Diff automata are made in Python) and the
Thompson NFA is built from them in C (:class:`_NativeNFA`, ``native/src/nfa_build.c``)
straight into flat edge arrays; the byte classes, the subset construction, the pruning and the
minimisation run in C too (``native/src/dfa_build.c``, GIL released; :func:`minimal_dfa`
determinises and minimises in one call, from the subset construction's sparse rows).  ``GD_PYTHON_NFA=1``
builds the NFA in Python (:class:`_NFA`, the reference of the C builder: the same arrays,
tests/test_nfa_native.py); ``GD_PURE_PYTHON_DFA=1`` selects the all-Python reference
(:class:`_NFARef` lists, :func:`_determinize_py`, :func:`_prune_py`, :func:`_minimize_py`):
the same DFAs, state numbering included (tests/test_nfa_arrays.py).

Shared tails (:data:`SHARE_TAILS`, ``build_into`` in ``native/src/nfa_build.c``): the C builder
builds a choice's branches into the choice's end, and the same rule, choice or sequence suffix
reached twice in those tail positions with the same end is built once (an object's property
value was built twice per level: as the first property present and after a comma, a copy the
subset construction doubled at every nesting level and the minimisation merged again):
kb_449's subset construction made 26,815 states for a minimal DFA of 1,978, now about that.
Optionally (:data:`RULE_DFAS`, off) large rules are determinised and minimised on their own
first and embedded as their minimal DFAs (:func:`_rule_dfa_names`, ``gd_nfa_build_rule_dfas``).
Either way the minimal DFA is the one of the NFA built as before, byte classes and state
numbering included (``GD_NO_SHARED_TAILS=1 GD_NO_RULE_DFAS=1`` builds that one;
tests/test_rule_dfas.py compares them).

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
``max_nfa_states``, the subset construction at ``max_subset_bytes`` (its table and sets: the
memory bound) or ``SUBSET_STATES_FACTOR`` times ``max_dfa_states`` (or ``max_states``), the
minimal DFA must have at most ``max_dfa_states`` states (:func:`minimal_dfa`), and the NFA
build, the subset construction and the minimisation check a ``max_compile_seconds`` deadline.
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

import hashlib
import math
import sys
import time
from array import array
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from decoding import _native
from decoding.envflags import flag
from decoding.errors import GrammarError, LimitError
from decoding.ir import EMPTY, ByteSet, Choice, Dfa, Diff, Grammar, Inter, Lit, Node, Ref, Repeat, Seq, Special, map_leaves, walk
from decoding.ir.nodes import _PLAIN_IDS, plain_nodes
from decoding.ir.program import (NK_CHOICE as _NK_CHOICE, NK_FALLBACK as _NK_FALLBACK, NK_LEAF as _NK_LEAF,
                                 NK_LIT as _NK_LIT, NK_NONE as _NK_NONE, NK_REF as _NK_REF, NK_REPEAT as _NK_REPEAT,
                                 NK_SEPLOOP as _NK_SEPLOOP, NK_SEQ as _NK_SEQ, NK_SET as _NK_SET,
                                 NK_SPECIAL as _NK_SPECIAL)
from decoding.ir.nodes import children as _children
from decoding.ir import literals as _literals
from decoding.ir.productive import check_productive
from decoding.ir.size import check_size, estimate_size, node_size, rule_estimates
from decoding.ir.size import is_sep_loop as _sep_loop
from decoding.limits import DEFAULT_LIMITS, Limits

__all__ = ["DFA", "NFAMatcher", "compile_dfa", "regular_dfa", "state_dtype", "estimate_size", "node_size",
           "DEFAULT_MAX_STATES"]

DEFAULT_MAX_STATES = DEFAULT_LIMITS.max_dfa_states
#: the subset construction of an automaton whose minimal DFA may have ``max_states`` states
#: may make up to this many times as many states before minimisation (and at most
#: ``Limits.max_subset_bytes`` bytes: the memory bound).  Snowplow's counted objects
#: determinise to 2-4 times their minimal DFA (sp_261: 239,342 -> 120,914 states; sp_172:
#: 216,507 -> 54,927); a caller's small cap (a counted unit's 4,096) still stops early
SUBSET_STATES_FACTOR = 8
_DEFAULT_MAX_NFA = DEFAULT_LIMITS.max_nfa_states


@dataclass(frozen=True, eq=False)
class DFA:
    byte_class: np.ndarray  # uint16[256]
    trans: np.ndarray  # int32[n_states, n_classes + len(specials)]
    accepting: np.ndarray  # bool[n_states]
    specials: tuple[str, ...]
    n_classes: int
    #: known trimmed: every state is reachable from state 0 and reaches acceptance (over
    #: every column); set by :func:`minimal_dfa` (a minimal DFA of a trimmed one is), so
    #: pruning it again with every column usable keeps it as it is (:func:`_prune`)
    trimmed: bool = field(default=False, repr=False)

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
        """int32[n_states]: fewest transitions from each state to an accepting state (-1:
        none).  A breadth-first search in C; in Python under ``GD_PURE_PYTHON_DFA=1``."""
        if not _pure_python_dfa():
            return _bfs(self.trans, np.nonzero(self.accepting)[0], reverse=True)
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


_NODE_TYPES = (ByteSet, Repeat, Seq, Lit, Choice, Ref, Special, Dfa, Inter, Diff)


class _NFA:
    """The Thompson NFA of a grammar, built straight into flat growable arrays for the
    native subset construction (``gd_nfa_determinize_coo``): epsilon edges
    ``eps_src[i] -> eps_tgt[i]``, byte-range edges ``e_src[i] --[e_lo[i], e_hi[i]]-->
    e_tgt[i]`` and special moves ``sp_src[i] --sp_k[i]--> sp_tgt[i]``; ``n`` states.

    The construction, state numbering, limits and errors are those of :class:`_NFARef`
    (the list-of-lists reference, ``GD_PURE_PYTHON_DFA=1``); only the storage differs, so a
    literal, an automaton leaf or an embedded DFA is added with a few bulk appends instead
    of one Python call per state or edge.  The order of edges within a state is not kept
    (the subset construction does not depend on it)."""
    __slots__ = ("n", "eps_src", "eps_tgt", "e_src", "e_lo", "e_hi", "e_tgt", "sp_src", "sp_k", "sp_tgt",
                 "max_states", "grammar", "special_ids", "depth", "rules", "max_nesting", "deadline", "regular",
                 "max_dfa", "leaves", "frags", "safe", "node_safe", "peak", "ref_leaves", "leaf_rules",
                 "leaf_limits", "share_tails")

    def __init__(self, grammar: Grammar, special_ids: dict[str, int], max_states: int, *,
                 max_nesting: int = DEFAULT_LIMITS.max_nesting,
                 deadline: _Deadline | None = None) -> None:
        self.n = 0
        self.eps_src, self.eps_tgt = array("i"), array("i")
        self.e_src, self.e_lo, self.e_hi, self.e_tgt = array("i"), array("B"), array("B"), array("i")
        self.sp_src, self.sp_k, self.sp_tgt = array("i"), array("i"), array("i")
        self.max_states = max_states
        self.grammar = grammar
        self.special_ids = special_ids
        self.depth: dict[str, int] = {}
        self.rules: list[str] = [grammar.start]  # rules being inlined, outermost first
        self.max_nesting = max_nesting
        self.deadline = deadline
        self.regular: dict[int, tuple[Node, _Leaf | None]] = {}  # id(Inter/Diff) -> its DFA's edges
        self.leaves: dict[int, tuple[Node, _Leaf]] = {}  # id(Dfa) -> its edges
        self.max_dfa = DEFAULT_MAX_STATES
        self.frags: dict[object, _Frag | None] = {}  # replayable fragments (see _replayed)
        self.safe: frozenset[str] | None = None  # rules whose expansion never meets a recursive rule
        self.node_safe: dict[int, tuple[Node, bool]] = {}
        self.peak = 0  # the most rules inlined at once while recording
        #: rules built as their own minimal DFAs (:func:`_rule_dfa_names`), a Ref to one embeds
        #: it: made here by :func:`_rule_leaves` (the Python builder) ...
        self.ref_leaves: dict[str, _Leaf] = {}
        #: ... or by the C builder (``gd_nfa_build_rule_dfas``) under these limits: (subset
        #: construction states, minimal DFA states, subset construction bytes)
        self.leaf_rules: frozenset[str] = frozenset()
        self.leaf_limits = (0, 0, 0)
        #: the C builder shares a choice's tails (``build_into`` in ``native/src/nfa_build.c``;
        #: always with rule DFAs): another NFA, the same language
        self.share_tails = False

    def _too_many(self) -> LimitError:
        return LimitError(f"rule '{self.rules[-1]}': grammar expands to more than "
                          f"{self.max_states} NFA states (limit max_nfa_states); lower the "
                          "recursion depth or bounded repetitions", limit="max_nfa_states",
                          value=self.max_states)

    def new(self) -> int:
        n = self.n + 1
        if n > self.max_states:
            raise self._too_many()
        self.n = n
        if not n & 0xFFF and self.deadline is not None:
            self.deadline.check(f"the NFA of rule '{self.rules[-1]}'")
        return n - 1

    def alloc(self, k: int) -> int:
        """``k`` new states, numbered consecutively; the first.  The limit and the deadline
        are checked as ``k`` calls of :meth:`new` would check them."""
        n0 = self.n
        n = n0 + k
        if n > self.max_states:
            raise self._too_many()
        self.n = n
        if n >> 12 != n0 >> 12 and self.deadline is not None:
            self.deadline.check(f"the NFA of rule '{self.rules[-1]}'")
        return n0

    def eps(self, s: int, t: int) -> None:
        self.eps_src.append(s)
        self.eps_tgt.append(t)

    #: build in C (:class:`_NativeNFA`); the Python :meth:`build` here is its reference
    native = False

    def build_start(self, s: int) -> int | None:
        """Build the start rule from ``s``; a grammar nested deeper than Python's stack
        allows is a LimitError naming the innermost rule, never a RecursionError."""
        root = self.grammar.rule(self.grammar.start)
        if self.native:
            e = _build_native(self, root, s)
            if e is not _FALLBACK:
                return e  # type: ignore[return-value]
        try:
            return self.build(root, s)
        except RecursionError:
            raise LimitError(f"rule '{self.rules[-1]}': grammar nested too deeply to inline "
                             f"(rules {len(self.rules)} deep; limit max_nesting="
                             f"{self.max_nesting})") from None

    def build_node(self, node: Node, s: int) -> int | None:
        """:meth:`build` of ``node`` from ``s``, in C for a :class:`_NativeNFA`."""
        if self.native:
            e = _build_native(self, node, s)
            if e is not _FALLBACK:
                return e  # type: ignore[return-value]
        return self.build(node, s)

    def build_sep_loop(self, x: Node, sep: tuple[Node, ...], s: int) -> int | None:
        """``x (sep x)*`` with one copy of ``x`` (see :meth:`_NFARef.build_sep_loop`)."""
        a = self.new()
        self.eps(s, a)
        e = self.build(x, a)
        if e is None:
            return None
        e2 = e
        for it in sep:
            e2 = self.build(it, e2)
            if e2 is None:
                return e  # the separator is empty-language: just one x
        self.eps(e2, a)
        return e

    def build(self, node: Node, s: int) -> int | None:
        """Add ``node`` starting at state ``s``; return its end state, or None if empty language."""
        tp = type(node)  # exact types first: cheaper than an isinstance chain
        if tp not in _NODE_TYPES:
            tp = next((c for c in _NODE_TYPES if isinstance(node, c)), tp)
        if tp is ByteSet:
            ranges = node.ranges  # type: ignore[union-attr]
            if not ranges:
                return None
            t = self.new()
            for lo, hi in ranges:
                self.e_src.append(s)
                self.e_lo.append(lo)
                self.e_hi.append(hi)
                self.e_tgt.append(t)
            return t
        if tp is Lit:
            data = node.data  # type: ignore[union-attr]
            k = len(data)
            if not k:
                return s
            n0 = self.alloc(k)  # a chain s -> n0 -> ... -> n0 + k - 1, one byte each
            e_src = self.e_src
            e_src.append(s)
            e_src.extend(range(n0, n0 + k - 1))
            self.e_tgt.extend(range(n0, n0 + k))
            self.e_lo.frombytes(data)
            self.e_hi.frombytes(data)
            return n0 + k - 1
        if tp is Seq:
            items = node.items  # type: ignore[union-attr]
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
        if tp is Choice:
            end = None
            eps_src, eps_tgt = self.eps_src, self.eps_tgt
            for it in node.items:  # type: ignore[union-attr]
                a = self.new()
                eps_src.append(s)
                eps_tgt.append(a)
                e = self.build(it, a)
                if e is None:
                    continue
                if end is None:
                    end = self.new()
                eps_src.append(e)
                eps_tgt.append(end)
            return end
        if tp is Repeat:
            lo, hi = node.min, node.max  # type: ignore[union-attr]
            item = node.item  # type: ignore[union-attr]
            copies = lo + (1 if hi is None else hi - lo)
            key = ("item", id(item)) if copies >= 2 and self._is_safe(item) else None
            for _ in range(lo):
                e = self._replayed(key, item, s)
                if e is None:
                    return None
                s = e
            if hi is None:
                a = self.new()
                self.eps(s, a)
                e = self._replayed(key, item, a)
                if e is not None:
                    self.eps(e, a)
                return a
            ends = [s]
            for _ in range(hi - lo):
                e = self._replayed(key, item, s)
                if e is None:
                    break
                ends.append(e)
                s = e
            if len(ends) == 1:
                return ends[0]
            end = self.new()
            self.eps_src.extend(ends)
            self.eps_tgt.extend([end] * len(ends))
            return end
        if tp is Ref:
            if self.ref_leaves:
                lf = self.ref_leaves.get(node.name)  # type: ignore[union-attr]
                if lf is not None:
                    return self.embed(lf, s)
            d = self.depth.get(node.name, 0)  # type: ignore[union-attr]
            if d >= self.grammar.max_depth:
                return None  # recursion bound reached: empty language here
            if len(self.rules) > self.max_nesting:
                raise LimitError(f"rule '{node.name}': rules nested more than max_nesting="
                                 f"{self.max_nesting} deep when inlined (referenced from "
                                 f"'{self.rules[-1]}')")
            self.depth[node.name] = d + 1
            self.rules.append(node.name)
            if len(self.rules) > self.peak:
                self.peak = len(self.rules)
            try:
                body = self.grammar.rule(node.name)  # type: ignore[union-attr]
                key = ("ref", node.name) if self._rule_safe(node.name) else None  # type: ignore[union-attr]
                return self._replayed(key, body, s)
            finally:
                self.rules.pop()
                self.depth[node.name] = d
        if tp is Special:
            k = self.special_ids[node.text]  # type: ignore[union-attr]
            t = self.new()
            self.sp_src.append(s)
            self.sp_k.append(k)
            self.sp_tgt.append(t)
            return t
        if tp is Dfa:
            leaf = self.leaves.get(id(node))
            if leaf is None:
                leaf = (node, _Leaf.of_dfa_node(node))
                self.leaves[id(node)] = leaf
            return self.embed(leaf[1], s)
        if tp is Inter or tp is Diff:
            hit = self.regular.get(id(node))
            if hit is None:
                dfa = regular_dfa(node, max_states=self.max_dfa, max_nfa=self.max_states,
                                  deadline=self.deadline, where=f"rule '{self.rules[-1]}'")
                hit = (node, None if dfa is None else _Leaf.of_dfa(dfa))
                self.regular[id(node)] = hit
            return None if hit[1] is None else self.embed(hit[1], s)
        raise GrammarError(f"not an IR node: {node!r}")

    # ------------------------------------------------------------------ replayed fragments
    # A node built from state ``s`` adds consecutive new states n0..n0+k-1 and edges between
    # ``s`` and them only.  When its language cannot depend on where it is built (no Ref that
    # can reach a recursive rule: depths never bind), a second build from ``s2`` is the first
    # one's arrays with ``s`` -> ``s2`` and ``x`` -> ``x - n0 + n0'`` -- the same states, edges
    # and edge order as building it again, so the NFA is identical, only built faster.
    # ``max_nesting`` is still enforced: a fragment records how many rules deep it went.

    def _rule_safe(self, name: str) -> bool:
        if self.safe is None:
            self.safe = _acyclic_rules(self.grammar)
        return name in self.safe

    def _is_safe(self, node: Node) -> bool:
        hit = self.node_safe.get(id(node))
        if hit is None:
            ok = all(self._rule_safe(x.name) for x in walk(node) if isinstance(x, Ref))
            hit = (node, ok)
            self.node_safe[id(node)] = hit
        return hit[1]

    def _replayed(self, key: object, node: Node, s: int) -> int | None:
        """``self.build(node, s)``, replaying the fragment recorded under ``key`` when there
        is one (``key`` None: always built)."""
        if key is None:
            return self.build(node, s)
        frag = self.frags.get(key, _UNSEEN)
        if frag is _UNSEEN:
            m = (self.n, len(self.eps_src), len(self.e_src), len(self.sp_src))
            peak, depth0 = self.peak, len(self.rules)
            self.peak = depth0
            try:
                e = self.build(node, s)
            finally:
                nest = self.peak - depth0
                self.peak = max(peak, self.peak)
            k = self.n - m[0]
            self.frags[key] = _Frag.take(self, m, s, e, nest) if k >= _FRAG_MIN else None
            return e
        if frag is None or len(self.rules) + frag.nest > self.max_nesting or self.n + frag.k > self.max_states:
            return self.build(node, s)  # small, or a limit is crossed inside: built (and refused) as is
        return frag.replay(self, s)

    def embed(self, leaf: "_Leaf", s: int) -> int:
        """The automaton ``leaf`` added from ``s`` (an epsilon edge to its state 0, one from
        each accepting state to a fresh end state); the end state."""
        base = self.alloc(leaf.n)
        end = self.new()
        self.eps(s, base)
        if len(leaf.lo):
            self.e_src.frombytes(np.add(leaf.src, base, dtype=np.int32).tobytes())
            self.e_tgt.frombytes(np.add(leaf.tgt, base, dtype=np.int32).tobytes())
            self.e_lo.frombytes(leaf.lo.tobytes())
            self.e_hi.frombytes(leaf.hi.tobytes())
        self.eps_src.frombytes(np.add(leaf.accept, base, dtype=np.int32).tobytes())
        self.eps_tgt.extend([end] * len(leaf.accept))
        return end

    @classmethod
    def from_lists(cls, eps: list[list[int]], edges: list[list[tuple[int, int, int]]],
                   spec: list[list[tuple[int, int]]]) -> "_NFA":
        """The arrays of an NFA given as per-state lists (:class:`_NFARef`'s form; tests)."""
        nfa = cls(Grammar.single(Lit(b"")), {}, max(len(eps), 1))
        nfa.n = len(eps)
        for a, ts in enumerate(eps):
            for b in ts:
                nfa.eps(a, b)
        for a, es in enumerate(edges):
            for lo, hi, b in es:
                nfa.e_src.append(a)
                nfa.e_lo.append(lo)
                nfa.e_hi.append(hi)
                nfa.e_tgt.append(b)
        for a, ks in enumerate(spec):
            for k, b in ks:
                nfa.sp_src.append(a)
                nfa.sp_k.append(k)
                nfa.sp_tgt.append(b)
        return nfa

    def edge_lists(self) -> tuple[list[list[int]], list[list[tuple[int, int, int]]], list[list[tuple[int, int]]]]:
        """(eps, edges, spec) as the per-state lists of :class:`_NFARef`, in insertion order."""
        eps: list[list[int]] = [[] for _ in range(self.n)]
        edges: list[list[tuple[int, int, int]]] = [[] for _ in range(self.n)]
        spec: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        for a, b in zip(self.eps_src, self.eps_tgt):
            eps[a].append(b)
        for a, lo, hi, b in zip(self.e_src, self.e_lo, self.e_hi, self.e_tgt):
            edges[a].append((lo, hi, b))
        for a, k, b in zip(self.sp_src, self.sp_k, self.sp_tgt):
            spec[a].append((k, b))
        return eps, edges, spec


class _NativeNFA(_NFA):
    """:class:`_NFA` whose build runs in C (``native/src/nfa_build.c``): the IR reachable
    from the node is serialised once (:func:`_nfa_program`), the builder makes the same
    states and edges in the same order, the same limits and errors.  What the C builder
    leaves to Python (see :func:`_build_native`) is built by :meth:`_NFA.build`."""
    __slots__ = ()
    native = True


_FALLBACK = object()
# (the node records of the serialised IR: decoding.ir.program, GD_NK_* in native/include/gd_native.h)
# gd_nfa_build's failures (GD_NFA_*, GD_DFA_TIMEOUT)
_NFA_STATES, _NFA_NESTING, _NFA_FALLBACK, _NFA_TIMEOUT = -10, -11, -12, -3
_I32 = 2**31 - 1
#: Python frames kept free below the recursion limit when the C builder counts the Python
#: builder's frames (past them, the Python builder runs and reports as it does)
_FRAME_MARGIN = 40
#: and at most this many (the C builder recurses on the C stack: a few hundred KiB at most)
_MAX_C_FRAMES = 4000
_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


#: the registered plain nodes (:func:`decoding.ir.nodes.register_plain`) serialised once:
#: (how many were registered, code, offset by node id, literal bytes); see :func:`_plain_program`
_PLAIN_PROGRAM: list[tuple[int, array, dict[int, int], bytes]] = []


def _plain_program() -> tuple[int, array, dict[int, int], bytes]:
    """The records of every registered plain node, made once per process (again when more
    are registered): every program starts with them, so the constant IR nearly every JSON
    Schema grammar reaches (a JSON string character, a number) is not serialised per compile.
    Plain nodes hold no Ref, Special, Dfa, Inter or Diff (checked when registered), so their
    records depend on the nodes alone (never on the NFA being built); records no root
    reaches are never read by ``gd_nfa_build``, and where a record lies in the code does not
    change what is built (every use of a node is built where it is used)."""
    nodes = plain_nodes()
    if not _PLAIN_PROGRAM or _PLAIN_PROGRAM[0][0] != len(nodes):
        code, at, lits = _serialise(None, list(nodes), 0, {}, 0)[:3]
        _PLAIN_PROGRAM[:] = [(len(nodes), array("i", code), at, b"".join(lits))]
    return _PLAIN_PROGRAM[0]


#: the C builder embeds the registered plain nodes as their minimal DFAs where it shares tails
#: (:func:`_plain_program_leafy`)
PLAIN_LEAVES = True
#: the leaf of each registered plain node, by id (None: built as it is); see _plain_program_leafy
_PLAIN_LEAF_OF: dict[int, "_Leaf | None"] = {}
#: the plain program with its composite nodes as their minimal DFAs (:func:`_plain_program_leafy`):
#: (how many were registered, code, offset by node id, literal bytes, leaves)
_PLAIN_LEAFY: list[tuple[int, array, dict[int, int], bytes, list]] = []


def _plain_program_leafy() -> tuple[int, array, dict[int, int], bytes, list]:
    """:func:`_plain_program` where each registered plain node that is a sequence, a choice or
    a repetition and whose trimmed minimal DFA has fewer states than its NFA is a leaf record
    of that DFA (:meth:`_Leaf.of_rule_dfa`, its byte classes kept): the NFA of a JSON string
    character (UTF-8 lead bytes, escapes) had states the subset construction copied and the
    minimisation merged again, in every string of a grammar.  The C builder uses it when it
    shares tails (:data:`SHARE_TAILS`); a plain node is regular and holds no Ref (checked when
    registered), so its language is the same wherever it is.  Made once per process (again
    when more nodes are registered)."""
    nodes = plain_nodes()
    if not _PLAIN_LEAFY or _PLAIN_LEAFY[0][0] != len(nodes):
        _, pcode, at, lit = _plain_program()
        code = array("i", pcode)
        leaves: list[_Leaf] = []
        for x in nodes:
            if x.__class__ not in (Seq, Choice, Repeat):
                continue
            lf = _PLAIN_LEAF_OF.get(id(x), _UNSEEN)
            if lf is _UNSEEN:  # (each node once per process: registered nodes live as long)
                lf = _PLAIN_LEAF_OF[id(x)] = _plain_leaf(x)
            if lf is not None:
                o = at[id(x)]
                code[o] = _NK_LEAF  # (a record of at least two entries: the rest is never read)
                code[o + 1] = len(leaves)
                leaves.append(lf)
        _PLAIN_LEAFY[:] = [(len(nodes), code, at, lit, leaves)]
    return _PLAIN_LEAFY[0]


def _plain_leaf(x: Node) -> "_Leaf | None":
    """The leaf of plain node ``x``'s trimmed minimal DFA, when it has fewer states than ``x``'s
    NFA (else None: ``x`` is built as it is)."""
    nfa = _NativeNFA(Grammar.single(x), {}, DEFAULT_LIMITS.max_nfa_states)  # (tails not shared: as it is)
    s = nfa.new()
    try:
        e = nfa.build_node(x, s)
        if e is None:
            return None
        dfa = minimal_dfa(nfa, s, e, (), _Deadline(60.0, "a plain node"), DEFAULT_MAX_STATES, "a plain node",
                          DEFAULT_LIMITS.max_subset_bytes, empty_ok=True)
    except (LimitError, GrammarError):
        return None
    if dfa is None:
        return None
    lf = _Leaf.of_rule_dfa(dfa)
    return lf if lf.n + 1 < nfa.n - 1 else None  # (embedded: its states and an end; built: nfa.n - 1)


def _nfa_program(nfa: "_NFA", root: Node) -> tuple:
    """The IR reachable from ``root`` as ``gd_nfa_build`` reads it (each node once, by
    identity): (code int32 array, root offset, literal bytes, rule names, rule body offsets,
    leaves).  Dfa leaves and the automata of Inter/Diff nodes are made here (as ``nfa``
    would make them, and cached on it); what C should not build becomes a FALLBACK record:
    a node of no IR class, a special not in ``special_ids``, a repeat bound past int32, an
    Inter/Diff whose automaton fails (the Python builder then raises as it does, at the place
    it does).  The code starts with the registered plain nodes' records (:func:`_plain_program`)."""
    if nfa.share_tails and PLAIN_LEAVES:
        _, pcode, pat, plit, pleaves = _plain_program_leafy()
    else:
        (_, pcode, pat, plit), pleaves = _plain_program(), []
    code, _, lits, tops, rule_names, rule_body, leaves = _serialise(nfa, [root], len(pcode), dict(pat), len(plit),
                                                                    pleaves)
    return pcode + array("i", code), tops[0], plit + b"".join(lits), rule_names, array("i", rule_body), leaves


def _serialise(nfa: "_NFA | None", roots: list[Node], base: int, at: dict[int, int], nlit: int,
               leaves0: "list[_Leaf]" = (), calls: "dict[str, int] | None" = None,
               keep: "list | None" = None) -> tuple:  # type: ignore[assignment]
    """The records of ``roots`` and of what they reach (rules included), to follow ``base``
    code entries and ``nlit`` literal bytes written already, whose nodes' offsets are in
    ``at`` (those nodes are not written again; ``at`` is updated): (code, offsets, literal
    chunks, the roots' offsets, rule names, rule body offsets, leaves); offsets count from
    the start of the whole code.  ``nfa`` None: the roots hold no Ref, Special, Dfa, Inter
    or Diff.  ``calls`` (the pushdown back-end's rules): a ``Ref(X)`` is the special move
    ``calls[X]`` (a FALLBACK record if absent), no rule is inlined.  ``keep``: where the
    records made here for no IR node (a separated loop's) stay alive while ``at`` names them
    by id (None: for this call; a caller that keeps ``at`` for later calls keeps them too)."""
    code: list[int] = []
    lits: list[bytes] = []
    fix: list[tuple[int, Node]] = []  # (index in ``code``, the node whose offset goes there)
    rule_ix: dict[str, int] = {}
    rule_names: list[str] = []
    rule_body: list[int] = []
    pending: list[tuple[int, str]] = []
    leaves: list[_Leaf] = list(leaves0)  # (the leaves the code's first records name come first)
    leaf_ix: dict[int, int] = {}
    sids = nfa.special_ids if nfa is not None else {}
    ref_leaves = nfa.ref_leaves if nfa is not None else None
    push = code.append

    at_get = at.get
    fix_push = fix.append

    def children(xs: Iterable[Node]) -> None:
        for x in xs:
            o = at_get(id(x))
            if o is None:
                fix_push((len(code), x))
                push(0)
            else:
                push(o)

    def leaf(node: Node, lf: "_Leaf") -> None:
        i = leaf_ix.get(id(node))
        if i is None:
            i = leaf_ix[id(node)] = len(leaves)
            leaves.append(lf)
        push(_NK_LEAF)
        push(i)

    def emit(node: Node) -> int:
        nonlocal nlit
        off = base + len(code)
        at[id(node)] = off
        tp = type(node)
        if tp not in _NODE_TYPES:
            tp = next((c for c in _NODE_TYPES if isinstance(node, c)), tp)
        if tp is Lit:
            data = node.data  # type: ignore[union-attr]
            code.extend((_NK_LIT, nlit, len(data)))
            lits.append(data)
            nlit += len(data)
        elif tp is ByteSet:
            ranges = node.ranges  # type: ignore[union-attr]
            push(_NK_SET)
            push(len(ranges))
            for r in ranges:
                code.extend(r)
        elif tp is Seq:
            items = node.items  # type: ignore[union-attr]
            push(_NK_SEQ)
            pos = len(code)
            push(0)
            k = i = 0
            last = len(items) - 1
            while i <= last:
                it = items[i]
                # (a separated loop starts with a Ref: the other items skip the call)
                if i < last and isinstance(it, Ref) and _sep_loop(it, items[i + 1]):
                    fix_push((len(code), _SepLoop(it, items[i + 1].item.items[:-1])))  # type: ignore[union-attr]
                    push(0)
                    i += 2
                else:
                    o = at_get(id(it))  # (children((it,)) inlined: the hot path of every sequence)
                    if o is None:
                        fix_push((len(code), it))
                        push(0)
                    else:
                        push(o)
                    i += 1
                k += 1
            code[pos] = k
        elif tp is Choice:
            items = node.items  # type: ignore[union-attr]
            push(_NK_CHOICE)
            push(len(items))
            children(items)
        elif tp is Repeat:
            lo, hi = node.min, node.max  # type: ignore[union-attr]
            if lo > _I32 or (hi is not None and hi > _I32):
                code.extend((_NK_FALLBACK, 0))
            else:
                push(_NK_REPEAT)
                it = node.item  # type: ignore[union-attr]
                o = at_get(id(it))
                if o is None:
                    fix_push((len(code), it))
                    push(0)
                else:
                    push(o)
                push(lo)
                push(-1 if hi is None else hi)
        elif tp is Ref:
            name = node.name  # type: ignore[union-attr]
            if calls is not None:
                k = calls.get(name)
                code.extend((_NK_FALLBACK, 0) if k is None else (_NK_SPECIAL, k))
                return off
            lf = ref_leaves.get(name) if ref_leaves else None
            if lf is not None:  # the rule's own minimal DFA (keyed by the leaf: every Ref to it)
                leaf(lf, lf)  # type: ignore[arg-type]
                return off
            r = rule_ix.get(name)
            if r is None:
                r = rule_ix[name] = len(rule_names)
                rule_names.append(name)
                rule_body.append(-1)
                pending.append((r, name))
            push(_NK_REF)
            push(r)
        elif tp is Special:
            k = sids.get(node.text)  # type: ignore[union-attr]
            if k is None:
                code.extend((_NK_FALLBACK, 0))
            else:
                code.extend((_NK_SPECIAL, k))
        elif tp is Dfa:
            hit = nfa.leaves.get(id(node))
            if hit is None:
                hit = nfa.leaves[id(node)] = (node, _Leaf.of_dfa_node(node))  # type: ignore[arg-type]
            leaf(node, hit[1])
        elif tp is Inter or tp is Diff:
            hit = nfa.regular.get(id(node))
            if hit is None:
                try:
                    dfa = regular_dfa(node, max_states=nfa.max_dfa, max_nfa=nfa.max_states, deadline=nfa.deadline,
                                      where=f"rule '{nfa.rules[-1]}'")
                except (LimitError, GrammarError):
                    dfa = _FALLBACK  # type: ignore[assignment]
                if dfa is not _FALLBACK:
                    hit = nfa.regular[id(node)] = (node, None if dfa is None else _Leaf.of_dfa(dfa))
            if hit is None:
                code.extend((_NK_FALLBACK, 0))
            elif hit[1] is None:
                push(_NK_NONE)
            else:
                leaf(node, hit[1])
        elif tp is _SepLoop:
            push(_NK_SEPLOOP)
            children((node.x,))  # type: ignore[union-attr]
            push(len(node.sep))  # type: ignore[union-attr]
            children(node.sep)  # type: ignore[union-attr]
        else:
            code.extend((_NK_FALLBACK, 0))
        return off

    if keep is None:
        keep = []  # the _SepLoop records stay alive while their ids are keys
    tops = []
    for root in roots:
        top = at_get(id(root))
        tops.append(emit(root) if top is None else top)
    while fix or pending:
        while fix:
            pos, x = fix.pop()
            o = at.get(id(x))
            if o is None:
                if type(x) is _SepLoop:
                    keep.append(x)
                o = emit(x)
            code[pos] = o
        while pending and not fix:
            r, name = pending.pop()
            body = nfa.grammar.rule(name)
            o = at.get(id(body))
            rule_body[r] = o if o is not None else emit(body)
    return code, at, lits, tops, rule_names, rule_body, leaves


@dataclass(frozen=True, eq=False)
class _SepLoop:
    """``x (sep x)*`` of a Seq (:func:`decoding.ir.size.is_sep_loop`), as serialised."""
    x: Node
    sep: tuple[Node, ...]


#: the arrays of the plain leaves alone (a JSON Schema grammar's program has no other leaf,
#: mostly): (the plain leaves' list of :data:`_PLAIN_LEAFY`, arrays), made once; replaced
#: whole (one reference: a thread reads the list and the arrays of one snapshot)
_PLAIN_LEAF_ARRAYS: "tuple | None" = None


def _leaf_arrays(leaves: "list[_Leaf]") -> tuple:
    if not leaves:
        z64 = np.zeros(1, dtype=np.int64)
        return _EMPTY_I32, z64, _EMPTY_I32, _EMPTY_U8, _EMPTY_U8, _EMPTY_I32, z64, _EMPTY_I32
    global _PLAIN_LEAF_ARRAYS
    snap = _PLAIN_LEAFY[0] if _PLAIN_LEAFY else None
    plain = snap[4] if snap is not None else None
    # (_Leaf compares by identity: == is the element-wise ``is``, in C)
    if plain is not None and len(leaves) == len(plain) and leaves == plain:
        hit = _PLAIN_LEAF_ARRAYS
        if hit is None or hit[0] is not plain:  # (a snapshot's list is never changed once made)
            hit = _PLAIN_LEAF_ARRAYS = (plain, _leaf_arrays_of(leaves))
        return hit[1]
    return _leaf_arrays_of(leaves)


def _leaf_arrays_of(leaves: "list[_Leaf]") -> tuple:
    eoff = np.zeros(len(leaves) + 1, dtype=np.int64)
    np.cumsum([len(lf.lo) for lf in leaves], out=eoff[1:])
    aoff = np.zeros(len(leaves) + 1, dtype=np.int64)
    np.cumsum([len(lf.accept) for lf in leaves], out=aoff[1:])

    def cat(f: str, dt: type) -> np.ndarray:
        return np.ascontiguousarray(np.concatenate([getattr(lf, f) for lf in leaves]), dtype=dt)
    return (np.array([lf.n for lf in leaves], dtype=np.int32), eoff, cat("src", np.int32), cat("lo", np.uint8),
            cat("hi", np.uint8), cat("tgt", np.int32), aoff, cat("accept", np.int32))


def _stack_depth() -> int:
    f = sys._getframe(1)
    n = 1
    while f is not None:
        f = f.f_back  # type: ignore[assignment]
        n += 1
    return n


def _build_native(nfa: "_NFA", node: Node, s: int) -> "int | None | object":
    """``nfa.build(node, s)`` by ``gd_nfa_build``: the end state (None: the empty language),
    the same LimitError, or :data:`_FALLBACK` where the Python builder must run (nothing was
    added to ``nfa`` then)."""
    if any(nfa.depth.values()):
        return _FALLBACK
    return _build_program(nfa, _nfa_program(nfa, node), s)


def _build_program(nfa: "_NFA", program: tuple, s: int) -> "int | None | object":
    """:func:`_build_native` of a program made already (:func:`_nfa_program`'s tuple)."""
    code, root, lit, names, bodies, leaves = program
    frames = min(sys.getrecursionlimit() - _stack_depth() - _FRAME_MARGIN, _MAX_C_FRAMES)
    if frames < 1:
        return _FALLBACK
    want = ()
    if nfa.leaf_rules or nfa.share_tails:
        sub, max_dfa, max_bytes = nfa.leaf_limits
        want = (np.fromiter((n in nfa.leaf_rules for n in names), dtype=np.uint8, count=len(names)),
                min(sub, _I32), min(max_dfa, _I32), max(0, int(max_bytes)))
    res = _native.nfa_build(code, lit, bodies, *_leaf_arrays(leaves), root, nfa.n, s, nfa.grammar.max_depth,
                            min(nfa.max_nesting, _I32 - 2), len(nfa.rules), min(nfa.max_states, _I32), frames,
                            _budget(nfa.deadline), *want)
    rc = res[0]
    if rc == 0:
        _, n, end, eps_src, eps_tgt, e_src, e_lo, e_hi, e_tgt, sp_src, sp_k, sp_tgt = res
        nfa.n = n
        nfa.eps_src.frombytes(eps_src)
        nfa.eps_tgt.frombytes(eps_tgt)
        nfa.e_src.frombytes(e_src)
        nfa.e_lo.frombytes(e_lo)
        nfa.e_hi.frombytes(e_hi)
        nfa.e_tgt.frombytes(e_tgt)
        nfa.sp_src.frombytes(sp_src)
        nfa.sp_k.frombytes(sp_k)
        nfa.sp_tgt.frombytes(sp_tgt)
        return None if end < 0 else end
    _, _, r1, r2, _ = res

    def name(r: int) -> str:
        return nfa.rules[-1] if r < 0 else names[r]
    if rc == _NFA_STATES:
        raise LimitError(f"rule '{name(r1)}': grammar expands to more than {nfa.max_states} NFA states (limit "
                         "max_nfa_states); lower the recursion depth or bounded repetitions", limit="max_nfa_states",
                         value=nfa.max_states)
    if rc == _NFA_NESTING:
        raise LimitError(f"rule '{name(r1)}': rules nested more than max_nesting={nfa.max_nesting} deep when "
                         f"inlined (referenced from '{name(r2)}')")
    if rc == _NFA_TIMEOUT:
        raise _deadline_passed(nfa.deadline, f"the NFA of rule '{name(r1)}'")
    return _FALLBACK


@dataclass(frozen=True, eq=False)
class _Leaf:
    """An automaton to embed in an NFA: ``n`` states (0 the entry), the byte-range edges
    ``src[i] --[lo[i], hi[i]]--> tgt[i]`` (int32, uint8) and the accepting states (int32),
    all relative to the first state; made once per Dfa node or Inter/Diff."""
    n: int
    src: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    tgt: np.ndarray
    accept: np.ndarray

    @staticmethod
    def of_dfa_node(node: Dfa) -> "_Leaf":
        src = [i for i, es in enumerate(node.edges) for _ in es]
        flat = [x for es in node.edges for e in es for x in e]
        ed = np.array(flat, dtype=np.int32).reshape(-1, 3)
        return _Leaf(len(node.edges), np.array(src, dtype=np.int32), ed[:, 0].astype(np.uint8),
                     ed[:, 1].astype(np.uint8), np.ascontiguousarray(ed[:, 2]),
                     np.array(node.accept, dtype=np.int32))

    @staticmethod
    def of_dfa(dfa: DFA) -> "_Leaf":
        """The byte columns of ``dfa``: one edge per (state, byte range of a class) with a
        transition (the ranges of a class are its maximal runs of bytes)."""
        bc = dfa.byte_class.astype(np.int64)
        start = np.ones(256, dtype=bool)
        start[1:] = bc[1:] != bc[:-1]
        r_lo = np.nonzero(start)[0]
        r_hi = np.append(r_lo[1:] - 1, 255)
        r_cls = bc[r_lo]
        t = dfa.trans[:, r_cls].astype(np.int64)  # [state, range]
        si, ri = np.nonzero(t >= 0)
        return _Leaf(dfa.n_states, si.astype(np.int32), r_lo[ri].astype(np.uint8), r_hi[ri].astype(np.uint8),
                     t[si, ri].astype(np.int32), np.nonzero(dfa.accepting)[0].astype(np.int32))

    def merged(self) -> "_Leaf":
        """The same automaton with each run of edges of one state over adjacent byte ranges
        to one target as one edge (edges in ``of_dfa``'s order: by state, then byte)."""
        src, lo, hi, tgt = self.src, self.lo, self.hi, self.tgt
        if len(src) < 2:
            return self
        join = (src[1:] == src[:-1]) & (tgt[1:] == tgt[:-1]) & (lo[1:].astype(np.int64) == hi[:-1].astype(np.int64) + 1)
        if not join.any():
            return self
        first = np.concatenate([[True], ~join])
        last = np.concatenate([~join, [True]])
        return _Leaf(self.n, src[first], lo[first], hi[last], tgt[first], self.accept)

    @staticmethod
    def of_rule_dfa(dfa: DFA) -> "_Leaf":
        """:meth:`of_dfa` of a rule's trimmed minimal DFA, keeping the byte classes of the
        NFA it was made from: the classes of an NFA are cut at every edge's ends, and a
        class without a live transition (an edge of the rule's NFA that leads nowhere) would
        lose its cuts in the DFA's edges; those are kept by one more state, unreachable,
        with an edge over each of the DFA's classes.  So an NFA that embeds the leaf instead
        of inlining the rule has the byte classes it had, and its minimal DFA is the same,
        state numbering included (the numbering is the breadth-first order of the minimal
        DFA, see :func:`_minimize_py`).  A state's edges over adjacent ranges to one target are
        one edge where that keeps every cut (a JSON string character: 74 edges -> 36; an NFA
        embeds the leaf once per use)."""
        lf = _Leaf.of_dfa(dfa)
        bc = dfa.byte_class.astype(np.int64)
        start = np.ones(257, dtype=bool)
        start[1:256] = bc[1:] != bc[:-1]

        def cuts_of(x: _Leaf) -> np.ndarray:
            cuts = np.zeros(257, dtype=bool)
            cuts[0] = cuts[256] = True
            cuts[x.lo] = True
            cuts[x.hi.astype(np.int64) + 1] = True
            return cuts
        if np.array_equal(cuts_of(lf), start):
            merged = lf.merged()
            return merged if np.array_equal(cuts_of(merged), start) else lf
        r_lo = np.nonzero(start[:256])[0]
        r_hi = np.append(r_lo[1:] - 1, 255)
        k = lf.n  # the carrier state
        return _Leaf(k + 1, np.concatenate([lf.src, np.full(len(r_lo), k, dtype=np.int32)]),
                     np.concatenate([lf.lo, r_lo.astype(np.uint8)]), np.concatenate([lf.hi, r_hi.astype(np.uint8)]),
                     np.concatenate([lf.tgt, np.full(len(r_lo), k, dtype=np.int32)]), lf.accept)


_UNSEEN = object()
#: fragments of fewer NFA states are rebuilt, not replayed (a replay costs a few numpy calls)
_FRAG_MIN = 24


@dataclass(frozen=True, eq=False)
class _Frag:
    """What building one node added to an :class:`_NFA`: ``k`` states from ``n0``, its edges
    (state numbers as built from entry state ``s``), the end state (or None: empty language)
    and ``nest``, the most rules it inlined below its own level."""
    s: int
    n0: int
    k: int
    end: int | None
    nest: int
    eps: tuple[np.ndarray, np.ndarray]
    byte: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    spec: tuple[np.ndarray, np.ndarray, np.ndarray]

    @staticmethod
    def take(nfa: "_NFA", m: tuple[int, int, int, int], s: int, end: int | None, nest: int) -> "_Frag":
        def cut(a: array, i: int, dt: type) -> np.ndarray:
            return np.frombuffer(a, dtype=dt)[i:].copy()
        return _Frag(s, m[0], nfa.n - m[0], end, nest,
                     (cut(nfa.eps_src, m[1], np.int32), cut(nfa.eps_tgt, m[1], np.int32)),
                     (cut(nfa.e_src, m[2], np.int32), cut(nfa.e_lo, m[2], np.uint8),
                      cut(nfa.e_hi, m[2], np.uint8), cut(nfa.e_tgt, m[2], np.int32)),
                     (cut(nfa.sp_src, m[3], np.int32), cut(nfa.sp_k, m[3], np.int32),
                      cut(nfa.sp_tgt, m[3], np.int32)))

    def replay(self, nfa: "_NFA", s: int) -> int | None:
        n0 = nfa.alloc(self.k)  # the limit and the deadline, as the build would check them
        shift = n0 - self.n0

        def moved(a: np.ndarray) -> bytes:
            return np.where(a == self.s, s, a + shift).astype(np.int32).tobytes()
        nfa.eps_src.frombytes(moved(self.eps[0]))
        nfa.eps_tgt.frombytes(moved(self.eps[1]))
        nfa.e_src.frombytes(moved(self.byte[0]))
        nfa.e_lo.frombytes(self.byte[1].tobytes())
        nfa.e_hi.frombytes(self.byte[2].tobytes())
        nfa.e_tgt.frombytes(moved(self.byte[3]))
        nfa.sp_src.frombytes(moved(self.spec[0]))
        nfa.sp_k.frombytes(self.spec[1].tobytes())
        nfa.sp_tgt.frombytes(moved(self.spec[2]))
        if self.end is None:
            return None
        return s if self.end == self.s else self.end + shift


def _acyclic_rules(g: Grammar) -> frozenset[str]:
    """Rules from which no rule on a cycle of references (a recursive rule) is reachable."""
    refs = {name: set(g.rule_refs(name)) for name, _ in g.rules}
    back: dict[str, set[str]] = {name: set() for name in refs}
    for a, bs in refs.items():
        for b in bs:
            back[b].add(a)
    # a rule is on a cycle iff it reaches itself: peel rules with no outgoing refs left (Kahn)
    out = {a: len(bs) for a, bs in refs.items()}
    todo = [a for a, k in out.items() if k == 0]
    done: set[str] = set()
    while todo:
        b = todo.pop()
        done.add(b)
        for a in back[b]:
            out[a] -= 1
            if out[a] == 0:
                todo.append(a)
    return frozenset(done)  # the rest reach a cycle (or are on one)


class _NFARef:
    """The Thompson NFA as per-state Python lists: the reference of :class:`_NFA` (same
    states, same edges, same limits), used by ``GD_PURE_PYTHON_DFA=1`` with
    :func:`_determinize_py`.  Kept simple on purpose: it is the oracle of the tests."""
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
                             "recursion depth or bounded repetitions", limit="max_nfa_states",
                             value=self.max_states)
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
        nfa = _new_nfa(grammar, {}, max_nfa, max_nesting=limits.max_nesting,
                       deadline=_Deadline(limits.max_compile_seconds, f"grammar '{grammar.start}'"))
        self._start = nfa.new()
        end = nfa.build_start(self._start)
        if end is None:
            raise GrammarError(f"grammar '{grammar.start}' accepts no string")
        self._end = end
        self._eps, self._edges, _ = _nfa_lists(nfa)
        self.n_states = len(self._eps)

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
                literal_specials: Iterable[str] = (), limits: Limits | None = None,
                size_checked: bool = False) -> DFA:
    """Compile ``grammar`` to a minimal, pruned byte DFA.

    ``literal_specials``: texts of :class:`Special` nodes to match as their UTF-8 bytes
    (because the vocabulary has no single token for them); the others become special
    symbols.  ``limits`` (default :data:`~decoding.limits.DEFAULT_LIMITS`) bounds the work
    as the module docstring says; ``max_states`` overrides ``limits.max_dfa_states``.
    Raises LimitError (rule and limit named) or GrammarError (empty language).
    ``size_checked``: the caller already ran :func:`~decoding.ir.size.check_size` on
    ``grammar`` with these limits (it is not repeated).
    """
    lim = DEFAULT_LIMITS if limits is None else limits
    if max_states is None:
        max_states = lim.max_dfa_states
    deadline = _Deadline(lim.max_compile_seconds, f"grammar '{grammar.start}'")
    nfa, start, end, specials = grammar_nfa(grammar, lim, deadline, literal_specials=literal_specials,
                                            size_checked=size_checked, max_dfa=max_states, rule_dfas=True)
    dfa = minimal_dfa(nfa, start, end, specials, deadline, max_states, f"grammar '{grammar.start}'",
                      lim.max_subset_bytes)
    assert dfa is not None
    return dfa


def plain_program_offsets() -> tuple[dict[int, int], int, int, bytes]:
    """``(offset of each registered plain node's record by id, code entries, literal bytes,
    a digest of the prefix)`` of the prefix every program starts with (:func:`_plain_program`;
    its leafy variant has the same offsets and lengths): a program written directly
    (:class:`decoding.ir.program.ProgramWriter`) names the shared nodes by these offsets, and
    the prefix's digest with the program's records names its language."""
    n, code, at, lit = _plain_program()
    if _PLAIN_DIGEST[0] != n:
        h = hashlib.blake2b(code.tobytes(), digest_size=16)
        h.update(lit)
        _PLAIN_DIGEST[:] = [n, h.digest()]
    return at, len(code), len(lit), _PLAIN_DIGEST[1]


#: (plain nodes registered, the digest of their program) of :func:`plain_program_offsets`
_PLAIN_DIGEST: list = [-1, b""]


#: the grammar a program's NFA builder names in its errors (a program has no rule of its own)
_PROGRAM_GRAMMAR = Grammar.single(EMPTY)


def program_dfa(code: array, lits: bytes, root: int, *, limits: Limits | None = None, max_nfa: int | None = None,
                max_states: int | None = None, specials: tuple[str, ...] = (), leaves: Sequence[Dfa] = (),
                leaf_at: Sequence[int] = ()) -> DFA | None:
    """The minimal, pruned DFA of a program written after the plain prefix
    (:func:`plain_program_offsets`): records ``code``, literal bytes ``lits``, the root record
    at offset ``root``; no rule of its own; ``[SPECIAL, k]`` is ``specials[k]`` (the DFA's
    special columns, in that order) and ``[LEAF, i]`` at ``code[leaf_at[j]]`` is the
    automaton leaf ``leaves[i]`` (:meth:`decoding.ir.program.ProgramWriter.leaf`).  The same NFA builder, subset
    construction and minimisation as :func:`compile_dfa`, the same limits and errors.  None
    where the caller must compile the IR instead: the native builder is off
    (``GD_PURE_PYTHON_DFA`` / ``GD_PYTHON_NFA``), or the NFA needs more than ``max_nfa`` states."""
    built = program_nfa(code, lits, root, limits=limits, max_nfa=max_nfa, specials=specials, leaves=leaves,
                        leaf_at=leaf_at)
    if built is None:
        return None
    nfa, start, end, lim, deadline, what = built
    return minimal_dfa(nfa, start, end, tuple(specials), deadline,
                       lim.max_dfa_states if max_states is None else max_states, what, lim.max_subset_bytes)


def program_nfa(code: array, lits: bytes, root: int, *, limits: Limits | None = None, max_nfa: int | None = None,
                specials: tuple[str, ...] = (), leaves: Sequence[Dfa] = (),
                leaf_at: Sequence[int] = ()) -> "tuple[_NFA, int, int, Limits, _Deadline, str] | None":
    """The Thompson NFA of a program as :func:`program_dfa` builds it (same arguments):
    ``(nfa, start, end, limits, deadline, what)``, the deadline started here; None where
    :func:`program_dfa` returns None."""
    if _pure_python_dfa() or _python_nfa():
        return None
    lim = DEFAULT_LIMITS if limits is None else limits
    what = f"grammar '{_PROGRAM_GRAMMAR.start}'"
    deadline = _Deadline(lim.max_compile_seconds, what)
    cap = lim.max_nfa_states if max_nfa is None else min(max_nfa, lim.max_nfa_states)
    nfa = _NativeNFA(_PROGRAM_GRAMMAR, {t: i for i, t in enumerate(specials)}, cap, max_nesting=lim.max_nesting,
                     deadline=deadline)
    nfa.share_tails = _share_tails()
    if nfa.share_tails and PLAIN_LEAVES:
        _, pcode, _, plit, all_leaves = _plain_program_leafy()
    else:
        (_, pcode, _, plit), all_leaves = _plain_program(), []
    if leaf_at:  # the program's own leaves after the prefix's
        code = array("i", code)
        for j in leaf_at:
            code[j + 1] += len(all_leaves)
        all_leaves = list(all_leaves) + [_Leaf.of_dfa_node(x) for x in leaves]
    start = nfa.new()
    try:
        end = _build_program(nfa, (pcode + code, root, plit + lits, [], array("i"), all_leaves), start)
    except LimitError as e:
        if e.limit == "max_nfa_states" and cap < lim.max_nfa_states:
            return None
        raise
    if end is _FALLBACK:
        return None
    if end is None:
        raise GrammarError(f"{what} accepts no string")
    return nfa, start, end, lim, deadline, what


def grammar_nfa(grammar: Grammar, lim: Limits, deadline: _Deadline, *, literal_specials: Iterable[str] = (),
                size_checked: bool = False, max_dfa: int = DEFAULT_MAX_STATES, flat: bool = False,
                rule_dfas: bool = False) -> "tuple[_NFA | _NFARef, int, int, tuple[str, ...]]":
    """The Thompson NFA of ``grammar`` as :func:`compile_dfa` and the lazy DFA
    (:mod:`decoding.backends.dfa.lazy`) build it: ``(nfa, start, end, specials)``.  The IR
    is estimated first unless ``size_checked``; ``literal_specials`` are matched as their
    bytes; ``max_dfa`` bounds the automata of Inter/Diff operands.  ``flat``: a builder with
    flat edge arrays even under ``GD_PURE_PYTHON_DFA=1`` (:class:`_NFA`, the reference of the
    native builder).  GrammarError for an empty language.  ``rule_dfas``: large rules are
    embedded as their own minimal DFAs (:func:`_rule_leaves`; the NFA then has another
    shape, but its minimal DFA is the same)."""
    if not size_checked:
        check_size(grammar, lim)
    check_productive(grammar)  # an empty language names its rule, not "max_depth?"
    lit_specials = set(literal_specials)
    if lit_specials:
        grammar = _replace_specials(grammar, lit_specials)
    specials = tuple(grammar.specials())
    sid = {t: i for i, t in enumerate(specials)}
    if flat and _pure_python_dfa():
        nfa: "_NFA | _NFARef" = _NFA(grammar, sid, lim.max_nfa_states, max_nesting=lim.max_nesting, deadline=deadline)
    else:
        nfa = _new_nfa(grammar, sid, lim.max_nfa_states, max_nesting=lim.max_nesting, deadline=deadline)
    nfa.max_dfa = max_dfa
    if isinstance(nfa, _NFA) and nfa.native and _share_tails():
        nfa.share_tails = True
    if rule_dfas and isinstance(nfa, _NFA):
        names = _rule_dfa_names(grammar, lim)
        if names and nfa.native:
            nfa.leaf_rules = frozenset(names)
            nfa.leaf_limits = (max(1, max_dfa) * SUBSET_STATES_FACTOR, max_dfa, lim.max_subset_bytes)
        elif names:
            nfa.ref_leaves = _rule_leaves(grammar, names, lim, deadline, max_dfa)
    start = nfa.new()
    end = nfa.build_start(start)
    if end is None:
        raise GrammarError(f"grammar '{grammar.start}' accepts no string ({_empty_hint(grammar)})")
    return nfa, start, end, specials


def _empty_hint(grammar: Grammar) -> str:
    """Why a grammar the productivity check let through may still accept nothing, worded from
    what it holds: an intersection or difference (``allOf``/``oneOf``/``not`` combinations
    that exclude every value) and/or recursion (strings that need nesting deeper than
    ``max_depth``)."""
    from decoding.ir import Diff, Inter, walk
    seen: set[int] = set()
    logic = any(isinstance(n, (Inter, Diff)) for _, node in grammar.rules for n in walk(node, seen))
    # a rule that reaches itself through Refs
    recursive = False
    for name, _ in grammar.rules:
        todo, met = list(grammar.rule_refs(name)), set()
        while todo and not recursive:
            r = todo.pop()
            if r == name:
                recursive = True
            elif r not in met:
                met.add(r)
                todo.extend(grammar.rule_refs(r))
        if recursive:
            break
    hints = []
    if logic:
        hints.append("an intersection or difference in it is empty: e.g. allOf/oneOf/not branches "
                     "that together exclude every value")
    if recursive:
        hints.append(f"its strings need recursion deeper than max_depth={grammar.max_depth}")
    return ", or ".join(hints) if hints else "no string over the bytes it can use"


#: :func:`compile_dfa` builds rules bottom-up (:func:`_rule_dfa_names`).  Off: once the NFA
#: builder shares tails (:data:`SHARE_TAILS`) the inlined NFA's subset construction is about
#: its minimal DFA already, and a rule DFA is then determinised and minimised twice (on its
#: own, then in its parent).  Same-process thread time, Kubernetes 60 (57 eager grammars):
#: tails shared 182 ms, tails shared and rule DFAs 315 ms, neither 977 ms; Snowplow 36: 665 /
#: 689 / 1,849 ms (rule DFAs lower its p90: 55 against 83 ms).  ``GD_RULE_DFAS=1`` turns them on
RULE_DFAS = False
#: ... when the grammar is estimated at this many NFA states or more
RULE_DFAS_ABOVE = 4000
#: ... each rule estimated at this many NFA states or more (refs expanded)
RULE_DFA_MIN = 256
#: ... and only rules built more than once where they are used (False: every such rule; the
#: A/B of the choice: Kubernetes 15 largest, thread time 286 -> 265 ms, kb_1110 45 -> 35 ms)
_SHARED_ONLY = True


def _share_tails() -> bool:
    """Whether the C builder of :func:`grammar_nfa` shares tails (``GD_NO_SHARED_TAILS=1``:
    not, unless rule DFAs are built; :data:`SHARE_TAILS`)."""
    return SHARE_TAILS and not flag("GD_NO_SHARED_TAILS")


#: :func:`grammar_nfa` (the eager and the lazy DFA back-ends) builds its NFA with a choice's
#: tails shared where it is built in C: kb_1110's NFA (the lazy back-end's) 192,833 -> 20,049
#: states, lazy_new 18 -> 1.3 ms
SHARE_TAILS = True


def _rule_dfas_off() -> bool:
    """Rule DFAs are off unless :data:`RULE_DFAS` or ``GD_RULE_DFAS=1``; ``GD_NO_RULE_DFAS=1``:
    off whatever the rest says (every rule inlined into one NFA)."""
    if flag("GD_NO_RULE_DFAS"):
        return True
    return not (RULE_DFAS or flag("GD_RULE_DFAS"))


def _rule_dfa_names(grammar: Grammar, lim: Limits) -> list[str]:
    """The rules of ``grammar`` that :func:`compile_dfa` builds on its own first, callees
    first: each as its minimal DFA, embedded where the rule is referenced instead of the
    rule's NFA inlined at every reference (in C: ``gd_nfa_build_rule_dfas``; in Python:
    :func:`_rule_leaves`).

    Why: the subset construction of an NFA that inlines a rule many times (an object's
    property value is inlined twice: as the first property present and after a comma) or a
    rule made of such rules makes states that the minimisation merges again, a factor that
    compounds with the nesting; kb_449 (Kubernetes) made 26,815 states for a minimal DFA of
    1,978.  Determinising and minimising each large rule first keeps every subset
    construction near its minimal DFA's size.

    Only for a grammar estimated at :data:`RULE_DFAS_ABOVE` NFA states or more, only rules
    estimated at :data:`RULE_DFA_MIN` or more (refs expanded) that reach no recursive rule
    (their language does not depend on where they are inlined) and no special (a leaf is
    bytes only), never the start rule, and only rules built more than once where they are
    used (two references, a repetition of more copies, a reference from a recursive rule,
    counted from the start through the rules inlined; :func:`_ref_counts`): a rule built once
    costs its parent's subset construction about the states its own DFA would have, and a
    chain of wrappers (a rule holding one large rule) would be determinised once per level.  The language is the same; so is the minimal DFA,
    numbering and byte classes included (:meth:`_Leaf.of_rule_dfa`).  Limits: the
    estimates were checked on the whole grammar; a rule whose own DFA hits a limit is
    inlined as before (the whole grammar then meets the limits as it did); ``max_nesting``
    cannot be reached where this is used (the bound below), so embedding a rule hides no
    nesting error; the deadline is the compile's.  ``GD_NO_RULE_DFAS=1``: none."""
    if _rule_dfas_off():
        return []
    est = rule_estimates(grammar)
    total = est.get(grammar.start)
    if total is None or total.states < RULE_DFAS_ABOVE:
        return []
    safe = _acyclic_rules(grammar)
    # rules inlined at once: at most max_depth of each recursive rule, then the longest chain
    # of acyclic rules; within max_nesting, neither build meets a nesting error
    height: dict[str, int] = {}
    order: list[str] = []  # the acyclic rules, callees first
    for name in est:
        if name in safe and name not in height:
            _post_order(grammar, name, height, order)
    bound = 1 + (len(grammar.rules) - len(safe)) * grammar.max_depth + max(height.values(), default=0)
    if bound > lim.max_nesting:
        return []
    specials = _rules_with_specials(grammar) if grammar.specials() else frozenset()
    # parents first: a rule is built on its own when it is built more than once where it is
    # used (a rule built once in its parent's NFA costs the same states there as its own DFA
    # would, and a chain of wrappers -- a rule holding one large rule -- would be determinised
    # once per level)
    uses: dict[str, int] = {grammar.start: 1}
    for name in est:  # referenced from a recursive rule: unrolled, so built more than once
        if name not in safe:
            for callee in grammar.rule_refs(name):
                uses[callee] = 2
    chosen: set[str] = set()
    for name in reversed(order):
        e = est.get(name)
        if name != grammar.start and e is not None and e.states >= RULE_DFA_MIN and name not in specials \
                and (uses.get(name, 0) >= 2 or not _SHARED_ONLY):
            chosen.add(name)
        times = 1 if name in chosen or name == grammar.start else uses.get(name, 0)
        for callee, k in _ref_counts(grammar.rule(name)).items():
            uses[callee] = min(2, uses.get(callee, 0) + times * k)
    return [name for name in order if name in chosen]


def _ref_counts(root: Node) -> dict[str, int]:
    """How many times each rule is built where ``root`` is built (capped at 2): the Refs of
    ``root`` counted along every path of its DAG, a repetition of more than one copy
    counting twice."""
    memo: dict[int, dict[str, int]] = {}
    stack: list = [root]
    while stack:
        n = stack.pop()
        if n.__class__ is tuple:
            n = n[1]
            out: dict[str, int] = {}
            mult = 2 if n.__class__ is Repeat and (n.max is None or n.max > 1) else 1
            for k in _children(n):
                for r, c in memo[id(k)].items():
                    out[r] = min(2, out.get(r, 0) + c * mult)
            memo[id(n)] = out
            continue
        if id(n) in memo:
            continue
        cls = n.__class__
        if id(n) in _PLAIN_IDS:  # (registered plain nodes hold no Ref)
            memo[id(n)] = {}
            continue
        if cls is Ref:
            memo[id(n)] = {n.name: 1}
            continue
        kids = _children(n)
        if not kids:
            memo[id(n)] = {}
            continue
        stack.append((None, n))
        stack.extend(k for k in kids if id(k) not in memo)
    return memo[id(root)]


def _rule_leaves(grammar: Grammar, names: list[str], lim: Limits, deadline: _Deadline,
                 max_dfa: int) -> "dict[str, _Leaf]":
    """The leaves of rules ``names`` (callees first), each built by :func:`_rule_leaf` with
    those before it embedded: what ``gd_nfa_build_rule_dfas`` makes, in Python."""
    leaves: dict[str, _Leaf] = {}
    for name in names:
        lf = _rule_leaf(grammar, name, lim, deadline, max_dfa, leaves)
        if lf is not None:
            leaves[name] = lf
    return leaves


def _post_order(g: Grammar, root: str, height: dict[str, int], order: list[str]) -> None:
    """The acyclic rules reachable from acyclic ``root`` not yet in ``height``, callees first,
    appended to ``order``; ``height[r]``: the most rules inlined at once building ``r``."""
    stack = [(root, iter(g.rule_refs(root)))]
    height[root] = 0  # (in progress: an acyclic rule never reaches itself)
    while stack:
        name, it = stack[-1]
        nxt = next((r for r in it if r not in height), None)
        if nxt is not None:
            height[nxt] = 0
            stack.append((nxt, iter(g.rule_refs(nxt))))
            continue
        stack.pop()
        height[name] = 1 + max((height[r] for r in g.rule_refs(name)), default=0)
        order.append(name)


def _rules_with_specials(g: Grammar) -> frozenset[str]:
    """Rules from which a :class:`Special` is reachable (through refs too)."""
    own = {name for name, node in g.rules if any(isinstance(x, Special) for x in walk(node))}
    back: dict[str, list[str]] = {}
    for name, _ in g.rules:
        for r in g.rule_refs(name):
            back.setdefault(r, []).append(name)
    todo = list(own)
    while todo:
        for a in back.get(todo.pop(), ()):
            if a not in own:
                own.add(a)
                todo.append(a)
    return frozenset(own)


def _rule_leaf(g: Grammar, name: str, lim: Limits, deadline: _Deadline, max_dfa: int,
               leaves: "dict[str, _Leaf]") -> "_Leaf | None":
    """Rule ``name``'s trimmed minimal DFA as a leaf (the rules in ``leaves`` embedded), or
    None when it is better inlined: its language is empty, or its automaton meets a limit
    (then the whole grammar's build meets it, or another, as it did).  The deadline raises."""
    nfa = _new_nfa(g, {}, lim.max_nfa_states, max_nesting=lim.max_nesting, deadline=deadline)
    if not isinstance(nfa, _NFA):
        return None
    nfa.max_dfa = max_dfa
    nfa.rules = [name]
    nfa.ref_leaves = leaves
    try:
        s = nfa.new()
        e = nfa.build_node(g.rule(name), s)
        if e is None:
            return None
        dfa = minimal_dfa(nfa, s, e, (), deadline, max_dfa, f"rule '{name}'", lim.max_subset_bytes, empty_ok=True)
    except (LimitError, GrammarError, RecursionError):
        if time.monotonic() >= deadline.at:
            raise
        return None
    return None if dfa is None else _Leaf.of_rule_dfa(dfa)


def minimal_dfa(nfa: "_NFA | _NFARef", start: int, end: int, specials: tuple[str, ...], deadline: _Deadline,
                max_states: int, what: str, max_bytes: int, *, empty_ok: bool = False) -> DFA | None:
    """The minimal, pruned DFA of ``nfa``: the subset construction (at most
    ``SUBSET_STATES_FACTOR * max_states`` states and ``max_bytes`` bytes), pruned and
    minimised, then at most ``max_states`` states, else LimitError.  ``empty_ok``: None for
    the empty language (else pruning raises GrammarError).  Each step drops the table of
    the step before, so at most two tables are alive at once."""
    sub = max(1, max_states) * SUBSET_STATES_FACTOR
    try:
        if _pure_python_dfa() or isinstance(nfa, _NFARef):
            dfa = _determinize(nfa, start, end, specials, deadline, sub, what, max_bytes)
        else:
            dfa = _native_minimal(nfa, start, end, specials, deadline, sub, what, max_bytes)
    except LimitError as e:
        raise _subset_limit(e, sub, max_states, what) from None
    if not dfa.trimmed:
        if empty_ok and not _reaches_accept(dfa):
            return None
        dfa = _trimmed_minimal(dfa, deadline)
    if dfa.n_states > max_states:
        raise LimitError(f"{what}: automaton exceeds max_states={max_states} DFA states (limit "
                         f"max_dfa_states): its minimal DFA has {dfa.n_states}; simplify the grammar or "
                         "raise the limit", limit="max_dfa_states", value=max_states)
    if dfa.trimmed:  # (the native path's, made so)
        return dfa
    return DFA(dfa.byte_class, dfa.trans, dfa.accepting, dfa.specials, dfa.n_classes, trimmed=True)


def _native_minimal(nfa: "_NFA", start: int, end: int, specials: tuple[str, ...], deadline: _Deadline,
                    max_states: int, what: str, max_bytes: int) -> DFA:
    """:func:`_determinize` then :func:`_trimmed_minimal` in one native call
    (``nfa_determinize_coo(..., minimal=True)``, ``gd_nfa_minimal_coo``: the minimisation
    reads the subset construction's sparse rows, no table is made between them, and the
    table comes back in its dtype): the same DFA, state numbering included, marked trimmed;
    the same limits and errors.  Where some state of the subset construction cannot reach
    acceptance, its table, not trimmed (the caller trims it and minimises, as
    :func:`_trimmed_minimal` does)."""
    step = "the subset construction"
    if deadline is not None:
        deadline.check(step)
    res = _native.nfa_determinize_coo(
        nfa.n, start, end, nfa.eps_src, nfa.eps_tgt, nfa.e_src, nfa.e_lo, nfa.e_hi, nfa.e_tgt,
        nfa.sp_src, nfa.sp_k, nfa.sp_tgt, len(specials), min(max_states, 2**31 - 1), _budget(deadline),
        max(0, int(max_bytes)), True)
    if len(res) == 2:  # (code, phase): a limit or the deadline
        rc, phase = res
        if rc == _DFA_TIMEOUT:
            raise _deadline_passed(deadline, "the minimisation" if phase else step)
        if rc == _DFA_BYTES:
            raise _too_many_bytes(what, max_bytes)
        raise LimitError(f"{what}: automaton exceeds max_states={max_states} DFA states (limit "
                         "max_dfa_states); simplify the grammar or raise the limit")
    _, live, bcb, ncls, n, tb, elem, ab = res
    trans = np.frombuffer(tb, dtype=np.int16 if elem == 2 else np.int32).reshape(n, ncls + len(specials))
    dfa = DFA(np.frombuffer(bcb, dtype=np.uint16), trans, np.frombuffer(ab, dtype=bool), specials, ncls,
              trimmed=bool(live))
    if deadline is not None:
        deadline.check("the minimisation" if live else step)
    return dfa


#: gd_nfa_minimal_coo's codes (GD_DFA_TIMEOUT, GD_DFA_BYTES)
_DFA_TIMEOUT, _DFA_BYTES = -3, -5


def _subset_limit(e: LimitError, sub: int, max_states: int, what: str) -> LimitError:
    """``e`` (raised by :func:`_determinize` bounded at ``sub`` states) as the caller reports
    it: past the subset bound, the ``max_dfa_states`` limit it stands for (``sub`` is
    ``SUBSET_STATES_FACTOR`` times it); any other limit as it is."""
    if e.limit == "max_subset_bytes" or f"max_states={sub} " not in str(e):
        return e
    return LimitError(f"{what}: automaton exceeds max_states={max_states} DFA states (limit "
                      f"max_dfa_states): its subset construction made more than {sub} states "
                      f"({SUBSET_STATES_FACTOR} x max_states) before minimisation; simplify the "
                      "grammar or raise the limit", limit="max_dfa_states", value=max_states)


def _trimmed_minimal(dfa: DFA, deadline: _Deadline | None) -> DFA:
    """``_minimize(_prune(dfa, None))`` of a subset construction's ``dfa`` (every state
    reachable from state 0), the same DFA, numbering and dtype included.  Minimises first,
    the minimisation telling on the way whether every state of ``dfa`` reaches acceptance
    (``gd_dfa_minimize_live``: over the incoming transitions it builds anyway); if so, the
    trim of ``dfa`` would have kept it as it is and the minimisation of the two is the same;
    else (some state is dead, or the language is empty) the trim then the minimisation, as
    before."""
    if _pure_python_dfa():
        return _minimize(_prune(dfa, None), deadline)
    live: list[bool] = []
    m = _minimize(dfa, deadline, live)
    if not live[0]:  # (every state of ``dfa`` reachable: live is trimmed)
        return _minimize(_prune(dfa, None), deadline)
    if m is dfa:  # already minimal: the table as the trim would have left it (its dtype, read-only)
        m = _read_only(dfa, *_kept(dfa))
    return m


def _kept(dfa: DFA) -> tuple[np.ndarray, np.ndarray]:
    """(table, acceptance) of ``dfa`` as a trim that keeps every state leaves them: the table
    in the dtype for its size, acceptance as bool (no copy unless a dtype changes)."""
    dt = state_dtype(dfa.n_states)
    t = dfa.trans if dfa.trans.dtype == dt else dfa.trans.astype(dt)
    a = dfa.accepting if dfa.accepting.dtype == bool else dfa.accepting.astype(bool)
    return t, a


def _read_only(dfa: DFA, t: np.ndarray, a: np.ndarray) -> DFA:
    """A DFA of ``dfa``'s byte classes and specials with table ``t`` and acceptance ``a``,
    every array read-only (the byte classes copied)."""
    for x in (t, a):
        if x.flags.writeable:
            x.setflags(write=False)
    bc = dfa.byte_class.copy()
    bc.setflags(write=False)
    return DFA(bc, t, a, dfa.specials, dfa.n_classes)


def _pure_python_dfa() -> bool:
    """``GD_PURE_PYTHON_DFA=1``: the reference pipeline, all Python: the NFA as lists
    (:class:`_NFARef`), :func:`_determinize_py`, :func:`_prune_py`, :func:`_minimize_py`."""
    return flag("GD_PURE_PYTHON_DFA")


def _native_literal_dfa(words: list[bytes]) -> "_literals.Minimal":
    """:func:`decoding.ir.literals.build_minimal` in C (``gd_literal_dfa_build``): the same
    result; the reference itself under ``GD_PURE_PYTHON_DFA=1``.  Installed into the IR
    layer when this module is imported, so front-ends build literal sets natively once the
    back-ends are loaded."""
    if _pure_python_dfa():
        return _literals.build_minimal(words)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, words), dtype=np.int64, count=len(words)), out=offsets[1:])
    off, lab, tgt, final = _native.literal_dfa(b"".join(words), offsets)
    return memoryview(off).cast("i").tolist(), list(lab), memoryview(tgt).cast("i").tolist(), list(final)


_literals.use_builder(_native_literal_dfa)


def _new_nfa(grammar: Grammar, special_ids: dict[str, int], max_states: int, *,
             max_nesting: int = DEFAULT_LIMITS.max_nesting,
             deadline: _Deadline | None = None) -> "_NFA | _NFARef":
    """An empty NFA builder: flat arrays (:class:`_NFA`), or the list reference
    (:class:`_NFARef`) under ``GD_PURE_PYTHON_DFA=1``."""
    cls = _NFARef if _pure_python_dfa() else _NFA if _python_nfa() else _NativeNFA
    return cls(grammar, special_ids, max_states, max_nesting=max_nesting, deadline=deadline)


def _python_nfa() -> bool:
    """``GD_PYTHON_NFA=1``: the NFA is built by the Python :class:`_NFA` (the flat arrays, the
    rest of the pipeline native), not in C (:class:`_NativeNFA`)."""
    return flag("GD_PYTHON_NFA")


def _nfa_lists(nfa: "_NFA | _NFARef") -> tuple[list, list, list]:
    """(eps, edges, spec) per-state lists of either builder."""
    if isinstance(nfa, _NFA):
        return nfa.edge_lists()
    return nfa.eps, nfa.edges, nfa.spec


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


def _subset_bytes(n_states: int, nsym: int, n_sets: int, n_items: int) -> int:
    """Bytes a subset construction holds (``gd_subset_bytes`` in ``native/src/dfa_build.c``):
    its transition table (4 bytes a cell, one cell per byte class and special), a byte of
    acceptance per state, and its sets of NFA states (4 bytes an entry, 28 a set)."""
    return 4 * n_states * nsym + n_states + 4 * n_items + 28 * n_sets


def _too_many_bytes(what: str, max_bytes: int) -> LimitError:
    return LimitError(f"{what}: the subset construction exceeds max_subset_bytes={max_bytes} bytes "
                      "(limit max_subset_bytes); simplify the grammar or raise the limit",
                      limit="max_subset_bytes", value=max_bytes)


def _determinize(nfa: "_NFA | _NFARef", start: int, end: int, specials: tuple[str, ...], deadline: _Deadline,
                 max_states: int, what: str, max_bytes: int = 0) -> DFA:
    """Subset construction of ``nfa`` from ``start`` (accepting where ``end`` is reached), in
    C from the builder's flat edge lists (``native/src/dfa_build.c``, which also makes the
    byte classes; the GIL is released): the same DFA, state numbering included, as
    :func:`_determinize_py`, which ``GD_PURE_PYTHON_DFA=1`` or a :class:`_NFARef` selects.
    At most ``max_states`` states and ``max_bytes`` bytes (:func:`_subset_bytes`; 0: no
    bound), else LimitError.  The result is not minimised: see :func:`minimal_dfa`."""
    if _pure_python_dfa() or isinstance(nfa, _NFARef):
        return _determinize_py(nfa, start, end, specials, deadline, max_states, what, max_bytes)
    step = "the subset construction"
    if deadline is not None:
        deadline.check(step)
    failed: type[Exception] | None = None
    bytes_hit = False
    try:
        bcb, ncls, tb, ab = _native.nfa_determinize_coo(
            nfa.n, start, end, nfa.eps_src, nfa.eps_tgt, nfa.e_src, nfa.e_lo, nfa.e_hi, nfa.e_tgt,
            nfa.sp_src, nfa.sp_k, nfa.sp_tgt, len(specials), min(max_states, 2**31 - 1), _budget(deadline),
            max(0, int(max_bytes)))
    except (OverflowError, TimeoutError) as e:  # past max_states or max_bytes / past the deadline
        failed = type(e)
        bytes_hit = "max_bytes" in str(e)
    if failed is TimeoutError:
        raise _deadline_passed(deadline, step)
    if failed is OverflowError:
        if bytes_hit:
            raise _too_many_bytes(what, max_bytes)
        raise LimitError(f"{what}: automaton exceeds max_states={max_states} DFA states (limit "
                         "max_dfa_states); simplify the grammar or raise the limit")
    trans = np.frombuffer(tb, dtype=np.int32).reshape(len(ab), ncls + len(specials))
    dfa = DFA(np.frombuffer(bcb, dtype=np.uint16), trans, np.frombuffer(ab, dtype=bool), specials, ncls)
    if deadline is not None:
        deadline.check(step)
    return dfa


def _determinize_py(nfa: "_NFA | _NFARef", start: int, end: int, specials: tuple[str, ...], deadline: _Deadline,
                    max_states: int, what: str, max_bytes: int = 0) -> DFA:
    """Subset construction of ``nfa`` from ``start`` (accepting where ``end`` is reached), in
    Python: the reference of the native :func:`_determinize`.  States are numbered in BFS
    order, the symbols of a state in increasing order."""
    eps, edges, spec = _nfa_lists(nfa)
    bc, ncls = _byte_classes(edges)
    nsym = ncls + len(specials)

    # per-NFA-state moves over classes
    moves: list[list[tuple[int, int]]] = []
    for s in range(len(eps)):
        mv = []
        for lo, hi, t in edges[s]:
            for c in range(int(bc[lo]), int(bc[hi]) + 1):
                mv.append((c, t))
        for k, t in spec[s]:
            mv.append((ncls + k, t))
        moves.append(mv)

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
    n_items = len(s0)  # entries of the states' sets and of the move-target sets (as in C)
    n_moved = 0  # move-target sets seen
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
                n_items += len(tgt) + len(by_sym[c])
                n_moved += 1
                if max_bytes and _subset_bytes(j + 1, nsym, j + 1 + n_moved, n_items) > max_bytes:
                    raise _too_many_bytes(what, max_bytes)
                index[tgt] = j
                order.append(tgt)
            row[c] = j
        rows.append(row)
        acc.append(end in cur)
    trans = np.array(rows, dtype=np.int32).reshape(len(rows), nsym)
    dfa = DFA(bc, trans, np.array(acc, dtype=bool), specials, ncls)
    deadline.check("the subset construction")
    return dfa


def _operand_dfa(node: Node, max_states: int, max_nfa: int, deadline: _Deadline, where: str,
                 max_bytes: int = DEFAULT_LIMITS.max_subset_bytes) -> DFA | None:
    """Minimal DFA of a Ref-free, Special-free node, or None for the empty language."""
    g = Grammar("operand", (("operand", node),))
    nfa = _new_nfa(g, {}, max_nfa, deadline=deadline)
    nfa.max_dfa = max_states
    nfa.rules = [where.removeprefix("rule '").removesuffix("'")]
    start = nfa.new()
    end = nfa.build_node(node, start) if isinstance(nfa, _NFA) else nfa.build(node, start)
    if end is None:
        return None
    return minimal_dfa(nfa, start, end, (), deadline, max_states, where, max_bytes, empty_ok=True)


def _reaches_accept(dfa: DFA) -> bool:
    if not _pure_python_dfa():
        dist = _bfs(dfa.trans, np.zeros(1, dtype=np.int32))
        return bool(dfa.accepting[dist >= 0].any())
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
    table = tuple(bool(accept(p, q)) for p in (False, True) for q in (False, True))
    if not _pure_python_dfa() and table in _NATIVE_ACCEPT:  # the same BFS in C, the same numbering
        dfa = _native_product(a, b, b_start, uniq, cls, keep_b_dead=keep_b_dead, diff=_NATIVE_ACCEPT[table],
                              max_states=max_states, deadline=deadline, where=where)
        if not _reaches_accept(dfa):
            return None
        return _minimize(_prune(dfa, None), deadline)
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


#: truth tables of ``accept`` (p, q in FF, FT, TF, TT order) gd_dfa_product computes:
#: intersection (False) and difference (True)
_NATIVE_ACCEPT = {(False, False, False, True): False, (False, False, True, False): True}


def _native_product(a: DFA, b: DFA, b_start: int, uniq: np.ndarray, cls: np.ndarray, *, keep_b_dead: bool,
                    diff: bool, max_states: int, deadline: _Deadline, where: str) -> DFA:
    """:func:`_product`'s pair table, built by ``gd_dfa_product`` (``diff``: accepting pairs
    are a-and-not-b, else a-and-b); the GIL is released."""
    step = "an intersection/difference product"
    deadline.check(step)
    nb = 0 if b_start < 0 else b.trans.shape[0]
    failed: type[Exception] | None = None
    try:
        tb, ab = _native.dfa_product(
            np.ascontiguousarray(a.trans, dtype=np.int32).reshape(-1), int(a.trans.shape[1]),
            np.ascontiguousarray(a.accepting, dtype=np.uint8),
            np.ascontiguousarray(b.trans if nb else np.zeros(0, dtype=np.int32), dtype=np.int32).reshape(-1),
            int(b.trans.shape[1]) if nb else 0,
            np.ascontiguousarray(b.accepting if nb else np.zeros(0, dtype=np.uint8), dtype=np.uint8),
            np.ascontiguousarray(uniq[:, 0], dtype=np.int32), np.ascontiguousarray(uniq[:, 1], dtype=np.int32),
            b_start, keep_b_dead, diff, min(max_states, 2**31 - 1), _budget(deadline))
    except (OverflowError, TimeoutError) as e:
        failed = type(e)
    if failed is TimeoutError:
        raise _deadline_passed(deadline, step)
    if failed is OverflowError:
        raise LimitError(f"{where}: an intersection/difference exceeds max_states="
                         f"{max_states} DFA states (limit max_dfa_states)")
    ncls = len(uniq)
    trans = np.frombuffer(tb, dtype=np.int32).reshape(-1, ncls)
    return DFA(cls.astype(np.uint16), trans, np.frombuffer(ab, dtype=bool), (), ncls)


#: per-process memo of :func:`regular_dfa`'s results for ``Inter``/``Diff`` nodes (pattern and
#: format checks: the same few products in schema after schema), keyed by the node's structure
#: and both bounds; only results are kept (a limit or the deadline is raised again), their arrays
#: read-only; at most this many, the oldest dropped first
REGULAR_MEMO_MAX = 256
_regular_memo: dict[tuple, "DFA | None"] = {}


def dfa_leaf(d: DFA) -> Dfa:
    """The IR leaf (:class:`~decoding.ir.Dfa`: byte ranges per state) of a DFA with no
    special column (the same states)."""
    t = d.trans[:, :d.n_classes][:, d.byte_class.astype(np.intp)]  # (state, byte) -> target
    cut = np.ones(t.shape, dtype=bool)
    cut[:, 1:] = t[:, 1:] != t[:, :-1]
    st, lo = np.nonzero(cut)  # (a run of one target starts: per state, by byte)
    hi = np.empty_like(lo)
    hi[:-1] = lo[1:] - 1
    last = np.ones(len(st), dtype=bool)
    last[:-1] = st[1:] != st[:-1]
    hi[last] = 255
    tgt = t[st, lo]
    keep = tgt >= 0
    edges: list[list[tuple[int, int, int]]] = [[] for _ in range(d.n_states)]
    for s_, a, b, x in zip(st[keep].tolist(), lo[keep].tolist(), hi[keep].tolist(), tgt[keep].tolist()):
        edges[s_].append((a, b, x))
    return Dfa(tuple(tuple(es) for es in edges), tuple(int(a) for a in np.nonzero(d.accepting)[0]))


def regular_leaf(node: Node, max_states: int) -> Dfa | None:
    """The minimal automaton of a regular node as an IR leaf (:func:`regular_dfa`, its bound
    ``max_states``: LimitError past it); None for the empty language.  What the JSON Schema
    fast path is given to intersect a ``pattern`` with length bounds."""
    d = regular_dfa(node, max_states=max_states, where="pattern")
    return None if d is None else dfa_leaf(d)


def regular_dfa(node: Node, *, max_states: int = DEFAULT_MAX_STATES, max_nfa: int = _DEFAULT_MAX_NFA,
                deadline: "_Deadline | None" = None, where: str = "grammar") -> DFA | None:
    """Minimal byte DFA of a regular node (no Ref, no Special), Inter/Diff included; None
    for the empty language.  Each product is bounded by ``max_states`` (LimitError).
    Products (``Inter``/``Diff``) are memoized per process (:data:`REGULAR_MEMO_MAX`): a hit is
    the same DFA, with read-only arrays."""
    if not isinstance(node, (Inter, Diff)):
        return _regular_dfa(node, max_states, max_nfa, deadline, where)
    key = (node, max_states, max_nfa)
    try:
        return _regular_memo[key]
    except KeyError:
        pass
    dfa = _regular_dfa(node, max_states, max_nfa, deadline, where)
    if dfa is not None:
        for a in (dfa.byte_class, dfa.trans, dfa.accepting):
            a.flags.writeable = False
    if len(_regular_memo) >= REGULAR_MEMO_MAX:
        try:  # (another thread may be doing the same: dropping one entry less is harmless)
            del _regular_memo[next(iter(_regular_memo))]
        except (KeyError, RuntimeError, StopIteration):
            pass
    _regular_memo[key] = dfa
    return dfa


def _regular_dfa(node: Node, max_states: int, max_nfa: int, deadline: "_Deadline | None",
                 where: str) -> DFA | None:
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


def _bfs(trans: np.ndarray, sources: np.ndarray, *, reverse: bool = False, col_ok: np.ndarray | None = None,
         node_ok: np.ndarray | None = None) -> np.ndarray:
    """int32[n]: fewest transitions from ``sources`` to each state (``reverse``: from each
    state to ``sources``), -1 if unreachable, using only the columns in ``col_ok`` and the
    states in ``node_ok`` (bool; None: all).  In C (``gd_dfa_bfs``)."""
    n, nsym = trans.shape
    dist = np.empty(n, dtype=np.int32)
    if n == 0 or nsym == 0:
        dist[:] = -1
        return dist
    _native.dfa_bfs(np.ascontiguousarray(trans, dtype=np.int32).reshape(-1), nsym,
                    None if col_ok is None else np.ascontiguousarray(col_ok, dtype=np.uint8),
                    None if node_ok is None else np.ascontiguousarray(node_ok, dtype=np.uint8),
                    reverse, np.ascontiguousarray(sources, dtype=np.int32), dist)
    return dist


def _prune(dfa: DFA, usable_bytes: Sequence[bool] | None) -> DFA:
    """``dfa`` without the states that cannot reach acceptance (using only ``usable_bytes``
    and specials) or cannot be reached from the start over live states, numbered in their
    old order.  Raises if the start state dies.  In C (``gd_dfa_prune``: two breadth-first
    searches and the renumbering): the same DFA as :func:`_prune_py`, which
    ``GD_PURE_PYTHON_DFA=1`` selects."""
    if _pure_python_dfa():
        return _prune_py(dfa, usable_bytes)
    n, nsym = dfa.trans.shape
    col_ok = None
    if usable_bytes is not None:
        if isinstance(usable_bytes, np.ndarray):  # (read only here: a bool[256] is used as it is)
            ub = usable_bytes if usable_bytes.dtype == bool and usable_bytes.shape == (256,) else \
                usable_bytes[:256].astype(bool)
        else:
            ub = np.fromiter((bool(usable_bytes[b]) for b in range(256)), dtype=bool, count=256)
        if not ub.all():  # (every byte usable: every column is, the same as no restriction)
            col_ok = np.zeros(nsym, dtype=np.uint8)
            col_ok[dfa.n_classes:] = 1
            col_ok[dfa.byte_class[ub]] = 1
            if col_ok.all():
                col_ok = None  # every column usable: the same as no restriction
    if col_ok is None and dfa.trimmed:
        return dfa  # nothing to drop (what gd_dfa_trim would find: every state kept, the same table)
    k, tb, ab = _native.dfa_trim(np.ascontiguousarray(dfa.trans, dtype=np.int32).reshape(-1), nsym,
                                 np.ascontiguousarray(dfa.accepting, dtype=np.uint8), col_ok)
    if k == 0:
        raise GrammarError("grammar accepts no string that this vocabulary can spell"
                           if usable_bytes is not None else "grammar accepts no string")
    if tb is None:  # every state kept: the table as it is (no copy unless its dtype changes)
        t, a = _kept(dfa)
    else:
        t = np.frombuffer(tb, dtype=np.int32).reshape(k, nsym)
        if state_dtype(k) != np.int32:
            t = t.astype(state_dtype(k))
        a = np.frombuffer(ab, dtype=np.uint8).astype(bool)
        del tb, ab
    return _read_only(dfa, t, a)


def _prune_py(dfa: DFA, usable_bytes: Sequence[bool] | None) -> DFA:
    """The reference of :func:`_prune`: Python searches over :func:`_adjacency` lists."""
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


def _minimize(dfa: DFA, deadline: _Deadline | None = None, live: list[bool] | None = None) -> DFA:
    """Minimal DFA of ``dfa``, state 0 kept as the start: Valmari's partition refinement in C
    (``native/src/dfa_build.c``; the GIL is released).  The result, state numbering included,
    is that of :func:`_minimize_py`, which ``GD_PURE_PYTHON_DFA=1`` selects.  ``live`` (the
    native path only): gets whether every state of ``dfa`` can reach acceptance appended."""
    if _pure_python_dfa():
        return _minimize_py(dfa, deadline)
    step = "the minimisation"
    if deadline is not None:
        deadline.check(step)
    n = dfa.n_states
    trans = dfa.trans
    try:
        # the quotient is made in C too: the row of each block's first state, targets mapped
        res = _native.dfa_minimize_table(np.ascontiguousarray(trans, dtype=np.int32).reshape(-1), trans.shape[1],
                                         np.ascontiguousarray(dfa.accepting, dtype=np.uint8), _budget(deadline),
                                         live is not None)
        nblocks, tb, ab = res[:3]
        if live is not None:
            live.append(res[3])
    except TimeoutError:
        nblocks, tb, ab = -1, None, None
    if nblocks < 0:
        raise _deadline_passed(deadline, step)
    if tb is None:  # already minimal
        return dfa
    t = np.frombuffer(tb, dtype=np.int32).reshape(nblocks, trans.shape[1])
    if state_dtype(nblocks) != np.int32:
        t = t.astype(state_dtype(nblocks))
    del tb
    if t.flags.writeable:
        t.setflags(write=False)
    acc = np.frombuffer(ab, dtype=np.uint8).astype(bool)
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
