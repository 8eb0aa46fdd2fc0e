"""Emit llama.cpp GBNF text from the grammar IR.

Invariants of the output of :func:`to_gbnf`
- the start rule is named ``root``; every rule name matches ``[a-zA-Z0-9-]+`` (IR names
  are sanitized and de-duplicated; helper rules get ``<rule>-<k>`` names);
- recursion stays recursive: a ``Ref`` becomes a rule reference, with no depth bound;
- bounded repetition is written ``x{m,n}`` on a single atom (a rule reference, a string
  or a class), never as chains of ``x?``; bounds above llama.cpp's
  ``MAX_REPETITION_THRESHOLD`` (2000, ``llama-grammar.cpp``) are split into several
  repetitions, because llama.cpp rejects ``{m}`` with ``m > 2000`` and silently turns
  ``{m,n}`` with ``n > 2000`` into ``{m,}``;
- the IR is over bytes, GBNF over code points.  Byte classes that spell UTF-8
  characters (as :func:`decoding.ir.char_class` builds them) become code-point classes.
  A subtree without rule references or specials whose bytes do not line up with
  characters (e.g. a byte class ``[^"]`` over raw bytes) is compiled to a byte DFA and
  emitted as right-linear rules over code points, keeping exactly its well-formed UTF-8
  strings; llama.cpp cannot produce anything else.  Code point U+0000 is emitted as
  ``\\u0000`` but llama.cpp's engine stops at NUL, so it never matches it;
- escaped code points are written ``\\uXXXX`` (``\\UXXXXXXXX`` above U+FFFF), never
  ``\\xXX``: llama.cpp reads exactly two hex digits after ``\\x`` but xgrammar's EBNF
  parser (vLLM's ``structured_outputs={"grammar": ...}``) reads as many as follow, so
  ``[\\x2D0-9]`` would be the range U+02D0-'9' there; both read four after ``\\u``;
- ``Special(text)`` becomes the token reference ``<[id]>`` when ``special_ids`` maps
  ``text`` to a token id (llama.cpp >= b3900 understands ``<[id]>``, the vendored copy
  in llama-cpp-python 0.3.36 does), ``Special("<[N]>")`` is written verbatim, and any
  other special is written as its literal text.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from decoding.backends.automaton import compile_dfa
from decoding.errors import GBNFError, GrammarError
from decoding.ir import EMPTY, NOTHING, ByteSet, Choice, Dfa, Grammar, Lit, Node, Ref, Repeat, Seq, Special
from decoding.backends.gbnf.codepoints import codepoint_dfa
from decoding.ir import MAX_CP, complement_ranges, normalize_ranges
from decoding.text.utf8 import charset_of

__all__ = ["to_gbnf", "MAX_REPETITION_THRESHOLD", "sanitize_name"]

MAX_REPETITION_THRESHOLD = 2000
_TOKEN_REF = re.compile(r"<\[\d+\]>")
_EMPTY_CLASS = "[^\\u0000-\\U0010FFFF]"  # matches no character: the empty language
_SYMBOL = re.compile(r'[a-zA-Z0-9-]+|"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|<\[\d+\]>|\.')


def sanitize_name(name: str) -> str:
    s = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-")
    return s or "r"


def _esc_char(cp: int, in_class: bool) -> str:
    c = chr(cp)
    if c == "\\":
        return "\\\\"
    if c == '"' and not in_class:
        return '\\"'
    if in_class and c in "[]-^\"":
        return "\\u%04X" % cp
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    if c == "\t":
        return "\\t"
    if cp < 0x20 or cp == 0x7F:
        return "\\u%04X" % cp
    if cp < 0x80:
        return c
    if 0xD800 <= cp <= 0xDFFF or not c.isprintable() or cp >= 0x10000:
        return "\\u%04X" % cp if cp <= 0xFFFF else "\\U%08X" % cp
    return c


def _class(ranges: Sequence[tuple[int, int]]) -> str:
    if tuple(ranges) == ((0, MAX_CP),):
        return "."
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and ranges[0][0] != 0:
        return _string(chr(ranges[0][0]))
    # surrogates never occur in well-formed UTF-8: leave them out of a negated class
    comp = complement_ranges(list(ranges) + [(0xD800, 0xDFFF)])
    if not comp:
        return "."
    # Negate only when every excluded character is ASCII: llama.cpp's partial-UTF-8 check
    # (llama_grammar_match_partial_char) rejects a split multi-byte character in a negated
    # class whenever *some* completion is excluded, so [^\uFFFE] would refuse the lead
    # byte 0xEF of U+F47F arriving as its own token.
    neg = len(comp) < len(ranges) and all(hi < 0x80 for _, hi in comp)
    body = comp if neg else ranges
    parts = []
    for lo, hi in body:
        if lo == hi:
            parts.append(_esc_char(lo, True))
        else:
            parts.append(_esc_char(lo, True) + "-" + _esc_char(hi, True))
    return "[" + ("^" if neg else "") + "".join(parts) + "]"


def _string(text: str) -> str:
    return '"' + "".join(_esc_char(ord(c), False) for c in text) + '"'


class _Analysis:
    """Per-node facts, memoized by node identity: IR trees from the front-ends share
    subtrees (a DAG), so unmemoized recursion can take exponential time."""

    def __init__(self) -> None:
        self._cs: dict[int, list[tuple[int, int]] | None] = {}
        self._al: dict[int, bool] = {}
        self._rs: dict[int, bool] = {}
        self._simp: dict[int, Node] = {}
        self._keep: list[Node] = []  # keeps memo keys (ids) alive

    def charset(self, node: Node) -> list[tuple[int, int]] | None:
        k = id(node)
        if k not in self._cs:
            self._keep.append(node)
            if isinstance(node, Choice):
                acc: list[tuple[int, int]] = []
                for x in node.items:
                    r = self.charset(x)
                    if r is None:
                        acc = None  # type: ignore[assignment]
                        break
                    acc.extend(r)
                self._cs[k] = list(normalize_ranges(acc)) if acc else None
            else:
                self._cs[k] = charset_of(node)
        return self._cs[k]

    def aligned(self, node: Node) -> bool:
        """True when every piece of ``node`` spells whole UTF-8 characters."""
        k = id(node)
        if k not in self._al:
            self._keep.append(node)
            if self.charset(node) is not None:
                r = True
            elif isinstance(node, Lit):
                try:
                    node.data.decode("utf-8")
                    r = True
                except UnicodeDecodeError:
                    r = False
            elif isinstance(node, (ByteSet, Dfa)):
                r = False  # emitted through its byte DFA, over code points (fallback)
            elif isinstance(node, (Seq, Choice)):
                r = all(self.aligned(x) for x in node.items)
            elif isinstance(node, Repeat):
                r = self.aligned(node.item)
            else:
                r = True  # Ref, Special
            self._al[k] = r
        return self._al[k]

    def has_ref_or_special(self, node: Node) -> bool:
        k = id(node)
        if k not in self._rs:
            self._keep.append(node)
            if isinstance(node, (Ref, Special)):
                r = True
            elif isinstance(node, (Seq, Choice)):
                r = any(self.has_ref_or_special(x) for x in node.items)
            elif isinstance(node, Repeat):
                r = self.has_ref_or_special(node.item)
            else:
                r = False
            self._rs[k] = r
        return self._rs[k]

    def simplify(self, node: Node) -> Node:
        """Drop empty-language alternatives and collapse trivial structure."""
        k = id(node)
        hit = self._simp.get(k)
        if hit is not None:
            return hit
        self._keep.append(node)
        r: Node
        if isinstance(node, Choice):
            items = tuple(x for x in (self.simplify(i) for i in node.items) if x != NOTHING)
            r = NOTHING if not items else items[0] if len(items) == 1 else Choice(items)
        elif isinstance(node, Seq):
            items = tuple(self.simplify(i) for i in node.items)
            if any(x == NOTHING for x in items):
                r = NOTHING
            else:
                r = items[0] if len(items) == 1 else Seq(items)
        elif isinstance(node, Repeat):
            item = self.simplify(node.item)
            if item == NOTHING:
                r = Seq(()) if node.min == 0 else NOTHING
            elif node.max == 0:
                r = Seq(())
            elif node.min == node.max == 1:
                r = item
            else:
                r = Repeat(item, node.min, node.max)
        else:
            r = node
        self._simp[k] = r
        return r


def _count_parents(roots: list[Node]) -> dict[int, int]:
    """How many parent edges point at each node object (DAG sharing)."""
    count: dict[int, int] = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        k = id(n)
        count[k] = count.get(k, 0) + 1
        if count[k] > 1:
            continue
        if isinstance(n, (Seq, Choice)):
            stack.extend(n.items)
        elif isinstance(n, Repeat):
            stack.append(n.item)
    return count


class _Emitter:
    def __init__(self, grammar: Grammar, special_ids: Mapping[str, int] | None) -> None:
        self.g = grammar
        self.special_ids = dict(special_ids or {})
        self.used: set[str] = set()
        self.names: dict[str, str] = {}
        self.out: list[tuple[str, str]] = []
        self.counter: dict[str, int] = {}
        # start rule first, named root
        self.names[grammar.start] = "root"
        self.used.add("root")
        for name in grammar.names:
            if name != grammar.start:
                self.names[name] = self._fresh(sanitize_name(name))

    def _fresh(self, base: str) -> str:
        name = base
        k = self.counter.get(base, 0)
        while name in self.used:
            k += 1
            name = f"{base}-{k}"
        self.counter[base] = k
        self.used.add(name)
        return name

    def run(self) -> str:
        order = [self.g.start] + [n for n in self.g.names if n != self.g.start]
        an = self.an = _Analysis()
        bodies = {name: an.simplify(self.g.rule(name)) for name in order}
        self.parents = _count_parents(list(bodies.values()))
        self.shared: dict[int, str] = {}
        self.defining: set[int] = set()
        for name in order:
            self.cur = self.names[name]
            # reserve the rule's place so helper rules follow it
            slot = len(self.out)
            self.out.append((self.names[name], ""))
            self.out[slot] = (self.names[name], self.alts(bodies[name]))
        return "".join(f"{n} ::= {b}\n" for n, b in self.out)

    def helper(self, body: str) -> str:
        name = self._fresh(f"{self.cur}-h")
        self.out.append((name, body))
        return name

    # -- expressions
    def alts(self, node: Node) -> str:
        if node == NOTHING:
            return _EMPTY_CLASS
        an = self.an
        if isinstance(node, Choice) and an.charset(node) is None and an.aligned(node):
            return self.choice_body(node)
        s = self.seq(node)
        return s[1:-1] if _is_group(s) else s

    def choice_body(self, node: Choice) -> str:
        """Alternatives, with all single-character alternatives merged into one class."""
        chars: list[tuple[int, int]] = []
        alts: list[str] = []
        for x in node.items:
            cs = None if isinstance(x, Lit) else self.an.charset(x)
            if cs is not None:
                if not chars:
                    alts.append("")  # placeholder, keeps the first position
                chars.extend(cs)
            else:
                alts.append(self.seq(x))
        if chars:
            alts[alts.index("")] = _class(normalize_ranges(chars))
        return " | ".join(alts)

    def seq(self, node: Node) -> str:
        if isinstance(node, Seq) and self.an.charset(node) is None and self.an.aligned(node):
            if not node.items:
                return '""'
            return " ".join(self.atom(x) for x in node.items)
        return self.atom(node)

    def symbol(self, node: Node) -> str:
        """One GBNF symbol (a name, string, class or token) so that a repetition suffix
        applies to exactly one rule (keeps llama.cpp's repetition rule count at 1)."""
        s = self.atom(node)
        return s if _SYMBOL.fullmatch(s) else self.helper(s[1:-1] if _is_group(s) else s)

    def atom(self, node: Node) -> str:
        """A GBNF item that can stand in a sequence."""
        an = self.an
        cs = None if isinstance(node, Lit) else an.charset(node)
        if cs is not None:
            return _class(cs)
        if (self.parents.get(id(node), 0) > 1 and isinstance(node, (Seq, Choice, Repeat))
                and node != EMPTY and id(node) not in self.defining):
            # a subtree shared in the IR DAG becomes one helper rule, referenced each time
            name = self.shared.get(id(node))
            if name is None:
                name = self._fresh(f"{self.cur}-s")
                self.shared[id(node)] = name
                slot = len(self.out)
                self.out.append((name, ""))
                self.defining.add(id(node))
                self.out[slot] = (name, self.alts(node))
                self.defining.discard(id(node))
            return name
        if node == NOTHING:
            return _EMPTY_CLASS
        if isinstance(node, Lit):
            try:
                text = node.data.decode("utf-8")
            except UnicodeDecodeError:
                return self.fallback(node)
            return _string(text)
        if isinstance(node, Ref):
            return self.names[node.name]
        if isinstance(node, Special):
            if node.text in self.special_ids:
                return f"<[{int(self.special_ids[node.text])}]>"
            if _TOKEN_REF.fullmatch(node.text):
                return node.text
            return _string(node.text)
        if not an.aligned(node):
            if an.has_ref_or_special(node):
                if isinstance(node, Repeat):
                    return self.repeat(node)
                if isinstance(node, (Seq, Choice)):
                    inner = (" | " if isinstance(node, Choice) else " ").join(
                        self.atom(x) for x in node.items)
                    return f"({inner})"
            return self.fallback(node)
        if isinstance(node, Repeat):
            return self.repeat(node)
        if isinstance(node, Seq):
            if not node.items:
                return '""'
            inner = " ".join(self.atom(x) for x in node.items)
        elif isinstance(node, Choice):
            inner = self.choice_body(node)
        elif isinstance(node, ByteSet):
            return self.fallback(node)
        else:
            raise GrammarError(f"GBNF export: IR node {type(node).__name__} (intersection, difference or "
                               "automaton leaf of JSON Schema boolean logic) has no GBNF form here; "
                               "use the DFA or pushdown back-end")
        return f"({inner})"

    def repeat(self, node: Repeat) -> str:
        item = self.symbol(node.item)
        lo, hi = node.min, node.max
        T = MAX_REPETITION_THRESHOLD
        parts: list[str] = []
        while lo > T:
            parts.append(f"{item}{{{T}}}")
            lo -= T
            if hi is not None:
                hi -= T
        if hi is None:
            parts.append(item + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"))
        else:
            opt = hi - lo
            first = min(opt, T - lo)
            parts.append(_suffix(item, lo, lo + first))
            opt -= first
            while opt > 0:
                k = min(opt, T)
                parts.append(_suffix(item, 0, k))
                opt -= k
        parts = [p for p in parts if p]
        return " ".join(parts) if parts else '""'

    def fallback(self, node: Node) -> str:
        """Emit a ref-free, special-free subtree through its byte DFA, over code points."""
        try:
            dfa = compile_dfa(Grammar.single(node))
        except GrammarError as e:
            raise GBNFError(f"rule '{self.cur}': subtree has no strings: {e}") from e
        moves = codepoint_dfa(dfa)
        # live states in the code-point graph
        live = {s for s in range(dfa.n_states) if dfa.accepting[s]}
        changed = True
        while changed:
            changed = False
            for s in range(dfa.n_states):
                if s not in live and any(t in live for t in moves[s]):
                    live.add(s)
                    changed = True
        if 0 not in live:
            raise GBNFError(f"rule '{self.cur}': byte-level subtree accepts no well-formed "
                            "UTF-8 string, so GBNF (over code points) cannot express it")
        reach, stack = {0}, [0]
        while stack:
            s = stack.pop()
            for t in moves[s]:
                if t in live and t not in reach:
                    reach.add(t)
                    stack.append(t)
        base = self._fresh(f"{self.cur}-u")
        names = {0: base}
        for s in sorted(reach - {0}):
            names[s] = self._fresh(f"{base}-s{s}")
        for s in sorted(reach):
            alts = []
            for t, rs in sorted(moves[s].items()):
                if t in live:
                    alts.append(f"{_class(rs)} {names[t]}")
            if dfa.accepting[s]:
                alts.append('""')
            self.out.append((names[s], " | ".join(alts)))
        return base


def _is_group(s: str) -> bool:
    """True if ``s`` is one parenthesised group ``( ... )`` (parens balanced outside strings)."""
    if not (s.startswith("(") and s.endswith(")")):
        return False
    depth = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == '"':
            i += 1
            while s[i] != '"':
                i += 2 if s[i] == "\\" else 1
        elif c == "[":
            i += 1
            while s[i] != "]":
                i += 2 if s[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and i != len(s) - 1:
                return False
        i += 1
    return True


def _suffix(item: str, lo: int, hi: int) -> str:
    if hi == 0:
        return ""
    if lo == hi:
        return item if lo == 1 else f"{item}{{{lo}}}"
    if (lo, hi) == (0, 1):
        return item + "?"
    return f"{item}{{{lo},{hi}}}"


def to_gbnf(grammar: Grammar, *, special_ids: Mapping[str, int] | None = None) -> str:
    """GBNF text for ``grammar`` (start rule ``root``), for llama.cpp's grammar sampler.

    ``special_ids`` maps ``Special`` texts to token ids (emitted as ``<[id]>``); other
    specials are emitted as literal text.
    """
    return _Emitter(grammar, special_ids).run()
