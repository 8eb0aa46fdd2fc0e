"""Counted strings over lazy automata (:mod:`decoding.backends.counted_lazy`, issue 14): the
fast path's programs with counted loops compile with no explicit automaton.

- strings each must accept or reject at the bounds (ASCII, three-byte characters, escapes:
  a unit is one JSON character however many bytes it takes);
- the same masks and steps as the counted back-end's explicit automaton of the same program
  (:func:`~decoding.backends.counted.counted_program`, itself compared with the pipeline in
  tests/test_schema_fast.py) along random walks that favour long tokens, so the near-end
  masks are reached; on the Snowplow benchmark's schemas that qualify (a floor);
- budgeted random walks finish and validate (jsonschema);
- medium loops (room for fewer units than the longest token): the tokens that overrun one
  after crossing into it past their first byte are removed (a mutation that keeps them fails);
- what stays explicit: a ``minLength`` before a medium loop (too many such tokens), a union,
  a ``pattern``, ``eager``.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

import decoding.compiler as compiler_mod
from decoding.backends.automaton import plain_program_offsets, regular_leaf
from decoding.backends.contract import EOG
from decoding.backends.counted import counted_program, room_tail
from decoding.backends.counted_lazy import LazyCountedGrammar
from decoding.backends.select import COUNT_ABOVE
from decoding.compiler import Compiler
from decoding.frontends.jsonschema.fast import counted_unit, fast_program, prepare
from decoding.testing import budgeted_walks

from conftest import compiled_corpus, get_vocab

S300 = {"type": "string", "maxLength": 300}
OBJ = {"type": "object", "properties": {"a": S300, "b": {"type": "string", "minLength": 3, "maxLength": 200},
                                        "c": {"type": "array", "items": {"type": "string", "maxLength": 129}}},
       "required": ["a"], "additionalProperties": False}
#: medium loops (llama-bpe's longest token: 128 bytes): b (20), c (a minLength, then 99), d's items (40)
MED = {"type": "object", "properties": {"a": S300, "b": {"type": "string", "maxLength": 20},
                                        "c": {"type": "string", "minLength": 1, "maxLength": 100},
                                        "d": {"type": "array", "items": {"type": "string", "maxLength": 40}}},
       "required": ["c"], "additionalProperties": False}
CASES = [
    (S300, ['""', '"' + "a" * 300 + '"', '"' + "\u5317" * 300 + '"', '"' + "\\n" * 300 + '"',
            '"' + "\\u0001" * 300 + '"'],
     ['"' + "a" * 301 + '"', '"' + "\u5317" * 301 + '"', '"' + "\\n" * 301 + '"', '"' + "\\u0001" * 150 + "a" * 151 + '"',
      '"a']),
    (OBJ, ['{"a":""}', '{"a":"' + "x" * 300 + '","b":"' + "y" * 200 + '"}', '{"a":"","c":["' + "z" * 129 + '",""]}'],
     ['{"a":"' + "x" * 301 + '"}', '{"a":"","b":"yy"}', '{"a":"","b":"' + "y" * 201 + '"}',
      '{"a":"","c":["' + "z" * 130 + '"]}', '{"b":"yyy"}']),
    (MED, ['{"c":"x"}', '{"b":"' + "y" * 20 + '","c":"' + "\u5317" * 100 + '"}', '{"c":"' + " " * 100 + '","d":["' +
           "z" * 40 + '",""]}', '{"c":"' + "\\n" * 100 + '"}'],
     ['{"c":""}', '{"b":"' + "y" * 21 + '","c":"x"}', '{"c":"' + " " * 101 + '"}', '{"c":"' + "\u5317" * 101 + '"}',
      '{"c":"x","d":["' + "z" * 41 + '"]}', '{"c":"' + "\\n" * 101 + '"}']),
]


def _both(schema):
    """(the compiled grammar, the counted back-end's explicit one of the same program)."""
    vocab = get_vocab("llama-bpe")
    cg = Compiler(vocab, cache=False).compile_json_schema(schema)
    prepare()
    prog = fast_program(schema, plain_program_offsets, tail=room_tail(vocab), count_above=COUNT_ABOVE,
                        leaf_of=regular_leaf)
    assert prog is not None and prog.loops
    ref = counted_program(prog.code, prog.lits, prog.root, prog.loops, prog.tail, counted_unit(), vocab,
                          leaves=prog.leaves, leaf_at=prog.leaf_at)
    assert ref is not None
    return cg, ref


def same_walks(a, b, *, seed: int, walks: int = 4, steps: int = 300) -> int:
    """Same masks, verdicts and steps along random walks of ``a`` that pick a token among the
    longest tenth of those allowed 70% of the time; the number of states compared."""
    lens = np.array([len(x) for x in a.vocab.token_bytes])
    rng = np.random.default_rng(seed)
    n = 0
    for _ in range(walks):
        sa = sb = 0
        for _ in range(steps):
            assert np.array_equal(a.mask(sa), b.mask(sb)), (n, sa, sb)
            assert a.is_accepting(sa) == b.is_accepting(sb)
            n += 1
            ids = a.allowed_ids(sa)
            assert len(ids), "empty mask before acceptance"
            if rng.random() < 0.7:
                top = ids[lens[ids] >= np.percentile(lens[ids], 90)]
                ids = top if len(top) else ids
            t = int(rng.choice(ids))
            sa, sb = a.next_state(sa, t), b.next_state(sb, t)
            assert (sa == EOG) == (sb == EOG) and sa != -1 and sb != -1
            if sa == EOG:
                break
    return n


@pytest.mark.parametrize("schema,good,bad", CASES, ids=["string300", "object", "medium"])
def test_accepts_and_rejects_at_the_bounds(schema, good, bad):
    cg, ref = _both(schema)
    assert isinstance(cg, LazyCountedGrammar) and cg.backend == "counted" and cg.stats()["lazy"]
    for x in good:
        assert cg.accepts(x.encode()) and ref.accepts(x.encode()), x[:40]
    for x in bad:
        assert not cg.accepts(x.encode()) and not ref.accepts(x.encode()), x[:40]


@pytest.mark.parametrize("schema", [S300, OBJ, MED], ids=["string300", "object", "medium"])
def test_masks_as_the_explicit_counted_automaton(schema):
    cg, ref = _both(schema)
    assert same_walks(cg, ref, seed=1) > 100
    assert cg._near  # (the near-end masks were compared)


def test_crossing_tokens_from_the_layout_cover_those_from_the_nfa():
    """The fast path's ``lows`` (``"`` right before a loop's ``<en>``, or its ``minLength``
    units) give at least the tokens that the bytes before each ``<en>``, read from the NFA
    (:func:`~decoding.backends.counted_lazy._befores`), give: the crossing checks stay exact."""
    from decoding.backends.counted_lazy import lazy_counted_program

    vocab = get_vocab("llama-bpe")
    seen = 0
    for schema in [MED] + [s for s, cg in compiled_corpus("Snowplow", 4) if isinstance(cg, LazyCountedGrammar)]:
        prog = fast_program(schema, plain_program_offsets, tail=room_tail(vocab), count_above=COUNT_ABOVE,
                            leaf_of=regular_leaf)
        args = (prog.code, prog.lits, prog.root, prog.loops, prog.tail, counted_unit(), vocab)
        kw = dict(leaves=prog.leaves, leaf_at=prog.leaf_at)
        a = lazy_counted_program(*args, lows=prog.lows, **kw)
        b = lazy_counted_program(*args, **kw)
        assert a is not None and b is not None
        assert set(b._cross_ids.tolist()) <= set(a._cross_ids.tolist())
        seen += bool(len(b._cross_ids))
    assert seen >= 2  # (MED, and a Snowplow schema with a medium loop)


def test_a_token_crossing_into_a_medium_loop_is_removed():
    """After ``{"c":"`` (``minLength`` 1, room 99) the 128-space token starts a unit, crosses
    ``<en>`` and starts 127 more: the free automaton allows it, the grammar must not."""
    cg, ref = _both(MED)
    vocab = cg.vocab
    sp = vocab.token_bytes.index(b" " * 128)
    assert sp in cg._cross_ids.tolist()
    s = r = 0
    for t in vocab.greedy(b'{"c":"'):
        s, r = cg.next_state(s, t), ref.next_state(r, t)

    def has(m):
        return bool(m[sp >> 5] >> (sp & 31) & 1)

    assert has(cg.free.mask(cg._states[s][0])) and not has(ref.mask(r)) and not has(cg.mask(s))
    assert sp not in cg.allowed_ids(s).tolist() and cg.next_state(s, sp) < 0
    assert np.array_equal(cg.mask(s), ref.mask(r))


def test_snowplow_as_the_explicit_counted_automaton():
    done = near = 0
    for schema, cg in compiled_corpus("Snowplow", 4):
        if not isinstance(cg, LazyCountedGrammar):
            continue
        _, ref = _both(schema)
        same_walks(cg, ref, seed=done, walks=2, steps=150)
        done += 1
        near += len(cg._near)
    assert done >= 12 and near > 0


def test_budgeted_walks_validate():
    cg, _ = _both(OBJ)
    walks = budgeted_walks(cg, np.random.default_rng(7), 4, cg.completion_cost(0) + 40)
    assert len(walks) == 4 and all(w.finished for w in walks)
    for w in walks:
        jsonschema.validate(json.loads(w.text), OBJ)


@pytest.mark.parametrize("schema,options", [
    ({"type": "object", "properties": {"a": S300, "b": {"type": "string", "minLength": 1, "maxLength": 40}}}, {}),
    ({"anyOf": [S300, {"type": "integer"}]}, {}),
    ({"type": "object", "properties": {"a": S300, "p": {"type": "string", "pattern": "^x+$"}}}, {}),
    (S300, {"eager": True}),
], ids=["minlength-medium", "union", "pattern", "eager"])
def test_what_stays_explicit(schema, options):
    cg = Compiler(get_vocab("llama-bpe"), cache=False).compile_json_schema(schema, **options)
    assert cg.backend == "counted" and not isinstance(cg, LazyCountedGrammar)


@pytest.mark.parametrize("vocab_name", ["llama-bpe", "gemma-4"])
def test_native_unit_walk_as_numpy(vocab_name):
    """``_native.unit_walk`` (the units each token starts from a unit state: the near-end and
    crossing tables) against the numpy walk, over a whole real vocabulary, from every unit
    state and from suffixes (offsets 1..3)."""
    from decoding.backends.counted import _unit, _unit_walk, _walk, _walk_numpy
    from decoding.ir import Grammar

    vocab = get_vocab(vocab_name)
    u = counted_unit()
    w = _unit_walk(_unit(u, Grammar.single(u), None)[1], vocab, 1)
    blob, off = vocab.blob()
    data = np.frombuffer(blob, dtype=np.uint8)
    st, ln = off[:-1].astype(np.int64), (off[1:] - off[:-1]).astype(np.int64)
    for q in range(len(w.step)):
        got = _walk(w.step, w.starts, data, st, ln, q)
        assert np.array_equal(got, _walk_numpy(w.step, w.starts, data, st, ln, q)), q
        assert got.max() > (1 if q == 0 else -1)
    for i in (1, 2, 3):
        keep = ln > i
        args = (w.step, w.starts, data, st[keep] + i, ln[keep] - i, 0)
        assert np.array_equal(_walk(*args), _walk_numpy(*args))
    with pytest.raises(ValueError, match="out of range"):
        _walk(w.step, w.starts, data, st[-1:], ln[-1:] + 1, 0)


def test_the_switch(monkeypatch):
    monkeypatch.setattr(compiler_mod, "LAZY_COUNTED", False)
    cg = Compiler(get_vocab("llama-bpe"), cache=False).compile_json_schema(S300)
    assert cg.backend == "counted" and not isinstance(cg, LazyCountedGrammar)
