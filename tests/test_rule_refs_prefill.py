"""``Grammar.rule_refs`` of a grammar with no Ref at all is filled when the grammar is built
(every rule refers to none): the same as the walk of each rule body, on Ref-free and other
grammars (JSON Schemas, hand-written IR)."""

from __future__ import annotations

import pytest

from decoding.errors import DecodingError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, choice, lit, seq, star, walk

from conftest import HAND_SCHEMAS, bench_schemas

SCHEMAS = {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **bench_schemas(5)}


def _walked(g: Grammar, name: str) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for n in walk(g.rule(name)):
        if isinstance(n, Ref):
            out.setdefault(n.name)
    return tuple(out)


def _grammars():
    for name, s in sorted(SCHEMAS.items()):
        try:
            yield name, compile_schema(s).grammar
        except DecodingError:
            continue
    yield "ir/ref-free", Grammar("a", (("a", seq(lit("x"), star(lit("y")))), ("b", lit("z"))))
    yield "ir/refs", Grammar("a", (("a", seq(lit("x"), Ref("b"), choice(Ref("c"), Ref("b")))), ("b", lit("z")),
                                   ("c", seq(Ref("b"), lit("w")))))


@pytest.mark.parametrize("name,g", list(_grammars()))
def test_rule_refs_as_walked(name, g):
    fresh = Grammar(g.start, g.rules, g.max_depth)
    for rule, _ in g.rules:
        assert fresh.rule_refs(rule) == _walked(g, rule)
