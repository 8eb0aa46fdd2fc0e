"""The byte DFA and its NFA simulation (NFAMatcher) accept exactly the same strings."""

from __future__ import annotations

import pytest

from decoding.backends.automaton import NFAMatcher, compile_dfa
from decoding.errors import GrammarError
from decoding.ir import Grammar, Ref, byteset, char_class, choice, lit, opt, plus, rep, seq

NESTED = Grammar("v", (("v", choice(lit("x"), seq(lit("["), opt(Ref("v")), lit("]")))),), max_depth=3)
JSONISH = Grammar.single(seq(lit('{"a":'), plus(byteset([(48, 57)])), opt(seq(lit(',"b":"'),
                                                                               rep(char_class([(0x22, 0x22)], negate=True), 0, 4),
                                                                               lit('"'))), lit("}")))


@pytest.mark.parametrize("grammar, text, ok", [
    (NESTED, b"x", True), (NESTED, b"[[x]]", True), (NESTED, b"[[[x]]]", True),
    (NESTED, b"[[[[x]]]]", False),  # deeper than max_depth
    (NESTED, b"[]", True), (NESTED, b"[x", False), (NESTED, b"", False),
    (JSONISH, b'{"a":12}', True), (JSONISH, '{"a":1,"b":"北京"}'.encode(), True),
    (JSONISH, b'{"a":1,"b":"12345"}', False), (JSONISH, b'{"a":}', False),
    (JSONISH, b'{"a":1,"b":"\xe5"}', False),  # a cut UTF-8 character
])
def test_nfa_simulation_agrees_with_the_dfa(grammar, text, ok):
    assert compile_dfa(grammar).accepts(text) == ok
    assert NFAMatcher(grammar).accepts(text) == ok


def test_empty_language_is_an_error():
    with pytest.raises(GrammarError, match="accepts no string"):
        NFAMatcher(Grammar("v", (("v", seq(lit("["), Ref("v"), lit("]"))),), max_depth=2))
