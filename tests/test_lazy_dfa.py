"""The lazy DFA back-end (decoding.backends.dfa.lazy, gd_lazy in native/src/dfa_build.c)
against the eager DFA back-end as the oracle: the same masks and the same next states along
random walks, the same accepted and rejected strings, no dead ends, every finished walk valid;
its limits and errors are named."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from conftest import HAND_SCHEMAS, bench_schemas, get_vocab
from decoding import _native
from decoding.backends import select as select_mod
from decoding.backends.dfa.lazy import LazyDFAGrammar, compile_lazy_dfa
from decoding.backends.select import compile_grammar
from decoding.errors import GrammarError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, choice, lit, seq, star
from decoding.limits import DEFAULT_LIMITS
from decoding.testing import random_walk
from decoding.vocab import Vocab

TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in b'{}[]",:abc01 '], b'{"', b'":', b'",', b"ab", b"bc", b"a\"",
                         b"}]", b"[1"], eog_ids=[0])

SCHEMAS = {name: HAND_SCHEMAS[name] for name in ("string", "numbers", "free", "extras", "recursive", "mutual",
                                                   "enum_big", "pattern", "not", "same_definitions")}
SCHEMAS |= {"closed": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5},
                                                         "b": {"type": "array", "items": {"type": "integer"}}},
                       "required": ["a"], "additionalProperties": False},
            "cjk": {"enum": ["中文", "日本語", "x\"y"]}}
BENCH = bench_schemas(3, offset=7, splits=("Glaiveai2K", "Github_easy", "Kubernetes"))


def _lockstep(schema: object, vocab: Vocab, walks: int, seed: int) -> None:
    """Random walks over the eager grammar's masks, the lazy grammar in lockstep: equal masks,
    next states both live or both not, equal acceptance, equal budgets (the lazy grammar's
    exact ones: its automaton made explicit on the first query; past ``EXACT_BUDGET_STATES``
    an upper bound)."""
    g = compile_schema(schema).grammar
    try:
        eager = compile_grammar(g, vocab, backend="dfa")
    except LimitError:
        pytest.skip("the eager oracle exceeds its limits")  # (the lazy back-end is what is for those)
    lazy = compile_grammar(g, vocab, backend="lazy")
    assert isinstance(lazy, LazyDFAGrammar) and lazy.backend == "lazy"
    rng = np.random.default_rng(seed)
    for _ in range(walks):
        se = sl = 0
        for _step in range(60):
            assert np.array_equal(eager.mask(se), lazy.mask(sl))
            assert eager.is_accepting(se) == lazy.is_accepting(sl)
            assert eager.forced_bytes(se) == lazy.forced_bytes(sl)
            if lazy._exact() is not None:
                assert lazy.completion_cost(sl) == eager.completion_cost(se)
                assert lazy.worst_successor_cost(sl) == eager.worst_successor_cost(se)
            else:
                assert lazy.completion_cost(sl) >= eager.completion_cost(se)
            ids = eager.allowed_ids(se)
            t = int(rng.choice(ids))
            ne, nl = eager.next_state(se, t), lazy.next_state(sl, t)
            assert (ne, nl) == (-2, -2) or (ne >= 0 and nl >= 0)
            if ne < 0:
                break
            se, sl = ne, nl


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_same_masks_as_the_eager_dfa_on_hand_schemas(name):
    _lockstep(SCHEMAS[name], get_vocab("llama-bpe"), walks=8, seed=1)


@pytest.mark.parametrize("name", sorted(BENCH))
def test_same_masks_as_the_eager_dfa_on_shared_schemas(name):
    _lockstep(BENCH[name], get_vocab("llama-bpe"), walks=4, seed=2)


@pytest.mark.parametrize("name", ["closed", "recursive", "string"])
def test_same_masks_on_a_tiny_vocabulary(name):
    _lockstep(SCHEMAS[name], TINY, walks=20, seed=3)


@pytest.mark.parametrize("vocab", ["gemma-4", "phi-3"])
def test_same_masks_on_other_real_vocabularies(vocab):
    _lockstep(SCHEMAS["closed"], get_vocab(vocab), walks=6, seed=4)


CASES = [  # (accepted, rejected) for the grammar {"a": "<0-5 chars>", "b": [integers]?}
    ([b'{"a":""}', b'{"a":"abc","b":[]}', b'{"a":"\xe4\xb8\xad","b":[1,-20]}'],
     [b"", b'{ "a" : "x" }', b'{"a":"abcdef"}', b'{"b":[]}', b'{"a":"x",}', b'{"a":"x"', b'{"a":"x","c":1}', b'{"a":"\xe4\xb8"}']),
]


@pytest.mark.parametrize("accepted, rejected", CASES)
def test_accepted_and_rejected_strings(accepted, rejected):
    g = compile_schema(SCHEMAS["closed"]).grammar
    eager = compile_grammar(g, get_vocab("llama-bpe"), backend="dfa")
    lazy = compile_grammar(g, get_vocab("llama-bpe"), backend="lazy")
    for s in accepted:
        assert lazy.accepts(s) and eager.accepts(s), s
    for s in rejected:
        assert not lazy.accepts(s) and not eager.accepts(s), s


@pytest.mark.parametrize("name", ["closed", "recursive", "mutual", "free", "cjk"])
def test_random_walks_never_dead_end_and_finished_ones_validate(name):
    schema = SCHEMAS[name]
    lazy = compile_grammar(compile_schema(schema).grammar, get_vocab("llama-bpe"), backend="lazy")
    rng = np.random.default_rng(5)
    finished = 0
    for _ in range(25):
        w = random_walk(lazy, rng, max_steps=300)  # raises on an empty mask before acceptance
        if w.finished:
            finished += 1
            jsonschema.validate(json.loads(w.text.decode("utf-8")), schema)
    assert finished >= 5


def test_budgeted_walks_close_within_the_budget():
    lazy = compile_grammar(compile_schema(SCHEMAS["closed"]).grammar, get_vocab("llama-bpe"), backend="lazy")
    rng = np.random.default_rng(6)
    budget = lazy.completion_cost(0) + 3
    for _ in range(20):
        w = random_walk(lazy, rng, budget=budget)
        assert w.finished and len(w.tokens) <= budget
        jsonschema.validate(json.loads(w.text.decode("utf-8")), SCHEMAS["closed"])


def test_the_explicit_automaton_is_the_eager_language():
    g = compile_schema(SCHEMAS["closed"]).grammar
    d = compile_lazy_dfa(g)
    full = d.explicit()
    from decoding.backends.automaton import compile_dfa

    eager = compile_dfa(g)
    assert full.n_states >= eager.n_states  # not minimised
    for s in [b'{"a":"abc"}', b'{"a":"abc","b":[1,2]}', b'{"a":"abcdef"}', b'{"b":[]}', b'{}']:
        assert full.accepts(s) == eager.accepts(s) == d.accepts(s), s


def test_states_are_made_only_when_reached():
    lazy = compile_grammar(compile_schema(HAND_SCHEMAS["numbers"]).grammar, get_vocab("llama-bpe"), backend="lazy")
    assert lazy.stats()["expanded"] == 0
    lazy.mask(0)
    first = lazy.stats()
    assert 1 <= first["expanded"] < first["states"] or first["expanded"] == first["states"]
    lazy.precompute()
    after = lazy.stats()
    assert after["expanded"] == after["states"] >= first["states"]


def test_auto_goes_lazy_above_the_threshold(monkeypatch):
    g = compile_schema(SCHEMAS["closed"]).grammar
    assert compile_grammar(g, get_vocab("llama-bpe")).backend == "dfa"
    monkeypatch.setattr(select_mod, "LAZY_ABOVE", 10)
    assert compile_grammar(g, get_vocab("llama-bpe")).backend == "lazy"


def test_the_memory_bound_is_a_limit_error_at_mask_time():
    g = compile_schema(SCHEMAS["closed"]).grammar
    from dataclasses import replace

    with pytest.raises(LimitError, match="max_subset_bytes"):  # the start state alone is past it
        compile_grammar(g, get_vocab("llama-bpe"), backend="lazy", limits=replace(DEFAULT_LIMITS, max_subset_bytes=1))
    lazy = compile_grammar(g, get_vocab("llama-bpe"), backend="lazy",
                           limits=replace(DEFAULT_LIMITS, max_subset_bytes=5000))
    with pytest.raises(LimitError, match="max_subset_bytes"):
        lazy.precompute()


def test_a_grammar_no_token_can_spell_is_a_grammar_error():
    v = Vocab.from_bytes([b"", b"a", b"b"], eog_ids=[0])
    g = Grammar("s", (("s", seq(lit("a"), star(choice(lit("c"), lit("b"))), lit("c"))),))
    with pytest.raises(GrammarError, match="can spell"):
        compile_grammar(g, v, backend="lazy")
    ok = compile_grammar(Grammar("s", (("s", seq(lit("a"), star(lit("b")))),)), v, backend="lazy")
    assert ok.accepts(b"abb") and not ok.accepts(b"abc")


@pytest.mark.parametrize("call, match", [
    (lambda cap, tr: _native.lazy_step(cap, 10**6, 0), "out of range"),
    (lambda cap, tr: _native.lazy_step(cap, 0, 10**6), "out of range"),
    (lambda cap, tr: _native.lazy_row(cap, 0, np.empty(3, np.int32)), "nsym"),
    (lambda cap, tr: _native.lazy_run(cap, -1, b"a"), "out of range"),
    (lambda cap, tr: _native.lazy_walk(tr, np.zeros(10, np.uint8), cap, 0, np.zeros(4008, np.uint32)), "256"),
    (lambda cap, tr: _native.lazy_walk(tr, np.zeros(256, np.uint8), cap, 0, np.zeros(4008, np.uint32), None,
                                       (1, 2)), "5-tuple"),
    (lambda cap, tr: _native.lazy_state(tr, 0), "(?i)capsule"),
])
def test_bad_native_arguments_are_clear_errors(call, match):
    from decoding.backends.tables import vocab_tables

    d = compile_lazy_dfa(compile_schema(SCHEMAS["closed"]).grammar)
    with pytest.raises((ValueError, TypeError), match=match):
        call(d._cap, vocab_tables(get_vocab("llama-bpe")).trie)


def test_a_limit_inside_a_mask_is_the_matchers_sticky_error():
    """A limit hit inside a mask (the lazy memory bound) is recorded by the matcher (only
    end-of-generation stays allowed) and raised by raise_if_failed: never swallowed."""
    from dataclasses import replace

    from decoding.errors import ProcessorError
    from decoding.runtime.matcher import Matcher

    lim = replace(DEFAULT_LIMITS, max_subset_bytes=5000)
    lazy = compile_grammar(compile_schema(SCHEMAS["closed"]).grammar, get_vocab("llama-bpe"), backend="lazy",
                           limits=lim)
    m = Matcher(lazy)
    for _ in range(60):
        ids = np.nonzero(np.unpackbits(m.mask().view(np.uint8), bitorder="little"))[0]
        if m.error is not None:
            break
        m.advance(int(ids[-1]))
    assert isinstance(m.error, LimitError) and "max_subset_bytes" in str(m.error)
    with pytest.raises(ProcessorError, match="max_subset_bytes"):
        m.raise_if_failed()


def test_the_pure_python_reference_mode_builds_the_same_lazy_automaton(monkeypatch):
    """Under GD_PURE_PYTHON_DFA=1 the lazy DFA takes its NFA from the Python flat-array builder
    (the reference of the native one): the same strings are accepted and rejected."""
    g = compile_schema(SCHEMAS["closed"]).grammar
    native = compile_lazy_dfa(g)
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1")
    ref = compile_lazy_dfa(g)
    for s in CASES[0][0] + CASES[0][1]:
        assert ref.accepts(s) == native.accepts(s), s


@pytest.mark.parametrize("schema", [
    {"enum": ["alpha-one", "beta-one", "gamma-one", "delta-two"]},  # equal suffixes: states the lazy numbering splits
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": False},
    SCHEMAS["closed"],
])
def test_exact_budgets_read_the_minimal_automaton_state_by_state(schema):
    """The budget table is made over the minimal DFA of the explicit automaton, each state read
    through its block: every reachable state's costs, successor costs and worst successor cost
    are the eager (minimal) DFA's at the state the same bytes reach."""
    v = get_vocab("llama-bpe")
    g = compile_schema(schema).grammar
    eager = compile_grammar(g, v, backend="dfa")
    lazy = compile_grammar(g, v, backend="lazy")
    m, block = lazy._exact()
    n = lazy.dfa.n_states  # (every reachable state is made now)
    assert m.dfa.n_states == eager.dfa.n_states and len(block) == n
    if schema is not SCHEMAS["closed"]:
        assert n > m.dfa.n_states  # (the case the blocks are for)
    # each lazy state against the eager state reached by the same bytes (breadth-first)
    todo, seen = [(0, 0)], {0}
    while todo:
        sl, se = todo.pop()
        assert lazy.completion_cost(sl) == eager.completion_cost(se)
        assert lazy.worst_successor_cost(sl) == eager.worst_successor_cost(se)
        ids, costs = lazy.successor_costs(sl)
        ids_e, costs_e = eager.successor_costs(se)
        assert np.array_equal(ids, ids_e) and np.array_equal(costs, costs_e)
        for b in range(256):
            tl = lazy.dfa.step(sl, b)
            if tl >= 0 and tl not in seen:
                seen.add(tl)
                todo.append((tl, eager.dfa.step(se, b)))
    assert len(seen) == n


@pytest.mark.parametrize("name", ["closed", "recursive", "cjk"])
def test_budgets_are_exact_up_to_the_cap_and_bounds_above(name, monkeypatch):
    """The first budget query makes the automaton explicit (every reachable state, then
    minimised): the costs are then the eager DFA's, state for state along a walk; with the cap
    below the automaton's size they are the fewest moves (bytes), never below the exact ones."""
    from decoding.backends.dfa import lazy as lazy_mod
    v = get_vocab("llama-bpe")
    g = compile_schema(SCHEMAS[name]).grammar
    eager = compile_grammar(g, v, backend="dfa")
    exact = compile_grammar(g, v, backend="lazy")
    monkeypatch.setattr(lazy_mod, "EXACT_BUDGET_STATES", 1)
    bound = compile_grammar(g, v, backend="lazy")
    assert bound._exact() is None  # (decided on the first budget query, then kept)
    monkeypatch.undo()
    assert exact._exact() is not None and bound._exact() is None
    rng = np.random.default_rng(5)
    se = sx = sb = 0
    for _ in range(40):
        assert exact.completion_cost(sx) == eager.completion_cost(se) <= bound.completion_cost(sb)
        assert exact.worst_successor_cost(sx) == eager.worst_successor_cost(se)
        ids, costs = exact.successor_costs(sx)
        ids_e, costs_e = eager.successor_costs(se)
        assert np.array_equal(ids, ids_e) and np.array_equal(costs, costs_e)
        t = int(rng.choice(eager.allowed_ids(se)))
        se, sx, sb = eager.next_state(se, t), exact.next_state(sx, t), bound.next_state(sb, t)
        if se < 0:
            assert sx == sb == se
            break


def test_a_lazy_grammar_writes_an_artifact_of_its_minimal_dfa(tmp_path):
    """An artifact holds an explicit DFA: a lazy grammar's automaton is made explicit and
    minimised (the eager DFA's size), and the loaded grammar gives the same masks in lockstep."""
    from conftest import assert_same_masks_in_lockstep
    from decoding.artifacts.format import FORMAT_VERSION, load_artifact, write_artifact
    from decoding.ir.key import grammar_key
    v = get_vocab("llama-bpe")
    g = compile_schema(SCHEMAS["closed"]).grammar
    key = grammar_key(g, v.fingerprint, version=FORMAT_VERSION)
    lazy = compile_grammar(g, v, backend="lazy", grammar_key=key)
    eager = compile_grammar(g, v, backend="dfa")
    write_artifact(lazy, tmp_path / "x.gdc")
    loaded = load_artifact(tmp_path / "x.gdc", v, expect_key=key)
    assert loaded.backend == "dfa" and loaded.dfa.n_states == eager.dfa.n_states
    assert_same_masks_in_lockstep(lazy, loaded, max_pairs=400)


@pytest.mark.parametrize("name", ["closed", "string", "enum_big", "cjk", "free"])
@pytest.mark.parametrize("vocab_name", ["llama-bpe", "gemma-4"])
def test_the_native_lazy_masker_equals_the_python_composition(name, vocab_name):
    """``_native.lazy_masker`` (one call per first visit) against :meth:`LazyDFAGrammar._walk`
    plus the special and end-of-generation bits in Python, on the same states (walked in
    lockstep: the two automata make their states in the same order)."""
    v = get_vocab(vocab_name)
    g = compile_schema(SCHEMAS[name]).grammar
    fast, ref = compile_grammar(g, v, backend="lazy"), compile_grammar(g, v, backend="lazy")
    ref.native_masker = False
    rng = np.random.default_rng(11)
    for _ in range(6):
        s = 0
        for _step in range(50):
            assert np.array_equal(fast.mask(s), ref.mask(s)), s
            ids = fast.allowed_ids(s)
            assert np.array_equal(ids, ref.allowed_ids(s))
            t = int(rng.choice(ids))
            s2, r2 = fast.next_state(s, t), ref.next_state(s, t)
            assert s2 == r2
            if s2 < 0:
                break
            s = s2
    assert fast._masker and ref._masker is False
    assert len(fast._masks) == len(ref._masks)  # (the same interning)


def test_the_lazy_masker_rejects_bad_arguments():
    v = get_vocab("llama-bpe")
    cg = compile_grammar(compile_schema(SCHEMAS["closed"]).grammar, v, backend="lazy")
    prof = __import__("decoding.backends.tables", fromlist=["vocab_tables"]).vocab_tables(v).masker_profiles(("json-string",))
    with pytest.raises(ValueError, match="byte classes"):
        _native.lazy_masker(prof, np.zeros(256, dtype=np.uint8), cg.dfa._cap, np.zeros(0, dtype=np.uint32), None)
    with pytest.raises(ValueError, match="special"):
        _native.lazy_masker(prof, cg.dfa.classes_u8, cg.dfa._cap, np.zeros(2, dtype=np.uint32), None)
    with pytest.raises(ValueError, match="eog_mask"):
        _native.lazy_masker(prof, cg.dfa.classes_u8, cg.dfa._cap, np.zeros(0, dtype=np.uint32),
                            np.zeros(3, dtype=np.uint32))
