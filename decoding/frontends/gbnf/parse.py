"""Parse llama.cpp GBNF text into the grammar IR (with lark).

Supported, following ``llama-grammar.cpp`` of llama.cpp as vendored in
llama-cpp-python 0.3.36: ``#`` comments; rules ``name ::= alternates`` ending at a
newline (newlines are allowed after ``::=``, after ``|`` and anywhere inside ``( )``);
string literals and character classes with escapes ``\\xHH \\uHHHH \\UHHHHHHHH \\t \\r
\\n \\\\ \\" \\[ \\] \\-``; negated classes ``[^...]``; ``.``; repetition ``* + ? {m}
{m,} {m,n}`` (a suffix applies to the whole preceding string, class, name or group);
token references ``<[id]>`` and ``<text>``.

Mapping to the IR
- characters become UTF-8 byte sequences via :func:`decoding.ir.char_class`;
- a token reference ``<[id]>`` or ``<text>`` becomes ``Special(text)`` with the text as
  written (``Special("<[42]>")``); compiling resolves it against the vocabulary (a
  reference that names no token is a GBNFError there, as in llama.cpp);
- negated token references ``!<...>`` are rejected (no IR node);
- recursion: ``strict_recursion=True`` raises :class:`GBNFError` naming the first
  recursive rule; otherwise the grammar carries ``max_depth`` and the automaton
  unrolls it to that depth.  Left recursion is rejected like llama.cpp does.  The
  default, :data:`GBNF_MAX_DEPTH` = 8, is deeper than every other front-end's
  (:data:`decoding.ir.DEFAULT_MAX_DEPTH`) on purpose: GBNF often writes a loop as right
  recursion (``list ::= item ("," list)?``, and the GBNF emitter's code-point fallback
  writes ``x*`` as ``r ::= x r | ...``), so here the bound also caps how many times such
  a loop repeats, not only how deep values nest;
- a rule defined twice is an error (llama.cpp silently keeps the last definition).

Errors are :class:`GBNFError` with 1-based ``line`` and ``column`` (and ``source``).
Limits (:class:`decoding.limits.Limits`): a text longer than ``max_source_chars`` or with
``( )`` groups nested deeper than ``max_nesting`` is a :class:`LimitError` naming the
place and the limit, found by a linear pre-scan before lark runs; the tree is turned into
IR without recursion.  Size blow-ups (``("a"{0,100}){0,100}``) are refused when compiling
(:func:`decoding.ir.size.check_size`), not here: the text alone is small.
"""

from __future__ import annotations

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

import re

from decoding.errors import GBNFError, GrammarError, LimitError
from decoding.ir import (EMPTY, MAX_CP, Choice, Grammar, Lit, Node, Ref, Repeat, Seq,
                 Special, any_char, char_class, choice, lit, rep, seq, walk)
from decoding.ir import nullable as ir_nullable
from decoding.ir.productive import find_empty
from decoding.limits import DEFAULT_LIMITS, Limits

__all__ = ["parse_gbnf", "recursive_rules", "GBNF_MAX_DEPTH"]

#: Default ``max_depth`` of GBNF grammars (see the module docstring for why it differs
#: from :data:`decoding.ir.DEFAULT_MAX_DEPTH`).
GBNF_MAX_DEPTH = 8

_GRAMMAR = r"""
start: (_NL | rule)*
rule: NAME _DEF _NL* alts
alts: seq (_BAR _NL* seq)*
seq: item*
item: atom REPEAT?
?atom: STRING | CLASS | NAME | TOKEN | DOT | group
group: _LPAR _NL* nalts _RPAR
nalts: nseq (_BAR _NL* nseq)*
nseq: (nitem _NL*)*
nitem: atom REPEAT?

_DEF: "::="
_BAR: "|"
_LPAR: "("
_RPAR: ")"
DOT: "."
NAME: /[a-zA-Z0-9-]+/
STRING: /"(\\(.|\n)|[^"\\])*"/s
CLASS: /\[(\\(.|\n)|[^\]\\])*\]/s
TOKEN: /!?<(\[[0-9]+\]|[^>\[][^>]*)>/
REPEAT: /[*+?]/ | /\{[ \t]*[0-9]+[ \t]*(,[ \t]*([0-9]+[ \t]*)?)?\}/
_NL: /(\r?\n|\r)/
COMMENT: /#[^\r\n]*/
WS: /[ \t]+/
%ignore COMMENT
%ignore WS
"""

_parser = Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)

_ESCAPES = {"t": 9, "r": 13, "n": 10, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45}


def _decode(text: str, tok: Token) -> list[int]:
    """Code points of the body of a string/class token, with escapes resolved."""
    out: list[int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(ord(c))
            i += 1
            continue
        if i + 1 >= len(text):
            raise _err("unexpected end of input after '\\'", tok, i)
        e = text[i + 1]
        if e in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[e]
            digits = text[i + 2:i + 2 + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise _err(f"expecting {n} hex chars after '\\{e}'", tok, i)
            cp = int(digits, 16)
            if cp > MAX_CP:
                raise _err(f"code point U+{cp:X} is out of range", tok, i)
            out.append(cp)
            i += 2 + n
        elif e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        else:
            raise _err(f"unknown escape '\\{e}'", tok, i)
    return out


def _err(reason: str, tok: Token, offset: int = -1) -> GBNFError:
    # offset counts characters after the token's first (opening) character; -1: the token
    line, col = tok.line, tok.column
    prefix = str(tok)[: offset + 1]
    nl = prefix.count("\n")
    if nl:
        line += nl
        col = len(prefix) - prefix.rfind("\n")
    else:
        col += offset + 1
    return GBNFError(reason, line, col)


def _lit_from_cps(cps: list[int], tok: Token) -> Node:
    for k, cp in enumerate(cps):
        if 0xD800 <= cp <= 0xDFFF:
            raise _err(f"surrogate code point U+{cp:04X} cannot be encoded", tok, k)
    return lit("".join(map(chr, cps)).encode("utf-8"))


def _class_node(tok: Token) -> Node:
    body = str(tok)[1:-1]
    negate = body.startswith("^")
    if negate:
        body = body[1:]
    # split into characters respecting escapes, then ranges
    chars: list[tuple[int, str]] = []  # (code point, raw text)
    i = 0
    while i < len(body):
        if body[i] == "\\":
            e = body[i + 1] if i + 1 < len(body) else ""
            n = {"x": 4, "u": 6, "U": 10}.get(e, 2)
            raw = body[i:i + n]
        else:
            raw = body[i]
        chars.append((_decode(raw, tok)[0], raw))
        i += len(raw)
    ranges: list[tuple[int, int]] = []
    k = 0
    while k < len(chars):
        lo = chars[k][0]
        if k + 2 < len(chars) and chars[k + 1][1] == "-":
            hi = chars[k + 2][0]
            if hi < lo:
                raise _err(f"empty character range {chars[k][1]}-{chars[k + 2][1]}", tok)
            ranges.append((lo, hi))
            k += 3
        else:
            ranges.append((lo, lo))
            k += 1
    if not ranges:
        # llama.cpp silently reads "[]"/"[^]" as nothing at all (the empty string)
        raise _err("empty character class", tok)
    return char_class(ranges, negate=negate)


def _repeat(node: Node, tok: Token) -> Node:
    s = str(tok)
    if s == "*":
        return rep(node, 0, None)
    if s == "+":
        return rep(node, 1, None)
    if s == "?":
        return rep(node, 0, 1)
    inner = s[1:-1].replace(" ", "").replace("\t", "")
    if "," not in inner:
        m = n = int(inner)
    else:
        a, b = inner.split(",", 1)
        m, n = int(a), (int(b) if b else None)
    if n is not None and n < m:
        raise _err(f"repetition {s}: maximum is below minimum", tok)
    if m > 2000:
        raise _err(f"repetition {s}: more than 2000 repetitions (llama.cpp's limit)", tok)
    if n is not None and n > 2000:
        # llama.cpp turns {m,n} with n above its threshold into {m,}: follow it
        n = None
    return rep(node, m, n)


def _is_empty(node: Node) -> bool:
    return node == EMPTY or (isinstance(node, Lit) and not node.data)


def _left_rec_repeat(tok: Token) -> GBNFError:
    return _err(f"repetition '{tok}' of a rule with an empty alternative (llama.cpp rewrites it as "
                "a left-recursive rule and rejects the grammar)", tok)


class _Builder:
    """lark tree -> IR rules, with an explicit stack (no recursion over nested groups)."""

    def __init__(self) -> None:
        self.rules: dict[str, Node] = {}
        self.where: dict[str, Token] = {}
        self.refs: list[Token] = []
        #: (rule name, repetition token) of every unbounded repetition of a rule reference;
        #: llama.cpp rejects it when that rule has an empty alternative (checked after build)
        self.unbounded: list[tuple[str, Token]] = []
        #: id of an alts/nalts tree -> whether one of its alternatives is empty (llama.cpp's
        #: "may be empty", which is not transitive through references)
        self.alt_empty: dict[int, bool] = {}
        self.direct_empty: dict[str, bool] = {}

    def build(self, tree: Tree) -> None:
        for r in tree.children:
            if not isinstance(r, Tree):
                continue
            name_tok: Token = r.children[0]
            name = str(name_tok)
            if name in self.rules:
                raise _err(f"rule '{name}' is defined twice (first at line "
                           f"{self.where[name].line})", name_tok)
            self.rules[name] = self.alts(r.children[1])
            self.where[name] = name_tok
            self.direct_empty[name] = self.alt_empty.get(id(r.children[1]), False)

    def alts(self, top: Tree) -> Node:
        """Post-order over ``top`` (alts/nalts, seq/nseq, item/nitem, group) with a stack of
        (tree, values of its children so far)."""
        stack: list[tuple[Tree, list]] = [(top, [])]
        while True:
            t, vals = stack[-1]
            if len(vals) < len(t.children):
                c = t.children[len(vals)]
                if isinstance(c, Tree):
                    stack.append((c, []))
                else:
                    vals.append(c)
                continue
            stack.pop()
            node = self._combine(t, vals)
            if not stack:
                return node
            stack[-1][1].append(node)

    def _combine(self, t: Tree, vals: list) -> Node:
        kind = t.data
        if kind in ("alts", "nalts"):
            self.alt_empty[id(t)] = any(_is_empty(v) for v in vals)
            return choice(*vals)
        if kind in ("seq", "nseq"):
            return seq(*vals) if vals else EMPTY
        if kind == "group":
            return vals[0]
        # item / nitem: atom (a token, or a group's node), then an optional REPEAT token
        a = vals[0]
        node = self.atom(a) if isinstance(a, Token) else a
        if len(vals) > 1:
            tok = vals[1]
            if isinstance(a, Token) and a.type == "STRING" and _is_empty(node):
                raise _err(f"repetition '{tok}' of an empty string literal (llama.cpp: "
                           "expecting preceding item to */+/?/{)", tok)
            r = _repeat(node, tok)
            if isinstance(r, Repeat) and r.max is None:
                # llama.cpp rewrites it as "x' ::= item x' |": left-recursive when the item is
                # a reference to a rule with an empty alternative (a group is one too)
                src = t.children[0]
                if isinstance(src, Tree):
                    if self.alt_empty.get(id(src.children[0])):
                        raise _left_rec_repeat(tok)
                elif src.type == "NAME":
                    self.unbounded.append((str(src), tok))
            node = r
        return node

    def atom(self, a: Token) -> Node:
        kind = a.type
        s = str(a)
        if kind == "STRING":
            return _lit_from_cps(_decode(s[1:-1], a), a)
        if kind == "CLASS":
            return _class_node(a)
        if kind == "DOT":
            return any_char()
        if kind == "NAME":
            self.refs.append(a)
            return Ref(s)
        if kind == "TOKEN":
            if s.startswith("!"):
                raise _err("negated token reference '!<...>' is not supported", a)
            return Special(s)
        raise GBNFError(f"unexpected token {s!r}", a.line, a.column)


#: what the nesting pre-scan skips: strings, classes, token references, comments
_SCAN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|<[^>\n]*>|#[^\r\n]*|[()]', re.S)


def _check_nesting(text: str, limit: int, source: str | None) -> None:
    """LimitError at the first '(' nested deeper than ``limit`` (a linear regex scan)."""
    if text.count("(") <= limit:
        return
    depth = 0
    for m in _SCAN.finditer(text):
        c = m.group()
        if c == "(":
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
                raise LimitError(f"{source or '<input>'}:{line}:{col}: groups '(' nested more "
                                 f"than max_nesting={limit} deep")
        elif c == ")":
            depth = max(0, depth - 1)


def _nullable_and_first(rules: dict[str, Node]) -> tuple[dict[str, bool], dict[str, set[str]]]:
    nullable = {n: False for n in rules}

    def null(node: Node) -> bool:
        return ir_nullable(node, nullable.__getitem__)

    changed = True
    while changed:
        changed = False
        for n, node in rules.items():
            if not nullable[n] and null(node):
                nullable[n] = changed = True

    def first(node: Node, acc: set[str]) -> None:
        if isinstance(node, Ref):
            acc.add(node.name)
        elif isinstance(node, Seq):
            for x in node.items:
                first(x, acc)
                if not null(x):
                    break
        elif isinstance(node, Choice):
            for x in node.items:
                first(x, acc)
        elif isinstance(node, Repeat):
            first(node.item, acc)

    firsts = {}
    for n, node in rules.items():
        acc: set[str] = set()
        first(node, acc)
        firsts[n] = acc
    return nullable, firsts


def _cycle_rules(edges: dict[str, set[str]], roots: list[str]) -> list[str]:
    """Rules on a cycle of ``edges`` reachable from ``roots``, in discovery order."""
    order: list[str] = []
    seen: set[str] = set()
    stack = list(reversed(roots))
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        order.append(n)
        stack.extend(sorted(edges.get(n, ()), reverse=True))
    out = []
    for n in order:
        # n is on a cycle if n is reachable from its successors
        todo, vis = list(edges.get(n, ())), set()
        while todo:
            m = todo.pop()
            if m == n:
                out.append(n)
                break
            if m in vis:
                continue
            vis.add(m)
            todo.extend(edges.get(m, ()))
    return out


def recursive_rules(grammar: Grammar) -> list[str]:
    """Names of rules reachable from the start that take part in a reference cycle."""
    edges = {n: {x.name for x in walk(node) if isinstance(x, Ref)} for n, node in grammar.rules}
    return _cycle_rules(edges, [grammar.start])


def parse_gbnf(text: str, *, root: str = "root", max_depth: int = GBNF_MAX_DEPTH,
               strict_recursion: bool = False, source: str | None = None,
               limits: Limits = DEFAULT_LIMITS) -> Grammar:
    """Parse GBNF ``text`` into a :class:`Grammar` whose start rule is ``root``.

    Raises :class:`GBNFError` (with line and column) on syntax errors, a NUL character, undefined or
    duplicate rules, a missing ``root`` rule (located at the end of the text), left
    recursion, and (with ``strict_recursion``) any recursion; :class:`LimitError` (place
    and limit named) above ``limits.max_source_chars`` or ``limits.max_nesting``.
    """
    if not isinstance(text, str):
        raise GBNFError(f"parse_gbnf expects str, not {type(text).__name__}", 1, 1, source)
    if len(text) > limits.max_source_chars:
        raise LimitError(f"{source or '<input>'}:1:1: GBNF text of {len(text)} characters "
                         f"(limit max_source_chars={limits.max_source_chars})")
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise GBNFError("NUL character (llama.cpp reads a grammar as a C string and would stop "
                        "here)", line, nul - (text.rfind("\n", 0, nul) + 1) + 1, source)
    _check_nesting(text, limits.max_nesting, source)
    try:
        tree = _parser.parse(text)
    except UnexpectedInput as e:
        if isinstance(e, UnexpectedEOF):
            reason = "unexpected end of input"
        elif isinstance(e, UnexpectedCharacters):
            c = text[e.pos_in_stream]
            reason = {'"': "unterminated string literal", "[": "unterminated character class",
                      "<": "malformed token reference (expected <[id]> or <text>)"}.get(
                c, f"unexpected character {c!r}")
        elif isinstance(e, UnexpectedToken):
            tok = e.token
            what = "end of input" if tok.type == "$END" else repr(str(tok))
            reason = f"unexpected {what}"
            if tok.type == "_NL":
                reason = "unexpected newline (a rule continues on the next line only after '|', '::=' or inside '( )')"
        else:  # pragma: no cover - lark's hierarchy is closed
            reason = str(e)
        line = getattr(e, "line", None)
        col = getattr(e, "column", None)
        raise GBNFError(reason, line if line and line > 0 else None,
                        col if col and col > 0 else None, source) from None
    b = _Builder()
    try:
        b.build(tree)
        for ref in b.refs:
            if str(ref) not in b.rules:
                raise GBNFError(f"undefined rule '{ref}'", ref.line, ref.column)
        if root not in b.rules:
            names = ", ".join(list(b.rules)[:5]) + (", ..." if len(b.rules) > 5 else "")
            line = text.count("\n") + 1
            col = len(text) - (text.rfind("\n") + 1) + 1
            raise GBNFError(f"grammar has no '{root}' rule (defined: {names or 'none'}); "
                            f"add '{root} ::= ...'", line, col)
        for name, tok in b.unbounded:
            if b.direct_empty.get(name):
                raise _left_rec_repeat(tok)
        _, firsts = _nullable_and_first(b.rules)
        left = _cycle_rules(firsts, list(b.rules))
        if left:
            t = b.where[left[0]]
            raise GBNFError(f"rule '{left[0]}' is left-recursive (llama.cpp rejects left "
                            "recursion)", t.line, t.column)
        g = Grammar(root, tuple(b.rules.items()), max_depth)
        empty = find_empty(g)
        if empty is not None:  # e.g. root ::= "x" root: no finite string
            t = b.where[empty[0]]
            raise GBNFError(f"rule '{empty[0]}': {empty[1]}", t.line, t.column)
        if strict_recursion:
            rec = recursive_rules(g)
            if rec:
                t = b.where[rec[0]]
                raise GBNFError(f"rule '{rec[0]}' is recursive and strict_recursion is set",
                                t.line, t.column)
    except GBNFError as e:
        if source and e.source is None:
            raise GBNFError(e.reason, e.line, e.column, source) from None
        raise
    except GrammarError as e:
        raise GBNFError(str(e), 1, 1, source) from e
    return g
