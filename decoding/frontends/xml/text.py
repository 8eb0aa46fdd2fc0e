"""XML text building blocks as grammar IR, and the XML encoders of the regex engine.

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
- :func:`text_char` / :func:`attr_char`: one *decoded* character of a code-point set,
  written in escaped form (``<`` as ``&lt;``, ``&`` as ``&amp;`` ...): the encoders that
  :func:`decoding.text.regex.regex_ir` takes to turn a pattern over decoded text into IR
  over serialized XML.  Characters that are not XML characters are left out.
"""

from __future__ import annotations

import re
from functools import lru_cache

from decoding.ir import MAX_CP, NOTHING, Node, char_class, choice, lit, rep, seq, star

__all__ = ["XML_CHAR_RANGES", "text_unit", "attr_unit", "char_ref", "entity_refs",
           "cdata_section", "text_char", "attr_char", "escape_text", "escape_attr", "int_range"]

#: XML 1.0 Char, as code-point ranges.
XML_CHAR_RANGES = ((0x9, 0x9), (0xA, 0xA), (0xD, 0xD), (0x20, 0xD7FF), (0xE000, 0xFFFD),
                   (0x10000, MAX_CP))
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


# ----------------------------------------------------------------------------- encoders

_ESC_TEXT = {"<": "&lt;", "&": "&amp;", ">": "&gt;", "\r": "&#13;"}
_ESC_ATTR = {"<": "&lt;", "&": "&amp;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}


def _intersect_xml(rs):
    out = []
    for lo, hi in rs:
        for a, b in XML_CHAR_RANGES:
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                out.append((x, y))
    return out


def _escaped_char(rs, escapes: dict[str, str]) -> Node:
    """IR for one decoded XML character in ``rs``, written in escaped form."""
    rs = _intersect_xml(rs)
    special = [c for c in escapes if any(lo <= ord(c) <= hi for lo, hi in rs)]
    plain = _minus(rs, "".join(escapes))
    alts = [char_class(plain)] if plain else []
    alts += [lit(escapes[c]) for c in special]
    return choice(*alts) if alts else NOTHING


@lru_cache(maxsize=4096)
def text_char(ranges: tuple[tuple[int, int], ...]) -> Node:
    """One decoded character in ``ranges`` as element text (the canonical escapes of
    :func:`escape_text`); an encoder for :func:`decoding.text.regex.regex_ir`."""
    return _escaped_char(ranges, _ESC_TEXT)


@lru_cache(maxsize=4096)
def attr_char(ranges: tuple[tuple[int, int], ...]) -> Node:
    """One decoded character in ``ranges`` inside a double-quoted attribute value (the
    escapes of :func:`escape_attr`); an encoder for :func:`decoding.text.regex.regex_ir`."""
    return _escaped_char(ranges, _ESC_ATTR)
