"""The JSON Schema fast path's large programs determinised lazily (issue 14): with
``backend="auto"`` a program whose NFA has more than :data:`~decoding.backends.select.LAZY_NFA_ABOVE`
states compiles to a :class:`~decoding.backends.dfa.lazy.LazyDFAGrammar` over that NFA (no
subset construction, no minimisation at compile time), else to the minimal DFA as before.

- the lazy grammar has the language of the eager minimal DFA of the same program (every
  reachable state made, compared by a walk over pairs of states), the same masks token by
  token, and the strings each hand schema must accept or reject;
- ``backend="dfa"`` (artifacts) never goes lazy, nor a program with a ``pattern``, nor an
  ``eager`` compile (every mask now); a small program stays a DFA;
- on the Snowplow split (every third schema): each lazily compiled one has the eager one's
  language and masks along random walks (a floor on how many go lazy, so a threshold that
  never fires fails).
"""

from __future__ import annotations


import pytest

from decoding.backends import select
from decoding.backends.automaton import plain_program_offsets, program_dfa, program_nfa, regular_leaf
from decoding.backends.counted import room_tail
from decoding.backends.dfa.index import dfa_grammar
from decoding.compiler import Compiler
from decoding.frontends.jsonschema.fast import fast_program, prepare

from conftest import assert_same_masks_in_lockstep, compiled_corpus, get_vocab
from test_schema_fast import same_language, same_masks_along_walks

S = {"type": "string"}
#: 60 optional properties in order: the minimal DFA is quadratic in them, the NFA linear
WIDE = {"type": "object", "additionalProperties": False,
        "properties": {f"property_{i:02d}": (S if i % 3 else {"type": "integer", "minimum": 0, "maximum": 999})
                       for i in range(60)}}
WIDE_GOOD = ['{}', '{"property_00":7}', '{"property_01":"x","property_59":"中文"}',
             '{' + ",".join(f'"property_{i:02d}":' + ('"v"' if i % 3 else "12") for i in range(60)) + '}']
WIDE_BAD = ['{"property_01":"x","property_00":7}', '{"property_00":1000}', '{"property_60":"x"}', '{"property_01":1}',
            '{"property_00":7,}', '{"property_01":"x"']


def _eager(cg, schema):
    """The eager grammar of the program the fast path wrote for ``schema``."""
    prepare()  # (as the compiler writes it: long strings unrolled below COUNT_ABOVE)
    prog = fast_program(schema, plain_program_offsets, tail=room_tail(cg.vocab), count_above=select.COUNT_ABOVE,
                        leaf_of=regular_leaf)
    assert prog is not None and not prog.loops
    dfa = program_dfa(prog.code, prog.lits, prog.root, leaves=prog.leaves, leaf_at=prog.leaf_at)
    return dfa_grammar(dfa, cg.vocab), prog


def _nfa_states(prog) -> int:
    return program_nfa(prog.code, prog.lits, prog.root, leaves=prog.leaves, leaf_at=prog.leaf_at)[0].n


def test_a_wide_object_compiles_lazily_with_the_eager_language():
    comp = Compiler(get_vocab("llama-bpe"), cache=False)
    cg = comp.compile_json_schema(WIDE)
    assert cg.backend == "lazy" and cg.meta["grammar_digest"].startswith("fast:")
    eager, prog = _eager(cg, WIDE)
    assert _nfa_states(prog) > select.LAZY_NFA_ABOVE
    for text in WIDE_GOOD:
        assert cg.accepts(text.encode()) and eager.accepts(text.encode()), text
    for text in WIDE_BAD:
        assert not cg.accepts(text.encode()) and not eager.accepts(text.encode()), text
    assert_same_masks_in_lockstep(cg, eager, max_pairs=60)
    assert same_language(cg.dfa.explicit(), eager.dfa)


def test_dfa_backend_eager_and_small_programs_stay_explicit():
    comp = Compiler(get_vocab("llama-bpe"), cache=False)
    assert comp.compile_json_schema(WIDE, backend="dfa").backend == "dfa"
    assert comp.compile_json_schema(WIDE, eager=True).backend == "dfa"  # (every mask now: the fewest states)
    small = {"type": "object", "properties": {"a": S, "b": {"type": "integer"}}}
    cg = comp.compile_json_schema(small)
    assert cg.backend == "dfa" and cg.meta["grammar_digest"].startswith("fast:")


def test_a_pattern_keeps_the_program_explicit():
    """A ``pattern`` may nest repetitions whose subsets outgrow the memory bound on first visits
    (``(a{0,100}){0,100}``): a program holding one is determinised eagerly (refused at compile
    time where it would be; tests/test_limits_past_estimates.py)."""
    comp = Compiler(get_vocab("llama-bpe"), cache=False)
    props = dict(WIDE["properties"], code={"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"})
    cg = comp.compile_json_schema(dict(WIDE, properties=props))
    assert cg.backend == "dfa" and cg.meta["grammar_digest"].startswith("fast:")
    assert cg.accepts(b'{"code":"AB12"}') and not cg.accepts(b'{"code":"A12"}')


def test_the_threshold_decides(monkeypatch):
    comp = Compiler(get_vocab("llama-bpe"), cache=False)
    monkeypatch.setattr(select, "LAZY_NFA_ABOVE", 10**9)
    assert comp.compile_json_schema(WIDE).backend == "dfa"
    monkeypatch.setattr(select, "LAZY_NFA_ABOVE", 0)
    small = {"type": "object", "properties": {"a": S}}
    assert comp.compile_json_schema(small).backend == "lazy"


def test_snowplow_lazy_grammars_as_the_eager_ones():
    lazy = 0
    for schema, cg in compiled_corpus("Snowplow", 3):
        if cg.backend != "lazy":
            continue
        lazy += 1
        eager, prog = _eager(cg, schema)
        assert _nfa_states(prog) > select.LAZY_NFA_ABOVE, schema.get("self")
        same_masks_along_walks(cg, eager, seed=lazy, walks=2, steps=60)
        assert same_language(cg.dfa.explicit(), eager.dfa), schema.get("self")
    assert lazy >= 15


@pytest.mark.parametrize("text,ok", [(t, True) for t in WIDE_GOOD] + [(t, False) for t in WIDE_BAD])
def test_wide_strings_with_the_pipeline_off(text, ok, monkeypatch):
    """The same verdicts with the fast path off (the pipeline's grammar of the same schema)."""
    import decoding.compiler as compiler_mod

    comp = Compiler(get_vocab("llama-bpe"), cache=False)
    monkeypatch.setattr(compiler_mod, "FAST_SCHEMAS", False)
    assert comp.compile_json_schema(WIDE).accepts(text.encode()) is ok
