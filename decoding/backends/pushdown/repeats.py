"""Large bounded repetitions counted in binary on the pushdown back-end's stack.

The pushdown back-end builds one DFA per rule, so a rule holding ``x{lo,hi}`` with a large
``hi`` unrolls it (a JSON string of ``maxLength`` 65535: ~900k DFA states; 16 Snowplow
schemas were over the limits).  :func:`split_repeats` rewrites such a repetition into calls
of helper rules (``c``, ``n``: numbers of copies of ``x``; ``B``: the block, the largest power
of two of copies estimated at most ``block``; ``N``: the literal after the repetition, folded
into the helpers so that a token ending the repetition, ``abc"``, stays in one frame):

- ``E(c)`` (``c`` a power of two): ``x{c}`` when ``c`` is ``B`` or at most ``LEAF`` (a
  leaf), else ``E(c/2) E(c/2)``;
- ``x{c}``: the calls ``E(2**j)`` for the bits of ``c`` (the bits below ``SMALL``: inline);
- ``U(n)`` = ``x{0,n} N``: ``x{0,n} N`` itself below ``SMALL`` (inline) or ``B`` (a leaf;
  one per distinct remainder ``hi - lo`` modulo powers of two from ``B`` up), else
  ``U(h-1) | E(h) U(n-h)``, ``h`` the largest power of two ``<= n``;
- ``x{lo,hi} N`` is ``x{lo} U(hi-lo)``, ``x{lo,} N`` is ``x{lo} x* N``.

So a text of length ``p`` inside the repetition is read by leaves of ``B`` copies aligned on
multiples of ``B`` (the remainder below ``B`` only near ``hi``); a token crosses frames only
at a leaf's end.

Invariants
- The same language: every helper derives exactly the copies it names, and ``U`` splits the
  counts into disjoint ranges (one derivation per count).  Helper rules never refer to
  themselves (``E(c)``, ``U(n)`` call only smaller ones), so the recursion bound
  (``Grammar.max_depth``) of the other rules is unchanged, and so is the language of
  :func:`decoding.backends.automaton.compile_dfa` on the result.
- Few stacks: only a repetition whose copies are read one way as the text comes is
  rewritten: its item is a non-nullable prefix code without Refs (its estimate says so),
  and it sits in a ``Seq`` after items that are prefix codes and before a non-nullable item
  whose first bytes cannot start a copy (a JSON string between its quotes, the ``("," x)``
  copies of an array of strings between its first item and ``]``): where it starts (given
  where the ``Seq`` starts), where each copy ends and where it ends are then fixed by the
  text, and a configuration holds O(log hi) stacks for it.  Where the ``Seq`` itself may
  start at several places of the text (an ambiguous rule around it) the stacks multiply as
  the unrolled DFA's subsets do; past ``MAX_STACKS`` the matcher raises LimitError.
- Rule names: ``<rule><x<k>*<c>>`` (exactly ``c`` copies), ``<rule><x<k>*0..<n>>`` and
  ``<rule><x<k>*0..<n> then <N>>``, where ``<rule>`` is the first rule (grammar order)
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

__all__ = ["split_repeats", "SPLIT_ABOVE", "BLOCK_STATES"]

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
    out = _Splitter(grammar, *params).run()
    with _lock:
        _remember(grammar, params, None if out is grammar else out)
        if out is not grammar:
            _remember(out, params, None)
    return out


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
        self._same = None

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

    def _qualifies(self, items: tuple[Node, ...], i: int) -> bool:
        r: Repeat = items[i]  # type: ignore[assignment]
        copies = r.max if r.max is not None else r.min + 1
        if copies <= 2:
            return False
        ex = self._est(r.item)
        if ex.refs or not ex.pf or ex.lo < 1 or ex.states * copies <= self.above:
            return False
        if not all(self._est(p).pf for p in items[:i]):
            return False
        nxt = self._est(items[i + 1])
        return nxt.lo >= 1 and not (nxt.first & ex.first)

    # ------------------------------------------------------------------ the helpers
    def _unit(self, x: Node) -> _Unit:
        if self._same is None:
            from decoding.backends.pushdown.index import _SameBody
            self._same = _SameBody()
        key = self._same.key(x)  # (Ref-free: a number)
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
        """``r`` followed by the literal ``then`` (None: nothing folded; ``then`` is folded
        only where a ``U`` follows, i.e. ``hi > lo``)."""
        u = self._unit(r.item)
        parts = self._exact(u, r.min)
        if r.max is None:
            parts.append(Repeat(u.item, 0, None))
        elif r.max > r.min:
            parts.append(self._upto(u, r.max - r.min, then))
            then = None
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
            if c == u.block or c <= LEAF:
                body: Node = self._copies(u, c)
            else:
                half = self._e(u, c // 2)
                body = Seq((half, half))
            self.new[name] = body
        return Ref(name)

    def _exact(self, u: _Unit, c: int) -> list[Node]:
        """``x{c}`` as parts of a Seq: the ``E`` calls of ``c``'s bits from ``SMALL`` up,
        then the rest inline."""
        parts: list[Node] = []
        p = 1 << max(0, c.bit_length() - 1)
        while p >= SMALL:
            if c & p:
                parts.append(self._e(u, p))
            p >>= 1
        if c % SMALL:
            parts.append(self._copies(u, c % SMALL))
        return parts

    def _upto(self, u: _Unit, n: int, then: Node | None) -> Node:
        """``x{0,n} then`` (``n >= 1``): inline below ``SMALL``, else a call of ``U(n)``."""
        tail = () if then is None else (then,)
        if n < SMALL:
            return Seq((Repeat(u.item, 0, n), *tail)) if tail else Repeat(u.item, 0, n)
        spec = f"0..{n}" if then is None else f"0..{n} then {_show(then)}"
        name, new = self._name(u, spec)
        if new:
            if n < u.block:  # a leaf: x{0,n} then
                body: Node = Seq((Repeat(u.item, 0, n), *tail)) if tail else Repeat(u.item, 0, n)
            else:
                h = 1 << (n.bit_length() - 1)
                low = self._upto(u, h - 1, then)
                high: Node = self._e(u, h)
                if n > h:
                    high = Seq((high, self._upto(u, n - h, then)))
                elif tail:
                    high = Seq((high, *tail))
                body = Choice((low, high))
            self.new[name] = body
        return Ref(name)


def _show(n: Node) -> str:
    """A folded literal as rule names show it."""
    return repr(n.data.decode("latin-1")) if n.__class__ is Lit else "?"  # type: ignore[union-attr]
