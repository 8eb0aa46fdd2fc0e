"""Exact transitions on tiny hand-built vocabularies: which tokens are allowed where."""

from __future__ import annotations

import numpy as np
import pytest

from decoding.errors import GrammarError
from decoding.backends.select import compile_grammar
from decoding.ir import Grammar, Special, byteset, choice, lit, opt, plus, seq, char_class
from decoding.runtime.matcher import Matcher
from decoding.vocab import Vocab

EOS = 0
TOKS = [b"", b"{", b"}", b'"', b'{"', b'"}', b"a", b"ab", b"b", b"1", b"12", b"\xe5", b"\x8c", b"\x97",
        "北".encode(), b"", b" ", b"a}"]
SPECIAL = {"<|xml_start|>": 15}
V = Vocab.from_bytes(TOKS, eog_ids=[EOS], special=SPECIAL)
IDS = {t: i for i, t in enumerate(TOKS) if t}


def allowed(m: Matcher) -> set[bytes | str]:
    out: set[bytes | str] = set()
    for i in m.allowed_ids():
        i = int(i)
        out.add("EOS" if i == EOS else "SPECIAL" if i == 15 else TOKS[i])
    return out


OBJ = Grammar.single(seq(lit('{"'), plus(byteset([(ord("a"), ord("b"))])), lit('"}')))


@pytest.mark.parametrize("prefix, expected", [
    (b"", {b"{", b'{"'}),
    (b"{", {b'"'}),
    (b'{"', {b"a", b"ab", b"b"}),
    (b'{"a', {b"a", b"ab", b"b", b'"', b'"}'}),
    (b'{"ab"', {b"}"}),
    (b'{"ab"}', {"EOS"}),
])
def test_exact_masks(prefix, expected):
    cg = compile_grammar(OBJ, V, backend="dfa")
    m = Matcher(cg)
    for t in V.greedy(prefix) if prefix else []:
        assert m.advance(t)
    assert allowed(m) == expected


@pytest.mark.parametrize("text, ok", [
    (b'{"a"}', True), (b'{"abba"}', True), (b'{""}', False), (b'{"a"', False), (b'{"ab}', False),
])
def test_accept_reject_token_sequences(text, ok):
    cg = compile_grammar(OBJ, V, backend="dfa")
    m = Matcher(cg)
    accepted = all(m.advance(t) for t in V.greedy(text)) and m.advance(EOS)
    assert accepted == ok


def test_disallowed_token_leaves_matcher_unchanged_and_rollback():
    cg = compile_grammar(OBJ, V, backend="dfa")
    m = Matcher(cg)
    assert not m.advance(IDS[b"}"])
    assert m.state == 0
    assert m.advance(IDS[b'{"']) and m.advance(IDS[b"a"])
    s = m.state
    assert m.advance(IDS[b"b"])
    m.rollback(1)
    assert m.state == s
    assert m.forced_bytes() == b""
    m.reset()
    assert m.forced_bytes() == b'{"'


def test_utf8_split_across_tokens():
    # 北 = e5 8c 97 can be spelled as one token or as three byte tokens
    g = Grammar.single(seq(lit("{"), char_class([(0x4E00, 0x9FFF)]), lit("}")))
    cg = compile_grammar(g, V, backend="dfa")
    for spelling in ([IDS[b"{"], IDS["北".encode()], IDS[b"}"]],
                     [IDS[b"{"], IDS[b"\xe5"], IDS[b"\x8c"], IDS[b"\x97"], IDS[b"}"]]):
        m = Matcher(cg)
        assert all(m.advance(t) for t in spelling) and m.advance(EOS)
    m = Matcher(cg)
    m.advance(IDS[b"{"])
    m.advance(IDS[b"\xe5"])
    assert allowed(m) == {b"\x8c", b"\x97"}  # only continuation bytes


def test_special_token_anchor():
    g = Grammar.single(seq(Special("<|xml_start|>"), lit("a")))
    cg = compile_grammar(g, V, backend="dfa")
    m = Matcher(cg)
    assert allowed(m) == {"SPECIAL"}
    assert m.advance(15) and allowed(m) == {b"a"}


def test_special_missing_from_vocab_is_matched_as_text():
    g = Grammar.single(seq(Special("a"), lit("b")))
    cg = compile_grammar(g, V, backend="dfa")
    m = Matcher(cg)
    assert allowed(m) == {b"a", b"ab"}


def test_eos_only_in_accepting_states():
    g = Grammar.single(seq(lit("1"), opt(lit("2"))))
    cg = compile_grammar(g, V, backend="dfa")
    m = Matcher(cg)
    assert allowed(m) == {b"1", b"12"}
    m.advance(IDS[b"1"])
    assert allowed(m) == {"EOS"}  # "2" alone is no token of this vocabulary


def test_vocab_that_cannot_spell_the_grammar_is_an_error():
    g = Grammar.single(lit("zzz"))
    with pytest.raises(GrammarError, match="vocabulary can spell"):
        compile_grammar(g, V, backend="dfa")


def test_fill_mask_into_caller_buffer_checks_shape():
    cg = compile_grammar(OBJ, V, backend="dfa")
    m = Matcher(cg)
    out = np.zeros(cg.n_words, dtype=np.uint32)
    m.fill_mask(out)
    assert np.array_equal(out, cg.mask(0))
    from decoding.errors import DecodingError
    with pytest.raises(DecodingError, match="words"):
        m.fill_mask(np.zeros(cg.n_words + 1, dtype=np.uint32))


@pytest.mark.parametrize("schema, shortcut", [
    ({"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "string", "maxLength": 5}},
      "required": ["q", "n"]}, True),
    ({"type": "array", "items": {"type": "string", "pattern": "^[a-z]{0,3}$"}}, None),
])
@pytest.mark.parametrize("vocab_name", ["gpt-2", "llama-spm"])
def test_plain_text_shortcut_gives_the_full_walk_masks(schema, shortcut, vocab_name):
    """String bodies use precomputed plain-token masks (decoding/backends/textloop.py); they must equal
    the masks of a walk over the whole vocabulary trie, state by state."""
    from conftest import get_vocab
    from decoding import compile_json_schema

    v = get_vocab(vocab_name)
    fast, full = compile_json_schema(schema, v, backend="dfa"), compile_json_schema(schema, v, backend="dfa")
    full._loop_profiles = ()
    used = 0
    for s in range(fast.dfa.n_states):
        assert np.array_equal(fast.mask(s), full.mask(s)), f"state {s}"
    for name in fast._loop_profiles:
        used += sum(1 for s in range(fast.dfa.n_states) if fast._plain_chain(name, s) is not None)
    if shortcut is not None:
        assert (used > 0) == shortcut


def test_plain_text_shortcut_on_xml_text():
    from conftest import get_vocab
    from decoding.frontends.xml.dtd import parse_dtd
    from decoding.frontends.xml.grammar import dtd_grammar

    v = get_vocab("gpt-2")
    g = dtd_grammar(parse_dtd("<!ELEMENT note (to, body)><!ELEMENT to (#PCDATA)><!ELEMENT body (#PCDATA)>"), "note")
    fast, full = compile_grammar(g, v, backend="dfa"), compile_grammar(g, v, backend="dfa")
    full._loop_profiles = ()
    for s in range(fast.dfa.n_states):
        assert np.array_equal(fast.mask(s), full.mask(s)), f"state {s}"
    assert any(fast._plain_chain("xml-text", s) is not None for s in range(fast.dfa.n_states))
