"""Differential fuzz of the keywords compiled by intersection and complement (issue 15)
against ``jsonschema``: random schemas using one keyword (hypothesis), instances from
``hypothesis-jsonschema`` (valid ones) and from a random JSON value strategy (mostly
invalid ones), and random walks of our own grammar.

Checked for every compiled schema, on canonical instances (``canonicalize``):
- soundness: every accepted instance, and every walk's output, is valid;
- completeness within the documented universe (logic.py): a valid instance nested at most
  one level, whose numbers are integers or short decimals, is accepted.
"""

from __future__ import annotations

import json
import math

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoding.backends.select import compile_grammar
from decoding.errors import DecodingError, LimitError, SchemaError
from decoding.frontends.json_validator import validator as decimal_validator
from decoding.frontends.jsonschema import canonicalize, compile_schema
from decoding.testing import budgeted_walks
from decoding.vocab import Vocab

hjs = pytest.importorskip("hypothesis_jsonschema")

OPTIONS = dict(extra_properties="allow", untyped="any", format_mode="annotate")
VOCAB = Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"</s>"], eog_ids=[256])

LEAVES = [
    True, False, {"type": "integer"}, {"type": "string"}, {"type": "boolean"}, {"type": ["null", "integer"]},
    {"minimum": 3}, {"maximum": 5}, {"exclusiveMinimum": 1.5}, {"multipleOf": 2}, {"multipleOf": 3},
    {"minLength": 2}, {"maxLength": 1}, {"pattern": "^a"}, {"pattern": "b"}, {"enum": [1, "a", None]},
    {"const": 2}, {"type": "array", "items": {"type": "integer"}}, {"minItems": 1},
    {"type": "object", "required": ["a"]}, {"properties": {"a": {"type": "string"}}}, {"maxProperties": 1},
]
STRING_LEAVES = [{"minLength": 2}, {"maxLength": 1}, {"pattern": "^a"}, {"pattern": "b$"},
                 {"enum": ["a", "ab", "c"]}, {"not": {"const": "b"}}]
leaf = st.sampled_from(LEAVES)

KEYWORDS = {
    "not": st.builds(lambda a: {"not": a}, leaf),
    "not+sibling": st.builds(lambda a, b: {**b, "not": a} if isinstance(b, dict) else {"not": a}, leaf, leaf),
    "oneOf": st.lists(leaf, min_size=2, max_size=3).map(lambda xs: {"oneOf": xs}),
    "if-then-else": st.builds(lambda a, b, c: {"if": a, "then": b, "else": c}, leaf, leaf, leaf),
    "allOf": st.lists(leaf, min_size=2, max_size=3).map(lambda xs: {"allOf": xs}),
    "contains": st.builds(lambda c, lo, hi, it: {"type": "array", "contains": c, "minContains": lo,
                                                 **({"maxContains": lo + hi} if hi is not None else {}),
                                                 **({"items": it} if it is not None else {})},
                          leaf, st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2)),
                          st.one_of(st.none(), leaf)),
    "propertyNames": st.builds(lambda p: {"type": "object", "propertyNames": p}, st.sampled_from(STRING_LEAVES)),
    "patternProperties": st.builds(lambda a, b, c: {"type": "object", "properties": {"ab": a},
                                                    "patternProperties": {"^a": b}, "additionalProperties": c},
                                   leaf, leaf, leaf),
    "multipleOf": st.builds(lambda t, m, lo: {"type": t, "multipleOf": m, **({"minimum": lo} if lo is not None else {})},
                            st.sampled_from(["integer", "number"]), st.sampled_from([2, 3, 7, 1.5, 0.25, 0.5, 0.01, 0.3, 0.05, 2.5]),
                            st.one_of(st.none(), st.integers(-10, 10))),
    "dependentSchemas": st.builds(lambda a: {"type": "object", "dependentSchemas": {"a": a}}, leaf),
    "unevaluatedProperties": st.builds(lambda a, b, u: {"properties": {"a": a}, "allOf": [{"properties": {"b": b}}],
                                                        "unevaluatedProperties": u}, leaf, leaf, leaf),
    "unevaluatedItems": st.builds(lambda a, b, u: {"prefixItems": [a], "allOf": [{"prefixItems": [True, b]}],
                                                   "unevaluatedItems": u}, leaf, leaf, leaf),
    "uniqueItems": st.builds(lambda it, mx: {"type": "array", "items": it, "uniqueItems": True,
                                             **({"maxItems": mx} if mx is not None else {})},
                             st.sampled_from([{"enum": [1, "a", None]}, {"type": "boolean"}, {"const": 2},
                                              {"type": "integer", "minimum": 0, "maximum": 3},
                                              {"enum": [1, 1.0, True]}]),
                             st.one_of(st.none(), st.integers(0, 3))),
    "$ref": st.builds(lambda a, b: {"$defs": {"x": a}, "anyOf": [{"$ref": "#/$defs/x"}, b]}, leaf, leaf),
}

value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-20, 20), st.sampled_from([1.5, -0.25, 2.0, 0.5, 7.25]),
              st.text(alphabet="abc", max_size=3)),
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(st.sampled_from(["a", "ab", "b", "c"]), kids, max_size=3)),
    max_leaves=5)


def _depth(x) -> int:
    if isinstance(x, list):
        return 1 + max((_depth(v) for v in x), default=0)
    if isinstance(x, dict):
        return 1 + max((_depth(v) for v in x.values()), default=0)
    return 0


def _in_universe(x) -> bool:
    """Nested at most one level, numbers integral or short decimals (see logic.py)."""
    def ok(v) -> bool:
        if isinstance(v, float):
            return math.isfinite(v) and "e" not in repr(v) and len(repr(v).replace("-", "").replace(".", "")) <= 15
        if isinstance(v, list):
            return all(ok(i) for i in v)
        if isinstance(v, dict):
            return all(ok(i) for i in v.values())
        return True
    return _depth(x) <= 1 and ok(x)


def _check(schema, instances, rng) -> int:
    try:
        g = compile_schema(schema, **OPTIONS)
        cg = compile_grammar(g.grammar, VOCAB, backend="dfa", max_states=50_000)
    except (SchemaError, LimitError):
        return 0  # refused, loudly: allowed (the rate is measured by evals/conformance)
    except DecodingError as e:  # an empty language: jsonschema must agree on every instance
        assert "accepts no string" in str(e), e
        cg = None
    validator = decimal_validator(schema, cls=jsonschema.Draft202012Validator)  # decimal multipleOf
    for x in instances:
        ok = validator.is_valid(x)
        text = canonicalize(schema, x)
        acc = cg is not None and cg.accepts(text.encode())
        assert not (acc and not ok), f"invalid accepted: {json.dumps(schema)} {text}"
        if ok and _in_universe(x):
            assert acc, f"valid rejected: {json.dumps(schema)} {text}"
    if cg is not None:
        for w in budgeted_walks(cg, rng, 3, 48):  # none if 48 tokens cannot complete it
            assert validator.is_valid(json.loads(w.text)), f"walk {w.text!r} invalid for {json.dumps(schema)}"
    return 1


@pytest.mark.parametrize("keyword", sorted(KEYWORDS))
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(data=st.data())
def test_keyword_differential(keyword, data) -> None:
    schema = data.draw(KEYWORDS[keyword], label="schema")
    instances = data.draw(st.lists(value, min_size=3, max_size=6), label="values")
    try:
        instances += data.draw(st.lists(hjs.from_schema(schema), max_size=3), label="valid")
    except Exception:  # noqa: BLE001 - hypothesis-jsonschema cannot build every schema
        pass
    _check(schema, instances, np.random.default_rng(len(json.dumps(schema))))


@pytest.mark.parametrize("schema,yes,no", [
    ({"not": {"type": "integer"}}, ["a", 1.5, None, [1], {"a": 1}], [1, -3]),
    ({"type": "integer", "not": {"multipleOf": 3}}, [1, 7], [3, -9, 0]),
    ({"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 2}, "else": {"maximum": 5}}, [12, 5], [11, 7]),
    ({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "maxContains": 2},
     [[5], [5, 6], [1, 5, 1]], [[], [1], [5, 6, 7]]),
    ({"type": "object", "propertyNames": {"maxLength": 3}}, [{}, {"abc": 1}], [{"abcd": 1}]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5, "x"], [2, 3]),
    ({"type": "string", "pattern": "^a", "maxLength": 3, "minLength": 2}, ["ab", "abc"], ["a", "abcd", "ba"]),
    ({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]}, ["ab", "ba"], ["a", "b"]),
    ({"type": "number", "multipleOf": 1.5}, [0, 3, 4.5, -1.5], [1, 2.25, 0.5]),
    ({"type": "number", "multipleOf": 0.01}, [0, 7, 0.07, 19.99, -0.5], [0.001, 0.075]),
    ({"type": "number", "not": {"multipleOf": 0.01}}, [0.001, 0.075], [0, 0.07, 0.14]),
    ({"type": "object", "properties": {"ab": {"type": "integer"}}, "patternProperties": {"^a": {"minimum": 2}}},
     [{"ab": 2}, {"ax": 5}], [{"ab": 1}, {"ab": "x"}, {"ax": 1}]),
    ({"$id": "https://x.test/root", "$defs": {"i": {"$anchor": "int", "type": "integer"}},
      "items": {"$ref": "#int"}, "type": "array"}, [[1, 2]], [["a"]]),
])
def test_examples(schema, yes, no) -> None:
    cg = compile_grammar(compile_schema(schema, **OPTIONS).grammar, VOCAB, backend="dfa")
    for x in yes:
        assert cg.accepts(canonicalize(schema, x).encode()), x
    for x in no:
        assert not cg.accepts(canonicalize(schema, x).encode()), x


def test_remote_refs_come_from_the_registry_only() -> None:
    schema = {"$ref": "http://example.test/int.json"}
    with pytest.raises(SchemaError) as ei:
        compile_schema(schema)
    assert ei.value.pointer == "/$ref"
    reg = {"http://example.test/int.json": {"type": "integer"}}
    cg = compile_grammar(compile_schema(schema, registry=reg).grammar, VOCAB, backend="dfa")
    assert cg.accepts(b"12") and not cg.accepts(b'"a"')


def test_annotations_never_block_merges() -> None:
    schema = {"allOf": [{"type": "string", "x-html": "a", "title": "A"},
                        {"maxLength": 2, "x-html": "b", "title": "B", "unknownKeyword": 1}]}
    cg = compile_grammar(compile_schema(schema).grammar, VOCAB, backend="dfa")
    assert cg.accepts(b'"ab"') and not cg.accepts(b'"abc"')


@pytest.mark.parametrize("mode,accepts_bad_email", [("assert", False), ("annotate", True)])
def test_format_mode(mode, accepts_bad_email) -> None:
    cg = compile_grammar(compile_schema({"type": "string", "format": "email"}, format_mode=mode).grammar,
                         VOCAB, backend="dfa")
    assert cg.accepts(b'"a@b.co"')
    assert cg.accepts(b'"2962"') is accepts_bad_email
