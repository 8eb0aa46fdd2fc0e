"""The one regular-expression engine: an ECMA-262 subset -> Grammar IR over code points.

A pattern describes *decoded* characters; the caller supplies an :data:`Encoder` that
spells one character of a code-point set in its output syntax (JSON string escaping for
the JSON Schema front-end, XML text or attribute escaping for the XML front-ends), so one
parser serves every front-end and each escapes exactly as its syntax requires.

Two modes:

- search (``anchored=False``, JSON Schema ``pattern`` / ``patternProperties``): the
  pattern matches *somewhere* in the string, as ECMA ``RegExp.test`` and Python
  ``re.search`` do; a top-level branch without ``^`` / ``$`` gets ``any*`` on that side;
- anchored (``anchored=True``, formats, DTD text patterns): the pattern matches the
  whole string; a leading ``^`` and trailing ``$`` are accepted and change nothing.

Supported: literals, ``.``, classes ``[...]``/``[^...]`` with ranges, escapes
(``\\d \\w \\s \\D \\W \\S \\n \\t \\xHH \\uHHHH \\u{H..}``...), groups ``(...)``,
``(?:...)``, ``(?<name>...)``, alternation, quantifiers ``* + ? {n} {n,} {n,m}`` (lazy
forms are the same language; a ``{`` that starts no quantifier is a literal, as in
ECMA Annex B and Python), ``^`` and ``$`` anywhere (``^$|^(a|$)``: an anchor inside a
group is an assertion, eliminated by :func:`_anchor_forms`; inside a repetition only where
the repetition can be unrolled or is unbounded).
Lookaheads ``(?=X)`` / ``(?!X)`` in a top-level branch are exact, by intersection and
difference (:func:`_with_lookaheads`).
Rejected with :class:`PatternError` (pattern and offset): lookbehind, lookaheads inside
groups, backreferences,
``\\b``, flags, ``\\p{...}``.

Exactness: a JSON Schema pattern is validated by Python's ``re`` (jsonschema) but written
for ECMA engines.  Where the two disagree, the grammar takes the *intersection*: positive
shorthands are ASCII (``\\d`` = ``[0-9]``), negated ones exclude what either engine
counts (``\\D`` excludes every Unicode decimal digit), ``.`` excludes ECMA line
terminators.

This module imports only :mod:`decoding.ir`, :mod:`decoding.errors` and :mod:`decoding.limits`.
Groups nest at most ``max_nesting`` (default limits) deep: deeper is a PatternError, never
a ``RecursionError`` in the recursive-descent parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from decoding.errors import PatternError
from decoding.text import unicode_classes
from decoding.limits import DEFAULT_LIMITS
from decoding.ir import (EMPTY, MAX_CP, Node, choice, complement_ranges, diff, inter, normalize_ranges, rep,
                         seq, star)

__all__ = ["PatternError", "Rx", "Encoder", "parse_pattern", "rx_to_ir", "regex_ir",
           "length_range"]

#: deepest group nesting the parser accepts
MAX_GROUP_NESTING = DEFAULT_LIMITS.max_nesting

Ranges = tuple[tuple[int, int], ...]

#: Spells one decoded character whose code point is in the given (sorted, disjoint)
#: ranges, in the caller's output syntax; returns ``NOTHING`` for a set it cannot spell.
Encoder = Callable[[Ranges], Node]


@dataclass(frozen=True, slots=True)
class Rx:
    """Character-level regex AST: kind in {'chars','seq','alt','rep','inter','diff'}
    (``inter``/``diff``: a top-level lookahead, see :func:`_with_lookaheads`)."""
    kind: str
    ranges: Ranges = ()
    items: tuple["Rx", ...] = ()
    lo: int = 0
    hi: int | None = None


_ECMA_SPACE: Ranges = normalize_ranges([
    (9, 13), (32, 32), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
    (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])


@lru_cache(maxsize=None)
def _wide(name: str) -> Ranges:
    """Largest reading of a shorthand (union of Python-re and ECMA meanings)."""
    if name == "d":
        return unicode_classes.DECIMAL
    if name == "w":
        return unicode_classes.WORD
    return normalize_ranges(_ECMA_SPACE + unicode_classes.SPACE + ((0x1C, 0x1F),))


_NARROW = {"d": ((48, 57),), "w": normalize_ranges([(48, 57), (65, 90), (95, 95), (97, 122)]),
           "s": ((9, 13), (32, 32))}


def _shorthand(ch: str) -> tuple[Ranges, Ranges]:
    """(narrow, wide) readings of ``\\d \\D \\w \\W \\s \\S``."""
    low = ch.lower()
    if ch == low:
        return _NARROW[low], _wide(low)
    return complement_ranges(_wide(low)), complement_ranges(_NARROW[low])


_DOT: Ranges = complement_ranges(((10, 10), (13, 13), (0x2028, 0x2029)))
_ANY: Ranges = ((0, MAX_CP),)
_SIMPLE_ESC = {"n": 10, "r": 13, "t": 9, "f": 12, "v": 11, "0": 0}


class _InnerAnchor(Exception):
    """An anchor that is not at the start/end of a top-level branch: parse again with
    assertions (rare, so the common path keeps its simpler AST)."""


#: most copies an anchored repetition is unrolled to (``(^a|b){0,3}``)
MAX_ANCHOR_UNROLL = 16


class _Parser:
    def __init__(self, src: str, anchored: bool, assertions: bool = False) -> None:
        self.s = src
        self.i = 0
        self.anchored = anchored
        self.depth = 0
        #: every ``^``/``$`` is an assertion node (``Rx("bos")``/``Rx("eos")``)
        self.assertions = assertions

    def err(self, reason: str, pos: int | None = None) -> PatternError:
        return PatternError(self.s, self.i if pos is None else pos, reason)

    def peek(self) -> str | None:
        return self.s[self.i] if self.i < len(self.s) else None

    def top(self) -> Rx:
        branches = [self.branch(top=True)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.branch(top=True))
        if self.i != len(self.s):
            raise self.err("unbalanced ')'")
        if len(branches) > 1 and not self.anchored:
            branches = _share_open_ends(branches)
        return Rx("alt", items=tuple(branches)) if len(branches) > 1 else branches[0]

    def alt(self) -> Rx:
        branches = [self.branch(top=False)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.branch(top=False))
        return Rx("alt", items=tuple(branches)) if len(branches) > 1 else branches[0]

    def branch(self, top: bool) -> Rx:
        if self.assertions:
            return self._assert_branch()
        items: list[Rx] = []
        anchored_start = anchored_end = False
        if top and self.peek() == "^":
            self.i += 1
            anchored_start = True
        while True:
            c = self.peek()
            if c is None or c in "|)":
                break
            if c == "$":
                if top and (self.i + 1 == len(self.s) or self.s[self.i + 1] == "|"):
                    self.i += 1
                    anchored_end = True
                    break
                raise _InnerAnchor()
            if c == "^":
                raise _InnerAnchor()
            if top and self.s.startswith(("(?=", "(?!"), self.i):
                items.append(self._lookahead())
                continue
            atom = self.atom()
            items.append(self.quant(atom))
        if any(x.kind == "look" for x in items):
            return _with_lookaheads(items, open_start=top and not self.anchored and not anchored_start,
                                   open_end=top and not self.anchored and not anchored_end)
        if top and not self.anchored:
            items = _trim_open_ends(items, open_start=not anchored_start, open_end=not anchored_end)
        body = Rx("seq", items=tuple(items))
        if top and not self.anchored:
            anyr = Rx("rep", items=(Rx("chars", _ANY),), lo=0, hi=None)
            parts = ([] if anchored_start else [anyr]) + [body] + ([] if anchored_end else [anyr])
            return Rx("seq", items=tuple(parts))
        return body

    def _lookahead(self) -> Rx:
        """``(?=X)`` / ``(?!X)`` in a top-level branch: a ``look`` marker (``lo`` 1: positive)."""
        start = self.i
        positive = self.s[self.i + 2] == "="
        self.i += 3
        self.depth += 1
        if self.depth > MAX_GROUP_NESTING:
            raise self.err(f"groups nested more than {MAX_GROUP_NESTING} deep (limit max_nesting)", start)
        inner = self.alt()
        if self.peek() != ")":
            raise self.err("missing ')'", start)
        self.i += 1
        self.depth -= 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._is_braces()):
            raise self.err("quantifier on a lookahead")
        return Rx("look", items=(inner,), lo=1 if positive else 0)

    def _assert_branch(self) -> Rx:
        items: list[Rx] = []
        while True:
            c = self.peek()
            if c is None or c in "|)":
                break
            if c in "^$":
                self.i += 1
                items.append(Rx("bos" if c == "^" else "eos"))
                if self.peek() in ("*", "+", "?", "{"):
                    raise self.err("quantifier on an anchor")
                continue
            items.append(self.quant(self.atom()))
        return Rx("seq", items=tuple(items))

    def top_assertions(self) -> Rx:
        """The pattern with its assertions eliminated: the union over the anchor forms of
        ``prefix L suffix``, ``prefix``/``suffix`` being ``any*`` in search mode where the
        form is not anchored on that side."""
        body = self.top()
        forms = _anchor_forms(body, self)
        anyr = Rx("rep", items=(Rx("chars", _ANY),), lo=0, hi=None)
        alts = []
        for (s, e), lang in sorted(forms.items()):
            if self.anchored:
                alts.append(lang)
            else:
                alts.append(Rx("seq", items=tuple(([] if s else [anyr]) + [lang] + ([] if e else [anyr]))))
        if not alts:
            return Rx("chars", ())  # no string can match (``a^b``)
        return alts[0] if len(alts) == 1 else Rx("alt", items=tuple(alts))

    def quant(self, atom: Rx) -> Rx:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        elif c == "{":
            q = self._braces()
            if q is None:
                return atom
            lo, hi = q
        else:
            return atom
        if self.peek() == "?":
            self.i += 1  # lazy: same language
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._is_braces()):
            raise self.err("multiple quantifiers on one atom")
        return Rx("rep", items=(atom,), lo=lo, hi=hi)

    def _is_braces(self) -> bool:
        save = self.i
        try:
            return self._braces() is not None
        finally:
            self.i = save

    def _braces(self) -> tuple[int, int | None] | None:
        j = self.s.find("}", self.i)
        if j < 0:
            return None
        body = self.s[self.i + 1:j]
        parts = body.split(",")
        try:
            if len(parts) == 1:
                lo = hi = int(parts[0])
            elif len(parts) == 2:
                lo = int(parts[0])
                hi = int(parts[1]) if parts[1] else None
            else:
                return None
        except ValueError:
            return None  # literal '{' as in Annex B / Python
        if hi is not None and hi < lo:
            raise self.err("quantifier {n,m} with m < n")
        self.i = j + 1
        return lo, hi

    def atom(self) -> Rx:
        c = self.s[self.i]
        if c == "(":
            start = self.i
            self.i += 1
            self.depth += 1
            if self.depth > MAX_GROUP_NESTING:
                raise self.err(f"groups nested more than {MAX_GROUP_NESTING} deep (limit max_nesting)", start)
            if self.s.startswith("?:", self.i):
                self.i += 2
            elif self.s.startswith("?<", self.i) and not self.s.startswith(("?<=", "?<!"), self.i):
                j = self.s.find(">", self.i)
                if j < 0:
                    raise self.err("unterminated group name")
                self.i = j + 1
            elif self.peek() == "?":
                raise self.err("lookaround and inline flags are not supported")
            inner = self.alt()
            if self.peek() != ")":
                raise self.err("missing ')'", start)
            self.i += 1
            self.depth -= 1
            return inner
        if c == "[":
            return Rx("chars", self.klass())
        if c == ".":
            self.i += 1
            return Rx("chars", _DOT)
        if c == "\\":
            narrow, _wide_ = self.escape(in_class=False)
            return Rx("chars", narrow)
        if c in "*+?":
            raise self.err("quantifier without operand")
        if c == ")":
            raise self.err("unbalanced ')'")
        self.i += 1
        cp = ord(c)
        return Rx("chars", ((cp, cp),))

    def escape(self, in_class: bool) -> tuple[Ranges, Ranges]:
        pos = self.i
        self.i += 1
        if self.i >= len(self.s):
            raise self.err("trailing backslash", pos)
        c = self.s[self.i]
        self.i += 1
        if c in "dDwWsS":
            return _shorthand(c)
        if c == "b" and in_class:
            return ((8, 8),), ((8, 8),)
        if c in "bB":
            raise self.err("word boundaries are not supported", pos)
        if c.isdigit() and c != "0":
            raise self.err("backreferences are not supported", pos)
        if c in _SIMPLE_ESC:
            cp = _SIMPLE_ESC[c]
        elif c == "x":
            h = self.s[self.i:self.i + 2]
            if len(h) != 2 or any(x not in "0123456789abcdefABCDEF" for x in h):
                raise self.err("bad \\x escape", pos)
            cp = int(h, 16)
            self.i += 2
        elif c == "u":
            if self.peek() == "{":
                j = self.s.find("}", self.i)
                h = self.s[self.i + 1:j] if j > 0 else ""
                if not h or any(x not in "0123456789abcdefABCDEF" for x in h) or int(h, 16) > MAX_CP:
                    raise self.err("bad \\u{...} escape", pos)
                cp = int(h, 16)
                self.i = j + 1
            else:
                h = self.s[self.i:self.i + 4]
                if len(h) != 4 or any(x not in "0123456789abcdefABCDEF" for x in h):
                    raise self.err("bad \\u escape", pos)
                cp = int(h, 16)
                self.i += 4
            if 0xD800 <= cp <= 0xDFFF:
                raise self.err("surrogate code points are not supported", pos)
        elif c == "c":
            raise self.err("\\c control escapes are not supported", pos)
        elif c == "p" or c == "P":
            raise self.err("Unicode property escapes are not supported", pos)
        elif c.isalnum():
            raise self.err(f"unknown escape \\{c}", pos)
        else:
            cp = ord(c)
        r = ((cp, cp),)
        return r, r

    def klass(self) -> Ranges:
        start = self.i
        self.i += 1
        neg = self.peek() == "^"
        if neg:
            self.i += 1
        narrow: list[tuple[int, int]] = []
        wide: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.err("unterminated character class", start)
            if c == "]" and not first:
                self.i += 1
                break
            if c == "]" and first:
                # ECMA: '[]' is the empty class, '[^]' any char
                self.i += 1
                return _ANY if neg else ()
            first = False
            lo_n, lo_w = self._class_atom()
            if self.peek() == "-" and self.i + 1 < len(self.s) and self.s[self.i + 1] != "]":
                self.i += 1
                hi_n, hi_w = self._class_atom()
                if len(lo_n) != 1 or lo_n[0][0] != lo_n[0][1] or len(hi_n) != 1 or hi_n[0][0] != hi_n[0][1]:
                    raise self.err("class range with a shorthand endpoint")
                a, b = lo_n[0][0], hi_n[0][0]
                if a > b:
                    raise self.err("class range out of order")
                narrow.append((a, b))
                wide.append((a, b))
            else:
                narrow.extend(lo_n)
                wide.extend(lo_w)
        return complement_ranges(wide) if neg else normalize_ranges(narrow)

    def _class_atom(self) -> tuple[Ranges, Ranges]:
        c = self.s[self.i]
        if c == "\\":
            return self.escape(in_class=True)
        if c == "[" and self.s.startswith("[:", self.i):
            raise self.err("POSIX classes are not supported")
        self.i += 1
        r = ((ord(c), ord(c)),)
        return r, r


_ANY_STAR = Rx("rep", items=(Rx("chars", _ANY),), lo=0, hi=None)


def _share_open_ends(branches: list[Rx]) -> list[Rx]:
    """Search-mode top-level branches with the same open ends share them: ``any* A any* |
    any* B any*`` is ``any* (A | B) any*``.  Same language; the automaton of the first form
    remembers which of the branches have matched (a subset construction of 2^branches:
    GitHub's ``INTERVAL_TICK|INTERVAL_M1|...``, 17 words, passed 256 MB), the second only
    whether one has."""
    groups: dict[tuple[bool, bool], list[Rx]] = {}
    for b in branches:
        its = b.items if b.kind == "seq" else (b,)
        s = len(its) >= 2 and its[0] == _ANY_STAR
        e = len(its) >= 2 and its[-1] == _ANY_STAR
        body = its[int(s):len(its) - int(e)]
        groups.setdefault((s, e), []).append(body[0] if len(body) == 1 else Rx("seq", items=tuple(body)))
    out = []
    for (s, e), bodies in groups.items():
        mid = bodies[0] if len(bodies) == 1 else Rx("alt", items=tuple(bodies))
        out.append(Rx("seq", items=tuple(([_ANY_STAR] if s else []) + [mid] + ([_ANY_STAR] if e else []))))
    return out


def _with_lookaheads(items: list[Rx], *, open_start: bool, open_end: bool) -> Rx:
    """A branch with lookaheads at its top level, as intersections: a lookahead ``(?=X)``
    holds where the rest of the *whole string* starts with a match of ``X``, so reading the
    branch from the right, ``S`` (what may follow the position, the open end's ``any*``
    included) becomes ``S ∩ X any*`` (``(?!X)``: ``S ∖ X any*``).  Exact: the password
    rule ``^(?=.*[0-9])(?=.*[a-z]).{8,}$`` is ``(.*[0-9].*) ∩ (.*[a-z].*) ∩ .{8,}``."""
    anyr = Rx("rep", items=(Rx("chars", _ANY),), lo=0, hi=None)
    full = ([anyr] if open_start else []) + items + ([anyr] if open_end else [])
    tail = Rx("seq", items=())
    for it in reversed(full):
        if it.kind == "look":
            ahead = Rx("seq", items=(it.items[0], anyr))
            tail = Rx("inter" if it.lo else "diff", items=(tail, ahead))
        else:
            tail = Rx("seq", items=(it, tail))
    return tail


def _trim_open_ends(items: list[Rx], *, open_start: bool, open_end: bool) -> list[Rx]:
    """A search-mode branch with its repetitions at an open (unanchored) end cut to their
    minimum: ``any* A X{m,n} any*`` is ``any* A X{m} any*`` (the ``any*`` absorbs the extra
    copies), and ``X{0,n}`` there vanishes.  Same language, and ``[a-z]{0,5000}`` no longer
    makes the automaton count to 5000."""
    items = list(items)
    for end in ((-1,) if open_end else ()) + ((0,) if open_start else ()):
        while items and items[end].kind == "rep":
            r = items[end]
            if r.lo == 0:
                items.pop(end)
                continue
            if r.hi != r.lo:
                items[end] = Rx("rep", items=r.items, lo=r.lo, hi=r.lo)
            break
    return items


_EPS = Rx("seq", items=())
_Forms = dict[tuple[bool, bool], Rx]


def _nullable(rx: Rx) -> bool:
    return length_range(rx)[0] == 0


def _add(forms: _Forms, key: tuple[bool, bool], rx: Rx) -> None:
    old = forms.get(key)
    forms[key] = rx if old is None else Rx("alt", items=(old, rx))


def _anchor_forms(rx: Rx, p: "_Parser") -> _Forms:
    """``rx`` (with ``bos``/``eos`` assertions) as anchor-free languages keyed by
    ``(needs start, needs end)``: a string of form ``(s, e)`` matches only where nothing
    precedes it (``s``) / follows it (``e``) in the whole string.  Invariant: the union
    over forms, each placed accordingly, is exactly the strings ``rx`` matches there."""
    k = rx.kind
    if k == "bos":
        return {(True, False): _EPS}
    if k == "eos":
        return {(False, True): _EPS}
    if k == "chars":
        return {(False, False): rx}
    if k == "alt":
        out: _Forms = {}
        for it in rx.items:
            for key, lang in _anchor_forms(it, p).items():
                _add(out, key, lang)
        return out
    if k == "seq":
        acc: _Forms = {(False, False): _EPS}
        for it in rx.items:
            acc = _seq_forms(acc, _anchor_forms(it, p))
        return acc
    item = _anchor_forms(rx.items[0], p)
    if set(item) == {(False, False)}:
        return {(False, False): Rx("rep", items=(item[(False, False)],), lo=rx.lo, hi=rx.hi)}
    # an anchored repetition: the copies that use an anchor can only be the first or the
    # last non-empty ones, so X{lo,} is X^lo (X? X_ff* X?) and X{lo,hi} is unrolled
    if rx.lo > MAX_ANCHOR_UNROLL or (rx.hi is not None and rx.hi > MAX_ANCHOR_UNROLL):
        raise p.err(f"an anchor inside a repetition of more than {MAX_ANCHOR_UNROLL} copies")
    opt = dict(item)
    _add(opt, (False, False), _EPS)
    acc = {(False, False): _EPS}
    for _ in range(rx.lo):
        acc = _seq_forms(acc, item)
    if rx.hi is None:
        ff = item.get((False, False))
        middle = {(False, False): Rx("rep", items=(ff,), lo=0, hi=None) if ff is not None else _EPS}
        for f in (opt, middle, opt):
            acc = _seq_forms(acc, f)
    else:
        for _ in range(rx.hi - rx.lo):
            acc = _seq_forms(acc, opt)
    return acc


def _seq_forms(a: _Forms, b: _Forms) -> _Forms:
    out: _Forms = {}
    for (sa, ea), la in a.items():
        for (sb, eb), lb in b.items():
            x, y = la, lb
            if ea:  # nothing may follow a: b matches only the empty string
                if not _nullable(y):
                    continue
                y = _EPS
            if sb:  # nothing may precede b: a matches only the empty string
                if not _nullable(x):
                    continue
                x = _EPS
            _add(out, (sa or sb, ea or eb), Rx("seq", items=(x, y)))
    return out


@lru_cache(maxsize=2048)
def parse_pattern(src: str, *, anchored: bool = False) -> Rx:
    """Parse ``src``.  Search mode (the default) makes the open sides explicit with
    ``any*``; anchored mode matches the whole string.  Raises :class:`PatternError`."""
    try:
        return _Parser(src, anchored).top()
    except _InnerAnchor:
        return _Parser(src, anchored, assertions=True).top_assertions()


def length_range(rx: Rx) -> tuple[int, int | None]:
    """(min, max) number of characters of strings in ``rx`` (max None = unbounded)."""
    if rx.kind == "chars":
        return (1, 1) if rx.ranges else (0, 0)
    if rx.kind == "seq":
        lo, hi = 0, 0
        for it in rx.items:
            a, b = length_range(it)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if rx.kind == "inter":
        rs = [length_range(it) for it in rx.items]
        his = [r[1] for r in rs if r[1] is not None]
        return max(r[0] for r in rs), (min(his) if his else None)
    if rx.kind == "diff":
        return length_range(rx.items[0])
    if rx.kind == "alt":
        rs = [length_range(it) for it in rx.items]
        return min(r[0] for r in rs), (None if any(r[1] is None for r in rs) else max(r[1] for r in rs))
    a, b = length_range(rx.items[0])
    return a * rx.lo, (None if rx.hi is None or b is None else b * rx.hi)


def rx_to_ir(rx: Rx, encode: Encoder) -> Node:
    """IR for the strings of ``rx``, each character spelled by ``encode``."""
    if rx.kind == "chars":
        return encode(rx.ranges)
    if rx.kind == "seq":
        return seq(*(rx_to_ir(x, encode) for x in rx.items)) if rx.items else EMPTY
    if rx.kind == "alt":
        return choice(*(rx_to_ir(x, encode) for x in rx.items))
    if rx.kind == "inter":
        return inter(*(rx_to_ir(x, encode) for x in rx.items))
    if rx.kind == "diff":
        return diff(rx_to_ir(rx.items[0], encode), rx_to_ir(rx.items[1], encode))
    item = rx_to_ir(rx.items[0], encode)
    if rx.lo == 0 and rx.hi is None:
        return star(item)
    return rep(item, rx.lo, rx.hi)


def regex_ir(src: str, encode: Encoder, *, anchored: bool = False) -> Node:
    """IR for the encoded strings whose decoded value matches ``src`` (search mode by
    default, whole-string with ``anchored``).  Raises :class:`PatternError`."""
    return rx_to_ir(parse_pattern(src, anchored=anchored), encode)
