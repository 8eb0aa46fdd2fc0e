"""XML text building blocks as grammar IR, and a minimal regex -> escaped-XML-text converter.

Everything here describes *serialized* XML (what appears between tags or inside an
attribute's double quotes), so the markup characters are always escaped:

- text (``text_unit``): any XML character except ``<``, ``&``, ``>`` and CR, or a
  reference ``&lt;`` ``&gt;`` ``&amp;`` ``&quot;`` ``&apos;``, a numeric character
  reference whose value is a legal XML character (``&#65;``, ``&#x41;``, no leading
  zeros), or ``&name;`` for a declared internal general entity whose replacement text is
  plain text.  Excluding a raw ``>`` also rules out the forbidden ``]]>``.
- attribute values (``attr_unit``): as text, but a raw ``"`` and raw TAB/LF/CR are
  excluded too (write ``&quot;`` ``&#9;`` ``&#10;`` ``&#13;``); a raw ``>`` is allowed.
- :func:`cdata_section`: ``<![CDATA[...]]>`` whose content does not contain ``]]>``.
- :func:`regex_text`: a regular expression over *decoded* characters, turned into IR
  over the escaped form (``<`` matches ``&lt;``, ``&`` matches ``&amp;`` ...).  Supported:
  literals, ``\\d \\w \\s \\D \\W \\S`` and escaped punctuation, ``.``, classes ``[...]`` with
  ranges and negation, groups ``(...)`` / ``(?:...)``, ``|``, ``? * +``, ``{m}``, ``{m,}``,
  ``{m,n}``; a leading ``^`` and trailing ``$`` are accepted and ignored (patterns are
  always anchored).  Anything else raises :class:`GrammarError` naming the position.
"""

from __future__ import annotations

import re

from decoding.errors import GrammarError
from decoding.ir import NOTHING, Node, char_class, choice, lit, opt, plus, rep, seq, star

__all__ = ["XML_CHAR_RANGES", "text_unit", "attr_unit", "char_ref", "entity_refs",
           "cdata_section", "regex_text", "escape_text", "escape_attr", "int_range"]

#: XML 1.0 Char, as code-point ranges.
XML_CHAR_RANGES = ((0x9, 0x9), (0xA, 0xA), (0xD, 0xD), (0x20, 0xD7FF), (0xE000, 0xFFFD),
                   (0x10000, 0x10FFFF))
_PREDEF = (("lt", "<"), ("gt", ">"), ("amp", "&"), ("quot", '"'), ("apos", "'"))


def _minus(ranges, excluded: str):
    out = list(ranges)
    for ch in excluded:
        cp = ord(ch)
        nxt = []
        for lo, hi in out:
            if lo <= cp <= hi:
                if lo < cp:
                    nxt.append((lo, cp - 1))
                if cp < hi:
                    nxt.append((cp + 1, hi))
            else:
                nxt.append((lo, hi))
        out = nxt
    return out


def int_range(lo: int, hi: int, base: int = 10) -> Node:
    """Numerals (no leading zeros) for the integers ``lo..hi``; hex digits in either case."""
    if lo > hi:
        return NOTHING

    def digits(n: int) -> list[int]:
        ds = []
        while True:
            ds.append(n % base)
            n //= base
            if n == 0:
                return ds[::-1]

    def dclass(a: int, b: int) -> Node:
        rs = []
        if a <= min(b, 9):
            rs.append((0x30 + a, 0x30 + min(b, 9)))
        if b >= 10:
            x = max(a, 10)
            rs.append((0x61 + x - 10, 0x61 + b - 10))
            rs.append((0x41 + x - 10, 0x41 + b - 10))
        return char_class(rs)

    def same_len(a: list[int], b: list[int]) -> Node:
        if len(a) == 1:
            return dclass(a[0], b[0])
        if a[0] == b[0]:
            return seq(dclass(a[0], a[0]), same_len(a[1:], b[1:]))
        top, bot = [base - 1] * (len(a) - 1), [0] * (len(a) - 1)
        alts = [seq(dclass(a[0], a[0]), same_len(a[1:], top))]
        if a[0] + 1 <= b[0] - 1:
            alts.append(seq(dclass(a[0] + 1, b[0] - 1), rep(dclass(0, base - 1), len(a) - 1,
                                                            len(a) - 1)))
        alts.append(seq(dclass(b[0], b[0]), same_len(bot, b[1:])))
        return choice(*alts)

    alts = []
    n = lo
    while n <= hi:
        ln = len(digits(n))
        top = base ** ln - 1
        alts.append(same_len(digits(n), digits(min(hi, top))))
        n = top + 1
    return choice(*alts)


def char_ref() -> Node:
    """``&#N;`` / ``&#xH;`` for every legal XML character, without leading zeros."""
    dec = choice(*(int_range(a, b, 10) for a, b in XML_CHAR_RANGES))
    hexa = choice(*(int_range(a, b, 16) for a, b in XML_CHAR_RANGES))
    return seq(lit("&#"), choice(dec, seq(lit("x"), hexa)), lit(";"))


def entity_refs(general_entities: dict[str, str] | None = None, *, numeric: bool = True) -> Node:
    """Predefined entity references, numeric character references (if ``numeric``) and
    ``&name;`` for the given internal general entities (name -> replacement text); entities
    whose full expansion contains ``<`` (markup) are left out."""
    alts: list[Node] = [lit(f"&{n};") for n, _ in _PREDEF]
    if numeric:
        alts.append(char_ref())
    else:  # the references the canonical form writes
        alts += [lit("&#9;"), lit("&#10;"), lit("&#13;")]
    for name in sorted(general_entities or {}):
        if name in dict(_PREDEF):
            continue
        if _expands_to_text(name, general_entities or {}, set()):
            alts.append(lit(f"&{name};"))
    return choice(*alts)


def _expands_to_text(name: str, ents: dict[str, str], seen: set[str]) -> bool:
    if name in dict(_PREDEF) and name not in ents:
        return True
    if name not in ents or name in seen:
        return False
    text = ents[name]
    if "<" in text:
        return False
    for m in re.finditer(r"&([^#;&\s][^;&\s]*);", text):
        if not _expands_to_text(m.group(1), ents, seen | {name}):
            return False
    return "&" not in re.sub(r"&(#x[0-9a-fA-F]+|#[0-9]+|[^;&\s]+);", "", text)


def text_unit(general_entities: dict[str, str] | None = None, *, numeric: bool = True) -> Node:
    """One character or reference of element text."""
    return choice(char_class(_minus(XML_CHAR_RANGES, "<&>\r")),
                  entity_refs(general_entities, numeric=numeric))


def attr_unit(general_entities: dict[str, str] | None = None, *, numeric: bool = True) -> Node:
    """One character or reference of a double-quoted attribute value."""
    return choice(char_class(_minus(XML_CHAR_RANGES, '<&"\t\n\r')),
                  entity_refs(general_entities, numeric=numeric))


def cdata_section() -> Node:
    """``<![CDATA[`` content ``]]>`` where content never contains ``]]>`` (nor CR)."""
    not_br = char_class(_minus(XML_CHAR_RANGES, "]\r"))
    not_br_gt = char_class(_minus(XML_CHAR_RANGES, "]>\r"))
    body = seq(star(choice(not_br, seq(lit("]"), not_br), seq(lit("]]"), star(lit("]")),
                                                               not_br_gt))),
               rep(lit("]"), 0, 1))
    return seq(lit("<![CDATA["), body, lit("]]>"))


def escape_text(s: str) -> str:
    """Canonical escaping of element text (``&`` ``<`` ``>`` and CR)."""
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\r", "&#13;"))


def escape_attr(s: str) -> str:
    """Canonical escaping of a double-quoted attribute value."""
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
            .replace("\t", "&#9;").replace("\n", "&#10;").replace("\r", "&#13;"))


# ----------------------------------------------------------------------------- regex

_ESC_TEXT = {"<": "&lt;", "&": "&amp;", ">": "&gt;", "\r": "&#13;"}
_ALL = [(0, 0x10FFFF)]
_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x9, 0xA), (0xD, 0xD), (0x20, 0x20)]


def _complement(rs):
    rs = sorted(rs)
    out, nxt = [], 0
    for lo, hi in rs:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= 0x10FFFF:
        out.append((nxt, 0x10FFFF))
    return out


def _intersect_xml(rs):
    out = []
    for lo, hi in rs:
        for a, b in XML_CHAR_RANGES:
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                out.append((x, y))
    return out


def _chars_to_xml(rs, escapes: dict[str, str]) -> Node:
    """IR for one decoded character in ``rs``, written in escaped form."""
    rs = _intersect_xml(rs)
    special = [c for c in escapes if any(lo <= ord(c) <= hi for lo, hi in rs)]
    plain = _minus(rs, "".join(escapes))
    alts = [char_class(plain)] if plain else []
    alts += [lit(escapes[c]) for c in special]
    return choice(*alts) if alts else NOTHING


class _Regex:
    def __init__(self, pattern: str, escapes: dict[str, str]) -> None:
        self.p = pattern
        self.i = 0
        self.esc = escapes

    def err(self, why: str) -> GrammarError:
        return GrammarError(f"text pattern {self.p!r} at offset {self.i}: {why}")

    def parse(self) -> Node:
        if self.p.startswith("^"):
            self.i = 1
        node = self.alt()
        if self.i == len(self.p) - 1 and self.p[self.i] == "$":
            self.i += 1
        if self.i != len(self.p):
            raise self.err(f"unexpected {self.p[self.i]!r}")
        return node

    def alt(self) -> Node:
        alts = [self.concat()]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            alts.append(self.concat())
        return choice(*alts)

    def concat(self) -> Node:
        items: list[Node] = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            if self.p[self.i] == "$" and self.i == len(self.p) - 1:
                break
            items.append(self.quant(self.atom()))
        return seq(*items) if items else seq()

    def quant(self, node: Node) -> Node:
        while self.i < len(self.p) and self.p[self.i] in "?*+{":
            c = self.p[self.i]
            if c == "{":
                j = self.p.find("}", self.i)
                body = self.p[self.i + 1:j] if j > 0 else ""
                parts = body.split(",")
                try:
                    lo = int(parts[0])
                    hi = lo if len(parts) == 1 else (None if parts[1] == "" else int(parts[1]))
                except ValueError:
                    raise self.err("malformed {m,n} quantifier") from None
                if len(parts) > 2:
                    raise self.err("malformed {m,n} quantifier")
                self.i = j + 1
                node = rep(node, lo, hi)
            else:
                self.i += 1
                node = {"?": opt, "*": star, "+": plus}[c](node)
            if self.i < len(self.p) and self.p[self.i] in "?+":
                raise self.err("lazy/possessive quantifiers are not supported")
        return node

    def atom(self) -> Node:
        c = self.p[self.i]
        if c == "(":
            self.i += 1
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?", self.i):
                raise self.err("only (...) and (?:...) groups are supported")
            node = self.alt()
            if self.i >= len(self.p) or self.p[self.i] != ")":
                raise self.err("missing ')'")
            self.i += 1
            return node
        if c == "[":
            return _chars_to_xml(self.klass(), self.esc)
        if c == ".":
            self.i += 1
            return _chars_to_xml(_minus(_ALL, "\n"), self.esc)
        if c == "\\":
            rs = self.escape(in_class=False)
            return _chars_to_xml(rs, self.esc)
        if c in "*+?{":
            raise self.err(f"nothing to repeat before {c!r}")
        if c in "^$":
            raise self.err(f"anchor {c!r} is only supported at the ends of the pattern")
        self.i += 1
        return _chars_to_xml([(ord(c), ord(c))], self.esc)

    def escape(self, *, in_class: bool) -> list[tuple[int, int]]:
        self.i += 1
        if self.i >= len(self.p):
            raise self.err("dangling backslash")
        c = self.p[self.i]
        self.i += 1
        table = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
        if c in table:
            return table[c]
        if c.lower() in table:
            return _complement(table[c.lower()])
        simple = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
        if c in simple:
            return [(ord(simple[c]),) * 2]
        if c == "u":
            h = self.p[self.i:self.i + 4]
            if len(h) != 4 or any(x not in "0123456789abcdefABCDEF" for x in h):
                raise self.err("\\u needs 4 hex digits")
            self.i += 4
            return [(int(h, 16),) * 2]
        if c.isalnum():
            raise self.err(f"unsupported escape \\{c}")
        return [(ord(c), ord(c))]

    def klass(self) -> list[tuple[int, int]]:
        self.i += 1
        neg = self.p.startswith("^", self.i)
        if neg:
            self.i += 1
        rs: list[tuple[int, int]] = []
        first = True
        while True:
            if self.i >= len(self.p):
                raise self.err("missing ']'")
            c = self.p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "\\":
                part = self.escape(in_class=True)
            else:
                self.i += 1
                part = [(ord(c), ord(c))]
            if len(part) == 1 and part[0][0] == part[0][1] and self.p.startswith("-", self.i) \
                    and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]":
                self.i += 1
                if self.p[self.i] == "\\":
                    hi = self.escape(in_class=True)
                    if len(hi) != 1 or hi[0][0] != hi[0][1]:
                        raise self.err("class range ends in a class escape")
                    hcp = hi[0][0]
                else:
                    hcp = ord(self.p[self.i])
                    self.i += 1
                if hcp < part[0][0]:
                    raise self.err("reversed class range")
                part = [(part[0][0], hcp)]
            rs.extend(part)
        return _complement(rs) if neg else rs


def regex_text(pattern: str, *, attribute: bool = False) -> Node:
    """IR for escaped XML text whose *decoded* value fully matches ``pattern``."""
    esc = dict(_ESC_TEXT)
    if attribute:
        esc = {"<": "&lt;", "&": "&amp;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;",
               "\r": "&#13;"}
    node = _Regex(pattern, esc).parse()
    if node == NOTHING:
        raise GrammarError(f"text pattern {pattern!r} matches no string of XML characters")
    return node

