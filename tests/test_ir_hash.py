"""Composite IR nodes cache their hash (``decoding.ir.nodes._hashed``): equality and hashing
must stay what the frozen dataclasses' generated methods gave, whichever way a node was
made (its ``__init__`` or the builders' slot writes) and whether its hash was made yet.

Each case is a pair of nodes that must compare equal (made separately, so not the same
object) or different; the check is done before and after the hashes are made, in both
orders, and against the fields' tuples (what the generated ``__hash__`` hashed)."""

from __future__ import annotations

import pytest

from decoding.ir import (ByteSet, Choice, Dfa, Diff, Inter, Lit, Repeat, Seq, choice, lit, rep, seq, star)


def _pairs_equal():
    return [
        ("seq built/init", lambda: seq(lit("a"), star(lit("b"))), lambda: Seq((Lit(b"a"), Repeat(Lit(b"b"), 0, None)))),
        ("choice built/init", lambda: choice(lit("a"), lit("b")), lambda: Choice((Lit(b"a"), Lit(b"b")))),
        ("repeat", lambda: rep(seq(lit("x"), lit("y")), 2, 5), lambda: Repeat(Lit(b"xy"), 2, 5)),
        ("inter", lambda: Inter((ByteSet(((0, 9),)), ByteSet(((5, 20),)))),
         lambda: Inter((ByteSet(((0, 9),)), ByteSet(((5, 20),))))),
        ("diff", lambda: Diff(star(ByteSet(((97, 122),))), lit("if")), lambda: Diff(Repeat(ByteSet(((97, 122),))), Lit(b"if"))),
        ("dfa", lambda: Dfa((((97, 97, 1),), ()), (1,)), lambda: Dfa((((97, 97, 1),), ()), (1,))),
        ("deep", lambda: seq(lit("{"), choice(*(seq(lit(f'"{i}"'), star(lit(","))) for i in range(30))), lit("}")),
         lambda: seq(lit("{"), choice(*(seq(lit(f'"{i}"'), star(lit(","))) for i in range(30))), lit("}"))),
    ]


def _pairs_different():
    return [
        ("seq items", lambda: seq(lit("a"), star(lit("b"))), lambda: seq(lit("a"), star(lit("c")))),
        ("seq vs choice, same items", lambda: Seq((Lit(b"a"), Lit(b"b"))), lambda: Choice((Lit(b"a"), Lit(b"b")))),
        ("repeat min", lambda: Repeat(Lit(b"a"), 1, 3), lambda: Repeat(Lit(b"a"), 2, 3)),
        ("repeat max", lambda: Repeat(Lit(b"a"), 1, 3), lambda: Repeat(Lit(b"a"), 1, None)),
        ("diff swapped", lambda: Diff(Lit(b"a"), Lit(b"b")), lambda: Diff(Lit(b"b"), Lit(b"a"))),
        ("dfa accept", lambda: Dfa((((97, 97, 1),), ()), (1,)), lambda: Dfa((((97, 97, 1),), ()), (0,))),
        ("deep leaf", lambda: seq(lit("{"), choice(*(lit(f'"{i}"') for i in range(30))), lit("}")),
         lambda: seq(lit("{"), choice(*(lit(f'"{i}"') for i in range(29)), lit('"x"')), lit("}"))),
    ]


def _fields(n):
    if isinstance(n, (Seq, Choice, Inter)):
        return (n.items,)
    if isinstance(n, Repeat):
        return (n.item, n.min, n.max)
    if isinstance(n, Diff):
        return (n.base, n.minus)
    return (n.edges, n.accept)


@pytest.mark.parametrize("hash_first", ["none", "left", "right", "both"])
@pytest.mark.parametrize("name,make_a,make_b", _pairs_equal(), ids=[p[0] for p in _pairs_equal()])
def test_equal_nodes_compare_and_hash_equal(name, make_a, make_b, hash_first):
    a, b = make_a(), make_b()
    assert a is not b
    if hash_first in ("left", "both"):
        hash(a)
    if hash_first in ("right", "both"):
        hash(b)
    assert a == b and b == a and not (a != b)
    assert hash(a) == hash(b) == hash(a)  # (made once, then read)
    assert hash(a) == (hash(_fields(a)) or 1)
    assert len({a, b}) == 1 and {a: 1}[b] == 1


@pytest.mark.parametrize("hash_first", ["none", "left", "right", "both"])
@pytest.mark.parametrize("name,make_a,make_b", _pairs_different(), ids=[p[0] for p in _pairs_different()])
def test_different_nodes_compare_different(name, make_a, make_b, hash_first):
    a, b = make_a(), make_b()
    if hash_first in ("left", "both"):
        hash(a)
    if hash_first in ("right", "both"):
        hash(b)
    assert a != b and b != a and not (a == b)
    assert len({a, b}) == 2


def test_node_compares_with_other_types():
    """A node is not equal to a non-node, nor to its own fields' tuple (NotImplemented, then
    the default identity comparison)."""
    s = seq(lit("a"), star(lit("b")))
    assert s != (s.items,) and s != "ab" and s != None  # noqa: E711
    assert s == s


# ----------------------------------------------------------------------------- shared UTF-8 pieces

_CLASSES = [  # (ranges, negate): classes whose multi-byte parts recur
    ([(ord("a"), ord("a"))], True), ([(ord("a"), ord("b")), (ord("x"), ord("x"))], True),
    ([(0x80, 0x10FFFF)], False), ([(0x41, 0x5A), (0xE9, 0xE9), (0x4E2D, 0x4E2D)], False),
    ([(0x7F0, 0x820), (0xD7F0, 0xE010), (0xFFF0, 0x10010)], False), ([(0, 0x10FFFF)], False),
]


@pytest.mark.parametrize("ranges,negate", _CLASSES)
def test_char_class_is_what_the_split_gives(ranges, negate):
    """``char_class`` reads its multi-byte alternatives from a memo of ``_utf8_split``: the
    same IR (as data) as a fresh split, and the same objects when asked again."""
    from decoding.ir import Grammar, char_class, to_data
    from decoding.ir import nodes

    a = char_class(ranges, negate=negate)
    b = char_class(ranges, negate=negate)
    fresh = nodes._UTF8_PIECES.copy()
    nodes._UTF8_PIECES.clear()
    try:
        # (the memo emptied: every piece split anew)
        c = char_class(ranges, negate=negate)
    finally:
        nodes._UTF8_PIECES.clear()
        nodes._UTF8_PIECES.update(fresh)
    assert to_data(Grammar.single(a)) == to_data(Grammar.single(c))
    assert a == c and hash(a) == hash(c)
    multi = [x for x in (a.items if isinstance(a, Choice) else (a,)) if not isinstance(x, ByteSet)]
    again = [x for x in (b.items if isinstance(b, Choice) else (b,)) if not isinstance(x, ByteSet)]
    assert len(multi) == len(again) and all(x is y for x, y in zip(multi, again))


def test_two_complements_share_their_multibyte_pieces():
    from decoding.ir import char_class

    a = char_class([(ord("a"), ord("a"))], negate=True)
    b = char_class([(ord("q"), ord("r"))], negate=True)
    assert a != b
    ma = [x for x in a.items if not isinstance(x, ByteSet)]
    mb = [x for x in b.items if not isinstance(x, ByteSet)]
    assert ma and all(x is y for x, y in zip(ma, mb))
