"""Tool calls as XML (``xml_tools: true``), from the same JSON tool schemas.

The answer (``tool_choice`` ``required`` / named) is one document::

    <tool_call><add><a>1</a><b>2</b></add></tool_call>

built by :func:`decoding.frontends.xml.from_schema.schema_xml_grammar` from the schema
``{"anyOf": [{"type": "object", "properties": {<tool>: <parameters>}, "required": [<tool>]}, ...]}``
under the root ``tool_call``: the child element names the tool, its children are the
arguments (the from_schema mapping: one element per property, ``<item>`` for array items).
With ``auto`` the answer is free text that may contain one such document (the free text
cannot contain ``<tool_call>``, so the document's start is unambiguous).

:func:`xml_call_arguments` reads a document back into ``(name, arguments)`` typed by the
tool's ``parameters`` (integers, numbers, booleans, null, arrays, objects), so
``function.arguments`` is the same JSON a JSON tool call would give; the XML itself is kept
in the call's ``xml`` field.  ``$ref`` inside tool parameters is not supported here (422)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from decoding.errors import SchemaError
from decoding.frontends.anchors import text_without
from decoding.frontends.xml.from_schema import schema_xml_grammar
from decoding.ir import Grammar, Ref, opt, seq
from decoding.server.protocol import ToolSpec

__all__ = ["XML_ROOT", "xml_tool_grammar", "xml_call_arguments"]

XML_ROOT = "tool_call"


def xml_tool_grammar(tools: tuple[ToolSpec, ...], *, auto: bool) -> Grammar:
    """The grammar of one XML tool call of ``tools`` (``auto``: inside free text)."""
    for i, t in enumerate(tools):
        if "$ref" in json.dumps(t.parameters):
            raise SchemaError(f"/tools/{i}/function/parameters", "$ref", "not supported with xml_tools")
    alts = [{"type": "object", "properties": {t.name: t.parameters}, "required": [t.name]} for t in tools]
    g = schema_xml_grammar(alts[0] if len(alts) == 1 else {"anyOf": alts}, root=XML_ROOT)
    if not auto:
        return g
    names = set(g.names)
    top = "xml_tool_auto"
    while top in names:
        top = "_" + top
    free = text_without(f"<{XML_ROOT}>".encode())
    body = seq(free, opt(seq(Ref(g.start), free)))
    return Grammar(top, ((top, body),) + g.rules, g.max_depth)


def _value(el: ET.Element, schema: Any) -> Any:
    """The JSON value of element ``el`` under ``schema`` (the inverse of the from_schema mapping)."""
    if not isinstance(schema, dict):
        return el.text or ""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            from decoding.frontends.json_validator import validator

            for alt in schema[key]:
                try:
                    v = _value(el, {**{k: w for k, w in schema.items() if k != key}, **alt})
                except (ValueError, KeyError):
                    continue
                if validator({**{k: w for k, w in schema.items() if k != key}, **alt}).is_valid(v):
                    return v
            raise ValueError(f"<{el.tag}> matches no alternative")
    text = el.text or ""
    if "const" in schema or "enum" in schema:
        options = [schema["const"]] if "const" in schema else schema["enum"]
        for o in options:
            if (o if isinstance(o, str) else json.dumps(o)) == text:
                return o
        raise ValueError(f"<{el.tag}>: {text!r} is not one of the allowed values")
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null") if len(el) or text else ("null" if "null" in t else t[0])
    if t == "object" or (t is None and "properties" in schema):
        props = schema.get("properties", {})
        return {c.tag: _value(c, props.get(c.tag, {})) for c in el}
    if t == "array":
        items = schema.get("items", {})
        return [_value(c, items) for c in el]
    if t == "integer":
        return int(text)
    if t == "number":
        v = float(text)
        return int(v) if v.is_integer() and not any(ch in text for ch in ".eE") else v
    if t == "boolean":
        return text == "true"
    if t == "null":
        return None
    return text


def xml_call_arguments(doc: str, tools: tuple[ToolSpec, ...]) -> tuple[str, dict] | None:
    """``(tool name, arguments)`` of an XML tool-call document, or None if it is not one."""
    try:
        root = ET.fromstring(doc)
    except ET.ParseError:
        return None
    if root.tag != XML_ROOT or len(root) != 1:
        return None
    call = root[0]
    tool = next((t for t in tools if t.name == call.tag), None)
    if tool is None:
        return None
    try:
        args = _value(call, tool.parameters)
    except (ValueError, KeyError):
        return None
    return tool.name, args if isinstance(args, dict) else {}
