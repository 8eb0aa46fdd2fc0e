"""Compile a parsed DTD (:class:`decoding.frontends.xml.model.DTD`) to the grammar IR for one root element.

The generated language is a subset of the documents that are well-formed and valid
against the DTD, written in one canonical shape (see docs/xml.md):

- optional ``<?xml version="1.0" encoding="UTF-8"?>`` (``xml_declaration``), no DOCTYPE,
  no comments, no processing instructions;
- start tags ``<name attr="v" ...>``: exactly one space before each attribute, values in
  double quotes, attributes in declaration order; ``#REQUIRED`` always present,
  ``#IMPLIED`` and defaulted attributes optional, ``#FIXED`` attributes always present
  with their fixed value (so namespace declarations such as ``xmlns:log4j`` are
  self-contained);
- EMPTY elements are written ``<name/>``; other elements whose content may be empty may
  be written ``<name/>`` or ``<name></name>``;
- element-only content: nothing between tags (``whitespace="compact"``) or up to
  ``max_ws`` characters of ``[ \\t\\n]`` before each child and before the end tag
  (``"flexible"``);
- text (``#PCDATA``, mixed, ANY): see :mod:`decoding.frontends.xml.text` (``<`` ``&`` ``>`` always
  escaped, references allowed); CDATA sections optional (``cdata``); an element listed in
  ``text_patterns`` has exactly the text its pattern describes, the whole decoded text
  matching it (anchored, :mod:`decoding.text.regex`; no CDATA there);
- recursion: an element may occur nested inside itself at most ``max_depth`` times on
  one path (``Grammar.max_depth``, default :data:`decoding.ir.DEFAULT_MAX_DEPTH`; the
  byte automaton unrolls ``Ref`` to that depth);
- ID uniqueness and IDREF targets are not regular and are not enforced
  (``ids="omit"`` leaves out ``#IMPLIED`` ID/IDREF/IDREFS attributes entirely).

With ``failsafe=True`` the document may instead be
``<error><code>SCHEMA_MISMATCH</code><message>TEXT</message></error>``.
"""

from __future__ import annotations

import re
from typing import Iterable, Literal, Mapping

from decoding.errors import DTDError, GrammarError, UsageError
from decoding.frontends.xml.model import DTD, AttributeDecl, ElementDecl, Particle
from decoding.frontends.xml.text import attr_unit, cdata_section, escape_attr, text_char, text_unit
from decoding.ir import (DEFAULT_MAX_DEPTH, EMPTY, NOTHING, Grammar, Node, Ref, byteset, char_class,
                         choice, lit, nullable, opt, plus, rep, seq, star)
from decoding.ir.productive import find_empty
from decoding.text.regex import PatternError, regex_ir
from decoding.text.xml_name import NAME_RANGES, NAME_START_RANGES

__all__ = ["dtd_grammar", "grammar_from_spec", "xml_declaration_text", "failsafe_document", "element_rule",
           "FAILSAFE_CODE", "DEFAULT_MAX_WS"]

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
FAILSAFE_CODE = "SCHEMA_MISMATCH"
DEFAULT_MAX_WS = 8
xml_declaration_text = XML_DECLARATION


def element_rule(name: str) -> str:
    """Rule name used for element ``name`` in the generated grammar."""
    return f"el:{name}"


def _name() -> Node:
    return seq(char_class(NAME_START_RANGES), star(char_class(NAME_RANGES)))


def _nmtoken() -> Node:
    return plus(char_class(NAME_RANGES))


def _list_of(item: Node) -> Node:
    return seq(item, star(seq(lit(" "), item)))


def failsafe_document(*, numeric_refs: bool = True) -> Node:
    """``<error><code>SCHEMA_MISMATCH</code><message>TEXT</message></error>`` (TEXT non-empty)."""
    return seq(lit(f"<error><code>{FAILSAFE_CODE}</code><message>"),
               plus(text_unit(numeric=numeric_refs)), lit("</message></error>"))


def _particle_nullable(p: Particle) -> bool:
    if p.occur in ("?", "*"):
        return True
    if p.kind == "name":
        return False
    if p.kind == "seq":
        return all(_particle_nullable(c) for c in p.children)
    return any(_particle_nullable(c) for c in p.children)


class _Compiler:
    def __init__(self, dtd: DTD, *, whitespace: str, max_ws: int, cdata: bool, ids: str,
                 text_patterns: Mapping[str, str | Node], numeric_refs: bool,
                 only: frozenset[str] | None, general_entities: bool) -> None:
        self.dtd = dtd
        self.only = only
        self.ents = dict(dtd.general_entities) if general_entities else {}
        self.numeric = numeric_refs
        self.text = text_unit(self.ents, numeric=numeric_refs)
        self.attr = attr_unit(self.ents, numeric=numeric_refs)
        self.cdata = cdata_section() if cdata else None
        self.ws = EMPTY if whitespace == "compact" else rep(byteset([(9, 10), (32, 32)]), 0,
                                                                 max_ws)
        self.ids = ids
        self.patterns: dict[str, Node] = {}
        for el, pat in text_patterns.items():
            decl = dtd.element(el)
            if decl is None:
                raise DTDError(f"text_patterns names undeclared element {el!r}")
            if decl.content != "PCDATA":
                raise DTDError(f"text_patterns: element {el!r} has {decl.content} content; "
                               "patterns apply to (#PCDATA) elements only", decl.line,
                               decl.column, dtd.source)
            self.patterns[el] = self._text_pattern(decl, pat) if isinstance(pat, str) else pat
        self.rules: dict[str, Node] = {}

    def _text_pattern(self, decl: ElementDecl, pattern: str) -> Node:
        """IR of element text whose whole decoded value matches ``pattern`` (anchored)."""
        try:
            node = regex_ir(pattern, text_char, anchored=True)
        except PatternError as e:
            raise self.err(f"text_patterns[{decl.name!r}]: {e}", decl) from None
        if node == NOTHING:
            raise self.err(f"text_patterns[{decl.name!r}]: pattern {pattern!r} matches no string "
                           "of XML characters", decl)
        return node

    def err(self, reason: str, decl: ElementDecl | AttributeDecl | None) -> DTDError:
        if decl is None:
            return DTDError(reason, source=self.dtd.source)
        return DTDError(reason, decl.line, decl.column, self.dtd.source)

    # ---------------------------------------------------------------- elements
    def element(self, name: str, ref_from: ElementDecl | None) -> None:
        """Define the rule for ``name`` and (transitively) every element it can contain."""
        todo = [(name, ref_from)]
        while todo:
            n, origin = todo.pop()
            if element_rule(n) in self.rules:
                continue
            decl = self.dtd.element(n)
            if decl is None:
                where = f" (referenced by {origin.name!r})" if origin else ""
                raise self.err(f"element {n!r} is not declared{where}", origin)
            self.rules[element_rule(n)] = NOTHING  # placeholder against re-entry
            self.rules[element_rule(n)] = self._element_node(decl)
            for child in self._children(decl):
                todo.append((child, decl))

    def allowed(self, name: str) -> bool:
        return self.only is None or name in self.only

    def _children(self, decl: ElementDecl) -> list[str]:
        if decl.content == "ANY":
            return [e.name for e in self.dtd.elements if self.allowed(e.name)]
        if decl.content == "MIXED":
            return [n for n in decl.mixed_names if self.allowed(n)]
        out: list[str] = []

        def visit(p: Particle) -> None:
            if p.kind == "name" and self.allowed(p.name):  # type: ignore[arg-type]
                out.append(p.name)  # type: ignore[arg-type]
            for c in p.children:
                visit(c)
        if decl.model is not None:
            visit(decl.model)
        return out

    def _element_node(self, decl: ElementDecl) -> Node:
        start = seq(lit("<" + decl.name), self._attributes(decl))
        if decl.content == "EMPTY":
            return seq(start, lit("/>"))
        if decl.content == "CHILDREN":
            assert decl.model is not None
            body = seq(self.ws, self._particle(decl.model))
            can_be_empty = _particle_nullable(decl.model)
        elif decl.content == "PCDATA":
            pat = self.patterns.get(decl.name)
            if pat is not None:
                body, can_be_empty = pat, nullable(pat)
            else:
                body, can_be_empty = star(self._text_item()), True
        else:  # MIXED / ANY
            names = self._children(decl)
            body = star(choice(self._text_item(), *(Ref(element_rule(n)) for n in names)))
            can_be_empty = True
        full = seq(lit(">"), body, lit(f"</{decl.name}>"))
        return seq(start, choice(lit("/>"), full) if can_be_empty else full)

    def _text_item(self) -> Node:
        return choice(self.text, self.cdata) if self.cdata is not None else self.text

    def _particle(self, p: Particle) -> Node:
        if p.kind == "name":
            if not self.allowed(p.name):  # type: ignore[arg-type]
                node = NOTHING
            else:
                node = seq(Ref(element_rule(p.name)), self.ws)  # type: ignore[arg-type]
        else:
            parts = [self._particle(c) for c in p.children]
            node = seq(*parts) if p.kind == "seq" else choice(*parts)
        if p.occur == "?":
            return opt(node)
        if p.occur == "*":
            return star(node)
        if p.occur == "+":
            return plus(node)
        return node

    # ---------------------------------------------------------------- attributes
    def _attributes(self, decl: ElementDecl) -> Node:
        parts: list[Node] = []
        for a in self.dtd.attlist(decl.name):
            if self.ids == "omit" and a.type in ("ID", "IDREF", "IDREFS"):
                if a.default == "#REQUIRED":
                    raise self.err(f"ids='omit' but attribute {a.name!r} of {a.element!r} is "
                                   f"a #REQUIRED {a.type}", a)
                continue
            if a.default == "#FIXED":
                parts.append(lit(f' {a.name}="{escape_attr(a.value or "")}"'))
                continue
            value = self._attr_value(a)
            item = seq(lit(f' {a.name}="'), value, lit('"'))
            if a.default == "#REQUIRED":
                if value == NOTHING:
                    raise self.err(f"attribute {a.name!r} of {a.element!r} is #REQUIRED but "
                                   f"no value of type {a.type} is possible", a)
                parts.append(item)
            elif value != NOTHING:
                parts.append(opt(item))
        return seq(*parts)

    def _attr_value(self, a: AttributeDecl) -> Node:
        t = a.type
        if t == "CDATA":
            return star(self.attr)
        if t in ("ID", "IDREF"):
            return _name()
        if t == "IDREFS":
            return _list_of(_name())
        if t == "NMTOKEN":
            return _nmtoken()
        if t == "NMTOKENS":
            return _list_of(_nmtoken())
        if t in ("ENUM", "NOTATION"):
            return choice(*(lit(escape_attr(v)) for v in a.values))
        if t in ("ENTITY", "ENTITIES"):
            ents = [lit(e) for e in self.dtd.unparsed_entities]
            if not ents:
                return NOTHING
            one = choice(*ents)
            return one if t == "ENTITY" else _list_of(one)
        raise self.err(f"unknown attribute type {t!r}", a)


def dtd_grammar(dtd: DTD, root: str, *,
                whitespace: Literal["compact", "flexible"] = "compact",
                max_ws: int = DEFAULT_MAX_WS,
                max_depth: int = DEFAULT_MAX_DEPTH,
                xml_declaration: Literal["optional", "required", "none"] = "optional",
                text_patterns: Mapping[str, str | Node] | None = None,
                failsafe: bool = False,
                cdata: bool = False,
                ids: Literal["allow", "omit"] = "allow",
                numeric_refs: bool = False,
                general_entities: bool = False,
                only: Iterable[str] | None = None) -> Grammar:
    """Grammar IR for documents rooted at ``root`` that are valid against ``dtd``.

    Options are described in the module docstring and docs/xml.md.  ``general_entities``
    allows ``&name;`` for the DTD's internal text entities (off by default: no DOCTYPE is
    written, so a consumer that does not load the DTD could not expand them).
    ``numeric_refs`` allows every numeric character reference (default: only ``&#9;``
    ``&#10;`` ``&#13;``); ``cdata`` allows CDATA sections.  ``only`` restricts the
    document to a profile of element names (others are never generated; content models
    that require them become unsatisfiable), which keeps automata of large DTDs small.
    Raises
    :class:`UsageError` for an undeclared root, :class:`DTDError` for an undeclared reachable
    element, a text pattern on a
    non-(#PCDATA) element, or a #REQUIRED attribute that cannot take any value.
    """
    if whitespace not in ("compact", "flexible"):
        raise GrammarError(f"dtd_grammar(): whitespace must be 'compact' or 'flexible', not {whitespace!r}")
    if xml_declaration not in ("optional", "required", "none"):
        raise GrammarError("dtd_grammar(): xml_declaration must be 'optional', 'required' or 'none', "
                           f"not {xml_declaration!r}")
    if ids not in ("allow", "omit"):
        raise GrammarError(f"dtd_grammar(): ids must be 'allow' or 'omit', not {ids!r}")
    if max_ws < 0 or max_depth < 1:
        raise GrammarError(f"dtd_grammar(): max_ws must be >= 0 and max_depth >= 1 (got "
                           f"max_ws={max_ws}, max_depth={max_depth})")
    if dtd.element(root) is None:
        names = [e.name for e in dtd.elements]
        listed = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
        raise UsageError(f"dtd_grammar(): option root={root!r} is not an element declared in the "
                         f"DTD {dtd.source or '<input>'} ("
                         + (f"declared: {listed})" if names else "it declares no element)"))
    c = _Compiler(dtd, whitespace=whitespace, max_ws=max_ws, cdata=cdata, ids=ids,
                  text_patterns=text_patterns or {}, numeric_refs=numeric_refs,
                  only=None if only is None else frozenset(only) | {root},
                  general_entities=general_entities)
    c.element(root, None)
    doc: Node = Ref(element_rule(root))
    sep = c.ws if whitespace == "flexible" else EMPTY
    decl = seq(lit(XML_DECLARATION), sep)
    if xml_declaration == "required":
        doc = seq(decl, doc)
    elif xml_declaration == "optional":
        doc = seq(opt(decl), doc)
    if failsafe:
        doc = choice(doc, failsafe_document(numeric_refs=numeric_refs))
    rules = [("document", doc)] + sorted(c.rules.items())
    g = Grammar("document", tuple(rules), max_depth)
    empty = find_empty(g)
    if empty is not None:  # e.g. <!ELEMENT r (r)>: name the element and its declaration
        rule, reason = empty
        reason = re.sub(r"'el:([^']*)'", r"'\1'", reason).replace("el:", "")
        decl = dtd.element(rule[3:]) if rule.startswith("el:") else None
        what = f"element '{rule[3:]}'" if decl is not None else f"rule '{rule}'"
        raise DTDError(f"{what}: {reason}", decl.line if decl else None,
                       decl.column if decl else None, dtd.source)
    return g


def grammar_from_spec(spec: Mapping, base_dir: str, **overrides) -> Grammar:
    """Build a grammar from one entry of ``grammars/xml_grammars.json``:
    ``{"dtd": file, "root": name, "text_patterns": {...}, "max_depth": n, ...}``;
    keyword ``overrides`` replace options of the entry."""
    import os

    from decoding.frontends.xml.dtd import parse_dtd
    opts = {k: v for k, v in spec.items() if k not in ("dtd", "root")}
    opts.update(overrides)
    path = os.path.join(base_dir, spec["dtd"])
    with open(path, encoding="utf-8") as fh:
        dtd = parse_dtd(fh.read(), source=path, base_dir=base_dir)
    return dtd_grammar(dtd, spec["root"], **opts)
