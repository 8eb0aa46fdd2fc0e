"""Counted repetition: a bounded loop with a large count (``maxLength: 131072``,
``maxItems: 100000``, ``minLength: 5000``) compiled with a counter instead of unrolled.

The explicit byte DFA of ``U{m,n}`` has about ``n`` copies of ``U``.  Here a *middle*, a
plain ``U*`` loop, is followed by ``K`` explicit copies, and a counter says when the middle
has done its number of units ``X``:

- need part ``U{m}`` (``m > K+1``): ``<en> U* <tp> U{K}``, the middle does exactly
  ``X = m - K`` units and has no exit;
- room part ``U{0,r}`` (``r > K+1``): ``<en> U* (<tp> U{0,K})?``, the middle does at most
  ``X = r - K`` units and may exit after any of them.  Outside ``Inter``/``Diff`` products
  the tail is shorter: ``T = min(K, tail_for(vocab))`` units (``<en> U* (<tp> U{0,T})?``,
  ``X = r - T``), counted when ``r > T+1`` (see "Short tails" and "Medium loops" below).

``<en>`` and ``<tp>`` are marker symbols no token spells.  ``K`` is one more than the most
units one token can hold (units are at least one byte: the longest token's length + 1).

Why the masks stay exact (the invariant everything rests on): a token completes at most
``K - 1`` units, so from anywhere in a middle it can never reach the end of the ``K``
explicit units after ``<tp>``.  The mask of a middle state therefore does not depend on the
counter: it is the mask of the same state with ``<tp>`` removed (no token crosses it) and
``<en>`` made transparent (the row of a state with an ``<en>`` move is its own row merged with
the middle's first row, so a token goes on into the middle).
The masks come from one ordinary :class:`~decoding.backends.dfa.index.DFAGrammar` over that
table, memoized per state, with the plain-text shortcut for string bodies.

Short tails (room loops outside products): the explicit part is what makes the automaton big
(``T`` copies of the unit per loop and per place the loop occurs: a JSON string character is
14 states, so with ``K`` = 129 each ``maxLength`` string above 130 cost ~1,800 states, and the
ones up to 130 were unrolled).  With ``T < K`` a token of at most ``T - 1`` bytes still never
tells the counter, as above.  A *long* token (more bytes) read in middle state ``s`` with ``c``
units started starts ``u`` units before it leaves the middle (``u`` at most its bytes); it is
allowed by the mask automaton's ``U*`` and really allowed exactly when ``c + u <= X + T`` (it
ends in the middle or in the explicit tail, with the same bytes allowed as in ``U*``).  That
can fail only when ``c > X + T - M`` (``M = K - 1``, the longest token): in those states (the
last ``M - T`` units of the middle) :meth:`CountedGrammar.mask` removes the long tokens with
``u > X + T - c`` (``u`` found by stepping each long token of more bytes than that, once per
state; the units come from a table per unit and vocabulary, :class:`_UnitWalk`, where the
state's place in the unit is known).  A long token that enters the middle through ``<en>``
starts at most ``M`` units there, so with ``r >= M`` it always fits.  Need loops and product
loops keep ``T = K``.

Medium loops (room loops outside products with ``T + 1 < r < M``: ``maxLength`` 18..127 on
llama-bpe, where ``M`` = 128 and ``T`` = 16).  With ``r < M`` a long token can also overrun
the loop after it *crosses* ``<en>`` (``c`` = 0 there), at its first byte or anywhere inside
it (after ``", "`` or a few units of a ``minLength``).  The invariant that keeps the masks exact: the
mask automaton reads ``U*`` where the real loop allows ``r`` units, and a token it allows is
really allowed exactly when, in each stretch of the token inside the loop (from the state it
starts in, with ``c`` units done, or from an ``<en>`` it crosses, with 0), it starts at most
``r - c`` units (the units counted as in "Short tails": a middle state holds one thread of
``U*``, the unit walk).  After the loop is left the rest of the token reads the same states
either way (the tail and the middle leave to the same states), so each stretch is checked on
its own and a wrongly allowed token is exactly one with an overrunning stretch.  The first
stretch is the near-end check above (a medium loop's whole middle is "near the end"); the
others are :meth:`CountedGrammar._cross_bad`, per DFA state (independent of ``c``: a crossing
resets the counter), and they are removed from that state's mask:

- at an ``<en>`` state of a medium loop, the long tokens whose first byte takes ``<en>`` (its
  own row has no move for it; following a chain of ``<en>`` of adjacent nullable loops) into
  loop ``k`` and that start more than ``r_k`` units from the unit's start (``zero``, from the
  unit walk's table: vectorised, no stepping);
- a crossing at offset ``i >= 1`` needs the byte before it to lead to an ``<en>`` state of the
  loop (``before``: the byte classes with a move into one, from one read of the table at
  compile time) and the suffix from ``i`` to start more than ``r_k`` units: the tokens with
  such a suffix (``yids``, with their largest such ``i``) are stepped exactly (``_run``) in
  the states at most that many bytes before an ``<en>`` (``dist``, a reverse search, made
  only when there is such a token).  On llama-bpe (``T`` = 16) a JSON string's set holds one
  token for ``maxLength`` 18..33 and none above: ``zero`` does most of the work.

Costs: the cost graph leaves out, in each state, the tokens :meth:`CountedGrammar._cross_bad`
removes there (really forbidden), so the costs stay as exact as they were.

Stepping is exact: a state is ``(dfa state, units started in the current middle)``.  In a
state with an ``<en>`` move, a byte its own row does not have takes ``<en>`` first (counter
0; again while the state reached has an ``<en>`` move and no move for it: adjacent nullable
loops, whose merged mask rows follow the same chain); in a state with a ``<tp>`` move (a unit is complete), a byte that starts a unit either
counts it or, when ``X`` units are done, takes ``<tp>`` first.  A unit qualifies only when that is unambiguous: it is not nullable, no byte
that starts a unit can extend a complete one, and (checked on the built automaton) a unit
once started can only leave the middle by completing.  Otherwise the loop is left as it was.
One table serves both: the steps read the mask table's rows, except in the (few) states with
an ``<en>`` move, whose own rows are kept apart (``CountedGrammar.dfa`` rebuilds the automaton
with its marker columns: the same table).
A unit may hold ``Dfa`` leaves (a long enum): they are regular and hold no special.  When a
loop is counted, the smaller repetitions (``SMALL_AS_LEAF`` copies or more, or unbounded) of
items that qualify as units get the unit's minimal automaton as their item: the same
language, a few NFA states per copy (Snowplow's ``maxLength: 128`` strings next to counted
ones: 9,220 estimated NFA states each before, 1,922 now).

Budgets: ``completion_cost`` is the fewest tokens outside need middles and an upper bound
inside them: costs over the token graph with ``<en>`` free, ``<tp>`` of a room middle free
and ``<tp>`` of a need middle weighing ``f(X)``, where ``f(r)`` is the cost of a real way to
write ``r`` units (``r // P`` tokens of the most units one token takes, then a fewest-coins
table); with ``c`` units done the middle costs ``f(X - c)`` instead.  In a room middle with a
short tail the token graph leaves out the long tokens (which a state near the end may not
allow), so there the cost is an upper bound too: the fewest tokens of at most ``T - 1``
bytes, every one of them allowed at any count.  ``successor_costs`` gives exactly the
``completion_cost`` of the state each token leads to.

Intersections and differences (``maxLength`` with a ``pattern`` or ``format``): in an
``Inter`` one operand may hold room loops (``U{0,r}``); it is rewritten with its markers and
the other operands (a ``Diff``'s ``minus``) ignore them (a marker leaves their state as it
is), so the product automaton is ``P x (counted loop)``.  It is built here, embedded where the
node was, and checked: from every complete unit ``h`` with a ``<tp>`` move, ``h`` and the
state ``<tp>`` leads to, read in lockstep until the explicit part has started ``K - 1``
units, must allow the same bytes and leave the loop to the same states (:func:`_mirrors_agree`).
That is what one token can observe of the counter, so the masks stay exact; when ``P``
needs a few units to finish (an e-mail address still without its ``@``), the explicit part
is made longer (``K + extra`` copies) until the check passes, else the node is left as it was.
Need loops are not counted inside a product (their cost bound assumes the loop returns to
the state it started from, which ``P`` may not).

Artifacts hold explicit DFAs only: a counted grammar is not written to one (ArtifactError).
"""

from __future__ import annotations

import heapq
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from decoding import _native
from decoding.backends import automaton as _automaton
from decoding.backends.automaton import DFA, compile_dfa, dfa_leaf, regular_dfa
from decoding.backends.contract import COST_UNREACHABLE, EOG, FORBIDDEN, worst_text_cost
from decoding.backends.dfa.index import DFAGrammar
from decoding.backends.masks import DEFAULT_MAX_MASKS
from decoding.errors import GrammarError, LimitError
from decoding.ir import EMPTY, ByteSet, Choice, Dfa, Diff, Grammar, Inter, Lit, Node, Ref, Repeat, Seq, Special
from decoding.ir.productive import find_empty, known_productive
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.vocab import Vocab
from decoding.weakmemo import WeakMemo

__all__ = ["CountedGrammar", "Loop", "compile_counted", "counted_program", "rewrite", "room_tail", "window"]

MARK = "\x00count\x00"
#: states of the largest unit DFA checked (a bigger unit is left unrolled)
MAX_UNIT_STATES = 4096
#: a repetition too small to count, of at least this many copies (or unbounded), of an item
#: that qualifies as a unit is rewritten with the unit's minimal automaton as its item (same
#: language): a JSON string character is about 15 automaton states instead of ~70 NFA states
#: of IR, so the counted grammar's NFA, its estimate and its build are smaller
SMALL_AS_LEAF = 8
#: the counted form is tried only when its estimate (NFA states) is at most this; larger
#: grammars go to the other back-ends at once.  (Snowplow sp_137: estimated 230,614 with
#: ``TAIL`` = 33, a subset construction of 179,564 states minimised to 47,451 in 1.9 s, where
#: the pushdown back-end takes about 0.6 s; a counted form too large to build stops at
#: ``Limits.max_subset_bytes``, about 1 s)
COUNTED_AT_MOST = 200_000
#: explicit units added after ``K`` in a product's loop, tried in order (see the module
#: docstring: the other operand may need a few units to finish)
PRODUCT_EXTRA = (0, 16)
#: states of the largest product automaton built, and the most state pairs of its operands
#: (a larger one leaves the node as it was, without trying a longer explicit part)
MAX_PRODUCT_STATES = 50_000
MAX_PRODUCT_PAIRS = 400_000
#: explicit units after a room middle outside products (``T``; ``K`` when smaller): a token of
#: more than ``T - 1`` bytes (a *long* token) could tell the counter in the last ``M - T``
#: units of the middle (``M``: the longest token's bytes), so there its mask bit is checked
#: (:meth:`CountedGrammar.mask`); a room part of fewer than ``M`` units (a medium loop) is
#: counted too, the long tokens that overrun it after its ``<en>`` masked off (module
#: docstring, "Medium loops").  None: per vocabulary, :func:`tail_for` (the shortest tail
#: that leaves at most :data:`LONG_TOKENS_MAX` long tokens); an int: that tail (tests).
#: The explicit tails are most of a counted automaton's states (T copies of the unit per
#: loop and per place: a JSON string character is ~14 states), while what a short tail costs
#: is the long tokens' checks near the end of a middle (vectorised over the long tokens).
#: llama-bpe: ``M`` = 128; 16 units (1,591 long tokens) instead of a fixed 33 (231):
#: Snowplow sp_338 40,569 -> 22,846 states
TAIL: int | None = None
#: :func:`tail_for`'s bound on the long tokens (more than ``T - 1`` bytes) of a vocabulary
LONG_TOKENS_MAX = 2_000
#: the shortest tail :func:`tail_for` picks (below it almost every token is long)
MIN_TAIL = 9
_NO_IDS = np.zeros(0, dtype=np.int64)
_NO_IDS.setflags(write=False)


def window(vocab: Vocab) -> int:
    """``K``: one more than the most bytes (hence units) of one token."""
    return vocab.max_token_bytes + 1


def _tail_of(vocab: Vocab) -> int:
    _, off = vocab.blob()
    lens = np.sort((off[1:] - off[:-1]).astype(np.int64))
    t, k = MIN_TAIL, window(vocab)
    # the tokens of at least t bytes: len(lens) - (the index of the first length >= t)
    while t < k and len(lens) - int(np.searchsorted(lens, t, side="left")) > LONG_TOKENS_MAX:
        t += 1
    return min(t, k)


_TAILS: WeakMemo = WeakMemo(_tail_of)


def tail_for(vocab: Vocab) -> int:
    """The explicit units after a room middle for ``vocab`` (:data:`TAIL` when set): the
    smallest ``T >= MIN_TAIL`` such that at most :data:`LONG_TOKENS_MAX` tokens have more than
    ``T - 1`` bytes, and at most ``K`` (the window; memoized per vocabulary)."""
    return TAIL if TAIL is not None else _TAILS(vocab)


@dataclass(frozen=True)
class Loop:
    """One counted middle: ``X`` units exactly (``need``) or at most (room)."""
    index: int
    x: int
    need: bool
    first: frozenset  # bytes a unit starts with
    unit: Dfa | None = None  # the unit's minimal automaton (prefix-free: accepting states are final)
    product: bool = False  # the loop is inside an Inter/Diff product (checked by _mirrors_agree)
    tail: int = 0  # explicit units after <tp> (a need loop: exactly; room: at most); 0: the window K

    @property
    def en(self) -> str:
        return f"{MARK}en{self.index}"

    @property
    def tp(self) -> str:
        return f"{MARK}tp{self.index}"


# ----------------------------------------------------------------------------- IR rewrite

def rewrite(grammar: Grammar, k: int, *, limits: Limits | None = None,
            tail: int | None = None) -> tuple[Grammar, tuple[Loop, ...]]:
    """``grammar`` with every qualifying large ``Repeat`` turned into a counted middle (see the
    module docstring); the loops made.  An ``Inter``/``Diff`` whose loops are counted becomes a
    placeholder special naming its product automaton (see :func:`rewrite_products`).
    ``tail``: the explicit units after a room middle outside products (:data:`TAIL`; None: ``k``)."""
    g2, loops, _ = rewrite_products(grammar, k, limits=limits, tail=tail)
    return g2, loops


def rewrite_products(grammar: Grammar, k: int, *, limits: Limits | None = None, tail: int | None = None
                     ) -> tuple[Grammar, tuple[Loop, ...], dict[str, DFA]]:
    """:func:`rewrite`, and the product automata (with marker columns) of the ``Inter``/``Diff``
    nodes counted, by the placeholder special that stands for each in the grammar."""
    tail = k if tail is None else max(2, min(tail, k))  # (a byte is a token of at most T - 1 bytes)
    if not _has_big_repeat(grammar, k, tail):
        return grammar, (), {}  # nothing to count: the walk below would find no loop
    loops: list[Loop] = []
    products: dict[str, DFA] = {}
    units: dict[_Key, tuple[frozenset, Dfa] | None] = {}
    sizes: tuple[dict, list] = ({}, [])  # _small_item's estimates, one per subtree

    by_id: dict[tuple[int, int], tuple[Node, object]] = {}  # (what, id) -> (node, result): no hash
    keys: dict[int, _Key] = {}  # id -> the node's key (the node kept alive by it): one hash per node

    def key_of(x: Node) -> _Key:
        hit = keys.get(id(x))
        if hit is None or hit.node is not x:
            hit = keys[id(x)] = _Key(x)
        return hit

    def unit_first(item: Node) -> tuple[frozenset, Dfa] | None:
        hit = by_id.get((0, id(item)))
        if hit is not None and hit[0] is item:
            return hit[1]  # type: ignore[return-value]
        ik = key_of(item)
        out = units.get(ik, _MISS)
        if out is _MISS:
            out = units[ik] = _unit(item, grammar, limits)
        by_id[(0, id(item))] = (item, out)
        return out  # type: ignore[return-value]

    rewritten: dict[tuple[int, int, bool], Node] = {}  # unmarked results by subtree (grammar nodes stay alive)
    # counted results by repetition (equal, not only identical: the same string schema in two
    # anyOf branches): equal repetitions share one loop, as one rule called from two places
    # does.  Exact: a marker symbol kills every NFA thread that cannot read it, so the threads
    # in one DFA state all took the loop's last ``<en>`` together and have counted the same
    # units (two loops entered from one state would be refused by _assemble instead).  Not
    # inside a product, whose loops are numbered and discarded per try
    same: dict[_Key, Node] = {}  # by the key of (repetition, window)

    def go(n: Node, kk: int, in_product: bool) -> tuple[Node, bool]:
        """(``n`` rewritten with window ``kk``, whether it now holds a marker).  A subtree
        shared by several parents is rewritten once when the result holds no marker (a
        marked result is rebuilt: each occurrence of a counted loop gets its own counter)."""
        cls = n.__class__
        if cls in _LEAVES:
            return n, False  # (nothing to rewrite below a leaf)
        key = (id(n), kk, in_product)
        hit = rewritten.get(key)
        if hit is not None:
            return hit, False
        out = _go(n, kk, in_product)
        if not out[1]:
            rewritten[key] = out[0]
        return out

    def _go(n: Node, kk: int, in_product: bool) -> tuple[Node, bool]:
        cls = n.__class__
        if cls is Seq or cls is Choice:
            old = n.items  # type: ignore[union-attr]
            items = []
            marked, same_all = False, True
            for x in old:  # (go's two first answers read here: a leaf, a shared unmarked result)
                if x.__class__ in _LEAVES:
                    items.append(x)
                    continue
                y = rewritten.get((id(x), kk, in_product))
                if y is None:
                    y, m = go(x, kk, in_product)
                    marked = marked or m
                items.append(y)
                same_all = same_all and y is x
            # (a rewritten node is never equal to the one it replaces: it holds a marker, a unit
            # leaf or a product's placeholder where that one holds none)
            return (n if same_all else cls(tuple(items))), marked
        if isinstance(n, (Inter, Diff)):
            return (n, False) if in_product else product(n)
        if not isinstance(n, Repeat):
            return n, False
        item, marked = go(n.item, kk, in_product)
        lo, hi = n.min, n.max
        big_need = lo > kk + 1
        tt = kk if in_product else tail  # a product's loops keep the whole window (see _mirrors_agree)
        big_room = hi is not None and hi - lo > tt + 1  # (a product's: above K + 1)
        if not (big_need or big_room) or marked or (in_product and big_need):
            if not marked and (hi is None or hi >= SMALL_AS_LEAF) and _small_item(item, sizes):
                found = unit_first(item)  # the same language with a few NFA states per copy
                if found is not None:
                    return Repeat(found[1], lo, hi), False
            return (n if item is n.item else Repeat(item, lo, hi)), marked
        if not in_product:
            hit = by_id.get((kk, id(n)))
            if hit is not None and hit[0] is n:
                return hit[1], True  # type: ignore[return-value]
            rk = _Key((n, kk), hash((key_of(n.item).h, n.min, n.max, kk)))
            hit2 = same.get(rk)
            if hit2 is not None:
                return hit2, True
        found = unit_first(item)
        if found is None:
            return (n if item is n.item else Repeat(item, lo, hi)), False
        first, item = found  # the unit as its minimal automaton: a few NFA states per copy
        parts: list[Node] = []
        if big_need:
            lp = Loop(len(loops), lo - kk, True, first, item, tail=kk)
            loops.append(lp)
            parts += [Special(lp.en), Repeat(item, 0, None), Special(lp.tp), Repeat(item, kk, kk)]
        elif lo:
            parts.append(Repeat(item, lo, lo))
        if hi is None:
            parts.append(Repeat(item, 0, None))
        elif big_room:
            lp = Loop(len(loops), hi - lo - tt, False, first, item, product=in_product, tail=tt)
            loops.append(lp)
            parts += [Special(lp.en), Repeat(item, 0, None), Choice((Seq((Special(lp.tp), Repeat(item, 0, tt))), EMPTY))]
        elif hi > lo:
            parts.append(Repeat(item, 0, hi - lo))
        out = Seq(tuple(parts))
        if not in_product:
            same[rk] = out
            by_id[(kk, id(n))] = (n, out)
        return out, True

    def product(n: Inter | Diff) -> tuple[Node, bool]:
        """A placeholder for ``n``'s counted product automaton, or ``n`` when none passes."""
        operands = n.items if isinstance(n, Inter) else (n.base,)
        for i, op in enumerate(operands):
            for extra in PRODUCT_EXTRA:
                mark = len(loops)
                op2, marked = go(op, k + extra, True)
                if not marked:
                    break  # nothing to count in this operand
                try:
                    built = _product_dfa(n, i, op2, tuple(loops[mark:]), k, limits)
                except (LimitError, GrammarError):
                    del loops[mark:]
                    break  # too large or empty: a longer explicit part would not help
                if built is not None:
                    name = f"{MARK}and{len(products)}"
                    products[name] = built
                    return Special(name), True
                del loops[mark:]
        return n, False

    rules = tuple((name, go(node, k, False)[0]) for name, node in grammar.rules)
    if not loops:
        return grammar, (), {}
    return Grammar(grammar.start, rules, grammar.max_depth), tuple(loops), products


class _Key:
    """A node (or a tuple of nodes and numbers) as a dict key: structural equality, the hash
    computed once (a node's hash walks its whole subtree on every call).  ``h``: any hash
    that equal values share (given: built from the keys of the parts)."""

    __slots__ = ("node", "h")

    def __init__(self, node: object, h: int | None = None) -> None:
        self.node = node
        self.h = hash(node) if h is None else h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Key) and self.h == other.h and
                                 (self.node is other.node or self.node == other.node))


#: IR leaves: :func:`rewrite_products` returns them as they are
_LEAVES = frozenset({Lit, ByteSet, Ref, Special, Dfa})


def _with_start(grammar: Grammar, name: str, item: Node) -> Grammar:
    """The grammar whose start rule ``name`` is ``item``, with the rules of ``grammar`` that
    ``item`` reaches (only those: a Grammar walks every rule it holds when built)."""
    from decoding.ir import reachable_rules

    need = reachable_rules(item, grammar.rule)
    keep = tuple((n, grammar.rule(n)) for n in need)
    return Grammar(name, keep + ((name, item),), grammar.max_depth)


def _has_big_repeat(grammar: Grammar, k: int, tail: int | None = None) -> bool:
    """Whether some repetition of ``grammar`` (anywhere, Inter/Diff operands included) has a
    need part above ``k + 1`` units or a room part above ``tail + 1`` (``tail``: None: ``k``):
    the only kinds :func:`rewrite_products` counts (its product windows are larger than ``k``,
    never smaller)."""
    from decoding.ir import walk

    t = k if tail is None else min(tail, k)
    seen: set[int] = set()  # (a subtree the rules share, a JSON string character, is read once)
    for _, node in grammar.rules:
        for n in walk(node, seen):
            if isinstance(n, Repeat) and (n.min > k + 1 or (n.max is not None and n.max - n.min > t + 1)):
                return True
    return False


def _small_item(item: Node, memo: tuple[dict, list] | None = None) -> bool:
    """Whether a small repetition's ``item`` is worth trying as a unit leaf: not already a
    leaf, no Ref (a rule's size is unknown here), and a few NFA states.  ``memo``: estimates
    shared by the calls of one rewrite (each subtree estimated once)."""
    from decoding.ir.size import _node_estimate

    if isinstance(item, (Dfa, ByteSet, Lit)):
        return False
    e = _node_estimate(item, False, *(memo or (None, None)))
    return not e.refs and e.states <= MAX_UNIT_STATES


#: :func:`_unit` of Ref-free items, by item (structural equality: the same language whatever
#: grammar holds it); only outcomes that do not depend on the limits or the clock are kept
#: (a LimitError is not).  Bounded: cleared when full.
_UNITS: dict[_Key, tuple[frozenset, Dfa] | None] = {}
_UNITS_MAX = 512
_UNITS_LOCK = threading.Lock()
_MISS = object()


def _unit(item: Node, grammar: Grammar, limits: Limits | None) -> tuple[frozenset, Dfa] | None:
    """The bytes ``item`` starts with and its minimal automaton as an IR leaf, if it is a unit
    that can be counted unambiguously (not nullable, no special, and no first byte that
    extends a complete unit); else None.  Memoized per process for items without a Ref
    (:data:`_UNITS`): the same item is the same unit in every grammar."""
    from decoding.ir import walk

    key = _Key(item)
    hit = _UNITS.get(key, _MISS)
    if hit is not _MISS:
        return hit  # type: ignore[return-value]  # (equal to a remembered item: Ref- and special-free too)
    free = True
    for x in walk(item):
        if isinstance(x, (Special, Inter, Diff)):
            return None  # (a Dfa leaf is regular and holds no special: built like any byte node)
        if isinstance(x, Ref):
            free = False
    try:
        out = _unit_of(item, grammar, limits)
    except LimitError:
        return None  # (limits and the clock: not memoized)
    if free:
        with _UNITS_LOCK:
            if len(_UNITS) >= _UNITS_MAX:
                _UNITS.clear()
            _UNITS[key] = out
    return out


def _unit_of(item: Node, grammar: Grammar, limits: Limits | None) -> tuple[frozenset, Dfa] | None:
    """:func:`_unit` unmemoized (LimitError when the unit's automaton meets a limit)."""
    name = "\x00unit"
    try:
        d = compile_dfa(_with_start(grammar, name, item), max_states=MAX_UNIT_STATES, limits=limits)
    except LimitError:
        raise
    except GrammarError:
        return None  # (an empty language)
    if (d.trans[:, d.n_classes:] >= 0).any() or d.accepting[0]:  # a special in the unit, or empty
        return None
    bc = d.byte_class.astype(np.intp)
    trans = d.trans[:, :d.n_classes]
    first = {b for b in range(256) if trans[0, bc[b]] >= 0}
    for s in np.nonzero(d.accepting)[0].tolist():
        if any(trans[s, bc[b]] >= 0 for b in first):
            return None
    return frozenset(first), dfa_leaf(d)


# ----------------------------------------------------------------------------- products

def _product_dfa(n: Inter | Diff, i: int, op2: Node, loops: tuple[Loop, ...], k: int,
                 limits: Limits | None) -> DFA | None:
    """The automaton of ``n`` with operand ``i`` replaced by ``op2`` (its counted form, with
    marker columns) and the other operands ignoring the markers; pruned.  None when a loop
    fails :func:`_mirrors_agree`; LimitError when it is larger than ``MAX_PRODUCT_STATES`` (or
    its operands than ``MAX_PRODUCT_PAIRS`` pairs), GrammarError when it is empty."""
    lim = limits or DEFAULT_LIMITS
    c = compile_dfa(Grammar.single(op2), max_states=MAX_PRODUCT_STATES, limits=lim)
    others = n.items[:i] + n.items[i + 1:] if isinstance(n, Inter) else (n.minus,)
    if not others:
        d: DFA | None = c
    else:
        b = regular_dfa(others[0] if len(others) == 1 else Inter(others), max_states=MAX_PRODUCT_STATES,
                        max_nfa=lim.max_nfa_states)
        if b is not None and c.n_states * b.n_states > MAX_PRODUCT_PAIRS:
            raise LimitError(f"a counted intersection of {c.n_states} x {b.n_states} states")
        d = _marked_product(c, b, diff=isinstance(n, Diff))
    if d is None:
        raise GrammarError("a counted intersection accepts no string")
    d = d.prune()
    return d if all(_mirrors_agree(d, lp, k) for lp in loops) else None


def _marked_product(c: DFA, b: DFA | None, *, diff: bool) -> DFA | None:
    """Product of ``c`` (its specials are markers) and the byte DFA ``b`` (None: the empty
    language): a marker moves ``c`` and leaves ``b`` where it is.  Accepting: both accept
    (``diff``: ``c`` accepts and ``b`` does not, a dead ``b`` counting as rejecting).  None if
    the product is empty."""
    if b is None:
        if not diff:
            return None
        b = DFA(np.zeros(256, dtype=np.uint16), np.full((1, 1), -1, dtype=np.int32), np.zeros(1, dtype=bool), (), 1)
        y0 = -1
    else:
        y0 = 0
    uniq, cls = np.unique(np.stack([c.byte_class.astype(np.int64), b.byte_class.astype(np.int64)], axis=1),
                          axis=0, return_inverse=True)
    ncls, nmark = len(uniq), len(c.specials)
    ca, cb = uniq[:, 0].tolist(), uniq[:, 1].tolist()
    tc, tb = c.trans.tolist(), b.trans.tolist()
    index = {(0, y0): 0}
    order = [(0, y0)]
    rows: list[list[int]] = []
    acc: list[bool] = []

    def to(key: tuple[int, int]) -> int:
        j = index.get(key)
        if j is None:
            if len(order) >= MAX_PRODUCT_STATES:
                raise LimitError(f"a counted intersection exceeds {MAX_PRODUCT_STATES} states")
            j = index[key] = len(order)
            order.append(key)
        return j

    while len(rows) < len(order):
        x, y = order[len(rows)]
        rx, ry = tc[x], (tb[y] if y >= 0 else None)
        row = [-1] * (ncls + nmark)
        for cl in range(ncls):
            nx = rx[ca[cl]]
            ny = ry[cb[cl]] if ry is not None else -1
            if nx >= 0 and (ny >= 0 or diff):
                row[cl] = to((nx, ny))
        for m in range(nmark):
            if rx[c.n_classes + m] >= 0:
                row[ncls + m] = to((rx[c.n_classes + m], y))
        rows.append(row)
        yb = y >= 0 and bool(b.accepting[y])
        acc.append(bool(c.accepting[x]) and (not yb if diff else yb))
    if not any(acc):
        return None
    return DFA(cls.reshape(-1).astype(np.uint16), np.array(rows, dtype=np.int32).reshape(len(rows), ncls + nmark),
               np.array(acc, dtype=bool), c.specials, ncls)


def _middle(byte_t: np.ndarray, is_tp: np.ndarray) -> np.ndarray:
    """bool per state: it reaches a state with a ``<tp>`` move by bytes alone (the middle)."""
    n = len(is_tp)
    src, cl = np.nonzero(byte_t >= 0)
    dst = byte_t[src, cl].astype(np.int64)
    order = np.argsort(dst, kind="stable")
    rsrc, rstart = src[order].tolist(), np.searchsorted(dst[order], np.arange(n + 1)).tolist()
    seen = is_tp.copy()
    todo = np.flatnonzero(is_tp).tolist()
    while todo:
        t = todo.pop()
        for s in rsrc[rstart[t]:rstart[t + 1]]:
            if not seen[s]:
                seen[s] = True
                todo.append(s)
    return seen


def _mirrors_agree(d: DFA, lp: Loop, k: int) -> bool:
    """Whether one token can tell, in ``d``, a middle state of ``lp`` from the explicit state
    the counter may have moved it to: from every pair (complete unit ``h``, its ``<tp>``
    target), read in lockstep while the explicit side has started at most ``k - 1`` units
    (a token starts at most ``k - 1``), both sides allow the same bytes and specials and
    leave the middle to the same states.  (Then a middle state's mask, liveness and exits do
    not depend on the counter; see the module docstring.)"""
    col = {t: j for j, t in enumerate(d.specials)}
    if lp.tp not in col:
        return True  # no unit completes in the middle: nothing is counted
    ncls = d.n_classes
    trans = d.trans.astype(np.int64)
    tp_col = ncls + col[lp.tp]
    is_tp = trans[:, tp_col] >= 0
    mid = _middle(trans[:, :ncls], is_tp)
    first = np.zeros(256, dtype=bool)
    first[list(lp.first)] = True
    bc = d.byte_class.astype(np.int64)
    starts = np.zeros(ncls, dtype=bool)
    starts[bc[first]] = True
    mixed = np.zeros(ncls, dtype=bool)
    mixed[bc[starts[bc] != first]] = True
    if (trans[np.flatnonzero(mid)][:, :ncls][:, mixed] >= 0).any():
        return False  # a byte class that moves in the middle mixes unit starts with other bytes
    starts_sym = np.concatenate([starts, np.zeros(trans.shape[1] - ncls, dtype=bool)])
    others = np.ones(trans.shape[1], dtype=bool)
    others[tp_col] = False
    dead = np.full(trans.shape[1], -1, dtype=np.int64)
    m = np.flatnonzero(is_tp)
    q, j = trans[m, tp_col], np.zeros(len(m), dtype=np.int64)
    seen = set(zip(m.tolist(), q.tolist(), j.tolist()))
    while len(m):
        tm = trans[m][:, others]
        tq = np.where(q[:, None] >= 0, trans[np.maximum(q, 0)], dead)[:, others]
        nj = j[:, None] + (is_tp[m][:, None] & starts_sym[others][None, :])
        seen_here = nj <= k - 1
        stay = (tm >= 0) & mid[np.maximum(tm, 0)] & (np.arange(tm.shape[1]) < ncls)[None, :]  # a byte, in the middle
        if (seen_here & ~stay & (tm != tq)).any() or (seen_here & stay & (tq < 0)).any():
            return False
        r, cl = np.nonzero(seen_here & stay)
        nxt = [x for x in dict.fromkeys(zip(tm[r, cl].tolist(), tq[r, cl].tolist(), nj[r, cl].tolist()))
               if x not in seen]
        seen.update(nxt)
        m = np.array([a for a, _, _ in nxt], dtype=np.int64)
        q = np.array([b_ for _, b_, _ in nxt], dtype=np.int64)
        j = np.array([c_ for _, _, c_ in nxt], dtype=np.int64)
    return True


class _Embedding:
    """Builds the NFA of a rewritten grammar whose placeholder specials stand for product
    automata (byte edges and marker moves): see :func:`_compile_products`."""

    @staticmethod
    def embed(nfa, dfa: DFA, s: int, sid: dict[str, int]) -> int:
        """``dfa`` added to ``nfa`` from ``s`` with its marker moves; its end state."""
        base = nfa.n if isinstance(nfa, _automaton._NFA) else len(nfa.eps)
        if isinstance(nfa, _automaton._NFA):
            end = nfa.embed(_automaton._Leaf.of_dfa(dfa), s)
        else:
            end = nfa.embed(dfa, s)
        for j, name in enumerate(dfa.specials):
            src = np.flatnonzero(dfa.trans[:, dfa.n_classes + j] >= 0)
            for a in src.tolist():
                t = base + int(dfa.trans[a, dfa.n_classes + j])
                if isinstance(nfa, _automaton._NFA):
                    nfa.sp_src.append(base + a)
                    nfa.sp_k.append(sid[name])
                    nfa.sp_tgt.append(t)
                else:
                    nfa.spec[base + a].append((sid[name], t))
        return end


def _nfa_class(base: type) -> type:
    """``base`` (an NFA builder of :mod:`decoding.backends.automaton`) that builds a
    placeholder special as its product automaton."""

    class ProductNFA(base):  # type: ignore[misc, valid-type]
        __slots__ = ("products",)

        def build(self, node: Node, s: int) -> int | None:
            if type(node) is Special and node.text in self.products:
                return _Embedding.embed(self, self.products[node.text], s, self.special_ids)
            return super().build(node, s)

    return ProductNFA


_PRODUCT_NFA = {False: _nfa_class(_automaton._NFA), True: _nfa_class(_automaton._NFARef)}


def _compile_products(g: Grammar, products: dict[str, DFA], *, literal: Sequence[str], max_states: int | None,
                      limits: Limits) -> DFA:
    """:func:`~decoding.backends.automaton.compile_dfa` of ``g``, each placeholder special
    built as its product automaton (marker columns kept as specials)."""
    if literal:
        g = _automaton._replace_specials(g, set(literal))
    marks = [t for dfa in products.values() for t in dfa.specials]
    specials = tuple(dict.fromkeys([t for t in g.specials() if t not in products] + marks))
    sid = {t: i for i, t in enumerate(specials)}
    deadline = _automaton._Deadline(limits.max_compile_seconds, f"grammar '{g.start}'")
    nfa = _PRODUCT_NFA[_automaton._pure_python_dfa()](g, sid, limits.max_nfa_states, max_nesting=limits.max_nesting,
                                                       deadline=deadline)
    nfa.products = products
    nfa.max_dfa = max_states or limits.max_dfa_states
    start = nfa.new()
    end = nfa.build_start(start)
    if end is None:
        raise GrammarError(f"grammar '{g.start}' accepts no string")
    dfa = _automaton.minimal_dfa(nfa, start, end, specials, deadline, nfa.max_dfa, f"grammar '{g.start}'",
                                 limits.max_subset_bytes)
    assert dfa is not None
    return dfa


# ----------------------------------------------------------------------------- compiled form

def _walk(step: np.ndarray, starts: np.ndarray, data: np.ndarray, start: np.ndarray, lens: np.ndarray,
          q: int) -> np.ndarray:
    """Per walker (``lens[i]`` bytes of ``data`` from ``start[i]``, from unit state ``q``): the
    units started (``starts[q, b]``) before the walk of ``step`` dies or the bytes end
    (``_native.unit_walk``; :func:`_walk_numpy` is the same in numpy, the tests' reference)."""
    count = np.zeros(len(start), dtype=np.int64)
    _native.unit_walk(np.ascontiguousarray(step, dtype=np.int32).reshape(-1),
                      np.ascontiguousarray(starts).view(np.uint8).reshape(-1), int(q), data,
                      np.ascontiguousarray(start, dtype=np.int64), np.ascontiguousarray(lens, dtype=np.int64), count)
    return count


def _walk_numpy(step: np.ndarray, starts: np.ndarray, data: np.ndarray, start: np.ndarray, lens: np.ndarray,
                q: int) -> np.ndarray:
    """:func:`_walk` in numpy: one step of every live walker at a time."""
    q = np.full(len(start), q, dtype=np.int64)
    count = np.zeros(len(q), dtype=np.int64)
    idx = np.flatnonzero(lens > 0)
    j = 0
    while len(idx):
        b = data[start[idx] + j]
        cq = q[idx]
        nq = step[cq, b]
        count[idx] += starts[cq, b]
        q[idx] = nq
        idx = idx[nq >= 0]
        j += 1
        idx = idx[lens[idx] > j]
    return count


class _UnitWalk:
    """The long text tokens of one vocabulary (``tail`` bytes or more, end-of-generation left
    out) read by a walk of one unit's ``U*`` (:attr:`step`: at a unit's boundary, its start or
    a complete unit, a first byte starts a unit, counted in :attr:`starts`; no first byte
    extends a complete unit).  Inside a middle this is the walk of the middle (a state of the
    middle holds exactly one thread of ``U*``, and the middle is left, or the token rejected,
    exactly when that thread dies), so the units a token starts there come from here:

    - :meth:`from_state` ``(q)[j]``: the units long token ``ids[j]`` starts from unit state
      ``q`` before the walk dies or the token ends (a row per state, made on first use);
    - :meth:`suffixes` ``(before)``: the suffixes of long tokens (at least ``tail + 2``
      bytes) that follow a byte of ``before``: their token's column, offset, and the units
      they start from a unit's start (memoized per set of bytes).

    Shared by all the grammars of one vocabulary (:data:`_WALKS`, per unit and tail).
    """

    def __init__(self, unit: Dfa, vocab: Vocab, tail: int) -> None:
        table = _unit_table(unit)
        n = len(unit.edges)
        bound = np.zeros(n, dtype=bool)
        bound[list(unit.accept)] = True
        bound[0] = True
        first = table[0] >= 0
        starts = bound[:, None] & first[None, :]
        step = np.where(starts, table[0][None, :], table)
        same = (step == step[0][None, :]).all(axis=1) & (starts == starts[0][None, :]).all(axis=1)
        canon = np.where(same, 0, np.arange(n))  # a complete unit that reads as the start is the start
        self.starts = np.ascontiguousarray(starts)
        self.step = np.ascontiguousarray(np.where(step >= 0, canon[np.maximum(step, 0)], -1), dtype=np.int32)
        blob, off = vocab.blob()
        self._data = np.frombuffer(blob, dtype=np.uint8)
        lens_all = (off[1:] - off[:-1]).astype(np.int64)
        long = lens_all >= tail
        for t in vocab.eog_ids:
            if 0 <= t < len(long):
                long[t] = False
        ids = np.flatnonzero(long)
        self.ids = ids
        self.pos = np.full(len(lens_all), -1, dtype=np.int64)  # token id -> column
        self.pos[ids] = np.arange(len(ids))
        self._st, self._ln = off[ids].astype(np.int64), lens_all[ids]
        self._tail = tail
        self._rows: dict[int, object] = {}  # q -> from_state(q); -1 - q -> by_units(q)
        self._suf: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def from_state(self, q: int) -> np.ndarray:
        hit = self._rows.get(q)
        if hit is None:
            hit = _walk(self.step, self.starts, self._data, self._st, self._ln, q)
            hit.setflags(write=False)
            with self._lock:
                self._rows[q] = hit
        return hit

    def by_units(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        """(the token ids of :attr:`ids`, the units each starts from unit state ``q``), most
        units first (memoized per state): the tokens starting more than ``n`` units are a
        prefix."""
        key = -1 - q
        hit = self._rows.get(key)
        if hit is None:
            u = self.from_state(q)
            # (stable, most units first; a radix sort over 16-bit keys where they fit)
            order = np.argsort(-u.astype(np.int16) if len(u) and u.max() < 2**15 else -u, kind="stable")
            ids, us = self.ids[order], u[order]
            for a in (ids, us):
                a.setflags(write=False)
            hit = (ids, us)
            with self._lock:
                self._rows[key] = hit  # type: ignore[assignment]
        return hit  # type: ignore[return-value]

    def suffixes(self, before: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(column, offset, units) of the suffixes of at least ``tail + 2`` bytes whose
        preceding byte is in ``before`` (bool[256])."""
        key = np.packbits(before).tobytes()
        hit = self._suf.get(key)
        if hit is None:
            st, ln, data = self._st, self._ln, self._data
            per = np.maximum(ln - (self._tail + 1), 0)
            tok = np.repeat(np.arange(len(ln)), per)
            i = np.arange(int(per.sum()), dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
            keep = (i > 0) & before[data[np.maximum(st[tok] + i - 1, 0)]]
            tok, i = tok[keep], i[keep]
            units = _walk(self.step, self.starts, data, st[tok] + i, ln[tok] - i, 0)
            hit = (tok, i, units)
            with self._lock:
                self._suf[key] = hit
        return hit


#: per vocabulary: (unit automaton, tail) -> :class:`_UnitWalk` (a few ms each, made once)
_WALKS: "WeakMemo[Vocab, dict]" = WeakMemo(lambda v: {})
_WALKS_LOCK = threading.Lock()


def _unit_walk(unit: Dfa, vocab: Vocab, tail: int) -> _UnitWalk:
    memo = _WALKS(vocab)
    key = (unit, tail)
    hit = memo.get(key)
    if hit is None:
        with _WALKS_LOCK:
            hit = memo.get(key)
            if hit is None:
                if len(memo) >= 64:
                    memo.clear()
                hit = memo[key] = _UnitWalk(unit, vocab, tail)
    return hit


@dataclass
class _Cross:
    """What a grammar needs to mask off the long tokens that would overrun a short room
    loop after crossing its ``<en>`` (:meth:`CountedGrammar._cross_bad`): per short loop, the
    long tokens that overrun it from its ``<en>`` (``zero``); the long tokens that may do so
    after a crossing inside them (``yids``) with the largest such offset (``ymax``); the
    fewest bytes from each state to an ``<en>`` of a short loop (``dist``; -1: none)."""
    zero: dict[int, np.ndarray]
    yids: np.ndarray
    ymax: np.ndarray
    ymax_all: int
    dist: np.ndarray


#: :func:`_moves_into` compares the table with each target up to this many targets, else
#: gathers (a gather converts the whole table to indices first: ~10x one compare)
MOVES_INTO_COMPARE = 8


def _moves_into(trans: np.ndarray, targets: Sequence[np.ndarray]) -> np.ndarray:
    """``np.isin(trans, union of targets)`` for a table whose missing moves are -1 (targets
    are states, never -1): a compare per target when there are few, else one gather of a
    flag per state (and one more, never set, that -1 reads)."""
    flag = np.zeros(len(trans) + 1, dtype=bool)
    for t in targets:
        flag[t] = True
    which = np.flatnonzero(flag)
    if len(which) > MOVES_INTO_COMPARE:
        return flag[trans]
    out = np.zeros(trans.shape, dtype=bool)
    for t in which.tolist():
        out |= trans == t
    return out


def _marker_moves(d: DFA) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per marker column ``j`` of ``d`` (a special starting with :data:`MARK`) that has a move:
    (sources, targets) as int32, sources increasing.  One read of the special columns (a
    read per column strides the whole table once each)."""
    ncls = d.n_classes
    cols = [j for j, t in enumerate(d.specials) if t.startswith(MARK)]
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if not cols or not d.n_states:
        return out
    sub = d.trans[:, ncls:]  # (a view: every special column, read once)
    nsp = sub.shape[1]
    flat = np.flatnonzero(sub >= 0)  # (row-major: the sources of each column increasing)
    rows, at = flat // nsp, flat % nsp
    tgt = sub[rows, at]
    order = np.argsort(at, kind="stable")
    rows, at, tgt = rows[order], at[order], tgt[order]
    bounds = np.searchsorted(at, np.arange(len(d.specials) + 1))
    for j in cols:
        a, b = int(bounds[j]), int(bounds[j + 1])
        if b > a:
            out[j] = (rows[a:b].astype(np.int32), tgt[a:b].astype(np.int32))
    return out


class _Rows:
    """``a[s]`` as a Python list, converted on first use (a step reads a few rows of a table
    that may have 100,000 states; converting it all cost ~80 ms per large Snowplow schema)."""

    __slots__ = ("a", "rows")

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.rows: dict[int, list[int]] = {}

    def __getitem__(self, s: int) -> list[int]:
        r = self.rows.get(s)
        if r is None:
            r = self.rows[s] = self.a[s].tolist()
        return r


class CountedGrammar:
    """A grammar with counted middles, for one tokenizer; satisfies
    :class:`~decoding.backends.contract.CompiledGrammar`.  States are interned pairs
    ``(dfa state, units started in the current middle)``; 0 is the start.

    One table is kept: the mask automaton's (``inner.dfa``: marker columns removed, the row
    of a state with an ``<en>`` move merged with the middle's first row).  Stepping reads the
    same rows, except in a state with an ``<en>`` move, whose own row (before the merge) is
    kept apart (``_own``, a few rows); the marker moves are kept as (source, target) arrays.
    :attr:`dfa` rebuilds the automaton with its marker columns from these (tests, tools): the
    same table as the one given."""

    def __init__(self, dfa: DFA, loops: Sequence[Loop], inner: DFAGrammar, grammar_key: str = "",
                 meta: dict | None = None, *, marks: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        d = dfa
        self.loops = tuple(loops)
        self.inner = inner  # marker columns removed, <en> rows made transparent: the masks
        self.grammar_key = grammar_key
        self.meta = {} if meta is None else meta
        self.vocab = self.inner.vocab
        self.special_token_ids = self.inner.special_token_ids
        m = self.inner.dfa
        ncls = d.n_classes
        self._specials = d.specials  # the marker automaton's specials, markers included
        self._trimmed = d.trimmed
        self._keep = [j for j, t in enumerate(d.specials) if not t.startswith(MARK)]  # columns of m past ncls
        self._trans = _Rows(m.trans)  # rows as lists, made when a step first reads them
        self._bc_arr = d.byte_class.astype(np.int64)
        self._bc = self._bc_arr.tolist()
        self._acc = m.accepting.tolist()  # a prefix's end accepts if <en> leads to acceptance
        n = d.n_states
        col = {t: j for j, t in enumerate(d.specials)}
        # marker column -> (sources, targets); ``marks``: _marker_moves(dfa), if the caller made it
        mv = _marker_moves(d) if marks is None else marks
        empty = np.zeros(0, dtype=np.int32)
        self._marks: dict[int, tuple[np.ndarray, np.ndarray]] = {
            j: mv.get(j, (empty, empty)) for j, t in enumerate(d.specials) if t.startswith(MARK)}
        self._en = [-1] * n  # target of the <en> move, or -1
        self._tp = [-1] * n  # target of the <tp> move (-1: none)
        self._loop_of_tp = [-1] * n
        self._mid = [-1] * n  # loop whose middle holds the state
        self._en_src: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # loop -> its <en> moves (sources, targets)
        self._first_arr = [np.zeros(256, dtype=bool) for _ in self.loops]  # bytes a unit starts with
        for lp in self.loops:
            self._first_arr[lp.index][np.fromiter(lp.first, dtype=np.intp, count=len(lp.first))] = True
        self._first = [f.tolist() for f in self._first_arr]
        for lp in self.loops:
            if lp.en in col:
                src, tgt = self._marks[col[lp.en]]
                self._en_src[lp.index] = (src.astype(np.int64), tgt.astype(np.int64))
                for s, t in zip(src.tolist(), tgt.tolist()):
                    self._en[s] = t
            if lp.tp in col:
                src, tgt = self._marks[col[lp.tp]]
                for s, t in zip(src.tolist(), tgt.tolist()):
                    self._tp[s] = t
                    self._loop_of_tp[s] = lp.index
        # own rows (bytes, then the kept specials, as in m) and acceptance of the <en> states
        cols = list(range(ncls)) + [ncls + j for j in self._keep]
        self._own: dict[int, list[int]] = {}
        self._own_acc: dict[int, bool] = {}
        en_states = {s for lp in self.loops if lp.en in col for s in self._marks[col[lp.en]][0].tolist()}
        if en_states:  # (one gather of their rows)
            order = sorted(en_states)
            rows = d.trans[np.array(order, dtype=np.intp)][:, cols].tolist()
            accs = d.accepting[order].tolist()
            for s, row, a in zip(order, rows, accs):
                self._own[s] = row
                self._own_acc[s] = bool(a)
        self._lock = threading.RLock()  # _costs holds it while _successors takes it
        self._states: list[tuple[int, int]] = [(0, 0)]
        self._ids: dict[tuple[int, int], int] = {(0, 0): 0}
        self._next: dict[tuple[int, int], int] = {}
        self._cost: np.ndarray | None = None
        self._unit_tok: list[int] = [1] * len(self.loops)
        self._per_tok: list[int] = [1] * len(self.loops)
        self._g: list[np.ndarray] = [np.zeros(1, dtype=np.int64) for _ in self.loops]
        self._lin: list[int] = [1] * len(self.loops)
        self._succ: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._unit_count: dict[int, np.ndarray] = {}
        self._mid_arr = np.full(n, -1, dtype=np.int64)  # (as self._mid: no middle yet)
        self._special_set = frozenset(self.special_token_ids)
        self._special_col = {tid: ncls + k for k, tid in enumerate(self.special_token_ids)}
        # room loops whose tail T is shorter than the window: a state of the middle with more
        # than x + T - M units started is near the end (a long token may overrun the tail)
        big = self.vocab.max_token_bytes
        self._near: list[int | None] = [lp.x + lp.tail - big if not lp.need and 0 < lp.tail <= big else None
                                        for lp in self.loops]
        self._long_memo: dict = {}  # tail -> long tokens; ('c', s) -> _long_cands; ('u', s) -> units by token
        self._near_memo: dict[tuple[int, int], int | None] = {}
        # medium room loops (``T + 1 < r < M``): a long token may overrun one after crossing its
        # <en> (module docstring, "Medium loops"); those tokens are masked off where they can
        self._short = [not lp.need and lp.unit is not None and 0 < lp.tail and lp.x + lp.tail < big
                       for lp in self.loops]
        self._any_short = any(self._short)
        self._cross: _Cross | None = None
        self._cross_memo: dict[int, np.ndarray] = {}  # DFA state -> _cross_bad
        self._cross_mask: dict[int, int | None] = {}  # DFA state -> mask id without them (None: as is)
        self._walks: dict[int, _UnitWalk] = {}  # loop -> its unit's walk of the long tokens
        self._qmaps: dict[int, np.ndarray | None] = {}  # loop -> unit state per middle state
        self._exact_memo: dict[int, int | None] = {}  # state -> _exact

    @property
    def dfa(self) -> DFA:
        """The automaton with its marker columns (rebuilt on each call from the one table kept)."""
        m = self.inner.dfa
        ncls = m.n_classes
        cols = list(range(ncls)) + [ncls + j for j in self._keep]
        full = np.full((m.n_states, ncls + len(self._specials)), -1, dtype=m.trans.dtype)
        full[:, cols] = m.trans
        acc = m.accepting.copy()
        for s, row in self._own.items():
            full[s, cols] = row
            acc[s] = self._own_acc[s]
        for j, (src, tgt) in self._marks.items():
            full[src, ncls + j] = tgt
        return DFA(m.byte_class, full, acc, self._specials, ncls, trimmed=self._trimmed)

    # ------------------------------------------------------------------ contract
    @property
    def backend(self) -> str:
        return "counted"

    @property
    def n_words(self) -> int:
        return self.inner.n_words

    def mask(self, state: int) -> np.ndarray:
        mid = self._exact_memo.get(state, -1)
        if mid == -1:
            mid = self._exact(state)
        return self.inner.mask(self._states[state][0]) if mid is None else self.inner.masks[mid]

    def allowed_ids(self, state: int) -> np.ndarray:
        mid = self._exact_memo.get(state, -1)
        if mid == -1:
            mid = self._exact(state)
        return self.inner.allowed_ids(self._states[state][0]) if mid is None else self.inner.masks.ids(mid)

    def _exact(self, state: int) -> int | None:
        """The id (in the mask automaton's table) of ``state``'s mask when it is not its DFA
        state's: long tokens removed that would overrun a short tail near the end of a middle
        (:meth:`_near_end`) or a medium room loop after an ``<en>`` inside them
        (:meth:`_cross_bad`); None when no token is removed."""
        s, c = self._states[state]
        k = self._mid[s]
        if k >= 0 and self._near[k] is not None and c > self._near[k]:
            hit = self._near_end(state)
        else:
            hit = self._cross_only(s) if self._any_short else None
        with self._lock:
            if len(self._exact_memo) >= 1_000_000:
                self._exact_memo.clear()
            self._exact_memo[state] = hit
        return hit

    def _cross_only(self, s: int) -> int | None:
        """The mask id of DFA state ``s`` less :meth:`_cross_bad` (None: nothing removed)."""
        hit = self._cross_mask.get(s, -1)
        if hit == -1:
            bad = self._cross_bad(s) if self._any_short else _NO_IDS
            hit = self._without(s, bad) if len(bad) else None
            with self._lock:
                self._cross_mask[s] = hit
        return hit

    def _without(self, s: int, bad: np.ndarray) -> int:
        """The id of the mask of DFA state ``s`` with the tokens ``bad`` cleared (interned)."""
        off = np.zeros(self.inner.n_words, dtype=np.uint32)
        _native.mask_from_ids(off, np.sort(np.asarray(bad)).astype(np.uint32))
        return self.inner.masks.intern(self.inner.mask(s) & ~off)

    def _long(self, tail: int) -> np.ndarray:
        """bool per token: a text token of more than ``tail - 1`` bytes (neither a special of
        the grammar nor end-of-generation)."""
        hit = self._long_memo.get(tail)
        if hit is None:
            _, off = self.vocab.blob()
            hit = (off[1:] - off[:-1]) >= tail
            for t in list(self.vocab.eog_ids) + list(self.special_token_ids):
                if 0 <= t < len(hit):
                    hit[t] = False
            hit.setflags(write=False)
            self._long_memo[tail] = hit
        return hit

    def _long_sorted(self, tail: int) -> tuple[np.ndarray, np.ndarray]:
        """(the long tokens of :meth:`_long`, their bytes), longest first."""
        hit = self._long_memo.get(("s", tail))
        if hit is None:
            ids = np.flatnonzero(self._long(tail))
            _, off = self.vocab.blob()
            lens = (off[ids + 1] - off[ids]).astype(np.int64)
            order = np.argsort(-lens, kind="stable")
            hit = self._long_memo[("s", tail)] = (ids[order], lens[order])
        return hit

    def _long_cands(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(long tokens the mask automaton allows in middle state ``s``, their bytes), longest
        first (memoized per state)."""
        hit = self._long_memo.get(("c", s))
        if hit is None:
            ids, lens = self._long_sorted(self.loops[self._mid[s]].tail)
            m = self.inner.mask(s)
            on = ((m[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)
            hit = (ids[on], lens[on])
            with self._lock:
                self._long_memo[("c", s)] = hit
        return hit

    def _units_in_middle(self, s: int, data: bytes) -> int:
        """Units ``data`` starts in the middle holding ``s`` before it leaves it, the middle
        taken as unbounded (``U*``: the mask automaton)."""
        trans, bc, lot, first, en, mid, own = (self._trans, self._bc, self._loop_of_tp, self._first, self._en,
                                               self._mid, self._own)
        k, n = mid[s], 0
        for b in data:
            cb = bc[b]
            if en[s] >= 0 and own[s][cb] < 0:
                break  # (an <en>: another middle, or this one afresh)
            if lot[s] == k and first[k][b]:
                n += 1
            s = (own[s] if en[s] >= 0 else trans[s])[cb]
            if s < 0 or mid[s] != k:
                break
        return n

    def _near_end(self, state: int) -> int | None:
        """The mask of a state in the last ``M - T`` units of a room middle whose
        tail ``T`` is shorter than the window: the mask automaton's, less the long tokens that
        would start more units than the middle and the tail have left (``u > X + T - c``; with
        ``u <= X + T - c`` the token ends in the middle or in the explicit tail, as in the mask
        automaton's ``U*``).  Only tokens of more bytes than that are walked (a token starts at
        most one unit per byte), once per state; where the state's unit state is known, the
        units of all of them come from the unit walk's table at once (:meth:`_by_units`) and
        the tokens removed are the first ones of that order.  The mask's id in the mask
        automaton's table (memoized per state and units left, or number of tokens removed),
        or None when no token is removed."""
        s, c = self._states[state]
        k = self._mid[s]
        lp = self.loops[k]
        left = lp.x + lp.tail - c
        by_units = self._by_units(s, k)
        if by_units is not None:  # the candidates by units, most first: those above ``left``
            ids_u, us = by_units
            n = int(np.searchsorted(-us, -left, side="left"))
            key = (s, -n)  # (one mask per number removed: nested sets)
        else:
            cand, lens = self._long_cands(s)
            n = int(np.searchsorted(-lens, -left, side="left"))  # cand[:n]: more bytes than units left
            key = (s, left)
        if n == 0:
            return self._cross_only(s) if self._any_short else None
        if key in self._near_memo:
            return self._near_memo[key]
        bad = ids_u[:n] if by_units is not None else self._overrun(s, k, left, cand[:n])
        if self._any_short:
            cross = self._cross_bad(s)
            if len(cross):
                bad = np.union1d(bad, cross)
        hit = self._without(s, bad) if len(bad) else None
        with self._lock:
            if len(self._near_memo) >= 4096:
                self._near_memo.clear()
            self._near_memo[key] = hit
        return hit

    def _by_units(self, s: int, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(the long tokens allowed in middle state ``s`` of loop ``k``, the units each starts
        there before it leaves the middle), most units first, from the unit walk's table;
        None where ``s``'s unit state is not known (memoized per state)."""
        key = ("o", s)
        if key in self._long_memo:
            return self._long_memo[key]
        qm = self._unit_states(k)
        q = -1 if qm is None else int(qm[s])
        hit = None
        if q >= 0:
            cand, _ = self._long_cands(s)
            w = self._walk_of(k)
            u = w.from_state(q)[w.pos[cand]]
            # (stable, most units first; a radix sort over 16-bit keys where they fit)
            order = np.argsort(-u.astype(np.int16) if len(u) and u.max() < 2**15 else -u, kind="stable")
            hit = (cand[order], u[order])
        with self._lock:
            self._long_memo[key] = hit
        return hit

    def _overrun(self, s: int, k: int, left: int, cand: np.ndarray) -> np.ndarray:
        """The long tokens of ``cand`` (allowed in middle state ``s`` of loop ``k``) that start
        more than ``left`` units before they leave the middle: from the unit walk's table where
        ``s``'s unit state is known (:meth:`_unit_states`), else by stepping each (memoized)."""
        qm = self._unit_states(k)
        q = -1 if qm is None else int(qm[s])
        if q >= 0:
            w = self._walk_of(k)
            return cand[w.from_state(q)[w.pos[cand]] > left]
        units = self._long_memo.setdefault(("u", s), {})
        tb = self.vocab.token_bytes
        bad = []
        for t in cand.tolist():
            u = units.get(t)
            if u is None:
                u = units[t] = self._units_in_middle(s, tb[t])
            if u > left:
                bad.append(t)
        return np.array(bad, dtype=np.int64)

    def _walk_of(self, k: int) -> _UnitWalk:
        hit = self._walks.get(k)
        if hit is None:
            lp = self.loops[k]
            hit = self._walks[k] = _unit_walk(lp.unit, self.vocab, lp.tail)
        return hit

    def _unit_states(self, k: int) -> np.ndarray | None:
        """Per DFA state, the state of loop ``k``'s unit walk (:class:`_UnitWalk`) in ``k``'s
        middle (-1 elsewhere): the middle and the unit read in lockstep from the middle's
        starts (its ``<en>`` targets).  None when they disagree somewhere (a byte the one
        takes and the other does not, two unit states for one state): then units are stepped."""
        if k in self._qmaps:
            return self._qmaps[k]
        qm: np.ndarray | None = None
        if self.loops[k].unit is not None and k in self._en_src:
            w = self._walk_of(k)
            m = self.inner.dfa
            ncls = m.n_classes
            mid = self._mid_arr
            tgt = self._en_src[k][1]
            heads = np.unique(tgt[mid[tgt] == k])
            qm = np.full(len(mid), -1, dtype=np.int64)
            qm[heads] = 0
            fs, fq = heads, np.zeros(len(heads), dtype=np.int64)
            # read by byte class when the unit does not tell a class's bytes apart (else by byte)
            bc = self._bc_arr
            rep_ = np.zeros(ncls, dtype=np.int64)
            rep_[bc[::-1]] = np.arange(255, -1, -1)  # a byte of each class (the smallest)
            by_class = bool((w.step[:, rep_[bc]] == w.step).all())
            step = w.step[:, rep_] if by_class else w.step
            nu = w.step.shape[0]
            while len(fs):
                rows = m.trans[fs, :ncls].astype(np.int64)
                for i, st in enumerate(fs.tolist()):
                    if self._en[st] >= 0:
                        rows[i] = self._own[st][:ncls]
                if not by_class:
                    rows = rows[:, bc]
                nq = step[fq]
                live = rows >= 0
                inm = live & (mid[np.maximum(rows, 0)] == k)
                if (inm & (nq < 0)).any() or (live & ~inm & (nq >= 0)).any():
                    qm = None
                    break
                key = np.unique(rows[inm] * nu + nq[inm])
                ts, tq = key // nu, key % nu
                known = qm[ts]
                new = known < 0
                ts, tq = ts[new], tq[new]
                if ((known >= 0) & (known != key % nu)).any() or len(np.unique(ts)) != len(ts):
                    qm = None
                    break
                qm[ts] = tq
                fs, fq = ts, tq
        with self._lock:
            self._qmaps[k] = qm
        return qm

    def _cross_info(self) -> _Cross:
        if self._cross is None:
            with self._lock:
                if self._cross is None:
                    self._cross = self._make_cross()
        return self._cross

    def _make_cross(self) -> _Cross:
        """:class:`_Cross` of this grammar: per medium loop, the bytes that lead to its ``<en>``
        (from the mask table; a superset is safe) and the long tokens that start more than its
        ``r`` units from its ``<en>`` (offset 0) or after such a byte."""
        m = self.inner.dfa
        n, ncls = m.n_states, m.n_classes
        mid = self._mid_arr
        src: dict[int, np.ndarray] = {}
        chained: dict[int, list[int]] = {}  # <en> states whose chain reaches a medium loop's <en>
        for k, (ss, tt) in self._en_src.items():
            if self._short[k]:
                src[k] = ss[mid[tt] == k]
                chained[k] = []
        if chained:
            into: dict[int, list[int]] = {}  # state -> <en> states whose <en> target it is
            for ss, tt in self._en_src.values():
                for s0, t0 in zip(ss.tolist(), tt.tolist()):
                    into.setdefault(t0, []).append(s0)
            for k in chained:
                todo, seen = src[k].tolist(), set(src[k].tolist())
                while todo:  # back along the chain: an <en> leading to one of these
                    for p in into.get(todo.pop(), ()):
                        if p not in seen:
                            seen.add(p)
                            todo.append(p)
                src[k] = np.array(sorted(seen), dtype=np.int64)
        # the byte classes that lead to an <en> state of each loop (one read of the table)
        cls_in = _moves_into(m.trans[:, :ncls], list(src.values()))
        hit_c = np.flatnonzero(cls_in.any(axis=0))  # (few columns: read those again)
        hit_t = np.zeros(0, dtype=np.int64)
        if len(hit_c):
            rr, cc = np.nonzero(cls_in[:, hit_c])
            hit_t, hit_c = m.trans[rr, hit_c[cc]].astype(np.int64), hit_c[cc]
        zero: dict[int, np.ndarray] = {}
        ymax = np.zeros(0, dtype=np.int64)
        yid = np.zeros(0, dtype=np.int64)
        for k, ss in src.items():
            lp = self.loops[k]
            r = lp.x + lp.tail
            w = self._walk_of(k)
            ok = self._long(lp.tail)[w.ids]  # (the grammar's special tokens are not text)
            zero[k] = w.ids[ok & (w.from_state(0) > r)]
            is_k = np.zeros(n, dtype=bool)
            is_k[ss] = True
            into = np.zeros(ncls, dtype=bool)
            into[hit_c[is_k[hit_t]]] = True
            tok, off, units = w.suffixes(into[self._bc_arr])
            sel = (units > r) & ok[tok]
            yid = np.concatenate([yid, w.ids[tok[sel]]])
            ymax = np.concatenate([ymax, off[sel]])
        if len(yid):
            best = np.full(self.vocab.n_tokens, -1, dtype=np.int64)
            np.maximum.at(best, yid, ymax)
            yids = np.flatnonzero(best >= 0)
            ymax = best[yids]
        else:
            yids = yid
        if len(yids):
            allsrc = np.concatenate(list(src.values()))
            col_ok = np.zeros(m.trans.shape[1], dtype=bool)
            col_ok[:ncls] = True
            dist = _automaton._bfs(m.trans, allsrc, reverse=True, col_ok=col_ok)
        else:
            dist = np.full(n, -1, dtype=np.int32)  # (no token to step anywhere)
        return _Cross(zero, yids, ymax, int(ymax.max(initial=-1)), dist)

    def _entered(self, s: int) -> np.ndarray:
        """Per byte class, the loop whose middle a byte read in ``<en>`` state ``s`` enters
        (following the chain of ``<en>`` while the state's own row has no move), -1 where the
        own row takes it or no middle is entered."""
        ncls = len(self._own[s]) - len(self._keep)
        out = np.full(ncls, -1, dtype=np.int64)
        for cb in range(ncls):
            cur, hops = s, 0
            while self._en[cur] >= 0 and self._own[cur][cb] < 0 and hops <= len(self.loops):
                cur = self._en[cur]
                hops += 1
            if cur != s and self._mid[cur] >= 0:
                out[cb] = self._mid[cur]
        return out

    def _cross_bad(self, s: int, ids: np.ndarray | None = None) -> np.ndarray:
        """The long tokens allowed in DFA state ``s`` by the mask automaton that would start more
        than ``r`` units of a medium room loop after crossing its ``<en>`` (sorted; memoized
        per state): at an ``<en>`` of the loop, the tokens of ``zero`` whose first byte takes it
        (vectorised); where an ``<en>`` is at most ``ymax`` bytes away, the tokens of ``yids``
        with a crossing that far, stepped exactly.  ``ids``: the allowed ids, if known."""
        hit = self._cross_memo.get(s)
        if hit is not None:
            return hit
        info = self._cross_info()
        mask = None

        def on(c: np.ndarray) -> np.ndarray:
            nonlocal mask
            if ids is not None:
                return c[np.isin(c, ids)]
            if mask is None:
                mask = self.inner.mask(s)
            return c[((mask[c >> 5] >> (c & 31).astype(np.uint32)) & 1).astype(bool)]

        parts = []
        if self._en[s] >= 0:
            entered = self._entered(s)
            for k in np.unique(entered[entered >= 0]).tolist():
                if self._short[k] and len(info.zero[k]):
                    z = on(info.zero[k])
                    blob, off = self.vocab.blob()
                    fb = np.frombuffer(blob, dtype=np.uint8)[off[z].astype(np.int64)]
                    parts.append(z[entered[self._bc_arr[fb]] == k])  # the first byte takes <en> into k
        d = int(info.dist[s])
        if 0 <= d <= info.ymax_all:
            y = info.yids[info.ymax >= max(d, 1)]
            if len(y):
                tb = self.vocab.token_bytes
                y = on(y)
                parts.append(np.array([t for t in y.tolist() if self._run(s, 0, tb[t]) is None], dtype=np.int64))
        out = np.unique(np.concatenate(parts)).astype(np.int64) if parts else _NO_IDS
        out.setflags(write=False)
        with self._lock:
            self._cross_memo[s] = out
        return out

    def next_state(self, state: int, token: int) -> int:
        key = (state, token)
        hit = self._next.get(key)
        if hit is not None:
            return hit
        s, c = self._states[state]
        if token in self.vocab.eog_ids and token not in self._special_set:
            ns = EOG if self._acc[s] else FORBIDDEN
        elif token in self._special_set:
            t = int(self.inner.dfa.trans[s, self._special_col[token]])  # <en> rows merged
            ns = FORBIDDEN if t < 0 else self._intern(t, 0)
        elif 0 <= token < self.vocab.n_tokens and self.vocab.token_bytes[token]:
            r = self._run(s, c, self.vocab.token_bytes[token])
            ns = FORBIDDEN if r is None else self._intern(*r)
        else:
            ns = FORBIDDEN
        if len(self._next) < 1_000_000:
            self._next[key] = ns
        return ns

    def is_accepting(self, state: int) -> bool:
        return bool(self._acc[self._states[state][0]])

    def accepts(self, data: bytes) -> bool:
        r = self._run(0, 0, data)
        return r is not None and bool(self._acc[r[0]])

    def forced_bytes(self, state: int) -> bytes:
        s, c = self._states[state]
        d = self.inner.dfa
        out = bytearray()
        while not self._acc[s] and len(out) < 4096:
            row = d.trans[s]
            live = np.nonzero(row >= 0)[0]
            if len(live) != 1 or live[0] >= d.n_classes:
                break
            members = np.nonzero(d.byte_class == int(live[0]))[0]
            if len(members) != 1:
                break
            r = self._run(s, c, bytes([int(members[0])]))
            if r is None:  # pragma: no cover - the mask table and the stepping agree
                break
            out.append(int(members[0]))
            s, c = r
        return bytes(out)

    def completion_cost(self, state: int) -> int:
        s, c = self._states[state]
        cost = self._costs()
        v = int(cost[s])
        if v >= COST_UNREACHABLE:
            return COST_UNREACHABLE
        m = self._mid[s]
        if m >= 0 and self.loops[m].need:  # the costs count a fresh middle: f(X); c units are done
            v += self._f(m, self.loops[m].x - c) - self._f(m, self.loops[m].x)
        return v

    def successor_costs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed ids, the completion cost of the state each leads to; -2 for
        end-of-generation).  Exact: vectorised where the counter after the token is known
        (outside middles; from a complete unit or an ``<en>``, by a walk of the unit
        automaton over all tokens), else by stepping the token."""
        s, c = self._states[state]
        ids, nxt = self._successors(s)
        mid = self._exact_memo.get(state, -1)
        if mid == -1:
            mid = self._exact(state)  # some long tokens may overrun a loop here
        if mid is not None:
            keep = np.isin(ids, self.inner.masks.ids(mid), assume_unique=True)
            ids, nxt = ids[keep], nxt[keep]
        cost = self._costs()
        live = nxt >= 0
        out = np.where(nxt == EOG, EOG, COST_UNREACHABLE).astype(np.int64)
        out[live] = cost[nxt[live]]
        mid = np.where(live, self._mid_arr[np.maximum(nxt, 0)], -1)
        ms = self._mid[s]
        exact = np.zeros(len(ids), dtype=bool)
        for lp in self.loops:
            sel = live & (mid == lp.index) & (out < COST_UNREACHABLE)
            if not sel.any():
                continue
            at_unit_start = ms == lp.index and self._loop_of_tp[s] == lp.index
            entering = ms < 0 and self._en[s] >= 0 and self._mid[self._en[s]] == lp.index
            if at_unit_start or entering:
                # from a complete unit (or at <en>): a token whose first byte starts a unit
                # takes the units a walk of the unit automaton counts; any other token (it
                # extends the unit, or the bytes before <en>) is stepped
                idx = np.flatnonzero(sel)
                starts = self._first_arr[lp.index][_first_bytes(self.vocab)[ids[idx]]]
                exact[idx[~starts]] = True
                idx = idx[starts]
                done = (c if ms == lp.index else 0) + self._units(lp.index)[ids[idx]]
                over = done > lp.x  # crosses <tp>: it ends after the middle
                if lp.need:
                    out[idx[~over]] += self._f_vec(lp.index, lp.x - done[~over]) - self._f(lp.index, lp.x)
                exact[idx[over]] = True
            elif lp.need or ms == lp.index:
                exact |= sel
        if exact.any():
            for i in np.flatnonzero(exact).tolist():
                ns = self.next_state(state, int(ids[i]))
                out[i] = EOG if ns == EOG else (COST_UNREACHABLE if ns < 0 else self.completion_cost(ns))
        out.setflags(write=False)
        return ids, out

    def worst_successor_cost(self, state: int) -> int:
        """The largest cost among the text tokens allowed in ``state`` (from :meth:`successor_costs`)."""
        return worst_text_cost(self.successor_costs(state)[1])

    def precompute(self) -> "CountedGrammar":
        self.inner.precompute()
        return self

    def stats(self) -> dict:
        st = dict(self.inner.stats())
        st.update(backend=self.backend,
                  counted_loops=[{"units": lp.x, "need": lp.need, "tail": lp.tail} for lp in self.loops],
                  configs=len(self._states))
        return st

    # ------------------------------------------------------------------ stepping
    def _intern(self, s: int, c: int) -> int:
        key = (s, c)
        i = self._ids.get(key)
        if i is None:
            with self._lock:
                i = self._ids.get(key)
                if i is None:
                    i = len(self._states)
                    self._states.append(key)
                    self._ids[key] = i
        return i

    def _run(self, s: int, c: int, data: bytes) -> tuple[int, int] | None:
        """Step ``data`` from ``(s, c)``: ``<en>`` is taken at a prefix's end by the first byte
        that does not extend its last unit; ``<tp>`` when a unit would start after ``X``."""
        trans, bc, tp, lot, first, en, mid, own = (self._trans, self._bc, self._tp, self._loop_of_tp, self._first,
                                                   self._en, self._mid, self._own)
        for b in data:
            cb = bc[b]
            hops = 0
            while en[s] >= 0 and own[s][cb] < 0 and hops <= len(self.loops):  # (a chain of <en>)
                s, c = en[s], 0
                hops += 1
            k = lot[s]
            if k >= 0 and first[k][b]:
                if c == self.loops[k].x:
                    s, c = tp[s], 0
                else:
                    c += 1
            s = (own[s] if en[s] >= 0 else trans[s])[cb]  # (the table's rows of <en> states are merged)
            if s < 0:
                return None
            if c and mid[s] < 0:
                c = 0
        return s, c

    # ------------------------------------------------------------------ budgets
    def _successors(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed ids, next mask-table state) of DFA state ``s`` (memoized: one trie walk)."""
        hit = self._succ.get(s)
        if hit is None:
            hit = self.inner.successors(s)
            with self._lock:
                if len(self._succ) >= 256:
                    self._succ.clear()
                self._succ[s] = hit
        return hit

    def _units(self, k: int) -> np.ndarray:
        """Per token: the units of loop ``k`` it starts when read from a unit's start (a walk
        of the unit automaton over every token at once; meaningless for a token the walk
        rejects, which never lands in the middle from there)."""
        hit = self._unit_count.get(k)
        if hit is None:
            hit = _unit_starts(self.loops[k].unit, self.vocab)
            self._unit_count[k] = hit
        return hit

    def _f(self, k: int, r: int) -> int:
        return int(self._f_vec(k, np.array([r], dtype=np.int64))[0])

    def _f_vec(self, k: int, r: np.ndarray) -> np.ndarray:
        """Tokens enough for ``r`` more units of need loop ``k``: ``r // P`` tokens of ``P``
        units (the most one token takes from a complete unit back to one) and the fewest for
        the rest (``_g``: tokens of fewer units, or ``u`` tokens per unit).  Every figure is
        the cost of a real path, and the first token of that path lowers it by one."""
        p, g, lin = self._per_tok[k], self._g[k], self._lin[k]  # set by _compute_costs first
        r = np.maximum(np.asarray(r, dtype=np.int64), 0)
        if lin:
            return r * lin
        return r // p + g[r % p]

    def _costs(self) -> np.ndarray:
        if self._cost is None:
            with self._lock:
                if self._cost is None:
                    self._cost = self._compute_costs()
        return self._cost

    def _compute_costs(self) -> np.ndarray:
        """Tokens enough to reach acceptance from every DFA state (fewest, with ``<en>`` free,
        ``<tp>`` of a room middle free and ``<tp>`` of a need middle weighing ``f(X)``, a
        fresh middle's units; :meth:`completion_cost` corrects that for the units done), after
        ``u``/``P`` of each need loop."""
        n = self.inner.dfa.n_states
        succ: dict[int, np.ndarray] = {}
        seen = np.zeros(n, dtype=bool)
        todo = [0]
        seen[0] = True
        bufs = (np.full(self.inner.n_words * 32, FORBIDDEN, dtype=np.int32),
                np.zeros(self.inner.n_words, dtype=np.uint32))
        while todo:
            s = todo.pop()
            k = self._mid[s]
            near = k >= 0 and self._near[k] is not None
            if not near and not (self._any_short and len(self._cross_bad(s))):
                # every allowed token counts: the distinct successors alone (no per-token walk
                # of a string body's plain tokens, DFAGrammar.successor_states)
                ts = self.inner.successor_states(s, bufs)
                succ[s] = ts
                for t in ts.tolist() + [t for t in (self._en[s], self._tp[s]) if t >= 0]:
                    if not seen[t]:
                        seen[t] = True
                        todo.append(t)
                continue
            ids, nxt = self._successors(s)
            keep = None
            if near:  # long tokens may overrun the tail: not counted
                keep = ~self._long(self.loops[k].tail)[ids]
            if self._any_short:  # nor those that overrun a medium loop after its <en>
                bad = self._cross_bad(s, ids)
                if len(bad):
                    kb = ~np.isin(ids, bad, assume_unique=True)
                    keep = kb if keep is None else keep & kb
            if keep is not None:
                reach = np.unique(nxt[nxt >= 0])
                nxt = nxt[keep]
            ts = np.unique(nxt[nxt >= 0])
            succ[s] = ts
            if keep is not None:
                for t in reach.tolist():  # (still reached: their own costs are computed)
                    if not seen[t]:
                        seen[t] = True
                        todo.append(t)
            outs = ts.tolist() + [t for t in (self._en[s], self._tp[s]) if t >= 0]
            for t in outs:
                if not seen[t]:
                    seen[t] = True
                    todo.append(t)
        self.inner._drop_wide()
        for lp in self.loops:
            if lp.need:
                self._unit_figures(lp, succ)
        rev: dict[int, list[tuple[int, int]]] = {}
        for s, ts in succ.items():
            for t in ts.tolist():
                rev.setdefault(t, []).append((s, 1))
            if self._en[s] >= 0:
                rev.setdefault(self._en[s], []).append((s, 0))
            if self._tp[s] >= 0:
                lp = self.loops[self._loop_of_tp[s]]
                rev.setdefault(self._tp[s], []).append((s, self._f(lp.index, lp.x) if lp.need else 0))
        dist = np.full(n, COST_UNREACHABLE, dtype=np.int64)
        heap = [(0, s) for s in range(n) if self._acc[s] and seen[s]]
        for _, s in heap:
            dist[s] = 0
        heapq.heapify(heap)
        while heap:
            dv, t = heapq.heappop(heap)
            if dv > dist[t]:
                continue
            for s, w in rev.get(t, ()):
                if dv + w < dist[s]:
                    dist[s] = dv + w
                    heapq.heappush(heap, (dv + w, s))
        dist.setflags(write=False)
        return dist

    def _unit_figures(self, lp: Loop, succ: dict[int, np.ndarray]) -> None:
        """``P`` and ``_g`` of need loop ``lp`` (see :meth:`_f_vec`): ``u`` is the most tokens
        any complete-unit state needs for one more unit (BFS inside the middle); the units one
        token can take from every complete-unit state back to one are the coins of a
        fewest-coins table ``_g`` over ``0..P-1``."""
        starts = [s for s in succ if self._loop_of_tp[s] == lp.index]
        u = 1
        coins: set[int] | None = None
        for h in starts:
            dist = {h: 0}
            frontier = [h]
            found = None
            while frontier and found is None:
                nxt = []
                for s in frontier:
                    for t in succ.get(s, np.zeros(0, dtype=np.int64)).tolist():
                        if self._mid[t] != lp.index:
                            continue
                        if self._loop_of_tp[t] == lp.index:
                            found = dist[s] + 1
                            break
                        if t not in dist:
                            dist[t] = dist[s] + 1
                            nxt.append(t)
                    if found is not None:
                        break
                frontier = nxt
            u = max(u, found if found is not None else len(dist) + 1)
            ids, nx = self._successors(h)
            back = np.array([t >= 0 and self._loop_of_tp[t] == lp.index for t in nx.tolist()], dtype=bool)
            here = set(np.unique(self._units(lp.index)[ids[back]]).tolist()) - {0, -1} if back.any() else set()
            coins = here if coins is None else coins & here  # usable from every start
        coins = {c for c in (coins or set()) if c <= lp.x}
        p = max(coins) if coins else 1
        g = np.zeros(p, dtype=np.int64)
        for r in range(1, p):
            best = g[r - 1] + u
            for cn in coins:
                if cn <= r and g[r - cn] + 1 < best:
                    best = g[r - cn] + 1
            g[r] = best
        if not coins:  # no token takes whole units: u tokens per unit
            p, g = 1, np.zeros(1, dtype=np.int64)
            self._per_tok[lp.index], self._g[lp.index] = p, g
            self._unit_tok[lp.index] = u
            self._g[lp.index] = g
            self._lin[lp.index] = u
            return
        self._per_tok[lp.index], self._g[lp.index], self._unit_tok[lp.index] = p, g, u
        self._lin[lp.index] = 0


def _unit_table(unit: Dfa) -> np.ndarray:
    """The unit automaton's transitions as an int64 ``(states, 256)`` table (-1: none)."""
    table = np.full((len(unit.edges), 256), -1, dtype=np.int64)
    for q, es in enumerate(unit.edges):
        for lo, hi, t in es:
            table[q, lo:hi + 1] = t
    return table


def _unit_starts(unit: Dfa, vocab: Vocab) -> np.ndarray:
    """Per token: how many units start while a walk of ``unit`` (restarting at every
    accepting state) reads it from the start; -1 where the walk rejects it."""
    table = _unit_table(unit)
    n = len(unit.edges)
    final = np.zeros(n, dtype=bool)
    final[list(unit.accept)] = True
    blob, off = vocab.blob()
    data = np.frombuffer(blob, dtype=np.uint8)
    start = off[:-1].astype(np.int64)
    lens = (off[1:] - off[:-1]).astype(np.int64)
    state = np.zeros(len(lens), dtype=np.int64)
    count = np.zeros(len(lens), dtype=np.int64)
    alive = lens > 0
    for j in range(int(lens.max(initial=0))):
        idx = np.flatnonzero(alive & (lens > j))
        if not len(idx):
            break
        q = state[idx]
        nq = table[q, data[start[idx] + j]]
        count[idx] += q == 0
        dead = nq < 0
        alive[idx[dead]] = False
        nq = np.where(dead, 0, nq)
        state[idx] = np.where(final[nq], 0, nq)
    count[~alive] = -1
    return count


def _first_bytes(vocab: Vocab) -> np.ndarray:
    """Per token: its first byte (0 for an empty token)."""
    blob, off = vocab.blob()
    b = np.frombuffer(blob + b"\0", dtype=np.uint8)
    start = off[:-1].astype(np.int64)
    return np.where(off[1:] > off[:-1], b[start], 0).astype(np.intp)


def compile_counted(grammar: Grammar, vocab: Vocab, *, limits: Limits | None = None, grammar_key: str = "",
                    meta: dict | None = None, max_masks: int = DEFAULT_MAX_MASKS,
                    max_states: int | None = None, why: list[str] | None = None) -> CountedGrammar | None:
    """The counted form of ``grammar`` for ``vocab``, or None when no loop qualifies (the
    caller compiles ``grammar`` as it is); then ``why`` (if given) gets the reason."""
    lim = limits or DEFAULT_LIMITS
    why = [] if why is None else why
    k = window(vocab)
    tail = tail_for(vocab)
    g2, loops, products = rewrite_products(grammar, k, limits=lim, tail=tail)
    if not loops:
        why.append(f"no repetition above {min(k, tail) + 1} units with unambiguous units")
        return None
    if find_empty(grammar) is None:
        # every node of g2 derives a string exactly when the node it replaces does (markers and
        # product placeholders are specials, units the automata of items that derive one), so
        # g2's start rule is productive: the build need not walk g2 again to find it
        known_productive(g2)
    from decoding.ir.size import check_size

    try:
        est = check_size(g2, lim).states + sum(p.n_states for p in products.values())
    except LimitError as e:
        why.append(f"{len(loops)} loops counted, then {e}")
        return None
    if est > COUNTED_AT_MOST:
        why.append(f"{len(loops)} loops counted, still about {est} NFA states (tried up to COUNTED_AT_MOST="
                   f"{COUNTED_AT_MOST})")
        return None  # still large counted: the pushdown back-end's case
    markers = {t for lp in loops for t in (lp.en, lp.tp)}
    literal = [t for t in g2.specials() if t not in markers and t not in products and vocab.special_token(t) is None]
    if products:
        d = _compile_products(g2, products, literal=literal, max_states=max_states, limits=lim)
    else:
        d = compile_dfa(g2, max_states=max_states, literal_specials=literal, limits=lim, size_checked=True)
    d = d.prune(vocab.single_byte_tokens())
    cg = _assemble(d, loops, vocab, grammar_key=grammar_key, meta=meta, max_masks=max_masks)
    if cg is None:
        why.append(f"{len(loops)} loops counted, but the counted automaton lets two counters overlap or a "
                   "unit end ambiguously")
    return cg


def room_tail(vocab: Vocab) -> int:
    """The explicit units after a room middle outside products for ``vocab``, as
    :func:`rewrite_products` uses them (:func:`tail_for`, between 2 and the window ``K``)."""
    return max(2, min(tail_for(vocab), window(vocab)))


def counted_program(code: Sequence[int], lits: bytes, root: int, xs: Sequence[int], tail: int, unit_item: Node,
                    vocab: Vocab, *, limits: Limits | None = None, max_nfa: int | None = None,
                    max_states: int | None = None, grammar_key: str = "", meta: dict | None = None,
                    max_masks: int = DEFAULT_MAX_MASKS, leaves: Sequence[Dfa] = (),
                    leaf_at: Sequence[int] = ()) -> CountedGrammar | None:
    """The counted grammar of a program written after the plain prefix
    (:func:`~decoding.backends.automaton.program_dfa`) whose room loop ``i`` (outside products,
    ``tail`` explicit units: :func:`room_tail`) has its ``<en>`` as special ``2i``, its ``<tp>``
    as special ``2i + 1``, at most ``xs[i]`` units in its middle and ``unit_item`` (a regular
    IR node) as its unit (``leaves``/``leaf_at``: its automaton leaves, as ``program_dfa``
    takes them): the grammar :func:`compile_counted` makes of the same rewritten
    language.  None where the caller compiles another way: the unit does not qualify, the
    program needs more than ``max_nfa`` NFA states or the Python builder, or
    :func:`_assemble` refuses the automaton."""
    found = _unit(unit_item, Grammar.single(unit_item), limits)
    if found is None:
        return None
    first, unit = found
    loops = tuple(Loop(i, x, False, first, unit, tail=tail) for i, x in enumerate(xs))
    d = _automaton.program_dfa(code, lits, root, limits=limits, max_nfa=max_nfa, max_states=max_states,  # type: ignore[arg-type]
                               specials=tuple(t for lp in loops for t in (lp.en, lp.tp)), leaves=leaves,
                               leaf_at=leaf_at)
    if d is None:
        return None
    d = d.prune(vocab.single_byte_tokens())
    return _assemble(d, loops, vocab, grammar_key=grammar_key, meta=meta, max_masks=max_masks)


#: find the middles' region by :func:`_walked_region` (False: by a reverse search of the
#: whole table, as a reference)
WALK_MIDDLES = True
#: :func:`_unit_step` by unit (bounded: cleared when full)
_STEPS: dict[Dfa, np.ndarray] = {}
#: :data:`_STEPS` by ``id`` of the unit (unit, walk): units come from the :data:`_UNITS` memo,
#: the same objects in every compile, and a unit's hash walks all its edges
_STEPS_ID: dict[int, tuple[Dfa, np.ndarray]] = {}
#: :func:`_walked_region` marks the pairs it has seen in a bool array when there are at most
#: this many (states x walk states), else in a set
WALK_MARK_MAX = 1 << 22


def _unit_step(unit: Dfa) -> np.ndarray:
    """The walk of ``U*`` over bytes (``(states, 256)``, -1: dead): at a unit's boundary (its
    start or a complete unit) a first byte starts a unit, otherwise the unit's move (no first
    byte extends a complete unit: one walk)."""
    by_id = _STEPS_ID.get(id(unit))
    if by_id is not None and by_id[0] is unit:
        return by_id[1]
    hit = _STEPS.get(unit)
    if hit is None:
        table = _unit_table(unit)
        bound = np.zeros(len(table), dtype=bool)
        bound[list(unit.accept)] = True
        bound[0] = True
        first = table[0] >= 0
        hit = np.where(bound[:, None] & first[None, :], table[0][None, :], table)
        hit.setflags(write=False)
        if len(_STEPS) >= 256:
            _STEPS.clear()
        _STEPS[unit] = hit
    if len(_STEPS_ID) >= 256:
        _STEPS_ID.clear()
    _STEPS_ID[id(unit)] = (unit, hit)  # (the unit kept alive with it: its id is not reused)
    return hit


def _walked_region(d: DFA, loops: Sequence[Loop], col: dict[str, int],
                   moves: dict[int, tuple[np.ndarray, np.ndarray]], any_tp: np.ndarray) -> np.ndarray | None:
    """A set of states holding every middle (the states that reach a ``<tp>`` move of their
    loop by bytes), sorted, found without a reverse search of the whole table: the states
    ``d`` reaches from an ``<en>`` target of loop ``k`` by bytes ``w`` that ``U*`` of ``k``'s
    unit reads (:func:`_unit_step`), for every loop with both markers.  Why it holds them: a
    state ``s`` with bytes ``v`` to a ``<tp>`` move of ``k`` is reached by some ``P``, and
    ``P v <tp> z`` is accepted; the thread that reads that ``<tp>`` read ``<en>`` of ``k`` last
    among the specials (a marker kills the threads that cannot read it) and bytes of ``U*``
    after it, so ``P = P1 <en> w`` with ``U*`` reading ``w v``.  A search inside the region
    then finds each middle as the whole table's would (a byte path to a ``<tp>`` state stays
    in the middle).  None (search the whole table) when a loop has no unit automaton, its
    unit tells apart bytes of one of ``d``'s byte classes, it has one marker without the
    other, or a ``<tp>`` state (``any_tp``: all of them, increasing) is not in the region
    (which the argument excludes)."""
    ncls = d.n_classes
    bc = d.byte_class.astype(np.int64)
    rep = np.zeros(ncls, dtype=np.int64)
    rep[bc[::-1]] = np.arange(255, -1, -1)  # a byte of each class (the smallest)
    tabs: list[np.ndarray] = []
    heads: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    nq = 0
    by_unit: dict[int, tuple[Dfa, np.ndarray | None]] = {}  # id(unit) -> (unit, by_class or None: refused)
    for lp in loops:
        has_en, has_tp = lp.en in col and col[lp.en] in moves, lp.tp in col and col[lp.tp] in moves
        if not has_tp and not has_en:
            continue
        if has_tp != has_en or lp.unit is None:
            return None
        known = by_unit.get(id(lp.unit))
        if known is None or known[0] is not lp.unit:
            step = _unit_step(lp.unit)
            by_class = step[:, rep]
            known = by_unit[id(lp.unit)] = (lp.unit, by_class if (by_class[:, bc] == step).all() else None)
        by_class = known[1]
        if by_class is None:
            return None
        tabs.append(np.where(by_class >= 0, by_class + nq, -1))
        tgt = moves[col[lp.en]][1].astype(np.int64)
        heads.append(tgt)
        firsts.append(np.full(len(tgt), nq, dtype=np.int64))
        nq += len(by_class)
    if not tabs:
        return None
    walk = np.concatenate(tabs)
    byte_t = d.trans[:, :ncls]
    keys = np.unique(np.concatenate(heads) * nq + np.concatenate(firsts))
    found = [keys]
    if d.n_states * nq <= WALK_MARK_MAX:  # the pairs seen in an array: no Python per pair
        mark = np.zeros(d.n_states * nq, dtype=bool)
        mark[keys] = True
        while len(keys):
            ts = byte_t[keys // nq]
            tq = walk[keys % nq]
            ok = (ts >= 0) & (tq >= 0)
            nxt = ts[ok].astype(np.int64) * nq + tq[ok]
            nxt = nxt[~mark[nxt]]
            if len(nxt) > 1:
                nxt = np.unique(nxt)
            mark[nxt] = True
            keys = nxt
            found.append(keys)
    else:
        seen = set(keys.tolist())
        while len(keys):
            s_, q_ = keys // nq, keys % nq
            ts = byte_t[s_].astype(np.int64)
            tq = walk[q_]
            ok = (ts >= 0) & (tq >= 0)
            nxt = np.unique(ts[ok] * nq + tq[ok])
            keys = np.array([x for x in nxt.tolist() if x not in seen], dtype=np.int64)
            seen.update(keys.tolist())
            found.append(keys)
    region = np.unique(np.concatenate(found) // nq)
    inside = np.zeros(d.n_states, dtype=bool)
    inside[region] = True
    if not inside[any_tp].all():
        return None
    return region


def _assemble(d: DFA, loops: Sequence[Loop], vocab: Vocab, *, grammar_key: str, meta: dict | None,
              max_masks: int) -> CountedGrammar | None:
    """Check the built automaton (see the module docstring) and wrap it; None if a loop's
    units are not unambiguous in context."""
    n, ncls = d.n_states, d.n_classes
    col = {t: j for j, t in enumerate(d.specials)}
    byte_t = d.trans[:, :ncls]
    keep = [j for j, t in enumerate(d.specials) if not t.startswith(MARK)]
    trans2 = np.concatenate([byte_t, d.trans[:, [ncls + j for j in keep]]], axis=1) if keep else byte_t.copy()
    acc2 = d.accepting.copy()
    mid = np.full(n, -1, dtype=np.int64)
    moves = _marker_moves(d)
    empty = np.zeros(0, dtype=np.int32)
    tp_src: dict[int, np.ndarray] = {}  # loop -> its states with a <tp> move (increasing)
    for lp in loops:
        if lp.tp in col:
            tp_src[lp.index] = moves.get(col[lp.tp], (empty, empty))[0].astype(np.int64)
    if tp_src:
        # the middles: states that reach a complete unit (a <tp> move) by bytes alone.  Their
        # union by one reverse search in C; each loop's part by a search inside the union (a
        # state on a byte path to a <tp> state reaches it too, so the path stays inside)
        any_tp = np.unique(np.concatenate(list(tp_src.values())))
        region = _walked_region(d, loops, col, moves, any_tp) if WALK_MIDDLES else None
        if region is None:
            col_ok = np.zeros(d.trans.shape[1], dtype=bool)
            col_ok[:ncls] = True
            region = np.flatnonzero(_automaton._bfs(d.trans, any_tp, reverse=True, col_ok=col_ok) >= 0)
        local = np.full(n, -1, dtype=np.int64)
        local[region] = np.arange(len(region))
        sub = byte_t[region].astype(np.int64)
        src, _ = np.nonzero(sub >= 0)
        dst = local[sub[sub >= 0]]
        inside = dst >= 0
        src, dst = src[inside], dst[inside]
        order = np.argsort(dst, kind="stable")
        rs = src[order].tolist()  # reverse edges of local t: rs[rp[t]:rp[t+1]] (local numbers)
        rp = np.searchsorted(dst[order], np.arange(len(region) + 1)).tolist()
    for lp in loops:
        if lp.tp not in col:
            continue  # the middle is unreachable (pruned away)
        tps = local[tp_src[lp.index]].tolist()
        seen = set(tps)
        todo = list(tps)
        while todo:  # states that reach a complete unit by bytes alone: the middle
            t = todo.pop()
            for x in rs[rp[t]:rp[t + 1]]:
                if x not in seen:
                    seen.add(x)
                    todo.append(x)
        members = region[np.fromiter(seen, dtype=np.int64, count=len(seen))]
        if (mid[members] >= 0).any():
            return None  # two middles share a state
        mid[members] = lp.index
        ts = tp_src[lp.index]
        at = np.minimum(np.searchsorted(ts, members), max(len(ts) - 1, 0))
        inner_states = members[~(ts[at] == members)] if len(ts) else members
        if d.accepting[inner_states].any():
            return None
        outs = byte_t[inner_states]
        if (outs[outs >= 0] >= 0).size and (mid[outs[outs >= 0]] != lp.index).any():
            return None  # a started unit can leave the middle without completing
        if lp.product and not _mirrors_agree(d, lp, window(vocab)):
            return None  # inside a product, a token could tell the counter
    nkeep = [ncls + j for j in keep]
    en_to: dict[int, int] = {}
    for lp in loops:
        if lp.en in col:
            src, tgt = moves.get(col[lp.en], (empty, empty))
            for s, t in zip(src.tolist(), tgt.tolist()):
                if s in en_to:
                    return None  # two loops entered from one state (one counter per state)
                en_to[s] = t
    if en_to:
        # the row of an <en> state: its own, then (where it has no move) the rows of the <en>
        # chain it starts (a middle's start may itself have an <en>: adjacent nullable loops);
        # every chain a step at a time, all at once (the rows read are the table's own: the
        # merged rows are written at the end)
        heads = np.fromiter(en_to, dtype=np.int64, count=len(en_to))
        rows = trans2[heads]
        acc = d.accepting[heads].copy()
        seen = [{s} for s in en_to]
        act = np.arange(len(heads))
        cur = np.fromiter(en_to.values(), dtype=np.int64, count=len(en_to))
        while len(act):
            row, there = rows[act], trans2[cur]
            if ((row >= 0) & (there >= 0) & (row != there)).any():
                return None  # a byte both continues before <en> and follows it
            rows[act] = np.where(row >= 0, row, there)
            acc[act] |= d.accepting[cur]
            nxt: list[tuple[int, int]] = []
            for i, h in zip(act.tolist(), cur.tolist()):
                if h in en_to and h not in seen[i]:
                    seen[i].add(h)
                    nxt.append((i, en_to[h]))
            act = np.array([i for i, _ in nxt], dtype=np.int64)
            cur = np.array([h for _, h in nxt], dtype=np.int64)
        trans2[heads] = rows
        acc2[heads] = acc
    mask_dfa = DFA(d.byte_class, np.ascontiguousarray(trans2.astype(d.trans.dtype, copy=False)), acc2,
                   tuple(d.specials[j] for j in keep), ncls)
    ids = tuple(int(vocab.special_token(t)) for t in mask_dfa.specials)  # type: ignore[arg-type]
    m = dict(meta or {})
    inner = DFAGrammar(mask_dfa, vocab, ids, grammar_key=grammar_key, meta=m, max_masks=max_masks).prepare()
    cg = CountedGrammar(d, tuple(loops), inner, grammar_key=grammar_key, meta=m, marks=moves)
    cg._mid = mid.tolist()
    cg._mid_arr = mid
    if cg._any_short:
        cg._cross_info()  # (a read of the whole table: here, not in a first mask)
    return cg
