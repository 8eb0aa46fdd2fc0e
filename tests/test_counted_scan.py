"""The counted rewrite's first scan: a grammar with no repetition above the window is
returned as it is (same object, no loop), and one with such a repetition anywhere
(inside a rule, an Inter or Diff operand, a nested repeat) is scanned as countable.
The scan must never say "no" where the rewrite would count: compared on every case with the
rewrite run without the scan."""

from __future__ import annotations

import pytest

import decoding.backends.counted as C
from decoding.ir import Grammar, Ref, byteset, diff, inter, lit, rep, seq, star

AZ = byteset([(97, 122)])
K = 10


def _g(node, **rules) -> Grammar:
    return Grammar("root", (("root", node),) + tuple(rules.items()))


CASES = [
    (_g(rep(AZ, 0, K + 1)), False),
    (_g(rep(AZ, 0, K + 2)), True),
    (_g(rep(AZ, K + 2, None)), True),
    (_g(rep(AZ, K + 1, None)), False),
    (_g(rep(AZ, 3, K + 4)), False),
    (_g(rep(AZ, 3, K + 5)), True),
    (_g(seq(lit("x"), Ref("r")), r=rep(AZ, 0, 50)), True),
    (_g(inter(rep(AZ, 0, 40), seq(lit("a"), star(AZ)))), True),
    (_g(diff(star(AZ), rep(AZ, 0, 40))), True),
    (_g(rep(rep(AZ, 0, 30), 0, 2)), True),
    (_g(seq(star(AZ), lit("!"), rep(AZ, 1, 5))), False),
]


@pytest.mark.parametrize("g, big", CASES)
def test_scan(g, big):
    assert C._has_big_repeat(g, K) is big


# with a short tail (``C.TAIL``) a room part is counted above ``tail + 1`` units, also below
# the longest token (a medium loop): rep(AZ, 0, 5) qualifies with tail 3, rep(AZ, 0, 4) not
CASES_TAIL = [
    (_g(rep(AZ, 0, K + 1)), True),
    (_g(rep(AZ, 0, K - 1)), True),
    (_g(rep(AZ, 0, K - 2)), True),
    (_g(rep(AZ, 0, 5)), True),
    (_g(rep(AZ, 0, 4)), False),
    (_g(rep(AZ, 2, K + 1)), True),
    (_g(rep(AZ, 2, 7)), True),
    (_g(rep(AZ, 2, 6)), False),
    (_g(rep(AZ, K + 1, None)), False),  # a need part keeps the whole window
    (_g(rep(AZ, K + 2, K + 2)), True),
    (_g(seq(lit("x"), Ref("r")), r=rep(AZ, 0, K)), True),
    (_g(seq(star(AZ), lit("!"), rep(AZ, 1, 5))), False),
]


@pytest.mark.parametrize("g, big", CASES_TAIL)
def test_scan_with_a_short_tail(g, big):
    assert C._has_big_repeat(g, K, 3) is big


@pytest.mark.parametrize("tail", [None, 3])
@pytest.mark.parametrize("g, big", CASES + CASES_TAIL)
def test_scan_never_hides_a_loop(g, big, tail, monkeypatch):
    g2, loops, _ = C.rewrite_products(g, K, tail=tail)
    with monkeypatch.context() as m:
        m.setattr(C, "_has_big_repeat", lambda *a: True)
        g3, loops3, _ = C.rewrite_products(g, K, tail=tail)
    assert len(loops) == len(loops3) and g2 == g3
    if not C._has_big_repeat(g, K, tail):
        assert g2 is g and not loops
