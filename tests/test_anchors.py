"""Anchors: strict and lazy regions, literal vs special-token anchors, KMP free text."""

import itertools
import random

import pytest

from decoding.frontends.anchors import anchored, text_without
from decoding.backends.automaton import compile_dfa
from decoding.frontends.xml.dtd import parse_dtd
from decoding.errors import GrammarError
from decoding.ir import Grammar
from decoding.frontends.xml.grammar import dtd_grammar
from tests.xml_helpers import random_walk_bytes

S, E = "<|xml_start|>", "<|xml_end|>"
DOC = "<request><user_id>1</user_id><action>query</action></request>"


@pytest.fixture(scope="module")
def request_grammar():
    d = parse_dtd("<!ELEMENT request (user_id, action)><!ELEMENT user_id (#PCDATA)>"
                  "<!ELEMENT action (#PCDATA)>")
    return dtd_grammar(d, "request", text_patterns={"user_id": "[0-9]+", "action": "query"},
                       failsafe=True, xml_declaration="none")


@pytest.mark.parametrize("word", [b"<|xml_start|>", b"aab", b"abab", b"aaa", b"<tool_call>"])
def test_text_without_is_exact(word):
    dfa = compile_dfa(Grammar.single(text_without(word)))
    alphabet = sorted(set(word)) + [ord("x")]
    n = 1
    while len(alphabet) ** (n + 1) <= 20_000:
        n += 1
    for k in range(n + 1):  # exhaustive over short strings
        for t in itertools.product(alphabet, repeat=k):
            s = bytes(t)
            assert dfa.accepts(s) == (word not in s), s
    rng = random.Random(0)  # random splices of word fragments for the long words
    for _ in range(3000):
        s = b"".join(word[rng.randrange(len(word)):][:rng.randrange(1, len(word) + 1)]
                     for _ in range(rng.randrange(1, 5)))
        assert dfa.accepts(s) == (word not in s), s


def test_strict_literal(request_grammar):
    g = anchored(request_grammar, S, E, mode="strict")
    dfa = compile_dfa(g, literal_specials=[S, E])
    assert dfa.specials == ()
    assert dfa.accepts(f"{S}{DOC}{E}".encode())
    for bad in (DOC, f"{S}{DOC}", f"x{S}{DOC}{E}", f"{S}{DOC}{E}x", f"{S} {DOC}{E}"):
        assert not dfa.accepts(bad.encode()), bad


def test_strict_special_tokens(request_grammar):
    g = anchored(request_grammar, "<tool_call>", "</tool_call>", mode="strict")
    dfa = compile_dfa(g)
    assert dfa.specials == ("<tool_call>", "</tool_call>")
    s = dfa.step_special(0, 0)
    assert s >= 0 and dfa.run(DOC.encode(), s) >= 0
    end = dfa.step_special(dfa.run(DOC.encode(), s), 1)
    assert end >= 0 and dfa.accepting[end]
    assert dfa.run(b"<tool_call>") < 0  # the text spelling is not the special token


def test_lazy_regions(request_grammar):
    g = anchored(request_grammar, S, E, mode="lazy", max_regions=2)
    dfa = compile_dfa(g, literal_specials=[S, E])
    ok = ["", "just prose", f"Sure! {S}{DOC}{E} done.", f"a{S}{DOC}{E}b{S}{DOC}{E}c",
          f"{S}<error><code>SCHEMA_MISMATCH</code><message>no</message></error>{E}"]
    bad = [f"a{S}{DOC}", f"a{S}{DOC}{E}b{S}{DOC}{E}c{S}{DOC}{E}", f"{S}Here is XML: {DOC}{E}",
           f"{S}{DOC}{E}{S}", f"a{S}<request>{E}"]
    assert all(dfa.accepts(x.encode()) for x in ok)
    assert not any(dfa.accepts(x.encode()) for x in bad)
    once = compile_dfa(anchored(request_grammar, S, E, mode="lazy", min_regions=1),
                       literal_specials=[S, E])
    assert not once.accepts(b"prose only") and once.accepts(f"p{S}{DOC}{E}".encode())


def test_lazy_walks_close_every_region(request_grammar):
    g = anchored(request_grammar, S, E, mode="lazy", max_regions=3)
    dfa = compile_dfa(g, literal_specials=[S, E])
    rng = random.Random(3)
    for _ in range(300):
        out = random_walk_bytes(dfa, rng, stop_prob=0.05, max_len=400)
        starts, ends = out.count(S.encode()), out.count(E.encode())
        assert starts == ends <= 3
        # every region is start-anchor, a document, end-anchor
        for piece in out.split(S.encode())[1:]:
            assert piece.index(E.encode()) > 0
    special = compile_dfa(g)
    marks = {S: b"\x00S", E: b"\x00E"}
    for _ in range(200):
        out = random_walk_bytes(special, rng, stop_prob=0.05, specials_as=marks)
        assert out.count(b"\x00S") == out.count(b"\x00E")


def test_anchor_errors(request_grammar):
    with pytest.raises(GrammarError):
        anchored(request_grammar, "", E)
    with pytest.raises(GrammarError):
        anchored(request_grammar, S, E, mode="loose")
    with pytest.raises(GrammarError):
        anchored(request_grammar, S, E, mode="lazy", max_regions=0)
    with pytest.raises(GrammarError):
        text_without(b"")
