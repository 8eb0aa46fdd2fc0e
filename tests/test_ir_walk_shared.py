"""One walk shared by a grammar's rules (``walk(node, seen)``: a subtree several rules share
is visited once) finds what rule-by-rule walks find: ``reachable_rules`` the same names in
the same order, ``Grammar`` the same first undefined reference, the same specials in the
same order and the same irregular-operand error.  Hand-written grammars and compiled
schemas."""

from __future__ import annotations

import json

import pytest

from decoding.errors import DecodingError, GrammarError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import (Grammar, Node, Ref, Special, choice, diff, lit, reachable_rules, seq, star,
                         walk)

from conftest import CORPORA


def _reachable_rule_by_rule(root: Node, rule) -> list[str]:
    """``reachable_rules`` with a fresh walk per body (as it was)."""
    found: list[str] = []
    seen: set[str] = set()
    todo = [root]
    while todo:
        for n in walk(todo.pop()):
            if isinstance(n, Ref) and n.name not in seen:
                seen.add(n.name)
                found.append(n.name)
                todo.append(rule(n.name))
    return found


def _grammars() -> list[Grammar]:
    out = []
    for split in ("Glaiveai2K", "Github_easy", "Kubernetes", "Snowplow"):
        files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
        for f in files[::max(1, len(files) // 10)][:10]:
            try:
                out.append(compile_schema(json.loads(f.read_text(encoding="utf-8"))["schema"]).grammar)
            except DecodingError:
                continue
    return out


SHARED = seq(lit("["), Ref("b"), Special("<x>"), lit("]"))  # one object in several rules
HAND = [
    Grammar("r", (("r", seq(Ref("a"), SHARED)), ("a", choice(SHARED, Ref("c"))), ("b", lit("b")),
                  ("c", seq(SHARED, Special("<y>"), star(Ref("a")))))),
    Grammar("r", (("r", choice(Ref("c"), SHARED)), ("b", lit("b")), ("c", SHARED), ("unused", Ref("b")))),
]


@pytest.mark.parametrize("g", HAND + _grammars())
def test_reachable_rules_as_rule_by_rule(g):
    assert reachable_rules(g.rule(g.start), g.rule) == _reachable_rule_by_rule(g.rule(g.start), g.rule)
    for name, body in g.rules:
        assert reachable_rules(body, g.rule) == _reachable_rule_by_rule(body, g.rule)


def test_reachable_rules_keeps_fresh_bodies_alive():
    """A ``rule`` callback that builds each body afresh (no one else holds it): ids of walked
    bodies are not reused for later ones."""
    bodies = {"a": lambda: seq(lit("x"), Ref("b")), "b": lambda: seq(lit("y"), Ref("c")),
              "c": lambda: seq(lit("z"), Ref("d")), "d": lambda: lit("w")}
    assert reachable_rules(Ref("a"), lambda n: bodies[n]()) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("g", HAND + _grammars()[::4])
def test_grammar_specials_as_rule_by_rule(g):
    specials: dict[str, None] = {}
    for _, body in g.rules:
        for n in walk(body):
            if isinstance(n, Special):
                specials.setdefault(n.text)
    assert g.specials() == list(specials)


def test_grammar_first_undefined_reference():
    """The reported rule is the first one holding an undefined reference, even when that
    reference sits in a subtree an earlier rule shares."""
    bad = seq(lit("("), Ref("missing"), lit(")"))
    with pytest.raises(GrammarError, match="rule 'a' refers to undefined rule 'missing'"):
        Grammar("r", (("r", lit("ok")), ("a", seq(lit("x"), bad)), ("b", bad)))
    with pytest.raises(GrammarError, match="rule 'r' refers to undefined rule 'nope'"):
        Grammar("r", (("r", seq(SHARED, Ref("nope"))), ("b", SHARED)))


def test_grammar_irregular_operand():
    """An Inter/Diff operand with a Ref is still found (check_regular's error) when the
    operation is shared by several rules."""
    d = diff(star(lit("a")), Ref("b"))
    with pytest.raises(GrammarError):
        Grammar("r", (("r", seq(d, lit("!"))), ("x", d), ("b", lit("a"))))


def _choice_hashing_all_leaves(*items: Node) -> Node:
    """``choice`` as it was: Inter/Diff alternatives deduplicated by hashing."""
    from decoding.ir import Choice, Repeat, Seq
    flat: list[Node] = []
    leaves: set[Node] = set()
    nested: list[Node] = []
    for it in items:
        for x in (it.items if isinstance(it, Choice) else (it,)):
            if isinstance(x, (Seq, Choice, Repeat)):
                if x in nested:
                    continue
                nested.append(x)
            elif x in leaves:
                continue
            else:
                leaves.add(x)
            flat.append(x)
    return flat[0] if len(flat) == 1 else Choice(tuple(flat))


def test_choice_compares_inter_diff_alternatives():
    """Inter/Diff alternatives are compared, not hashed (a hash walks the whole operation):
    the same alternatives are kept, in the same order."""
    from decoding.ir import inter
    a = star(lit("a"))
    d1, d2 = diff(a, lit("aa")), diff(star(lit("a")), lit("aa"))  # equal, distinct objects
    i1 = inter(a, star(choice(lit("a"), lit("b"))))
    cases = [(d1, d2), (d1, i1, d2, i1, lit("x")), (choice(d1, lit("y")), d2, i1), (i1,), (d1, diff(a, lit("a")))]
    for items in cases:
        assert choice(*items) == _choice_hashing_all_leaves(*items)
    assert choice(d1, d2) is d1


@pytest.mark.parametrize("g", HAND + _grammars()[::3])
def test_reachable_rules_skips_ref_free(g):
    """Nodes named Ref-free are not walked; the names found are the same."""
    ref_free = [id(n) for _, body in g.rules for n in walk(body)
                if not any(isinstance(x, Ref) for x in walk(n))]
    root = g.rule(g.start)
    assert reachable_rules(root, g.rule, ref_free) == reachable_rules(root, g.rule)
