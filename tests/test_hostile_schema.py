"""Hostile JSON Schemas (issue 19): every one is a located DecodingError, fast, or compiles to
a grammar whose outputs jsonschema accepts.

- malformed schemas fail the metaschema check first: a SchemaError whose pointer is the
  offending value (it resolves in the schema) and whose keyword is the keyword it belongs to;
- resource limits are LimitErrors naming the pointer, the limit and the value, raised before
  any automaton is built (``{"type": "string", "maxLength": 2000}`` in well under 50 ms);
- nesting is a LimitError (``max_nesting``), never a RecursionError;
- number bounds compare like jsonschema: against the double a bound parses to.
"""

from __future__ import annotations

import json
import time

import jsonpointer
import jsonschema
import numpy as np
import pytest

from decoding.backends.select import compile_grammar
from decoding.errors import DecodingError, LimitError, SchemaError, UnsatisfiableSchemaError
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.sources import build_grammar
from decoding.limits import DEFAULT_LIMITS
from decoding.testing import random_walk
from decoding.vocab import Vocab

VOCAB = Vocab.from_bytes([b"", *[bytes([c]) for c in range(32, 127)]], eog_ids=[0])


def _nested(key: str, depth: int) -> dict:
    s: dict = {}
    for _ in range(depth):
        s = {key: s}
    return s


def _resolves(schema, ptr: str) -> bool:
    try:
        jsonpointer.resolve_pointer(schema, ptr)
    except jsonpointer.JsonPointerException:
        return False
    return True


# (schema, error class, pointer, keyword or None): the issue's examples first
METASCHEMA = [
    ({"patternProperties": [1]}, "/patternProperties", "patternProperties"),
    ({"minProperties": "x"}, "/minProperties", "minProperties"),
    ({"maxItems": []}, "/maxItems", "maxItems"),
    ({"minLength": None}, "/minLength", "minLength"),
    ({"required": [None]}, "/required/0", "required"),
    ({"dependentSchemas": "x"}, "/dependentSchemas", "dependentSchemas"),
    ({"allOf": [{"minLength": 11}, {"minLength": None}]}, "/allOf/1/minLength", "minLength"),
    ({"required": ["a", 10 ** 40]}, "/required/1", "required"),
    ({"type": "array", "uniqueItems": 5}, "/uniqueItems", "uniqueItems"),
    ({"type": "number", "maximum": 3, "exclusiveMaximum": True}, "/exclusiveMaximum", "exclusiveMaximum"),
    ({"type": "strin"}, "/type", "type"),
    ({"type": ["string", "nope"]}, "/type/1", "type"),
    ({"anyOf": [{"type": "string"}, {"type": 3}]}, "/anyOf/1/type", "type"),
    ({"properties": {"a": {"properties": {"b": {"minLength": -1}}}}}, "/properties/a/properties/b/minLength",
     "minLength"),
    ({"items": {"maxItems": 1.5}}, "/items/maxItems", "maxItems"),
    ({"$defs": {"x": {"enum": 3}}}, "/$defs/x/enum", "enum"),
    ({"$schema": 5}, "/$schema", "$schema"),
    ({"multipleOf": 0}, "/multipleOf", "multipleOf"),
    ({"pattern": 5}, "/pattern", "pattern"),
    ({"properties": []}, "/properties", "properties"),
]


@pytest.mark.parametrize("schema,pointer,keyword", METASCHEMA, ids=[json.dumps(m[0])[:40] for m in METASCHEMA])
def test_metaschema_errors_are_located(schema, pointer, keyword):
    for lenient in (False, True):  # a malformed schema is not 'unsupported': lenient keeps it an error
        with pytest.raises(SchemaError) as ei:
            compile_schema(schema, lenient=lenient)
        e = ei.value
        assert type(e) is SchemaError
        assert (e.pointer, e.keyword) == (pointer, keyword), str(e)
        assert _resolves(schema, e.pointer)
        assert "metaschema" in str(e)


def test_unknown_type_names_the_types():
    with pytest.raises(SchemaError, match="unknown type 'strin'.*string"):
        compile_schema({"type": "strin"})


def test_declared_draft_decides_the_metaschema():
    # draft-04: boolean exclusiveMaximum is valid and enforced
    s = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "maximum": 3,
         "exclusiveMaximum": True}
    cg = compile_grammar(compile_schema(s).grammar, VOCAB)
    assert cg.accepts(b"2") and not cg.accepts(b"3")
    # draft-04 metaschema: enum items unique
    with pytest.raises(SchemaError) as ei:
        compile_schema({"$schema": "http://json-schema.org/draft-04/schema#", "enum": [1, 1]})
    assert ei.value.pointer == "/enum"


def test_bad_regexes_are_located():
    with pytest.raises(SchemaError) as ei:
        compile_schema({"patternProperties": {"x{99999999999}": {}}})
    assert ei.value.pointer == "/patternProperties/x{99999999999}"
    assert _resolves({"patternProperties": {"x{99999999999}": {}}}, ei.value.pointer)
    deep = "(" * 3000 + "a" + ")" * 3000
    with pytest.raises(SchemaError) as ei:
        compile_schema({"type": "string", "pattern": deep})
    assert ei.value.pointer == "/pattern"
    # a large but legal count: counted (decoding.backends.counted), exact
    cg = compile_grammar(compile_schema({"type": "string", "pattern": "^x{999999}$"}).grammar, VOCAB)
    assert cg.backend == "counted" and cg.accepts(b'"' + b"x" * 999999 + b'"')
    assert not cg.accepts(b'"' + b"x" * 999998 + b'"')


def test_ref_to_false_is_unsatisfiable_not_recursion():
    s = {"$ref": "#/$defs/a", "$defs": {"a": False}}
    with pytest.raises(UnsatisfiableSchemaError) as ei:
        compile_schema(s)
    assert ei.value.pointer == "/$defs/a" and "recursion" not in str(ei.value)
    # as a branch it is a valid 'never' branch: the other branch is the language
    s = {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "boolean"}], "$defs": {"a": False}}
    cg = compile_grammar(compile_schema(s).grammar, VOCAB)
    assert cg.accepts(b"true") and not cg.accepts(b"null")
    # an optional property whose schema is a ref to false is never emitted
    s = {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"type": "null"}},
         "$defs": {"n": False}}
    cg = compile_grammar(compile_schema(s).grammar, VOCAB)
    assert cg.accepts(b'{"b":null}') and not cg.accepts(b'{"a":null}')


def _warm() -> None:
    compile_schema({"type": "string", "maxLength": 3})  # imports and metaschema caches


LIMITS = [  # items of any value hold a Ref: not a unit the counted back-end counts (yet)
    ({"type": "array", "minItems": 10 ** 9}, "/minItems"),
    ({"type": "array", "maxItems": 10 ** 9}, "/maxItems"),
    ({"enum": ["x" * 1000 + str(i) for i in range(400)]}, "/enum"),
    ({"type": "integer", "maximum": 10 ** 500}, "/maximum"),
]

# large bounds the counted back-end (decoding.backends.counted) compiles: (schema, accepted, rejected)
COUNTED = [
    ({"type": "string", "maxLength": 2000}, ['"' + "a" * 2000 + '"'], ['"' + "a" * 2001 + '"']),
    ({"maxLength": 1e20}, ['"abc"'], []),
    ({"type": "string", "minLength": 100000}, ['"' + "a" * 100000 + '"'], ['"' + "a" * 99999 + '"']),
    ({"type": "array", "items": {"type": "boolean"}, "maxItems": 10 ** 9}, ["[]", "[true,false]"], ["[true,]"]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 10 ** 9}, [], ["[]", "[1,2]"]),
    ({"properties": {"a": {"type": "array", "items": {"type": "integer"}, "maxItems": 10 ** 7}}},
     ['{"a":[1,2]}', "{}"], ['{"a":[1,]}']),
    ({"allOf": [{"type": "string"}, {"maxLength": 5000}]}, ['"' + "x" * 5000 + '"'], ['"' + "x" * 5001 + '"']),
]


@pytest.mark.parametrize("schema,pointer", LIMITS, ids=[json.dumps(x[0])[:40] for x in LIMITS])
def test_limits_are_located_and_fast(schema, pointer):
    _warm()
    t0 = time.thread_time()
    with pytest.raises(LimitError) as ei:
        compile_schema(schema)
    ms = (time.thread_time() - t0) * 1000
    e = ei.value
    assert e.pointer == pointer and _resolves(schema, e.pointer), str(e)
    assert e.limit and f"limit {e.limit}=" in str(e) and e.value is not None
    assert ms < 200, f"{ms:.1f} ms"  # CPU time of this thread: a few ms in practice


@pytest.mark.parametrize("schema, good, bad", COUNTED, ids=[json.dumps(x[0])[:40] for x in COUNTED])
def test_large_bounds_compile_counted(schema, good, bad):
    """Once refused by size; now counted, not unrolled: exact at the bounds."""
    cg = compile_grammar(compile_schema(schema).grammar, VOCAB)
    assert cg.backend == "counted"
    assert all(cg.accepts(x.encode()) for x in good) and not any(cg.accepts(x.encode()) for x in bad)


def test_nesting_is_a_located_limit():
    deep = _nested("items", 10_000)
    with pytest.raises(LimitError) as ei:
        compile_schema(deep)
    e = ei.value
    assert e.limit == "max_nesting" and _resolves(deep, e.pointer)
    assert e.pointer.count("/items") == DEFAULT_LIMITS.max_nesting
    # the same as text: json.loads would recurse; the place is a line and column
    text = '{"items":' * 10_000 + "{}" + "}" * 10_000
    for entry in (lambda: compile_schema(text), lambda: build_grammar(text, "json-schema", name="deep.json")):
        with pytest.raises(LimitError, match=r"line 1 column \d+.*max_nesting"):
            entry()
    # properties / anyOf alternate: counted the same way
    s: dict = {}
    for _ in range(5000):
        s = {"anyOf": [{"properties": {"a": s}}]}
    with pytest.raises(LimitError) as ei:
        compile_schema(s)
    assert _resolves(s, ei.value.pointer)


def test_moderate_nesting_compiles():
    compile_schema(_nested("items", 60))


def test_text_errors_are_located():
    with pytest.raises(SchemaError, match="line 1 column"):
        build_grammar('{"type": ', "json-schema")
    with pytest.raises(SchemaError, match="not usable JSON"):  # more than 4300 digits
        build_grammar('{"maximum": ' + "1" * 5000 + "}", "json-schema")
    with pytest.raises(SchemaError):
        compile_schema("[" * 10)


def test_non_json_python_values():
    for s, ptr in (({"minimum": float("nan")}, "/minimum"), ({"const": {1, 2}}, "/const"),
                   ({"properties": {1: {}}}, "/properties")):
        with pytest.raises(SchemaError) as ei:
            compile_schema(s)
        assert ei.value.pointer == ptr


def _outputs(schema, n=30, seed=0):
    cg = compile_grammar(compile_schema(schema).grammar, VOCAB)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        w = random_walk(cg, rng, max_steps=2000)
        if w.finished:
            out.append(w.text.decode())
    return cg, out


@pytest.mark.parametrize("schema", [
    {"minimum": 1e308, "maximum": 1e308},
    {"type": "number", "minimum": 1e308},
    {"type": "number", "maximum": -1e308, "minimum": -1.7976931348623157e308},
    {"type": "number", "minimum": 2 ** 60 + 100, "maximum": 2 ** 60 + 200},
    {"type": "number", "exclusiveMinimum": 9007199254740993, "maximum": 9007199254741000},
    {"type": "number", "exclusiveMaximum": 0.1, "minimum": 0.09999999999999999},
    {"type": "integer", "exclusiveMinimum": 1e16, "maximum": 1.0000000000000004e16},
], ids=lambda s: json.dumps(s)[:50])
def test_number_bounds_compare_like_jsonschema(schema):
    validator = jsonschema.Draft202012Validator(schema)
    cg, outs = _outputs(schema)
    assert outs
    for text in outs:
        assert validator.is_valid(json.loads(text)), text


def test_1e308_bounds_generate_the_double():
    cg = compile_grammar(compile_schema({"minimum": 1e308, "maximum": 1e308}).grammar, VOCAB)
    assert cg.accepts(str(int(1e308)).encode())
    assert not cg.accepts(b"1" + b"0" * 308)  # 10**308 < the double 1e308
    cg = compile_grammar(compile_schema({"type": "number", "minimum": 2 ** 60 + 100,
                                         "maximum": 2 ** 60 + 200}).grammar, VOCAB)
    assert cg.accepts(b"1152921504606847100")  # bounds of 19 digits are rounded inward to 17
    assert not cg.accepts(b"1152921504606847100.5")  # parses to 2**60 + 256 > maximum


BAD = [m[0] for m in METASCHEMA] + [x[0] for x in LIMITS] + [
    {"$ref": "#/$defs/a", "$defs": {"a": False}},
    {"patternProperties": {"x{99999999999}": {}}},
    {"properties": {"a": {"$ref": "#/$defs/missing"}}},
    {"type": "object", "required": ["a"], "properties": {"a": False}},
    {"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]},
    {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]},
    {"properties": {"t": {"type": "array", "uniqueItems": True}}},
    {"type": "string", "pattern": "(?=a)b"},
    {"required": ["a"], "additionalProperties": {"type": "string", "maxLength": 4000}},
    {"$defs": {"s": {"type": "string", "maxLength": 3000}}, "properties": {"x": {"$ref": "#/$defs/s"}}},
    _nested("items", 300),
    _nested("not", 300),
]


def test_every_error_pointer_resolves():
    """Over every bad schema here: a DecodingError (never another exception) whose pointer
    (SchemaError, LimitError) resolves in the schema."""
    for s in BAD:
        try:
            compile_schema(s)
        except (SchemaError, LimitError) as e:
            assert e.pointer is not None and _resolves(s, e.pointer), (json.dumps(s)[:80], str(e))
        except DecodingError:
            pass


def test_lone_surrogates_are_located():
    from decoding.compiler import Compiler

    comp = Compiler(VOCAB, cache=False)
    with pytest.raises(SchemaError, match="lone surrogate"):
        comp.compile_json_schema("\ud800")  # text: not Unicode
    for s, ptr in (({"title": "\ud800"}, "/title"), ({"const": "a\udc00"}, "/const"),
                   ({"properties": {"\udc00": {}}}, "/properties")):
        with pytest.raises(SchemaError) as ei:
            comp.compile_json_schema(s)
        assert ei.value.pointer == ptr and _resolves(s, ptr)


def _chain(n: int, **extra) -> dict:
    d = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}", **extra} for i in range(n)}
    d[f"d{n}"] = {"type": "string"}
    return {"$ref": "#/$defs/d0", "$defs": d}


def test_reference_chains_and_cycles():
    # a chain of plain references is one rule, not a chain of rules for the back-end
    g = compile_schema(_chain(200)).grammar
    assert len(g.rules) <= 2
    assert compile_grammar(g, VOCAB).accepts(b'"x"')
    for s in (_chain(3000), _chain(3000, minLength=1)):  # deeper than max_nesting: located, fast
        t0 = time.thread_time()
        with pytest.raises(LimitError) as ei:
            compile_schema(s)
        assert ei.value.limit == "max_nesting" and _resolves(s, ei.value.pointer)
        assert time.thread_time() - t0 < 5
    # a cycle with no way out has no finite instance: located at the cycle, not 'recursion'
    for s, ptr in (({"$ref": "#"}, ""),
                   ({"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"],
                     "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}, "/$defs/a")):
        with pytest.raises(SchemaError) as ei:
            compile_schema(s)
        assert ei.value.pointer == ptr and ei.value.keyword == "$ref" and "recursion" not in str(ei.value)
    # recursion that does reach instances still compiles
    cg = compile_grammar(compile_schema({"type": "array", "items": {"$ref": "#"}}).grammar, VOCAB)
    assert cg.accepts(b"[[],[[]]]")


def test_metaschema_formats_except_regex_are_asserted():
    with pytest.raises(SchemaError) as ei:
        compile_schema({"$schema": "["})
    assert ei.value.pointer == "/$schema" and "uri" in str(ei.value)


def test_open_ended_pattern_repetitions_are_cut():
    """Search mode: ``[a-z]{0,5000}`` matches every string (fast, not a 5000-state counter);
    ``x{3,5000}`` unanchored at the end means 'xxx' somewhere after the anchor."""
    for pat, yes, no in (("[a-z]{0,5000}", [b'""', b'"A1"'], []),
                         ("^x{3,5000}", [b'"xxx"', b'"xxxxA"'], [b'"xx"', b'"Axxx"'])):
        t0 = time.thread_time()
        cg = compile_grammar(compile_schema({"type": "string", "pattern": pat}).grammar, VOCAB)
        assert time.thread_time() - t0 < 5
        assert all(cg.accepts(x) for x in yes) and not any(cg.accepts(x) for x in no)


def test_one_of_generation_is_checked_against_the_original_branches():
    # branch 1 holds for every object: only objects failing branch 0 are valid; compiled by
    # difference (issue 15), never an output matching both
    cg = compile_grammar(compile_schema({"type": "object", "oneOf": [{"required": ["foo", "bar"]},
                                                                     {"required": []}]}).grammar, VOCAB)
    assert cg.accepts(b'{}') and cg.accepts(b'{"foo":1}')
    assert not cg.accepts(b'{"foo":1,"bar":2}') and not cg.accepts(b'{"bar":2,"foo":1}')
    s = {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
    validator = jsonschema.Draft202012Validator(s)
    cg, outs = _outputs(s)
    assert outs and all(validator.is_valid(json.loads(t)) for t in outs)


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "number"}, {"minLength": 9}]},
    {"oneOf": [{"type": "number"}, {}], "minLength": 9},
    {"oneOf": [{"type": "number"}, {"maxLength": 3}]},
    {"oneOf": [{"type": "integer"}, {"pattern": "^a"}]},
    {"oneOf": [{"type": "string"}, {"minimum": 3}]},
    {"oneOf": [{"type": "string"}, {"minItems": 2}]},
    {"oneOf": [{"type": "null"}, {"required": ["a"]}]},
    {"oneOf": [{"type": ["object", "number"], "properties": {"k": {"const": 1}}, "required": ["k"]},
               {"properties": {"k": {"const": 2}}, "required": ["k"]}]},
], ids=lambda s: json.dumps(s)[:60])
def test_one_of_branch_of_type_specific_keywords_accepts_the_other_types(schema):
    # {"minLength": 9} holds for every number: a number generated from the other branch
    # matches both, so oneOf fails; refused at /oneOf or every output is valid
    validator = jsonschema.Draft202012Validator(schema)
    try:
        cg, outs = _outputs(schema, n=40)
    except SchemaError as e:
        assert e.keyword == "oneOf" and _resolves(schema, e.pointer)
        return
    assert all(validator.is_valid(json.loads(t)) for t in outs), outs


def test_one_of_type_specific_branch_still_discriminated_among_objects():
    s = {"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                   {"properties": {"k": {"const": 2}}, "required": ["k"]}]}
    validator = jsonschema.Draft202012Validator(s)
    cg, outs = _outputs(s, n=40)
    assert outs and all(validator.is_valid(json.loads(t)) for t in outs)


@pytest.mark.parametrize("schema", [
    {"properties": {"timeZone": {"pattern": "UTC|(Africa/[A-Za-z]+)|(America/[A-Za-z]+)"}}},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "UTC|(Africa/[A-Za-z]+)"},
                                      "b": {"type": "array", "items": {"maxLength": 40}}}},
], ids=lambda s: json.dumps(s)[:60])
def test_compile_deadline_is_located_in_the_schema(schema, monkeypatch):
    # a zero deadline fails at the first check whatever the machine's speed (0.01 s stopped
    # failing once the automaton work moved to C: CI, 2026-12-01); the explicit DFA back-end,
    # whose determinisation at compile time is what the deadline bounds
    import dataclasses

    import decoding.backends.select as select
    from decoding.compiler import Compiler
    monkeypatch.setattr(select, "DEFAULT_LIMITS",
                        dataclasses.replace(DEFAULT_LIMITS, max_compile_seconds=0.0))
    with pytest.raises(LimitError) as ei:
        Compiler(VOCAB, cache=None, backend="dfa").compile_json_schema(schema)
    assert ei.value.pointer is not None and _resolves(schema, ei.value.pointer)
    assert ei.value.limit == "max_compile_seconds" and "max_compile_seconds" in str(ei.value)


# fuzz findings (schema door, 2026-12-01, seed 43): a chain of 'not' cost one complement per
# level (80 levels: a 10 s hang) and an odd chain ended in an unlocated "accepts no string";
# multipleOf 0.5 above 10**15 generated nothing (decimal multiples keep 15 integer digits,
# integer multiples need not)
@pytest.mark.parametrize("n", [2, 3, 80, 81])
def test_not_chains_are_fast_and_located(n):
    from decoding import compile_json_schema
    inner: dict = {}
    for _ in range(n):
        inner = {"not": inner}
    schema = {"type": "object", "properties": {"city": inner}, "required": ["city"]}
    t = time.thread_time()
    try:
        cg = compile_json_schema(schema, VOCAB)
        err = None
    except DecodingError as e:
        err = e
    assert time.thread_time() - t < 5
    if n % 2:
        assert isinstance(err, UnsatisfiableSchemaError) and err.keyword == "not", err
        assert _resolves(schema, err.pointer) and err.pointer.startswith("/properties/city"), err.pointer
    else:
        assert err is None, err
        for text in _outputs(schema, n=5, seed=n)[1]:
            jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize("schema", [
    {"type": "number", "minimum": 9223372036854775808, "multipleOf": 0.5},
    {"type": "number", "minimum": 1e15, "maximum": 1e16, "multipleOf": 1.5},
])
def test_multiple_of_a_fraction_above_15_integer_digits(schema):
    from decoding.frontends.json_validator import validator
    _, out = _outputs(schema, n=20)
    assert out
    v = validator(schema)
    for text in out:
        assert v.is_valid(json.loads(text)), text


def test_an_empty_generated_language_is_a_schema_error_at_the_root():
    from decoding import compile_json_schema
    schema = {"type": "number", "minimum": 1e300, "maximum": 1e300, "multipleOf": 0.5,
              "not": {"type": "integer"}}
    with pytest.raises(SchemaError) as ei:
        compile_json_schema(schema, VOCAB)
    assert ei.value.pointer == "" and _resolves(schema, ei.value.pointer)


# fuzz finding (schema door, 2026-12-01, seed 43): draft-04's metaschema does not type
# dependentSchemas, which the compiler still reads
def test_dependent_schemas_of_the_wrong_type_under_draft_04_is_located():
    from decoding import compile_json_schema
    schema = {"$schema": "http://json-schema.org/draft-04/schema#",
              "items": {"properties": {"order": {"dependentSchemas": "x{9"}}}}
    with pytest.raises(SchemaError) as ei:
        compile_json_schema(schema, VOCAB)
    assert ei.value.keyword == "dependentSchemas" and _resolves(schema, ei.value.pointer), ei.value
