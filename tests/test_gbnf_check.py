"""llama.cpp parse check, verdict helper and LlamaGrammar adapter."""

from __future__ import annotations

import pytest

from decoding.errors import GBNFError, UsageError
from decoding.runtime.llama_grammar import special_token_ids, to_llama_grammar
from decoding.backends.gbnf.check import LlamaGrammarEngine, check_gbnf, llama_accepts, load_vocab_model
from decoding.ir import Grammar, Special, lit, seq


@pytest.mark.parametrize("text,line,col,needle", [
    ('root ::= "a"\nfoo ::= ("b"\n', 3, 1, "expecting ')'"),
    ('root ::= "a" \nfoo ::= "\\q" "b"\n', 2, 10, "unknown escape"),
    ('root ::= x\n', None, None, "Undefined rule identifier 'x'"),
    ('root ::= root "a" | "b"\n', None, None, "left recursion"),
    ('root ::= "a"{3000}\n', None, None, "number of repetitions exceeds"),
    ('start ::= "a"\n', None, None, "does not contain a 'root' symbol"),
    ('root ::= "a" <nosuchtoken>\n', None, None, "invalid token"),
])
def test_check_gbnf_reports_llama_errors(text, line, col, needle):
    with pytest.raises(GBNFError) as ei:
        check_gbnf(text)
    assert needle in str(ei.value)
    assert ei.value.line == line and ei.value.column == col


@pytest.mark.parametrize("text", ['root ::= "a" | \n', 'root ::= [a-z]+ <[128000]>\n',
                                  'root ::= "x"{2000}\n'])
def test_check_gbnf_passes_valid_grammars(text):
    check_gbnf(text)


def test_verdict_helper():
    assert llama_accepts('root ::= "{" [a-z]+ "}"\n', b"{abc}")
    assert not llama_accepts('root ::= "{" [a-z]+ "}"\n', b"{abc")
    eng = LlamaGrammarEngine('root ::= "ab"\n')
    assert eng.accepts_tokens(eng.tokenize(b"a"), complete=False)
    assert not eng.accepts_tokens(eng.tokenize(b"a"))
    with pytest.raises(UsageError, match="offset 1"):
        eng.accepts(b"a\x00")
    eng.reset()
    with pytest.raises(GBNFError):
        eng.accept(eng.tokenize(b"z")[0])


def test_to_llama_grammar_from_ir_and_text():
    llm = load_vocab_model()
    g = Grammar.single(seq(Special("<|begin_of_text|>"), lit("ok")))
    assert special_token_ids(g, llm) == {"<|begin_of_text|>": llm.token_bos()}
    lg = to_llama_grammar(g, llm=llm)
    assert f"<[{llm.token_bos()}]>" in lg._grammar
    assert to_llama_grammar('root ::= "x"\n')._grammar == 'root ::= "x"\n'
    lg2 = to_llama_grammar('top ::= "x"\n', root="top")
    assert lg2._root == "top"
    with pytest.raises(GBNFError, match="llama.cpp rejects"):
        to_llama_grammar('root ::= ("x"\n')
