"""The compiled JSON Schema fast path agrees exactly with jsonschema (validity and errors)."""

from __future__ import annotations

import jsonschema
import pytest

from decoding.guard.json_fast import compile_fast
from decoding.guard.validate import _compiled, validate_json

SUPPORTED = [
    {"type": "integer"},
    {"type": ["string", "null"], "minLength": 2, "maxLength": 4},
    {"type": "number", "minimum": 0, "exclusiveMaximum": 10},
    {"exclusiveMinimum": 1, "maximum": 3},
    {"enum": ["a", "b", None]},
    {"const": "x"},
    {"type": "string", "pattern": "^[a-z]+$"},
    {"type": "string", "format": "date"},
    {"format": "date-time"},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
     "required": ["a"], "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}},
     "additionalProperties": {"type": "boolean"}, "minProperties": 1, "maxProperties": 2},
    {"type": "object", "dependentRequired": {"a": ["b"]}},
    {"type": "array", "items": {"type": "object", "properties": {"d": {"format": "date"}},
                                "required": ["d"]}, "minItems": 1, "maxItems": 3},
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
    {"oneOf": [{"type": "integer"}, {"type": "number", "maximum": 2}]},
    {"allOf": [{"type": "object"}, {"required": ["a"]}], "not": {"required": ["b"]}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
     "items": {"type": "integer"}, "x-annotation": [1, 2]},
    True,
    False,
]

VALUES = [None, True, False, 0, 1, 1.0, 2.5, 7, 12, -1, "", "a", "ab", "abcde", "AB",
          "2024-06-15", "2024-02-30", "2024-06-15T10:00:00Z", "x", [], [1, 2], [1, "a"],
          [{"d": "2024-01-01"}], [{"d": "tomorrow"}], [{}, {}, {}, {}], {}, {"a": 1},
          {"a": 1.0}, {"a": True}, {"a": 1, "b": "s"}, {"a": 1, "c": 2}, {"a": 1, "c": True},
          {"b": 1}, {"a": 1, "b": 2, "c": False}]


def _errors(errs) -> list:
    return sorted((list(map(str, e.absolute_path)), e.validator, e.message) for e in errs)


@pytest.mark.parametrize("schema", SUPPORTED, ids=range(len(SUPPORTED)))
def test_fast_path_matches_jsonschema(schema):
    entry = _compiled(schema) if isinstance(schema, dict) else None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    fc = jsonschema.FormatChecker() if entry is None else entry[1].format_checker
    validator = cls(schema, format_checker=fc)
    fast = compile_fast(schema, cls, fc)
    assert fast is not None
    for value in VALUES:
        assert fast.is_valid(value) == validator.is_valid(value), value
        assert _errors(fast.iter_errors(validator, value)) == _errors(
            validator.iter_errors(value)), value


UNSUPPORTED = [
    {"$ref": "#/$defs/a", "$defs": {"a": {"type": "integer"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}]},
    {"type": "array", "uniqueItems": True},
    {"type": "number", "multipleOf": 0.1},
    {"enum": [1, 2]},
    {"type": "strin"},
]


@pytest.mark.parametrize("schema", UNSUPPORTED, ids=range(len(UNSUPPORTED)))
def test_unsupported_schemas_fall_back(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    assert compile_fast(schema, cls, jsonschema.FormatChecker()) is None
    assert _compiled(schema)[2] is None


def test_validate_json_messages_unchanged_on_fast_schemas():
    schema = SUPPORTED[12]
    value, errs = validate_json('[{"d": "2024-01-01"}, {"d": "tomorrow"}, {}]', schema)
    assert value is not None
    assert [(v.code, v.path) for v in errs] == [("schema-format", "/1/d"),
                                                 ("schema-required", "/2")]
    assert "tomorrow" in errs[0].message and "YYYY-MM-DD" in errs[0].message
