"""The JSON Schema fast path (:mod:`decoding.frontends.jsonschema.fast`, issue 14) compiles a
schema of its subset to the same language as the pipeline (front-end, IR, DFA back-end):

- hand-written schemas: strings each must accept or reject;
- every schema of the shared JSONSchemaBench splits it accepts: the same minimal DFA's
  language as the pipeline's and the same ``ignored`` list (and a floor on how many it
  accepts, so a fast path that declines everything fails);
- long strings written as counted loops (given the vocabulary's tail): the same marked
  automaton as the counted back-end's rewrite of the pipeline's grammar (corpora, markers
  matched by a bijection), the same masks, strings accepted and rejected at the bounds;
- what it declines: each keyword, bound and option outside the subset;
- through :class:`~decoding.compiler.Compiler`: the same masks as with the fast path off,
  the same errors for invalid schemas, the cache.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

import decoding.compiler as compiler_mod
from decoding.backends.automaton import compile_dfa, plain_program_offsets, program_dfa, regular_dfa, regular_leaf
from decoding.backends.contract import EOG
from decoding.backends.counted import compile_counted, counted_program, room_tail
from decoding.backends.select import compile_grammar
from decoding.compiler import Compiler
from decoding.frontends.jsonschema.fast import MAX_BOUND, counted_unit, fast_program, prepare
from decoding.frontends.sources import build_grammar

from decoding.testing import budgeted_walks

from conftest import CORPORA, assert_same_masks_in_lockstep, get_vocab


def _program(schema, **options):
    prepare()
    return fast_program(schema, plain_program_offsets, **{"leaf_of": regular_leaf, **options})


def _fast_dfa(schema, **options):
    prog = _program(schema, **options)
    assert prog is not None, schema
    dfa = program_dfa(prog.code, prog.lits, prog.root, leaves=prog.leaves, leaf_at=prog.leaf_at)
    assert dfa is not None
    return dfa


def _explicit(cg):
    """The explicit DFA of a compiled grammar of the DFA or the lazy back-end (every reachable
    state made: a lazy automaton's subset construction, not minimised)."""
    return cg.dfa if cg.backend == "dfa" else cg.dfa.explicit()


def same_language(a, b) -> bool:
    """Whether two trimmed byte DFAs (no specials) accept the same strings: a walk over the
    pairs of states the same bytes lead to (:func:`same_marked_language` with no markers)."""
    assert not a.specials and not b.specials
    return same_marked_language(a, b)


def same_marked_language(a, b) -> bool:
    """:func:`same_language` of two DFAs with special columns (counted loops' markers), each
    special of ``a`` standing for one of ``b``'s: the bijection is found on the walk (a state
    with two unnamed special moves on each side is not told apart: False)."""
    name: dict[str, str] = {}
    seen, todo = {(0, 0)}, [(0, 0)]
    while todo:
        x, y = todo.pop()
        if bool(a.accepting[x]) != bool(b.accepting[y]):
            return False
        tx, ty = a.trans[x, a.byte_class[:256]], b.trans[y, b.byte_class[:256]]
        if not np.array_equal(tx < 0, ty < 0):
            return False
        pairs = set(zip(tx[tx >= 0].tolist(), ty[ty >= 0].tolist()))
        sa = {t: int(a.trans[x, a.n_classes + j]) for j, t in enumerate(a.specials) if a.trans[x, a.n_classes + j] >= 0}
        sb = {t: int(b.trans[y, b.n_classes + j]) for j, t in enumerate(b.specials) if b.trans[y, b.n_classes + j] >= 0}
        new_a = [t for t in sa if t not in name]
        new_b = [t for t in sb if t not in name.values()]
        if len(sa) != len(sb) or len(new_a) != len(new_b) or len(new_a) > 1:
            return False
        if new_a:
            name[new_a[0]] = new_b[0]
        for t, tgt in sa.items():
            if name[t] not in sb:
                return False
            pairs.add((tgt, sb[name[t]]))
        for p in pairs:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return True


def _pipeline_dfa(schema, **options):
    g, meta = build_grammar(schema, "json-schema", **options)
    return compile_dfa(g), meta


# ------------------------------------------------------------------ accepted and rejected strings

S = {"type": "string"}
OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 2},
                                        "c": {"type": "boolean"}}, "required": ["b"]}
CASES = [
    (OBJ, ['{"b":""}', '{"a":1,"b":"xy"}', '{"b":"x","c":true}', '{"a":-7,"b":"","c":false}'],
     ['{}', '{"a":1}', '{"b":"xyz"}', '{"b":"x","a":1}', '{"a":1,,"b":""}', '{"b":"",}', '{ "b":""}',
      '{"b":"","c":null}']),
    ({"type": "object", "properties": {"x": {"type": "null"}, "y": {"type": "number"}}},
     ['{}', '{"x":null}', '{"y":1.5e3}', '{"x":null,"y":0}'], ['{,}', '{"y":0,"x":null}', '{"x":1}']),
    ({"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"], "additionalProperties": False},
     ['{"p":"a\\"b"}', '{"p":"\u00e9\u4e2d"}', '{"p":"\\u001f"}'], ['{"p":"a"', '{"p":"a","q":1}', '{"p":"\\/"}']),
    ({"type": "object", "additionalProperties": False}, ["{}"], ['{"a":1}', "[]"]),
    ({"type": "array", "items": {"type": "integer"}}, ["[]", "[1]", "[1,-2,3]"], ["[,]", "[1,]", "[01]"]),
    ({"type": "array", "items": {"enum": ["a", 1, None]}, "minItems": 2, "maxItems": 3},
     ['["a",1]', '[null,null,"a"]'], ['["a"]', '[1,1,1,1]', '["b",1]']),
    ({"type": "array", "items": {"type": "string"}, "maxItems": 0}, ["[]"], ['[""]']),
    ({"type": ["string", "null"], "minLength": 2}, ['"ab"', "null"], ['"a"', '""', "1"]),
    ({"type": ["integer", "number"]}, ["1", "1.5", "-0.25e-3"], ['"1"', "1."]),
    ({"type": "string", "enum": ["x", 3, "y"]}, ['"x"', '"y"'], ["3", '"z"']),
    ({"const": {"k": [1, "v"]}}, ['{"k":[1,"v"]}'], ['{"k": [1,"v"]}', '{"k":[1]}']),
    ({"type": "integer", "minimum": -3, "exclusiveMaximum": 12}, ["-3", "0", "11"], ["-4", "12", "1.0"]),
    ({"type": "number", "minimum": 0, "maximum": 1}, ["0", "1", "0.5"], ["-0.5", "1.5", "2"]),
    ({"type": "integer", "minimum": 3, "exclusiveMinimum": True, "$schema": "http://json-schema.org/draft-04/schema#"},
     ["4", "100"], ["3", "2"]),
    ({"type": "string", "format": "date"}, ['"2024-02-29"'], ['"2024-2-29"', '"x"']),
    ({"type": "string", "format": "x-unknown-format"}, ['"anything"'], ["1"]),
    ({"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/s"}], "description": "d", "$defs": {"s": S}},
     ['1', '"a"'], ["null", "1.5"]),
    ({"type": "object", "properties": {"a": {"$ref": "#/definitions/p"}, "b": {"$ref": "#/definitions/p"}},
      "definitions": {"p": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}}},
     ['{"a":[true],"b":[]}'], ['{"a":[true,true,true]}']),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, ["{}", '{"x":1,"":2}'], ['{"x":"1"}']),
    ({"type": "object", "properties": {"id": S}, "required": ["id"], "additionalProperties": {"type": "null"}},
     ['{"id":"a"}', '{"id":"a","x":null}'], ['{"id":"a","id":null}', '{"x":null,"id":"a"}', '{"id":"a","i":1}']),
    ({"type": "object"}, ["{}", '{"a":[{"b":null}]}', '{"a":1,"b":"c"}'], ["[]", '{"a"}']),
    ({"type": "array", "items": {"description": "any"}}, ["[]", '[1,"a",{},[null]]'], ["[1,]"]),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "array", "items": {
        "type": "boolean"}}}, "required": ["b"]}}, "required": ["a"], "description": "nested", "title": "t"},
     ['{"a":{"b":[]}}', '{"a":{"b":[true,false]}}'], ['{"a":{}}', '{"a":{"b":[1]}}']),
    ({"type": "string", "pattern": "^[a-z]+-\\d{2}$"}, ['"ab-12"', '"x-00"'], ['"ab-1"', '"AB-12"', '"ab-123"']),
    ({"type": "string", "pattern": "b\u5317"}, ['"ab\u5317c"', '"b\u5317"'], ['"ab"', '"\u5317b"']),
    ({"maxLength": 3}, ['""', '"abc"'], ['"abcd"', "1", "null"]),
    ({"anyOf": [S, {"type": "null"}, {"type": "integer"}], "maxLength": 2, "minimum": 5},
     ['"ab"', "null", "5", "12"], ['"abc"', "4", "true"]),
    ({"$id": "https://example.com/s.json", "type": "array", "items": {"$ref": "#/$defs/a"}, "$defs": {"a": S}},
     ["[]", '["x"]'], ["[1]"]),
    ({"type": "array", "maxItems": 2}, ["[]", '[1,"a"]', '[{"k":[null]}]'], ['[1,2,3]', "[1,]", "{}"]),
    ({"properties": {"a": S}, "required": ["a"], "minimum": 2}, ['{"a":""}', "2", "2.5"], ["{}", "1", '"a"']),
    ({"type": "object", "properties": {"a": S, "b": {"type": "integer"}}, "minProperties": 1},
     ['{"a":""}', '{"b":1}', '{"a":"","b":2}'], ["{}", '{"c":1}']),
    ({"type": "object", "properties": {"a": S}, "additionalProperties": True, "minProperties": 1},
     ['{"a":""}', '{"b":1}', '{"a":"","b":[]}'], ["{}", '{"a":1}']),
    # a pattern with length bounds: within them, folded into a single repetition, or an intersection (a leaf)
    ({"type": "string", "pattern": "^a$", "maxLength": 3}, ['"a"'], ['""', '"aa"']),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4}, ['"ab"', '"abcd"'], ['"a"', '"abcde"']),
    ({"type": "string", "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$", "maxLength": 12},
     ['"1.2.3"', '"10.20.30-rc1"', '"1.2.3\u5317"'], ['"1.2"', '"10.20.30-rc.1"', '"x1.2.3"']),
    ({"type": "string", "pattern": "b", "minLength": 2, "maxLength": 3}, ['"ab"', '"bbb"', '"\u5317b"'],
     ['"b"', '"abab"', '"aa"']),
    # required, not declared: a member after the declared ones, its value additionalProperties
    ({"type": "object", "properties": {"a": S}, "required": ["b"]},
     ['{"b":1}', '{"a":"","b":{"x":[null]}}'], ["{}", '{"a":""}', '{"b":1,"a":""}']),
    ({"type": "object", "properties": {"a": S}, "required": ["b", "a"], "additionalProperties": {"type": "integer"}},
     ['{"a":"","b":1}', '{"a":"","b":2,"c":3}'], ['{"a":"","b":"x"}', '{"a":"","c":1,"b":1}', '{"b":1}']),
    ({"oneOf": [S, {"type": "integer"}], "description": "int or string"}, ['"a"', "12"], ["null", "1.5", "[]"]),
    ({"oneOf": [{"type": "number"}, {"type": ["null", "boolean"]},
                {"type": "object", "properties": {"k": S}, "required": ["k"]}]},
     ["1.5", "null", "true", '{"k":"v"}'], ['"a"', "{}", "[]"]),
]


@pytest.mark.parametrize("schema,good,bad", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_accepts_and_rejects(schema, good, bad):
    dfa = _fast_dfa(schema)
    for s in good:
        assert dfa.accepts(s.encode("utf-8")), s
    for s in bad:
        assert not dfa.accepts(s.encode("utf-8")), s
    ref, _ = _pipeline_dfa(schema)
    assert same_language(dfa, ref)


def _writer():
    """The fast path's writer after the plain prefix (no schema walked)."""
    from decoding.frontends.jsonschema.fast import _Writer
    from decoding.ir.program import ProgramWriter

    prepare()
    at, base, nlit, prefix = plain_program_offsets()
    return _Writer(ProgramWriter(base, nlit), at, {}, 0, None, prefix, False, None)


def _written(write):
    """The DFA of the records ``write(writer)`` writes, as a program's root."""
    w = _writer()
    root = write(w)
    assert root is not None
    return program_dfa(w.out.code, bytes(w.out.lits), root)


@pytest.mark.parametrize("kids", ["a", "ab~", ' "\\', "azAZ09_-$", "".join(chr(c) for c in range(0x20, 0x7F))])
def test_other_char_records_as_the_pipelines(kids):
    """The trie's other character of printable ASCII ``kids`` written as records (a byte set,
    the escapes, the constant non-ASCII node: ``_Writer.other_char``) spells what
    ``logic.other_char`` spells: ``json_char`` of their complement, then any content."""
    from decoding.frontends.jsonschema.logic import other_char

    got = _written(lambda w: w.other_char(kids))
    assert same_language(got, regular_dfa(other_char(kids)))
    assert got.accepts(b"\\u0001") and got.accepts("\u5317".encode()) and not got.accepts(b"\\u0041")
    for c in kids:
        assert not got.accepts(c.encode() if c not in '"\\' else b"\\" + c.encode())


@pytest.mark.parametrize("c", [chr(b) for b in range(0x20, 0x7F)])
def test_one_char_records_as_the_pipelines(c):
    """A trie edge's character written as a record (``_Writer.one_char``): ``logic.one_char``'s
    language (the byte itself, or the escape of ``"`` and ``\\``)."""
    from decoding.frontends.jsonschema.logic import one_char

    assert same_language(_written(lambda w: w.one_char(c)), regular_dfa(one_char(c)))


@pytest.mark.parametrize("c", ["\u5317", "\n", "\x7f", "a\u5317"])
def test_other_and_one_char_records_leave_other_characters_to_chunks(c):
    """Characters outside printable ASCII are not written directly (their node's chunk is)."""
    w = _writer()
    assert w.other_char(c) is None
    if len(c) == 1:
        assert w.one_char(c) is None


def test_min_length_above_max_bound_where_strings_are_counted():
    """``minLength`` past MAX_BOUND is written (its characters before the loop) only where long
    strings are counted (a ``tail`` given): the pipeline's language."""
    schema = {"type": "string", "minLength": 20, "maxLength": 22}
    assert _program(schema) is None
    dfa = _fast_dfa(schema, tail=16)
    for s in ['"' + "a" * 20 + '"', '"' + "\u5317" * 22 + '"']:
        assert dfa.accepts(s.encode()), s
    for s in ['"' + "a" * 19 + '"', '"' + "a" * 23 + '"']:
        assert not dfa.accepts(s.encode()), s
    assert same_language(dfa, _pipeline_dfa(schema)[0])


def test_the_comparison_can_fail():
    a = _fast_dfa(OBJ)
    b = _fast_dfa({**OBJ, "required": ["a", "b"]})
    c = _fast_dfa({**OBJ, "properties": {**OBJ["properties"], "b": {"type": "string", "maxLength": 3}}})
    assert same_language(a, a) and not same_language(a, b) and not same_language(a, c)


# ------------------------------------------------------------------ the corpora

#: schemas the fast path accepted on each split when it was written (a floor: fewer fails)
FLOORS = {"Github_easy": 1562, "Github_trivial": 311, "Glaiveai2K": 1637, "Kubernetes": 617, "Snowplow": 183}


NUMBERS = [{"type": "integer", "minimum": 0, "maximum": 9007199254740991},
           {"type": "integer", "minimum": 0, "maximum": 100},
           {"type": "integer", "minimum": -5, "maximum": 100},
           {"type": "number", "minimum": -5, "maximum": 100},
           {"type": "number", "minimum": 0.5, "exclusiveMaximum": 10},
           {"type": "integer", "minimum": 1, "exclusiveMinimum": 1},
           {"type": "integer", "minimum": 1.0, "exclusiveMinimum": 1},
           {"type": "integer", "minimum": 3, "maximum": 2}]


def test_bounded_numbers_are_kept_per_process(monkeypatch):
    """A bounded number's records are made once per process (by its bounds' JSON text) and
    written once per program: cold and warm, the same records and the pipeline's language."""
    import decoding.frontends.jsonschema.fast as fast_mod

    monkeypatch.setattr(fast_mod, "_CHUNKS", {})
    for n in NUMBERS:
        schema = {"type": "object", "properties": {"a": n, "b": {"type": "array", "items": n}}}
        cold, warm = _program(schema), _program(schema)
        if n.get("minimum") == 3:  # (no value: declined both times, the pipeline reports it)
            assert cold is None and warm is None
            continue
        assert cold is not None and warm is not None and cold.code == warm.code and cold.lits == warm.lits, n
        dfa = program_dfa(warm.code, warm.lits, warm.root, leaves=warm.leaves, leaf_at=warm.leaf_at)
        assert same_language(dfa, _pipeline_dfa(schema)[0]), n
    kept = [k for chunks in fast_mod._CHUNKS.values() for k in chunks if k[0] == "n"]
    assert len(kept) == len(NUMBERS)  # (1 and 1.0 apart: the same language, other keys)


@pytest.mark.parametrize("split", sorted(FLOORS))
def test_corpus_same_language_as_the_pipeline(split):
    accepted = 0
    for f in sorted((CORPORA / "jsonschemabench" / split).glob("*.json")):
        schema = json.loads(f.read_text(encoding="utf-8"))["schema"]
        prog = _program(schema)
        if prog is None:
            continue
        accepted += 1
        ref, meta = _pipeline_dfa(schema)
        dfa = program_dfa(prog.code, prog.lits, prog.root, leaves=prog.leaves, leaf_at=prog.leaf_at)
        assert dfa is not None and same_language(dfa, ref), f.name
        assert list(prog.ignored) == meta["ignored"], f.name
    assert accepted >= FLOORS[split]


# ------------------------------------------------------------------ long strings: counted loops

LONG = "a" * 255
COUNTED = [
    ({"type": "string", "maxLength": 300}, ['""', '"' + "a" * 300 + '"', '"' + "\u5317" * 300 + '"'],
     ['"' + "a" * 301 + '"', '"' + "\u5317" * 301 + '"']),
    ({"type": "string", "minLength": 3, "maxLength": 1000}, ['"abc"', f'"{LONG}"', '"a\\"b"'],
     ['"ab"', '"' + "a" * 1001 + '"']),
    ({"type": "object", "properties": {"a": {"type": ["string", "null"], "maxLength": 255},
                                       "b": {"type": "string", "maxLength": 255}, "c": {"type": "string", "maxLength": 100}},
      "required": ["b"], "additionalProperties": False},
     ['{"b":""}', f'{{"a":"{LONG}","b":"{LONG}"}}', f'{{"a":null,"b":"x","c":"{"c" * 100}"}}'],
     [f'{{"b":"{LONG}b"}}', f'{{"a":"{LONG}a","b":""}}', f'{{"b":"","c":"{"c" * 101}"}}']),
    ({"type": "array", "items": {"type": "string", "maxLength": 500}, "maxItems": 3},
     ["[]", f'["{"x" * 500}","","{"y" * 64}"]'], [f'["{"x" * 501}"]', '["","","",""]']),
    ({"type": "string", "maxLength": 131072}, ['"' + "a" * 131072 + '"'], ['"' + "a" * 131073 + '"']),
    ({"type": "string", "minLength": 40, "maxLength": 500}, ['"' + "a" * 40 + '"', '"' + "\u5317" * 500 + '"'],
     ['"' + "a" * 39 + '"', '"' + "a" * 501 + '"']),  # (minLength past MAX_BOUND: written before the loop)
]


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("schema,good,bad", COUNTED, ids=[f"counted{i}" for i in range(len(COUNTED))])
def test_long_strings_are_counted_loops(schema, good, bad, lazy, pipeline_only, monkeypatch):
    """Both forms: the counted back-end's explicit automaton and the counted loops over
    lazy automata (:mod:`decoding.backends.counted_lazy`)."""
    monkeypatch.setattr(compiler_mod, "LAZY_COUNTED", lazy)
    vocab = get_vocab("llama-bpe")
    comp = Compiler(vocab, cache=False)
    cg = comp.compile_json_schema(schema)
    assert cg.meta["grammar_digest"].startswith("fast:") and cg.backend == "counted"
    assert cg.stats().get("lazy", False) is lazy
    for x in good:
        assert cg.accepts(x.encode("utf-8")), x[:40]
    for x in bad:
        assert not cg.accepts(x.encode("utf-8")), x[:40]
    pipeline_only()
    ref = comp.compile_json_schema(schema, backend="counted")
    assert not ref.meta["grammar_digest"].startswith("fast:")
    if not lazy:
        assert same_marked_language(cg.dfa, ref.dfa)
    same_masks_along_walks(cg, ref, seed=len(good))
    walks = budgeted_walks(cg, np.random.default_rng(5), 3, cg.completion_cost(0) + 30)
    assert len(walks) == 3 and all(w.finished for w in walks)
    for w in walks:
        jsonschema.validate(json.loads(w.text), schema)


def same_masks_along_walks(a, b, *, seed: int, walks: int = 4, steps: int = 80) -> None:
    """Two compiled grammars give the same masks along random walks of ``a``'s allowed tokens
    (a breadth-first lockstep steps every allowed token: ~100k in a string, too many here)."""
    rng = np.random.default_rng(seed)
    for _ in range(walks):
        sa = sb = 0
        for _ in range(steps):
            assert np.array_equal(a.mask(sa), b.mask(sb)), (sa, sb)
            assert a.is_accepting(sa) == b.is_accepting(sb)
            ids = a.allowed_ids(sa)
            if not len(ids):
                break
            t = int(rng.choice(ids))
            sa, sb = a.next_state(sa, t), b.next_state(sb, t)
            assert sa >= 0 and sb >= 0 or sa == sb == EOG
            if sa == EOG:
                break


SMALL_LONG = [{"type": "string", "maxLength": 40},
              {"type": "object", "properties": {"a": {"type": "string", "maxLength": 100},
                                                "b": {"type": "string", "minLength": 2, "maxLength": 150}}}]


@pytest.mark.parametrize("schema", SMALL_LONG, ids=["40", "100+150"])
def test_long_strings_small_unrolled_are_not_counted(schema, pipeline_only):
    """Counted only where the strings' unrolled estimate is above COUNT_ABOVE (auto's bound
    on its whole grammar's): these stay DFAs (artifacts can hold them), and backend="dfa"
    never counts."""
    comp = Compiler(get_vocab("llama-bpe"), cache=False)
    cg = comp.compile_json_schema(schema)
    big = comp.compile_json_schema({"type": "string", "maxLength": 1000}, backend="dfa")
    assert cg.backend in ("dfa", "lazy") and big.backend == "dfa"  # (lazy: a large NFA, LAZY_NFA_ABOVE)
    assert cg.meta["grammar_digest"].startswith("fast:") and big.meta["grammar_digest"].startswith("fast:")
    pipeline_only()
    ref = comp.compile_json_schema(schema, backend="dfa")  # (auto may count the second: its estimate is larger)
    assert same_language(_explicit(cg), ref.dfa)


def test_a_string_within_the_tail_is_unrolled():
    tail = room_tail(get_vocab("llama-bpe"))
    inside = _program({"type": "string", "minLength": 2, "maxLength": 3 + tail}, tail=tail)
    past = _program({"type": "string", "minLength": 2, "maxLength": 4 + tail}, tail=tail)
    assert inside.loops == () and past.loops == (2 + tail - tail,)
    assert _program({"type": "string", "maxLength": 4 + tail}) is None  # (no tail: declined)


def test_marked_comparison_can_fail():
    v = get_vocab("llama-bpe")
    a = compile_counted(build_grammar({"type": "string", "maxLength": 255}, "json-schema")[0], v)
    b = compile_counted(build_grammar({"type": "string", "minLength": 1, "maxLength": 255}, "json-schema")[0], v)
    c = compile_counted(build_grammar({"type": "string", "maxLength": 300}, "json-schema")[0], v)
    assert same_marked_language(a.dfa, a.dfa) and not same_marked_language(a.dfa, b.dfa)
    assert a.loops[0].x != c.loops[0].x  # (the marked language holds no count: the loops say it)


#: schemas with counted loops on each split when this was written (a floor)
COUNTED_FLOORS = {"Snowplow": 125, "Github_easy": 97, "Github_trivial": 12}


@pytest.mark.parametrize("split", sorted(COUNTED_FLOORS))
def test_corpus_counted_as_the_counted_back_end(split):
    """Every corpus schema the fast path writes with loops: the counted back-end's own
    automaton of the pipeline's grammar (markers and all), the same loops, ``ignored``."""
    v = get_vocab("llama-bpe")
    tail = room_tail(v)
    n = others = 0
    for f in sorted((CORPORA / "jsonschemabench" / split).glob("*.json")):
        schema = json.loads(f.read_text(encoding="utf-8"))["schema"]
        prog = _program(schema, tail=tail)
        if prog is None or not prog.loops:
            continue
        g, meta = build_grammar(schema, "json-schema")
        ref = compile_counted(g, v)
        cg = counted_program(prog.code, prog.lits, prog.root, prog.loops, prog.tail, counted_unit(), v,
                             leaves=prog.leaves, leaf_at=prog.leaf_at)
        if ref is None or len(ref.loops) != len(cg.loops):
            # (the rewrite also counts a pattern's or a format's repetitions: other markers, or
            # a counted form its check refused; the masks must still be the same)
            assert cg is not None, f.name
            same_masks_along_walks(cg, ref or compile_grammar(g, v), seed=n, walks=2, steps=40)
            others += 1
            continue
        assert cg is not None and same_marked_language(cg.dfa, ref.dfa), f.name
        assert sorted((lp.x, lp.tail) for lp in cg.loops) == sorted((lp.x, lp.tail) for lp in ref.loops), f.name
        assert list(prog.ignored) == meta["ignored"], f.name
        n += 1
    assert n >= COUNTED_FLOORS[split] and others <= n // 10


# ------------------------------------------------------------------ what it declines

DECLINED = [
    {"type": "string", "pattern": "^a+b+$", "maxLength": 300},  # (an intersection past the leaf's length)
    {"type": "string", "pattern": "^a+b+$", "maxLength": 3, "format": "date"},
    {"type": "string", "pattern": "^ab$", "minLength": 3},  # (no string: the pipeline reports it)
    {"type": "string", "minLength": 129},
    {"type": "string", "pattern": "^a", "format": "date"},
    {"type": "string", "pattern": "("},
    {"type": "string", "pattern": 3},
    {"type": "string", "format": "date", "maxLength": 12},
    {"type": "string", "maxLength": MAX_BOUND + 1},
    {"type": "string", "minLength": 1.0},
    {"type": "number", "multipleOf": 2},
    {"oneOf": [S, {"type": ["string", "null"]}]},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"oneOf": [S, {"enum": [1, 2]}]},
    {"oneOf": [S, {"type": "null"}, {"required": ["a"]}]},
    {"oneOf": [{"type": "string", "required": ["a"]}, {"type": "null"}]},
    {"oneOf": [S, {"$ref": "#/$defs/n"}], "$defs": {"n": {"type": "null"}}},
    {"oneOf": [S, {"type": "null"}], "maxLength": 3},
    {"oneOf": [S, {"type": ["null", "null"]}]},
    {"allOf": [S, {"maxLength": 3}]},
    {"anyOf": [S, {"$ref": "#/$defs/n"}], "maxLength": 3, "$defs": {"n": {"type": "null"}}},
    {"anyOf": [{"type": "integer", "exclusiveMinimum": 1}, S], "maximum": 3},
    {"anyOf": [S, {"type": "null"}], "x-unknown": 1},
    {"$ref": "#/$defs/a", "maxLength": 3, "$defs": {"a": S}},
    {"$ref": "#/$defs/n", "$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}},
    {"$ref": "#/$defs/a", "$defs": {"a": {"$id": "https://example.com/a", "type": "string"}}},
    {"$id": "https://example.com/s#frag", "$ref": "#/$defs/a", "$defs": {"a": S}},
    {"$ref": "other.json"},
    {"type": "object", "properties": {"a": S}, "patternProperties": {"^x": S}},
    {"type": "object", "properties": {"a": S}, "required": ["b"], "additionalProperties": False},  # (nothing)
    {"type": "object", "properties": {"a": S}, "required": ["b", "b"]},
    {"type": "object", "properties": {"a": S}, "minProperties": 2},
    {"type": "object", "properties": {"a": S}, "minProperties": 1.5},
    {"type": "object", "additionalProperties": False, "minProperties": 1},
    {"type": "object", "propertyNames": {"maxLength": 3}},
    {"type": "array", "items": False},
    {"type": "array", "items": [S]},
    {"type": "array", "items": S, "uniqueItems": True},
    {"type": "array", "items": S, "maxItems": 1, "minItems": 2},
    {"type": "array", "items": S, "contains": S},
    {"maxLength": 3, "items": False},
    {"enum": []},
    {"type": "integer", "enum": ["a"]},
    {"type": "string", "maxLength": 1, "minLength": 2},
    {"type": "integer", "minimum": 5, "maximum": 1},
    {"not": S},
    False,
    {"type": "strin"},
]


@pytest.mark.parametrize("schema", DECLINED, ids=[json.dumps(s)[:60] for s in DECLINED])
def test_declines_outside_the_subset(schema):
    assert _program(schema) is None
    assert _program({"type": "array", "items": S}) is not None  # (the control)


@pytest.mark.parametrize("option", [{"whitespace": "flexible"}, {"whitespace": "natural"},
                                    {"extra_properties": "allow"}, {"max_nfa": 1000}, {"untyped": "any"}])
def test_declines_other_options(option):
    assert _program(OBJ) is not None
    assert _program(OBJ, **option) is None


def test_unknown_keywords_are_listed_as_the_front_end_lists_them():
    schema = {"type": "object", "self": {"vendor": "x"}, "properties": {"a/b": {"type": "string", "nullable": True}}}
    prog = _program(schema)
    _, meta = _pipeline_dfa(schema)
    assert list(prog.ignored) == meta["ignored"] == ["/ self", "/properties/a~1b nullable"]


def test_digest_names_the_language():
    a, b = _program(OBJ), _program(json.loads(json.dumps(OBJ)))
    c = _program({**OBJ, "required": []})
    assert a.digest == b.digest != c.digest and a.digest.startswith("fast:")


# ------------------------------------------------------------------ through the Compiler

@pytest.fixture()
def pipeline_only(monkeypatch):
    def off():
        monkeypatch.setattr(compiler_mod, "FAST_SCHEMAS", False)
    return off


@pytest.mark.parametrize("vocab_name", ["llama-bpe", "gemma-4"])
def test_compiler_masks_as_the_pipeline(vocab_name, pipeline_only):
    vocab = get_vocab(vocab_name)
    comp = Compiler(vocab, cache=False)
    schemas = [s for s, _, _ in CASES] + [json.loads(p.read_text())["schema"] for p in
                                          sorted((CORPORA / "jsonschemabench" / "Glaiveai2K").glob("*.json"))[:16]]
    fast = [comp.compile_json_schema(s) for s in schemas]
    pipeline_only()
    slow = [comp.compile_json_schema(s) for s in schemas]
    used = 0
    for s, a, b in zip(schemas, fast, slow):
        used += a.meta["grammar_digest"].startswith("fast:")
        assert not b.meta["grammar_digest"].startswith("fast:")
        assert {k: v for k, v in a.meta.items() if k != "grammar_digest"} == \
            {k: v for k, v in b.meta.items() if k != "grammar_digest"}
        assert a.backend == b.backend == "dfa"
        assert_same_masks_in_lockstep(a, b, max_pairs=60)
    assert used >= len(CASES) + 8


INVALID = [{"type": "strin"}, {"type": "object", "properties": {"a": S}, "required": "a"},
           {"type": "string", "maxLength": -1}, {"type": "array", "items": S, "minItems": 3, "maxItems": 2},
           {"type": "string", "pattern": "("}, {"type": "string", "maxLength": 300, "minLength": 400},
           {"oneOf": [S, {"type": "integer", "minimum": "x"}]}]


@pytest.mark.parametrize("schema", INVALID, ids=[json.dumps(s)[:60] for s in INVALID])
def test_compiler_errors_as_the_pipeline(schema, pipeline_only):
    comp = Compiler(get_vocab("llama-bpe"), cache=False)

    def outcome():
        try:
            comp.compile_json_schema(schema)
        except Exception as e:  # noqa: BLE001 - compared
            return type(e).__name__, getattr(e, "pointer", None), str(e)
        return None

    fast = outcome()
    pipeline_only()
    assert fast == outcome() and fast is not None


def test_compiler_cache_keeps_fast_grammars():
    comp = Compiler(get_vocab("llama-bpe"))  # (the default: an in-memory cache)
    a = comp.compile_json_schema(OBJ)
    b = comp.compile_json_schema(json.loads(json.dumps(OBJ)))
    assert a is b and a.grammar_key and a.meta["grammar_digest"].startswith("fast:")
    assert comp.compile_json_schema(OBJ, whitespace="flexible") is not a


def test_threads_compile_the_same_grammars(monkeypatch):
    """Compiles from several threads at once (the not_in chunk cache filled concurrently from
    empty) give the grammars one thread gives: the same keys and tables."""
    from concurrent.futures import ThreadPoolExecutor

    import decoding.frontends.jsonschema.fast as fast_mod

    files = sorted((CORPORA / "jsonschemabench" / "Snowplow").glob("*.json"))[:40]
    schemas = [json.loads(f.read_text(encoding="utf-8"))["schema"] for f in files]
    comp = Compiler(get_vocab("llama-bpe"), cache=False)

    def outcome(s):
        try:
            cg = comp.compile_json_schema(s)
        except Exception as e:  # noqa: BLE001 - compared
            return type(e).__name__, str(e)
        d = getattr(cg, "dfa", None)
        if cg.backend == "lazy":  # (every reachable state made: numbered in the order they are made)
            d = d.explicit()
        table = (d.trans.tobytes(), d.accepting.tobytes()) if hasattr(d, "trans") else ()
        return cg.grammar_key, cg.backend, cg.meta["grammar_digest"].startswith("fast:"), table

    one = [outcome(s) for s in schemas]
    assert sum(o[1] == "counted" and o[2] for o in one) >= 4 and sum(len(o) == 4 and o[2] for o in one) >= 20
    assert sum(o[1] == "lazy" and o[2] for o in one) >= 2
    monkeypatch.setattr(fast_mod, "_CHUNKS", {})
    with ThreadPoolExecutor(4) as ex:
        many = list(ex.map(outcome, schemas * 3))
    assert many == one * 3
