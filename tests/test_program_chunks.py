"""Relocatable record chunks (:class:`decoding.ir.program.Chunk`): a chunk put anywhere in a
program is the same records :meth:`~decoding.ir.program.ProgramWriter.ir` writes there, the
plain prefix's records named by their offsets; what a chunk cannot hold is refused."""

from __future__ import annotations

import pytest

from decoding.backends.automaton import plain_program_offsets
from decoding.frontends.jsonschema.fast import prepare
from decoding.frontends.jsonschema.jsonstr import any_json_char, json_char
from decoding.frontends.jsonschema.logic import one_char, other_char
from decoding.ir import Dfa, choice, lit, rep, seq
from decoding.ir.program import ProgramWriter

NODES = {
    "other": lambda: other_char("ab\u5317"),
    "one": lambda: one_char("\u00e9"),
    "quote": lambda: one_char('"'),
    "mixed": lambda: seq(lit("x"), rep(json_char([(0x30, 0x39)]), 2, 5), choice(lit("y"), lit("zz"))),
}


@pytest.mark.parametrize("name", sorted(NODES))
@pytest.mark.parametrize("before", [0, 1, 7])
def test_a_put_chunk_is_the_records_ir_writes(name, before):
    prepare()
    at, base, nlit, _ = plain_program_offsets()
    node = NODES[name]()
    a, b = ProgramWriter(base, nlit), ProgramWriter(base, nlit)
    for w in (a, b):  # (records before it: the chunk lands at another offset)
        for i in range(before):
            w.lit(b"pre%d" % i)
    chunk = ProgramWriter.chunk(node, at)
    assert chunk is not None
    assert a.ir(node, at) == b.put(chunk)
    assert a.code == b.code and a.lits == b.lits


def test_a_chunk_names_the_prefix_records():
    prepare()
    at, base, nlit, _ = plain_program_offsets()
    node = seq(lit("k"), any_json_char())  # (any_json_char is a plain node: in the prefix)
    chunk = ProgramWriter.chunk(node, at)
    w = ProgramWriter(base, nlit)
    o = w.put(chunk)
    assert at[id(any_json_char())] in w.code.tolist() and o >= base


def test_what_a_chunk_cannot_hold():
    prepare()
    at, _, _, _ = plain_program_offsets()
    assert ProgramWriter.chunk(Dfa((((97, 97, 1),), ()), (1,)), at) is None  # (a leaf)
    assert ProgramWriter.chunk(rep(lit("a"), 0, 1 << 29), at) is None  # (a bound like an offset)
    assert ProgramWriter.chunk(any_json_char(), at) is None  # (the prefix's own node)
