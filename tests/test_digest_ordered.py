"""``grammar_digest`` writing first the texts of the nodes a front-end estimated, in the
order it estimated them (``size.attached_nodes``, ``key._texts_in_order``; issue 14), is the
digest of the walk alone: the same text for real schemas, for hand-made orders holding
every node class (children missing from the order, nodes not in the grammar, long subtrees
folded) and for the canonical (unfolded) text."""

from __future__ import annotations

import pytest

import decoding.ir.key as K
import decoding.ir.size as S
from decoding.errors import DecodingError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, Special, byteset, choice, diff, lit, rep, seq, star
from decoding.ir.literals import literal_set
from decoding.ir.nodes import Inter

from conftest import HAND_SCHEMAS, bench_schemas

SCHEMAS = {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **bench_schemas(15)}


def _walked(g: Grammar, fold_above: int | None = K.DIGEST_FOLD_ABOVE) -> str:
    return K._ir_text(g, fold_above, None)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_digest_as_walked(name):
    try:
        g = compile_schema(SCHEMAS[name]).grammar
    except DecodingError:
        return
    order = S.attached_nodes(g)
    assert order is not None  # (the front-end attached its estimates and their nodes)
    assert K._ir_text(g, K.DIGEST_FOLD_ABOVE, order) == _walked(g)
    assert K.grammar_digest(g) == K._sha(_walked(g))
    assert K._ir_text(g, None, order) == K.canonical_ir_text(g)
    S.release_estimates(g)
    assert S.attached_nodes(g) is None


AZ = byteset([(97, 122)])
LONG = seq(*[choice(lit(f"word{i}"), rep(AZ, 0, i)) for i in range(200)])  # over DIGEST_FOLD_ABOVE


def _nodes() -> tuple[Grammar, list[list]]:
    inter = Inter((star(AZ), rep(AZ, 2, 5)))
    dif = diff(star(AZ), lit("ab"))
    dfa = literal_set({b"alpha", b"beta", b"gamma"})
    rp = rep(seq(lit(","), Ref("v")), 0, None)
    body = seq(lit("["), Ref("v"), rp, inter, dif, dfa, Special("<|x|>"), LONG, lit("]"))
    g = Grammar("root", (("root", body), ("v", choice(lit("a"), seq(lit("("), Ref("v"), lit(")"))))))
    stray = seq(lit("not"), AZ, lit("in the grammar"))
    # orders: parents before children, children missing, strays, every class
    return g, [[body, rp, inter], [dif, dfa, stray, LONG.items[3], LONG], [rp.item, AZ, lit("x")]]  # type: ignore[union-attr]


@pytest.mark.parametrize("fold_above", [K.DIGEST_FOLD_ABOVE, None, 40])
def test_hand_orders(fold_above):
    g, order = _nodes()
    want = _walked(g, fold_above)
    assert K._ir_text(g, fold_above, order) == want
    assert K._ir_text(g, fold_above, [list(reversed(o)) for o in order]) == want
    assert K._ir_text(g, fold_above, [[n for o in order for n in o]]) == want
