"""Local ``#`` references resolved by walking the root schema (``_Compiler._local_fast``)
give the same grammar, the same places and the same errors as resolving them through
``referencing``; the walk is used only where it is sound (no ``$id``, no registry, no
``$dynamicRef``), and there no ``referencing`` lookup is made."""

from __future__ import annotations

import pytest

from decoding.errors import SchemaError
from decoding.frontends.jsonschema import compile as jcompile
from decoding.frontends.jsonschema.compile import compile_schema
from decoding.ir.key import canonical_ir_text

DEFS = {"a": {"type": "integer", "maximum": 9}, "b": {"type": "array", "items": {"$ref": "#/$defs/a"}}}

# (name, schema, fast path expected)
CASES = [
    ("defs", {"$defs": DEFS, "type": "object", "properties": {"x": {"$ref": "#/$defs/a"},
                                                              "y": {"$ref": "#/$defs/b"}}}, True),
    ("definitions-draft7", {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": DEFS,
                            "properties": {"x": {"$ref": "#/definitions/a"}}}, True),
    ("into-a-list", {"type": "object", "properties": {"x": {"anyOf": [{"type": "string", "maxLength": 3},
                                                                       {"type": "null"}]},
                                                      "y": {"$ref": "#/properties/x/anyOf/0"}}}, True),
    ("escaped", {"$defs": {"a/b": {"type": "boolean"}, "c~d": {"type": "null"}, "e f": {"const": 1}},
                 "type": "array", "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"},
                                                  {"$ref": "#/$defs/e%20f"}], "items": False}, True),
    ("to-a-boolean", {"$defs": {"t": True, "f": False}, "type": "object",
                      "properties": {"x": {"$ref": "#/$defs/t"}, "y": {"$ref": "#/$defs/f"}}}, True),
    ("recursive-root", {"type": "object", "properties": {"n": {"type": "integer"}, "next": {"$ref": "#"}}}, True),
    ("anchor", {"$defs": {"a": {"$anchor": "here", "type": "string", "maxLength": 2}},
                "properties": {"x": {"$ref": "#here"}}, "type": "object"}, True),
    ("with-id", {"$id": "https://example.com/root.json", "$defs": DEFS, "type": "object",
                 "properties": {"x": {"$ref": "#/$defs/a"}}}, False),
    ("nested-id", {"$defs": {"inner": {"$id": "https://example.com/inner.json", "$defs": {"a": {"type": "null"}},
                                       "$ref": "#/$defs/a"},
                             "a": {"type": "integer"}},
                   "type": "object", "properties": {"x": {"$ref": "#/$defs/inner"}}}, False),
    ("draft4-id", {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/s.json",
                   "definitions": DEFS, "properties": {"x": {"$ref": "#/definitions/a"}}}, False),
    ("property-named-id", {"$defs": DEFS, "type": "object",
                           "properties": {"id": {"$ref": "#/$defs/a"}}}, True),
]

BAD = [
    ("missing", {"properties": {"x": {"$ref": "#/$defs/nope"}}}),
    ("not-a-schema", {"$defs": {"a": 3}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
]


def _outcome(schema, **kw):
    try:
        g = compile_schema(schema, **kw)
    except SchemaError as e:
        return ("error", e.pointer, e.keyword, str(e))
    return ("ok", canonical_ir_text(g.grammar), tuple(g.dropped), tuple(g.ignored))


@pytest.mark.parametrize("extra", ["omit", "allow"])
@pytest.mark.parametrize("name, schema, fast", CASES, ids=[c[0] for c in CASES])
def test_same_grammar_as_referencing(monkeypatch, name, schema, fast, extra):
    lookups = []
    real_resolve_ref = jcompile.resolve_ref
    monkeypatch.setattr(jcompile, "resolve_ref", lambda *a: lookups.append(a) or real_resolve_ref(*a))
    got = _outcome(schema, extra_properties=extra)
    walked = bool(lookups)
    monkeypatch.setattr(jcompile._Compiler, "_local_fast", lambda self: False)
    assert got == _outcome(schema, extra_properties=extra), name
    assert got[0] == "ok"
    assert walked is fast, name


@pytest.mark.parametrize("name, schema", BAD, ids=[b[0] for b in BAD])
def test_same_error_as_referencing(monkeypatch, name, schema):
    got = _outcome(schema)
    monkeypatch.setattr(jcompile._Compiler, "_local_fast", lambda self: False)
    assert got == _outcome(schema) and got[0] == "error" and got[1], name
