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


WORDS = "INTERVAL_TICK|INTERVAL_M1|INTERVAL_M2|INTERVAL_M3|INTERVAL_M4|INTERVAL_M5|INTERVAL_M6|INTERVAL_M10|" \
        "INTERVAL_M15|INTERVAL_M20|INTERVAL_M30|INTERVAL_H1|INTERVAL_H2|INTERVAL_H4|INTERVAL_D1|INTERVAL_W1|INTERVAL_MN1"


@pytest.mark.parametrize("pattern", [WORDS, "^ab|cd|ef$|gh|^ij$|k.*l", "a|", "^a|b$|c|d"])
def test_search_branches_share_their_open_ends(pattern):
    """``any* A any* | any* B any*`` is built as ``any* (A | B) any*`` (same language): the
    first form's subset construction remembers which branches matched, 2^17 subsets for
    GitHub's 17 interval names (o5195: past 256 MB), the second is ~140 states."""
    import random
    import re
    import time

    t0 = time.thread_time()
    dfa = _dfa(regex_ir(pattern, json_char, anchored=False))
    assert time.thread_time() - t0 < 2.0 and dfa.n_states < 2000
    rng = random.Random(pattern)
    alphabet = sorted(set(pattern.replace("|", "").replace("^", "").replace("$", "").replace(".", "").replace("*", "")))
    words = [w for w in re.split(r"[|^$]", pattern) if w and "." not in w]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        if words and rng.random() < 0.5:
            text = text[:3] + rng.choice(words) + text[3:]
        assert dfa.accepts(text.encode()) == bool(re.search(pattern, text)), text
