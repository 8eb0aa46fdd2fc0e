"""Validate an XML document against a DTD model, or a JSON text against a JSON Schema.

XML: expat (stdlib) checks well-formedness and reports events with byte offsets; our
handlers check the DTD model: declared elements, the root name, content models
(:class:`ContentModel`), EMPTY / #PCDATA / mixed content, declared and required
attributes, enumerations, #FIXED values, ID/IDREF, tokenized attribute types,
general entities (in text and in attribute values) and namespace prefixes (each must be
bound by an ``xmlns:p`` attribute in the document: expat runs without namespaces).  Expat stops at the first well-formedness error; DTD checks go on
after a DTD violation (one content-model violation per element, then that element's
model is no longer checked).

JSON: ``json.loads`` for syntax, the ``jsonschema`` library (draft from ``$schema``,
default 2020-12, with format checking; ``multipleOf`` in exact decimal arithmetic, see
:mod:`decoding.frontends.json_validator`) for the schema; schemas in the subset of
``json_fast`` are first checked by its exact compiled predicate, and jsonschema runs
only to explain an invalid value.  ``date-time`` and ``time`` are
checked by this module (jsonschema needs extra packages for them); other formats
are checked only when jsonschema can (see ``checked_formats``).

Every violation carries path, line, column (1-based, in the text given) and a message.

Hostile text: both validators take time linear in the text and memory a small multiple of
it, and never raise on any ``str``.  A text longer than ``limits.max_guard_input_chars``
is one ``size-limit`` violation (nothing else is read); nesting deeper than
``limits.max_nesting`` (elements, or JSON arrays/objects) is a ``nesting-limit``
violation; a lone surrogate (not Unicode text: it has no UTF-8 form) is an
``illegal-char`` (XML) or ``json-syntax`` (JSON) violation; an XML declaration naming an
encoding this parser cannot use is an ``unknown-encoding`` violation.  At most
:data:`MAX_VIOLATIONS` violations are built (paths and messages of the rest are never
computed), and JSON Schema errors are examined up to :data:`MAX_SCHEMA_ERRORS`.
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import xml.parsers.expat as expat
from typing import Any

from decoding.errors import SchemaError
from decoding.frontends.json_validator import validator_class
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.frontends.xml.model import DTD, AttributeDecl, ElementDecl
from decoding.guard.content_model import ContentModel
from decoding.guard.json_fast import compile_fast
from decoding.guard.results import Violation, line_col

__all__ = ["validate_xml", "validate_json", "DTDChecker", "dtd_checker", "checked_formats",
           "MAX_VIOLATIONS", "MAX_SCHEMA_ERRORS"]

MAX_VIOLATIONS = 50
#: jsonschema errors examined per value (the first MAX_VIOLATIONS of them by path are
#: reported); bounds the time spent explaining a huge invalid value
MAX_SCHEMA_ERRORS = 2000
_PREDEFINED = frozenset(("lt", "gt", "amp", "apos", "quot"))


class DTDChecker:
    """Per-DTD compiled tables (content models, attribute lists); build once, reuse."""

    def __init__(self, dtd: DTD) -> None:
        self.dtd = dtd
        self.models: dict[str, ContentModel] = {}
        for e in dtd.elements:
            if e.content == "CHILDREN" and e.model is not None:
                self.models[e.name] = ContentModel(e.model)
        self.attrs: dict[str, dict[str, AttributeDecl]] = {}
        for a in dtd.attributes:
            self.attrs.setdefault(a.element, {}).setdefault(a.name, a)
        self.required = {el: [a for a in d.values() if a.default == "#REQUIRED"]
                         for el, d in self.attrs.items()}
        self.entities = frozenset(n for n, _ in dtd.general_entities) | _PREDEFINED
        self.decls: dict[str, ElementDecl | None] = {e.name: dtd.element(e.name)
                                                     for e in dtd.elements}
        self.text_only = frozenset(n for n, d in self.decls.items()
                                   if d is not None and d.content in ("PCDATA", "EMPTY"))
        # name -> (decl, model or None, model start state or None, text must be checked)
        self.info: dict[str, tuple] = {}
        for n, d in self.decls.items():
            m = self.models.get(n) if d is not None and d.content == "CHILDREN" else None
            self.info[n] = (d, m, None if m is None else m.start,
                            d is not None and d.content in ("EMPTY", "CHILDREN"))


_CHECKERS: dict[int, tuple[DTD, DTDChecker]] = {}


def dtd_checker(dtd: DTD) -> DTDChecker:
    """The cached :class:`DTDChecker` of ``dtd`` (cache keyed by identity, 64 entries)."""
    hit = _CHECKERS.get(id(dtd))
    if hit is not None and hit[0] is dtd:
        return hit[1]
    if len(_CHECKERS) >= 64:
        _CHECKERS.clear()
    checker = DTDChecker(dtd)
    _CHECKERS[id(dtd)] = (dtd, checker)
    return checker


def _is_name(v: str) -> bool:
    from decoding.guard.extract import is_name_char, is_name_start
    return bool(v) and is_name_start(v[0]) and all(is_name_char(c) for c in v)


def _is_nmtoken(v: str) -> bool:
    from decoding.guard.extract import is_name_char
    return bool(v) and all(is_name_char(c) for c in v)


# One open element is a list (cheaper than an object per element):
# [name, decl, state, parent frame or None, k (k-th child of that name, 1-based),
#  path or None (built on first use: only violations need it), child-name counts or None,
#  text still to be checked (decl is EMPTY/element-only, no text flagged yet),
#  offset, last child name or None, content model or None,
#  namespace prefixes this element binds or None]
_NAME, _DECL, _STATE, _PARENT, _K, _PATH, _COUNTS, _TC, _OFF, _LAST, _MODEL, _BINDS = range(12)
_UNDECLARED = (None, None, None, False)
_MISS = object()
# a start tag's attributes, and the entity references in an attribute value (expat
# accepted the tag, so every '&' in a value starts a reference)
_TAG_ATTRS = re.compile(rb'<[^\s/>]+((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|\'[^\']*\'))*)')
_ATTR = re.compile(rb'([^\s=]+)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
_ENTITY_REF = re.compile(rb"&([^#;][^;]*);")


def _path(f: list) -> str:
    """``/a/b[2]/c`` of the open element ``f`` (iterative; cached on ``f`` only)."""
    p = f[_PATH]
    if p is None:
        parts = []
        g: list | None = f
        while g is not None and g[_PATH] is None:
            parts.append(g[_NAME] if g[_K] == 1 else f"{g[_NAME]}[{g[_K]}]")
            g = g[_PARENT]
        head = "" if g is None else g[_PATH]
        p = head + "/" + "/".join(reversed(parts))
        f[_PATH] = p
    return p


class _TooDeep(Exception):
    """Raised by the expat start handler when elements nest deeper than the limit."""

    def __init__(self, name: str, offset: int) -> None:
        super().__init__(name, offset)
        self.name, self.offset = name, offset


def _limit_violation(limits: Limits, text: str, src: str, base: int) -> Violation | None:
    """The ``size-limit`` violation of a text longer than the guard accepts, else None."""
    cap = limits.max_guard_input_chars
    if len(text) <= cap:
        return None
    o = base + cap
    ln, col = line_col(src, o)
    return Violation("size-limit", "/", f"the text has {len(text):,} characters, more than the guard "
                                        f"reads (max_guard_input_chars={cap:,}, decoding.limits); "
                                        f"nothing was validated", ln, col, o)


def _surrogate(text: str) -> int:
    """Offset of the first lone surrogate in ``text`` (the only characters without a UTF-8
    form), or -1."""
    if text.isascii():
        return -1
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return -1


_EXPAT_ENCODINGS = frozenset(("utf-8", "utf-16", "utf-16be", "utf-16le", "iso-8859-1", "us-ascii"))
#: declared encodings accepted (lower case): registered names (and the common spellings
#: XML parsers such as libxml2 know) of UTF-8/16, ASCII and the one-byte charsets expat
#: can use; Python-only aliases such as "U8" or "latin-1" are not names other parsers know
_DECL_ENCODINGS = _EXPAT_ENCODINGS | frozenset(
    ["utf8", "ascii", "latin1", "koi8-r", "koi8-u", "tis-620", "macintosh"]
    + [f"{p}{i}" for p in ("iso-8859-", "iso8859-") for i in range(1, 17) if i != 12]
    + [f"{p}{i}" for p in ("windows-125", "cp125") for i in range(9)])
_S = "[ \t\r\n]"
_XML_DECL_ENCODING = re.compile(
    f"<\\?xml{_S}+version{_S}*={_S}*(?:\"[^\"<>]*\"|'[^'<>]*'){_S}+encoding{_S}*={_S}*"
    "(?:\"([A-Za-z][A-Za-z0-9._-]*)\"|'([A-Za-z][A-Za-z0-9._-]*)')")


_XML_DECL_VERSION = re.compile(f"<\\?xml{_S}+version{_S}*={_S}*(?:\"([^\"<>]*)\"|'([^'<>]*)')")
_VERSION_NUM = re.compile(r"1\.[0-9]+\Z")


def _version_problem(text: str) -> tuple[int, str] | None:
    """``(offset, value)`` of an XML declaration's version that is not ``1.`` digits (expat
    accepts any string there; XML 1.0 and libxml2 do not), else None."""
    if not text.startswith("<?xml"):
        return None
    m = _XML_DECL_VERSION.match(text)
    if m is None:
        return None     # not a declaration's version: expat decides
    k = 1 if m.group(1) is not None else 2
    return None if _VERSION_NUM.match(m.group(k)) else (m.start(k), m.group(k))


def _encoding_problem(text: str) -> tuple[int, str] | None:
    """``(offset, name)`` of an encoding named by the XML declaration at the start of ``text``
    that is not in :data:`_DECL_ENCODINGS` or that expat cannot use (pyexpat asks Python's
    codecs for a one-byte table), else None."""
    if not text.startswith("<?xml"):
        return None
    m = _XML_DECL_ENCODING.match(text)
    if m is None:
        return None
    k = 1 if m.group(1) is not None else 2
    name = m.group(k)
    if name.lower() in _EXPAT_ENCODINGS:
        return None
    if name.lower() not in _DECL_ENCODINGS:
        return m.start(k), name
    try:
        table = bytes(range(256)).decode(name, "replace")
    except Exception:  # noqa: BLE001 - unknown, not a text codec, or fails on bytes: unusable
        return m.start(k), name
    return None if len(table) == 256 else (m.start(k), name)


_E_NO_ELEMENTS = expat.errors.codes[expat.errors.XML_ERROR_NO_ELEMENTS]
_E_UNCLOSED_TOKEN = expat.errors.codes[expat.errors.XML_ERROR_UNCLOSED_TOKEN]
_E_TAG_MISMATCH = expat.errors.codes[expat.errors.XML_ERROR_TAG_MISMATCH]
_E_JUNK = expat.errors.codes[expat.errors.XML_ERROR_JUNK_AFTER_DOC_ELEMENT]
_E_UNDEF_ENTITY = expat.errors.codes[expat.errors.XML_ERROR_UNDEFINED_ENTITY]
_E_PARTIAL_CHAR = expat.errors.codes[expat.errors.XML_ERROR_PARTIAL_CHAR]


def validate_xml(text: str, dtd: DTD, *, root: str | None = None, base: int = 0,
                 source: str | None = None, limits: Limits | None = None) -> list[Violation]:
    """Violations of ``text`` (one XML document) against ``dtd``; [] when valid.

    ``root``: the required root element name (any declared element when None).
    ``source``/``base``: when ``text == source[base:...]``, positions are reported
    in ``source`` (the guard passes the model's whole output).  ``limits``: the input
    size and nesting bounds (default :data:`decoding.limits.DEFAULT_LIMITS`).
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    checker = dtd_checker(dtd)
    src = text if source is None else source
    too_long = _limit_violation(limits, text, src, base)
    if too_long is not None:
        return [too_long]
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as e:     # a lone surrogate: the only character without UTF-8
        bad = e.start
        ln, col = line_col(src, base + bad)
        return [Violation("illegal-char", "/", f"character U+{ord(text[bad]):04X} at {ln}:{col} is a lone "
                                               "surrogate: not Unicode text, and not allowed in XML",
                          ln, col, base + bad)]
    ver = _version_problem(text)
    if ver is not None:
        ln, col = line_col(src, base + ver[0])
        return [Violation("not-well-formed", "/", f"not well-formed XML at {ln}:{col}: the XML declaration's "
                                                  f"version must be 1.0 (1. and digits), not {ver[1][:40]!r}",
                          ln, col, base + ver[0])]
    enc = _encoding_problem(text)
    if enc is not None:
        ln, col = line_col(src, base + enc[0])
        return [Violation("unknown-encoding", "/", f"the XML declaration names encoding {enc[1][:40]!r} at "
                                                   f"{ln}:{col}, not a registered encoding name this guard "
                                                   "accepts (UTF-8, ISO-8859-n, windows-125n...); declare UTF-8",
                          ln, col, base + enc[0])]
    max_depth = limits.max_nesting
    ascii_only = len(raw) == len(text)
    out: list[Violation] = []
    stack: list[_Frame] = []
    ids: dict[str, int] = {}
    refs: list[tuple[str, str, int]] = []
    root_seen = [False]

    last = [0, 0]       # (byte index, characters before it): offsets grow while parsing

    def off(byte_index: int) -> int:
        if byte_index < 0:
            byte_index = len(raw)
        if ascii_only:
            return base + byte_index
        b0, c0 = last
        if b0 <= byte_index and (byte_index == len(raw) or raw[byte_index] & 0xC0 != 0x80):
            c = c0 + len(raw[b0:byte_index].decode("utf-8", "ignore"))
            last[0], last[1] = byte_index, c
            return base + c
        return base + len(raw[:byte_index].decode("utf-8", "ignore"))

    def add(code: str, path: str, msg: str, offset: int) -> None:
        if len(out) < MAX_VIOLATIONS:
            ln, col = line_col(src, offset)
            out.append(Violation(code, path, msg, ln, col, offset))

    def room() -> bool:
        """Whether another violation is kept (build paths and messages only then)."""
        return len(out) < MAX_VIOLATIONS

    def at(offset: int) -> str:
        ln, col = line_col(src, offset)
        return f"{ln}:{col}"

    info = checker.info
    models = checker.models
    p = expat.ParserCreate()
    p.UseForeignDTD(True)
    p.buffer_text = True
    # expat drops an undefined entity in an attribute value silently (the DTD is foreign):
    # start tags are re-read for references when the text has an '&'; entities the
    # document's own internal subset declares are defined
    amp = b"&" in raw
    doc_entities: set[str] = set()
    if amp:
        def entity_decl(name: str, is_pe: bool, *_: object) -> None:
            if not is_pe:
                doc_entities.add(name)
        p.EntityDeclHandler = entity_decl
    # namespace prefixes: expat runs without namespace processing, so a prefix that no
    # xmlns:p attribute of the document binds is checked here (a binding the DTD only
    # defaults is not enough: the document goes to consumers that do not read the DTD)
    colon = b":" in raw
    bound: dict[str, int] = {}

    def start(name: str, attrs: dict[str, str]) -> None:
        bi = p.CurrentByteIndex
        o = base + bi if ascii_only and bi >= 0 else off(bi)
        decl, model, state, tc = info.get(name, _UNDECLARED)
        if len(stack) >= max_depth:
            raise _TooDeep(name, o)
        binds = _bind(attrs) if attrs and colon else None
        if stack:
            parent = stack[-1]
            counts = parent[_COUNTS]
            if counts is None:
                parent[_COUNTS] = counts = {name: 1}
                k = 1
            else:
                k = counts.get(name, 0) + 1
                counts[name] = k
            f = [name, decl, state, parent, k, None, None, tc, o, None, model, binds]
            if parent[_DECL] is not None:
                ps = parent[_STATE]     # not None only for a declared element-only parent
                nxt = None
                if ps is not None and decl is not None:
                    model = parent[_MODEL]                  # fast path: allowed child
                    nxt = model.transitions.get((ps, name), _MISS)
                    if nxt is _MISS:
                        nxt = model.step(ps, name)
                if nxt is not None:
                    parent[_STATE] = nxt
                else:
                    _check_child(parent, name, decl, o, f)
            parent[_LAST] = name
        else:
            f = [name, decl, state, None, 1, None, None, tc, o, None, model, binds]
            root_seen[0] = True
            if root is not None and name != root and room():
                add("wrong-root", _path(f), f"the root element must be <{root}>, not <{name}>", o)
        if decl is None and room():
            add("undeclared-element", _path(f), f"element <{name}> is not declared in the DTD", o)
        stack.append(f)
        if decl is not None and (attrs or checker.required.get(name)):
            _check_attrs(name, attrs, f, o)
        if colon and (attrs or ":" in name):
            _check_prefixes(name, attrs, f, o)
        if amp and attrs and room():
            _check_attr_entities(name, bi, f)

    def _bind(attrs: dict[str, str]) -> tuple[str, ...] | None:
        """Bind the xmlns:p attributes of an element; the prefixes bound, or None."""
        new = [a[6:] for a in attrs if a.startswith("xmlns:")]
        if not new:
            return None
        for q in new:
            bound[q] = bound.get(q, 0) + 1
        return tuple(new) if new else None

    def _check_prefixes(name: str, attrs: dict[str, str], f: list, o: int) -> None:
        for what, qname in [("element", name)] + [("attribute", a) for a in attrs if ":" in a]:
            prefix, sep, local = qname.partition(":")
            if not sep or prefix in ("xml", "xmlns") or bound.get(prefix):
                continue
            if room():
                add("unbound-prefix", _path(f) if what == "element" else f"{_path(f)}/@{qname}",
                    f"namespace prefix {prefix!r} of {what} {qname!r} is not declared "
                    f"(no xmlns:{prefix} in scope)", o)

    def _check_attr_entities(name: str, bi: int, f: list) -> None:
        m = _TAG_ATTRS.match(raw, bi)
        if m is None or b"&" not in m.group(1):
            return
        for a in _ATTR.finditer(raw, m.start(1), m.end(1)):
            vs = a.start(2) if a.group(2) is not None else a.start(3)
            ve = a.end(2) if a.group(2) is not None else a.end(3)
            for r in _ENTITY_REF.finditer(raw, vs, ve):
                ent = r.group(1).decode("utf-8", "replace")
                if ent not in checker.entities and ent not in doc_entities and room():
                    attr = a.group(1).decode("utf-8", "replace")
                    ro = off(r.start())
                    add("undefined-entity", f"{_path(f)}/@{attr}",
                        f"entity &{ent}; in attribute {attr} of <{name}> at {at(ro)} is not defined "
                        "(write & as &amp;)", ro)

    def _check_child(parent: list, name: str, decl, o: int, child: list) -> None:
        pd = parent[_DECL]
        if pd is None:
            return
        c = pd.content
        if c == "ANY":
            return
        if not room():
            if c == "CHILDREN":
                if parent[_STATE] is None or decl is None:
                    parent[_STATE] = None
                else:
                    parent[_STATE] = checker.models[pd.name].step(parent[_STATE], name)
            return
        if c == "EMPTY":
            add("content-model", _path(child), f"<{pd.name}> is declared EMPTY but contains <{name}>", o)
            return
        if c == "PCDATA":
            add("content-model", _path(child),
                f"<{pd.name}> may contain only text, but contains element <{name}>", o)
            return
        if c == "MIXED":
            if name not in pd.mixed_names:
                allowed = ", ".join(f"<{n}>" for n in pd.mixed_names) or "no elements"
                add("content-model", _path(child),
                    f"<{name}> is not allowed inside <{pd.name}> (allowed: text, {allowed})", o)
            return
        if parent[_STATE] is None or decl is None:
            parent[_STATE] = None
            return
        model = checker.models[pd.name]
        nxt = model.step(parent[_STATE], name)
        if nxt is None:
            exp = model.expected(parent[_STATE])
            prev = parent[_LAST]
            where = f"after <{prev}>" if prev else "as the first child"
            want = (" or ".join(f"<{n}>" for n in exp) if exp else f"</{pd.name}>")
            add("content-model", _path(child),
                f"<{name}> is not allowed {where} in <{pd.name}>; expected {want} "
                f"(content model {model.text})", o)
        parent[_STATE] = nxt

    def _check_attrs(name: str, attrs: dict[str, str], f: list, o: int) -> None:
        decls = checker.attrs.get(name, {})
        for a, v in attrs.items():
            d = decls.get(a)
            if d is None:
                if room():
                    add("undeclared-attribute", f"{_path(f)}/@{a}",
                        f"attribute {a!r} is not declared for <{name}>", o)
                continue
            t = d.type
            nv = v if t == "CDATA" else " ".join(v.split())
            bad = None
            if t in ("ENUM", "NOTATION"):
                if nv not in d.values:
                    bad = f"must be one of {', '.join(repr(x) for x in d.values)}"
            elif t in ("ID", "IDREF", "ENTITY"):
                if not _is_name(nv):
                    bad = "must be an XML name"
            elif t in ("IDREFS", "ENTITIES"):
                if not nv or not all(_is_name(x) for x in nv.split(" ")):
                    bad = "must be XML names separated by spaces"
            elif t == "NMTOKEN":
                if not _is_nmtoken(nv):
                    bad = "must be a name token"
            elif t == "NMTOKENS":
                if not nv or not all(_is_nmtoken(x) for x in nv.split(" ")):
                    bad = "must be name tokens separated by spaces"
            if bad is None and d.default == "#FIXED" and d.value is not None and nv != d.value:
                bad = f"is fixed to {d.value!r}"
            if bad is not None:
                if room():
                    add("attribute-value", f"{_path(f)}/@{a}",
                        f"attribute {a}={v!r} of <{name}> {bad}", o)
                continue
            if t == "ID":
                if nv in ids and room():
                    add("duplicate-id", f"{_path(f)}/@{a}", f"ID {nv!r} is already used", o)
                ids[nv] = o
            elif t in ("IDREF", "IDREFS"):
                for r in nv.split(" "):
                    refs.append((r, f, a, o))
        for d in checker.required.get(name, ()):
            if d.name not in attrs and room():
                add("missing-attribute", f"{_path(f)}/@{d.name}",
                    f"<{name}> requires attribute {d.name!r}", o)

    def end(name: str) -> None:
        f = stack.pop()
        if f[_BINDS] is not None:
            for q in f[_BINDS]:
                bound[q] -= 1
        state = f[_STATE]       # not None only for a declared element-only element
        if state is not None:
            model = f[_MODEL]
            if model.final not in state and room():     # not model.accepting(state)
                exp = model.expected(state)
                prev = f[_LAST]
                where = f" after <{prev}>" if prev else ""
                fname = f[_NAME]
                add("content-model", _path(f),
                    f"<{fname}> is incomplete: expected "
                    + " or ".join(f"<{n}>" for n in exp)
                    + f"{where} before </{fname}> (content model {model.text})",
                    off(p.CurrentByteIndex))

    def chars(data: str) -> None:
        if not stack:
            return
        f = stack[-1]
        if not f[_TC]:      # undeclared, text allowed, or text already flagged
            return
        d = f[_DECL]
        if d.content == "EMPTY" or data.strip(" \t\r\n"):
            f[_TC] = False
            if not room():
                return
            what = "declared EMPTY" if d.content == "EMPTY" else "element-only"
            snippet = data.strip()[:40]
            add("text-not-allowed", _path(f),
                f"<{f[_NAME]}> is {what} but contains text {snippet!r}", off(p.CurrentByteIndex))

    def skipped(name: str, is_pe: bool) -> None:
        if not is_pe and name not in checker.entities and room():
            path = _path(stack[-1]) if stack else "/"
            add("undefined-entity", path,
                f"entity &{name}; is not defined (write & as &amp;)", off(p.CurrentByteIndex))

    p.StartElementHandler = start
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    p.SkippedEntityHandler = skipped
    try:
        p.Parse(raw, True)
    except expat.ExpatError as e:
        if room():
            _wf_error(e, p, text, raw, stack, off, add, at, room)
        return out
    except _TooDeep as e:
        path = (_path(stack[-1]) if stack else "") + "/" + e.name
        add("nesting-limit", path, f"elements nest deeper than max_nesting={max_depth} "
                                   f"(decoding.limits): <{e.name}> at {at(e.offset)} is at depth "
                                   f"{max_depth + 1}; nothing after it was checked", e.offset)
        return out
    except (LookupError, ValueError, UnicodeError) as e:
        # pyexpat asks Python's codecs for the declared encoding; _encoding_problem
        # catches the known cases first, this is the backstop
        add("unknown-encoding", "/", f"the XML declaration's encoding cannot be used: {e}", base)
        return out
    for r, f, a, o in refs:
        if r not in ids and room():
            add("dangling-idref", f"{_path(f)}/@{a}", f"IDREF {r!r} refers to no ID in the document", o)
    if not root_seen[0]:
        add("no-element", "/", "no XML element found", base)
    return out


def _wf_error(e: expat.ExpatError, p, text: str, raw: bytes, stack: list[list],
              off, add, at, room) -> None:
    """Turn expat's first well-formedness error into specific violations."""
    bi = p.ErrorByteIndex
    o = off(bi)
    code = e.code
    ch = raw[bi:bi + 1].decode("utf-8", "ignore") if 0 <= bi < len(raw) else ""
    path = _path(stack[-1]) if stack else "/"
    if code in (_E_NO_ELEMENTS, _E_UNCLOSED_TOKEN, _E_PARTIAL_CHAR) and (stack or bi >= len(raw) - 1):
        if code != _E_NO_ELEMENTS:
            add("truncated-markup", path, f"the text ends inside a tag or markup at {at(o)}", o)
        if not stack:
            add("no-element", "/", "no XML element found", o)
        end = off(len(raw))
        for f in reversed(stack):
            if not room():
                break
            add("unclosed-tag", _path(f),
                f"element <{f[_NAME]}> opened at {at(f[_OFF])} is never closed "
                f"(add </{f[_NAME]}>)", end)
        return
    if code == _E_TAG_MISMATCH:
        j = bi
        while j > 0 and raw[j - 1:j + 1] != b"</":
            j -= 1
        o = off(j - 1 if j > 0 else bi)
        j += 1
        k = j
        while k < len(raw) and raw[k:k + 1] not in (b">", b" ", b"\t", b"\n", b"\r"):
            k += 1
        ename = raw[j:k].decode("utf-8", "ignore")
        top = stack[-1] if stack else None
        if top is not None and any(f[_NAME] == ename for f in stack):
            add("unclosed-tag", _path(top),
                f"element <{top[_NAME]}> opened at {at(top[_OFF])} is not closed before "
                f"</{ename}> at {at(o)} (add </{top[_NAME]}>)", o)
        elif top is not None:
            add("mismatched-tag", _path(top),
                f"end tag </{ename}> at {at(o)} does not match the open element "
                f"<{top[_NAME]}> opened at {at(top[_OFF])}", o)
        else:
            add("mismatched-tag", "/", f"end tag </{ename}> at {at(o)} matches no open element", o)
        return
    if code == _E_JUNK:
        add("junk-after-root", "/", f"text after the root element at {at(o)}", o)
        return
    if ch and ord(ch) < 0x20 and ch not in "\t\r\n":
        add("illegal-char", path, f"character U+{ord(ch):04X} at {at(o)} is not allowed in XML", o)
        return
    amp = raw.rfind(b"&", 0, bi + 1)
    if amp >= 0 and not any(b in raw[amp:bi] for b in (b";", b"<", b">")):
        o = off(amp)
        add("stray-ampersand", path,
            f"'&' at {at(o)} does not start a known entity; write it as &amp;", o)
        return
    for cand in (bi, bi - 1):
        if cand >= 0 and raw[cand:cand + 1] == b"<":
            o = off(cand)
            add("stray-lt", path, f"'<' at {at(o)} does not start a tag; write it as &lt;", o)
            return
    if code == _E_UNDEF_ENTITY:
        add("undefined-entity", path, f"undefined entity at {at(o)}; write & as &amp;", o)
        return
    add("not-well-formed", path, f"not well-formed XML at {at(o)}: {expat.ErrorString(code)}", o)


# ---------------------------------------------------------------- JSON

_DT = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")
_TIME = re.compile(r"\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)?\Z")
_HINT = {"date": " (YYYY-MM-DD)", "date-time": " (YYYY-MM-DDThh:mm:ssZ)", "time": " (hh:mm:ss)",
         "email": " (name@domain)", "uuid": " (8-4-4-4-12 hex digits)"}

_VALIDATORS: dict[int, tuple[Any, Any]] = {}


def _format_checker():
    import datetime

    import jsonschema

    fc = jsonschema.FormatChecker()

    @fc.checks("date-time", raises=ValueError)
    def _dt(v) -> bool:
        if not isinstance(v, str):
            return True
        if not _DT.match(v):
            return False
        datetime.datetime.fromisoformat(v[:19].replace("t", "T").replace(" ", "T"))
        return True

    @fc.checks("time", raises=ValueError)
    def _time(v) -> bool:
        if not isinstance(v, str):
            return True
        if not _TIME.match(v):
            return False
        datetime.time.fromisoformat(v[:8])
        return True

    return fc


_FC = None


def checked_formats() -> list[str]:
    """The ``format`` values actually checked by :func:`validate_json`."""
    global _FC
    if _FC is None:
        _FC = _format_checker()
    return sorted(_FC.checkers)


def _compiled(schema: dict) -> tuple[Any, Any, Any]:
    """Cached ``(schema, jsonschema validator, fast predicate or None)``, keyed by identity."""
    global _FC
    hit = _VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit
    if _FC is None:
        _FC = _format_checker()
    cls = validator_class(schema)  # the "$schema" draft, with the decimal multipleOf
    v = cls(schema, format_checker=_FC)
    entry = (schema, v, compile_fast(schema, cls, _FC))
    if len(_VALIDATORS) >= 64:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = entry
    return entry


def _malformed(schema: dict, e: Exception) -> Exception:
    """The :class:`SchemaError` for a schema that made jsonschema fail with ``e``, located by
    the draft's meta-schema; ``e`` itself when the schema is well-formed (a bug, not bad input)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    problem = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if problem is None:
        return e
    return SchemaError(_pointer(problem.absolute_path), None,
                       f"validate_json: the schema is malformed: {problem.message}")


def _pointer(parts) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _short(v: Any) -> str:
    r = repr(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return r if len(r) <= 60 else r[:57] + "..."


def _message(err) -> str:
    ptr = _pointer(err.absolute_path) or "/"
    kw = err.validator
    if kw == "format":
        return (f"{ptr}: {_short(err.instance)} does not match format {err.validator_value}"
                f"{_HINT.get(err.validator_value, '')}")
    if kw == "required":
        missing = err.message.split("'")[1] if err.message.count("'") >= 2 else err.message
        return f"{ptr}: missing required property {missing!r}"
    if kw == "enum":
        return (f"{ptr}: {_short(err.instance)} is not one of "
                + ", ".join(_short(x) for x in err.validator_value))
    if kw == "type":
        return f"{ptr}: {_short(err.instance)} is not of type {err.validator_value}"
    if kw == "additionalProperties":
        return f"{ptr}: {err.message}"
    msg = err.message
    if len(msg) > 200:
        msg = msg[:197] + "..."
    return f"{ptr}: {msg}"


class _Locator:
    """Offsets in ``text`` (valid JSON) of the values at JSON pointers (best effort).

    Walks like one pass of a JSON reader: at each container on a pointer it skips the
    members before the wanted one with the C parser, and remembers how far it got and
    where each member starts, so many pointers into one big container cost one pass over
    it, not one pass each.  A key that occurs twice resolves to its first occurrence."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.dec = json.JSONDecoder()
        self.seen: dict[int, list] = {}     # container offset -> walk state

    def _ws(self, j: int) -> int:
        text, n = self.text, self.n
        while j < n and text[j] in " \t\r\n":
            j += 1
        return j

    def locate(self, parts) -> int:
        text, n, ws, decode = self.text, self.n, self._ws, self.dec.raw_decode
        i = ws(0)
        for part in parts:
            if i >= n:
                return i
            if text[i] == "{":
                # [first offset of each key's value, resume offset, value pending, finished]
                st = self.seen.get(i)
                if st is None:
                    st = self.seen[i] = [{}, ws(i + 1), False, False]
                keys = st[0]
                if part in keys:
                    i = keys[part]
                    continue
                if st[3]:
                    return i
                j = st[1]
                if st[2]:               # the value of the last key read is still ahead
                    _, j = decode(text, j)
                    j = ws(j)
                    if j < n and text[j] == ",":
                        j = ws(j + 1)
                    st[2] = False
                while j < n and text[j] == '"':
                    key, j = decode(text, j)
                    j = ws(ws(j) + 1)
                    keys.setdefault(key, j)
                    if key == part:
                        st[1], st[2] = j, True
                        i = j
                        break
                    _, j = decode(text, j)
                    j = ws(j)
                    if j < n and text[j] == ",":
                        j = ws(j + 1)
                else:
                    st[1], st[3] = j, True
                    return i
            elif text[i] == "[" and isinstance(part, int):
                starts = self.seen.get(i)
                if starts is None:
                    starts = self.seen[i] = [ws(i + 1)]
                while len(starts) <= part:
                    _, j = decode(text, starts[-1])
                    starts.append(ws(ws(j) + 1))
                i = starts[part]
            else:
                return i
        return i


def _json_too_deep(text: str, limit: int) -> int:
    """Offset of the first ``[``/``{`` nested deeper than ``limit`` in ``text``, or -1
    (strings skipped; linear, and only run when the text has more brackets than ``limit``)."""
    if text.count("[") + text.count("{") <= limit:
        return -1
    from decoding.guard.extract import _json_string_end

    depth, i, n = 0, 0, len(text)
    find = _JSON_STRUCTURE.search
    while True:
        m = find(text, i)
        if m is None:
            return -1
        j = m.start()
        c = text[j]
        if c == '"':
            i = _json_string_end(text, j, n)
            if i < 0:
                return -1
            continue
        if c == "[" or c == "{":
            depth += 1
            if depth > limit:
                return j
        else:
            depth -= 1
        i = j + 1


_JSON_STRUCTURE = re.compile(r'["\[\]{}]')


def _long_int(text: str) -> int:
    """Offset of the first run of digits too long for ``int()`` (json.loads' ValueError)."""
    import sys

    cap = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    for m in re.finditer(r"[0-9]+", text):
        if cap and m.end() - m.start() > cap:
            return m.start()
    return 0


def validate_json(text: str, schema: dict, *, base: int = 0, source: str | None = None,
                  limits: Limits | None = None) -> tuple[Any, list[Violation]]:
    """Parse ``text`` and validate it against ``schema``: ``(value, violations)``.

    ``value`` is None when the text is not JSON (or exceeds a limit).  Paths are JSON
    pointers.  ``limits``: the input size and nesting bounds (default
    :data:`decoding.limits.DEFAULT_LIMITS`).
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    src = text if source is None else source

    def one(code: str, msg: str, o: int, path: str = "") -> tuple[None, list[Violation]]:
        ln, col = line_col(src, o)
        return None, [Violation(code, path, msg.replace("{at}", f"{ln}:{col}", 1), ln, col, o)]

    too_long = _limit_violation(limits, text, src, base)
    if too_long is not None:
        return None, [too_long]
    bad = _surrogate(text)
    if bad >= 0:
        return one("json-syntax", f"invalid JSON at {{at}}: character U+{ord(text[bad]):04X} is a lone "
                                  "surrogate (not Unicode text: it has no UTF-8 form)", base + bad)
    deep = _json_too_deep(text, limits.max_nesting)
    if deep >= 0:
        return one("nesting-limit", f"arrays and objects nest deeper than max_nesting={limits.max_nesting} "
                                    "(decoding.limits) at {at}; nothing was validated", base + deep)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        o = base + e.pos
        ln, col = line_col(src, o)
        return None, [Violation("json-syntax", "", f"invalid JSON at {ln}:{col}: {e.msg}",
                                ln, col, o)]
    except RecursionError:  # pragma: no cover - _json_too_deep stops this first
        return one("nesting-limit", "arrays and objects nest too deeply to parse at {at} "
                                    f"(max_nesting={limits.max_nesting}, decoding.limits)", base)
    except ValueError as e:     # an integer with more digits than int() converts
        return one("json-syntax", f"invalid JSON at {{at}}: {e}", base + _long_int(text))
    if not isinstance(schema, (dict, bool)):
        raise SchemaError("", None, f"validate_json: a schema is a JSON object or boolean, "
                                    f"not {type(schema).__name__}")
    import jsonschema
    import referencing.exceptions

    def key(er) -> tuple:
        return list(map(str, er.absolute_path)), er.validator or ""

    try:
        _, validator, fast = _compiled(schema)
        if fast is not None and fast.is_valid(value):
            return value, []        # exact (see json_fast); jsonschema only explains failures
        if fast is not None:
            found = fast.iter_errors(validator, value, known_invalid=True)
        else:
            found = validator.iter_errors(value)
        # the first MAX_VIOLATIONS by path, as sorted(...)[:MAX_VIOLATIONS] (stable),
        # holding only those in memory, over at most MAX_SCHEMA_ERRORS errors
        errors = heapq.nsmallest(MAX_VIOLATIONS, itertools.islice(found, MAX_SCHEMA_ERRORS), key=key)
    except jsonschema.exceptions.UnknownType as e:
        raise SchemaError("", "type", f"validate_json: unknown type {e.type!r} in the schema") from e
    except referencing.exceptions.Unresolvable as e:
        raise SchemaError("", "$ref", f"validate_json: cannot resolve a reference in the schema: "
                                      f"{e}") from e
    except RecursionError:
        return one("nesting-limit", "the value nests too deeply to validate against this schema "
                                    "(the validator ran out of Python recursion; max_nesting="
                                    f"{limits.max_nesting}, decoding.limits) at {{at}}", base)
    except (TypeError, AttributeError) as e:
        raise _malformed(schema, e) from e
    out: list[Violation] = []
    where = _Locator(text)
    for err in errors:
        parts = list(err.absolute_path)
        try:
            o = base + where.locate(parts)
        except (ValueError, IndexError):
            o = base
        ln, col = line_col(src, o)
        out.append(Violation(f"schema-{err.validator}", _pointer(parts), _message(err), ln, col, o))
    return value, out
