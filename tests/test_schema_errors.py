"""SchemaError pointer/keyword contract, lenient mode, limits, and retry feedback."""

from __future__ import annotations

import json

import pytest

from decoding.errors import LimitError, SchemaError
from decoding.frontends.jsonschema import compile_schema, feedback, validate_instance

ERRORS = [
    ({"type": "array", "uniqueItems": True}, "", "uniqueItems"),
    ({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}, "/properties/tags", "uniqueItems"),
    ({"type": "object", "properties": {k: {} for k in "abcd"},
      "dependentSchemas": {k: {"required": ["e"]} for k in "abcd"}}, "", "dependentSchemas"),
    ({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {"^x": {}},
                                             "dependentRequired": {"xa": ["b"]}}}},
     "/properties/a", "dependentRequired"),
    ({"type": "string", "format": "idn-hostname"}, "", "format"),
    ({"type": "string", "format": "uri-template"}, "", "format"),
    # issue 15: compiled by intersection/complement now, except where no exact language exists
    ({"type": "number", "multipleOf": 0.123456789}, "", "multipleOf"),  # over MAX_MULTIPLE_STATES
    # a `not` whose inside has no exact language is avoided by an over-approximation
    # (tests/test_format_overapprox.py); where that is every value, the exact error stays
    ({"not": {"type": "object", "patternProperties": {f"^{c}": {"type": "integer"} for c in "abcde"}}},
     "/not", "patternProperties"),
    ({"type": "array", "contains": {"type": "integer"}, "uniqueItems": True}, "", "uniqueItems"),
    ({"type": "string", "pattern": "(?<=a)b"}, "", "pattern"),
    ({"type": "string", "pattern": "(a)\\1"}, "", "pattern"),
    ({"type": "string", "pattern": "a\\bb"}, "", "pattern"),
    ({"$ref": "https://example.com/s.json"}, "/$ref", "$ref"),
    ({"$ref": "#/$defs/missing"}, "/$ref", "$ref"),
    ({"type": "sting"}, "/type", "type"),  # a metaschema error: at the offending value
    ({"properties": {"a": {"type": "object", "minProperties": 2, "additionalProperties": True}}},
     "/properties/a", "minProperties"),
]


@pytest.mark.parametrize("schema,pointer,keyword", ERRORS, ids=[json.dumps(e[0])[:50] for e in ERRORS])
def test_schema_error_names_pointer_and_keyword(schema, pointer, keyword):
    with pytest.raises(SchemaError) as ei:
        compile_schema(schema)
    assert ei.value.pointer == pointer
    assert ei.value.keyword == keyword
    assert keyword in str(ei.value)


def test_irrelevant_unsupported_keyword_is_fine():
    # uniqueItems only constrains arrays; a string schema is exact without it
    compile_schema({"type": "string", "uniqueItems": True})


def test_lenient_drops_only_unsupported_formats():
    sg = compile_schema({"type": "object", "properties": {"p": {"type": "string", "format": "uri-template"}}},
                        lenient=True)
    assert sg.dropped == ("/properties/p format",)
    sg = compile_schema({"type": "object", "properties": {"p": {"type": "string", "format": "jsonpath"}}})
    assert sg.dropped == () and sg.ignored == ("/properties/p format",)
    with pytest.raises(SchemaError):
        compile_schema({"type": "array", "uniqueItems": True}, lenient=True)


def test_unknown_keywords_are_reported_as_ignored():
    sg = compile_schema({"type": "string", "_format": "date"})
    assert sg.ignored == ("/ _format",)


def test_large_counts_compile_counted_not_hang():
    """Once LimitErrors; now counted, not unrolled (decoding.backends.counted)."""
    from decoding.backends.select import compile_grammar
    from decoding.vocab import Vocab

    v = Vocab.from_bytes([b"", *[bytes([c]) for c in range(32, 127)]], eog_ids=[0])
    cg = compile_grammar(compile_schema({"type": "string", "maxLength": 1_000_000}).grammar, v)
    assert cg.backend == "counted" and cg.accepts(b'"' + b"x" * 1_000_000 + b'"')
    assert not cg.accepts(b'"' + b"x" * 1_000_001 + b'"')
    g = compile_schema({"type": "array", "items": {"type": "string", "pattern": "^[a-z]{0,900}$"},
                        "prefixItems": [{"type": "string", "maxLength": 400000}]}).grammar
    cg = compile_grammar(g, v)
    assert cg.accepts(b'["' + b"x" * 400000 + b'","' + b"a" * 900 + b'"]')
    assert not cg.accepts(b'["x","' + b"a" * 901 + b'"]')


def test_large_repeated_items_become_a_rule():
    """1000 items of up to 300 characters: too large to unroll in one rule, fine once the
    item is a rule of its own (the pushdown back-end builds it once).  (maxLength 1000 is
    now over limits.max_compile_work: see tests/test_hostile_schema.py.)"""
    from decoding.backends.select import compile_grammar
    from decoding.backends.pushdown.index import CompiledPushdown
    from decoding.vocab import Vocab
    g = compile_schema({"type": "array", "items": {"type": "string", "maxLength": 300}, "maxItems": 1000}).grammar
    v = Vocab.from_bytes([b"", *[bytes([c]) for c in range(32, 127)]], eog_ids=[0])
    cg = compile_grammar(g, v)
    assert isinstance(cg, CompiledPushdown) or cg.backend == "counted"  # strings counted where they can be
    assert cg.accepts(b'["a","' + b"x" * 300 + b'"]')
    assert not cg.accepts(b'["a","' + b"x" * 301 + b'"]')
    assert cg.accepts(b"[" + b",".join([b'""'] * 1000) + b"]")
    assert not cg.accepts(b"[" + b",".join([b'""'] * 1001) + b"]")


def test_bad_input():
    with pytest.raises(SchemaError):
        compile_schema("{not json")
    with pytest.raises(SchemaError):
        compile_schema(42)  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        compile_schema({"type": "object", "properties": {"a": {"type": "string"}},
                        "required": ["a"], "additionalProperties": False,
                        "allOf": [{"properties": {"a": False}}]})


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string", "format": "date"}},
           "required": ["city", "date"]}


def test_feedback_format_message():
    msgs = feedback(WEATHER, json.dumps({"city": "北京市", "date": "明天"}, ensure_ascii=False))
    assert msgs == ["/date: '明天' does not match format date (YYYY-MM-DD)"]


def test_feedback_required_enum_type_and_parse():
    assert validate_instance(WEATHER, {"city": "北京市", "date": "2024-06-15"}) == []
    assert validate_instance(WEATHER, {"city": "北京市"}) == ["/: 'date' is a required property"]
    s = {"type": "object", "properties": {"category": {"enum": ["数码", "服饰"]}, "n": {"type": "integer"}}}
    msgs = validate_instance(s, {"category": "玩具", "n": "3"})
    assert "/category: '玩具' is not one of [\"数码\", \"服饰\"]" in msgs
    assert "/n: '3' is not of type integer" in msgs
    assert feedback(WEATHER, '{"city": ')[0].startswith("/: output is not valid JSON")


def test_non_json_values_are_usage_errors_with_a_pointer():
    from decoding.errors import UsageError
    from decoding.frontends.jsonschema.jsonstr import dumps, number_text

    with pytest.raises(UsageError, match=r"JSON value at /a/1/b~1c: NaN/Infinity"):
        dumps({"a": [1, {"b/c": float("nan")}]})
    with pytest.raises(UsageError, match="not a JSON value: set"):
        dumps({1, 2})
    with pytest.raises(ValueError):  # UsageError is also a ValueError
        number_text(True)
    with pytest.raises(SchemaError) as e:  # a non-JSON enum value names its subschema
        compile_schema({"properties": {"x": {"enum": [float("inf")]}}})
    assert e.value.pointer == "/properties/x/enum/0" and e.value.keyword == "enum"
