"""``canonical_ir_text`` (each shared subtree written once) is byte-for-byte the text of
``canonical_text(to_data(g))``, so grammar digests, keys and artifact names do not change:
hand-made grammars with every node type and real JSON Schema, DTD and GBNF grammars."""

from __future__ import annotations

import json

import pytest

from decoding.errors import DecodingError
from decoding.frontends.sources import build_grammar
from decoding.ir import (Dfa, Grammar, Ref, Repeat, Special, byteset, choice, diff, inter, lit, rep, seq, star,
                         to_data)
from decoding.ir.key import canonical_ir_text, canonical_text, grammar_digest

from conftest import CORPORA

AZ = byteset([(97, 122)])
SHARED = seq(lit("é\"\\"), rep(AZ, 0, 3))

HAND = {
    "leaves": Grammar("root", (("root", seq(lit("ab"), byteset([(0, 9), (200, 255)]), Special("<|tool_call|>"),
                                            Special("北京 \"q\""), Ref("r"))), ("r", lit("")))),
    "repeats": Grammar.single(seq(Repeat(AZ, 0, None), Repeat(SHARED, 2, 2), star(AZ), rep(lit("x"), 1, 7))),
    "shared": Grammar.single(choice(SHARED, seq(SHARED, lit(","), SHARED), Repeat(SHARED, 0, 4))),
    "logic": Grammar.single(seq(inter(rep(AZ, 1, 9), seq(star(AZ), lit("q"), star(AZ))), diff(star(AZ), lit("no")))),
    "dfa_leaf": Grammar.single(seq(Dfa((((48, 57, 1),), ((48, 57, 1), (97, 97, 2)), ((0, 255, 2),)), (1, 2)),
                                   lit("!"))),
    "rules": Grammar("b", (("a", seq(lit("x"), Ref("b"))), ("b", choice(lit("y"), Ref("a")))), max_depth=5),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_grammars(name):
    g = HAND[name]
    assert canonical_ir_text(g) == canonical_text(to_data(g))


def _sources():
    out = []
    for split in ("Kubernetes", "Snowplow", "Glaiveai2K", "Github_easy"):
        files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
        for f in files[::max(1, len(files) // 8)][:8]:
            out.append((json.loads(f.read_text(encoding="utf-8"))["schema"], "json-schema", {}))
    for dtd, root in (("log4j.dtd", "log4j:configuration"), ("PropertyList-1.0.dtd", "plist"),
                      ("web-app_2_3.dtd", "web-app")):
        out.append(((CORPORA / "dtd" / dtd).read_text(encoding="utf-8"), "dtd", {"root": root}))
    for f in sorted((CORPORA / "gbnf" / "llama.cpp-0.3.36").glob("*.gbnf")):
        out.append((f.read_text(encoding="utf-8"), "gbnf", {}))
    return out


def test_real_grammars():
    seen = 0
    for source, kind, opts in _sources():
        try:
            g, _ = build_grammar(source, kind, **opts)
        except DecodingError:
            continue
        assert canonical_ir_text(g) == canonical_text(to_data(g)), kind
        seen += 1
    assert seen >= 35


def test_deep_ir_has_no_recursion_limit():
    node = lit("x")
    for _ in range(20000):
        node = Repeat(node, 0, 2)
    g = Grammar.single(node)
    assert len(grammar_digest(g)) == 64
