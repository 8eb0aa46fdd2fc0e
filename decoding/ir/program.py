"""The serialised IR that the native NFA builder (``gd_nfa_build``) reads: flat int32 records
and literal bytes (``GD_NK_*`` in ``native/include/gd_native.h``).

A record at ``code[i]``: ``[LIT, offset into the literal bytes, length]``, ``[SET, n, lo0,
hi0, ...]``, ``[SEQ, n, child...]``, ``[SEPLOOP, x, n, sep...]`` (``x (sep x)*`` with one copy of
``x``), ``[CHOICE, n, child...]``, ``[REPEAT, item, min, max (-1: none)]``, ``[REF, rule]``,
``[SPECIAL, k]``, ``[LEAF, leaf]``, ``[NONE]`` (the empty language), ``[FALLBACK, arg]``.
Children are offsets of other records; where a record lies does not change what is built
(every use of a record is built where it is used).

:class:`ProgramWriter` appends records after a prefix written already (the registered plain
nodes' records, :func:`decoding.backends.automaton.plain_program_offsets`): a front-end that
emits a program directly names those shared nodes by their offsets.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from decoding.ir.nodes import ByteSet, Choice, Dfa, Lit, Node, Repeat, Seq

__all__ = ["Chunk", "NK_LIT", "NK_SET", "NK_SEQ", "NK_CHOICE", "NK_REPEAT", "NK_REF", "NK_SPECIAL", "NK_LEAF", "NK_NONE",
           "NK_FALLBACK", "NK_SEPLOOP", "ProgramWriter"]

NK_LIT, NK_SET, NK_SEQ, NK_CHOICE, NK_REPEAT, NK_REF, NK_SPECIAL, NK_LEAF, NK_NONE, NK_FALLBACK, \
    NK_SEPLOOP = range(11)


#: where a :class:`Chunk`'s records are written (code offsets) and its literal bytes begin:
#: every code offset of a chunk is at least ``_CODE0``, every literal offset in
#: ``[_LIT0, _CODE0)``, and every other entry below ``_LIT0`` (checked when it is made)
_CODE0, _LIT0 = 1 << 30, 1 << 29


@dataclass(frozen=True, eq=False)
class Chunk:
    """The records of one IR node, relocatable: written again by :meth:`ProgramWriter.put`
    at any place with a few vector additions (no walk of the node).  Offsets of the plain
    prefix's records stay as they are (the chunk is valid for that prefix only)."""
    code: np.ndarray  # int64 entries, written at _CODE0 with literals at _LIT0
    code_fix: np.ndarray  # int64 0/1: the entries that are offsets of the chunk's own records
    lit_fix: np.ndarray  # int64 0/1: the entries that are offsets into its literal bytes
    lits: bytes
    root: int  # the node's record, relative to the chunk's start


class ProgramWriter:
    """Records appended after ``base`` code entries and ``nlit`` literal bytes written already.
    Each method returns the new record's offset (from the start of the whole code).
    Invariant: every offset a record names is ``< base`` (the prefix) or was returned here."""

    __slots__ = ("code", "lits", "base", "nlit", "_lit_at", "_eps", "_ir", "_keep", "leaves", "leaf_at")

    def __init__(self, base: int, nlit: int) -> None:
        self.code = array("i")
        self.lits = bytearray()
        self.base = base
        self.nlit = nlit
        self._lit_at: dict[bytes, int] = {}
        self._eps = -1
        self._ir: dict[int, int] = {}  # id(node) -> offset of the nodes written by ir()
        self._keep: list[Node] = []  # (those nodes, alive while their ids are keys)
        self.leaves: list[Dfa] = []  # the program's own automaton leaves: ``[LEAF, i]`` names leaves[i]
        self.leaf_at: list[int] = []  # where those records lie in ``code`` (the reader renumbers them)

    def lit(self, data: bytes) -> int:
        """The literal ``data`` (one record per distinct literal)."""
        o = self._lit_at.get(data)
        if o is None:
            code = self.code
            o = self._lit_at[data] = self.base + len(code)
            code.extend((NK_LIT, self.nlit + len(self.lits), len(data)))
            self.lits += data
        return o

    def eps(self) -> int:
        """The empty string (an empty sequence)."""
        if self._eps < 0:
            self._eps = self.base + len(self.code)
            self.code.extend((NK_SEQ, 0))
        return self._eps

    def _list(self, kind: int, items: tuple[int, ...] | list[int]) -> int:
        code = self.code
        o = self.base + len(code)
        code.append(kind)
        code.append(len(items))
        code.extend(items)
        return o

    def seq(self, *items: int) -> int:
        return items[0] if len(items) == 1 else self._list(NK_SEQ, items)

    def choice(self, *items: int) -> int:
        """The union of ``items`` (at least one)."""
        return items[0] if len(items) == 1 else self._list(NK_CHOICE, items)

    def opt(self, item: int) -> int:
        return self._list(NK_CHOICE, (self.eps(), item))

    def repeat(self, item: int, lo: int, hi: int | None) -> int:
        code = self.code
        o = self.base + len(code)
        code.extend((NK_REPEAT, item, lo, -1 if hi is None else hi))
        return o

    def byteset(self, ranges: Sequence[tuple[int, int]]) -> int:
        """One byte of the inclusive ``(lo, hi)`` byte ranges (sorted, disjoint, non-empty)."""
        code = self.code
        o = self.base + len(code)
        code.append(NK_SET)
        code.append(len(ranges))
        for r in ranges:
            code.extend(r)
        return o

    def special(self, k: int) -> int:
        """The special symbol ``k`` (its index in the specials the program is built with)."""
        code = self.code
        o = self.base + len(code)
        code.extend((NK_SPECIAL, k))
        return o

    def sep_loop(self, x: int, *sep: int) -> int:
        """``x (sep x)*`` with one copy of ``x``."""
        code = self.code
        o = self.base + len(code)
        code.extend((NK_SEPLOOP, x, len(sep)))
        code.extend(sep)
        return o

    def leaf(self, node: Dfa) -> int:
        """The automaton leaf ``node``: ``[LEAF, i]`` with ``i`` its index in :attr:`leaves`
        (a program's reader adds the number of leaves before them: :attr:`leaf_at`)."""
        code = self.code
        o = self.base + len(code)
        self.leaf_at.append(len(code))
        code.extend((NK_LEAF, len(self.leaves)))
        self.leaves.append(node)
        return o

    @staticmethod
    def chunk(node: Node, at: Mapping[int, int]) -> Chunk | None:
        """The records of ``node`` (:meth:`ir`) as a :class:`Chunk`; None if one of its
        entries could not be told apart from an offset (a repetition bound past ``_LIT0``), it
        holds an automaton leaf, or it is a node of the prefix (``at``)."""
        w = ProgramWriter(_CODE0, _LIT0)
        root = w.ir(node, at)
        if w.leaves or root < _CODE0:  # (a leaf, or the node is the prefix's own)
            return None
        arr = np.frombuffer(w.code, dtype=np.int32).astype(np.int64)
        code_fix = arr >= _CODE0
        lit_fix = (arr >= _LIT0) & ~code_fix
        rec = 0  # (the repetition bounds: no entry but an offset may reach _LIT0)
        while rec < len(arr):
            kind = int(arr[rec])
            if kind == NK_REPEAT:
                if arr[rec + 2] >= _LIT0 or arr[rec + 3] >= _LIT0:
                    return None
                rec += 4
            elif kind == NK_LIT:
                rec += 3
            elif kind == NK_SET:
                rec += 2 + 2 * int(arr[rec + 1])
            elif kind == NK_SEQ or kind == NK_CHOICE:
                rec += 2 + int(arr[rec + 1])
            elif kind == NK_SEPLOOP:
                rec += 3 + int(arr[rec + 2])
            else:
                return None  # (not written by ir())
        return Chunk(arr, code_fix.astype(np.int64), lit_fix.astype(np.int64), bytes(w.lits), root - _CODE0)

    def put(self, chunk: Chunk) -> int:
        """Append ``chunk``'s records; the offset of its node's record."""
        start = self.base + len(self.code)
        lit0 = self.nlit + len(self.lits)
        arr = chunk.code + chunk.code_fix * (start - _CODE0) + chunk.lit_fix * (lit0 - _LIT0)
        self.code.frombytes(arr.astype(np.int32).tobytes())
        self.lits += chunk.lits
        return start + chunk.root

    def ir(self, node: Node, at: Mapping[int, int]) -> int:
        """The records of a regular IR node made of literals, byte sets, sequences, choices,
        repetitions and automaton leaves (each node once); a node whose id is in ``at`` (the prefix's plain
        nodes) is named by its offset there.  TypeError for any other node class."""
        o = at.get(id(node))
        if o is None:
            o = self._ir.get(id(node))
        if o is not None:
            return o
        cls = node.__class__
        if cls is Lit:
            o = self.lit(node.data)  # type: ignore[union-attr]
        elif cls is ByteSet:
            o = self.byteset(node.ranges)  # type: ignore[union-attr]
        elif cls is Seq or cls is Choice:
            kids = [self.ir(x, at) for x in node.items]  # type: ignore[union-attr]
            o = self._list(NK_SEQ if cls is Seq else NK_CHOICE, kids)
        elif cls is Repeat:
            o = self.repeat(self.ir(node.item, at), node.min, node.max)  # type: ignore[union-attr]
        elif cls is Dfa:
            o = self.leaf(node)  # type: ignore[arg-type]
        else:
            raise TypeError(f"ProgramWriter.ir: {cls.__name__} is not written here")
        self._ir[id(node)] = o
        self._keep.append(node)
        return o
