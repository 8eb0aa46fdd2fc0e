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


# ------------------------------------------------------------------ the digest's folded text
def _folded_ref(g: Grammar, above: int) -> str:
    """The text :func:`grammar_digest` hashes, written independently from ``to_data(g)``:
    bottom-up, a subtree text longer than ``above`` becomes ``["h","<sha256 of it>"]``."""
    import hashlib

    def fold(t: str) -> str:
        return '["h","' + hashlib.sha256(t.encode("utf-8")).hexdigest() + '"]' if len(t) > above else t

    def text(d) -> str:
        tag = d[0] if isinstance(d, list) and d and isinstance(d[0], str) else None
        if tag in ("seq", "choice", "inter"):
            return fold(f'["{tag}",[' + ",".join(text(c) for c in d[1]) + "]]")
        if tag == "repeat":
            return fold(f'["repeat",{text(d[1])},{canonical_text(d[2])},{canonical_text(d[3])}]')
        if tag == "diff":
            return fold(f'["diff",{text(d[1])},{text(d[2])}]')
        return fold(canonical_text(d))

    data = to_data(g)
    rules = ",".join(f"[{canonical_text(name)},{text(node)}]" for name, node in data["rules"])
    return f'{{"max_depth":{canonical_text(data["max_depth"])},"rules":[{rules}],"start":{canonical_text(data["start"])}}}'


def _sha(t: str) -> str:
    import hashlib
    return hashlib.sha256(t.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("above", [16, 100, None])
def test_digest_is_the_folded_text(above, monkeypatch):
    """On hand-made and real grammars, with the default threshold and with small ones that
    fold nearly everything, the digest is sha256 of the folded text written from to_data."""
    import decoding.ir.key as key
    if above is not None:
        monkeypatch.setattr(key, "DIGEST_FOLD_ABOVE", above)
    t = key.DIGEST_FOLD_ABOVE
    grammars = list(HAND.values())
    for source, kind, opts in _sources()[:30]:
        try:
            grammars.append(build_grammar(source, kind, **opts)[0])
        except DecodingError:
            continue
    folded = 0
    for g in grammars:
        ref = _folded_ref(g, t)
        assert grammar_digest(g) == _sha(ref)
        folded += '["h","' in ref
    assert folded >= (20 if above is not None else 1)


def test_small_grammars_keep_the_unfolded_digest():
    for name, g in HAND.items():
        assert grammar_digest(g) == _sha(canonical_text(to_data(g))), name


def test_folded_digest_tells_deep_changes_apart():
    """A one-byte change deep inside a subtree that is folded changes the digest; the same
    grammar built twice (other node objects) has the same digest."""
    def big(last: str) -> Grammar:
        words = [lit(f"word{i:04d}") for i in range(600)] + [lit(last)]
        return Grammar.single(seq(lit("{"), choice(*words), lit("}")))
    a, b, c = big("zz"), big("zz"), big("zy")
    assert len(canonical_ir_text(a)) > 2 * 2048
    assert grammar_digest(a) == grammar_digest(b)
    assert grammar_digest(a) != grammar_digest(c)
    assert grammar_digest(a) != _sha(canonical_ir_text(a))  # (it was folded)


def test_digest_of_snowplow_is_linear_in_distinct_nodes():
    """sp_0's unfolded text is ~2 MB (shared subtrees written at every use); the folded one
    stays small.  (Size, not time: a test must not time.)"""
    import decoding.ir.key as key
    s = json.loads((CORPORA / "jsonschemabench" / "Snowplow" / "sp_0_Normalized.json").read_text())["schema"]
    g, _ = build_grammar(s, "json-schema")
    full = canonical_ir_text(g)
    folded = key._ir_text(g, key.DIGEST_FOLD_ABOVE)
    assert len(full) > 1_000_000
    assert len(folded) < len(full) // 20
    assert grammar_digest(g) == _sha(_folded_ref(g, key.DIGEST_FOLD_ABOVE))
