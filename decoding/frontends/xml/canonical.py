"""Put a real XML instance into the canonical form that :func:`decoding.frontends.xml.grammar.dtd_grammar`
generates, so that real documents and generated ones can be compared byte for byte.

Canonical form (documented in docs/xml.md):

1. no DOCTYPE, comments or processing instructions; the XML declaration is
   ``<?xml version="1.0" encoding="UTF-8"?>`` when ``xml_declaration=True``, else absent;
2. attributes in DTD declaration order (undeclared ones after them, in document order);
   written as `` name="value"`` with exactly one space before each; ``#FIXED`` attributes
   are added with their fixed value when missing; defaulted attributes are kept exactly
   when the document writes them and never added; values of non-CDATA attributes are
   normalized (trimmed, inner runs of spaces collapsed);
3. attribute values escape ``&`` ``<`` ``"`` TAB LF CR (as ``&amp; &lt; &quot; &#9; &#10; &#13;``);
   text escapes ``&`` ``<`` ``>`` CR; every other character is written as itself
   (character and entity references are decoded first; CDATA sections become text);
4. elements without any content are written ``<name/>``;
5. whitespace-only text inside elements whose declared content is element-only (or EMPTY)
   is removed (``whitespace="compact"``) or kept but cut to its last ``max_ws`` characters
   with CR removed (``"flexible"``); text of (#PCDATA), mixed and ANY elements is kept.

Parsing uses the standard library's expat without namespace processing, so colon names
stay as written and no external DTD or entity is ever fetched.
"""

from __future__ import annotations

import xml.parsers.expat as expat
from dataclasses import dataclass, field
from typing import Literal

from decoding.frontends.xml.model import DTD
from decoding.errors import CanonicalizeError
from decoding.frontends.xml.grammar import XML_DECLARATION
from decoding.frontends.xml.text import escape_attr, escape_text

__all__ = ["canonicalize", "CanonicalizeError", "parse_xml", "XmlElement"]


@dataclass
class XmlElement:
    name: str
    attrs: list[tuple[str, str]]
    children: list["XmlElement | str"] = field(default_factory=list)


def parse_xml(data: bytes | str) -> XmlElement:
    """Parse a document into :class:`XmlElement` trees (text as ``str`` children)."""
    p = expat.ParserCreate()
    p.ordered_attributes = True
    p.specified_attributes = True
    p.buffer_text = True
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[XmlElement] = []
    root: list[XmlElement] = []

    def start(name: str, attrs: list[str]) -> None:
        el = XmlElement(name, list(zip(attrs[0::2], attrs[1::2])))
        if stack:
            stack[-1].children.append(el)
        else:
            root.append(el)
        stack.append(el)

    def end(name: str) -> None:
        stack.pop()

    def chars(s: str) -> None:
        if stack:
            ch = stack[-1].children
            if ch and isinstance(ch[-1], str):
                ch[-1] += s
            else:
                ch.append(s)

    def skipped(name: str, is_pe: bool) -> None:
        raise CanonicalizeError(f"entity &{name}; is declared outside the document and cannot "
                                "be expanded")

    p.StartElementHandler = start
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    p.SkippedEntityHandler = skipped
    try:
        p.Parse(data, True)
    except expat.ExpatError as exc:
        raise CanonicalizeError(f"not well-formed XML at {exc.lineno}:{exc.offset + 1}: "
                                f"{expat.ErrorString(exc.code)}") from None
    return root[0]


def canonicalize(data: bytes | str, dtd: DTD, *,
                 whitespace: Literal["compact", "flexible"] = "compact", max_ws: int = 8,
                 xml_declaration: bool = False) -> bytes:
    """Canonical UTF-8 bytes of the document ``data`` (see the module docstring)."""
    root = parse_xml(data)
    out: list[str] = [XML_DECLARATION] if xml_declaration else []
    _write(root, dtd, whitespace, max_ws, out)
    return "".join(out).encode("utf-8")


def _write(el: XmlElement, dtd: DTD, whitespace: str, max_ws: int, out: list[str]) -> None:
    decl = dtd.element(el.name)
    given = dict(el.attrs)
    attrs: list[tuple[str, str]] = []
    for a in dtd.attlist(el.name):
        if a.name in given:
            v = given.pop(a.name)
            if a.type != "CDATA":
                v = " ".join(v.split(" ")).strip()
                v = " ".join(x for x in v.split(" ") if x)
            attrs.append((a.name, v))
        elif a.default == "#FIXED":
            attrs.append((a.name, a.value or ""))
    attrs += [(n, v) for n, v in el.attrs if n in given]
    out.append("<" + el.name + "".join(f' {n}="{escape_attr(v)}"' for n, v in attrs))
    element_only = decl is not None and decl.content in ("CHILDREN", "EMPTY")
    parts: list[str] = []
    for ch in el.children:
        if isinstance(ch, str):
            if element_only and not ch.strip(" \t\r\n"):
                if whitespace == "flexible" and max_ws > 0:
                    ws = ch.replace("\r", "")[-max_ws:]
                    if ws:
                        parts.append(ws)
                continue
            parts.append(escape_text(ch))
        else:
            sub: list[str] = []
            _write(ch, dtd, whitespace, max_ws, sub)
            parts.append("".join(sub))
    if not parts:
        out.append("/>")
        return
    out.append(">")
    out.extend(parts)
    out.append(f"</{el.name}>")
