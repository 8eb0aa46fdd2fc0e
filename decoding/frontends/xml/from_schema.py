"""XML documents from a JSON Schema tool definition, as grammar IR.

One tool definition drives JSON *and* XML: ``{"user_id": integer, "action": enum}`` under
root ``request`` gives ``<request><user_id>12345</user_id><action>query</action></request>``.

Mapping (compact: no whitespace between tags; ``whitespace="flexible"`` allows up to
``max_ws`` of ``[ \\t\\n]`` before each child element and before each end tag):

- object: one child element per property, **in schema order**; required properties
  always, others optional; no other elements (``additionalProperties`` is not
  representable and is ignored only when it is ``false`` or absent, otherwise rejected);
- string: escaped text (:mod:`decoding.frontends.xml.text`); ``enum``/``const`` -> exactly those
  texts; ``pattern`` -> the text's decoded value matches it with JSON Schema semantics
  (an unanchored search, exactly as the JSON front-end reads the same schema: ``"ab"``
  accepts ``xaby``); ``format`` -> the whole decoded value is one of the format (those of
  :mod:`decoding.frontends.jsonschema.formats` that the regex engine can express); both
  through the one engine :mod:`decoding.text.regex`;
  ``minLength``/``maxLength`` bound the number of characters;
- integer: decimal digits (``minimum``/``maximum`` honoured exactly); number: JSON number
  spelling; boolean: ``true``/``false``; null: an empty element ``<name/>``;
- array: the element holds ``<item>`` children (``item_name``), ``minItems``/``maxItems``
  honoured;
- ``enum`` of mixed scalars: their JSON spellings (strings unquoted);
- ``$ref`` to ``#/$defs/...`` or ``#/definitions/...`` (recursion unrolled to
  ``max_depth`` by the automaton); ``anyOf``/``oneOf`` of the above -> alternatives.

Any other validation keyword raises :class:`SchemaError` with its JSON pointer.
A tool definition may be given whole: ``{"name":..., "parameters": {...}}`` (OpenAI) or
``{"name":..., "input_schema": {...}}`` (Anthropic) or ``{"function": {...}}``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from decoding.errors import GrammarError, SchemaError
from decoding.frontends.xml.grammar import XML_DECLARATION, failsafe_document
from decoding.frontends.xml.text import escape_text, text_char, text_unit
from decoding.ir import (DEFAULT_MAX_DEPTH, EMPTY, NOTHING, Grammar, Node, Ref, byteset, choice, lit,
                         nullable, opt, rep, seq)
from decoding.text.regex import regex_ir
from decoding.text.xml_name import is_name

__all__ = ["schema_xml_grammar", "tool_schema"]

_ANNOTATIONS = {"title", "description", "examples", "default", "$schema", "$id", "$comment",
                "deprecated", "readOnly", "writeOnly", "$defs", "definitions"}


def tool_schema(tool: dict) -> dict:
    """The parameters schema of a tool definition (or ``tool`` itself if it is a schema)."""
    if "function" in tool and isinstance(tool["function"], dict):
        tool = tool["function"]
    for key in ("parameters", "input_schema"):
        if key in tool and isinstance(tool[key], dict):
            return tool[key]
    return tool


class _Compiler:
    def __init__(self, root_schema: dict, whitespace: str, max_ws: int, item_name: str,
                 numeric_refs: bool) -> None:
        self.root = root_schema
        self.ws = EMPTY if whitespace == "compact" else rep(byteset([(9, 10), (32, 32)]), 0,
                                                                 max_ws)
        self.item = item_name
        self.text = text_unit(numeric=numeric_refs)
        self.rules: dict[str, Node] = {}
        self.def_empty: dict[str, bool] = {}

    def element(self, name: str, schema: Any, ptr: str) -> Node:
        if not is_name(name):
            raise SchemaError(ptr, None, f"property name {name!r} is not a valid XML element name")
        open_, close = lit(f"<{name}>"), lit(f"</{name}>")
        body, can_be_empty = self.content(schema, ptr)
        full = seq(open_, body, close)
        return choice(lit(f"<{name}/>"), full) if can_be_empty else full

    def content(self, schema: Any, ptr: str) -> tuple[Node, bool]:
        """(IR of the element content, whether it may be empty)."""
        if schema is True or schema == {}:
            raise SchemaError(ptr, None, "an unconstrained value has no XML form; give a type")
        if schema is False:
            raise SchemaError(ptr, None, "false schema: no value is allowed")
        if not isinstance(schema, dict):
            raise SchemaError(ptr, None, "schema must be an object")
        if "$ref" in schema:
            others = set(schema) - _ANNOTATIONS - {"$ref"}
            if others:
                raise SchemaError(ptr, sorted(others)[0], "keywords beside $ref are not supported")
            return self.ref(schema["$ref"], ptr)
        for kw in ("anyOf", "oneOf"):
            if kw in schema:
                alts = [self.content(s, f"{ptr}/{kw}/{i}") for i, s in enumerate(schema[kw])]
                return choice(*(a for a, _ in alts)), any(e for _, e in alts)
        if "enum" in schema or "const" in schema:
            vals = schema["enum"] if "enum" in schema else [schema["const"]]
            texts = [v if isinstance(v, str) else json.dumps(v) for v in vals]
            return choice(*(lit(escape_text(t)) for t in texts)), "" in texts
        t = schema.get("type")
        if isinstance(t, list):
            alts = [self.content({**schema, "type": x}, ptr) for x in t]
            return choice(*(a for a, _ in alts)), any(e for _, e in alts)
        handler = {"object": self.obj, "string": self.string, "integer": self.integer,
                   "number": self.number, "boolean": self.boolean, "null": self.null,
                   "array": self.array}.get(t)
        if handler is None:
            raise SchemaError(ptr, "type", f"type {t!r} is not supported for XML output "
                              "(give one of object, string, integer, number, boolean, null, array)")
        return handler(schema, ptr)

    def _check(self, schema: dict, ptr: str, allowed: set[str]) -> None:
        extra = set(schema) - _ANNOTATIONS - allowed - {"type"}
        if extra:
            kw = sorted(extra)[0]
            raise SchemaError(ptr, kw, f"keyword {kw!r} is not supported for "
                              f"{schema.get('type')} values in XML output")

    def ref(self, ref: str, ptr: str) -> tuple[Node, bool]:
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                key = ref[len(prefix):]
                table = self.root.get(prefix[2:-1], {})
                if key not in table:
                    raise SchemaError(ptr, "$ref", f"unresolvable reference {ref!r}")
                rule = "def:" + key
                if rule not in self.rules:
                    self.rules[rule] = EMPTY  # placeholder while the definition is compiled
                    self.def_empty[rule] = False  # a recursive use assumes non-empty content
                    node, empty = self.content(table[key], f"/{prefix[2:-1]}/{key}")
                    self.rules[rule], self.def_empty[rule] = node, empty
                return Ref(rule), self.def_empty[rule]
        raise SchemaError(ptr, "$ref", f"only local #/$defs/... references are supported, not {ref!r}")

    def obj(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, {"properties", "required", "additionalProperties"})
        if schema.get("additionalProperties", False) not in (False,) and \
                "additionalProperties" in schema:
            raise SchemaError(ptr, "additionalProperties", "additional properties have no "
                              "fixed element name in XML; set additionalProperties to false")
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        missing = required - set(props)
        if missing:
            raise SchemaError(ptr, "required", f"required property {sorted(missing)[0]!r} has "
                              "no schema under properties")
        parts: list[Node] = [self.ws]
        for name, sub in props.items():
            el = seq(self.element(name, sub, f"{ptr}/properties/{name}"), self.ws)
            parts.append(el if name in required else opt(el))
        return seq(*parts), not required

    def string(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, {"pattern", "format", "minLength", "maxLength"})
        if "pattern" in schema and "format" in schema:
            raise SchemaError(ptr, "format", "pattern together with format is not supported")
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        if "pattern" in schema or "format" in schema:
            if "minLength" in schema or "maxLength" in schema:
                raise SchemaError(ptr, "maxLength", "length bounds together with a pattern or "
                                  "format are not supported")
            src = schema.get("pattern")
            if src is None:
                from decoding.frontends.jsonschema.formats import format_regex
                src = format_regex(schema["format"])
                if src is None:
                    raise SchemaError(ptr, "format", f"format {schema['format']!r} is not supported")
            kw = "pattern" if "pattern" in schema else "format"
            try:  # JSON Schema semantics: a pattern searches, a format spans the value
                node = regex_ir(src, text_char, anchored=kw == "format")
            except GrammarError as exc:
                raise SchemaError(ptr, kw, str(exc)) from None
            if node == NOTHING:
                raise SchemaError(ptr, kw, f"{src!r} matches no string of XML characters")
            return node, nullable(node)
        return rep(self.text, lo, None if hi is None else int(hi)), lo == 0

    def integer(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, {"minimum", "maximum"})
        from decoding.frontends.jsonschema.numbers import integer_range
        lo, hi = schema.get("minimum"), schema.get("maximum")
        return integer_range(None if lo is None else int(lo), None if hi is None else int(hi)), \
            False

    def number(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, set())
        from decoding.frontends.jsonschema.numbers import NUMBER
        return NUMBER, False

    def boolean(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, set())
        return choice(lit("true"), lit("false")), False

    def null(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, set())
        return EMPTY, True

    def array(self, schema: dict, ptr: str) -> tuple[Node, bool]:
        self._check(schema, ptr, {"items", "minItems", "maxItems"})
        if not isinstance(schema.get("items"), dict):
            raise SchemaError(ptr, "items", "arrays need one 'items' schema for XML output")
        item = seq(self.element(self.item, schema["items"], f"{ptr}/items"), self.ws)
        lo, hi = int(schema.get("minItems", 0)), schema.get("maxItems")
        return seq(self.ws, rep(item, lo, None if hi is None else int(hi))), lo == 0


def schema_xml_grammar(schema_or_tool: dict, root: str = "request", *,
                       whitespace: Literal["compact", "flexible"] = "compact",
                       max_ws: int = 8, max_depth: int = DEFAULT_MAX_DEPTH,
                       xml_declaration: Literal["optional", "required", "none"] = "none",
                       item_name: str = "item", failsafe: bool = False,
                       numeric_refs: bool = False) -> Grammar:
    """Grammar IR for ``<root>...</root>`` holding the tool's arguments as child elements.

    ``max_depth`` bounds recursive ``$ref`` nesting (default
    :data:`decoding.ir.DEFAULT_MAX_DEPTH`, as in every front-end)."""
    schema = tool_schema(schema_or_tool)
    if not is_name(root):
        raise SchemaError("", None, f"root {root!r} is not a valid XML element name")
    if whitespace not in ("compact", "flexible"):
        raise GrammarError(f"schema_xml_grammar(): whitespace must be 'compact' or 'flexible', not {whitespace!r}")
    c = _Compiler(schema, whitespace, max_ws, item_name, numeric_refs)
    doc = c.element(root, schema, "")
    if xml_declaration == "required":
        doc = seq(lit(XML_DECLARATION), doc)
    elif xml_declaration == "optional":
        doc = seq(opt(lit(XML_DECLARATION)), doc)
    elif xml_declaration != "none":
        raise GrammarError(f"schema_xml_grammar(): xml_declaration must be 'optional', 'required' or 'none', "
                           f"not {xml_declaration!r}")
    if failsafe:
        doc = choice(doc, failsafe_document(numeric_refs=numeric_refs))
    rules = [("document", doc)] + list(c.rules.items())
    return Grammar("document", tuple(rules), max_depth)
