"""Large bounded repetitions counted in binary on the pushdown back-end's stack.

The pushdown back-end builds one DFA per rule, so a rule holding ``x{lo,hi}`` with a large
``hi`` unrolls it (a JSON string of ``maxLength`` 65535: ~900k DFA states; 16 Snowplow
schemas were over the limits).  :func:`split_repeats` rewrites such a repetition into calls
of helper rules (``c``, ``n``: numbers of copies of ``x``; ``B``: the block, the largest power
of two of copies estimated at most ``block``; ``N``: the literal after the repetition, folded
into the helpers so that a token ending the repetition, ``abc"``, stays in one frame):

- ``E(c)`` (``c`` a power of two): ``x{c}`` when ``c`` is ``B`` or below it and at most
  ``LEAF`` (a leaf), else ``E(c/2) E(c/2)``;
- ``U(lo, n)`` = ``x{lo,n} N``: itself below ``SMALL`` copies (inline) or ``B`` (a leaf;
  one per distinct remainder), else, ``h`` the largest power of two ``<= n``,
  ``E(h) U(lo-h, n-h)`` when ``lo >= h`` and ``U(lo, h-1) | E(h) U(0, n-h)`` when not;
- ``x{lo,hi} N`` is ``U(lo, hi)``; ``x{lo,} N`` is ``x{lo} x* N`` with ``x{lo}`` the calls
  ``E(2**j)`` for the bits of ``lo`` (the bits below ``SMALL``: inline).

So the copies are read by leaves of ``B`` copies aligned on multiples of ``B`` (the remainder
below ``B`` only near ``hi``, ``lo`` inside the leaves); a token crosses frames only at a
leaf's end.

Invariants
- The same language: every helper derives exactly the copies it names, and ``U`` splits the
  counts into disjoint ranges (one derivation per count).  Helper rules never refer to
  themselves (``E(c)``, ``U(n)`` call only smaller ones), so the recursion bound
  (``Grammar.max_depth``) of the other rules is unchanged, and so is the language of
  :func:`decoding.backends.automaton.compile_dfa` on the result.
- Few stacks: only a repetition whose copies are read one way as the text comes is
  rewritten: its item is a non-nullable prefix code without Refs (its estimate says so, or
  it is a ``Seq`` of such and of repetitions whose end the next item marks: :meth:`_Splitter._pf_seq`),
  and it sits in a ``Seq`` after items that are prefix codes or a literal whose last byte
  cannot start a copy, and before a non-nullable item whose first bytes cannot start one (a
  JSON string between its quotes; the ``("," x)`` copies of an array of strings between its
  first item and ``]``, also when they end an optional ``Seq``): where it starts (given where
  the ``Seq`` starts), where each copy ends and where it ends are then fixed by the text,
  and a configuration holds O(log hi) stacks for it.  Where the ``Seq`` itself may
  start at several places of the text (an ambiguous rule around it) the stacks multiply as
  the unrolled DFA's subsets do; past ``MAX_STACKS`` the matcher raises LimitError.
- Rule names: ``<rule><x<k>*<c>>`` (exactly ``c`` copies), ``<rule><x<k>*<lo>..<n>>`` and
  ``<rule><x<k>*<lo>..<n> then <N>>``, where ``<rule>`` is the first rule (grammar order)
  holding a repetition of the ``k``-th distinct item; a name already taken gets ``'``
  appended until it is not.  The same grammar gives the same names; items with equal
  structure share their helpers, across rules and bounds.
- Idempotent: what is left (leaves, inline parts) is below the threshold, so a rewritten
  grammar is returned as it is; a grammar with nothing to rewrite is returned itself.
"""

from __future__ import annotations

import threading
import weakref

from decoding.ir import Choice, Grammar, Lit, Node, Ref, Repeat, Seq
from decoding.ir.nodes import plain_ids
from decoding.ir.size import Estimate, _node_estimate

__all__ = ["split_repeats", "helper_rules", "SPLIT_ABOVE", "BLOCK_STATES"]

#: a repetition estimated above this many NFA states unrolled (item estimate times copies)
#: is rewritten: a JSON string character (72) past 1,388 copies (its DFA: ~14 states a copy,
#: ~19k states); below, the unrolled rule DFA is cheap and its masks the fastest
SPLIT_ABOVE = 100_000
#: the leaves ``x{B}`` and ``x{0,B-1} N`` hold ``B`` copies, the largest power of two estimated
#: at most this (a JSON string character: 1024 copies, a 14k-state DFA each): a token crosses
#: frames once every ``B`` copies
BLOCK_STATES = 80_000
#: bounds below this many copies are left inline in the helper that needs them (no frame)
SMALL = 8
#: ``E(c)`` of at most this many copies is a leaf too (the bits of ``lo`` below ``B``)
LEAF = 64

_lock = threading.Lock()
#: id(grammar) -> (weak reference to it, its (above, block), the result: the grammar itself
#: when nothing is rewritten, else a strong reference to the rewritten one)
_DONE: dict[int, tuple[weakref.ref, tuple[int, int], object]] = {}


def split_repeats(grammar: Grammar, *, above: int | None = None, block: int | None = None) -> Grammar:
    """``grammar`` with its large bounded repetitions rewritten into helper rules (see the
    module docstring; ``above``/``block`` default to :data:`SPLIT_ABOVE` /
    :data:`BLOCK_STATES`, read at call time).  The grammar itself when nothing qualifies.
    Remembered per grammar object (a rewritten grammar is its own result)."""
    params = (SPLIT_ABOVE if above is None else above, BLOCK_STATES if block is None else block)
    key = id(grammar)
    with _lock:
        hit = _DONE.get(key)
        if hit is not None and hit[0]() is grammar and hit[1] == params:
            return grammar if hit[2] is None else hit[2]  # type: ignore[return-value]
    sp = _Splitter(grammar, *params)
    out = sp.run()
    with _lock:
        _remember(grammar, params, None if out is grammar else out)
        if out is not grammar:
            _remember(out, params, None)
            _HELPERS[id(out)] = (weakref.ref(out, lambda _r, key=id(out): _HELPERS.pop(key, None)),
                                 frozenset(sp.new))
    return out


def helper_rules(grammar: Grammar) -> frozenset[str]:
    """The helper rules :func:`split_repeats` added to make ``grammar`` (empty for any other)."""
    hit = _HELPERS.get(id(grammar))
    return hit[1] if hit is not None and hit[0]() is grammar else frozenset()


#: id(rewritten grammar) -> (weak reference to it, the names of its helper rules)
_HELPERS: dict[int, tuple[weakref.ref, frozenset[str]]] = {}


def _remember(g: Grammar, params: tuple[int, int], out: object) -> None:
    key = id(g)
    _DONE[key] = (weakref.ref(g, lambda _r, key=key: _DONE.pop(key, None)), params, out)


class _Unit:
    """One distinct repeated item: its number, block, first owner rule and helper names."""
    __slots__ = ("k", "item", "block", "owner", "names")

    def __init__(self, k: int, item: Node, block: int, owner: str) -> None:
        self.k = k
        self.item = item
        self.block = block
        self.owner = owner
        self.names: dict[str, str] = {}


class _Splitter:
    def __init__(self, g: Grammar, above: int, block: int) -> None:
        self.g = g
        self.above = above
        self.block = block
        self.memo: dict[int, Node] = {}
        self.keep: list[Node] = []  # the mapped originals stay alive while ids name them
        self.est_memo: dict[int, Estimate] = {}
        self.est_keep: list = []
        self.units: dict[object, _Unit] = {}
        self.taken = set(g.names)
        self.new: dict[str, Node] = {}  # helper rules, in the order they were made
        self.rule = ""  # the rule being mapped (the owner of the units it makes)

    def run(self) -> Grammar:
        rules = []
        changed = False
        for name, body in self.g.rules:
            self.rule = name
            out = self._map(body)
            changed |= out is not body
            rules.append((name, out))
        if not changed:
            return self.g
        return Grammar(self.g.start, tuple(rules) + tuple(self.new.items()), self.g.max_depth)

    def _est(self, n: Node) -> Estimate:
        return _node_estimate(n, False, self.est_memo, self.est_keep)

    def _map(self, root: Node) -> Node:
        """``root`` with the qualifying repetitions of its Seqs rewritten (iterative,
        memoized by identity: a shared subtree is mapped once, an unchanged one is itself)."""
        memo = self.memo
        plain = plain_ids()
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            cls = n.__class__
            if id(n) in plain or not (cls is Seq or cls is Choice or cls is Repeat):
                memo[id(n)] = n  # (Inter/Diff may hold no Ref: left as they are)
                self.keep.append(n)
                continue
            kids = (n.item,) if cls is Repeat else n.items  # type: ignore[union-attr]
            if not ready:
                stack.append((n, True))
                stack.extend((k, False) for k in kids if id(k) not in memo)
                continue
            new: list = [memo[id(k)] for k in kids]
            folded = False
            if cls is Seq:
                for i in range(1, len(kids) - 1):
                    if new[i] is kids[i] and kids[i].__class__ is Repeat and self._qualifies(kids, i):
                        nxt = kids[i + 1]
                        if nxt.__class__ is Lit:  # folded into the helpers: None in its place
                            new[i] = self._rewrite(kids[i], nxt)  # type: ignore[arg-type]
                            new[i + 1] = None
                            folded = True
                        else:
                            new[i] = self._rewrite(kids[i], None)  # type: ignore[arg-type]
                for i in range(len(kids) - 1):  # ``(P x{lo,hi})? N``: an array's copies before "]"
                    if new[i] is kids[i] and new[i + 1] is not None:
                        new[i] = self._tail(kids[i], kids[i + 1])
                if folded:
                    new = [k for k in new if k is not None]
            if not folded and all(a is b for a, b in zip(new, kids)):
                out = n
            elif cls is Repeat:
                out = Repeat(new[0], n.min, n.max)  # type: ignore[union-attr]
            else:
                out = cls(tuple(new))  # type: ignore[call-arg]
            memo[id(n)] = out
            self.keep.append(n)
        return memo[id(root)]

    def _tail(self, n: Node, nxt: Node) -> Node:
        """``n`` (followed by ``nxt``) with the repetition that ends it rewritten when ``n`` is
        ``Seq(P, x{lo,hi})`` or that made optional and it qualifies there (nothing folded: the
        optional's other branch is followed by ``nxt`` too); else ``n``."""
        opt = n.__class__ is Repeat and n.min == 0 and n.max == 1  # type: ignore[union-attr]
        s = n.item if opt else n  # type: ignore[union-attr]
        if s.__class__ is not Seq or len(s.items) < 2 or self.memo.get(id(s)) is not s:  # type: ignore[union-attr]
            return n
        items = s.items  # type: ignore[union-attr]
        r = items[-1]
        if r.__class__ is not Repeat or self.memo.get(id(r)) is not r or \
                not self._qualifies(items + (nxt,), len(items) - 1):
            return n
        out: Node = Seq(items[:-1] + (self._rewrite(r, None),))  # type: ignore[arg-type]
        return Repeat(out, 0, 1) if opt else out

    def _pf_seq(self, items: tuple[Node, ...]) -> bool:
        """Known to be a prefix code: each item is one (its estimate says so), or a
        repetition of a non-nullable prefix code followed by a non-nullable item whose first
        bytes cannot start a copy (``"`` chars{0,12} ``"``: where the copies end is read)."""
        for i, it in enumerate(items):
            if self._est(it).pf:
                continue
            if it.__class__ is not Repeat or i + 1 == len(items):
                return False
            e, nxt = self._est(it.item), self._est(items[i + 1])  # type: ignore[union-attr]
            if not e.pf or e.lo < 1 or nxt.lo < 1 or nxt.first & e.first:
                return False
        return True

    def _qualifies(self, items: tuple[Node, ...], i: int) -> bool:
        r: Repeat = items[i]  # type: ignore[assignment]
        copies = r.max if r.max is not None else r.min + 1
        if copies <= 2:
            return False
        x = r.item
        ex = self._est(x)
        if ex.refs or ex.lo < 1 or ex.states * copies <= self.above or \
                not (ex.pf or x.__class__ is Seq and self._pf_seq(x.items)):  # type: ignore[union-attr]
            return False
        prev = items[i - 1]  # (where it starts: after a prefix code, or after a literal whose
        # last byte cannot start a copy, as a JSON string's opening quote or the closing one of
        # an array's first string item)
        if not (prev.__class__ is Lit and prev.data and not (ex.first >> prev.data[-1]) & 1) and \
                not all(self._est(p).pf for p in items[:i]):  # type: ignore[union-attr]
            return False
        nxt = self._est(items[i + 1])
        return nxt.lo >= 1 and not (nxt.first & ex.first)

    # ------------------------------------------------------------------ the helpers
    def _unit(self, x: Node) -> _Unit:
        try:  # (the node itself: frozen, compared by structure; a deep one by identity)
            key: object = x
            u = self.units.get(key)
        except RecursionError:
            key = id(x)
            self.keep.append(x)
            u = self.units.get(key)
        if u is None:
            s = max(1, self._est(x).states)
            b = 1
            while s * b * 2 <= self.block:
                b *= 2
            u = self.units[key] = _Unit(len(self.units), x, b, self.rule)
        return u

    def _name(self, u: _Unit, spec: str) -> tuple[str, bool]:
        """(the helper's name, whether it is new)."""
        hit = u.names.get(spec)
        if hit is not None:
            return hit, False
        name = f"{u.owner}<x{u.k}*{spec}>"
        while name in self.taken:
            name += "'"
        self.taken.add(name)
        u.names[spec] = name
        return name, True

    def _rewrite(self, r: Repeat, then: Node | None) -> Node:
        """``r`` followed by the literal ``then`` (None: nothing folded)."""
        u = self._unit(r.item)
        if r.max is not None:
            return self._range(u, r.min, r.max, then)
        parts = self._exact(u, r.min)
        parts.append(Repeat(u.item, 0, None))
        if then is not None:
            parts.append(then)
        return parts[0] if len(parts) == 1 else Seq(tuple(parts))

    def _copies(self, u: _Unit, c: int) -> Node:
        """``x{c}`` inline (``c`` at most the block)."""
        return u.item if c == 1 else Repeat(u.item, c, c)

    def _e(self, u: _Unit, c: int) -> Ref:
        """A call of ``E(c)``: exactly ``c`` copies (``c`` a power of two)."""
        name, new = self._name(u, str(c))
        if new:
            if c == u.block or c < u.block and c <= LEAF:
                body: Node = self._copies(u, c)
            else:
                half = self._e(u, c // 2)
                body = Seq((half, half))
            self.new[name] = body
        return Ref(name)

    def _exact(self, u: _Unit, c: int) -> list[Node]:
        """``x{c}`` as parts of a Seq (before ``x*``): the ``E`` calls of ``c``'s bits from
        ``SMALL`` up, then the rest inline."""
        parts: list[Node] = []
        p = 1 << max(0, c.bit_length() - 1)
        while p >= SMALL:
            if c & p:
                parts.append(self._e(u, p))
            p >>= 1
        if c % SMALL:
            parts.append(self._copies(u, c % SMALL))
        return parts

    def _range(self, u: _Unit, lo: int, n: int, then: Node | None) -> Node:
        """``x{lo,n} then`` (``lo <= n``): inline below ``SMALL``, else a call of ``U(lo, n)``:
        a leaf below ``B``; else, ``h`` the largest power of two ``<= n``, ``E(h) U(lo-h, n-h)``
        when ``lo >= h``, else ``U(lo, h-1) | E(h) U(0, n-h)`` (the counts ``lo..h-1`` and
        ``h..n``: one derivation each)."""
        tail = () if then is None else (then,)
        if n < SMALL:
            body: Node = self._copies(u, n) if lo == n else Repeat(u.item, lo, n)
            return Seq((body, *tail)) if tail else body
        spec = f"{lo}..{n}" if then is None else f"{lo}..{n} then {_show(then)}"
        name, new = self._name(u, spec)
        if new:
            if n < u.block:  # a leaf: x{lo,n} then
                leaf: Node = self._copies(u, n) if lo == n else Repeat(u.item, lo, n)
                body = Seq((leaf, *tail))
            else:
                h = 1 << (n.bit_length() - 1)
                high: Node = self._e(u, h)
                if n > h:
                    high = Seq((high, self._range(u, max(0, lo - h), n - h, then)))
                elif tail:
                    high = Seq((high, *tail))
                body = high if lo >= h else Choice((self._range(u, lo, h - 1, then), high))
            self.new[name] = body
        return Ref(name)


def _show(n: Node) -> str:
    """A folded literal as rule names show it."""
    return repr(n.data.decode("latin-1")) if n.__class__ is Lit else "?"  # type: ignore[union-attr]
