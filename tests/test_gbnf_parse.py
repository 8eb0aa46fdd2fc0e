"""GBNF front-end: syntax, errors with locations, recursion policy, sdist grammars."""

from __future__ import annotations

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import GBNFError
from decoding.backends.gbnf.check import LlamaGrammarEngine
from decoding.frontends.gbnf.parse import parse_gbnf, recursive_rules
from decoding.ir import Special, walk

from gbnf_util import sdist_grammars


@pytest.mark.parametrize("text,line,col,needle", [
    ('root ::= "a\n', 1, 10, "unterminated string"),
    ('root ::= "a"\nfoo ::= ("b"\n', 2, None, "end of input"),
    ('root ::= "a" | b\n', 1, 16, "undefined rule 'b'"),
    ('root ::= "\\q"\n', 1, 11, "unknown escape"),
    ('root ::= "\\x4"\n', 1, 11, "hex"),
    ('root ::= [z-a]\n', 1, 10, "empty character range"),
    ('root ::= "a"\nroot ::= "b"\n', 2, 1, "defined twice"),
    ('root ::= x "a"\nx ::= root "b" | "c"\n', 1, 1, "left-recursive"),
    ('start ::= "a"\n', None, None, "no 'root' rule"),
    ('root ::= "a"{2001}\n', 1, 13, "2000"),
    ('root ::= "a" !<[5]>\n', 1, 14, "negated token"),
    ('root ::= "a"\n  "b"\n', 2, 3, "unexpected"),
    ('root ::= "a" ::= "b"\n', 1, 14, "unexpected"),
])
def test_errors_carry_location(text, line, col, needle):
    with pytest.raises(GBNFError) as ei:
        parse_gbnf(text)
    e = ei.value
    assert needle in str(e)
    if line is not None:
        assert e.line == line, str(e)
    if col is not None:
        assert e.column == col, str(e)


def test_source_name_in_message():
    with pytest.raises(GBNFError, match=r"^my\.gbnf:1:"):
        parse_gbnf("root ::= ]\n", source="my.gbnf")


def test_token_refs_become_specials():
    g = parse_gbnf('root ::= <[128000]> "x" <think>\n')
    assert [n for n in walk(g.rule("root")) if isinstance(n, Special)] == [
        Special("<[128000]>"), Special("<think>")]
    dfa = compile_dfa(g)
    assert dfa.specials == ("<[128000]>", "<think>")


def test_repetition_above_threshold_follows_llama_cpp():
    # llama.cpp turns {m,n} with n > 2000 into {m,}
    dfa = compile_dfa(parse_gbnf('root ::= "a"{1,2500} "b"\n'))
    assert dfa.accepts(b"a" * 2600 + b"b")
    assert not dfa.accepts(b"b")


def test_strict_recursion_names_rule():
    text = 'root ::= "[" list? "]"\nlist ::= item ("," item)*\nitem ::= "x" | root\n'
    with pytest.raises(GBNFError, match="rule 'root' is recursive"):
        parse_gbnf(text, strict_recursion=True)
    g = parse_gbnf(text, max_depth=3)
    assert recursive_rules(g) == ["root", "list", "item"]
    dfa = compile_dfa(g)
    assert dfa.accepts(b"[[[x]]]") and not dfa.accepts(b"[[[[x]]]]")


# ----------------------------------------------------------------------- sdist grammars

@pytest.fixture(scope="module")
def sdist():
    return sdist_grammars()


def test_sdist_has_the_expected_files(sdist):
    assert sorted(sdist) == ["arithmetic.gbnf", "c.gbnf", "chess.gbnf", "english.gbnf",
                             "japanese.gbnf", "json.gbnf", "json_arr.gbnf", "list.gbnf"]


# name -> (recursive rule reported by strict_recursion or None, depth to compile at,
#          accepted, rejected)
SDIST = {
    "arithmetic.gbnf": ("expr", 3, ["x=1\n", "(a+b)*c= 2\n"], ["x=\n", "x=1", "X=1\n"]),
    "c.gbnf": ("statement", 1, ["int main(){x = 1;}", "float f(int a){return a;}"],
               ["int main(){x=1;}", "main(){}"]),
    "chess.gbnf": (None, None, ["1. e4 e5\n2. Nf3 Nc6\n"], ["1. e4 e5\n", "1. e9 e5\n2. a3 a4\n"]),
    "english.gbnf": (None, None, ["Hello, world!"], ["Hello  world", "é"]),
    "japanese.gbnf": (None, None, ["こんにちは 世界"], ["hello", "こんにちは  世界"]),
    "json.gbnf": ("object", 2, ['{"a": [1, "x"]}', "{}"], ["[]", '{"a": }', '{"a": 01}']),
    "json_arr.gbnf": ("value", 2, ['[\n{"a": 1},\n2]', "[\n]"], ["[]", "{}"]),
    "list.gbnf": (None, None, ["- a\n- bc\n"], ["- \n", "a\n", "- a"]),
}


@pytest.mark.parametrize("name", sorted(SDIST))
def test_sdist_grammar(sdist, name):
    rec, depth, good, bad = SDIST[name]
    text = sdist[name]
    if rec is None:
        g = parse_gbnf(text, strict_recursion=True, source=name)
        assert recursive_rules(g) == []
    else:
        with pytest.raises(GBNFError, match=f"{name}:\\d+:\\d+: rule '{rec}' is recursive"):
            parse_gbnf(text, strict_recursion=True, source=name)
        g = parse_gbnf(text, max_depth=depth, source=name)
        assert rec in recursive_rules(g)
    dfa = compile_dfa(g)
    eng = LlamaGrammarEngine(text)
    for s in good:
        assert dfa.accepts(s.encode()), s
        assert eng.accepts(s.encode()), s
    for s in bad:
        assert not dfa.accepts(s.encode()), s
        assert not eng.accepts(s.encode()), s
