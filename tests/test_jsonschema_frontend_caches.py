"""The JSON Schema front-end's per-process and per-compile shortcuts give what the plain
computations give: ``logic.not_in`` (its per-process character nodes) the trie IR of the
plain construction, the shared size estimates those of a fresh estimate, ``_text_holds``
the verdict (and errors) of searching ``json.dumps``, ``_separators`` the nodes of the
options asked for."""

from __future__ import annotations

import json
import random
import string

import pytest

import decoding.frontends.jsonschema.compile as cm
import decoding.frontends.jsonschema.logic as lg
from decoding.frontends.jsonschema.jsonstr import any_json_char, json_char
from decoding.ir import EMPTY, Lit, choice, complement_ranges, seq, star
from decoding.ir.size import _node_estimate


def _plain_not_in(names: list[str]):
    """logic.not_in as first written: every node made anew."""
    if not names:
        return star(any_json_char())
    trie: dict = {}
    for n in names:
        t = trie
        for ch in n:
            t = t.setdefault(ch, {})
        t[""] = {}
    anystar = star(any_json_char())

    def build(t: dict):
        alts = []
        if "" not in t:
            alts.append(EMPTY)
        kids = [c for c in t if c]
        comp = complement_ranges((ord(c), ord(c)) for c in kids)
        alts.append(seq(json_char(comp), anystar))
        for c in kids:
            alts.append(seq(json_char([(ord(c), ord(c))]), build(t[c])))
        return choice(*alts)

    return build(trie)


def _names(rnd: random.Random) -> list[str]:
    alphabet = "ab\u00e9\"\\\n\u2028" + string.ascii_lowercase[:4]
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 5))) for _ in range(rnd.randint(1, 6))]


def test_not_in_same_ir_as_plain():
    rnd = random.Random(7)
    for _ in range(300):
        names = _names(rnd)
        assert lg.not_in(names) == _plain_not_in(names), names
        assert lg.not_in(names) == lg.not_in(list(names))  # (again: from the per-process nodes)


def test_not_in_shared_parts_and_their_estimates():
    rnd = random.Random(11)
    for _ in range(60):
        names = _names(rnd)
        used: dict = {}
        node = lg.not_in(names, used)
        assert used and all(id(n) == i for i, n in used.items())
        for n in used.values():  # the same object next time, and the estimate of a fresh walk
            assert cm._shared_estimate(n) == _node_estimate(n, True)
        assert _node_estimate(node, True) == _node_estimate(_plain_not_in(names), True)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"alpha": {"type": "string"}, "beta": {"type": "integer"},
                                      "alpine": {"type": "boolean"}}, "additionalProperties": True},
    {"type": "object", "properties": {"x": {"type": "string"}}, "patternProperties": {"^y": {"type": "integer"}},
     "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"k1": {}, "k2": {}}, "additionalProperties": {"type": "number"},
     "minProperties": 1},
])
def test_compile_memo_holds_fresh_estimates(schema):
    """Every estimate in a compile's memo (seeded or made there) is what a fresh estimate
    of its node gives; the rules' too."""
    c = cm._Compiler(schema, whitespace="compact", max_ws=8, max_depth=8, free_depth=2, lenient=False)
    root = c.node(schema, "")
    memo, keep = c._estimates[True]
    nodes = {id(n): n for n in keep}
    nodes.update((i, n) for i, n in zip(map(id, cm._SHARED_ESTIMATES[1]), cm._SHARED_ESTIMATES[1]))
    checked = 0
    for i, est in memo.items():
        n = nodes.get(i)
        if n is not None:
            assert est == _node_estimate(n, True)
            checked += 1
    assert checked > 20
    for body in [root, *c.rules.values()]:
        assert cm._estimate(body, True, c._estimates) == _node_estimate(body, True)


def test_text_holds_is_the_json_text_search():
    word = "$dynamicRef"
    docs = [{"a": 1}, {"$dynamicRef": 1}, {"a": ["x", {"b": "..$dynamicRef.."}]}, ["$dynamicRe", "f"],
            {"enum": [{"$dynamicRef": "#x"}]}, {"a": 1.5, "b": None, "c": True, "d": -3}, "plain",
            {"t": ("$dynamicRef",)}, {1: "a"}, {None: "$dynamicRef"}, {"a": "\u00e9$dynamicRef\n"}]
    for d in docs:
        assert cm._text_holds(d, word) == (word in json.dumps(d)), d
    deep: list = []
    for _ in range(1500):  # deeper than the walk goes: left to json.dumps
        deep = [deep]
    with pytest.raises(RecursionError):  # as json.dumps (which compile_schema runs with a higher limit)
        json.dumps(deep)
    with pytest.raises(RecursionError):
        cm._text_holds(deep, word)
    with pytest.raises(TypeError):
        cm._text_holds({"a": {1, 2}}, word)
    cyc: dict = {}
    cyc["a"] = cyc
    with pytest.raises(ValueError):
        cm._text_holds(cyc, word)


def test_separators_per_options():
    ws, comma, colon = cm._separators("flexible", 8)
    assert cm._separators("flexible", 8)[0] is ws  # kept
    assert ws.max == 8 and type(ws.max) is int
    f = cm._separators("flexible", 8.0)[0]  # not 8's nodes
    assert f == ws and type(f.max) is float
    assert cm._separators("compact", 8) == (EMPTY, Lit(b","), Lit(b":"))
    assert cm._separators("natural", 3) == (EMPTY, Lit(b", "), Lit(b": "))
    assert comma == seq(ws, Lit(b","), ws) and colon == seq(ws, Lit(b":"), ws)


def test_shared_parts_skipped_by_the_grammar_passes():
    """The not_in parts a compile records are Ref-free and productive (as a fresh walk
    finds), the tables hold the nodes they name, and skipping the parts changes neither the
    reachable rules nor the unproductive one."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {
        "$ref": "#/$defs/t"}}}, "additionalProperties": {"$ref": "#/$defs/t"},
        "$defs": {"t": {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": True}}}
    c = cm._Compiler(schema, whitespace="compact", max_ws=8, max_depth=8, free_depth=2, lenient=False)
    root = c.node(schema, "")
    assert c._shared_parts
    for i, n in c._shared_parts.items():
        assert cm._shared_productive(n) == cm._productive(n, set(), set()) is True
        assert not any(x.__class__.__name__ == "Ref" for x in cm.walk(n))
    for i, (n, _) in cm._SHARED_PRODUCTIVE.items():
        assert id(n) == i
    assert cm._reachable(root, c.rules, c._shared_parts) == cm._reachable(root, c.rules)
    assert cm._unproductive(root, c.rules, c._shared_parts) == cm._unproductive(root, c.rules) is None
