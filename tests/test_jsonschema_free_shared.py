"""The free-form value rules (``free:<d>``, ``free-member:<d>``) made once per process
(``compile._free_bodies``, with their estimates made once: ``_Compiler._seed_shared``;
issue 14) give what building them in each compile gives: the same IR, the same
dropped/ignored lists, the same errors (limits included), for every whitespace policy and
free-form depth."""

from __future__ import annotations

import dataclasses

import pytest

import decoding.frontends.jsonschema.compile as C
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Ref, choice, lit, opt, seq, star
from decoding.frontends.jsonschema.numbers import NUMBER
from decoding.limits import DEFAULT_LIMITS

from conftest import bench_schemas, frontend_outcome

FREE = {
    "true": True,
    "empty": {},
    "bare_object": {"type": "object"},
    "extras": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
    "array_of_any": {"type": "array", "items": {}, "maxItems": 3},
    "nested": {"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {}}},
                                                 "z": {"type": "array", "items": {"type": "object"}}}},
    "anyof": {"anyOf": [{"type": "object"}, {"type": "array"}, {"type": "string"}]},
    "not": {"not": {"type": "string"}},
}
SCHEMAS = {**FREE, **bench_schemas(6)}
OPTIONS = [dict(), dict(whitespace="flexible"), dict(whitespace="flexible", max_ws=3), dict(whitespace="natural"),
           dict(free_depth=0), dict(free_depth=4), dict(extra_properties="allow"),
           dict(max_nfa=300), dict(limits=dataclasses.replace(DEFAULT_LIMITS, max_nfa_states=500))]


def _free_per_compile(self, depth: int):
    """``_Compiler.free`` as it was: the rules built (and estimated) in each compile."""
    hit = self._free.get(depth)
    if hit is not None:
        return hit
    alts = [lit("null"), lit("true"), lit("false"), NUMBER, C._any_string()]
    if depth > 0:
        v = self.free(depth - 1)
        alts.append(seq(lit("["), self.ws, opt(seq(v, star(seq(self.comma, v)))), self.ws, lit("]")))
        mname = f"free-member:{depth - 1}"
        self.rules[mname] = seq(C._any_string(), self.colon, v)
        mem = Ref(mname)
        alts.append(seq(lit("{"), self.ws, opt(seq(mem, star(seq(self.comma, mem)))), self.ws, lit("}")))
    name = f"free:{depth}"
    self.rules[name] = choice(*alts)
    node = Ref(name)
    self._free[depth] = node
    return node


def _outcome(schema: object, **kw) -> tuple:
    return frontend_outcome(schema, digest=True, **kw)


@pytest.mark.parametrize("i", range(len(OPTIONS)))
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_same_as_built_per_compile(name, i, monkeypatch):
    kw = OPTIONS[i]
    new = _outcome(SCHEMAS[name], **kw)
    with monkeypatch.context() as m:
        m.setattr(C._Compiler, "free", _free_per_compile)
        old = _outcome(SCHEMAS[name], **kw)
    assert new == old
    assert _outcome(SCHEMAS[name], **kw) == new  # (the shared bodies are not disturbed)


def test_table_full_same(monkeypatch):
    """Past FREE_BODIES_MAX the bodies are made (and estimated) in each compile."""
    monkeypatch.setattr(C, "FREE_BODIES_MAX", 0)
    monkeypatch.setattr(C, "_FREE_BODIES", {})
    for name in sorted(FREE):
        new = _outcome(FREE[name])
        with monkeypatch.context() as m:
            m.setattr(C._Compiler, "free", _free_per_compile)
            assert _outcome(FREE[name]) == new
    assert not C._FREE_BODIES


def test_bodies_are_shared():
    a = compile_schema({"type": "object"}).grammar
    b = compile_schema({"type": "array", "items": {}}).grammar
    assert a.rule("free:1") is b.rule("free:1")
    c = compile_schema({"type": "object"}, whitespace="flexible").grammar
    assert c.rule("free:1") is not a.rule("free:1")  # (other separators: other bodies)
