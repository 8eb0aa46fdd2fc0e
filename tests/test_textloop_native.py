"""The native plain-text chain (``_native.plain_chain``, native/src/textloop.c) against the
Python reference (:func:`decoding.backends.textloop.plain_chain_py`): the same chain
length, or the same "not uniform", for every state of real grammars and of random automata,
with int16 and int32 tables; and the native character pairs (``_native.char_pairs``) equal to
their numpy reference :func:`~decoding.backends.textloop.char_pairs_py`, array for array."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from decoding import _native
from decoding.backends.textloop import MAX_CHAIN, UNBOUNDED, char_pairs, char_pairs_py, plain_chain, plain_chain_py
from decoding.backends.tables import PROFILES, char_dfa

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpora"


def _both(dfa_trans: np.ndarray, byte_class: np.ndarray, name: str) -> None:
    cd = char_dfa(PROFILES[name])
    pairs = char_pairs(cd, byte_class)
    for got, want in zip(pairs, char_pairs_py(cd, byte_class)):
        assert got.dtype == want.dtype and np.array_equal(got, want), f"{name}: native pairs differ from the reference"
    steps: dict = {}
    for table in (dfa_trans.astype(np.int32), dfa_trans.astype(np.int16) if dfa_trans.shape[0] < 32767 else None):
        if table is None:
            continue
        table = np.ascontiguousarray(table)
        for s in range(table.shape[0]):
            want = plain_chain_py(cd, byte_class, table, s, steps)
            got = plain_chain(pairs, table, s)
            assert got == want, f"{name} state {s}: native {got}, reference {want}"


@pytest.mark.parametrize("schema", [
    {"type": "string"},
    {"type": "string", "maxLength": 7},
    {"type": "string", "minLength": 3, "maxLength": 40},
    {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "string", "maxLength": 5}},
     "required": ["q", "n"]},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{0,3}$"}},
    {"type": "string", "pattern": "^[^a]{2,9}$"},
    {"type": "string", "format": "date-time"},
    {"enum": ["é", "中文", "x\"y"]},
    {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 4},
])
def test_native_chain_equals_the_reference_on_schemas(schema):
    from decoding.backends.automaton import compile_dfa
    from decoding.frontends.jsonschema import compile_schema

    d = compile_dfa(compile_schema(schema).grammar)
    for name in PROFILES:
        _both(d.trans, d.byte_class, name)


@pytest.mark.parametrize("split", ["Kubernetes", "Glaiveai2K"])
def test_native_chain_equals_the_reference_on_shared_schemas(split):
    from decoding.backends.automaton import compile_dfa
    from decoding.errors import GrammarError
    from decoding.frontends.jsonschema import compile_schema

    files = sorted((SHARED / "jsonschemabench" / split).glob("*.json"))[::40][:8]
    assert files
    done = 0
    for f in files:
        try:
            d = compile_dfa(compile_schema(json.loads(f.read_text())["schema"]).grammar)
        except GrammarError:
            continue
        for name in PROFILES:
            _both(d.trans, d.byte_class, name)
        done += 1
    assert done >= 4


def test_native_chain_equals_the_reference_on_xml_text():
    from decoding.backends.automaton import compile_dfa
    from decoding.frontends.xml.dtd import parse_dtd
    from decoding.frontends.xml.grammar import dtd_grammar

    g = dtd_grammar(parse_dtd("<!ELEMENT note (to, body)><!ELEMENT to (#PCDATA)><!ELEMENT body (#PCDATA)>"), "note")
    d = compile_dfa(g)
    _both(d.trans, d.byte_class, "xml-text")


@pytest.mark.parametrize("seed", range(40))
def test_native_chain_equals_the_reference_on_random_automata(seed):
    """Random tables over random byte classes, biased towards uniform steps (a few states
    where every byte goes to one state, chains, cycles, dead bytes)."""
    rng = np.random.default_rng(seed)
    n_cls = int(rng.integers(1, 12))
    byte_class = rng.integers(0, n_cls, 256).astype(np.uint8)
    byte_class[:n_cls] = np.arange(n_cls)  # every class used
    n = int(rng.integers(1, 30))
    t = np.full((n, n_cls + int(rng.integers(0, 3))), -1, dtype=np.int32)
    for s in range(n):
        kind = rng.integers(0, 4)
        if kind == 0:
            t[s, :n_cls] = rng.integers(0, n)  # uniform
        elif kind == 1:
            t[s, :n_cls] = rng.integers(-1, n, n_cls)  # anything
        elif kind == 2:
            t[s, :n_cls] = min(s + 1, n - 1) if rng.random() < 0.8 else -1
        t[s, n_cls:] = rng.integers(-1, n, t.shape[1] - n_cls)
    for name in PROFILES:
        _both(t, byte_class, name)


@pytest.mark.parametrize("n", [1, 2, 100, MAX_CHAIN, MAX_CHAIN + 1])
def test_long_chains_and_the_length_cap(n):
    """The body of a string of at most n characters: a chain of n uniform steps; longer than
    MAX_CHAIN: MAX_CHAIN (the same mask: no plain token is that long)."""
    from decoding.backends.automaton import compile_dfa
    from decoding.frontends.jsonschema import compile_schema

    d = compile_dfa(compile_schema({"type": "string", "maxLength": n}).grammar)
    pairs = char_pairs(char_dfa(PROFILES["json-string"]), d.byte_class)
    table = np.ascontiguousarray(d.trans)
    body = d.run(b'"')
    assert plain_chain(pairs, table, body) == min(n, MAX_CHAIN)
    if n >= 2:
        assert plain_chain(pairs, table, d.run(b'"ab')) == min(n - 2, MAX_CHAIN)
    assert plain_chain(pairs, table, body, max_len=7) == min(n, 7)  # capped: the mask of >= 7 alike


def test_an_unbounded_string_body_is_a_cycle():
    from decoding.backends.automaton import compile_dfa
    from decoding.frontends.jsonschema import compile_schema

    d = compile_dfa(compile_schema({"type": "string"}).grammar)
    pairs = char_pairs(char_dfa(PROFILES["json-string"]), d.byte_class)
    assert plain_chain(pairs, np.ascontiguousarray(d.trans), d.run('"中'.encode())) == UNBOUNDED
    assert plain_chain(pairs, np.ascontiguousarray(d.trans), 0) == 0  # before the quote: no plain character


@pytest.mark.parametrize("bad, match", [
    (lambda p, t: (p[0][:-1], p[1], p[2], t.reshape(-1), t.shape[1], 0, 10), "row_off"),
    (lambda p, t: (p[0], p[1], p[2], t.reshape(-1), t.shape[1], 5, 10), "state"),
    (lambda p, t: (p[0], p[1], p[2], t.reshape(-1), 3, 0, 10), "multiple"),
    (lambda p, t: (p[0], p[1] + 7, p[2], t.reshape(-1), t.shape[1], 0, 10), "class"),
    (lambda p, t: (p[0], p[1], p[2] + 20, t.reshape(-1), t.shape[1], 0, 10), "next state"),
    (lambda p, t: (p[0], p[1], p[2], t.reshape(-1).astype(np.float32), t.shape[1], 0, 10), "int32 or int16"),
])
def test_bad_arguments_are_clear_errors(bad, match):
    byte_class = np.zeros(256, dtype=np.uint8)
    byte_class[0x22] = 1
    pairs = char_pairs(char_dfa(PROFILES["json-string"]), byte_class)
    t = np.array([[1, -1], [1, -1]], dtype=np.int32)
    with pytest.raises((ValueError, TypeError), match=match):
        _native.plain_chain(*bad(pairs, t))


@pytest.mark.parametrize("bad, match", [
    (lambda cd, bc, ro, c, n: (cd[:-1], bc, ro, c, n), "char_dfa"),
    (lambda cd, bc, ro, c, n: (cd, bc[:-1], ro, c, n), "byte_class: expected 256"),
    (lambda cd, bc, ro, c, n: (cd, bc, ro[:-1], c, n), "row_off"),
    (lambda cd, bc, ro, c, n: (cd, bc, ro, c[:10], n), "room"),
    (lambda cd, bc, ro, c, n: (cd, bc + 300, ro, c, n), "more than 256 byte classes"),
    (lambda cd, bc, ro, c, n: (cd.astype(np.int32), bc, ro, c, n), "char_dfa: expected items"),
])
def test_char_pairs_bad_arguments_are_clear_errors(bad, match):
    cd = char_dfa(PROFILES["json-string"]).reshape(-1)
    nc = cd.shape[0] // 256
    args = (cd, np.zeros(256, np.uint16), np.empty(nc + 1, np.int32), np.empty(nc * 256, np.uint8),
            np.empty(nc * 256, np.int16))
    with pytest.raises((ValueError, TypeError), match=match):
        _native.char_pairs(*bad(*args))
