"""extract_xml / extract_json: parametrized (text, expected fragment) lists."""

import pytest

from decoding.guard import extract_json, extract_xml

REQ = "<request><user_id>12345</user_id><action>query</action></request>"

XML_FOUND = [
    (REQ, REQ),
    ("Here is the XML request:\n" + REQ + "\nHope this helps!", REQ),
    ('<a x="1>2">t</a>', '<a x="1>2">t</a>'),
    ("<a><![CDATA[</a> <b>]]></a>", "<a><![CDATA[</a> <b>]]></a>"),
    ("<a><!-- </a> --></a> tail", "<a><!-- </a> --></a>"),
    ("<a><?pi </a>?></a>", "<a><?pi </a>?></a>"),
    ("x < y and <a/> z", "<a/>"),
    ("3<4 but <a>ok</a>", "<a>ok</a>"),
    ("<a><b>1</b></a><c/>", "<a><b>1</b></a>"),
    ("<a>中文<b>二</b></a>", "<a>中文<b>二</b></a>"),
]


@pytest.mark.parametrize("text,want", XML_FOUND)
def test_extract_xml_finds(text, want):
    fr = extract_xml(text)
    assert fr is not None and fr.complete and fr.text == want
    assert text[fr.start:fr.end] == want


def test_extract_xml_prolog_and_position():
    text = 'Sure:\n<?xml version="1.0"?>\n<!DOCTYPE r [<!ELEMENT r (#PCDATA)>]>\n<r>x</r>'
    fr = extract_xml(text)
    assert fr.text == "<r>x</r>" and (fr.line, fr.column) == (4, 1)
    assert fr.document.startswith("<?xml") and fr.document.endswith("</r>")


def test_extract_xml_prose_quotes_tag():
    text = "Use the <request> element: " + REQ
    assert extract_xml(text, root="request").text == REQ
    assert extract_xml(text).text == REQ


def test_extract_xml_truncated_with_root():
    text = "<request><user_id>1</user_id><act"
    fr = extract_xml(text, root="request")
    assert not fr.complete and fr.text == text
    assert extract_xml(text).text == "<user_id>1</user_id>"   # no root: first complete


@pytest.mark.parametrize("text", ["no markup", "a < b", "<1a>", "<a", "<!-- <a></a>"])
def test_extract_xml_none(text):
    assert extract_xml(text) is None


def test_extract_xml_all():
    frs = extract_xml("<a/> and <b>1</b> then <c>", all=True)
    assert [f.text for f in frs] == ["<a/>", "<b>1</b>", "<c>"]
    assert [f.complete for f in frs] == [True, True, False]


JSON_FOUND = [
    ('{"a": 1}', '{"a": 1}', True),
    ('Here is the JSON: {"a": "}{"} done', '{"a": "}{"}', True),
    ('{"a": "say \\"}\\" ok"}', '{"a": "say \\"}\\" ok"}', True),
    ('Fill {city}: {"city": "北京市"}', '{"city": "北京市"}', True),
    ('[1, {"b": [2]}] tail', '[1, {"b": [2]}]', True),
    ('{"a": [1, 2,],}', '{"a": [1, 2,],}', True),
    ('{"a": {"b": 1}, "c": [tr', '{"a": {"b": 1}, "c": [tr', False),
    ('x {"a": "unterminated', '{"a": "unterminated', False),
]


@pytest.mark.parametrize("text,want,complete", JSON_FOUND)
def test_extract_json(text, want, complete):
    fr = extract_json(text)
    assert fr.text == want and fr.complete is complete


@pytest.mark.parametrize("text", ["none", "{city}", "{'a': 1}", "[x]", '{"a" 1}'])
def test_extract_json_none(text):
    assert extract_json(text) is None


def test_extract_json_notes_trailing_comma():
    fr = extract_json('{"a": 1,}')
    assert fr.notes and "trailing comma" in fr.notes[0]


# XML Name: one definition (decoding.text.xml_name) for the DTD front-end and the guard.
NAMES = [
    ("a", True), ("n:x", True), ("_a-b.c1", True), ("张三", True), ("é", True),
    ("a\u00b7\u0300", True), ("\U00010000x", True),
    ("1a", False), ("-a", False), (".a", False), ("\u00b7a", False), ("\u0300a", False),
    ("a\u00d7", False), ("\u00d7", False), ("a\u2028", False), ("\U000f0000", False),
]


@pytest.mark.parametrize("name,ok", NAMES)
def test_xml_name_same_for_grammar_and_guard(name, ok):
    from decoding.backends.automaton import compile_dfa
    from decoding.frontends.xml.grammar import _name
    from decoding.guard.extract import is_name_char, is_name_start
    from decoding.ir import Grammar
    from decoding.text.xml_name import is_name

    assert is_name(name) is ok
    assert (is_name_start(name[0]) and all(is_name_char(c) for c in name[1:])) is ok
    assert compile_dfa(Grammar.single(_name())).accepts(name.encode()) is ok
    found = extract_xml(f"say <{name}>x</{name}> now")
    assert (found is not None and found.complete and found.text == f"<{name}>x</{name}>") is ok
