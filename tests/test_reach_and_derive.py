"""``compile._reach_and_derive`` (one walk) agrees with ``_reachable`` and ``_unproductive``
(two): the same rules reached and ``regular`` fact, and ``derives`` True only where
``_unproductive`` finds nothing (issue 14: the front-end's passes fused)."""

from __future__ import annotations

import pytest

import decoding.frontends.jsonschema.compile as cm
from decoding.errors import GrammarError
from decoding.ir import Inter, Ref, Special, choice, diff, lit, rep, seq, star
from decoding.ir.nodes import NOTHING, ByteSet, Repeat

from conftest import HAND_SCHEMAS, bench_schemas

SCHEMAS = {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **bench_schemas(25, offset=2)}


def _both(root, rules, shared=None) -> None:
    f1: dict = {}
    f2: dict = {}
    reached, derives = cm._reach_and_derive(root, rules, shared, f1)
    assert reached == cm._reachable(root, rules, shared, f2) and list(reached) == list(cm._reachable(root, rules, shared))
    assert f1 == f2
    dead = cm._unproductive(root, reached, shared)
    if derives:
        assert dead is None
    return derives, dead


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_as_two_walks_on_the_corpus(name: str) -> None:
    schema = SCHEMAS[name]
    c = cm._Compiler(schema, whitespace="compact", max_ws=8, max_depth=3, free_depth=2, lenient=False)
    try:
        root = c.node(schema, "")
    except GrammarError as e:  # a refusal (documented, with its reason) leaves no IR to walk
        assert str(e)
        return
    derives, dead = _both(root, c.rules, c._shared_parts)
    # every grammar the front-end builds here derives some string, found in one walk
    # unless the rules recurse
    assert dead is None or not derives


def test_cycles_and_dead_rules() -> None:
    a, b, loop = Ref("a"), Ref("b"), Ref("loop")
    cases = [
        (seq(lit("x"), a), {"a": seq(lit("y"), b), "b": lit("z")}, True),           # a chain
        (loop, {"loop": seq(lit("x"), Ref("loop"))}, False),                         # no way out
        (loop, {"loop": seq(lit("x"), loop)}, False),                                # (the same Ref met again)
        (loop, {"loop": choice(lit("x"), seq(lit("("), Ref("loop"), lit(")")))}, None),  # recursion with an exit
        (seq(a, b), {"a": choice(seq(lit("["), b, lit("]")), lit("1")), "b": choice(a, lit("2")),
                     "u": NOTHING}, None),                                           # mutual; u unreached
        (seq(lit("x"), rep(loop, 0, 3)), {"loop": seq(lit("y"), loop)}, True),       # dead but optional
        (seq(lit("x"), rep(loop, 1, 3)), {"loop": seq(lit("y"), loop)}, False),
        (seq(a, Inter((lit("a"), choice(lit("a"), lit("b"))))), {"a": lit("q")}, True),
        (seq(a, diff(star(lit("a")), lit("aa"))), {"a": ByteSet(())}, False),
        (choice(seq(a, Special("<|end|>")), lit("c")), {"a": ByteSet(())}, True),
        (seq(a, a, Repeat(b, 2, 1)), {"a": lit("q"), "b": lit("r")}, False),           # max < min
        (seq(lit("x"), lit("y")), {}, True),
        (choice(), {}, False),
    ]
    for root, rules, expect in cases:
        derives, dead = _both(root, rules)
        if expect is True:
            assert derives and dead is None
        elif expect is False:
            assert not derives and dead is not None
        else:  # recursion: the one walk may not tell; the fixpoint says it derives
            assert dead is None


def test_shared_body_met_again() -> None:
    """A node met again while it is walked (two rules sharing a body) reads as deriving
    nothing: the answer is never wrong, at worst left to the fixpoint."""
    body = choice(lit("x"), seq(lit("("), Ref("b"), lit(")")))
    rules = {"a": body, "b": body}
    derives, dead = _both(seq(Ref("a"), Ref("b")), rules)
    assert dead is None
