"""The one regex engine (decoding.text.regex): search and anchored modes, caller-supplied
encoders, located errors, and the same JSON Schema ``pattern`` semantics in JSON and XML."""

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import DecodingError, GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.jsonschema.jsonstr import json_char
from decoding.frontends.xml.from_schema import schema_xml_grammar
from decoding.frontends.xml.text import attr_char, text_char
from decoding.ir import MAX_CP, Grammar
from decoding.text.regex import PatternError, regex_ir

TOOL = {"name": "t", "parameters": {"type": "object", "required": ["s"],
                                    "properties": {"s": {"type": "string", "pattern": "ab"}}}}


def _dfa(node):
    return compile_dfa(Grammar.single(node))


@pytest.mark.parametrize("value,ok", [("ab", True), ("xaby", True), ("ab<", True),
                                      ("a", False), ("ba", False), ("", False)])
def test_json_schema_pattern_is_a_search_in_json_and_in_xml(value, ok):
    """The same tool schema gives the same verdict as JSON and as XML (issue 13)."""
    import json

    from decoding.frontends.xml.text import escape_text
    as_json = compile_dfa(compile_schema(TOOL["parameters"]).grammar)
    as_xml = compile_dfa(schema_xml_grammar(TOOL, "request"))
    assert as_json.accepts(json.dumps({"s": value}, ensure_ascii=False, separators=(",", ":")).encode()) is ok
    assert as_xml.accepts(f"<request><s>{escape_text(value)}</s></request>".encode()) is ok


def test_format_stays_anchored_in_xml():
    tool = {"type": "object", "required": ["d"], "properties": {"d": {"type": "string", "format": "date"}}}
    dfa = compile_dfa(schema_xml_grammar(tool, "r"))
    assert dfa.accepts(b"<r><d>2024-02-29</d></r>")
    assert not dfa.accepts(b"<r><d>x2024-02-29</d></r>")


@pytest.mark.parametrize("pattern,text,search,anchored", [
    ("ab", "ab", True, True),
    ("ab", "xaby", True, False),
    ("^ab", "abx", True, False),
    ("ab$", "xab", True, False),
    ("^ab$", "ab", True, True),
    ("^ab$", "xab", False, False),
    ("a|^b$", "xa", True, False),
    ("a|^b$", "b", True, True),
    ("a{2", "a{2", True, True),   # '{' that starts no quantifier is a literal (Annex B)
    ("[^a]", "b", True, True),
    ("", "anything", True, False),
])
def test_search_and_anchored_modes(pattern, text, search, anchored):
    enc = text.encode()
    assert _dfa(regex_ir(pattern, json_char)).accepts(enc) is search
    assert _dfa(regex_ir(pattern, json_char, anchored=True)).accepts(enc) is anchored


def test_encoders_spell_characters_in_their_syntax():
    quote_lt = regex_ir('"<', json_char, anchored=True)
    assert _dfa(quote_lt).accepts(b'\\"<')
    assert not _dfa(quote_lt).accepts(b'"<')
    text = _dfa(regex_ir('"<', text_char, anchored=True))
    assert text.accepts(b'"&lt;') and not text.accepts(b'"<')
    attr = _dfa(regex_ir('"<', attr_char, anchored=True))
    assert attr.accepts(b"&quot;&lt;") and not attr.accepts(b'"&lt;')
    # characters that are not XML characters are left out by the XML encoders
    assert not _dfa(regex_ir(".", text_char, anchored=True)).accepts(b"\x01")
    assert _dfa(regex_ir(".", json_char, anchored=True)).accepts(b"\\u0001")


def test_any_class_covers_all_code_points():
    dfa = _dfa(regex_ir("[^]", json_char, anchored=True))
    assert dfa.accepts(chr(MAX_CP).encode()) and dfa.accepts("张".encode())


@pytest.mark.parametrize("pattern,pos", [("(a", 0), ("a(?<=b)", 2), ("ab\\1", 2), ("^*", 1),
                                         ("[a", 0), ("x\\u{41", 1), ("\\u{110000}", 0),
                                         ("a{3,2}", 1), ("a**", 2), ("\\p{L}", 0)])
def test_errors_are_located_decoding_errors(pattern, pos):
    with pytest.raises(PatternError) as e:
        regex_ir(pattern, json_char)
    assert isinstance(e.value, GrammarError) and isinstance(e.value, DecodingError)
    assert e.value.pattern == pattern and e.value.pos == pos
    assert f"at offset {pos}" in str(e.value)
