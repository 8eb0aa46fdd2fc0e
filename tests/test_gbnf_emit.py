"""GBNF back-end: names, repetition limits, UTF-8 handling, specials, round trip."""

from __future__ import annotations

import re

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import GBNFError
from decoding.backends.gbnf.check import LlamaGrammarEngine, check_gbnf, load_vocab_model
from decoding.backends.gbnf.emit import MAX_REPETITION_THRESHOLD, to_gbnf
from decoding.frontends.gbnf.parse import GBNF_MAX_DEPTH, parse_gbnf
from decoding.ir import (Grammar, Ref, Special, any_char, byteset, char_class, choice, lit, opt,
                         plus, rep, seq, star)

from gbnf_util import random_walks

RULE_LINE = re.compile(r"^([a-zA-Z0-9-]+) ::= ", re.M)


def _emit_checked(g: Grammar, **kw) -> str:
    text = to_gbnf(g, **kw)
    check_gbnf(text)
    return text


def test_rule_names_are_sanitized_and_unique():
    g = Grammar("start rule", (
        ("start rule", seq(Ref("a.b"), Ref("a_b"), Ref("root"), Ref("#/defs/x"))),
        ("a.b", lit("1")), ("a_b", lit("2")), ("root", lit("3")), ("#/defs/x", lit("4")),
    ))
    text = _emit_checked(g)
    names = RULE_LINE.findall(text)
    assert names[0] == "root"
    assert len(set(names)) == len(names) == 5
    assert all(re.fullmatch(r"[a-zA-Z0-9-]+", n) for n in names)
    assert LlamaGrammarEngine(text).accepts(b"1234")


def test_bounded_repetition_uses_braces_not_optional_chains():
    g = Grammar.single(seq(lit("x"), rep(char_class([(ord("a"), ord("z"))]), 0, 7)))
    text = _emit_checked(g)
    assert "{0,7}" in text and "?" not in text
    eng = LlamaGrammarEngine(text)
    assert eng.accepts(b"xabcdefg") and not eng.accepts(b"xabcdefgh")


@pytest.mark.parametrize("lo,hi", [(0, 2500), (2100, 2100), (1999, 4500), (4001, None)])
def test_repetition_above_llama_threshold_is_split(lo, hi):
    g = Grammar.single(rep(lit("a"), lo, hi))
    text = _emit_checked(g)
    for m in re.finditer(r"\{(\d+)(?:,(\d*))?\}", text):
        assert all(int(x) <= MAX_REPETITION_THRESHOLD for x in m.groups() if x)
    eng = LlamaGrammarEngine(text)
    top = hi if hi is not None else lo + 50
    # the llama-bpe vocabulary has multi-"a" tokens, so long runs are cheap to feed
    assert eng.accepts(b"a" * top)
    assert eng.accepts(b"a" * lo) or lo == 0
    if lo > 0:
        assert not eng.accepts(b"a" * (lo - 1))
    if hi is not None:
        assert not eng.accepts(b"a" * (hi + 1))


def test_recursion_stays_unbounded():
    g = Grammar("v", (("v", choice(lit("x"), seq(lit("["), Ref("v"), lit("]")))),), max_depth=2)
    text = _emit_checked(g)
    deep = b"[" * 40 + b"x" + b"]" * 40
    assert not compile_dfa(g).accepts(deep)
    assert LlamaGrammarEngine(text).accepts(deep)


def test_char_class_becomes_codepoint_class():
    g = Grammar.single(plus(char_class([(0x41, 0x5A), (0xE9, 0xE9), (0x4E00, 0x9FFF),
                                        (0x1F600, 0x1F64F)])))
    text = _emit_checked(g)
    assert text.count("::=") == 1 and "[" in text
    eng = LlamaGrammarEngine(text)
    assert eng.accepts("Aé中😀".encode())
    assert not eng.accepts("Aè".encode())


def test_negated_class_is_emitted_negated():
    g = Grammar.single(star(char_class([(ord('"'), ord('"')), (0, 0x1F)], negate=True)))
    text = _emit_checked(g)
    assert "[^" in text
    eng = LlamaGrammarEngine(text)
    assert eng.accepts("abc é 😀".encode()) and not eng.accepts(b'a"b')


def test_byte_level_class_goes_through_codepoint_automaton():
    # [^"\\] over raw bytes: not aligned to characters; GBNF keeps its UTF-8 strings
    body = byteset([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xFF)])
    g = Grammar.single(seq(lit('"'), star(body), lit('"')))
    text = _emit_checked(g)
    eng = LlamaGrammarEngine(text)
    dfa = compile_dfa(g)
    for s in ['"abc"', '"é€😀"', '""']:
        assert eng.accepts(s.encode()) and dfa.accepts(s.encode())
    for s in ['"a"b"', '"a\\"', 'abc']:
        assert not eng.accepts(s.encode()) and not dfa.accepts(s.encode())


def test_split_utf8_literal_is_rejoined():
    # the character é spelled as two IR pieces: lead byte literal then continuation class
    g = Grammar.single(seq(lit("x"), lit(b"\xc3"), byteset([(0xA9, 0xA9)]), lit("y")))
    text = _emit_checked(g)
    assert LlamaGrammarEngine(text).accepts("xéy".encode())


def test_invalid_utf8_only_is_an_error():
    g = Grammar.single(seq(lit("a"), byteset([(0xFF, 0xFF)])))
    with pytest.raises(GBNFError, match="well-formed UTF-8"):
        to_gbnf(g)


def test_specials_become_token_refs_with_vocab():
    llm = load_vocab_model()
    bos = llm.token_bos()
    g = Grammar.single(seq(Special("<|begin_of_text|>"), lit("hi"), opt(Special("<x>"))))
    text = _emit_checked(g, special_ids={"<|begin_of_text|>": bos})
    assert f"<[{bos}]>" in text and '"<x>"' in text
    eng = LlamaGrammarEngine(text)
    hi = eng.tokenize(b"hi")
    assert eng.accepts_tokens([bos] + hi)
    assert not eng.accepts_tokens(hi)
    # without ids the special is literal text
    assert '"<|begin_of_text|>"' in to_gbnf(g)


def test_special_token_ref_text_is_written_verbatim():
    g = parse_gbnf('root ::= <[128000]> "a"\n')
    assert "<[128000]>" in _emit_checked(g)


# ----------------------------------------------------------------------- round trip

HAND_GRAMMARS = {
    "json-ish": Grammar("value", (
        ("value", choice(lit("null"), lit("true"), Ref("num"), Ref("str"), Ref("arr"), Ref("obj"))),
        ("num", seq(opt(lit("-")), choice(lit("0"), seq(char_class([(49, 57)]),
                                                         rep(char_class([(48, 57)]), 0, 5))))),
        ("str", seq(lit('"'), rep(choice(char_class([(0x22, 0x22), (0x5C, 0x5C), (0, 0x1F)],
                                                     negate=True),
                                         seq(lit("\\"), char_class([(0x22, 0x22), (0x5C, 0x5C),
                                                                    (ord("n"), ord("n"))]))),
                                  0, 3), lit('"'))),
        ("arr", seq(lit("["), opt(seq(Ref("value"), star(seq(lit(","), Ref("value"))))), lit("]"))),
        ("obj", seq(lit("{"), opt(seq(Ref("str"), lit(":"), Ref("value"),
                                      rep(seq(lit(","), Ref("str"), lit(":"), Ref("value")), 0, 1))),
                    lit("}"))),
    ), max_depth=2),
    # loops the emitter writes as right recursion: round-tripped at GBNF's default depth
    "any-text": Grammar.single(seq(lit("<t>"), star(any_char()), lit("</t>")), max_depth=GBNF_MAX_DEPTH),
    "bytes": Grammar.single(seq(lit("'"), star(byteset([(0x20, 0x26), (0x28, 0xFF)])), lit("'")),
                            max_depth=GBNF_MAX_DEPTH),
    "counts": Grammar.single(seq(rep(lit("ab"), 2, 4), rep(char_class([(0x3B1, 0x3C9)]), 1, 3),
                                 rep(seq(lit("x"), opt(lit("y"))), 0, 2)), max_depth=GBNF_MAX_DEPTH),
}


def _roundtrip(g: Grammar, n: int = 60, seed: int = 0) -> None:
    text = to_gbnf(g)
    g2 = parse_gbnf(text, max_depth=g.max_depth)
    a, b = compile_dfa(g), compile_dfa(g2)
    for s in random_walks(a, n, seed=seed):
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            continue  # not producible through llama.cpp; dropped by design
        assert b.accepts(s), (s, text)
    for s in random_walks(b, n, seed=seed + 1):
        assert a.accepts(s), (s, text)


@pytest.mark.parametrize("name", sorted(HAND_GRAMMARS))
def test_roundtrip_hand_grammars(name):
    _roundtrip(HAND_GRAMMARS[name])


def test_split_character_in_negated_class_is_accepted():
    # llama.cpp rejects a split lead byte in [^...] when any completion is excluded; the
    # emitter therefore spells non-ASCII exclusions as positive classes
    text = 'root ::= [^"\\uFFFE-\\uFFFF]*\n'
    eng_src = LlamaGrammarEngine(text)
    s = "x\uf47f".encode()
    assert len(eng_src.tokenize(s)) == 4  # x, EF, 91, BF: the character is split
    assert not eng_src.accepts(s)  # llama.cpp's own (conservative) verdict
    emitted = _emit_checked(parse_gbnf(text))
    assert "[^" not in emitted
    assert LlamaGrammarEngine(emitted).accepts(s)
    assert not LlamaGrammarEngine(emitted).accepts('"'.encode())
