"""Size estimates of grammar IR, used to fail fast and to choose a back-end.

The unit is a rough Thompson-NFA state count: a literal byte, a byte set or a special is
one state, a choice adds two plus one per branch, ``item{m,n}`` costs the item ``n``
times (``m + 1`` for unbounded) plus two, and the separated-list shape ``x (S x)*`` (the
automaton builds it as one loop) counts ``x`` once.

- :func:`node_size`: one rule, each :class:`~decoding.ir.Ref` counted as one symbol (a
  call of the pushdown back-end);
- :func:`estimate_size`: a whole grammar as the explicit DFA back-end unrolls it, refs
  expanded and a recursive rule counted ``max_depth`` times;
- :func:`estimate_work`: the subset construction's work, which the state count misses: a
  repetition with two or more copies of a *variable-length* item (``("a"{0,100}){0,100}``,
  ``("a" | "ab" | "b"){0,2000}``) can have every NFA state of the repetition active at
  once, so determinising it costs about the square of its size (an item known to parse
  several ways, ``([a-z] | "xy"){0,400}``, costs a factor ``copies`` more).  An item known
  to be a *prefix code* (no string of it is a proper prefix of another: a JSON string
  character, ``"\\b" | "\\u00" [0-9a-f]{2} | [a-z]``) is decoded as it is read: each DFA
  state holds one copy's NFA states, so the repetition costs its states times the item's
  (measured, JSON strings of ``maxLength`` 256/1024/4096/8192: 0.07/0.29/1.06/2.75 s,
  linear; estimated 1.3/5.3/21/42 M steps, where the square was 4.7/76/1208/4832 M);
- :func:`check_size`: both estimates against :class:`~decoding.limits.Limits`, raising a
  :class:`~decoding.errors.LimitError` that names the rule and the limit.

``counted=True`` (the front-ends and ``backend="auto"``) estimates a repetition the counted
back-end (:mod:`decoding.backends.counted`) can count: a non-empty item with known first
bytes (its units are checked exactly there) repeated more than ``COUNTED_WINDOW + 1`` times costs about
``COUNTED_WINDOW + 2`` copies per bound instead of one copy per unit.  The default
(``counted=False``) is the explicit DFA's own unrolled size.

Invariants
- Every walk here is iterative (an explicit stack): a chain of 100,000 rules or groups
  nested 100,000 deep costs time, never a ``RecursionError``.
- Memoized per object id, so IR that shares subtrees costs time linear in its distinct
  nodes.  Estimates only: never used to decide a language.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable

from decoding.errors import LimitError
from decoding.ir.nodes import ByteSet, Choice, Dfa, Diff, Grammar, Inter, Lit, Node, Ref, Repeat, Seq, children
from decoding.limits import DEFAULT_LIMITS, Limits

#: the window ``K`` the estimates assume for counted repetitions (one more than the longest
#: token of the shared vocabularies, 128 bytes)
COUNTED_WINDOW = 129

#: memoize Ref-free subtrees inside rules too (their estimate cannot depend on the rules
#: around them); False: only outside every rule, as before (tests compare the two)
CACHE_REF_FREE = True

#: :meth:`_Inline.run` folds with its own loop (:meth:`_Inline._fold`); False: with the
#: generic :func:`_fold` and callbacks, as before (tests compare the two)
INLINE_FAST = True

__all__ = ["COUNTED_WINDOW", "estimate_size", "node_size", "node_work", "estimate_work", "check_size", "is_sep_loop", "Estimate",
           "attach_estimates", "release_estimates", "rule_estimates", "attached_nodes"]


def is_sep_loop(x: Node, r: Node) -> bool:
    """``x`` followed by ``r = (S x)*`` where ``x`` is a Ref (a separated list)."""
    return isinstance(x, Ref) and isinstance(r, Repeat) and r.min == 0 and r.max is None and \
        isinstance(r.item, Seq) and len(r.item.items) >= 2 and r.item.items[-1] == x


@dataclass(frozen=True, slots=True)
class Estimate:
    """Estimates of one node: ``states`` (NFA states), ``lo``/``hi`` (shortest and longest
    match in bytes, ``hi`` None when unbounded) and ``work`` (quadratic subset-construction
    cost of its variable-length repetitions)."""
    states: int
    lo: int
    hi: int | None
    work: int
    #: known to parse several ways when repeated: a Choice whose branches start with the
    #: same known symbols and whose literal heads do not tell them apart (``[a-z] | "xy"``,
    #: ``"ab" | "abc"``), here or inside; then ``item{0,n}`` keeps a range of copy counts
    #: per subset.  False when unknown (a Ref), so estimates never grow because of a Ref
    amb: bool = False
    #: first symbols (bit b for byte b, bit 256 for any special; all bits when unknown)
    first: int = (1 << 257) - 1  # unknown: every symbol
    #: holds a Ref counted as one symbol (its language unknown here)
    refs: bool = False
    #: known to be a prefix code: no string of it is a proper prefix of another (a literal, a
    #: byte set, a sequence of prefix codes, a choice of prefix codes with disjoint first
    #: symbols, a fixed count of one, a deterministic automaton whose accepting states have no
    #: edges).  Then ``item{m,n}`` is decoded as it is read: one copy's states per DFA state.
    #: False when unknown
    pf: bool = False
    #: a repetition inside was estimated counted (``counted=True`` and countable, see
    #: :func:`_counted_copies`); when False the estimate is the same with ``counted=False``.
    #: Not compared: it says how the estimate was made, not what it is
    cut: bool = field(default=False, compare=False)


_ALL = (1 << 257) - 1


class _Filling:
    """Estimate's slots without the frozen guard: :func:`_est` fills one, then makes it an
    Estimate (a ``__class__`` assignment, allowed between classes of equal slots)."""
    __slots__ = Estimate.__slots__


_new = object.__new__


def _est(states: int, lo: int, hi: int | None, work: int, amb: bool = False, first: int = _ALL,
         refs: bool = False, pf: bool = False, cut: bool = False) -> Estimate:
    """``Estimate(...)`` made faster (the slots set without the frozen class's
    ``__setattr__`` guard): the same object; the estimates are built by the thousand."""
    e = _new(_Filling)
    e.states = states
    e.lo = lo
    e.hi = hi
    e.work = work
    e.amb = amb
    e.first = first
    e.refs = refs
    e.pf = pf
    e.cut = cut
    e.__class__ = Estimate  # type: ignore[assignment]
    return e  # type: ignore[return-value]


# a Ref seen as one symbol (the pushdown back-end's call), or a recursive Ref inlined as
# nothing: its language is unknown here (first = every symbol, never "known ambiguous")
_ONE = Estimate(1, 1, 1, 0, refs=True)
_ZERO = Estimate(0, 0, 0, 0, False, 0)
_SPECIAL = Estimate(1, 1, 1, 0, False, 1 << 256, pf=True)


def _byte_mask(ranges: tuple[tuple[int, int], ...]) -> int:
    m = 0
    for lo, hi in ranges:
        m |= ((1 << (hi - lo + 1)) - 1) << lo
    return m


def _lead(n: Node) -> bytes:
    """The literal bytes every string of ``n`` starts with, as far as leading Lits say."""
    cls = n.__class__
    if cls is Lit:
        return n.data  # type: ignore[union-attr]
    if cls is Seq:
        items = n.items  # type: ignore[union-attr]
        if not items or items[0].__class__ is not Lit:
            return b""
        if len(items) == 1 or items[1].__class__ is not Lit:  # (seq() merges adjacent literals)
            return items[0].data  # type: ignore[union-attr]
        out = b""
        for x in items:
            if x.__class__ is not Lit:
                break
            out += x.data  # type: ignore[union-attr]
        return out
    return b""


#: at most this many byte-set strings in all per choice for :func:`_set_strings_differ`
SET_STRINGS_MAX = 256
#: ... each at most this long
SET_STRING_LEN_MAX = 16
#: :func:`_choice` skips :func:`_set_strings_differ` when a branch's estimate says it has no
#: set strings (unbounded, longer than SET_STRING_LEN_MAX, or holding a Ref); False: always
#: asks (tests compare the two)
SET_STRINGS_SHORTCUT = True


def _no_set_strings(n: Node) -> bool:
    """:func:`_set_strings` of ``n`` is None, as its class (or size) alone says."""
    cls = n.__class__
    if cls is Lit:
        return len(n.data) > SET_STRING_LEN_MAX  # type: ignore[union-attr]
    if cls is ByteSet:
        return not n.ranges  # type: ignore[union-attr]
    return cls is not Choice and cls is not Seq


def _set_strings(n: Node, budget: int) -> list[tuple[int, ...]] | None:
    """``n``'s language as at most ``budget`` sequences of byte masks (each string of ``n``
    matches one of them position by position, and each of them matches only strings of
    ``n``), or None when ``n`` is not such a short finite sequence of literals and byte sets
    (a repetition, a Ref, a special, an automaton).  A child that is none is looked for
    before any is expanded (the answer is the same: None)."""
    if isinstance(n, (Choice, Seq)) and any(_no_set_strings(x) for x in n.items):
        return None
    if isinstance(n, Lit):
        return [tuple(1 << b for b in n.data)] if len(n.data) <= SET_STRING_LEN_MAX else None
    if isinstance(n, ByteSet):
        return [(_byte_mask(n.ranges),)] if n.ranges else None
    if isinstance(n, Choice):
        out: list[tuple[int, ...]] = []
        for x in n.items:
            sub = _set_strings(x, budget - len(out))
            if sub is None:
                return None
            out.extend(sub)
            if len(out) > budget:
                return None
        return out
    if isinstance(n, Seq):
        acc: list[tuple[int, ...]] = [()]
        for x in n.items:
            sub = _set_strings(x, budget)
            if sub is None or len(acc) * len(sub) > budget:
                return None
            acc = [a + b for a in acc for b in sub]
            if any(len(a) > SET_STRING_LEN_MAX for a in acc):
                return None
        return acc
    return None


def _set_strings_differ(branches: list[Node]) -> bool:
    """True when every branch is a short finite sequence of byte sets (:func:`_set_strings`)
    and no string of one branch is a prefix of (or equal to) a string of another branch: then
    the branches' union is a prefix code when each branch is one (exact, not a guess: two
    byte-set sequences share a string prefix iff their sets meet at every position of the
    shorter).  False when unknown."""
    if any(_no_set_strings(x) for x in branches):
        return False
    tagged: list[tuple[tuple[int, ...], int]] = []
    for i, x in enumerate(branches):
        sub = _set_strings(x, SET_STRINGS_MAX - len(tagged))
        if sub is None:
            return False
        tagged.extend((t, i) for t in sub)
        if len(tagged) > SET_STRINGS_MAX:
            return False
    # bucket by the first mask's lowest byte would miss overlaps; compare pairs whose first
    # masks meet (few: branches starting alike)
    for j, (b, bi) in enumerate(tagged):
        for a, ai in tagged[:j]:
            if ai == bi or not a or not b or not (a[0] & b[0]):
                continue
            if all(p & q for p, q in zip(a, b)):
                return False
    return True


def _counted_copies(n: Repeat, e: Estimate) -> int | None:
    """Copies of the item a counted repetition keeps, or None when it is not countable."""
    big = COUNTED_WINDOW + 1
    room = None if n.max is None else n.max - n.min
    if not (n.min > big or (room is not None and room > big)):
        return None
    if e.lo == 0 or e.refs or e.first == _ALL or (e.first >> 256) & 1:
        return None  # (``amb`` is a guess; the counted back-end checks the unit exactly)
    return min(n.min, big + 1) + (1 if room is None else min(room, big + 1))


def _dfa_prefix_free(n: Dfa) -> bool:
    """An automaton leaf's language is a prefix code: it is deterministic (no state has two
    edges on one byte) and no accepting state has an edge."""
    acc = set(n.accept)
    for i, es in enumerate(n.edges):
        if i in acc and es:
            return False
        ranges = sorted((lo, hi) for lo, hi, _ in es)
        if any(b[0] <= a[1] for a, b in zip(ranges, ranges[1:])):
            return False
    return True


#: literals' estimates by ``length << 8 | first byte`` (an estimate is immutable: literals
#: alike share one), at most ``_LIT_SHARED_MAX`` of them
_LIT_SHARED: dict[int, Estimate] = {}
_LIT_SHARED_MAX = 4096


def _leaf(n: Node) -> Estimate:
    """Estimate of a leaf (no children): a Lit, ByteSet, Dfa or Special."""
    cls = n.__class__
    if cls is Lit:
        data = n.data  # type: ignore[union-attr]
        k = len(data)
        key = k << 8 | data[0] if k else -1
        e = _LIT_SHARED.get(key)
        if e is None:
            e = _est(k, k, k, 0, False, 1 << data[0] if k else 0, pf=True)
            if len(_LIT_SHARED) < _LIT_SHARED_MAX:
                _LIT_SHARED[key] = e
        return e
    if cls is ByteSet:
        return _est(1, 1, 1, 0, False, _byte_mask(n.ranges), pf=True)  # type: ignore[union-attr]
    if cls is Dfa:
        k = len(n.edges)  # type: ignore[union-attr]
        first = 0
        for lo, hi, _ in n.edges[0]:  # type: ignore[union-attr]
            first |= _byte_mask(((lo, hi),))
        # lo: a byte, unless empty is in
        return _est(k, 0 if 0 in n.accept else 1, None, k, False, first,  # type: ignore[union-attr]
                    pf=_dfa_prefix_free(n))  # type: ignore[arg-type]
    if cls is Seq or cls is Choice or cls is Repeat or cls is Inter or cls is Diff:
        return _combine(n, [])  # (one without children: the empty sequence or language)
    return _SPECIAL


def _choice(n: Choice, kids: list[Estimate]) -> Estimate:
    """Estimate of a non-empty Choice from its branches' (in order)."""
    states = 2
    lo = kids[0].lo
    hi: int | None = 0
    work = first = dup = 0
    amb = refs = cut = False
    pf = True
    for e in kids:
        states += e.states + 1
        if e.lo < lo:
            lo = e.lo
        if hi is not None:
            h = e.hi
            if h is None:
                hi = None
            elif h > hi:
                hi = h
        work += e.work
        if e.amb:
            amb = True
        if e.refs:
            refs = True
        if e.cut:
            cut = True
        if not e.pf:
            pf = False
        dup |= first & e.first
        first |= e.first
    heads_differ = True
    if dup:
        # branches starting alike are told apart by their literal heads when none of those is
        # a prefix of another (``"\\b" | "\\u00" ...``), or when they are short finite
        # sequences of byte sets none of which can match a prefix of another's string (a
        # character class over UTF-8: ``\\S`` as JSON characters); else they are ambiguous
        # (plain loops: the same tests as comprehensions, made per choice by the thousand)
        alike: list[Node] = []
        known = short = True  # every alike branch of known first symbols and never empty; ...
        for x, e in zip(n.items, kids):  # ... and a short finite sequence of byte sets, maybe
            if e.first & dup:
                alike.append(x)
                if e.first == _ALL or e.lo <= 0:
                    known = False
                    break
                h = e.hi
                if h is None or h > SET_STRING_LEN_MAX or e.refs:
                    short = False
        heads_differ = False
        if known:
            leads = sorted([_lead(x) for x in alike])
            heads_differ = True
            prev = b""
            for b in leads:  # (sorted: a head that is a prefix of another is just before it)
                if not b or (prev and b.startswith(prev)):
                    heads_differ = False
                    break
                prev = b
            # (a branch of unbounded or over SET_STRING_LEN_MAX bytes, or holding a Ref, is no
            # short finite sequence of byte sets: :func:`_set_strings_differ` says False)
            if not heads_differ and (short or not SET_STRINGS_SHORTCUT):
                heads_differ = _set_strings_differ(alike)
            amb = amb or not heads_differ
    # a prefix code when every branch is one and no string of a branch can be a prefix of
    # another branch's (first symbols disjoint, or literal heads that differ)
    if pf and len(kids) > 1:
        pf = heads_differ
        if pf:
            for e in kids:
                if e.lo <= 0 or e.first == _ALL:
                    pf = False
                    break
    return _est(states, lo, hi, work, amb, first, refs, pf, cut)


def _combine(n: Node, kids: list[Estimate], counted: bool = False) -> Estimate:
    """Estimate of a non-Ref node from its children's (in order)."""
    cls = n.__class__
    if cls is Seq:
        # one pass: states (the separated list's loop ``x (S x)*`` counts ``x`` once), lo, hi,
        # work, first symbols (up to the first item that is never empty), the flags
        states = lo = work = first = 0
        hi: int | None = 0
        amb = refs = cut = False
        pf = opened = True
        prev: Node | None = None
        for x, e in zip(n.items, kids):  # type: ignore[union-attr]
            if prev is None or not (prev.__class__ is Ref and x.__class__ is Repeat and is_sep_loop(prev, x)):
                states += e.states
            prev = x
            lo += e.lo
            if hi is not None:
                hi = None if e.hi is None else hi + e.hi
            work += e.work
            if opened:
                first |= e.first
                if e.lo > 0:
                    opened = False
            if e.amb:
                amb = True
            if e.refs:
                refs = True
            if not e.pf:
                pf = False
            if e.cut:
                cut = True
        return _est(states, lo, hi, work, amb, first, refs, pf, cut)
    if cls is Choice:
        return _choice(n, kids) if kids else _est(2, 0, 0, 0, False, 0, pf=True)  # type: ignore[arg-type]
    if cls is Repeat:
        e = kids[0]
        copies = n.min + (1 if n.max is None else n.max - n.min)
        cc = _counted_copies(n, e) if counted else None
        if cc is not None:
            copies = cc
        states = e.states * copies + 2
        hi = None if n.max is None or e.hi is None else e.hi * n.max
        work = e.work * copies
        if copies >= 2 and e.hi != e.lo:
            # copies entered at different offsets are active at once: every one of them when
            # the item may be empty; else about one item's worth per copy (one parse: JSON
            # string characters), and when the item is known ambiguous (``([a-z] |
            # "xy"){0,400}``) a range of copy counts per subset: a factor ``copies`` more
            # (measured: 35 s for ([a-z] | "xy"){0,400}, ~80 ns per unit as for strings)
            if e.lo == 0:
                work += states * states
            elif e.pf and not e.amb:
                # a prefix code: the copy being read is known, so a DFA state holds one copy's
                # NFA states (JSON strings: 0.27 s per 1000 characters, see the docstring)
                work += states * max(1, e.states)
            else:
                work += states * states // max(1, e.states) * (copies if e.amb and cc is None else 1)
        return _est(states, e.lo * n.min, hi, work, e.amb, e.first if n.max != 0 else 0, e.refs,
                        e.pf and (n.min == n.max or n.max == 0), e.cut or cc is not None)
    if cls is Inter or cls is Diff:
        # built as one product DFA of the operands' DFAs, embedded in the NFA: about the
        # larger operand's states (minimised), the operands' work plus the product's
        e = kids[0]
        states = max(k.states for k in kids) + 2
        work = sum(k.work for k in kids) + states * len(kids)
        if cls is Inter:
            his = [k.hi for k in kids if k.hi is not None]
            first = _ALL
            for k in kids:
                first &= k.first
            # a subset of a prefix code is one
            return _est(states, max(k.lo for k in kids), min(his) if his else None, work, False, first,
                            any(k.refs for k in kids), any(k.pf for k in kids), any(k.cut for k in kids))
        return _est(states, e.lo, e.hi, work, False, e.first, any(k.refs for k in kids), e.pf,
                        any(k.cut for k in kids))
    return _leaf(n)


def _fold(root: Node, ref: Callable[[Ref], Estimate | None], memo: dict[int, Estimate],
          enter: Callable[[Ref], Node | None], leave: Callable[[Ref, Estimate], Estimate],
          cacheable: Callable[[], bool], counted: bool = False, keep: list | None = None,
          seed: Callable[[int], Estimate | None] | None = None) -> Estimate:
    """Post-order evaluation of ``root`` with an explicit stack.

    ``ref(r)`` gives a Ref's estimate when known; otherwise ``enter(r)`` returns the rule
    body to evaluate (or None: counts as zero) and ``leave(r, body)`` turns the body's
    estimate into the Ref's.  ``memo`` caches non-Ref nodes while ``cacheable()``, and
    Ref-free subtrees always (``CACHE_REF_FREE``: their estimate is the same wherever they
    are inlined); a memo
    that outlives this call must come with ``keep``, which holds every memoized node (so
    no id is reused by another node while the memo lives).  ``seed(id)`` gives the estimate
    of a Ref-free node made earlier (the same with this ``counted``) or None, looked up
    after ``memo``."""
    out: list[Estimate] = []
    # per entry of ``out``: whether its subtree holds a Ref (its estimate may depend on the
    # rules being inlined around it); a Ref-free subtree is memoized even inside a rule
    dep: list[bool] = []
    with_refs: set[int] = set()  # memoized nodes (this call) whose subtree holds a Ref
    # frames: a node to evaluate, or (node, -2): leaving a Ref whose body was evaluated, or
    # (node, -3): combining a composite node whose children were
    stack: list = [root]
    marks: list[int] = []
    pop = stack.pop
    push = stack.append
    put = out.append
    put_dep = dep.append
    lits = _LIT_SHARED
    while stack:
        n = pop()
        cls = n.__class__
        if cls is tuple:
            node, state = n
            if state == -2:
                body = out.pop()
                dep.pop()
                put(leave(node, body))
                put_dep(True)
                continue
            base = marks.pop()
            kids = out[base:]
            del out[base:]
            d = True in dep[base:]
            del dep[base:]
            est = _combine(node, kids, counted)
            if (not d and CACHE_REF_FREE) or cacheable():
                memo[id(node)] = est
                if d:
                    with_refs.add(id(node))
                if keep is not None:
                    keep.append(node)
            put(est)
            put_dep(d)
            continue
        if cls is Ref:
            known = ref(n)
            if known is not None:
                put(known)
                put_dep(True)
                continue
            body = enter(n)
            if body is None:
                put(_ZERO)
                put_dep(True)
                continue
            push((n, -2))
            push(body)
            continue
        i = id(n)
        hit = memo.get(i)
        if hit is not None:
            put(hit)
            put_dep(i in with_refs)
            continue
        if cls is Lit and n.data:  # (its estimate, as :func:`_leaf` makes it: the same as a seed's)
            data = n.data  # type: ignore[union-attr]
            est = lits.get(len(data) << 8 | data[0])
            if est is not None:
                memo[i] = est
                if keep is not None:
                    keep.append(n)
                put(est)
                put_dep(False)
                continue
        if seed is not None:
            hit = seed(i)
            if hit is not None:  # (Ref-free where Refs are inlined)
                put(hit)
                put_dep(False)
                continue
        if cls is Seq or cls is Choice or cls is Inter:
            kids_n = n.items  # type: ignore[union-attr]
        elif cls is Repeat:
            kids_n = (n.item,)  # type: ignore[union-attr]
        elif cls is Diff:
            kids_n = (n.base, n.minus)  # type: ignore[union-attr]
        else:
            kids_n = ()
        if not kids_n:
            est = _leaf(n)
            memo[i] = est
            if keep is not None:
                keep.append(n)
            put(est)
            put_dep(False)
            continue
        marks.append(len(out))
        push((n, -3))
        stack.extend(reversed(kids_n))
    return out[-1]


def _node_estimate(node: Node, counted: bool = False, memo: dict[int, Estimate] | None = None,
                   keep: list | None = None) -> Estimate:
    """One rule's estimate, Refs as one symbol.  ``memo``/``keep`` (see :func:`_fold`) may be
    shared by calls with the same ``counted``: a node's estimate here depends on it alone."""
    if memo is None:
        memo, keep = {}, None
    elif keep is None:
        raise ValueError("_node_estimate: a shared memo needs its keep list")
    return _node_fold(node, counted, memo, keep)


def _node_fold(root: Node, counted: bool, memo: dict[int, Estimate], keep: list | None) -> Estimate:
    """``_fold(root, lambda r: _ONE, memo, ..., cacheable=lambda: True, counted, keep)``: the
    same estimates and memo (``keep`` holds the same nodes), without the inlining machinery
    (every Ref is one symbol, every other node is memoized)."""
    if root.__class__ is Ref:
        return _ONE
    hit = memo.get(id(root))
    if hit is not None:
        return hit
    if keep is None:
        keep = []
    # a node, or ``(node, children)`` once they are pushed (then they are memoized, but Refs):
    # each node is expanded once, as the IR below a node (Refs not followed) cannot hold it
    # (:func:`children` and a literal's :func:`_leaf` inlined: this runs once per node)
    stack: list = [root]
    pop = stack.pop
    push = stack.append
    kept = keep.append
    lits = _LIT_SHARED
    while stack:
        n = pop()
        cls = n.__class__
        if cls is tuple:
            n, kids = n
            memo[id(n)] = _combine(n, [_ONE if k.__class__ is Ref else memo[id(k)] for k in kids], counted)
            kept(n)
            continue
        i = id(n)
        if i in memo:
            continue
        if cls is Seq or cls is Choice or cls is Inter:
            kids = n.items  # type: ignore[union-attr]
        elif cls is Repeat:
            kids = (n.item,)  # type: ignore[union-attr]
        elif cls is Diff:
            kids = (n.base, n.minus)  # type: ignore[union-attr]
        else:
            if cls is Lit and n.data:  # type: ignore[union-attr]
                data = n.data  # type: ignore[union-attr]
                e = lits.get(len(data) << 8 | data[0])
                memo[i] = e if e is not None else _leaf(n)
            else:
                memo[i] = _leaf(n)
            kept(n)
            continue
        if not kids:
            memo[i] = _leaf(n)
            kept(n)
            continue
        # the children that are leaves (no children: not a Seq, Choice, Repeat, Inter or Diff)
        # are estimated here; when every child is then known, so is ``n`` (no frame pushed)
        ests: list | None = []  # the children's estimates while all are known
        for k in kids:
            kc = k.__class__
            if kc is Ref:
                if ests is not None:
                    ests.append(_ONE)
                continue
            j = id(k)
            e = memo.get(j)
            if e is None:
                if kc is Seq or kc is Choice or kc is Repeat or kc is Inter or kc is Diff:
                    ests = None
                    continue
                if kc is Lit and k.data:  # type: ignore[union-attr]
                    data = k.data  # type: ignore[union-attr]
                    e = lits.get(len(data) << 8 | data[0])
                    if e is None:
                        e = _leaf(k)
                else:
                    e = _leaf(k)
                memo[j] = e
                kept(k)
            if ests is not None:
                ests.append(e)
        if ests is not None:
            memo[i] = _combine(n, ests, counted)
            kept(n)
            continue
        push((n, kids))
        for k in reversed(kids):
            if k.__class__ is not Ref and id(k) not in memo:
                push(k)
    return memo[id(root)]


def node_size(node: Node, *, counted: bool = False) -> int:
    """Rough NFA-state count of ``node`` with each Ref counted as one symbol (a call of the
    pushdown back-end)."""
    return _node_estimate(node, counted).states


def node_work(node: Node, *, counted: bool = False) -> int:
    """Subset-construction work estimate of ``node`` alone (see :func:`estimate_work`), each
    Ref counted as one symbol, like :func:`node_size`."""
    return _node_estimate(node, counted).work


#: the largest copy factor a recursive rule's estimate is multiplied by (past every limit)
_MAX_COPIES = 10 ** 9


class _Inline:
    """Refs expanded; a rule referred to from inside itself ``k`` times (distinct Ref nodes
    reached while its body is folded) counts as the ``1 + k + ... + k**(max_depth - 1)``
    copies the unrolling makes: ``max_depth`` when ``k`` is 1, exponential above (a
    JSONSchemaProps-like rule referring to itself 14 times made an NFA of over 2M states
    where a linear count said 300k)."""

    def __init__(self, g: Grammar, counted: bool = False,
                 seed: Callable[[int], Estimate | None] | None = None) -> None:
        self.g = g
        self.counted = counted
        self.seed = seed
        self.memo: dict[int, Estimate] = {}
        self.rule: dict[str, Estimate] = {}
        self.active: list[str] = []
        self.active_set: set[str] = set()
        self.recursive: dict[str, int] = {}  # rule -> references to it from inside itself
        #: (estimate, rule) of every rule, in the order their estimates completed
        self.done: list[tuple[str, Estimate]] = []

    def ref(self, r: Ref) -> Estimate | None:
        if r.name in self.active_set:
            self.recursive[r.name] = self.recursive.get(r.name, 0) + 1
            return _ZERO
        return self.rule.get(r.name)

    def enter(self, r: Ref) -> Node:
        self.active.append(r.name)
        self.active_set.add(r.name)
        return self.g.rule(r.name)

    def leave(self, r: Ref, body: Estimate) -> Estimate:
        self.active.pop()
        self.active_set.discard(r.name)
        k = self.recursive.get(r.name, 0)
        if k:  # unrolled max_depth deep, k copies per level, and of unbounded length
            d = self.g.max_depth
            copies = d if k == 1 else min(_MAX_COPIES, (k ** min(d, 64) - 1) // (k - 1))
            body = Estimate(body.states * copies, body.lo, None, body.work * copies)  # amb unknown: False
        self.rule[r.name] = body
        self.done.append((r.name, body))
        return body

    def run(self) -> Estimate:
        start = self.g.start
        if INLINE_FAST:
            est = self._fold(self.g.rule(start))
        else:
            est = _fold(self.g.rule(start), self.ref, self.memo, self.enter, self.leave,
                        lambda: not self.active_set, self.counted, seed=self.seed)
        self.done.append((start, est))
        return est

    def _fold(self, root: Node) -> Estimate:
        """``_fold(root, self.ref, self.memo, self.enter, self.leave, lambda: not
        self.active_set, self.counted, seed=self.seed)``: the same estimates, memo, rules
        entered and left in the same order (children left to right, depth first), without
        the generic fold's callbacks and value stacks: each frame walks its children in
        order, and a child known at once (a memo hit, a literal, a seed, a leaf, a Ref whose
        rule is done or active) is read in that frame's loop."""
        memo = self.memo
        seed = self.seed
        counted = self.counted
        rule_est = self.rule
        active = self.active_set
        recursive = self.recursive
        ref_free = CACHE_REF_FREE
        lits = _LIT_SHARED
        with_refs: set[int] = set()  # memoized nodes (this call) whose subtree holds a Ref
        # the frame now: its node (None: the root's pseudo-frame; a Ref: a rule body's), its
        # children, the next child's index, the children's estimates so far, whether one
        # of them holds a Ref; the parents' frames are on ``frames``
        frames: list[tuple] = []
        node: Node | None = None
        kids: tuple = (root,)
        i = 0
        ests: list[Estimate] = []
        dep = False
        while True:
            if i < len(kids):
                k = kids[i]
                i += 1
                cls = k.__class__
                if cls is Ref:
                    name = k.name  # type: ignore[union-attr]
                    if name in active:
                        recursive[name] = recursive.get(name, 0) + 1
                        ests.append(_ZERO)
                        dep = True
                        continue
                    e = rule_est.get(name)
                    if e is not None:
                        ests.append(e)
                        dep = True
                        continue
                    frames.append((node, kids, i, ests, dep))
                    node, kids, i, ests, dep = k, (self.enter(k),), 0, [], False  # type: ignore[arg-type]
                    continue
                j = id(k)
                e = memo.get(j)
                if e is not None:
                    ests.append(e)
                    if j in with_refs:
                        dep = True
                    continue
                if cls is Lit and k.data:  # type: ignore[union-attr]
                    data = k.data  # type: ignore[union-attr]
                    e = lits.get(len(data) << 8 | data[0])
                    if e is not None:
                        memo[j] = e
                        ests.append(e)
                        continue
                if seed is not None:
                    e = seed(j)
                    if e is not None:
                        ests.append(e)
                        continue
                if cls is Seq or cls is Choice or cls is Inter:
                    sub = k.items  # type: ignore[union-attr]
                elif cls is Repeat:
                    sub = (k.item,)  # type: ignore[union-attr]
                elif cls is Diff:
                    sub = (k.base, k.minus)  # type: ignore[union-attr]
                else:
                    sub = ()
                if not sub:
                    e = memo[j] = _leaf(k)
                    ests.append(e)
                    continue
                frames.append((node, kids, i, ests, dep))
                node, kids, i, ests, dep = k, sub, 0, [], False
                continue
            # every child of this frame is estimated
            if node is None:
                return ests[0]
            if node.__class__ is Ref:
                est = self.leave(node, ests[0])  # type: ignore[arg-type]
                d = True
            else:
                est = _combine(node, ests, counted)
                d = dep
                if (not d and ref_free) or not active:
                    memo[id(node)] = est
                    if d:
                        with_refs.add(id(node))
            node, kids, i, ests, dep = frames.pop()
            ests.append(est)
            if d:
                dep = True


def estimate_size(g: Grammar, *, inline: bool = True) -> int:
    """Rough NFA-state count of ``g`` for the explicit DFA back-end: refs expanded, a
    recursive rule counted ``max_depth`` times.  With ``inline=False``: the largest single
    rule (:func:`node_size`, the pushdown back-end's per-rule automata).  Used to fail fast
    or to choose a back-end instead of compiling for long."""
    if not inline:
        return max(node_size(node) for _, node in g.rules)
    return _Inline(g).run().states


def estimate_work(g: Grammar, *, inline: bool = True) -> int:
    """Rough subset-construction work of ``g`` (see the module docstring): refs expanded,
    or with ``inline=False`` the largest single rule's."""
    if not inline:
        return max(_node_estimate(node).work for _, node in g.rules)
    return _Inline(g).run().work


#: subtree estimates a front-end made of a grammar's nodes (:func:`attach_estimates`), by
#: ``id`` of the grammar: (weak reference to it, memos by ``counted``, what keeps their nodes)
_ATTACHED: dict[int, tuple[weakref.ref, dict[bool, dict[int, Estimate]], object]] = {}


def attach_estimates(g: Grammar, memos: dict[bool, dict[int, Estimate]], keep: object) -> None:
    """Let :func:`check_size` of ``g`` (and, while none is attached to them, of the grammars
    made of its nodes: the pushdown back-end's, rule by rule) reuse the estimates a
    front-end made while building it:
    ``memos[counted]`` maps node ids to their estimates with Refs as one symbol
    (:func:`_node_estimate`'s memo with that ``counted``); ``keep`` holds every node they
    name alive (so no id names another node while they are attached).  The estimates of the
    Ref-free nodes are the same wherever the nodes are (inlined or not), and one made with
    ``counted=True`` is the uncounted one where no repetition in it was counted
    (``Estimate.cut``): what check_size computes is unchanged, only walks fewer nodes.
    Held until :func:`release_estimates` or until ``g`` is freed."""
    key = id(g)
    ref = weakref.ref(g, lambda _r, key=key: _ATTACHED.pop(key, None))
    _ATTACHED[key] = (ref, memos, keep)


def release_estimates(g: Grammar) -> None:
    """Drop what :func:`attach_estimates` attached to ``g`` (nothing if none)."""
    hit = _ATTACHED.get(id(g))
    if hit is not None and hit[0]() is g:
        _ATTACHED.pop(id(g), None)


def attached_nodes(g: Grammar) -> list | None:
    """The nodes whose estimates are attached to ``g`` (:func:`attach_estimates`): ``keep``
    when it is a list of node lists (what :func:`_node_fold` keeps: each node after every
    child it has in its list), else None; None when none is attached.  (The digest writes
    their texts in that order, :func:`decoding.ir.key.grammar_digest`.)"""
    hit = _ATTACHED.get(id(g))
    if hit is None or hit[0]() is not g:
        return None
    keep = hit[2]
    return keep if isinstance(keep, list) and all(isinstance(k, list) for k in keep) else None


def _attached(g: Grammar, counted: bool, inline: bool) -> Callable[[int], Estimate | None] | None:
    """The seed (see :func:`_fold`) of ``g``'s attached estimates for ``counted``: with
    ``inline``, only those of Ref-free nodes; None when none is attached."""
    hit = _ATTACHED.get(id(g))
    if hit is None or hit[0]() is not g:
        return None
    return _seed([hit], counted, inline)


#: :func:`_any_attached` reads the estimates of at most this many grammars (the latest attached)
ANY_ATTACHED_MAX = 4


def _any_attached(counted: bool, inline: bool) -> Callable[[int], Estimate | None] | None:
    """The seed of the estimates attached to the grammars attached last (None when none is):
    a node's estimate is the same in every grammar (Ref-free, or Refs as one symbol without
    ``inline``), so a grammar made of a front-end's nodes (the pushdown back-end's, rule by
    rule) reads those of its nodes the front-end estimated."""
    hits = [h for h in list(_ATTACHED.values())[-ANY_ATTACHED_MAX:] if h[0]() is not None]
    return _seed(hits, counted, inline) if hits else None


def _seed(hits: list, counted: bool, inline: bool) -> Callable[[int], Estimate | None]:
    """The seed of attached estimates ``hits`` (entries of :data:`_ATTACHED`)."""
    memos = [(h[1].get(counted), None if counted else h[1].get(True)) for h in hits]  # (counted where nothing was)

    def seed(i: int) -> Estimate | None:
        for same, other in memos:
            e = same.get(i) if same is not None else None
            if e is not None and not (inline and e.refs):
                return e
            e = other.get(i) if other is not None else None
            if e is not None and not (inline and e.refs) and not e.cut:
                return e
        return None
    seed.keep = [h[2] for h in hits]  # type: ignore[attr-defined]  # (the nodes stay alive while it is used)
    return seed


def check_size(g: Grammar, limits: Limits = DEFAULT_LIMITS, *, inline: bool = True,
               where: str = "", counted: bool = False) -> Estimate:
    """Raise :class:`LimitError` when ``g`` is estimated above ``limits.max_nfa_states``
    NFA states or ``limits.max_compile_work`` subset-construction work, naming the first
    rule (in the order estimates complete, so the innermost culprit) whose estimate is
    over.  ``inline=False`` checks each rule alone (the pushdown back-end; many small rules
    together are bounded by the ``max_compile_seconds`` deadline instead: a sum over rules
    refused 16 JSONSchemaBench schemas that compile in 3-6 s).  ``where``
    prefixes the message (a source name).  Returns the whole grammar's estimate."""
    prefix = f"{where}: " if where else ""
    seed = _attached(g, counted, inline) or _any_attached(counted, inline)
    if inline:
        ev = _Inline(g, counted, seed)
        total = ev.run()
        rules = ev.done
        if not counted:
            _remember_rules(g, rules)
    elif seed is not None:
        memo: dict[int, Estimate] = {}  # (a node's estimate with Refs as one symbol: the same in every rule)
        rules = [(name, _fold(node, lambda r: _ONE, memo, lambda r: None, lambda r, e: e, lambda: True, counted,
                              None, seed)) for name, node in g.rules]
    else:
        rules = [(name, _node_estimate(node, counted)) for name, node in g.rules]
    if not inline:
        total = max((e for _, e in rules), key=lambda e: e.states)
    if not limits.refuse_on_estimates:
        return total  # (the build is tried: only the bounds met while building hold)
    for name, e in rules:
        if e.states > limits.max_nfa_states:
            raise LimitError(f"{prefix}rule '{name}': expands to about {e.states} automaton states "
                             f"(limit max_nfa_states={limits.max_nfa_states}); bound fewer "
                             "repetitions or lower the recursion depth", limit="max_nfa_states",
                             value=e.states, estimated=True)
        if e.work > limits.max_compile_work:
            raise LimitError(f"{prefix}rule '{name}': a repetition of a variable-length item costs "
                             f"about {e.work} steps to determinise (limit max_compile_work="
                             f"{limits.max_compile_work}); bound fewer repetitions", limit="max_compile_work",
                             value=e.work, estimated=True)
    return total


#: the per-rule estimates (refs expanded, not counted) of the grammars estimated last, by ``id``:
#: (weak reference to the grammar, {rule: estimate}); see :func:`rule_estimates`
_RULES: dict[int, tuple[weakref.ref, dict[str, Estimate]]] = {}
#: :data:`_RULES` keeps those of at most this many grammars (the latest)
RULES_MAX = 4


def _remember_rules(g: Grammar, done: list[tuple[str, Estimate]]) -> dict[str, Estimate]:
    out = dict(done)
    key = id(g)
    _RULES.pop(key, None)
    while len(_RULES) >= RULES_MAX:
        _RULES.pop(next(iter(_RULES)))
    _RULES[key] = (weakref.ref(g, lambda _r, key=key: _RULES.pop(key, None)), out)
    return out


def rule_estimates(g: Grammar) -> dict[str, Estimate]:
    """The estimate of every rule reachable from ``g``'s start, refs expanded (what
    :func:`check_size` estimates with ``inline=True``, ``counted=False``: a recursive rule
    counted as its unrolled copies): the start rule's is the whole grammar's.  Read from
    the last :func:`check_size` of ``g`` when there was one (the explicit DFA back-end asks
    right after the back-end selection estimated the grammar), else estimated now."""
    hit = _RULES.get(id(g))
    if hit is not None and hit[0]() is g:
        return hit[1]
    ev = _Inline(g, False, _attached(g, False, True) or _any_attached(False, True))
    ev.run()
    return _remember_rules(g, ev.done)
