"""Per-keyword accept/reject matrices for the JSON Schema front-end (byte-level DFA)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import jsonschema
import pytest

from decoding.backends.automaton import compile_dfa
from decoding.frontends.jsonschema import canonicalize, compile_schema

CASES: list[tuple[dict, list[str], list[str]]] = [
    ({"type": "string"}, ['""', '"abc"', '"北京"', '"a\\"b"', '"\\n"', '"\\u0001"'],
     ["abc", '"a"b"', '"\n"', '"\\u0041"', '"\\/"', ' "a"']),
    ({"type": "integer"}, ["0", "-1", "42", "12345678901234567890"], ["-0", "01", "1.0", "1e2", "+1", ""]),
    ({"type": "number"}, ["0", "-1.5", "2.25", "1e-05", "1E+10"], ["01", ".5", "1.", "NaN", "-"]),
    ({"type": "boolean"}, ["true", "false"], ["True", "1", "null"]),
    ({"type": "null"}, ["null"], ["None", "nul", '"null"']),
    ({"type": ["string", "null"]}, ['"x"', "null"], ["1", "true"]),
    ({"enum": ["数码", "服饰", 1, None, {"a": 1}]}, ['"数码"', '"服饰"', "1", "null", '{"a":1}'],
     ['"食品"', "1.0", '{"a": 1}', "true"]),
    ({"const": 3.0}, ["3"], ["3.0", "4"]),
    ({"type": "string", "enum": ["a", 1]}, ['"a"'], ["1"]),
    ({"type": "integer", "minimum": -5, "maximum": 120}, ["-5", "0", "9", "99", "100", "120"],
     ["-6", "121", "999", "-50", "1000"]),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, ["1", "9"], ["0", "10", "-1"]),
    ({"type": "integer", "minimum": 1000}, ["1000", "9999", "10000", "123456"], ["999", "0", "-1000"]),
    ({"type": "integer", "maximum": -10}, ["-10", "-11", "-1000"], ["-9", "0", "10"]),
    ({"type": "number", "minimum": 0, "maximum": 1}, ["0", "1", "0.5", "0.001"], ["1.5", "-0.5", "2", "1.01"]),
    ({"type": "number", "exclusiveMinimum": 0}, ["0.5", "1", "100.25"], ["0", "-0.5", "-1"]),
    ({"type": "number", "minimum": -2.5, "maximum": -1}, ["-2", "-1", "-1.5", "-2.5", "-2.25"],
     ["0", "-3", "-0.5", "-2.75", "-2.51"]),
    # exact fractional digits next to a non-integral bound
    ({"type": "number", "minimum": 1.1}, ["1.1", "1.15", "1.2", "1.5", "2", "1.100001"], ["1.09", "1", "1.0999"]),
    ({"type": "number", "exclusiveMinimum": 1.1}, ["1.11", "1.2", "1.1000000000000003"],
     ["1.1", "1.1000000000000000001", "1.05"]),  # the long one parses to the float 1.1
    ({"type": "number", "maximum": 3.75, "minimum": 3.125}, ["3.125", "3.5", "3.75", "3.7", "3.13"],
     ["3.76", "3.12", "3.8", "4", "3"]),
    ({"type": "number", "exclusiveMaximum": 0.5, "exclusiveMinimum": -0.25}, ["0", "0.49", "-0.2", "-0.249"],
     ["0.5", "-0.25", "0.51", "-0.3"]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"北京市"'], ['"a"', '"abcd"', '""']),
    ({"type": "string", "pattern": "^[A-Z]{3}$"}, ['"PEK"', '"SHA"'], ['"PE"', '"pek"', '"PEKX"']),
    ({"type": "string", "pattern": "ab"}, ['"ab"', '"xxabyy"'], ['"a"', '"ba"']),
    ({"type": "string", "pattern": "^\\d+(\\.\\d{1,2})?$"}, ['"12"', '"1.25"'], ['"1.234"', '"١٢"', '"."']),
    ({"type": "string", "pattern": "^[^a-c]+$"}, ['"xyz"', '"北"'], ['"abc"', '"xa"']),
    ({"type": "string", "pattern": "^(foo|bar)-\\w*$"}, ['"foo-"', '"bar-x_1"'], ['"baz-"', '"foo-!"']),
    ({"type": "string", "pattern": "^[0-9]+$", "maxLength": 3}, ['"1"', '"123"'], ['"1234"', '""']),
    ({"type": "string", "format": "date"}, ['"2024-02-29"', '"2023-12-31"'],
     ['"2023-02-29"', '"2024-13-01"', '"明天"', '"2024-04-31"', '"0000-01-01"']),
    ({"type": "string", "format": "time"}, ['"10:30:00Z"', '"23:59:59.5+08:00"'], ['"24:00:00Z"', '"10:30"']),
    ({"type": "string", "format": "date-time"}, ['"2024-06-15T10:30:00Z"'], ['"2024-06-15 10:30:00Z"', '"2024-06-15T10:30:00"']),
    ({"type": "string", "format": "duration"}, ['"P3DT4H"', '"PT1M"', '"P2W"'], ['"P"', '"PT"', '"P1DT"']),
    ({"type": "string", "format": "uuid"}, ['"123e4567-e89b-12d3-a456-426614174000"'], ['"123e4567e89b12d3a456426614174000"']),
    ({"type": "string", "format": "ipv4"}, ['"192.168.0.1"', '"0.0.0.0"'], ['"256.1.1.1"', '"01.1.1.1"', '"1.1.1"']),
    ({"type": "string", "format": "ipv6"}, ['"::1"', '"2001:db8::1"', '"1:2:3:4:5:6:7:8"'], ['":::1"', '"1:2:3:4:5:6:7:8:9"', '"g::1"']),
    ({"type": "string", "format": "email"}, ['"a.b@example.com"'], ['"a@b"', '"@example.com"', '"a b@x.com"']),
    ({"type": "string", "format": "hostname"}, ['"example.com"', '"a-b.c"'], ['"-a.com"', '"a..b"']),
    ({"type": "string", "format": "uri"},
     ['"https://example.com/a?b=c#d"', '"urn:isbn:0451450523"', '"mailto:a@b.c"', '"file:///etc/hosts"',
      '"did:example:123"', '"http://"'],  # RFC 3986: the authority may be empty
     ['"example.com"', '"https://x/%zz"', '"http://a b"', '":x"', '"1http://a"']),
    ({"type": "array", "items": {"type": "integer"}}, ["[]", "[1]", "[1,2,3]"], ["[1,]", "[,1]", '["a"]', "[1 ,2]"]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}, ["[1]", "[1,2]"], ["[]", "[1,2,3]"]),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     ['[]', '["a"]', '["a",1]'], ['[1]', '["a",1,2]', '["a","b"]']),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "null"},
      "$schema": "http://json-schema.org/draft-04/schema#"}, ['["a"]', '["a",null,null]'], ['["a",1]', "[null]"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]},
     ['{"b":"x"}', '{"a":1,"b":"x"}'], ['{}', '{"b":"x","a":1}', '{"a":1}', '{"b":"x","c":1}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}},
     ['{}', '{"a":1}', '{"b":1}', '{"c":1}', '{"a":1,"c":2}', '{"a":1,"b":2,"c":3}'],
     ['{,"b":1}', '{"a":1,}', '{"a":1"b":2}', '{"c":1,"a":1}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "minProperties": 1,
      "maxProperties": 1}, ['{"a":1}', '{"b":2}'], ['{}', '{"a":1,"b":2}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}},
     ['{}', '{"a":1}', '{"a":1,"x":true}', '{"x":true,"y":false}'], ['{"a":true}', '{"a":1,"a":true}', '{"x":1}']),
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
     ['{}', '{"x-a":1}', '{"x-a":1,"x-b":2}'], ['{"y":1}', '{"x-a":"s"}']),
    ({"type": "object", "properties": {"n": {"$ref": "#/$defs/pos"}}, "$defs": {"pos": {"type": "integer", "minimum": 1}}},
     ['{"n":1}', '{}'], ['{"n":0}']),
    ({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                         "required": ["v"]}}, "$ref": "#/$defs/node"},
     ['{"v":1}', '{"v":1,"next":{"v":2}}', '{"v":1,"next":{"v":2,"next":{"v":3}}}'], ['{"next":{"v":2}}']),
    ({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]}, ['"a"', "5"], ['"ab"', "null"]),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, ['"a"', "5"], ["true"]),
    ({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
                {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}]},
     ['{"kind":"a","x":1}', '{"kind":"b","y":"s"}'], ['{"kind":"a","y":"s"}', '{"kind":"c"}']),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     ['{"a":1,"b":"x"}'], ['{"a":1}', '{"b":"x"}']),
    ({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 5}]}, ["0", "5"], ["6", "-1"]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                {"properties": {"b": {"type": "integer"}}}]}, ['{"a":1}', "{}"], ['{"a":1,"b":2}', '{"b":2}']),
    ({"type": "string", "_format": "date", "x-note": 1}, ['"anything"'], ["1"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "uniqueItems": True},
     ['{"a":1}'], ['{"a":"x"}']),
    (True, ["1", '"x"', "[1,[2]]", '{"a":{"b":null}}', "null"], ["", "[1,", "{'a':1}"]),
    # a bare object schema allows any members; unevaluatedProperties acts as additionalProperties
    ({"type": "object"}, ["{}", '{"a":1}', '{"a":{"b":[1]},"c":"x"}'], ["[]", '{"a":}']),
    ({"type": "object", "unevaluatedProperties": False}, ["{}"], ['{"a":1}']),
    # property dependencies, compiled exactly in the property chain
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
      "dependentRequired": {"a": ["c"]}},
     ["{}", '{"b":1}', '{"c":1}', '{"a":1,"c":1}', '{"a":1,"b":2,"c":3}'], ['{"a":1}', '{"a":1,"b":2}']),
    ({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
      "dependentRequired": {"a": ["b"], "b": ["a"]}}, ["{}", '{"b":1,"a":2}'], ['{"a":2}', '{"b":1}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"},
      "dependentRequired": {"a": ["z"]}}, ["{}", '{"a":1,"z":"s"}', '{"y":"s"}'], ['{"a":1}', '{"a":1,"y":"s"}']),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "integer"}},
      "dependencies": {"a": {"required": ["b"]}, "c": ["a"]}},
     ["{}", '{"b":"x"}', '{"a":1,"b":"x"}', '{"a":1,"b":"x","c":2}'], ['{"a":1}', '{"c":2}', '{"b":"x","c":2}']),
    ({"type": "object", "properties": {"card": {"type": "string"}, "addr": {"type": "string"}},
      "dependentSchemas": {"card": {"properties": {"addr": {"maxLength": 2}}, "required": ["addr"]}}},
     ['{"card":"x","addr":"ab"}', '{"addr":"abcd"}', "{}"], ['{"card":"x","addr":"abc"}', '{"card":"x"}']),
    # minProperties met by one undeclared member
    ({"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
     ['{"x":"a"}', '{"x":"a","y":"b"}'], ["{}", '{"x":1}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2, "maxProperties": 2,
      "additionalProperties": True}, ['{"a":1,"x":null}'], ['{"a":1}', '{"x":1}', '{"a":1,"x":1,"y":2}']),
    # oneOf: a declared discriminator with disjoint values is required in the generated output
    ({"oneOf": [{"type": "object", "properties": {"t": {"enum": ["a"]}, "v": {"type": "string"}}},
                {"type": "object", "properties": {"t": {"enum": ["b", "c"]}, "v": {"type": "integer"}}}]},
     ['{"t":"a","v":"x"}', '{"t":"b","v":1}', '{"t":"a"}'], ["{}", '{"t":"c","v":"x"}', '{"v":"x"}']),
    ({"type": "object", "properties": {"shape": {"enum": ["sq", "ci"]}, "side": {"type": "number"},
                                       "r": {"type": "number"}}, "required": ["shape"],
      "oneOf": [{"properties": {"shape": {"enum": ["sq"]}}}, {"properties": {"shape": {"enum": ["ci"]}}}]},
     ['{"shape":"sq","side":5}', '{"shape":"ci","r":1}'], ['{"shape":"sq","side":"5"}', '{"shape":"x"}']),
    # oneOf over a bare object: a branch must not emit a key only the other requires
    ({"type": "object", "oneOf": [{"required": ["foo", "bar"]}, {"required": ["foo", "baz"]}]},
     ['{"foo":1,"bar":2}', '{"foo":1,"baz":3}'], ['{"foo":1,"bar":2,"baz":3}', '{"foo":1}']),
    # formats no validator asserts are annotations
    ({"type": "string", "format": "jsonpath"}, ['"$.a"', '""'], ["1"]),
    # patternProperties next to additionalProperties: pattern keys only; several pattern schemas
    ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     ["{}", '{"x-a":1}'], ['{"x-a":"s"}']),
    ({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 3}},
      "additionalProperties": False}, ['{"a":3}', '{"ab":4}', '{"b":5}'], ['{"ab":2}', '{"a":"x"}', '{"b":2}']),
]


@lru_cache(maxsize=None)
def _dfa(schema_json: str, whitespace: str = "compact"):
    return compile_dfa(compile_schema(json.loads(schema_json), whitespace=whitespace).grammar)


@pytest.mark.parametrize("schema,accept,reject", CASES, ids=[json.dumps(c[0])[:50] for c in CASES])
def test_accept_reject(schema, accept, reject):
    dfa = _dfa(json.dumps(schema))
    cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                              default=jsonschema.Draft202012Validator)
    for text in accept:
        assert dfa.accepts(text.encode()), f"should accept {text}"
        assert cls(schema).is_valid(json.loads(text)), f"test bug: {text} is not valid"
    for text in reject:
        assert not dfa.accepts(text.encode()), f"should reject {text}"


def test_flexible_whitespace_bounded():
    s = json.dumps({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})
    dfa = _dfa(s, "flexible")
    assert dfa.accepts(b'{ "a" : [ 1 , 2 ] }')
    assert dfa.accepts(b'{\n  "a": [1,2]\n}')
    assert dfa.accepts(b'{"a":[1,2]}')
    assert not dfa.accepts(b'{' + b' ' * 9 + b'"a":[]}')
    assert not dfa.accepts(b' {"a":[]}')
    assert not _dfa(s).accepts(b'{ "a":[]}')


def test_canonicalizer_orders_keys():
    s = {"type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string"}},
         "required": ["city", "date"]}
    text = canonicalize(s, {"date": "2024-01-01", "city": "北京市"})
    assert text == '{"city":"北京市","date":"2024-01-01"}'
    assert _dfa(json.dumps(s)).accepts(text.encode())
    assert canonicalize({"type": "number"}, 2.0) == "2"
    assert canonicalize({"enum": [{"b": 1, "a": 2}]}, {"a": 2, "b": 1}) == '{"b":1,"a":2}'


TOOL_DIR = Path(__file__).resolve().parent / "schemas"


@pytest.mark.parametrize("name", ["get_weather", "search_product", "book_flight", "send_email", "set_alarm"])
def test_tool_schemas_compile(name):
    schema = json.loads((TOOL_DIR / f"{name}.json").read_text())
    dfa = _dfa(json.dumps(schema))
    assert dfa.n_states > 1
    assert not dfa.accepts(b"{}") or not schema.get("required")


def test_tool_schema_examples():
    w = json.dumps(json.loads((TOOL_DIR / "get_weather.json").read_text()))
    assert _dfa(w).accepts('{"city":"北京市","date":"2024-06-15"}'.encode())
    assert not _dfa(w).accepts('{"city":"北京市","date":"明天"}'.encode())
    p = json.dumps(json.loads((TOOL_DIR / "search_product.json").read_text()))
    assert _dfa(p).accepts('{"query":"耳机","category":"数码","max_price":300}'.encode())
    assert _dfa(p).accepts('{"query":"耳机"}'.encode())
    assert not _dfa(p).accepts('{"query":"耳机","category":"玩具"}'.encode())


def test_number_bounds_exact_against_jsonschema():
    """Random bounds (inclusive/exclusive, integral/fractional, empty ranges) and random
    spellings: the automaton accepts a canonical spelling iff jsonschema accepts the parsed
    value (spellings that round onto a bound are only ever rejected)."""
    import random

    import jsonschema

    from decoding.backends.automaton import compile_dfa
    from decoding.errors import SchemaError
    rng = random.Random(4)
    checked = 0
    for _ in range(80):
        sch = {"type": "number"}
        for k in rng.sample(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"], rng.randint(1, 2)):
            sch[k] = rng.choice([round(rng.uniform(-3, 3), rng.randint(0, 4)), rng.randint(-3, 3), 0.0, 1.1,
                                 -2.25, 0.105, 1e-5])
        try:
            dfa = compile_dfa(compile_schema(sch).grammar)
        except SchemaError:
            assert not any(jsonschema.Draft202012Validator(sch).is_valid(x / 100) for x in range(-400, 401))
            continue
        for _ in range(100):
            x = round(rng.uniform(-4, 4), rng.randint(0, 6))
            txt = str(int(x)) if x == int(x) else repr(x)
            long = rng.random() < 0.1
            if long:
                txt += "0000000000000000001" if "." in txt else ".0000000000000000001"
            valid = jsonschema.Draft202012Validator(sch).is_valid(json.loads(txt))
            ok = dfa.accepts(txt.encode())
            assert not ok or valid, (sch, txt)
            assert ok or not valid or long, (sch, txt)
            checked += 1
    assert checked > 4000
