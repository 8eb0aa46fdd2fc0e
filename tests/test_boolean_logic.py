"""Intersection and difference of regular sub-languages (``Inter``/``Diff`` IR nodes):
the same language on both back-ends, checked against a brute-force oracle over all short
strings of a small alphabet; refusals of non-regular operands are located."""

from __future__ import annotations

import itertools
import re

import pytest

from decoding.backends.automaton import NFAMatcher, compile_dfa
from decoding.backends.select import compile_grammar
from decoding.errors import GrammarError
from decoding.ir import (NOTHING, Grammar, Ref, Special, byteset, choice, diff, from_data, inter,
                         lit, opt, plus, rep, seq, star, to_data)
from decoding.vocab import Vocab

AB = byteset([(97, 98)])  # a | b
CASES = [
    # (node, python regex of the same language over {a, b})
    (inter(star(AB), rep(AB, 2, 3)), r"[ab]{2,3}"),
    (diff(star(AB), star(lit("a"))), r"(?![a]*$)[ab]*"),
    (diff(rep(AB, 0, 4), seq(star(AB), lit("bb"), star(AB))), r"(?!.*bb)[ab]{0,4}"),
    (inter(star(AB), seq(star(AB), lit("a")), seq(lit("b"), star(AB))), r"b[ab]*a"),
    (seq(lit("a"), diff(plus(AB), lit("b")), lit("b")), r"(?!abb$)a[ab]+b"),
    (diff(star(AB), NOTHING), r"[ab]*"),
    (choice(lit("b"), inter(lit("a"), lit("b"))), r"b"),
    (opt(diff(inter(star(AB), rep(AB, 1, 2)), lit("aa"))), r"(?!aa$)[ab]{0,2}"),
    # nested: (ab)* minus (the strings not ending in b, the empty one included)
    (diff(star(lit("ab")), diff(star(AB), seq(star(AB), lit("b")))), r"(ab)+"),
]
STRINGS = [b"".join(p) for n in range(6) for p in itertools.product([b"a", b"b"], repeat=n)]


def _vocab() -> Vocab:
    return Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"ab", b"ba", b"aa", b"</s>"],
                            eog_ids=[259])


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("backend", ["dfa", "pushdown", "nfa"])
def test_language(case: int, backend: str) -> None:
    node, rx = CASES[case]
    g = Grammar("root", (("root", seq(Ref("x"), node)), ("x", lit(""))))
    if backend == "nfa":
        m = NFAMatcher(g)
        got = [m.accepts(s) for s in STRINGS]
    else:
        cg = compile_grammar(g, _vocab(), backend=backend)
        got = [cg.accepts(s) for s in STRINGS]
    want = [re.fullmatch(rx, s.decode()) is not None for s in STRINGS]
    assert got == want


def test_round_trip_and_key() -> None:
    node = diff(inter(star(AB), rep(AB, 1, 3)), lit("ab"))
    g = Grammar.single(node)
    assert from_data(to_data(g)) == g


@pytest.mark.parametrize("node", [
    inter(star(AB), Ref("other")),
    diff(star(AB), seq(lit("a"), Ref("other"))),
    diff(star(AB), Special("<x>")),
])
def test_non_regular_operand_refused(node) -> None:
    with pytest.raises(GrammarError, match="rule 'root'.*intersection/difference operand"):
        Grammar("root", (("root", node), ("other", lit("a"))))


def test_empty_intersection_is_empty_language() -> None:
    with pytest.raises(GrammarError, match="accepts no string"):
        compile_dfa(Grammar.single(inter(lit("a"), lit("b"))))
    assert compile_dfa(Grammar.single(choice(lit("x"), diff(lit("a"), AB)))).accepts(b"x")
