"""``integer_range`` is memoized per process: a hit is the node a fresh build gives (same
canonical text, same language on boundary spellings), and the memo stays bounded."""

from __future__ import annotations

import pytest

import decoding.frontends.jsonschema.numbers as nb
from decoding.backends.automaton import compile_dfa
from decoding.ir import Grammar
from decoding.ir.key import canonical_ir_text

RANGES = [(0, 2147483647), (-2147483648, 2147483647), (0, 9223372036854775807), (0, None), (None, -5),
          (None, None), (1, 65535), (17, 17), (5, 3), (-10**20, 10**20 + 7)]


@pytest.mark.parametrize("lo,hi", RANGES)
def test_hit_equals_fresh_build(lo, hi):
    nb._RANGES.clear()
    first = nb.integer_range(lo, hi)
    hit = nb.integer_range(lo, hi)
    assert hit is first
    fresh = nb._integer_range(lo, hi)
    assert canonical_ir_text(Grammar.single(hit)) == canonical_ir_text(Grammar.single(fresh))


@pytest.mark.parametrize("lo,hi", [(0, 2147483647), (-2147483648, 2147483647), (1, 65535), (0, None)])
def test_language_at_the_bounds(lo, hi):
    nb._RANGES.clear()
    nb.integer_range(lo, hi)
    d = compile_dfa(Grammar.single(nb.integer_range(lo, hi)))  # (the memoized node)
    for x in (lo, hi, 0, 1, -1, 10, 2**31, 2**31 - 1, -2**31, -2**31 - 1, 65535, 65536):
        if x is None:
            continue
        inside = (lo is None or x >= lo) and (hi is None or x <= hi)
        assert d.accepts(str(x).encode()) == inside, x
    assert not d.accepts(b"01") and not d.accepts(b"-0") and not d.accepts(b"")


def test_memo_is_bounded():
    nb._RANGES.clear()
    for k in range(nb._RANGES_MAX + 10):
        nb.integer_range(k, k + 3)
    assert 0 < len(nb._RANGES) <= nb._RANGES_MAX
    assert canonical_ir_text(Grammar.single(nb.integer_range(3, 6))) == \
        canonical_ir_text(Grammar.single(nb._integer_range(3, 6)))
