"""XML documents from JSON Schema tool definitions."""

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import SchemaError
from decoding.frontends.xml.from_schema import schema_xml_grammar

QUERY = {"name": "query_user", "parameters": {
    "type": "object",
    "properties": {"user_id": {"type": "integer", "minimum": 0},
                   "action": {"type": "string", "enum": ["query", "delete"]},
                   "note": {"type": "string", "maxLength": 5},
                   "tags": {"type": "array", "items": {"type": "string", "pattern": "[a-z]+"},
                            "minItems": 1, "maxItems": 2},
                   "filter": {"type": "object", "properties": {
                       "active": {"type": "boolean"}, "score": {"type": "number"}},
                       "required": ["active"]},
                   "vin": {"type": "string", "pattern": "^[A-HJ-NPR-Z0-9]{17}$"}},
    "required": ["user_id", "action"]}}


@pytest.fixture(scope="module")
def dfa():
    return compile_dfa(schema_xml_grammar(QUERY, "request"))


R = "<request><user_id>12345</user_id><action>query</action>"


@pytest.mark.parametrize("doc", [
    R + "</request>",
    R + "<note>a&lt;&amp;b</note></request>",
    R + "<note>张三</note><tags><item>ab</item><item>c</item></tags></request>",
    R + "<filter><active>true</active><score>-1.5e3</score></filter></request>",
    R + "<filter><active>false</active></filter><vin>LSVAM2BR1PA123456</vin></request>",
    R + "<note/></request>",
])
def test_accepts(dfa, doc):
    assert dfa.accepts(doc.encode())


@pytest.mark.parametrize("doc", [
    "<request><action>query</action></request>",                      # required missing
    "<request><action>query</action><user_id>1</user_id></request>",  # schema order
    "<request><user_id>-1</user_id><action>query</action></request>",  # minimum
    "<request><user_id>01</user_id><action>query</action></request>",  # leading zero
    "<request><user_id>1</user_id><action>list</action></request>",   # enum
    R + "<note>abcdef</note></request>",                              # maxLength
    R + "<note>a<b</note></request>",                                 # raw <
    R + "<tags></tags></request>",                                    # minItems
    R + "<tags><item>a</item><item>b</item><item>c</item></tags></request>",  # maxItems
    R + "<tags><item>A</item></tags></request>",                      # item pattern
    R + "<filter><score>1</score></filter></request>",                # nested required
    R + "<filter><active>yes</active></filter></request>",            # boolean
    R + "<vin>LSVAM2BR1PA12345I</vin></request>",                     # VIN letters
    R + "<extra>1</extra></request>",                                 # unknown element
    "<request> <user_id>1</user_id><action>query</action></request>",  # compact
])
def test_rejects(dfa, doc):
    assert not dfa.accepts(doc.encode())


def test_options():
    flex = compile_dfa(schema_xml_grammar(QUERY, "call", whitespace="flexible", max_ws=3,
                                          xml_declaration="optional", failsafe=True))
    assert flex.accepts(b"<call>\n  <user_id>1</user_id>\n  <action>query</action>\n</call>")
    assert flex.accepts(b'<?xml version="1.0" encoding="UTF-8"?><call><user_id>1</user_id>'
                        b"<action>query</action></call>")
    assert flex.accepts(b"<error><code>SCHEMA_MISMATCH</code><message>x</message></error>")
    defs = {"type": "object", "$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string"}, "child": {"$ref": "#/$defs/node"}}, "required": ["name"]}},
        "properties": {"tree": {"$ref": "#/$defs/node"}}, "required": ["tree"]}
    rec = compile_dfa(schema_xml_grammar(defs, "r", max_depth=3))
    assert rec.accepts(b"<r><tree><name>a</name><child><name>b</name></child></tree></r>")
    assert not rec.accepts(b"<r><tree><name>a</name><child><name>b</name><child><name>c</name>"
                           b"<child><name>d</name></child></child></child></tree></r>")


@pytest.mark.parametrize("schema,pointer,keyword", [
    ({"type": "object", "properties": {"bad name": {"type": "string"}}}, "/properties/bad name", None),
    ({"type": "object", "properties": {"a": {"type": "string", "minProperties": 1}}}, "/properties/a", "minProperties"),
    ({"type": "object", "properties": {"a": {}}}, "/properties/a", None),
    ({"type": "object", "additionalProperties": True}, "", "additionalProperties"),
    ({"type": "object", "properties": {"a": {"$ref": "http://x/y"}}}, "/properties/a", "$ref"),
    ({"type": "object", "required": ["z"]}, "", "required"),
    ({"type": "object", "properties": {"a": {"type": "array"}}}, "/properties/a", "items"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)"}}}, "/properties/a", "pattern"),
])
def test_schema_errors(schema, pointer, keyword):
    with pytest.raises(SchemaError) as e:
        schema_xml_grammar(schema)
    assert e.value.pointer == pointer and e.value.keyword == keyword
