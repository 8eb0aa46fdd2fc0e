"""One accept/reject matrix, three back-ends: our DFA (GBNF parsed to IR), llama.cpp's
grammar engine on the original GBNF text, and llama.cpp on our re-emitted GBNF."""

from __future__ import annotations

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.backends.gbnf.check import LlamaGrammarEngine, check_gbnf
from decoding.backends.gbnf.emit import to_gbnf
from decoding.frontends.gbnf.parse import parse_gbnf

CASES = [
    ("literal", 'root ::= "hello"\n', ["hello"], ["hell", "helloo", "Hello", ""]),
    ("alternation", 'root ::= "a" | "bc" | ""\n', ["a", "bc", ""], ["b", "abc", "c"]),
    ("class", 'root ::= [a-cx]+\n', ["a", "abcx", "xxx"], ["", "d", "abd", "A"]),
    ("negated class", 'root ::= [^a-z\\n]*\n', ["", "ABC", "1 2", "é€😀"], ["a", "AbC", "\n"]),
    ("escapes", 'root ::= "\\x41\\u00e9\\U0001F600\\t\\"\\\\" [\\[\\]\\-]\n',
     ["Aé😀\t\"\\[", "Aé😀\t\"\\-"], ["Aé😀\t\"\\", "Ae😀\t\"\\["]),
    ("repeat exact", 'root ::= "ab"{3}\n', ["ababab"], ["abab", "abababab", "aab"]),
    ("repeat range", 'root ::= [0-9]{2,4}\n', ["12", "123", "1234"], ["1", "12345", "1a"]),
    ("repeat open", 'root ::= "x"{2,} "y"?\n', ["xx", "xxxxy"], ["x", "xy", "xxyy"]),
    ("groups", 'root ::= ("a" ("b" | "c")*)+ "."\n', ["a.", "abcab.", "aa."], ["b.", ".", "ab"]),
    ("multiline", 'root ::=\n  ( "x"\n  | "y" # comment\n  "z" ) |\n "w"\n', ["x", "yz", "w"],
     ["xz", "y", "z"]),
    ("rule refs", 'root ::= greet ws name\ngreet ::= "hi" | "yo"\nws ::= [ ]+\n'
     'name ::= [A-Z] [a-z]*\n', ["hi Bob", "yo   A"], ["hiBob", "hi bob", "hey Bob"]),
    ("unicode range", 'root ::= [α-ω]{1,3} "!"\n', ["α!", "βγδ!"], ["!", "a!", "αβγδ!"]),
    ("dot", 'root ::= "<" . ">"\n', ["<a>", "<€>", "<😀>"], ["<>", "<ab>"]),
    ("recursion", 'root ::= "(" root ")" | "x"\n', ["x", "(x)", "((x))"], ["()", "(x", "x)"]),
]


def _ids(c):
    return c[0]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_dfa_backend(case):
    _, text, good, bad = case
    dfa = compile_dfa(parse_gbnf(text, max_depth=4))
    for s in good:
        assert dfa.accepts(s.encode()), s
    for s in bad:
        assert not dfa.accepts(s.encode()), s


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_llama_backend_on_source(case):
    _, text, good, bad = case
    eng = LlamaGrammarEngine(text)
    for s in good:
        assert eng.accepts(s.encode()), s
    for s in bad:
        assert not eng.accepts(s.encode()), s


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_llama_backend_on_emitted(case):
    _, text, good, bad = case
    emitted = to_gbnf(parse_gbnf(text))
    check_gbnf(emitted)
    eng = LlamaGrammarEngine(emitted)
    for s in good:
        assert eng.accepts(s.encode()), (s, emitted)
    for s in bad:
        assert not eng.accepts(s.encode()), (s, emitted)
