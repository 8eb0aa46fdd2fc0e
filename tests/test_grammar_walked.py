"""``Grammar.walked`` (issue 14): the JSON Schema front-end builds its grammar without the
``Grammar`` constructor's walk over the rules when its own reachability walk
(``reachable_rules(..., irregular=...)``) has seen every node that walk would and found
some Ref and no Special, Inter or Diff.  The grammar must be the one ``Grammar(...)``
makes: the same fields (rules table, specials, rule-reference memo, emptiness memo) and the
same errors."""

from __future__ import annotations

import pytest

import decoding.frontends.jsonschema.compile as C
from decoding.errors import GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, Special, choice, diff, lit, reachable_rules, seq, star
from decoding.ir.nodes import Inter

from conftest import HAND_SCHEMAS, bench_schemas

LOGIC = {  # references next to Inter/Diff (not, allOf parts that do not merge): the full walk
    "not_ref": {"$defs": {"s": {"type": "string"}}, "type": "object",
                "properties": {"a": {"$ref": "#/$defs/s", "not": {"enum": ["x"]}}, "b": {"$ref": "#/$defs/s"}}},
    "contains_ref": {"$defs": {"i": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/i"},
                     "contains": {"const": 3}},
}
SCHEMAS = {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **LOGIC, **bench_schemas(10)}


def _fields(g: Grammar) -> tuple:
    return (g.start, g.rules, g.max_depth, g._by_name, g._specials, g._rule_refs, g._empty)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_front_end_grammar_is_the_constructed_one(name, monkeypatch):
    """Where the front-end builds its grammar with ``Grammar.walked``, ``Grammar(...)`` of the
    same arguments makes the same one (compared as built, before any pass fills a memo)."""
    walked = Grammar.walked
    compared: list[str] = []
    made: list[bool] = []

    def spy(*a, **k):
        g = walked(*a, **k)
        ref = Grammar(*a)  # (``refs``: what the walk would find)
        made.append(k.get("refs", True))
        assert _fields(g) == _fields(ref)
        assert [g.rule_refs(n) for n in g.names] == [ref.rule_refs(n) for n in ref.names]
        object.__setattr__(g, "_rule_refs", None)  # (as built: the memo is filled on use)
        compared.append(g.start)
        return g

    monkeypatch.setattr(Grammar, "walked", spy)
    try:
        g = compile_schema(SCHEMAS[name]).grammar
    except (GrammarError, ValueError):
        return  # (no grammar: nothing built either way)
    if compared:  # the fast path: some rule reached, or none made
        assert (len(g.rules) > 1) is made[0]
    WALKED.append((made[0] if made else None, len(g.rules)))


WALKED: list = []  # (``refs`` of the fast path or None: Grammar's walk, rules) per schema above


def test_fast_paths_both_taken():
    """(after the parametrized test above, in the same process) both fast paths were taken,
    and the full walk too."""
    if not WALKED:
        pytest.skip("run with the test above")
    kinds = {w[0] for w in WALKED}
    assert {True, False, None} <= kinds


def test_walked_path_is_taken():
    """Kubernetes-like references reach rules: the walk is not made twice there."""
    used = []
    for s in SCHEMAS.values():
        try:
            g = compile_schema(s).grammar
        except (GrammarError, ValueError):
            continue
        rules = dict(g.rules[1:])
        if rules:
            facts: dict[str, bool] = {}
            C._reachable(g.rule("root"), rules, None, facts)
            used.append(facts["regular"])
    assert any(used) and not all(used) and len(used) >= 5


def test_walked_same_errors():
    body = seq(lit("a"), Ref("x"))
    cases = [("root", (("root", body), ("x", lit("b")), ("x", lit("c"))), 5),
             ("nope", (("root", body), ("x", lit("b"))), 5),
             ("root", (("root", body), ("x", lit("b"))), 0)]
    for start, rules, depth in cases:
        with pytest.raises(GrammarError) as a:
            Grammar(start, rules, depth)
        with pytest.raises(GrammarError) as b:
            Grammar.walked(start, rules, depth)
        assert str(a.value) == str(b.value)


def test_reachable_rules_reports_irregular_nodes():
    x = Ref("x")
    rules = {"x": lit("b"), "y": star(Ref("x"))}
    cases = {
        "plain": (seq(lit("a"), x, Ref("y")), False),
        "inter": (seq(x, Inter((lit("a"), choice(lit("a"), lit("b"))))), True),
        "diff": (seq(x, diff(star(lit("a")), lit("aa"))), True),
        "special": (choice(seq(x, Special("<|end|>")), lit("c")), True),
    }
    for name, (root, want) in cases.items():
        flags: list[bool] = []
        names = reachable_rules(root, rules.__getitem__, (), flags)
        assert names == reachable_rules(root, rules.__getitem__), name
        assert bool(flags) is want, name


def test_regular_estimated_sees_logic_nodes(monkeypatch):
    """A grammar without rules is built without its walk only when the root's estimated
    nodes hold no Inter or Diff (``not``, ``contains`` are intersections/differences)."""
    seen: list[bool] = []
    real = C._regular_estimated

    def spy(root, c):
        seen.append(real(root, c))
        return seen[-1]

    monkeypatch.setattr(C, "_regular_estimated", spy)
    for schema, want in [({"type": "string", "not": {"enum": ["a"]}}, False),
                         ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}, False),
                         ({"type": "object", "properties": {"a": {"type": "string"}, "b": {"enum": [1, 2]}}}, True),
                         ({"type": "string", "format": "date"}, True)]:
        seen.clear()
        g = compile_schema(schema).grammar
        assert seen == [want], schema
