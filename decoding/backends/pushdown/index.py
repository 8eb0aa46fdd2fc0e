"""Pushdown back-end: the grammar IR recognised with a stack instead of unrolled refs.

The DFA back-end (one byte DFA from :mod:`decoding.backends.automaton`) inlines every ``Ref`` and unrolls recursion, so
grammars with deep free-form JSON values or DTDs whose elements refer to many others
(hibernate-mapping) grow past any state limit.  Here each rule gets its own small minimal
DFA in which ``Ref(X)`` is a *call* symbol; a run keeps a *configuration*: a set of stacks
of frames ``(rule, state, counts)``.  A byte moves the top frame along its DFA; a call
pushes the callee's start state; a frame in an accepting state may pop back to its caller.

Invariants
- Same language as :func:`decoding.backends.automaton.compile_dfa` on the same grammar: a rule may
  be nested inside expansions of itself at most ``Grammar.max_depth`` times on one path
  (the start rule's own bottom frame is not counted); bytes no single token spells are
  pruned the same way.
- Every frame of every stack can still be completed given the recursion counts below it,
  so a configuration reached by allowed tokens can always reach acceptance: the mask is
  never empty before acceptance.  (A derivation that avoids the rules already nested
  ``max_depth`` times exists iff one without any repeated rule on a path does, so
  liveness only depends on that *saturated* set.)
- Masks: over the stacks of the configuration's closure (the calls and returns taken before
  the first byte), tokens consumed by the top frame's own bytes come from the trie walk over
  that rule's DFA (native; memoized per rule, state and saturated set); tokens that may enter
  a call or return to a caller after a byte of the frame (over-approximated with FIRST/FOLLOW
  byte sets) are checked exactly by stepping the configuration (natively).  Compile-time data (:class:`Pushdown`) is
  immutable and shared; :class:`CompiledPushdown` adds per-vocabulary memos.
- Memory: no table has a column per byte: the walks' tables have one per class of bytes
  that no rule move or exit set tells apart (the 256-column table with equal columns
  merged), and the walks' masks are interned in a :class:`~decoding.backends.masks.MaskTable`
  (sparse when few tokens are in or out).
- Budgets are bounds, not exact: ``completion_cost`` is the fewest *bytes* that complete
  a configuration (every byte on a completion is a single token of the vocabulary, so that
  many tokens always suffice).
"""

from __future__ import annotations

import heapq
import sys
from array import array
import threading
import time
from dataclasses import dataclass, field, replace
from operator import is_
from typing import Iterable, Sequence

import numpy as np

from decoding import _native
from decoding.backends import automaton as _automaton
from decoding.backends.automaton import DFA, _bfs, _prune, compile_dfa
from decoding.backends.contract import COST_UNREACHABLE, EOG, FORBIDDEN, worst_text_cost
from decoding.backends.masks import DEFAULT_MAX_MASKS, SPARSE_MAX, MaskTable, mask_ids
from decoding.backends.pushdown.repeats import helper_rules, split_repeats
from decoding.backends.textloop import PlainLoops, char_pairs, plain_chain, walk_tokens
from decoding.backends.tables import PROFILES, vocab_tables
from decoding.errors import GrammarError, LimitError
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.ir import Choice, Grammar, Node, Ref, Repeat, Seq, Special
from decoding.ir import ByteSet as _ByteSet, Dfa as _Dfa, Diff as _Diff, Inter as _Inter, Lit as _Lit
from decoding.ir.nodes import children as _children, plain_ids
from decoding.ir.productive import _derives, check_productive
from decoding.ir.size import check_size
from decoding.vocab import Vocab

__all__ = ["Pushdown", "CompiledPushdown", "compile_pushdown", "compile_grammar_pushdown",
           "MAX_STACKS"]

CALL = "\x00call\x00"  # prefix of the special symbols that stand for calls in rule DFAs
MAX_STACKS = 4096  # stacks in one configuration (ambiguity bound)
INF = 1 << 40


class _Calls:
    """Rule bodies with each ``Ref(X)`` replaced by ``Special(CALL + X)``, structurally what
    ``map_leaves`` makes but keeping the IR's sharing: a node is mapped once for all the
    rules (memo by identity), a subtree without a Ref is the same object (so the estimates'
    and the NFA serialiser's memos by identity see a shared subtree once, and registered
    plain nodes stay registered), and a rebuilt node is built once however many parents it
    has.  ``Inter``/``Diff`` hold no Ref (:class:`~decoding.ir.Grammar` checks) and stay."""

    def __init__(self) -> None:
        self._memo: dict[int, Node] = {}
        self._keep: list[Node] = []  # the mapped originals stay alive while ids name them

    def body(self, root: Node) -> Node:
        hit = self._memo.get(id(root))
        if hit is not None:
            return hit
        try:
            return self._rec(root)
        except RecursionError:  # (deep IR: the walk below; what was mapped stays mapped)
            return self._walk(root)

    def _rec(self, n: Node) -> Node:
        """:meth:`_walk` by recursion (faster; its memo and results are the same)."""
        memo = self._memo
        out = memo.get(id(n))
        if out is not None:
            return out
        cls = n.__class__
        if id(n) in plain_ids():
            out = n
        elif cls is Seq or cls is Choice:
            kids = n.items  # type: ignore[union-attr]
            new = [self._rec(k) for k in kids]
            out = n if all(map(is_, new, kids)) else cls(tuple(new))
        elif cls is Repeat:
            k = self._rec(n.item)  # type: ignore[union-attr]
            out = n if k is n.item else Repeat(k, n.min, n.max)  # type: ignore[union-attr]
        elif cls is Ref:
            out = Special(CALL + n.name)  # type: ignore[union-attr]
        else:
            out = n
        memo[id(n)] = out
        self._keep.append(n)
        return out

    def _walk(self, root: Node) -> Node:
        memo = self._memo
        plain = plain_ids()  # (registered plain nodes hold no Ref: kept as they are, not walked)
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            if id(n) in plain:
                memo[id(n)] = n
                continue
            cls = n.__class__
            if cls is Seq or cls is Choice or cls is Repeat:
                kids = (n.item,) if cls is Repeat else n.items  # type: ignore[union-attr]
                if not ready:
                    stack.append((n, True))
                    for k in kids:
                        if id(k) not in memo:
                            stack.append((k, False))
                    continue
                new = [memo[id(k)] for k in kids]
                if all(map(is_, new, kids)):
                    out = n
                elif cls is Repeat:
                    out = Repeat(new[0], n.min, n.max)  # type: ignore[union-attr]
                else:
                    out = cls(tuple(new))
            elif cls is Ref:
                out = Special(CALL + n.name)  # type: ignore[union-attr]
            else:
                out = n
            memo[id(n)] = out
            self._keep.append(n)
        return memo[id(root)]


@dataclass(frozen=True, eq=False)
class Pushdown:
    """Compile-time part: one pruned minimal DFA per rule reachable from the start.

    ``names[0]`` is the start rule.  ``cols[r]`` maps each special column of ``dfas[r]`` to
    ``("call", callee index)`` or ``("special", index into specials)``.  Rules that accept
    nothing are absent and calls to them are removed.
    """
    names: tuple[str, ...]
    dfas: tuple[DFA, ...]
    cols: tuple[tuple[tuple[str, int], ...], ...]
    specials: tuple[str, ...]
    max_depth: int
    #: the rules :func:`~decoding.backends.pushdown.repeats.split_repeats` added (indices)
    helpers: frozenset = frozenset()

    @property
    def n_states(self) -> int:
        return sum(d.n_states for d in self.dfas)


def _check_deadline(deadline: float | None, lim: Limits, start: str, step: str) -> None:
    """LimitError once ``deadline`` (monotonic seconds; None: none) has passed: the work
    after the rules' automata (linear in their states, but in Python) counts too."""
    if deadline is not None and time.monotonic() > deadline:
        raise LimitError(f"grammar '{start}': compiling took longer than max_compile_seconds="
                         f"{lim.max_compile_seconds:g} (during {step}, after every rule's automaton)",
                         limit="max_compile_seconds", value=lim.max_compile_seconds)


def compile_pushdown(grammar: Grammar, *, literal_specials: Iterable[str] = (),
                     usable_bytes: Sequence[bool] | None = None,
                     max_rule_states: int = 200_000, limits: Limits | None = None,
                     size_checked: bool = False) -> Pushdown:
    """Compile ``grammar`` to per-rule DFAs with calls.  ``usable_bytes``: prune bytes no
    single token spells (as :meth:`DFA.prune`).  Raises GrammarError if the start rule
    accepts nothing, LimitError when the rules' automata together have more than
    ``limits.max_dfa_states`` states (the memory bound of one explicit DFA: the tables built
    from them hold a few Python objects per state; Snowplow sp_137's 525,405 states took
    1.1 GB) or past ``limits.max_compile_seconds``.  Large bounded repetitions are first
    rewritten into helper rules that count on the stack (the same language, see
    :func:`~decoding.backends.pushdown.repeats.split_repeats`); ``size_checked`` then means
    the caller checked the rewritten grammar.  Rules without calls whose bodies are equal
    (:class:`_SameBody`) are one rule here, counted once (sp_137: 99 rules, 18 automata,
    77,847 states).  Every rule is estimated first (:func:`~decoding.ir.size.check_size`,
    as ``compile_dfa`` would) unless ``size_checked`` says the caller ran
    ``check_size(grammar, inline=False)``, which estimates every rule alone the same way.
    The rules' automata are those of ``compile_dfa`` on each body with its calls as
    specials, built from one serialised program for all the rules (:class:`_RuleBuilder`;
    ``compile_dfa`` itself where the C builder declines a rule, or under
    ``GD_PURE_PYTHON_DFA`` / ``GD_PYTHON_NFA``, or with literal specials)."""
    grammar = split_repeats(grammar)  # (the grammar itself when nothing is large)
    lit = set(literal_specials)
    lim = DEFAULT_LIMITS if limits is None else limits
    deadline = time.monotonic() + lim.max_compile_seconds  # one budget for all rules
    check_productive(grammar)  # an empty language names its rule (linear, before any DFA)
    order = [grammar.start]
    index = {grammar.start: 0}
    # Ref-free rules with the same body (a JSON Schema's many ``{"type": "string", "maxLength":
    # 2000}`` properties, one rule each) share one automaton: a call of either is a call of it
    same = _SameBody()
    calls = _Calls()  # (the bodies with calls as specials, for compile_dfa)
    fast = _RuleBuilder(grammar, lim, max_rule_states) \
        if _RuleBuilder.usable() and not lit.intersection(grammar.specials()) else None
    ub = None  # usable_bytes as DFA.prune takes it (None: every byte, nothing to prune)
    if usable_bytes is not None:
        ub = np.fromiter((bool(usable_bytes[b]) for b in range(256)), dtype=bool, count=256)
        if ub.all():
            ub = None
    raw: list[DFA | None] = []
    total = 0  # states of the rules' automata so far: at most max_dfa_states, like one DFA
    i = 0
    while i < len(order):
        name = order[i]
        i += 1
        body = grammar.rule(name)
        left = deadline - time.monotonic()
        if left <= 0:
            raise LimitError(f"rule '{name}': compiling took longer than max_compile_seconds="
                             f"{lim.max_compile_seconds:g} ({i - 1} of the grammar's rules done)")
        try:
            if fast is not None and not size_checked:
                check_size(Grammar(name, ((name, calls.body(body)),), grammar.max_depth),
                           replace(lim, max_compile_seconds=left))
            # a Ref-free body equal to an earlier rule's is that rule
            earlier = same.first(body, i - 1)
            if earlier != i - 1:
                index[name] = earlier  # (the rules that call it: resolved after the loop)
                raw.append(None)
                continue
            built = fast.build(name, body, left) if fast is not None else NotImplemented
            if built is NotImplemented:
                d = compile_dfa(Grammar(name, ((name, calls.body(body)),), grammar.max_depth),
                                max_states=max_rule_states, literal_specials=lit,
                                limits=replace(lim, max_compile_seconds=left), size_checked=size_checked)
            else:
                d = None if built is None else fast.finish(name, body, built)  # type: ignore[union-attr]
            if d is not None and ub is not None:
                d = d.prune(ub)
        except LimitError:  # too large is not "accepts nothing"
            if time.monotonic() >= deadline:  # name the grammar's budget, not what was left
                raise LimitError(f"rule '{name}': compiling took longer than max_compile_seconds="
                                 f"{lim.max_compile_seconds:g} ({i - 1} of the grammar's rules "
                                 "done)", limit="max_compile_seconds") from None
            raise
        except GrammarError:
            d = None
        raw.append(d)
        if d is not None:
            total += d.n_states
            if total > lim.max_dfa_states:
                raise LimitError(f"rule '{name}': the rules' automata have more than max_dfa_states="
                                 f"{lim.max_dfa_states} states together ({i} of the grammar's rules done; "
                                 "limit max_dfa_states); simplify the grammar or raise the limit",
                                 limit="max_dfa_states", value=lim.max_dfa_states)
            for sp in d.specials:
                if sp.startswith(CALL) and sp[len(CALL):] not in index:
                    callee = sp[len(CALL):]
                    index[callee] = len(order)
                    order.append(callee)
    # productive rules (least fixpoint: the start reaches acceptance through bytes, specials
    # and calls to productive rules); calls to the others are removed.  ``cal[k]``: the
    # callee of each special column of rule k (R: a special, always usable)
    R = len(raw)
    cal = [None if d is None else
           np.array([index[sp[len(CALL):]] if sp.startswith(CALL) else R for sp in d.specials], dtype=np.intp)
           for d in raw]
    prod = np.zeros(R + 1, dtype=bool)
    prod[R] = True
    changed = True
    while changed:
        changed = False
        # callees come after their first caller in ``order``: visiting callees first makes
        # a chain of rules converge in one pass instead of one pass per rule
        for k in range(R - 1, -1, -1):
            d = raw[k]
            if d is None or prod[k]:
                continue
            _check_deadline(deadline, lim, grammar.start, "the productive rules")
            ok = prod[cal[k]]  # type: ignore[index]
            # a rule's automaton is trimmed (its start reaches acceptance over every column):
            # with every callee productive it is; else the states reached from the start over
            # the usable columns (a native breadth-first search)
            if not ok.all():
                col_ok = np.concatenate((np.ones(d.n_classes, dtype=bool), ok))
                if not (d.accepting & (_bfs(d.trans, np.zeros(1, dtype=np.int32), col_ok=col_ok) >= 0)).any():
                    continue
            prod[k] = True
            changed = True
    for k, d in enumerate(raw):
        if d is None:
            continue
        if not prod[k]:
            raw[k] = None
            continue
        dead = ~prod[cal[k]]  # type: ignore[index]
        if dead.any():
            dead_cols = d.n_classes + np.flatnonzero(dead)
            if (d.trans[:, dead_cols] >= 0).any():
                t = np.array(d.trans, dtype=np.int32)
                t[:, dead_cols] = -1
                raw[k] = _prune(DFA(d.byte_class, t, d.accepting, d.specials, d.n_classes), None)
    if raw[0] is None:
        raise GrammarError(f"grammar '{grammar.start}' accepts no string")
    # keep rules reachable from the start through live calls, renumbered
    keep = [0]
    seen = {0}
    j = 0
    while j < len(keep):
        d = raw[keep[j]]
        j += 1
        assert d is not None
        if not d.specials:
            continue
        used = (d.trans[:, d.n_classes:] >= 0).any(axis=0).tolist()
        for c, sp in enumerate(d.specials):
            if used[c] and sp.startswith(CALL):
                k = index[sp[len(CALL):]]
                if k not in seen and raw[k] is not None:
                    seen.add(k)
                    keep.append(k)
    new = {k: n for n, k in enumerate(keep)}
    specials: list[str] = []
    cols = []
    for k in keep:
        d = raw[k]
        assert d is not None
        row = []
        for sp in d.specials:
            if sp.startswith(CALL):
                row.append(("call", new.get(index[sp[len(CALL):]], -1)))
            else:
                if sp not in specials:
                    specials.append(sp)
                row.append(("special", specials.index(sp)))
        cols.append(tuple(row))
    helpers = helper_rules(grammar)
    return Pushdown(tuple(order[k] for k in keep), tuple(raw[k] for k in keep),  # type: ignore[misc]
                    tuple(cols), tuple(specials), grammar.max_depth,
                    frozenset(n for n, k in enumerate(keep) if order[k] in helpers))


class _RuleBuilder:
    """The rules' automata as :func:`compile_dfa` makes them from the bodies with their
    calls as specials (the same minimal DFA; state numbering and the order of the special
    columns may differ), without its per-rule glue: the IR of all the rules is serialised
    into one program as the rules come (a subtree several rules share, once; a ``Ref(X)``
    is the special move ``CALL + X``, so the bodies are not rewritten: no :class:`_Calls`),
    each rule built from its root there by the C builder (``gd_nfa_build`` with the tails
    shared, as :func:`grammar_nfa` sets it), with the grammar's specials and calls numbered
    once for all the rules (renumbered per rule, in that order, before the subset
    construction), then as :func:`minimal_dfa` (the same limits, messages and deadline).
    The single-rule grammar, its check and its productive check are not made: a body that
    derives nothing (:func:`decoding.ir.productive._derives`, memoized over the rules) is
    None, as the GrammarError of the check was.  :meth:`build` returns ``NotImplemented``
    where :func:`compile_dfa` must do it (the C builder leaves a node to the Python builder
    or reports a limit: compile_dfa then says it as it does)."""

    def __init__(self, grammar: Grammar, lim: Limits, max_rule_states: int) -> None:
        A = _automaton
        self.grammar = grammar
        self.lim = lim
        self.max_rule_states = max_rule_states
        names = [n for n, _ in grammar.rules]
        texts = [CALL + n for n in names] + list(grammar.specials())
        self.sid = {t: i for i, t in enumerate(texts)}
        self.calls = dict(zip(names, range(len(names))))
        self.texts = texts
        self.nfa = A._NativeNFA(grammar, self.sid, lim.max_nfa_states, max_nesting=lim.max_nesting)
        self.nfa.max_dfa = max_rule_states
        self.nfa.share_tails = True
        _, pcode, pat, plit, pleaves = A._plain_program_leafy()
        self.code = array("i", pcode)
        self.at = dict(pat)
        self.lit = bytearray(plit)
        self.leaves: list = list(pleaves)
        self._leaf_arrays: tuple = (-1, ())
        self._true: set[int] = set()  # nodes known to derive a string (_derives)
        self._rules = set(names)  # (a call derives a string here: compile_dfa's check saw a special)
        self._body = array("i")
        self._keep: list = []  # the serialiser's own records, named by id in ``at``
        self._want = (np.zeros(0, dtype=np.uint8), 0, 0, 0)  # gd_nfa_build_rule_dfas, no rule DFAs

    @staticmethod
    def usable() -> bool:
        """Whether the builder is the pipeline's (native, tails shared, plain leaves)."""
        A = _automaton
        return not A._pure_python_dfa() and not A._python_nfa() and A._share_tails() and A.PLAIN_LEAVES

    def build(self, name: str, node: Node, left: float):
        """The NFA of rule ``name`` whose body is ``node`` (``left``: seconds of the
        budget): ``(nfa, end, specials, deadline)``, None for the empty language, or
        NotImplemented."""
        A = _automaton
        nfa = self.nfa
        nfa.rules = [name]
        deadline = A._Deadline(left, f"grammar '{name}'")
        nfa.deadline = deadline
        top = self.at.get(id(node))
        if top is None:
            code, _, lits, tops, rule_names, _, leaves = A._serialise(nfa, [node], len(self.code), self.at,
                                                                      len(self.lit), self.leaves, self.calls, self._keep)
            if rule_names:  # (none: a Ref is a call)
                return NotImplemented
            self.code.extend(code)
            for x in lits:
                self.lit += x
            self.leaves = leaves
            top = tops[0]
        if self._leaf_arrays[0] != len(self.leaves):
            self._leaf_arrays = (len(self.leaves), A._leaf_arrays(self.leaves))
        frames = min(sys.getrecursionlimit() - A._stack_depth() - A._FRAME_MARGIN, A._MAX_C_FRAMES)
        if frames < 1:
            return NotImplemented
        lim = self.lim
        res = _native.nfa_build(self.code, self.lit, self._body, *self._leaf_arrays[1], top, 1, 0,
                                self.grammar.max_depth, min(lim.max_nesting, A._I32 - 2), 1,
                                min(lim.max_nfa_states, A._I32), frames, A._budget(deadline), *self._want)
        if res[0] != 0:
            return NotImplemented
        _, n, end, eps_src, eps_tgt, e_src, e_lo, e_hi, e_tgt, sp_src, sp_k, sp_tgt = res
        if end < 0:
            return None
        k = np.frombuffer(sp_k, dtype=np.int32)
        specials: tuple[str, ...] = ()
        if len(k):  # the specials this rule moves on, in the grammar's order, numbered from 0
            used = sorted(set(k.tolist()))
            texts = self.texts
            specials = tuple(texts[u] for u in used)
            if used[-1] != len(used) - 1:
                local = np.zeros(used[-1] + 1, dtype=np.int32)
                local[used] = np.arange(len(used), dtype=np.int32)
                k = local[k]
        i32 = np.int32
        built = _Built(n, np.frombuffer(eps_src, dtype=i32), np.frombuffer(eps_tgt, dtype=i32),
                       np.frombuffer(e_src, dtype=i32), np.frombuffer(e_lo, dtype=np.uint8),
                       np.frombuffer(e_hi, dtype=np.uint8), np.frombuffer(e_tgt, dtype=i32),
                       np.frombuffer(sp_src, dtype=i32), k, np.frombuffer(sp_tgt, dtype=i32))
        return built, end, specials, deadline

    def finish(self, name: str, node: Node, built) -> "DFA | None":
        """The minimal DFA of what :meth:`build` made (None: the empty language)."""
        nfa, end, specials, deadline = built
        try:
            return self._minimal(nfa, end, specials, deadline, f"grammar '{name}'")
        except LimitError:  # (a GrammarError: first)
            # a body that derives nothing is None before any automaton (compile_dfa's
            # productive check), whatever its size
            if not _derives(node, self._rules, self._true):
                return None
            raise
        except GrammarError:
            return None

    def _minimal(self, built: "_Built", end: int, specials: tuple[str, ...], deadline, what: str) -> DFA:
        """:func:`~decoding.backends.automaton.minimal_dfa` of ``built`` (the same DFA,
        limits and messages), in the smallest state dtype: natively, that function itself
        (the subset construction and its minimisation in one call); under
        ``GD_PURE_PYTHON_DFA``, with less glue: the minimisation that finds every state live
        is taken as it comes (else, and past the deadline, as ``minimal_dfa`` does it)."""
        A = _automaton
        max_states = self.max_rule_states
        sub = max(1, max_states) * A.SUBSET_STATES_FACTOR
        if not A._pure_python_dfa():  # (minimal_dfa's one native call: no glue to save)
            d = A.minimal_dfa(built, 0, end, specials, deadline, max_states, what,  # type: ignore[arg-type]
                              self.lim.max_subset_bytes)
            return self._rule_dfa(d, d.trans, d.accepting, specials, max_states, what)
        try:
            det = A._determinize(built, 0, end, specials, deadline, sub, what, self.lim.max_subset_bytes)  # type: ignore[arg-type]
        except LimitError as e:  # (worded as minimal_dfa words it)
            raise A._subset_limit(e, sub, max_states, what) from None
        nsym = det.trans.shape[1]
        try:
            nblocks, tb, ab, live = _native.dfa_minimize_table(det.trans.reshape(-1), nsym,
                                                               det.accepting.view(np.uint8), A._budget(deadline), True)
        except TimeoutError:
            nblocks = -1
        if nblocks < 0 or not live:  # past the deadline, or a dead state: as minimal_dfa
            m = A._trimmed_minimal(det, deadline)
            t, acc = m.trans, m.accepting
        elif tb is None:  # already minimal
            t, acc = det.trans, det.accepting
        else:
            t = np.frombuffer(tb, dtype=np.int32).reshape(nblocks, nsym)
            acc = np.frombuffer(ab, dtype=np.uint8).view(bool)
        return self._rule_dfa(det, t, acc, specials, max_states, what)

    @staticmethod
    def _rule_dfa(det: DFA, t: np.ndarray, acc: np.ndarray, specials: tuple[str, ...], max_states: int,
                  what: str) -> DFA:
        """The rule's DFA of the minimal table ``t``/``acc`` (of ``det``'s byte classes): at
        most ``max_states`` states, in the smallest state dtype, marked trimmed."""
        if t.shape[0] > max_states:
            raise LimitError(f"{what}: automaton exceeds max_states={max_states} DFA states (limit "
                             f"max_dfa_states): its minimal DFA has {t.shape[0]}; simplify the grammar or "
                             "raise the limit", limit="max_dfa_states", value=max_states)
        dt = _automaton.state_dtype(t.shape[0])
        if t.dtype != dt:
            t = t.astype(dt)
            t.setflags(write=False)
        return DFA(det.byte_class, t, acc, specials, det.n_classes, trimmed=True)


@dataclass(frozen=True)
class _Built:
    """An NFA as :func:`~decoding.backends.automaton._determinize` reads it (flat edge arrays)."""
    n: int
    eps_src: np.ndarray
    eps_tgt: np.ndarray
    e_src: np.ndarray
    e_lo: np.ndarray
    e_hi: np.ndarray
    e_tgt: np.ndarray
    sp_src: np.ndarray
    sp_k: np.ndarray
    sp_tgt: np.ndarray


def _leaf_tag(n: Node) -> tuple | None:
    """:class:`_SameBody`'s structural tag of a leaf (Lit, ByteSet, Special, Dfa); None for a
    Ref or a node class it does not know (the body then keeps its own rule)."""
    cls = n.__class__
    if cls is _Lit:
        return ("Lit", n.data)  # type: ignore[union-attr]
    if cls is _ByteSet:
        return ("ByteSet", n.ranges)  # type: ignore[union-attr]
    if cls is Special:
        return ("Special", n.text)  # type: ignore[union-attr]
    if cls is _Dfa:
        return ("Dfa", n.edges, n.accept)  # type: ignore[union-attr]
    return None


class _SameBody:
    """Structural identity of Ref-free rule bodies: equal bodies get one number (interned
    bottom-up, each distinct node object visited once: linear in the IR, iterative, unlike
    the nodes' own recursive ``==`` and ``hash`` that expand shared subtrees)."""

    def __init__(self) -> None:
        self._ids: dict[int, int | None] = {}  # id(node) -> interned number (None: holds a Ref)
        self._intern: dict[tuple, int] = {}
        self._keep: list[Node] = []  # the nodes numbered stay alive while ids name them
        self._rules: dict[int, int] = {}  # interned body -> the rule index that has it

    def key(self, root: Node) -> int | None:
        """The body's number, or None when it holds a Ref (a rule that calls others keeps
        its own frame: the recursion counts are per rule)."""
        if id(root) in self._ids:
            return self._ids[id(root)]
        try:
            return self._rec(root)
        except RecursionError:  # (deep IR: the walk below; what was numbered stays numbered)
            return self._walk(root)

    def _rec(self, n: Node) -> int | None:
        """:meth:`_walk` by recursion (faster; the same numbers)."""
        ids = self._ids
        i = id(n)
        if i in ids:
            return ids[i]
        cls = n.__class__
        tag: tuple | None
        if cls is Seq or cls is Choice:
            out = []
            for k in n.items:  # type: ignore[union-attr]
                v = self._rec(k)
                if v is None:  # holds a Ref: the other items need not be looked at
                    break
                out.append(v)
            else:
                v = 0
            tag = None if v is None else (cls.__name__, tuple(out))
        elif cls is Repeat:
            k = self._rec(n.item)  # type: ignore[union-attr]
            tag = None if k is None else (cls.__name__, (k,), n.min, n.max)  # type: ignore[union-attr]
        elif cls is _Inter or cls is _Diff:
            sub = tuple([self._rec(k) for k in _children(n)])
            tag = None if None in sub else (cls.__name__, sub)
        else:
            tag = _leaf_tag(n)
        v = ids[i] = None if tag is None else self._intern.setdefault(tag, len(self._intern))
        self._keep.append(n)
        return v

    def _walk(self, root: Node) -> int | None:
        from decoding.ir import Choice, Diff, Inter, Repeat, Seq, children
        ids = self._ids
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in ids:
                continue
            cls = n.__class__
            if cls is Seq or cls is Choice or cls is Inter or cls is Repeat or cls is Diff:
                kids = children(n)
                if not ready:
                    stack.append((n, True))
                    stack.extend((k, False) for k in kids if id(k) not in ids)
                    continue
                sub = tuple(ids[id(k)] for k in kids)
                if None in sub:
                    ids[id(n)] = None
                    self._keep.append(n)
                    continue
                tag: tuple = (cls.__name__, sub, n.min, n.max) if cls is Repeat else (cls.__name__, sub)
            else:
                leaf = _leaf_tag(n)
                if leaf is None:  # a Ref, or a node class this does not know
                    ids[id(n)] = None
                    self._keep.append(n)
                    continue
                tag = leaf
            ids[id(n)] = self._intern.setdefault(tag, len(self._intern))
            self._keep.append(n)
        return ids[id(root)]

    def first(self, body: Node, k: int) -> int:
        """The index of the first rule with ``body`` (``k`` if it is the first, or holds a Ref)."""
        key = self.key(body)
        if key is None:
            return k
        return self._rules.setdefault(key, k)


class _Tables:
    """Python-level step tables and the FIRST/FOLLOW exit sets of a :class:`Pushdown`.

    Per rule ``r`` (no 256-column table: the rules' byte classes are kept):
    ``tr[r]`` the byte moves over the DFA's byte classes (a view of its table), ``bc[r]`` /
    ``bcn[r]`` byte -> class (list / array), ``fin[r]`` the accepting states,
    ``calls[r][s]`` the ``(callee, target)`` calls of state ``s`` (``()`` for most states),
    ``callers[r]`` the ``(state, calls)`` of the states that have some (increasing),
    ``specs[r]`` ``{state: {special: target}}``, ``rev_c[r]`` ``{target: [(state, callee)]}``,
    ``exit[r]`` ``{state: byte set}`` for the states whose exit set (the bytes that may enter
    a call or return to the caller, bit b for byte b) is not empty; :meth:`rev` the byte-move
    predecessors (made on first use) and :meth:`classes` the byte classes of the mask walks'
    tables (refined by the exit sets)."""

    def __init__(self, pd: Pushdown, deadline: float | None = None, limits: Limits | None = None) -> None:
        self.pd = pd
        self._deadline = deadline
        self._limits = DEFAULT_LIMITS if limits is None else limits
        R = len(pd.dfas)
        self.bcn = [d.byte_class.astype(np.intp) for d in pd.dfas]
        self.bc = [b.tolist() for b in self.bcn]
        self.tr = [d.trans[:, :d.n_classes] for d in pd.dfas]  # (int16 or int32)
        self.fin = [d.accepting.tolist() for d in pd.dfas]
        self.calls: list[list[tuple[tuple[int, int], ...]]] = []
        self.callers: list[list[tuple[int, tuple[tuple[int, int], ...]]]] = []
        self.specs: list[dict[int, dict[int, int]]] = []
        for r, d in enumerate(pd.dfas):
            self._check("the step tables")
            if not d.specials:  # no call, no special
                self.calls.append([()] * d.n_states)
                self.callers.append([])
                self.specs.append({})
                continue
            sym = d.trans[:, d.n_classes:]
            src, col = np.nonzero(sym >= 0)  # state-major, columns in order
            cols = pd.cols[r]
            by_state: dict[int, list[tuple[int, int]]] = {}
            sr: dict[int, dict[int, int]] = {}
            for s, c, t in zip(src.tolist(), col.tolist(), sym[src, col].tolist()):
                kind, k = cols[c]
                if k < 0:
                    continue
                if kind == "call":
                    by_state.setdefault(s, []).append((k, t))
                else:
                    sr.setdefault(s, {})[k] = t
            cr: list[tuple[tuple[int, int], ...]] = [()] * d.n_states
            callers = []
            for s, cs in by_state.items():
                cr[s] = tuple(cs)
                callers.append((s, cr[s]))
            self.calls.append(cr)
            self.callers.append(callers)
            self.specs.append(sr)
        self.calls_to: list[list[tuple[int, int, int]]] = [[] for _ in range(R)]
        self.rev_c: list[dict[int, list[tuple[int, int]]]] = [{} for _ in range(R)]
        for r in range(R):
            for s, cs in self.callers[r]:
                for x, t in cs:
                    self.calls_to[x].append((r, s, t))
                    self.rev_c[r].setdefault(t, []).append((s, x))
        # per rule, its call columns of live callees and those callees (index arrays)
        self._call_cols = [(np.array([d.n_classes + c for c, (kind, k) in enumerate(pd.cols[r]) if kind == "call" and k >= 0],
                                     dtype=np.intp),
                            np.array([k for kind, k in pd.cols[r] if kind == "call" and k >= 0], dtype=np.intp))
                           for r, d in enumerate(pd.dfas)]
        self._rev: list[tuple[np.ndarray, np.ndarray]] | None = None
        self._classes: dict[int, tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]] = {}
        self._exit_sets()

    def rev(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per rule ``(off, src)``: the states with a byte move to ``t`` are
        ``src[off[t]:off[t + 1]]``, each once, increasing."""
        if self._rev is None:
            out = []
            for tr in self.tr:
                n = tr.shape[0]
                src, col = np.nonzero(tr >= 0)
                pairs = np.unique(tr[src, col].astype(np.int64) * n + src)
                out.append((np.searchsorted(pairs // n, np.arange(n + 1)), (pairs % n).astype(np.int32)))
            self._rev = out
        return self._rev

    def live(self, forbidden: frozenset) -> list[list[bool]]:
        """Per rule, per state: completable without calling the rules in ``forbidden``, by
        byte moves, special-token moves and calls.  The least fixpoint over the rules' starts:
        native reverse breadth-first searches from the accepting states over the byte
        columns and the calls of allowed callees whose start is live, a rule searched again
        only when one of those starts became live."""
        R = len(self.tr)
        allowed = np.array([x not in forbidden for x in range(R)], dtype=bool)
        callee_ok = np.zeros(R, dtype=bool)  # allowed with a live start
        live: list[np.ndarray] = [np.zeros(0, dtype=bool)] * R
        seen: list[np.ndarray | None] = [None] * R  # callee_ok of a rule's callees at its last search
        changed = True
        while changed:
            changed = False
            for r in range(R - 1, -1, -1):  # callees first (see compile_pushdown)
                d = self.pd.dfas[r]
                cols, callees = self._call_cols[r]
                now = callee_ok[callees]
                if seen[r] is not None and np.array_equal(now, seen[r]):
                    continue
                seen[r] = now
                col_ok = np.ones(d.trans.shape[1], dtype=bool)  # bytes and specials: always
                col_ok[cols] = now
                live[r] = _bfs(d.trans, np.flatnonzero(d.accepting), reverse=True, col_ok=col_ok) >= 0
                if live[r][0] and allowed[r] and not callee_ok[r]:
                    callee_ok[r] = True
                    changed = True
        return [lv.tolist() for lv in live]

    def classes(self, r: int) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Rule ``r``'s byte classes refined by its exit sets: (byte -> column uint8[256],
        column -> the DFA's class, exit set -> bool mask of its columns).  Bytes in one
        column have the same moves and are in the same exit sets, so a table over these
        columns is the 256-column one with equal columns merged."""
        hit = self._classes.get(r)
        if hit is None:
            exits = sorted(set(self.exit[r].values()))
            # bits[j, b]: byte b is in exits[j]
            bits = np.unpackbits(np.frombuffer(b"".join(e.to_bytes(32, "little") for e in exits), dtype=np.uint8)
                                 .reshape(len(exits), 32), axis=1, bitorder="little").astype(bool)
            # each byte's signature (its class, below 256, then its exit sets packed) as one item
            sig = np.ascontiguousarray(np.concatenate(
                [self.bcn[r].astype(np.uint8)[:, None], np.packbits(bits.T, axis=1)], axis=1))
            _, rep, inv = np.unique(sig.view(np.dtype((np.void, sig.shape[1]))).reshape(-1), return_index=True,
                                    return_inverse=True)  # rep: a byte of each column
            hit = self._classes[r] = (inv.reshape(-1).astype(np.uint8), self.bcn[r][rep],
                                      dict(zip(exits, bits[:, rep])))
        return hit

    def min_bytes(self, forbidden: frozenset) -> list[list[int]]:
        """Per rule, per state: fewest bytes to complete the frame without calling the rules
        in ``forbidden`` (INF if impossible).  Dijkstra inside each rule with the callees'
        current start costs; a worklist (callees first) re-runs a rule only when a callee's
        start cost dropped, so a chain of rules costs one Dijkstra per rule, not one round
        per rule.  Start costs only decrease, so it terminates at the least fixpoint."""
        R = len(self.fin)
        rev = self.rev()
        starts = [INF] * R
        mb: list[list[int]] = [[INF] * len(f) for f in self.fin]
        todo = list(range(R))  # popped from the end: callees (higher index) first
        queued = [True] * R
        while todo:
            r = todo.pop()
            queued[r] = False
            off, src = rev[r]
            rc = self.rev_c[r]
            d = [INF] * len(self.fin[r])
            heap = [(0, s) for s, f in enumerate(self.fin[r]) if f]
            for _, s in heap:
                d[s] = 0
            heapq.heapify(heap)
            while heap:
                c, t = heapq.heappop(heap)
                if c > d[t]:
                    continue
                for s in src[off[t]:off[t + 1]].tolist():
                    if c + 1 < d[s]:
                        d[s] = c + 1
                        heapq.heappush(heap, (c + 1, s))
                for s, x in rc.get(t, ()):
                    w = starts[x]
                    if x not in forbidden and w < INF and c + w < d[s]:
                        d[s] = c + w
                        heapq.heappush(heap, (c + w, s))
            mb[r] = d
            if d[0] != starts[r]:
                starts[r] = d[0]
                if r not in forbidden:
                    for caller, _, _ in self.calls_to[r]:
                        if not queued[caller]:
                            queued[caller] = True
                            todo.append(caller)
        return mb

    def _check(self, step: str) -> None:
        _check_deadline(self._deadline, self._limits, self.pd.names[0] if self.pd.names else "", step)

    def _exit_sets(self) -> None:
        """``exit``: FIRST of the calls of each state (and of what follows a nullable call)
        plus FOLLOW of the rule where the state is nullable.  Only states with calls change
        in the fixpoints (the others' FIRST is their own moves, their nullability their
        acceptance), so only those are visited."""
        R = len(self.pd.dfas)
        self._check("the exit sets")
        # FIRST as ints (bit b for byte b) of the states the fixpoints read: the rules'
        # starts, the states with calls and their calls' targets; at first the bytes each
        # has a move on
        first: list[dict[int, int]] = []
        for r in range(R):
            need = sorted({0, *(s for s, _ in self.callers[r]), *(t for _, cs in self.callers[r] for _, t in cs)})
            rows = np.packbits(self.tr[r].take(need, axis=0).take(self.bcn[r], axis=1) >= 0, axis=1,
                               bitorder="little").tobytes()
            first.append({s: int.from_bytes(rows[32 * i:32 * i + 32], "little") for i, s in enumerate(need)})
        null = [list(f) for f in self.fin]
        changed = True
        while changed:
            changed = False
            self._check("the exit sets")
            for r in range(R - 1, -1, -1):  # callees first (see compile_pushdown)
                nr = null[r]
                for s, cs in self.callers[r]:
                    if not nr[s] and any(null[x][0] and nr[t] for x, t in cs):
                        nr[s] = True
                        changed = True
        changed = True
        while changed:
            changed = False
            self._check("the exit sets")
            for r in range(R - 1, -1, -1):
                fr = first[r]
                for s, cs in self.callers[r]:
                    v0 = v = fr[s]
                    for x, t in cs:
                        v |= first[x][0]
                        if null[x][0]:
                            v |= fr[t]
                    if v != v0:
                        fr[s] = v
                        changed = True
        follow = [0] * R
        changed = True
        while changed:
            changed = False
            for x in range(R):
                v = follow[x]
                for q, _s, t in self.calls_to[x]:
                    v |= first[q][t]
                    if null[q][t]:
                        v |= follow[q]
                if v != follow[x]:
                    follow[x] = v
                    changed = True
        self.exit: list[dict[int, int]] = []
        for r in range(R):
            ex: dict[int, int] = {}
            if follow[r]:  # the nullable states without calls: the accepting ones
                ex = dict.fromkeys(np.flatnonzero(self.pd.dfas[r].accepting).tolist(), follow[r])
            for s, cs in self.callers[r]:
                v = 0
                for x, t in cs:
                    v |= first[x][0]
                    if null[x][0]:
                        v |= first[r][t]
                if null[r][s]:
                    v |= follow[r]
                if v:
                    ex[s] = v
            self.exit.append(ex)


Stack = tuple  # tuple of frames (rule, state, counts id)
Config = frozenset  # of stacks


@dataclass(eq=False)
class CompiledPushdown:
    """A :class:`Pushdown` for one tokenizer; satisfies
    :class:`~decoding.backends.contract.CompiledGrammar`.  States are interned
    configurations, 0 is the start.

    Shareable between requests; memos only grow with pure functions of (grammar, vocab).
    """

    pushdown: Pushdown
    vocab: Vocab
    special_token_ids: tuple[int, ...]  # per Pushdown special
    grammar_key: str = ""
    meta: dict = field(default_factory=dict)
    max_configs: int = 1_000_000
    max_masks: int = DEFAULT_MAX_MASKS
    #: building the tables stops with LimitError past this (monotonic seconds; None: never),
    #: naming ``limits.max_compile_seconds``; both are dropped once built
    deadline: float | None = field(default=None, repr=False)
    limits: Limits | None = field(default=None, repr=False)
    _t: _Tables = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._t = _Tables(self.pushdown, self.deadline, self.limits)
        self.deadline = self.limits = None
        self._lock = threading.RLock()
        self._configs: list[Config] = []
        self._config_id: dict[Config, int] = {}
        self._masks = MaskTable(self.vocab.n_tokens, max_masks=self.max_masks, where="pushdown token index")
        self._config_mask: dict[int, int] = {}
        self._next: dict[tuple[int, int], int] = {}
        self._mb_memo: dict[int, list[list[int]]] = {}
        self._succ_memo: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._top_cost_memo: dict[Config, np.ndarray] = {}  # (see _top_costs)
        self._by_bytes: dict[bytes, int] | None = None  # (see _token_of_bytes)
        # (rule, state, saturated set) -> ids in _walk_masks (most walks' masks repeat or are
        # sparse: interned, like the configurations' masks, but never counted against max_masks)
        self._walks: dict[tuple[int, int, int], tuple[int, int]] = {}
        self._walk_masks = MaskTable(self.vocab.n_tokens, max_masks=sys.maxsize, where="pushdown walk memo")
        self._char_pairs: dict[int, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._rule_of: dict[int, int] = {}  # id of a table of _tabs -> its rule
        self._loop_profiles = tuple(PROFILES)  # the plain-text shortcuts tried (tests clear it)
        self._loops: dict[tuple[int, int, int], PlainLoops] = {}
        self._tabs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._closure_memo: dict[Config, tuple] = {}
        self._step_memo: dict[tuple[Config, int], Config] = {}
        # recursion counts: id -> {rule: count}; push memo; saturated-set id per counts id
        self._counts: list[dict[int, int]] = [{}]
        self._push: dict[tuple[int, int], int] = {}
        self._sat_of: list[int] = [0]
        self._sat_sets: list[frozenset] = [frozenset()]
        self._sat_id: dict[frozenset, int] = {frozenset(): 0}
        self._live: dict[int, list[list[bool]] | None] = {0: None}  # None: everything live
        self._special_set = frozenset(self.special_token_ids)
        self._special_of = {tid: k for k, tid in enumerate(self.special_token_ids)}
        self._eog = sorted(self.vocab.eog_ids)
        self._tb = self.vocab.token_bytes
        #: check the candidate tokens natively (``_native.pd_check``); False: every candidate
        #: is stepped in Python (the reference)
        self.native_check = True
        #: walk the tries of top frames natively (``_native.pd_frame_mask``: the tables are made
        #: there) and take the saturated sets' liveness from there; False: :meth:`_tables`,
        #: ``walk_tokens`` and ``_Tables.live`` (the reference)
        self.native_walk = True
        self._pd = None  # the rules for pd_check, made by the first mask that needs them
        self._pd_masker = None  # their mask walks (pd_masker), made by the first walk
        self._pd_state_off: np.ndarray | None = None
        self._special_arr = np.array(self.special_token_ids, dtype=np.uint32)
        self._final_of_loc: dict[int, int] = {}  # walk mask id -> its id in _masks (_compute_id)
        self._run_buf = np.empty(1 << 14, dtype=np.int32)  # pd_run's stacks (under the lock)
        self._last_walk: tuple | None = None
        self._intern(frozenset({((0, 0, 0),)}))

    # ------------------------------------------------------------------ counts / liveness
    def _push_counts(self, ck: int, x: int) -> int:
        """Counts id after pushing rule ``x``, or -1 if ``x`` is already nested max_depth times."""
        key = (ck, x)
        hit = self._push.get(key)
        if hit is not None:
            return hit
        c = dict(self._counts[ck])
        if c.get(x, 0) >= self.pushdown.max_depth:
            self._push[key] = -1
            return -1
        c[x] = c.get(x, 0) + 1
        nid = len(self._counts)
        self._counts.append(c)
        sat = frozenset(r for r, n in c.items() if n >= self.pushdown.max_depth)
        sid = self._sat_id.get(sat)
        if sid is None:
            sid = len(self._sat_sets)
            self._sat_sets.append(sat)
            self._sat_id[sat] = sid
        self._sat_of.append(sid)
        self._push[key] = nid
        return nid

    def _live_for(self, sid: int) -> list[list[bool]] | None:
        """Per rule, per state: completable without calling the rules of saturated set ``sid``
        (None when that set is empty: every state of the pruned rule DFAs is live)."""
        if sid in self._live:
            return self._live[sid]
        if self.native_walk:  # (the native tables' switch: the same set's liveness as theirs)
            masker = self._native_masker()
            off = self._pd_state_off
            assert off is not None
            flat = np.empty(int(off[-1]), dtype=np.uint8)
            _native.pd_masker_live(masker, self._sat_bytes(sid), flat)
            o = off.tolist()
            live = self._live[sid] = [flat[o[r]:o[r + 1]].astype(bool).tolist() for r in range(len(o) - 1)]
            return live
        live = self._live[sid] = self._t.live(self._sat_sets[sid])
        return live

    def _sat_bytes(self, sid: int) -> np.ndarray | None:
        """Saturated set ``sid`` as the native side takes it (one byte per rule; None: empty)."""
        if sid == 0:
            return None
        out = np.zeros(len(self.pushdown.dfas), dtype=np.uint8)
        out[sorted(self._sat_sets[sid])] = 1
        return out

    def _ok(self, r: int, s: int, ck: int) -> bool:
        sid = self._sat_of[ck]
        if sid == 0:
            return True
        live = self._live_for(sid)
        return bool(live[r][s])  # type: ignore[index]

    # ------------------------------------------------------------------ configurations
    def _closure(self, cfg: Config) -> tuple:
        hit = self._closure_memo.get(cfg)
        if hit is not None:
            return hit
        t = self._t
        seen = set(cfg)
        todo = list(cfg)
        while todo:
            st = todo.pop()
            r, s, ck = st[-1]
            for x, tt in t.calls[r][s]:
                ck2 = self._push_counts(ck, x)
                if ck2 < 0 or not self._ok(r, tt, ck) or not self._ok(x, 0, ck2):
                    continue
                new = st[:-1] + ((r, tt, ck), (x, 0, ck2))
                if new not in seen:
                    seen.add(new)
                    todo.append(new)
            if t.fin[r][s] and len(st) > 1:
                new = st[:-1]
                if new not in seen:
                    seen.add(new)
                    todo.append(new)
            if len(seen) > MAX_STACKS:
                raise LimitError(f"pushdown configuration exceeds {MAX_STACKS} stacks (grammar too ambiguous)")
        res = tuple(seen)
        if len(self._closure_memo) > 200_000:
            self._closure_memo.clear()
        self._closure_memo[cfg] = res
        return res

    def _step(self, cfg: Config, b: int) -> Config:
        key = (cfg, b)
        hit = self._step_memo.get(key)
        if hit is not None:
            return hit
        t = self._t
        out = set()
        for st in self._closure(cfg):
            r, s, ck = st[-1]
            nt = int(t.tr[r][s, t.bc[r][b]])
            if nt >= 0 and self._ok(r, nt, ck):
                out.add(st[:-1] + ((r, nt, ck),))
        res = frozenset(out)
        if len(self._step_memo) > 200_000:
            self._step_memo.clear()
        self._step_memo[key] = res
        return res

    def _step_special(self, cfg: Config, k: int) -> Config:
        t = self._t
        out = set()
        for st in self._closure(cfg):
            r, s, ck = st[-1]
            sp = t.specs[r].get(s)
            nt = -1 if sp is None else sp.get(k, -1)
            if nt >= 0 and self._ok(r, nt, ck):
                out.add(st[:-1] + ((r, nt, ck),))
        return frozenset(out)

    def _accepting_cfg(self, cfg: Config) -> bool:
        fin = self._t.fin
        return any(len(st) == 1 and fin[st[0][0]][st[0][1]] for st in self._closure(cfg))

    def _run(self, data: bytes, cfg: Config) -> Config:
        for b in data:
            cfg = self._step(cfg, b)
            if not cfg:
                break
        return cfg

    @staticmethod
    def _stacks(cfg: Config) -> np.ndarray:
        """``cfg`` as the native side takes it: each stack's length, then (rule, state) per frame."""
        return np.array([x for st in cfg for x in (len(st), *(v for f in st for v in f[:2]))], dtype=np.int32)

    def _run_native(self, data: bytes, cfg: Config) -> Config | None:
        """:meth:`_run` natively (``_native.pd_run``; None: left to the Python steps).  The
        recursion counts of the frames come back from the rules of the frames below them."""
        out = self._run_buf
        rc, n = _native.pd_run(self._native_masker(), self._stacks(cfg), data, out)
        if rc:
            return None
        v = out[:n].tolist()
        push = self._push_counts
        res = set()
        i = 0
        while i < n:
            ln = v[i]
            ck = 0
            frames = [(v[i + 1], v[i + 2], 0)]
            for f in range(1, ln):
                r = v[i + 1 + 2 * f]
                ck = push(ck, r)
                frames.append((r, v[i + 2 + 2 * f], ck))
            res.add(tuple(frames))
            i += 1 + 2 * ln
        return frozenset(res)

    def _intern(self, cfg: Config) -> int:
        cid = self._config_id.get(cfg)
        if cid is None:
            if len(self._configs) >= self.max_configs:
                raise LimitError(f"pushdown matcher exceeds max_configs={self.max_configs} configurations")
            cid = len(self._configs)
            self._configs.append(cfg)
            self._config_id[cfg] = cid
        return cid

    # ------------------------------------------------------------------ contract
    @property
    def backend(self) -> str:
        return "pushdown"

    @property
    def n_words(self) -> int:
        return self.vocab.n_words

    def accepts(self, data: bytes) -> bool:
        """Byte-level membership of ``data`` (no specials)."""
        with self._lock:
            cfg = self._run(data, self._configs[0])
            return bool(cfg) and self._accepting_cfg(cfg)

    def is_accepting(self, state: int) -> bool:
        with self._lock:
            return self._accepting_cfg(self._configs[state])

    def precompute(self) -> "CompiledPushdown":
        """Compute the start configuration's mask now (the others depend on the run)."""
        self.mask(0)
        return self

    def forced_bytes(self, state: int) -> bytes:
        """The bytes every continuation from configuration ``state`` must start with (empty
        if there is a choice or the configuration is accepting).  Specials are not included:
        a possible special is a choice and ends the forced run."""
        out = bytearray()
        with self._lock:
            cfg = self._configs[state]
            while len(out) < 4096 and not self._accepting_cfg(cfg):
                if any(self._step_special(cfg, k) for k in range(len(self.special_token_ids))):
                    break
                only = self._only_byte(cfg)
                if only is None:
                    break
                out.append(only)
                cfg = self._step(cfg, only)
        return bytes(out)

    def _only_byte(self, cfg: Config) -> int | None:
        """The one byte that can extend ``cfg`` (None if there are several or none)."""
        t = self._t
        found: int | None = None
        for st in self._closure(cfg):
            r, s, ck = st[-1]
            row = t.tr[r][s][t.bcn[r]]
            for b in np.flatnonzero(row >= 0).tolist():
                if b != found and self._ok(r, int(row[b]), ck):
                    if found is not None:
                        return None
                    found = b
        return found

    def next_state(self, state: int, token: int) -> int:
        """Configuration id after ``token``; -1 if not allowed; -2 for end-of-generation in
        an accepting configuration."""
        key = (state, token)
        hit = self._next.get(key)
        if hit is not None:
            return hit
        with self._lock:
            cfg = self._configs[state]
            if token in self.vocab.eog_ids and token not in self._special_set:
                ns = EOG if self._accepting_cfg(cfg) else FORBIDDEN
            elif token in self._special_set:
                nc = self._step_special(cfg, self._special_of[token])
                ns = self._intern(nc) if nc else FORBIDDEN
            elif 0 <= token < self.vocab.n_tokens and self._tb[token]:
                nc = self._run_native(self._tb[token], cfg) if self.native_check else None
                if nc is None:
                    nc = self._run(self._tb[token], cfg)
                ns = self._intern(nc) if nc else FORBIDDEN
            else:
                ns = FORBIDDEN
            self._next[key] = ns
            return ns

    def mask(self, state: int) -> np.ndarray:
        """Read-only uint32 bitmask of the tokens allowed in configuration ``state``."""
        return self._masks[self._mask_id(state)]

    def allowed_ids(self, state: int) -> np.ndarray:
        """Sorted ids of the tokens allowed in ``state`` (cached per distinct mask)."""
        return self._masks.ids(self._mask_id(state))

    def _mask_id(self, state: int) -> int:
        mid = self._config_mask.get(state)
        if mid is None:
            with self._lock:
                mid = self._config_mask.get(state)
                if mid is None:
                    mid = self._config_mask[state] = self._compute_id(self._configs[state])
        return mid

    def _compute_id(self, cfg: Config) -> int:
        """The id in ``_masks`` of :meth:`_compute`'s mask.  A configuration whose closure is
        one stack whose top frame consumes every allowed token itself (no candidate, special or
        end of generation) has exactly that frame's local mask: its id is remembered per walk
        mask, and when the walk was made by this call its native digest is reused."""
        clo = self._closure(cfg)
        if len(clo) == 1:
            (st,) = clo
            r, s, ck = st[-1]
            self._last_walk = None
            lid, c = self._walk(r, s, ck)
            if c < 0 and not self._accepting_cfg(cfg) and \
                    not any(self._step_special(cfg, k) for k in range(len(self.special_token_ids))):
                mid = self._final_of_loc.get(lid)
                if mid is None:
                    lw = self._last_walk
                    if lw is not None and lw[0] == lid:
                        mid = self._masks.intern_digest(*lw[1:])
                    else:
                        mid = self._masks.intern(np.array(self._walk_masks[lid]))
                    self._final_of_loc[lid] = mid
                return mid
        return self._masks.intern(self._compute(cfg))

    def stats(self) -> dict:
        """``table_bytes``: the native masker's walk tables, memos and liveness arrays."""
        return {"backend": self.backend, "rules": len(self.pushdown.dfas),
                "states": self.pushdown.n_states, "configs": len(self._configs),
                "distinct_masks": len(self._masks), "mask_bytes": self._masks.nbytes,
                "table_bytes": 0 if self._pd_masker is None else _native.pd_masker_bytes(self._pd_masker),
                "walks": len(self._walks), "vocab": self.vocab.name, "fingerprint": self.vocab.fingerprint}

    # ------------------------------------------------------------------ budgets
    def _mb(self, sid: int) -> list[list[int]]:
        hit = self._mb_memo.get(sid)
        if hit is None:
            hit = self._t.min_bytes(self._sat_sets[sid])
            self._mb_memo[sid] = hit
        return hit

    def _stack_bytes(self, st: Stack) -> int:
        return sum(self._mb(self._sat_of[ck])[r][s] for r, s, ck in st)

    def completion_cost(self, state: int) -> int:
        """Fewest bytes that complete configuration ``state``: an upper bound on the tokens
        needed (every byte on a completion is a single token of the vocabulary)."""
        with self._lock:
            v = min(self._stack_bytes(st) for st in self._configs[state])
        return COST_UNREACHABLE if v >= INF else int(v)

    def successor_costs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed token ids, completion cost after each); end-of-generation tokens get -2.
        Without split repetitions (``Pushdown.helpers``): :meth:`_successor_costs_stepped`.
        With them, a token that stays in the top frame of a stack of the configuration's closure (a
        stack the next configuration then holds, with that frame moved on) costs what
        :meth:`_top_costs` says; one that leaves it (a call, a return) costs that of its rest
        when its rest is a token that stays in a top frame after its first bytes (a token
        crossing the end of a split repetition's leaf), else it is stepped.  An upper bound
        on the exact token count, never below it (safe for budgets)."""
        hit = self._succ_memo.get(state)
        if hit is not None:
            return hit
        if not self.pushdown.helpers:
            return self._successor_costs_stepped(state)
        ids = self.allowed_ids(state)
        with self._lock:
            cfg = self._configs[state]
            out = self._top_costs(cfg)[ids]
            eog = set(self._eog) - self._special_set
            rest = self._token_of_bytes()
            fresh = 8  # configurations whose top costs this may compute (each: trie walks)
            memo = self._top_cost_memo
            for i in np.nonzero(out >= INF)[0].tolist():
                tid = int(ids[i])
                if tid in eog:
                    out[i] = EOG
                    continue
                data = self._tb[tid]
                best = INF
                c = cfg
                for j in range(1, len(data) if tid not in self._special_set else 0):
                    c = self._step(c, data[j - 1])
                    if not c:
                        break
                    w = rest.get(data[j:])
                    if w is not None and (fresh > 0 or c in memo):
                        fresh -= c not in memo
                        best = int(self._top_costs(c)[w])
                        if best < INF:
                            break
                if best >= INF:
                    # stepped, not interned: a configuration here may have ~100k successors
                    # that generation never reaches; interning them would fill max_configs
                    nc = self._run_native(data, cfg) if self.native_check and tid not in self._special_set \
                        else None
                    if nc is None:
                        ns = self.next_state(state, tid)
                        nc = self._configs[ns] if ns >= 0 else frozenset()
                    best = min((self._stack_bytes(x) for x in nc), default=INF)
                out[i] = best
            return self._remember_costs(state, ids, out)

    def worst_successor_cost(self, state: int) -> int:
        """The largest cost among the text tokens allowed in ``state`` (from :meth:`successor_costs`)."""
        return worst_text_cost(self.successor_costs(state)[1])

    def _successor_costs_stepped(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`successor_costs` of a grammar without split repetitions: the tokens that
        stay in a top frame of the configuration (not its closure) from one native walk per
        stack, every other token stepped (few leave a frame there)."""
        ids = self.allowed_ids(state)
        with self._lock:
            cfg = self._configs[state]
            out = np.full(len(ids), INF, dtype=np.int64)
            trie = vocab_tables(self.vocab).trie
            for st in cfg:
                r, s, ck = st[-1]
                sid = self._sat_of[ck]
                loc_t, _ = self._tables(r, sid)
                nxt = np.full(self.n_words * 32, -1, dtype=np.int32)
                scratch = np.zeros(self.n_words, dtype=np.uint32)
                _native.trie_walk(trie, self._t.classes(r)[0], loc_t.reshape(-1), loc_t.shape[1], s, scratch, nxt)
                mbr = np.array(self._mb(sid)[r] + [INF], dtype=np.int64)
                below = sum(self._mb(self._sat_of[c])[q][p] for q, p, c in st[:-1])
                end = nxt[ids]
                vals = np.where(end >= 0, below + mbr[np.where(end >= 0, end, len(mbr) - 1)], INF)
                np.minimum(out, vals, out=out)
            eog = set(self._eog) - self._special_set
            for i in np.nonzero(out >= INF)[0].tolist():
                tid = int(ids[i])
                if tid in eog:
                    out[i] = EOG
                    continue
                ns = self.next_state(state, tid)
                out[i] = min(self._stack_bytes(x) for x in self._configs[ns]) if ns >= 0 else INF
            return self._remember_costs(state, ids, out)

    def _remember_costs(self, state: int, ids: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, out)`` with INF written as COST_UNREACHABLE, read-only, memoized for
        ``state`` (at most 4096 states kept; the memo is cleared past that)."""
        out[out >= INF] = COST_UNREACHABLE
        out.setflags(write=False)
        res = (ids, out)
        if len(self._succ_memo) > 4096:
            self._succ_memo.clear()
        self._succ_memo[state] = res
        return res

    def _top_costs(self, cfg: Config) -> np.ndarray:
        """Per token id: the fewest bytes that complete the stack after it, over the stacks of
        ``cfg``'s closure whose top frame consumes it all (INF where none does): one native
        trie walk per distinct top frame, recording where each token ends."""
        hit = self._top_cost_memo.get(cfg)
        if hit is not None:
            return hit
        out = np.full(self.n_words * 32, INF, dtype=np.int64)
        trie = vocab_tables(self.vocab).trie
        tops: dict[tuple[int, int, int], int] = {}  # (rule, state, saturated set) -> least cost below
        for st in self._closure(cfg):
            r, s, ck = st[-1]
            key = (r, s, self._sat_of[ck])
            below = sum(self._mb(self._sat_of[c])[q][p] for q, p, c in st[:-1])
            if below < tops.get(key, INF + 1):
                tops[key] = below
        for (r, s, sid), below in tops.items():
            if below >= INF:
                continue
            loc_t, _ = self._tables(r, sid)
            nxt = np.full(self.n_words * 32, -1, dtype=np.int32)
            scratch = np.zeros(self.n_words, dtype=np.uint32)
            _native.trie_walk(trie, self._t.classes(r)[0], loc_t.reshape(-1), loc_t.shape[1], s, scratch, nxt)
            mbr = np.array(self._mb(sid)[r] + [INF], dtype=np.int64)
            np.minimum(out, np.where(nxt >= 0, below + mbr[np.where(nxt >= 0, nxt, len(mbr) - 1)], INF), out=out)
        out.setflags(write=False)
        if len(self._top_cost_memo) >= 64:
            self._top_cost_memo.clear()
        self._top_cost_memo[cfg] = out
        return out

    def _token_of_bytes(self) -> dict[bytes, int]:
        """The text tokens by their bytes (the first id of equal ones; no specials)."""
        if self._by_bytes is None:
            by: dict[bytes, int] = {}
            for tid, data in enumerate(self._tb):
                if data and tid not in self._special_set:
                    by.setdefault(data, tid)
            self._by_bytes = by
        return self._by_bytes

    # ------------------------------------------------------------------ masks
    def _tables(self, r: int, sid: int) -> tuple[np.ndarray, np.ndarray]:
        """(local [n+1, columns], over [2n+1, columns]) tables of rule ``r`` for saturated set
        ``sid``, over the rule's refined byte classes (:meth:`_Tables.classes`; int16 when the
        states fit): local keeps the rule's own byte moves into live states; over also sends
        every byte that may enter a call or return to the caller (exit set) to the absorbing
        state ``n``, and its start rows ``n + 1 + s`` are local's rows (no exit at the first
        byte: the configuration's closure has a stack for each call or return taken there)."""
        key = (r, sid)
        hit = self._tabs.get(key)
        if hit is not None:
            return hit
        _, orig, ex_cols = self._t.classes(r)
        base = self._t.tr[r][:, orig]
        n = base.shape[0]
        loc = np.full((n + 1, len(orig)), -1, dtype=np.int16 if n < 32767 else np.int32)
        live = self._live_for(sid)
        if live is None:
            loc[:n] = base
        else:
            lv = np.array(live[r] + [False], dtype=bool)
            loc[:n] = np.where((base >= 0) & lv[np.maximum(base, 0)] & lv[:n, None], base, -1)
        over = np.empty((2 * n + 1, len(orig)), dtype=np.int16 if 2 * n + 1 < 32767 else np.int32)
        over[:n + 1] = loc
        over[n + 1:] = loc[:n]
        over[n, :] = n
        by_exit: dict[int, list[int]] = {}
        for s, ex in self._t.exit[r].items():
            by_exit.setdefault(ex, []).append(s)
        for ex, states in by_exit.items():
            over[np.ix_(states, np.flatnonzero(ex_cols[ex]))] = n
        self._rule_of[id(loc)] = self._rule_of[id(over)] = r
        self._tabs[key] = (loc, over)
        return loc, over

    def _walk(self, r: int, s: int, ck: int) -> tuple[int, int]:
        """Ids in ``_walk_masks`` of (the tokens the top frame ``(r, s)`` consumes itself,
        the other tokens that may enter a call or return after its first byte: checked by
        stepping; -1: none).  A configuration's mask is the union over the stacks of its
        closure (:meth:`_compute`), so the calls and returns before the first byte are those
        stacks' own walks (a value's callee start frames, shared by every configuration)."""
        sid = self._sat_of[ck]
        key = (r, s, sid)
        hit = self._walks.get(key)
        if hit is not None:
            return hit
        if self.native_walk:
            loc = np.empty(self.n_words, dtype=np.uint32)
            cand = np.empty(self.n_words, dtype=np.uint32)
            buf = np.empty(SPARSE_MAX, dtype=np.uint32)
            more, h, count, inv = _native.pd_frame_mask(self._native_masker(), r, s, self._sat_bytes(sid),
                                                        self._special_arr, loc, cand, buf)
            lid = self._walk_masks.intern_digest(loc, h, count, bool(inv), buf)
            self._last_walk = (lid, loc, h, count, bool(inv), buf)  # (see _compute_id)
            hit = self._walks[key] = (lid, self._walk_masks.intern(cand) if more else -1)
            return hit
        loc_t, over_t = self._tables(r, sid)
        cls = self._t.classes(r)[0]
        tabs = vocab_tables(self.vocab)
        loc = np.empty(self.n_words, dtype=np.uint32)
        over = np.empty(self.n_words, dtype=np.uint32)
        # string bodies take the plain-text shortcut of the DFA back-end (exact, see
        # decoding.backends.textloop); state n of ``over`` is absorbing (its sink)
        walk_tokens(tabs, cls, loc_t, s, loc, lambda name, st: self._plain_chain(name, loc_t, st), self._loop_profiles,
                    loops=self._loops_for(r, sid, 0, loc_t))
        n = loc_t.shape[0] - 1
        walk_tokens(tabs, cls, over_t, n + 1 + s, over, lambda name, st: self._plain_chain(name, over_t, st),
                    self._loop_profiles, sink=n, loops=self._loops_for(r, sid, 1, over_t))
        for tid in self.special_token_ids:
            loc[tid >> 5] &= ~np.uint32(1 << (tid & 31))
            over[tid >> 5] &= ~np.uint32(1 << (tid & 31))
        cand = over & ~loc
        hit = self._walks[key] = (self._walk_masks.intern(loc), self._walk_masks.intern(cand) if cand.any() else -1)
        return hit

    def _loops_for(self, r: int, sid: int, which: int, table: np.ndarray) -> PlainLoops | None:
        """The whole-plain-subtree memo of one rule table (``which``: 0 local, 1 over)."""
        if not self._loop_profiles:
            return None
        key = (r, sid, which)
        hit = self._loops.get(key)
        if hit is None:
            hit = self._loops[key] = PlainLoops(table.shape[0], self._loop_profiles[0], self._pairs_of(r))
        return hit

    def _pairs_of(self, r: int) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Rule ``r``'s plain-text character pairs per profile (its tables share its classes)."""
        hit = self._char_pairs.get(r)
        if hit is None:
            hit = self._char_pairs[r] = {}
        return hit

    def _plain_chain(self, name: str, table: np.ndarray, state: int) -> int | None:
        """The plain-text chain of ``state`` in a rule table (one of :meth:`_tables`)."""
        r = self._rule_of[id(table)]
        pairs = self._pairs_of(r)
        hit = pairs.get(name)
        if hit is None:
            hit = pairs[name] = char_pairs(vocab_tables(self.vocab).profile(name).char_dfa, self._t.classes(r)[0])
        return plain_chain(hit, table, state, max(1, vocab_tables(self.vocab).profile(name).max_chars))

    def _native_rules(self):
        """The rules' byte moves, acceptance and calls as one ``_native.pd_new`` object: the
        same tables the Python steps read (``_Tables``: ``tr``, ``bc``, ``fin``, ``calls``)."""
        if self._pd is None:
            t = self._t
            dfas = self.pushdown.dfas
            n_states = np.array([d.n_states for d in dfas], dtype=np.int64)
            n_cls = np.array([d.n_classes for d in dfas], dtype=np.int32)
            state_off = np.zeros(len(dfas) + 1, dtype=np.int32)
            state_off[1:] = np.cumsum(n_states)
            trans_off = np.zeros(len(dfas), dtype=np.int64)
            trans_off[1:] = np.cumsum(n_states * n_cls)[:-1]
            trans = np.concatenate([np.ascontiguousarray(tr, dtype=np.int32).reshape(-1) for tr in t.tr])
            byte_class = np.concatenate([np.asarray(b, dtype=np.uint8) for b in t.bcn])
            accepting = np.concatenate([np.asarray(d.accepting, dtype=np.uint8) for d in dfas])
            n_calls = np.zeros(int(state_off[-1]) + 1, dtype=np.int32)
            xs: list[int] = []
            ts: list[int] = []
            for r, callers in enumerate(t.callers):
                for s, cs in callers:
                    n_calls[state_off[r] + s + 1] = len(cs)
                    for x, tt in cs:
                        xs.append(x)
                        ts.append(tt)
            n_spec = np.zeros(int(state_off[-1]) + 1, dtype=np.int32)
            sts: list[int] = []
            for r, sr in enumerate(t.specs):
                for s in sorted(sr):
                    n_spec[state_off[r] + s + 1] = len(sr[s])
                    sts.extend(sr[s].values())
            blob, off = self.vocab.blob()
            self._pd_state_off = state_off
            self._pd = _native.pd_new(self.pushdown.max_depth, np.frombuffer(blob, dtype=np.uint8), off, trans_off,
                                      trans, n_cls, state_off, byte_class, accepting, np.cumsum(n_calls, dtype=np.int32),
                                      np.array(xs, dtype=np.int32), np.array(ts, dtype=np.int32),
                                      np.cumsum(n_spec, dtype=np.int32), np.array(sts, dtype=np.int32))
        return self._pd

    def _native_masker(self):
        """The rules' mask walks (``_native.pd_masker``) over their exit sets and the
        vocabulary's plain-text profiles (the ones ``_walk`` tries)."""
        if self._pd_masker is None:
            pd = self._native_rules()
            off = self._pd_state_off
            assert off is not None
            exit_id = np.full(int(off[-1]), -1, dtype=np.int32)
            sets: dict[int, int] = {}
            for r, ex in enumerate(self._t.exit):
                for s, e in ex.items():
                    exit_id[off[r] + s] = sets.setdefault(e, len(sets))
            blob = np.frombuffer(b"".join(e.to_bytes(32, "little") for e in sets), dtype=np.uint8)
            profiles = vocab_tables(self.vocab).masker_profiles(tuple(self._loop_profiles))
            self._pd_masker = _native.pd_masker(pd, exit_id, blob, profiles)
        return self._pd_masker

    def _compute(self, cfg: Config) -> np.ndarray:
        """The mask of ``cfg``: over the stacks of its closure, the tokens each top frame
        consumes itself, the candidates that may leave it after a byte checked exactly from
        ``cfg``, then the special and end-of-generation tokens."""
        wm = self._walk_masks
        m = cand = None
        for st in self._closure(cfg):
            r, s, ck = st[-1]
            loc, c = self._walk(r, s, ck)
            if m is None:
                m = np.array(wm[loc])  # (a copy: the table's masks are read-only)
            else:
                np.bitwise_or(m, wm[loc], out=m)
            if c >= 0:
                if cand is None:
                    cand = np.array(wm[c])
                else:
                    np.bitwise_or(cand, wm[c], out=cand)
        assert m is not None  # (a configuration has a stack)
        ids: list[int] = []
        if cand is not None:
            cand &= ~m
            cids = mask_ids(cand, self.vocab.n_tokens)
            if len(cids) and self.native_check:
                # the native check is exact; it leaves to the steps below only tokens that die
                # after a closure past its bounds of stacks or frames
                und = np.empty(len(cids), dtype=np.uint32)
                n = _native.pd_check(self._native_masker(), self._stacks(cfg), cids.astype(np.uint32), m, und)
                cids = und[:n]
            ids = cids.tolist()
        tb = self._tb
        ids.sort(key=tb.__getitem__)
        path: list[Config] = [cfg]
        prev = b""
        for tid in ids:
            data = tb[tid]
            n = 0
            lim = min(len(prev), len(data), len(path) - 1)
            while n < lim and prev[n] == data[n]:
                n += 1
            del path[n + 1:]
            ok = True
            for b in data[n:]:
                nxt = self._step(path[-1], b)
                if not nxt:
                    ok = False
                    break
                path.append(nxt)
            prev = data
            if ok:
                m[tid >> 5] |= np.uint32(1 << (tid & 31))
        for k, tid in enumerate(self.special_token_ids):
            if self._step_special(cfg, k):
                m[tid >> 5] |= np.uint32(1 << (tid & 31))
        if self._accepting_cfg(cfg):
            for tid in self._eog:
                m[tid >> 5] |= np.uint32(1 << (tid & 31))
        return m


def compile_grammar_pushdown(grammar: Grammar, vocab: Vocab, *, grammar_key: str = "",
                             meta: dict | None = None, eager: bool = False,
                             max_masks: int = DEFAULT_MAX_MASKS, limits: Limits | None = None,
                             size_checked: bool = False) -> CompiledPushdown:
    """Compile ``grammar`` for ``vocab`` with the pushdown back-end (specials that are one
    control/user-defined token of the vocabulary are matched as that token).  ``eager``
    computes the start configuration's mask now.  ``size_checked``: the caller ran
    ``check_size(grammar, limits, inline=False)`` (see :func:`compile_pushdown`)."""
    lim = DEFAULT_LIMITS if limits is None else limits
    deadline = time.monotonic() + lim.max_compile_seconds  # the rules and the tables
    specials = grammar.specials()
    literal = [t for t in specials if vocab.special_token(t) is None]
    pd = compile_pushdown(grammar, literal_specials=literal, usable_bytes=vocab.single_byte_tokens(),
                          limits=limits, size_checked=size_checked)
    ids = tuple(int(vocab.special_token(t)) for t in pd.specials)  # type: ignore[arg-type]
    cp = CompiledPushdown(pd, vocab, ids, grammar_key=grammar_key, meta=dict(meta or {}), max_masks=max_masks,
                          deadline=deadline, limits=lim)
    return cp.precompute() if eager else cp

