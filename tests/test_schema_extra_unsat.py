"""extra_properties="allow" (spec-faithful undeclared members), provably unsatisfiable
schemas (UnsatisfiableSchemaError), and the one-copy separated-list automaton."""

from __future__ import annotations

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import SchemaError, UnsatisfiableSchemaError
from decoding.frontends.jsonschema import compile_schema

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
       "required": ["a"]}


def _dfa(schema, **kw):
    return compile_dfa(compile_schema(schema, **kw).grammar)


@pytest.mark.parametrize("text", ['{"a":1}', '{"a":1,"x":[1,{"c":null}]}', '{"a":1,"b":"s","x":1,"y":{}}',
                                  '{"a":1,"ab":true}', '{"a":1,"":0}'])
def test_allow_accepts_undeclared(text):
    assert _dfa(OBJ, extra_properties="allow").accepts(text.encode())


@pytest.mark.parametrize("text", ['{"a":1,"a":2}', '{"a":1,"x":1,"b":"s"}', '{"a":1,"b":1}',
                                  '{"a":1,"\\u0061":2}', '{"a":1,"b":"s","b":"t"}', '{"x":1}'])
def test_allow_rejects_duplicates_and_invalid(text):
    assert not _dfa(OBJ, extra_properties="allow").accepts(text.encode())


@pytest.mark.parametrize("text", ['{"a":1,"x":1}', '{"a":1,"b":"s","y":null}'])
def test_omit_is_default(text):
    assert not _dfa(OBJ).accepts(text.encode())
    assert _dfa(OBJ, extra_properties="allow").accepts(text.encode())


def test_allow_keeps_additional_false_and_bad_option():
    s = dict(OBJ, additionalProperties=False)
    assert not _dfa(s, extra_properties="allow").accepts(b'{"a":1,"x":1}')
    with pytest.raises(SchemaError, match="extra_properties"):
        compile_schema(OBJ, extra_properties="some")


def test_allow_oneof_required_discrimination_stays_exact():
    # branch 0 cannot be told apart from branch 1 by declarations once undeclared keys may be
    # emitted: compiled by difference (issue 15), an instance of both branches is refused
    s = {"oneOf": [{"type": "object", "properties": {"p": {"type": "integer"}}},
                   {"type": "object", "properties": {"p": {"type": "integer"}, "q": {"type": "integer"}},
                    "required": ["q"]}]}
    d = _dfa(s, extra_properties="allow")
    assert d.accepts(b'{"p":1}') and d.accepts(b'{"q":"x"}')
    assert not d.accepts(b'{"p":1,"q":2}') and not d.accepts(b'{"q":2}')


UNSAT = {"type": "object", "required": ["d"], "properties": {"d": {
    "type": "object", "required": ["r", "s"], "properties": {"r": {}, "s": {}},
    "oneOf": [{"required": ["r"]}, {"required": ["s"]}]}}}


def test_unsatisfiable_oneof_names_pointer():
    with pytest.raises(UnsatisfiableSchemaError) as e:
        compile_schema(UNSAT)
    assert e.value.pointer == "/properties/d" and e.value.keyword == "oneOf"


@pytest.mark.parametrize("schema", [False, {"enum": []}, {"allOf": [{"type": "string"}, False]},
                                    {"anyOf": [False, {"enum": []}]}])
def test_unsatisfiable_simple(schema):
    with pytest.raises(UnsatisfiableSchemaError):
        compile_schema(schema)


def test_optional_unsatisfiable_member_is_just_absent():
    s = {"type": "object", "properties": {"d": UNSAT["properties"]["d"], "e": {"type": "null"}}}
    d = _dfa(s)
    assert d.accepts(b'{"e":null}') and d.accepts(b"{}") and not d.accepts(b'{"d":{"r":1,"s":2}}')


def test_not_proven_is_plain_schema_error():
    # empty only under the generation policy (no undeclared members in omit mode)
    s = {"type": "object", "properties": {"a": {"type": "null"}}, "minProperties": 2}
    with pytest.raises(SchemaError) as e:
        compile_schema(s)
    assert not isinstance(e.value, UnsatisfiableSchemaError)


@pytest.mark.parametrize("text,ok", [("[]", True), ("[[],{}]", True), ('[{"a":[1,2]},3]', True),
                                     ("[[[[]]]]", False), ("[1,]", False), ('{"a":1,}', False),
                                     ('{"a":{"b":{"c":{}}}}', False), ('{"a":{"b":{"c":1}}}', True)])
def test_free_form_lists_one_copy(text, ok):
    assert _dfa(True, free_depth=3).accepts(text.encode()) is ok
