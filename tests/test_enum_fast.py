"""Large enums (issue 14): one minimal automaton leaf instead of a Choice of literals.

The reference is the Choice of literals itself (``ENUM_AUTOMATON_ABOVE`` raised above the
enum's size): the languages must be equal (an exact check: both differences are empty), the
masks on a hand-built vocabulary equal along random walks (each finished walk validated by
``jsonschema``), the native builder equal to the pure-Python one, and every located
schema error unchanged.  No wall-clock assertion: speed is ``evals/bench/counted.py``.
"""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import decoding.backends.automaton as automaton
import decoding.frontends.jsonschema.compile as front
from decoding.backends.automaton import compile_dfa, regular_dfa
from decoding.backends.gbnf.emit import to_gbnf
from decoding.backends.select import compile_grammar
from decoding.errors import LimitError, SchemaError
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.jsonschema.jsonstr import dumps
from decoding.ir import Dfa, Diff, Grammar, Lit
from decoding.ir.literals import build_minimal, literal_set
from decoding.runtime.matcher import Matcher
from decoding.testing import random_walk
from decoding.vocab import Vocab

BIG = 300  # above ENUM_AUTOMATON_ABOVE: the automaton leaf
D4 = "http://json-schema.org/draft-04/schema#"

ENUMS = {
    "escapes": [f'q"{i}\\' for i in range(BIG)] + ["a\nb", "\t", "\u0001", "\u001f", "/", "\\u0041", ""],
    "chinese": [f"中文{chr(0x4E00 + i)}{i}" for i in range(BIG)] + ["😀", "é", "e\u0301"],
    "numbers": list(range(BIG)) + [-1, 2.5, -0.0, 1e100, 1.5e-7, 10**20, 12.0],
    "mixed": [f"s{i}" for i in range(BIG)] + [None, True, False, 0, "0", [], {}, [1, "a"], {"k": [None]}],
    "duplicates": [f"d{i % 50}" for i in range(BIG)] + [1, 1.0, True, "1"],
    "prefixes": ["a" * i for i in range(1, BIG)] + [f"ab{i}" for i in range(BIG)] + [1, 12, 123, 1234],
    "items": [f"item_{i:05d}_value" for i in range(5000)],
}


def _reference(schema: dict, monkeypatch) -> Grammar:
    """The grammar as compiled before: a Choice of literals, whatever the enum's size."""
    with monkeypatch.context() as m:
        m.setattr(front, "ENUM_AUTOMATON_ABOVE", 10**9)
        return compile_schema(schema).grammar


def _same_language(a, b) -> bool:
    """Exactly the same strings (regular nodes): both differences are empty."""
    return regular_dfa(Diff(a, b)) is None and regular_dfa(Diff(b, a)) is None


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_big_enum_is_one_automaton_leaf_with_the_same_language(name, monkeypatch):
    schema = {"enum": ENUMS[name]}
    new = compile_schema(schema).grammar.rule("root")
    old = _reference(schema, monkeypatch).rule("root")
    assert isinstance(new, Dfa) and not isinstance(old, Dfa)
    assert _same_language(new, old)


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_big_enum_accepts_exactly_its_values(name):
    values = ENUMS[name]
    dfa = compile_dfa(compile_schema({"enum": values}).grammar)
    texts = {dumps(v).encode() for v in values}  # canonical spelling: 1.0 is "1"
    for t in texts:
        assert dfa.accepts(t), t
    rng = random.Random(name)
    for t in rng.sample(sorted(texts), 40):
        for bad in (t[:-1], t + b" ", t + t[-1:], b" " + t, t.replace(b'"', b"'"), t.upper()):
            if bad not in texts:
                assert not dfa.accepts(bad), bad


@pytest.mark.parametrize("accepted,rejected", [
    ('"q\\"7\\\\"', '"q"7\\"'), ('"a\\nb"', '"a\nb"'), ('"\\u0001"', '"\\u0001 "'), ('"\\\\u0041"', '"A"'),
    ('"中文一0"', '"中文一1"'), ('"😀"', '"\\ud83d\\ude00"'), ('-1', '-1.0'), ('2.5', '2.50'), ('1e+100', '1e100'),
    ('100000000000000000000', '1e20'), ('12', '12.0'), ('null', 'nul'), ('[1,"a"]', '[1, "a"]'), ('{}', '{ }'),
    ('{"k":[null]}', '{"k":null}'), ('"d49"', '"d50"'), ('1', '1.0'), ('true', 'True'), ('""', '"'),
])
def test_spelled_values_accepted_and_near_misses_rejected(accepted, rejected):
    values = [v for vals in ENUMS.values() for v in vals if not isinstance(v, str) or not v.startswith("item_")]
    dfa = compile_dfa(compile_schema({"enum": values}).grammar)
    assert dfa.accepts(accepted.encode()) and not dfa.accepts(rejected.encode())


def test_small_enum_stays_literals():
    node = compile_schema({"enum": ["a", "b", 1]}).grammar.rule("root")
    assert not isinstance(node, Dfa) and all(isinstance(x, Lit) for x in node.items)


def test_literal_set_native_equals_reference():
    rng = random.Random(7)
    for _ in range(400):
        words = sorted({bytes(rng.choice(b"ab\x00\xff\"") for _ in range(rng.randint(0, 7)))
                        for _ in range(rng.randint(2, 60))})
        assert automaton._native_literal_dfa(words) == build_minimal(words), words


def test_literal_set_is_minimal_and_exact():
    words = [b"", b"ab", b"abc", b"b", b"xb", b"xbc"]
    node = literal_set(words + [b"ab"])
    assert isinstance(node, Dfa) and len(node.edges) == 4  # {"", ab, abc, b, xb, xbc}: 4 states
    dfa = compile_dfa(Grammar.single(node))
    for w in (b"", b"ab", b"abc", b"b", b"xb", b"xbc"):
        assert dfa.accepts(w)
    for w in (b"a", b"x", b"abcc", b"bc", b"xab", b"bb"):
        assert not dfa.accepts(w)
    assert literal_set([b"only"]) == Lit(b"only")


def test_unsorted_words_are_refused_by_both_builders():
    with pytest.raises(Exception):
        build_minimal([b"b", b"a"])
    with pytest.raises(ValueError):
        automaton._native_literal_dfa([b"b", b"a"])


TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in range(1, 256)], b'"item_0', b'_value"', b"12", b'"s1',
                         b"\\\"", b"\xe4\xb8\xad\xe6\x96\x87", b"null", b'"d', b"aaaa", b'ab1'], eog_ids=[0])


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_masks_equal_the_reference_along_random_walks(name, monkeypatch):
    schema = {"enum": ENUMS[name]}
    new = compile_grammar(compile_schema(schema).grammar, TINY)
    old = compile_grammar(_reference(schema, monkeypatch), TINY)
    rng = np.random.default_rng(3)
    for _ in range(12):
        walk = random_walk(new, rng, max_steps=400)
        a, b = Matcher(new), Matcher(old)
        for t in walk.tokens:
            assert np.array_equal(a.mask(), b.mask())
            assert a.advance(t) and b.advance(t)
        assert np.array_equal(a.mask(), b.mask())
        assert walk.finished
        jsonschema.validate(json.loads(walk.text), schema)


def test_big_enum_in_an_object_and_an_array_same_language(monkeypatch):
    schema = {"type": "object", "properties": {
        "a": {"enum": ENUMS["chinese"]}, "b": {"type": "array", "items": {"enum": ENUMS["numbers"]}, "maxItems": 3}},
        "required": ["a"]}
    new = compile_dfa(compile_schema(schema).grammar)
    old = compile_dfa(_reference(schema, monkeypatch))
    rng = np.random.default_rng(5)
    cg = compile_grammar(compile_schema(schema).grammar, TINY)
    for _ in range(10):
        text = random_walk(cg, rng, max_steps=600).text
        jsonschema.validate(json.loads(text), schema)
        assert new.accepts(text) and old.accepts(text)
    assert new.n_states == old.n_states and new.accepting.sum() == old.accepting.sum()


def test_gbnf_export_of_a_big_enum():
    text = to_gbnf(compile_schema({"enum": ENUMS["chinese"]}).grammar)
    assert "中" in text and text.startswith("root ::=")


# ---------------------------------------------------------------- errors stay located

@pytest.mark.parametrize("schema,pointer", [
    ({"properties": {"a": {"enum": ENUMS["items"]}, "b": {"minLength": -1}}}, "/properties/b/minLength"),
    ({"anyOf": [{"enum": ENUMS["items"]}, {"type": "strin"}]}, "/anyOf/1/type"),
    ({"$schema": D4, "enum": ENUMS["items"] + ["item_00007_value"]}, "/enum"),
    ({"$schema": D4, "enum": []}, "/enum"),
    ({"$schema": D4, "properties": {"x": {"enum": list(range(BIG)) + [5]}}}, "/properties/x/enum"),
    ({"enum": {"a": 1}}, "/enum"),
    ({"enum": ENUMS["items"], "maxLength": "3"}, "/maxLength"),
    ({"enum": ENUMS["items"][:10] + [float("nan")] + ENUMS["items"][10:]}, "/enum/10"),
    ({"enum": ENUMS["items"] + ["bad \ud800"]}, "/enum/5000"),
    ({"properties": {"p": {"const": ENUMS["items"], "type": 3}}}, "/properties/p/type"),
])
def test_schema_errors_located_with_big_enums(schema, pointer):
    with pytest.raises(SchemaError) as e:
        compile_schema(schema)
    assert e.value.pointer == pointer


def test_draft4_duplicate_values_still_rejected_and_draft7_accepted():
    values = ENUMS["items"] + [ENUMS["items"][3]]
    with pytest.raises(SchemaError, match="metaschema Draft4") as e:
        compile_schema({"$schema": D4, "enum": values})
    assert e.value.pointer == "/enum"
    assert isinstance(compile_schema({"$schema": "http://json-schema.org/draft-07/schema#", "enum": values})
                      .grammar.rule("root"), Dfa)


def test_enum_over_max_nfa_is_the_same_limit_error(monkeypatch):
    schema = {"properties": {"e": {"enum": ENUMS["items"]}}}
    with pytest.raises(LimitError) as new:
        compile_schema(schema, max_nfa=50_000)
    with monkeypatch.context() as m:
        m.setattr(front, "ENUM_AUTOMATON_ABOVE", 10**9)
        with pytest.raises(LimitError) as old:
            compile_schema(schema, max_nfa=50_000)
    assert (new.value.pointer, str(new.value)) == (old.value.pointer, str(old.value)) == \
        ("/properties/e/enum", str(old.value))
    assert isinstance(compile_schema(schema, max_nfa=200_000).grammar.rule("root"), object)


def test_default_thresholds():
    """Every enum above ENUM_AUTOMATON_ABOVE values is a leaf, short values too (the counted
    back-end counts a unit holding a Dfa leaf); at or below it, literals."""
    assert isinstance(compile_schema({"enum": ENUMS["items"]}).grammar.rule("root"), Dfa)
    assert isinstance(compile_schema({"enum": [f"w{i}" for i in range(BIG)]}).grammar.rule("root"), Dfa)
    assert not isinstance(compile_schema({"enum": [f"w{i}" for i in range(front.ENUM_AUTOMATON_ABOVE)]})
                          .grammar.rule("root"), Dfa)
    g = compile_schema({"type": "array", "items": {"enum": [f"w{i}" for i in range(BIG)]}, "maxItems": 100_000})
    assert compile_grammar(g.grammar, TINY).backend == "counted"
