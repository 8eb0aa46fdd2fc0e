"""DTD-subset front-end: parse DTD text into the plain-data model of :mod:`decoding.frontends.xml.model`.

Hand-written recursive-descent parser over a stack of input frames (the DTD text,
parameter-entity replacement texts, external files).  Supported:

- ``<!ELEMENT>`` with EMPTY, ANY, ``(#PCDATA)``, mixed ``(#PCDATA|a|b)*`` and children
  models built from ``,`` ``|`` ``?`` ``*`` ``+``;
- ``<!ATTLIST>`` with CDATA, ID, IDREF(S), ENTITY/ENTITIES, NMTOKEN(S), NOTATION and
  enumerated types; ``#REQUIRED``, ``#IMPLIED``, ``#FIXED "v"`` and plain defaults
  (default values are normalized as XML 1.0 §3.3.3 prescribes);
- ``<!ENTITY>``: internal and external parameter entities (``%name;``), internal general
  entities, external/unparsed general entities; ``<!NOTATION>``;
- comments, processing instructions, a leading text declaration ``<?xml ...?>``;
- conditional sections ``<![INCLUDE[...]]>`` / ``<![IGNORE[...]]>`` (keyword usually a PE);
- names with colons (``soap:Envelope``, ``xmlns:log4j``); Name and Nmtoken are those of
  :mod:`decoding.text.xml_name`.

External parameter entities are read from ``base_dir`` (relative system identifiers
only, never the network); without ``base_dir`` referencing one raises :class:`DTDError`.

Limits (:class:`decoding.limits.Limits`, ``limits=`` of :func:`parse_dtd`): the text is
at most ``max_source_chars``; content-model groups nest at most ``max_nesting`` deep;
entity replacement text, parameter *and* general (attribute defaults), is counted as it is
produced, at most ``max_entity_expansion`` characters in total and ``max_entity_depth``
references deep, so a "billion laughs" stops after that many characters of work.
Exceeding one is a :class:`~decoding.errors.LimitError` whose message starts with
``source:line:column`` and names the limit.

Invariants
- every other error is a :class:`DTDError` with 1-based ``line``/``column``; inside an
  internal entity expansion the position is that of the outermost ``%name;`` reference
  in the file being read, and the message names the entity;
- the returned :class:`DTD` has entities expanded everywhere (``Particle`` trees hold
  only element names).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from decoding.errors import DTDError, LimitError
from decoding.frontends.xml.model import DTD, AttributeDecl, ElementDecl, Particle
from decoding.frontends.xml.text import XML_CHAR_RANGES
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.text.xml_name import NAME_RE, NMTOKEN_RE

__all__ = ["parse_dtd", "PREDEFINED_ENTITIES"]

PREDEFINED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}

_NAME_RE = NAME_RE
_NMTOKEN_RE = NMTOKEN_RE
_WS = " \t\r\n"
_GE_REF = re.compile(r"&([^;&\s]+);")
_WS_TO_SPACE = str.maketrans("\t\r\n", "   ")


@dataclass
class _Frame:
    text: str
    pos: int
    entity: str | None  # PE name, None for a file
    source: str | None  # file name for file frames
    ref: tuple[int, int] | None  # (line, col) of the reference in the enclosing file frame
    external: bool  # True for a file frame (own line/column numbering)


@dataclass
class _Entity:
    name: str
    value: str | None  # replacement text of an internal entity
    system: str | None = None
    ndata: str | None = None
    line: int = 0
    column: int = 0


class _Parser:
    def __init__(self, text: str, source: str | None, base_dir: str | None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.nesting = 0  # content-model groups open
        self.attr_src: dict[tuple[str, str], str | None] = {}
        self.ge_text: dict[str, str] = {}  # expanded general entities (attribute values)
        self.pe_text: dict[str, str] = {}  # expanded PEs inside entity values
        self.frames = [_Frame(text, 0, None, source, None, True)]
        self.base_dir = base_dir
        self.source = source
        self.pes: dict[str, _Entity] = {}
        self.ges: dict[str, _Entity] = {}
        self.elements: list[ElementDecl] = []
        self.el_names: set[str] = set()
        self.attrs: list[AttributeDecl] = []
        self.attr_keys: set[tuple[str, str]] = set()
        self.notations: list[str] = []
        self.expanded = 0
        self._decl_at = (1, 1)

    # ------------------------------------------------------------------ positions

    def _file_frame_index(self) -> int:
        for i in range(len(self.frames) - 1, -1, -1):
            if self.frames[i].external:
                return i
        return 0

    def where(self) -> tuple[int, int, str | None, str | None]:
        """(line, column, source, entity) of the current position, as documented."""
        fi = self._file_frame_index()
        f = self.frames[fi]
        if fi + 1 < len(self.frames):
            line, col = self.frames[fi + 1].ref  # type: ignore[misc]
            entity = self.frames[fi + 1].entity
        else:
            line, col = _line_col(f.text, f.pos)
            entity = None
        return line, col, f.source, entity

    def error(self, reason: str) -> DTDError:
        line, col, src, entity = self.where()
        if entity is not None:
            reason = f"{reason} (in the replacement text of %{entity};)"
        return DTDError(reason, line, col, src)

    def limit_error(self, reason: str, at: tuple[int, int] | None = None) -> LimitError:
        line, col, src, entity = self.where()
        if at is not None:
            line, col = at
        if entity is not None:
            reason = f"{reason} (in the replacement text of %{entity};)"
        return LimitError(f"{src or '<input>'}:{line}:{col}: {reason}")

    def count_expansion(self, n: int, at: tuple[int, int] | None = None) -> None:
        """Add ``n`` characters of entity replacement text; LimitError past the limit."""
        self.expanded += n
        if self.expanded > self.limits.max_entity_expansion:
            raise self.limit_error("entity expansion exceeds max_entity_expansion="
                                   f"{self.limits.max_entity_expansion} characters", at)

    # ------------------------------------------------------------------ reading

    @property
    def f(self) -> _Frame:
        return self.frames[-1]

    def _pop_exhausted(self, allow_file: bool) -> bool:
        """Pop finished entity frames; returns True if something was popped."""
        popped = False
        while len(self.frames) > 1 and self.f.pos >= len(self.f.text):
            if self.f.external and not allow_file:
                break
            self.frames.pop()
            popped = True
        return popped

    def at_end(self) -> bool:
        self._pop_exhausted(True)
        return len(self.frames) == 1 and self.f.pos >= len(self.f.text)

    def peek(self, s: str) -> bool:
        f = self.f
        return f.text.startswith(s, f.pos)

    def eat(self, s: str) -> bool:
        if self.peek(s):
            self.f.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.eat(s):
            raise self.error(f"expected {what or repr(s)}, found {self._found()}")

    def _found(self) -> str:
        f = self.f
        if f.pos >= len(f.text):
            return "end of input" if len(self.frames) == 1 else "end of entity replacement text"
        chunk = f.text[f.pos:f.pos + 12].split("\n")[0]
        return repr(chunk)

    def ws(self, *, required: bool = False, pe: bool = True) -> None:
        """Skip white space, expanding parameter-entity references (which count as space)."""
        seen = False
        while True:
            f = self.f
            start = f.pos
            while f.pos < len(f.text) and f.text[f.pos] in _WS:
                f.pos += 1
            if f.pos > start:
                seen = True
            if f.pos >= len(f.text) and len(self.frames) > 1 and not f.external:
                self.frames.pop()
                seen = True
                continue
            if pe and f.pos < len(f.text) and f.text[f.pos] == "%" and \
                    _NAME_RE.match(f.text, f.pos + 1):
                self.push_pe(pad=True)
                seen = True
                continue
            break
        if required and not seen:
            raise self.error(f"expected white space, found {self._found()}")

    def name(self, what: str = "a name") -> str:
        f = self.f
        m = _NAME_RE.match(f.text, f.pos)
        if not m:
            raise self.error(f"expected {what}, found {self._found()}")
        f.pos = m.end()
        return m.group()

    def _peek_name(self) -> str | None:
        m = _NAME_RE.match(self.f.text, self.f.pos)
        return m.group() if m else None

    def nmtoken(self) -> str:
        f = self.f
        m = _NMTOKEN_RE.match(f.text, f.pos)
        if not m:
            raise self.error(f"expected a name token, found {self._found()}")
        f.pos = m.end()
        return m.group()

    def literal(self, *, entity_value: bool = False) -> str:
        """A quoted literal.  In entity values, PE refs and char refs are expanded."""
        f = self.f
        if f.pos >= len(f.text) or f.text[f.pos] not in "\"'":
            raise self.error(f"expected a quoted literal, found {self._found()}")
        q = f.text[f.pos]
        f.pos += 1
        if not entity_value:
            end = f.text.find(q, f.pos)
            if end < 0:
                raise self.error(f"unterminated literal (missing {q})")
            s = f.text[f.pos:end]
            f.pos = end + 1
            return s
        out: list[str] = []
        base = len(self.frames)
        starts: list[int] = []  # len(out) when each PE frame above base was pushed
        while True:
            f = self.f
            if f.pos >= len(f.text):
                if len(self.frames) > base:
                    # a PE's expansion inside an entity value does not depend on where it
                    # is referenced: keep it, so repeated references cost one count each
                    done = "".join(out[starts[-1]:])
                    out[starts.pop():] = [done]
                    self.pe_text[self.frames.pop().entity] = done  # type: ignore[index]
                    continue
                raise self.error(f"unterminated entity value (missing {q})")
            c = f.text[f.pos]
            if c == q and len(self.frames) == base:
                f.pos += 1
                return "".join(out)
            if c == "%":
                m = _NAME_RE.match(f.text, f.pos + 1)
                if not m:
                    raise self.error("'%' in an entity value must start a parameter-entity "
                                     "reference")
                done = self.pe_text.get(m.group())
                if done is not None and f.text.startswith(";", m.end()):
                    self.count_expansion(len(done))
                    out.append(done)
                    f.pos = m.end() + 1
                    continue
                self.push_pe(pad=False)
                starts.append(len(out))
                continue
            if c == "&" and f.text.startswith("&#", f.pos):
                out.append(self.char_ref())
                continue
            if c == "&":
                m = _NAME_RE.match(f.text, f.pos + 1)
                if not m or not f.text.startswith(";", m.end()):
                    raise self.error("'&' in an entity value must start an entity or "
                                     "character reference")
                out.append(f.text[f.pos:m.end() + 1])  # bypassed, kept verbatim
                f.pos = m.end() + 1
                continue
            j = f.pos + 1  # a run of plain characters at once
            while j < len(f.text) and f.text[j] not in "%&\"'":
                j += 1
            out.append(f.text[f.pos:j])
            f.pos = j

    def char_ref(self) -> str:
        f = self.f
        m = re.compile(r"&#(?:x([0-9a-fA-F]+)|([0-9]+));").match(f.text, f.pos)
        if not m:
            raise self.error("malformed character reference")
        cp = int(m.group(1), 16) if m.group(1) else int(m.group(2))
        if not _is_xml_char(cp):
            raise self.error(f"character reference to U+{cp:04X}, which is not an XML character")
        f.pos = m.end()
        return chr(cp)

    def push_pe(self, *, pad: bool) -> None:
        """Consume ``%name;`` at the current position and push its replacement text."""
        line, col, _, _ = self.where()
        f = self.f
        f.pos += 1
        name = self.name("a parameter-entity name")
        self.expect(";", "';' ending the parameter-entity reference")
        ent = self.pes.get(name)
        if ent is None:
            f.pos -= len(name) + 2
            raise self.error(f"undeclared parameter entity %{name};")
        if any(fr.entity == name for fr in self.frames):
            raise self.error(f"recursive reference to parameter entity %{name};")
        if len(self.frames) > self.limits.max_entity_depth:
            raise self.limit_error("parameter entities nested more than max_entity_depth="
                                   f"{self.limits.max_entity_depth} deep")
        if ent.value is not None:
            text = f" {ent.value} " if pad else ent.value
            self.count_expansion(len(text))
            ref = (line, col)
            if self.frames[-1].external is False and self.frames[-1].ref is not None:
                ref = self.frames[-1].ref
            self.frames.append(_Frame(text, 0, name, None, ref, False))
            return
        text, path = self._load_external(ent, line, col)
        text = _strip_text_decl(text)
        self.frames.append(_Frame(f" {text} " if pad else text, 0, name, path, (line, col),
                                  True))

    def _load_external(self, ent: _Entity, line: int, col: int) -> tuple[str, str]:
        sys_id = ent.system or ""
        src = self.f.source
        if self.base_dir is None:
            raise DTDError(f"external parameter entity %{ent.name}; (SYSTEM {sys_id!r}) cannot "
                           "be resolved: pass base_dir", line, col, src)
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", sys_id) or os.path.isabs(sys_id):
            raise DTDError(f"external parameter entity %{ent.name}; has a non-relative system "
                           f"identifier {sys_id!r}; only files under base_dir are read",
                           line, col, src)
        base = os.path.realpath(self.base_dir)
        path = os.path.realpath(os.path.join(base, sys_id))
        if os.path.commonpath([base, path]) != base:
            raise DTDError(f"external parameter entity %{ent.name}; points outside base_dir",
                           line, col, src)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise DTDError(f"cannot read external parameter entity %{ent.name}; from {path}: "
                           f"{exc}", line, col, src) from None
        self.count_expansion(len(text), (line, col))
        return text, path

    # ------------------------------------------------------------------ grammar

    def parse(self) -> DTD:
        f = self.f
        f.text = _strip_text_decl(f.text, keep_positions=True)
        open_sections: list[tuple[int, int, str | None]] = []
        while True:
            self.ws()
            if self._pop_exhausted(True):
                continue
            if self.at_end():
                break
            if self.peek("]]>"):
                if not open_sections:
                    raise self.error("']]>' without an open conditional section")
                open_sections.pop()
                self.f.pos += 3
                continue
            if self.peek("<!["):
                line, col, src, _ = self.where()
                if self._conditional():
                    open_sections.append((line, col, src))
                continue
            self.markup()
        if open_sections:
            line, col, src = open_sections[-1]
            raise DTDError("unterminated conditional section (missing ']]>')", line, col, src)
        declared = set(self.notations)
        for a in self.attrs:  # XML 1.0 VC Notation Attributes; may be declared after the ATTLIST
            missing = [v for v in a.values if v not in declared] if a.type == "NOTATION" else []
            if missing:
                raise DTDError(f"attribute {a.name!r} of {a.element!r}: notation {missing[0]!r} is "
                               "not declared (add <!NOTATION " + missing[0] + " SYSTEM \"...\">)",
                               a.line, a.column, self.attr_src.get((a.element, a.name)))
        unparsed = {e.name for e in self.ges.values() if e.ndata is not None}
        for a in self.attrs:  # VC Entity Name: may be declared after the ATTLIST
            if a.type in ("ENTITY", "ENTITIES") and a.value is not None:
                missing = [v for v in a.value.split(" ") if v not in unparsed]
                if missing:
                    raise DTDError(f"attribute {a.name!r} of {a.element!r}: default {a.value!r} "
                                   f"names {missing[0]!r}, which is not a declared unparsed entity "
                                   "(<!ENTITY " + missing[0] + " SYSTEM \"...\" NDATA n>)",
                                   a.line, a.column, self.attr_src.get((a.element, a.name)))
        return DTD(
            elements=tuple(self.elements),
            attributes=tuple(self.attrs),
            general_entities=tuple((e.name, e.value) for e in self.ges.values()
                                   if e.value is not None),
            source=self.source,
            unparsed_entities=tuple(e.name for e in self.ges.values() if e.ndata is not None),
            notations=tuple(self.notations),
        )

    def markup(self) -> None:
        self._decl_at = self.where()[:2]
        if self.peek("<!--"):
            self.comment()
        elif self.peek("<?"):
            self.pi()
        elif self.eat("<!ELEMENT"):
            self.element_decl()
        elif self.eat("<!ATTLIST"):
            self.attlist_decl()
        elif self.eat("<!ENTITY"):
            self.entity_decl()
        elif self.eat("<!NOTATION"):
            self.notation_decl()
        else:
            raise self.error(f"expected a markup declaration, comment or processing "
                             f"instruction, found {self._found()}")

    def comment(self) -> None:
        f = self.f
        end = f.text.find("-->", f.pos + 4)
        if end < 0:
            raise self.error("unterminated comment (missing '-->')")
        f.pos = end + 3

    def pi(self) -> None:
        f = self.f
        f.pos += 2
        target = self.name("a processing-instruction target")
        if target.lower() == "xml":
            f.pos -= len(target) + 2
            raise self.error("an XML/text declaration is only allowed at the very start")
        end = f.text.find("?>", f.pos)
        if end < 0:
            raise self.error("unterminated processing instruction (missing '?>')")
        f.pos = end + 2

    def _conditional(self) -> bool:
        """Parse ``<![KEYWORD[``; IGNORE sections are skipped whole.  True for INCLUDE."""
        self.f.pos += 3
        self.ws()
        kw = self.name("INCLUDE or IGNORE")
        if kw not in ("INCLUDE", "IGNORE"):
            raise self.error(f"conditional section keyword must be INCLUDE or IGNORE, not {kw!r}")
        self.ws()
        self.expect("[", "'[' opening the conditional section")
        if kw == "INCLUDE":
            return True
        # IGNORE: skip, honouring nested <![ ... ]]>
        depth = 1
        f = self.f
        while depth:
            i, j = f.text.find("<![", f.pos), f.text.find("]]>", f.pos)
            if j < 0:
                raise self.error("unterminated IGNORE section (missing ']]>')")
            if 0 <= i < j:
                depth += 1
                f.pos = i + 3
            else:
                depth -= 1
                f.pos = j + 3
        return False

    def _decl_end(self, what: str) -> None:
        self.ws()
        self.expect(">", f"'>' ending the {what} declaration")

    # <!ELEMENT ...>
    def element_decl(self) -> None:
        line, col = self._decl_at
        self.ws(required=True)
        name = self.name("an element name")
        self.ws(required=True)
        decl: ElementDecl
        if self.eat("EMPTY"):
            decl = ElementDecl(name, "EMPTY", line=line, column=col)
        elif self.eat("ANY"):
            decl = ElementDecl(name, "ANY", line=line, column=col)
        elif self.peek("("):
            depth = len(self.frames)
            self.f.pos += 1
            self.ws()
            if self.eat("#PCDATA"):
                decl = self._mixed(name, line, col)
            else:
                model = self._group(depth)
                decl = ElementDecl(name, "CHILDREN", model=model, line=line, column=col)
        else:
            raise self.error(f"expected EMPTY, ANY or '(' in the content model of {name!r}, "
                             f"found {self._found()}")
        self._decl_end("ELEMENT")
        if name in self.el_names:
            raise DTDError(f"element {name!r} is declared more than once", line, col,
                           self.f.source)
        self.el_names.add(name)
        self.elements.append(decl)

    def _mixed(self, name: str, line: int, col: int) -> ElementDecl:
        names: list[str] = []
        while True:
            self.ws()
            if self.eat(")"):
                break
            self.expect("|", "'|' or ')' in mixed content")
            self.ws()
            n = self.name("an element name")
            if n in names:
                raise self.error(f"element {n!r} appears twice in the mixed content of {name!r}")
            names.append(n)
        if names:
            if not self.eat("*"):
                raise self.error(f"mixed content with element names must end with ')*' "
                                 f"(element {name!r})")
            return ElementDecl(name, "MIXED", mixed_names=tuple(names), line=line, column=col)
        self.eat("*")
        return ElementDecl(name, "PCDATA", line=line, column=col)

    def _occur(self) -> str:
        f = self.f
        if f.pos < len(f.text) and f.text[f.pos] in "?*+":
            f.pos += 1
            return f.text[f.pos - 1]
        return ""

    def _cp(self) -> Particle:
        self.ws()
        if self.peek("("):
            depth = len(self.frames)
            if self.nesting >= self.limits.max_nesting:
                raise self.limit_error("content-model groups nested more than max_nesting="
                                       f"{self.limits.max_nesting} deep")
            self.f.pos += 1
            self.nesting += 1
            try:
                return self._group(depth)
            finally:
                self.nesting -= 1
        if self.peek("#PCDATA"):
            raise self.error("#PCDATA is only allowed first in a mixed-content group")
        n = self.name("an element name or '('")
        return Particle("name", name=n, occur=self._occur())  # type: ignore[arg-type]

    def _group(self, depth: int) -> Particle:
        """After '(' : cp ((',' cp)* | ('|' cp)*) ')' occur."""
        items = [self._cp()]
        sep = None
        while True:
            self.ws()
            if self.eat(")"):
                break
            for s in ",|":
                if self.eat(s):
                    if sep is not None and sep != s:
                        raise self.error("',' and '|' cannot be mixed in one group; "
                                         "add parentheses")
                    sep = s
                    break
            else:
                raise self.error(f"expected ',', '|' or ')' in a content model, "
                                 f"found {self._found()}")
            items.append(self._cp())
        kind = "choice" if sep == "|" else "seq"
        return Particle(kind, children=tuple(items), occur=self._occur())  # type: ignore[arg-type]

    # <!ATTLIST ...>
    def attlist_decl(self) -> None:
        self.ws(required=True)
        el = self.name("an element name")
        while True:
            self.ws()
            if self.eat(">"):
                return
            line, col, asrc, _ = self.where()
            an = self.name("an attribute name or '>'")
            self.ws(required=True)
            atype, values = self._att_type(an)
            self.ws(required=True)
            default, value = self._att_default(atype)
            if atype in ("ENUM", "NOTATION") and value is not None and value not in values:
                raise DTDError(f"default {value!r} of attribute {an!r} of {el!r} is not one of "
                               f"its values {list(values)}", line, col, self.f.source)
            bad = _bad_default(atype, value)
            if bad:
                raise DTDError(f"attribute {an!r} of {el!r}: invalid default value {value!r} "
                               f"({bad})", line, col, self.f.source)
            if (el, an) in self.attr_keys:
                continue  # XML 1.0 §3.3: the first declaration is binding
            self.attr_keys.add((el, an))
            self.attr_src[(el, an)] = asrc
            self.attrs.append(AttributeDecl(el, an, atype, values, default, value,  # type: ignore[arg-type]
                                            line=line, column=col))

    def _att_type(self, an: str) -> tuple[str, tuple[str, ...]]:
        if self.eat("NOTATION"):
            self.ws(required=True)
            self.expect("(", "'(' after NOTATION")
            return "NOTATION", self._enum(names=True)
        if self.eat("("):
            return "ENUM", self._enum(names=False)
        for t in ("CDATA", "IDREFS", "IDREF", "ID", "ENTITY", "ENTITIES", "NMTOKENS", "NMTOKEN"):
            f = self.f
            if f.text.startswith(t, f.pos) and not _NMTOKEN_RE.match(f.text, f.pos + len(t)):
                f.pos += len(t)
                return t, ()
        raise self.error(f"unknown type for attribute {an!r}: {self._found()}")

    def _enum(self, *, names: bool) -> tuple[str, ...]:
        vals: list[str] = []
        while True:
            self.ws()
            v = self.name("a notation name") if names else self.nmtoken()
            if v in vals:
                raise self.error(f"value {v!r} appears twice in an enumeration")
            vals.append(v)
            self.ws()
            if self.eat(")"):
                return tuple(vals)
            self.expect("|", "'|' or ')' in an enumeration")

    def _att_default(self, atype: str) -> tuple[str, str | None]:
        if self.eat("#REQUIRED"):
            return "#REQUIRED", None
        if self.eat("#IMPLIED"):
            return "#IMPLIED", None
        kind = "DEFAULT"
        if self.eat("#FIXED"):
            self.ws(required=True)
            kind = "#FIXED"
        raw = self.literal()
        return kind, self._normalize_value(raw, atype)

    def _normalize_value(self, raw: str, atype: str) -> str:
        if "<" in raw:
            raise self.error("'<' is not allowed in an attribute value")
        out: list[str] = []
        i = 0
        while i < len(raw):
            c = raw[i]
            if c == "&":
                m = re.compile(r"&(?:#x([0-9a-fA-F]+)|#([0-9]+)|([^;&\s]+));").match(raw, i)
                if not m:
                    raise self.error("malformed reference in attribute default value")
                if m.group(3) is not None:
                    out.append(self._expand_general(m.group(3)))
                else:
                    cp = int(m.group(1), 16) if m.group(1) else int(m.group(2))
                    if not _is_xml_char(cp):
                        raise self.error(f"character reference to U+{cp:04X} is not allowed")
                    out.append(chr(cp))
                i = m.end()
                continue
            out.append(" " if c in "\t\r\n" else c)
            i += 1
        v = "".join(out)
        if atype != "CDATA":
            v = " ".join(v.split(" ")).strip()
            v = re.sub(" +", " ", v)
        return v

    def _expand_general(self, name: str) -> str:
        """Replacement text of general entity ``name`` in an attribute value, references
        expanded with an explicit stack.  Every character is counted before it is produced,
        so an exponential expansion stops at ``max_entity_expansion`` characters; an entity's
        expansion is kept once done (``self.ge_text``), so a repeated reference costs one
        count and one string, not its whole expansion again."""
        out: list[str] = []
        stack: list[list] = []  # [entity name, replacement text, position, start in out]

        def enter(n: str) -> None:
            done = self.ge_text.get(n)
            if done is not None:
                self.count_expansion(len(done))
                out.append(done)
                return
            if n in PREDEFINED_ENTITIES and n not in self.ges:
                self.count_expansion(1)
                out.append(PREDEFINED_ENTITIES[n])
                return
            ent = self.ges.get(n)
            if ent is None:
                raise self.error(f"undeclared general entity &{n}; in an attribute value")
            if ent.value is None:
                raise self.error(f"external entity &{n}; is not allowed in an attribute value")
            if any(fr[0] == n for fr in stack):
                raise self.error(f"recursive general entity &{n};")
            if len(stack) >= self.limits.max_entity_depth:
                raise self.limit_error(f"general entity &{n}; nested more than max_entity_depth="
                                       f"{self.limits.max_entity_depth} deep")
            stack.append([n, ent.value, 0, len(out)])

        enter(name)
        while stack:
            fr = stack[-1]
            text, i = fr[1], fr[2]
            if i >= len(text):
                stack.pop()
                done = "".join(out[fr[3]:])
                out[fr[3]:] = [done]
                self.ge_text[fr[0]] = done
                continue
            m = _GE_REF.match(text, i)
            if m:
                fr[2] = m.end()
                enter(m.group(1))
                continue
            j = text.find("&", i + 1)
            chunk = text[i:len(text) if j < 0 else j]
            self.count_expansion(len(chunk))
            out.append(chunk.translate(_WS_TO_SPACE))
            fr[2] = i + len(chunk)
        return "".join(out)

    # <!ENTITY ...>
    def entity_decl(self) -> None:
        line, col = self._decl_at
        self.ws(required=True, pe=False)
        is_pe = self.eat("%")
        if is_pe:
            self.ws(required=True, pe=False)
        name = self.name("an entity name")
        self.ws(required=True)
        ent = _Entity(name, None, line=line, column=col)
        if self.peek('"') or self.peek("'"):
            ent.value = self.literal(entity_value=True)
        else:
            ent.system = self._external_id(public_only_ok=False)
            if not is_pe:
                self.ws()
                if self.eat("NDATA"):
                    self.ws(required=True)
                    ent.ndata = self.name("a notation name")
        self._decl_end("ENTITY")
        table = self.pes if is_pe else self.ges
        if name not in table:  # XML 1.0 §4.2: the first declaration is binding
            table[name] = ent

    def _external_id(self, *, public_only_ok: bool) -> str | None:
        if self.eat("SYSTEM"):
            self.ws(required=True)
            return self.literal()
        if self.eat("PUBLIC"):
            self.ws(required=True)
            self.literal()
            f = self.f
            save = f.pos
            self.ws()
            if self.peek('"') or self.peek("'"):
                return self.literal()
            if public_only_ok:
                f.pos = save
                return None
            raise self.error("PUBLIC identifier must be followed by a system literal")
        raise self.error(f"expected a quoted value, SYSTEM or PUBLIC, found {self._found()}")

    def notation_decl(self) -> None:
        self.ws(required=True)
        if self._peek_name() in self.notations:  # XML 1.0 VC Unique Notation Name (libxml2 checks it)
            raise self.error(f"notation {self._peek_name()!r} is declared twice")
        name = self.name("a notation name")
        self.ws(required=True)
        self._external_id(public_only_ok=True)
        self._decl_end("NOTATION")
        self.notations.append(name)


def _is_xml_char(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in XML_CHAR_RANGES)


def _bad_default(atype: str, value: str | None) -> str:
    """Why ``value`` is not a valid default of an attribute of type ``atype`` (XML 1.0
    §3.3.2 and its validity constraints, as libxml2 checks them), or ``""``."""
    if value is None or atype in ("CDATA", "ENUM", "NOTATION"):
        return ""
    if atype == "ID":
        return "an ID attribute must be #IMPLIED or #REQUIRED"
    if atype in ("IDREF", "ENTITY"):
        ok = _NAME_RE.fullmatch(value) is not None
        return "" if ok else f"{atype} values are XML names"
    if atype in ("IDREFS", "ENTITIES"):
        ok = value != "" and all(_NAME_RE.fullmatch(v) for v in value.split(" "))
        return "" if ok else f"{atype} values are XML names separated by spaces"
    if atype == "NMTOKEN":
        return "" if _NMTOKEN_RE.fullmatch(value) else "NMTOKEN values are name tokens"
    if atype == "NMTOKENS":
        ok = value != "" and all(_NMTOKEN_RE.fullmatch(v) for v in value.split(" "))
        return "" if ok else "NMTOKENS values are name tokens separated by spaces"
    return ""


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


_TEXT_DECL = re.compile(r"<\?xml[ \t\r\n][^?]*\?>")


def _strip_text_decl(text: str, keep_positions: bool = False) -> str:
    """Remove a BOM and a leading ``<?xml ...?>`` text declaration (positions preserved
    when ``keep_positions``: replaced by spaces/newlines of equal length)."""
    if text.startswith("\ufeff"):
        text = " " + text[1:] if keep_positions else text[1:]
    m = _TEXT_DECL.match(text)
    if not m:
        return text
    if keep_positions:
        blank = "".join(c if c == "\n" else " " for c in m.group())
        return blank + text[m.end():]
    return text[m.end():]


def parse_dtd(text: str, *, source: str | None = None, base_dir: str | os.PathLike | None = None,
              limits: Limits = DEFAULT_LIMITS) -> DTD:
    """Parse DTD text (an external subset, or the content of an internal subset).

    ``source`` names the text in error messages; ``base_dir`` is where relative system
    identifiers of external parameter entities are resolved (never the network).
    Raises :class:`DTDError` (with ``line``/``column``) on any syntax error, undeclared
    or recursive parameter entity, unresolvable external entity, declared-twice element or
    undeclared notation; :class:`LimitError` (``source:line:column`` and the limit) past
    ``limits`` (see the module docstring).
    """
    if not isinstance(text, str):
        raise DTDError(f"parse_dtd expects str, not {type(text).__name__}; decode the DTD bytes "
                       "first", source=source)
    if len(text) > limits.max_source_chars:
        raise LimitError(f"{source or '<input>'}:1:1: DTD text of {len(text)} characters (limit "
                         f"max_source_chars={limits.max_source_chars})")
    p = _Parser(text, source, None if base_dir is None else os.fspath(base_dir), limits)
    return p.parse()
