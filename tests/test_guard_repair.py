"""Repair: exact outputs, reported changes, refusals; valid input is never changed."""

import pytest

from decoding.frontends.xml.dtd import parse_dtd
from decoding.guard import XML_DECLARATION, guard_json, guard_xml

DTD = parse_dtd("""
<!ELEMENT request (user_id, action)>
<!ELEMENT user_id (#PCDATA)> <!ELEMENT action (#PCDATA)>
<!ELEMENT response (status, data)> <!ELEMENT status (#PCDATA)>
<!ELEMENT data (user_name, age)> <!ELEMENT user_name (#PCDATA)> <!ELEMENT age (#PCDATA)>
""")
REQ = "<request><user_id>1</user_id><action>q</action></request>"

XML_REPAIRS = [  # (input, root, repaired, change kinds)
    ("Here is the XML request:\n" + REQ + "\nDone.", "request", REQ, ["drop-prose", "drop-prose"]),
    ("<request><user_id>A & B < C</user_id><action>q</action></request>", "request",
     "<request><user_id>A &amp; B &lt; C</user_id><action>q</action></request>", ["escape", "escape"]),
    ("<request><user_id>1</user_id><action>q", "request", REQ, ["close-tag", "close-tag"]),
    ("<request><user_id>1</user_id><action>q</action>\nHope this helps!", "request", REQ,
     ["drop-prose", "close-tag"]),
    ("<request><user_id>1</user_id><action>q</act", "request", REQ,
     ["drop-partial", "close-tag", "close-tag"]),
    ("<request><user_id>1\n<action>q</action></request>", "request",
     "<request><user_id>1</user_id>\n<action>q</action></request>", ["close-tag"]),
    ("<response><status>ok</status><data><user_name>张三</user_name><age>28</age></response>", "response",
     "<response><status>ok</status><data><user_name>张三</user_name><age>28</age></data></response>",
     ["close-tag"]),
]


@pytest.mark.parametrize("text,root,want,kinds", XML_REPAIRS)
def test_xml_repair(text, root, want, kinds):
    assert not guard_xml(text, DTD, root=root).ok or kinds[0] == "drop-prose"
    res = guard_xml(text, DTD, root=root, repair=True)
    assert res.ok and res.text == want
    assert [c.kind for c in res.changes] == kinds
    assert all(c.detail for c in res.changes)


XML_REFUSED = [  # (input, reason fragment)
    ("<request><user_id>1</user_id>", "expected <action>"),                  # closing is not enough
    ("<request><user_id>1</user_id><action>q</user_id></action></request>", "wrong nesting"),
    ("<request><user_id>1</user_id><action>q</action><foo>x", "not declared"),  # undeclared element
    ("<request><action>q</action><user_id>1</user_id></request>", "still invalid"),
]


@pytest.mark.parametrize("text,reason", XML_REFUSED)
def test_xml_repair_refused(text, reason):
    res = guard_xml(text, DTD, root="request", repair=True)
    assert not res.ok and res.text is None
    assert reason in res.repair.refused


def test_add_declaration():
    res = guard_xml(REQ, DTD, root="request", repair=True, add_declaration=True)
    assert res.ok and res.text == XML_DECLARATION + REQ
    assert [c.kind for c in res.changes] == ["add-declaration"]
    assert guard_xml(REQ, DTD, root="request", repair=True).text == REQ   # off by default


@pytest.mark.parametrize("doc", [REQ, "<request>\n <user_id>x</user_id>\n <action>&amp;</action>\n</request>"])
def test_valid_xml_unchanged(doc):
    res = guard_xml(doc, DTD, root="request", repair=True)
    assert res.ok and res.text == doc and res.changes == ()


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string"},
                                           "tags": {"type": "array"}}, "required": ["city"]}

JSON_REPAIRS = [
    ('Sure! {"city": "北京市", "date": "2024-06-15",} ok', '{"city": "北京市", "date": "2024-06-15"}',
     ["drop-prose", "drop-prose", "remove-comma"]),
    ('{"city": "a", "tags": [1, 2,]}', '{"city": "a", "tags": [1, 2]}', ["remove-comma"]),
    ('{"city": "a", "tags": [1, 2', '{"city": "a", "tags": [1, 2]}', ["close-bracket", "close-bracket"]),
    ('{"city": "北京', '{"city": "北京"}', ["close-string", "close-bracket"]),
    ('{"city": "a\\u00', '{"city": "a"}', ["drop-partial", "close-string", "close-bracket"]),
    ('{"city": "a", "ta', '{"city": "a"}', ["drop-partial", "drop-partial", "close-bracket"]),
    ('{"city": "a", "tags": tr', '{"city": "a"}',
     ["drop-partial", "drop-partial", "drop-partial", "close-bracket"]),
    ('{"city": "a", "tags": [1, ', '{"city": "a", "tags": [1]}',
     ["drop-partial", "close-bracket", "close-bracket"]),
]


@pytest.mark.parametrize("text,want,kinds", JSON_REPAIRS)
def test_json_repair(text, want, kinds):
    res = guard_json(text, SCHEMA, repair=True)
    assert res.ok and res.text == want, (res.repair and res.repair.refused)
    assert [c.kind for c in res.changes] == kinds
    assert res.value is not None


@pytest.mark.parametrize("text", ['{"date": "x"', '{"city": 1}', '{"ci'])
def test_json_repair_refused(text):
    res = guard_json(text, SCHEMA, repair=True)
    assert not res.ok and res.text is None and res.repair.refused


def test_valid_json_unchanged():
    doc = '{ "city" : "a" ,\n "tags": [ ] }'
    res = guard_json(doc, SCHEMA, repair=True)
    assert res.ok and res.text == doc and res.changes == ()
