"""validate_xml (over the DTD model from parse_dtd) and validate_json."""

import pytest

from decoding.frontends.xml.dtd import parse_dtd
from decoding.guard import guard_json, guard_xml, validate_json, validate_xml

DTD_TEXT = """
<!ELEMENT request (user_id, action, note?)>
<!ATTLIST request version (1|2) #REQUIRED kind CDATA #IMPLIED>
<!ELEMENT user_id (#PCDATA)>
<!ELEMENT action (#PCDATA)>
<!ELEMENT note (#PCDATA|b)*>
<!ELEMENT b (#PCDATA)>
<!ELEMENT br EMPTY>
"""
DTD = parse_dtd(DTD_TEXT)

VALID = [
    '<request version="1"><user_id>12345</user_id><action>query</action></request>',
    '<request version="2" kind="x">\n  <user_id>U9C&lt;&gt;&amp;</user_id>\n  <action>q</action>\n</request>',
    '<request version="1"><user_id>1</user_id><action>q</action><note>a<b>b</b>c</note></request>',
    '<?xml version="1.0"?><request version="1"><user_id><![CDATA[a<b]]></user_id><action/></request>',
]

INVALID = [  # (document, code, path)
    ('<request><user_id>1</user_id><action>q</action></request>', "missing-attribute", "/request/@version"),
    ('<request version="3"><user_id>1</user_id><action>q</action></request>', "attribute-value", "/request/@version"),
    ('<request version="1" x="1"><user_id>1</user_id><action>q</action></request>', "undeclared-attribute", "/request/@x"),
    ('<request version="1"><action>q</action><user_id>1</user_id></request>', "content-model", "/request/action"),
    ('<request version="1"><user_id>1</user_id></request>', "content-model", "/request"),
    ('<request version="1"><user_id>1</user_id><action>q</action>', "unclosed-tag", "/request"),
    ('<request version="1"><user_id>1<action>q</action></request>', "content-model", "/request/user_id/action"),
    ('<request version="1"><user_id>A & B</user_id><action>q</action></request>', "stray-ampersand", "/request/user_id"),
    ('<request version="1"><user_id>A < B</user_id><action>q</action></request>', "stray-lt", "/request/user_id"),
    ('<request version="1"><user_id>1</user_id>text<action>q</action></request>', "text-not-allowed", "/request"),
    ('<request version="1"><user_id>1</user_id><action>q</action><foo/></request>', "undeclared-element", "/request/foo"),
    ('<request version="1"><user_id>1</user_id><action>q</action><note><user_id/></note></request>', "content-model", "/request/note/user_id"),
    ('<request version="1"><user_id>\x01</user_id><action>q</action></request>', "illegal-char", "/request/user_id"),
    ('<user_id>1</user_id>', "wrong-root", "/user_id"),
    ('<request version="1"><user_id>1</user_id><action>q</user_id></action></request>', "mismatched-tag", "/request/action"),
]


@pytest.mark.parametrize("doc", VALID)
def test_valid_xml(doc):
    assert validate_xml(doc, DTD, root="request") == []


@pytest.mark.parametrize("doc,code,path", INVALID)
def test_invalid_xml(doc, code, path):
    errs = validate_xml(doc, DTD, root="request")
    assert errs, doc
    assert any(e.code == code and e.path == path for e in errs), errs
    assert all(e.line >= 1 and e.column >= 1 and e.message for e in errs)


def test_xml_positions_are_in_the_source():
    text = 'Here:\n<request version="1"><user_id>1</user_id>\n<bad/><action>q</action></request>'
    res = guard_xml(text, DTD, root="request")
    assert not res.ok
    e = res.errors[0]
    assert (e.line, e.column) == (3, 1) and text[e.offset:].startswith("<bad/>")
    assert "<bad>" in e.message


def test_empty_element():
    d = parse_dtd("<!ELEMENT r (br)><!ELEMENT br EMPTY>")
    assert validate_xml("<r><br/></r>", d) == []
    assert validate_xml("<r><br>x</br></r>", d)[0].code == "text-not-allowed"


SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string"}, "date": {"type": "string", "format": "date"},
                         "category": {"enum": ["数码", "服饰", "食品", "家居"]},
                         "max_price": {"type": "integer"}},
          "required": ["city", "date"], "additionalProperties": False}

JSON_CASES = [  # (text, code, path, message fragment)
    ('{"city": "北京市", "date": "明天"}', "schema-format", "/date",
     "/date: '明天' does not match format date (YYYY-MM-DD)"),
    ('{"city": "北京市"}', "schema-required", "", "missing required property 'date'"),
    ('{"city": "北京市", "date": "2024-06-15", "category": "电器"}', "schema-enum", "/category", "is not one of"),
    ('{"city": "北京市", "date": "2024-06-15", "max_price": "100"}', "schema-type", "/max_price", "not of type integer"),
    ('{"city": "北京市", "date": "2024-06-15", "x": 1}', "schema-additionalProperties", "", "x"),
    ('{"city": "北京市", "date": "2024-06-15",}', "json-syntax", "", "invalid JSON at 1:"),
]


@pytest.mark.parametrize("text,code,path,msg", JSON_CASES)
def test_invalid_json(text, code, path, msg):
    _, errs = validate_json(text, SCHEMA)
    assert len(errs) >= 1
    e = errs[0]
    assert (e.code, e.path) == (code, path) and msg in e.message


def test_json_error_located():
    text = 'Answer:\n{"city": "北京市",\n "date": "明天"}'
    res = guard_json(text, SCHEMA)
    e = res.errors[0]
    assert (e.line, e.column) == (3, 10) and text[e.offset:].startswith('"明天"')


@pytest.mark.parametrize("text", ['{"city": "北京市", "date": "2024-06-15"}',
                                  'ok: {"city": "上海市", "date": "2024-02-29", "max_price": 3} thx'])
def test_valid_json(text):
    res = guard_json(text, SCHEMA)
    assert res.ok and res.value["city"].endswith("市")


def test_date_time_format_checked():
    s = {"type": "string", "format": "date-time"}
    assert validate_json('"2024-06-15T10:30:00Z"', s)[1] == []
    assert validate_json('"2024-06-15 10:30"', s)[1][0].code == "schema-format"


@pytest.mark.parametrize("schema, pointer, keyword", [
    ({"type": "foo"}, "", "type"),
    ({"$ref": "#/nope"}, "", "$ref"),
    ({"properties": {"a": {"type": 5}}}, "/properties/a/type", None),
    ("not a schema", "", None),
])
def test_unusable_schema_is_a_schema_error(schema, pointer, keyword):
    """A schema jsonschema cannot use is the caller's error, raised as SchemaError (never a
    jsonschema/TypeError escape); bad model output still comes back as violations."""
    from decoding.errors import SchemaError

    with pytest.raises(SchemaError, match="validate_json") as info:
        guard_json('{"a": "b"}', schema)
    assert info.value.pointer == pointer and info.value.keyword == keyword
