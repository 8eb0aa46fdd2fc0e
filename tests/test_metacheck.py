"""The fast 2020-12 metaschema check agrees with ``jsonschema``'s metaschema validator:
on every schema of the official suite, on JSONSchemaBench schemas, on hand-written invalid
values of every keyword, and on generated schemas (hypothesis).  Agreement is checked both
ways (a ``False`` that jsonschema would accept only costs time, but is still a bug here)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoding.errors import SchemaError
from decoding.frontends.jsonschema.check import _meta_validator, check_metaschema
from decoding.frontends.jsonschema.metacheck import _KEYWORDS, valid_2020_12

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpora"
SUITE = SHARED / "json-schema-test-suite" / "draft2020-12"
BENCH = SHARED / "jsonschemabench"
V = _meta_validator(jsonschema.Draft202012Validator)
FC = V.format_checker


def _reference(schema) -> bool:
    return next(iter(V.iter_errors(schema)), None) is None


def _suite_schemas() -> list:
    out = []
    for f in sorted(SUITE.glob("*.json")):
        for g in json.loads(f.read_text(encoding="utf-8")):
            out.append(g["schema"])
    return out


def _bench_schemas(per_split: int = 80) -> list:
    out = []
    for d in sorted(BENCH.iterdir()):
        files = sorted(d.glob("*.json"))
        step = max(1, len(files) // per_split)
        for f in files[::step][:per_split]:
            s = json.loads(f.read_text(encoding="utf-8"))["schema"]
            if not (isinstance(s, dict) and isinstance(s.get("$schema"), str) and "2020-12" not in s["$schema"]):
                out.append(s)
    return out


def test_suite_schemas_agree():
    schemas = _suite_schemas()
    assert len(schemas) >= 380
    bad = [s for s in schemas if valid_2020_12(s, FC) != _reference(s)]
    assert not bad, bad[:3]
    assert sum(not _reference(s) for s in schemas) == 0  # the suite's schemas are all valid ...


def test_bench_schemas_agree():
    schemas = _bench_schemas()
    assert len(schemas) >= 250
    bad = [s for s in schemas if valid_2020_12(s, FC) != _reference(s)]
    assert not bad, [json.dumps(s)[:200] for s in bad[:3]]


@pytest.mark.parametrize("schema", [
    {"type": "strin"}, {"type": []}, {"type": ["string", "string"]}, {"type": ["string", 1]}, {"type": 3},
    {"minLength": -1}, {"minLength": 1.5}, {"minLength": True}, {"minLength": "1"}, {"maxItems": -0.5},
    {"multipleOf": 0}, {"multipleOf": -2}, {"multipleOf": True}, {"minimum": "0"}, {"maximum": None},
    {"exclusiveMinimum": False}, {"required": "a"}, {"required": ["a", "a"]}, {"required": [1]},
    {"dependentRequired": {"a": "b"}}, {"dependentRequired": []}, {"enum": {}}, {"examples": "x"},
    {"properties": []}, {"properties": {"a": 1}}, {"properties": {"a": {"type": "x"}}},
    {"items": [{}]}, {"items": 1}, {"prefixItems": []}, {"prefixItems": {}}, {"allOf": []}, {"anyOf": [1]},
    {"oneOf": {}}, {"not": "x"}, {"if": []}, {"$defs": {"a": {"minimum": "x"}}}, {"definitions": {"a": 2}},
    {"dependencies": {"a": 1}}, {"dependencies": {"a": ["b", "b"]}}, {"dependencies": {"a": {"type": 5}}},
    {"$id": "a#b"}, {"$id": 1}, {"$anchor": "1a"}, {"$anchor": "a b"}, {"$dynamicAnchor": ""},
    {"$recursiveAnchor": True}, {"$ref": 1}, {"$dynamicRef": None}, {"$recursiveRef": []}, {"$comment": 1},
    {"$vocabulary": []}, {"$vocabulary": {"https://x": 1}}, {"title": 1}, {"description": []},
    {"deprecated": "yes"}, {"readOnly": 1}, {"uniqueItems": 0}, {"format": 1}, {"contentEncoding": 1},
    {"contentSchema": 1}, {"unevaluatedProperties": []}, {"patternProperties": {"^a": 1}},
    {"propertyNames": "x"}, {"dependentSchemas": {"a": []}}, {"contains": 2}, {"additionalProperties": "no"},
    [], 1, "schema", None, {"allOf": [{"anyOf": [{"properties": {"x": {"minItems": -1}}}]}]},
])
def test_invalid_values_rejected_by_both(schema):
    assert not _reference(schema)
    assert not valid_2020_12(schema, FC)
    with pytest.raises(SchemaError):
        check_metaschema(schema)


@pytest.mark.parametrize("schema", [
    True, False, {}, {"type": "integer", "minimum": 1.0, "maxLength": 3.0}, {"$anchor": "a\n"},
    {"$id": "https://x/y#"}, {"type": ["string", "null"]}, {"x-unknown": {"type": "bad"}},
    {"dependencies": {"a": ["b"], "c": {"type": "string"}, "d": True}}, {"minContains": 0},
    {"enum": [1, 1]}, {"const": {"type": 1}}, {"default": [1]}, {"examples": []},
    {"$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True}},
    {"items": False, "prefixItems": [True, {}]}, {"multipleOf": 0.5}, {"maximum": 10 ** 40},
])
def test_valid_values_accepted_by_both(schema):
    assert _reference(schema)
    assert valid_2020_12(schema, FC)
    check_metaschema(schema)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "a", "a#b", "string", "integer", "1a", "x y", "#/a"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "type", "$ref"]), inner,
                                                                max_size=3),
    max_leaves=8)
def _schemas_of(keywords: dict) -> st.SearchStrategy:
    """Random schema-like data over ``keywords``: keyword values are random JSON, nested
    values are schemas, lists of them or maps of them."""
    values = st.dictionaries(st.sampled_from(sorted(keywords) + ["x-other"]), _json, max_size=4)
    return st.recursive(values | st.booleans(),
                        lambda inner: st.dictionaries(st.sampled_from(sorted(keywords)),
                                                      inner | st.lists(inner, max_size=2)
                                                      | st.dictionaries(st.sampled_from(["p", "q"]), inner,
                                                                        max_size=2), max_size=3),
                        max_leaves=10)


_schemas = _schemas_of(_KEYWORDS)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas)
def test_generated_schemas_agree(schema):
    assert valid_2020_12(schema, FC) == _reference(schema)


# ------------------------------------------------------------------ draft-04
from decoding.frontends.jsonschema.metacheck import _D4_KEYWORDS, valid_draft4  # noqa: E402

V4 = _meta_validator(jsonschema.Draft4Validator)


def _reference4(schema) -> bool:
    return next(iter(V4.iter_errors(schema)), None) is None


def _bench_draft4() -> list:
    out = []
    files = sorted((BENCH / "Github_easy").glob("*.json"))
    for f in files[::3]:
        s = json.loads(f.read_text(encoding="utf-8"))["schema"]
        if isinstance(s, dict) and isinstance(s.get("$schema"), str) and "draft-04" in s["$schema"]:
            out.append(s)
    return out


def test_draft4_bench_schemas_agree():
    schemas = _bench_draft4()
    assert len(schemas) >= 300
    bad = [s for s in schemas if valid_draft4(s, V4.format_checker) != _reference4(s)]
    assert not bad, [json.dumps(s)[:200] for s in bad[:3]]


@pytest.mark.parametrize("schema", [
    True, False, {}, {"type": "integer"}, {"type": []}, {"type": ["string", "string"]}, {"type": "strin"},
    {"minLength": 1.0}, {"minLength": -1}, {"minLength": True}, {"maxItems": 3}, {"multipleOf": 0},
    {"multipleOf": 0.5}, {"maximum": 1, "exclusiveMaximum": True}, {"exclusiveMaximum": True},
    {"exclusiveMinimum": False}, {"exclusiveMinimum": 1, "minimum": 0}, {"required": []}, {"required": ["a"]},
    {"required": ["a", "a"]}, {"enum": []}, {"enum": [1, 1.0]}, {"enum": [1, True]}, {"enum": [{"a": 1}, {"a": 1}]},
    {"enum": [[1], [True]]}, {"items": True}, {"items": []}, {"items": [{}]}, {"items": {}}, {"items": [True]},
    {"additionalItems": False}, {"additionalProperties": True}, {"additionalProperties": {"type": 1}},
    {"additionalProperties": 1}, {"properties": {"a": True}}, {"properties": {"a": {}}},
    {"dependencies": {"a": []}}, {"dependencies": {"a": ["b"]}}, {"dependencies": {"a": True}},
    {"dependencies": {"a": {"type": "x"}}}, {"allOf": []}, {"anyOf": [{}]}, {"not": True}, {"not": {}},
    {"id": 1}, {"$schema": 1}, {"format": "nope"}, {"pattern": "("}, {"definitions": {"a": False}},
    {"uniqueItems": 1}, {"$ref": 1}, {"x": {"type": 5}}, {"const": 1, "if": 2}, [], 1, None,
    {"allOf": [{"anyOf": [{"properties": {"x": {"minItems": -1}}}]}]},
])
def test_draft4_hand_values_agree(schema):
    assert valid_draft4(schema, V4.format_checker) == _reference4(schema)


_schemas4 = _schemas_of(_D4_KEYWORDS)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas4)
def test_draft4_generated_schemas_agree(schema):
    assert valid_draft4(schema, V4.format_checker) == _reference4(schema)


# ------------------------------------------------------------------ draft-07 and draft-06
from decoding.frontends.jsonschema.metacheck import _D6_KEYWORDS, _D7_KEYWORDS, valid_draft6, valid_draft7  # noqa: E402

V7 = _meta_validator(jsonschema.Draft7Validator)
V6 = _meta_validator(jsonschema.Draft6Validator)


def _reference7(schema) -> bool:
    return next(iter(V7.iter_errors(schema)), None) is None


def _reference6(schema) -> bool:
    return next(iter(V6.iter_errors(schema)), None) is None


def _bench_draft(tag: str) -> list:
    out = []
    for split in ("Github_easy", "Github_trivial"):
        for f in sorted((BENCH / split).glob("*.json")):
            s = json.loads(f.read_text(encoding="utf-8"))["schema"]
            if isinstance(s, dict) and isinstance(s.get("$schema"), str) and tag in s["$schema"]:
                out.append(s)
    return out


def test_draft7_bench_schemas_agree():
    schemas = _bench_draft("draft-07")
    assert len(schemas) >= 100
    bad = [s for s in schemas if valid_draft7(s, V7.format_checker) != _reference7(s)]
    assert not bad, [json.dumps(s)[:200] for s in bad[:3]]
    # ... and as 2020-12 schemas would be read (every draft's bench schemas under the others)
    for valid, ref in ((valid_draft6, _reference6), (valid_draft7, _reference7)):
        for s in _bench_draft("draft-06") + _bench_draft("draft-04")[:200]:
            assert valid(s, V7.format_checker if valid is valid_draft7 else V6.format_checker) == ref(s)


def test_draft6_bench_schemas_agree():
    schemas = _bench_draft("draft-06")
    assert len(schemas) >= 40
    bad = [s for s in schemas if valid_draft6(s, V6.format_checker) != _reference6(s)]
    assert not bad, [json.dumps(s)[:200] for s in bad[:3]]


_HAND_67 = [
    True, False, {}, {"type": "integer"}, {"type": []}, {"type": ["string", "string"]}, {"type": "strin"},
    {"minLength": 1.0}, {"minLength": 1.5}, {"minLength": -1}, {"minLength": True}, {"maxItems": 3},
    {"multipleOf": 0}, {"multipleOf": 0.5}, {"multipleOf": True}, {"exclusiveMaximum": True},
    {"exclusiveMaximum": 3}, {"exclusiveMinimum": "1"}, {"required": []}, {"required": ["a"]},
    {"required": ["a", "a"]}, {"required": [1]}, {"enum": []}, {"enum": [1, 1]}, {"enum": {}}, {"items": True},
    {"items": []}, {"items": [{}]}, {"items": {}}, {"items": [True]}, {"items": 1}, {"additionalItems": False},
    {"additionalItems": 1}, {"additionalProperties": True}, {"additionalProperties": {"type": 1}},
    {"additionalProperties": 1}, {"properties": {"a": True}}, {"properties": {"a": 1}}, {"properties": []},
    {"dependencies": {"a": []}}, {"dependencies": {"a": ["b"]}}, {"dependencies": {"a": True}},
    {"dependencies": {"a": ["b", "b"]}}, {"dependencies": {"a": 1}}, {"dependencies": {"a": {"type": "x"}}},
    {"allOf": []}, {"anyOf": [{}]}, {"oneOf": {}}, {"not": True}, {"not": "x"}, {"$id": 1}, {"$id": "a#b"},
    {"$id": "http://x/y#"}, {"$schema": 1}, {"$schema": "not a uri"}, {"$ref": 1}, {"$ref": "#/definitions/a"},
    {"$ref": "a b"}, {"format": "nope"}, {"format": 1}, {"pattern": "("}, {"pattern": 1},
    {"definitions": {"a": False}}, {"definitions": {"a": 1}}, {"uniqueItems": 1}, {"x": {"type": 5}},
    {"const": 1, "if": 2}, {"if": {"type": 1}}, {"then": []}, {"else": True}, {"$comment": 1}, {"readOnly": 1},
    {"writeOnly": 1}, {"contentMediaType": 1}, {"contentEncoding": 1}, {"examples": "x"}, {"examples": []},
    {"propertyNames": "x"}, {"contains": 2}, {"patternProperties": {"^a": 1}}, {"$defs": {"a": 1}},
    {"prefixItems": 1}, {"title": 1}, {"description": []}, {"maximum": None}, {"minimum": 10 ** 40},
    [], 1, "schema", None, {"allOf": [{"anyOf": [{"properties": {"x": {"minItems": -1}}}]}]},
]


@pytest.mark.parametrize("schema", _HAND_67)
def test_draft7_hand_values_agree(schema):
    assert valid_draft7(schema, V7.format_checker) == _reference7(schema)
    assert valid_draft6(schema, V6.format_checker) == _reference6(schema)


def test_draft7_hand_values_cover_both_verdicts():
    """The hand-written values test something: both verdicts occur, and each keyword of the
    tables has an invalid value that the fast check rejects."""
    verdicts = [_reference7(s) for s in _HAND_67]
    assert any(verdicts) and not all(verdicts)
    for table, valid, fc in ((_D7_KEYWORDS, valid_draft7, V7.format_checker),
                             (_D6_KEYWORDS, valid_draft6, V6.format_checker)):
        for kw in table:
            if kw in ("enum", "examples"):
                bad = {kw: "x"}
            elif kw in ("$schema", "$id", "$ref"):
                bad = {kw: 1}
            else:
                bad = {kw: 1.5} if kw not in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum",
                                              "multipleOf") else {kw: "1"}
            assert not valid(bad, fc), kw


_schemas7 = _schemas_of(_D7_KEYWORDS)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas7)
def test_draft7_generated_schemas_agree(schema):
    assert valid_draft7(schema, V7.format_checker) == _reference7(schema)
    assert valid_draft6(schema, V6.format_checker) == _reference6(schema)


def test_draft7_uri_memo_same_verdicts():
    """The per-process memo of uri-reference verdicts gives the format checker's verdicts."""
    memo: dict = {}
    memo20: dict = {}
    for ref in ("#/definitions/a", "a b", "http://x/y#z", "%", "#/a%20b", ""):
        s = {"$ref": ref, "properties": {"p": {"$ref": ref}}}
        for _ in range(2):
            assert valid_draft7(s, V7.format_checker, memo) == _reference7(s)
            assert valid_2020_12(s, FC, memo20) == _reference(s)
    assert memo
