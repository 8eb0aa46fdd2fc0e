"""The pushdown back-end's native mask work against the Python it replaces (the reference):
the check of the crossing tokens (``_native.pd_check``) against ``_run``, every token of the
vocabulary from every configuration reached; the top frames' walks (``_native.pd_frame_mask``)
against ``_tables`` + ``walk_tokens``, frame by frame; on hand-built grammars and tiny
vocabularies, then whole masks along random walks on llama-bpe."""

from __future__ import annotations

import json

import numpy as np
import pytest

from decoding import _native
from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, choice, lit, opt, seq, star
from decoding.runtime.matcher import Matcher
from tests.conftest import CORPORA, get_vocab
from decoding.vocab import Vocab
from tests.test_pushdown import FREE_SCHEMA, GRAMMARS, SPECIAL_EXIT, TINY, _same_masks_along_walks

#: v ::= "1" | "[" v "]" nested once at most: every push from the bottom frame's callee saturates
SHALLOW = Grammar("v", (("v", choice(lit("1"), seq(lit("["), Ref("v"), lit("]")))),), max_depth=1)
#: a list of values that return through two frames at once ("]]", "],")
LIST = Grammar("l", (("l", seq(lit("["), opt(seq(Ref("e"), star(seq(lit(","), Ref("e"))))), lit("]"))),
                     ("e", choice(lit("1"), Ref("l")))), max_depth=3)
CASES = {**GRAMMARS, "shallow": SHALLOW, "list": LIST}


def _stacks(cfg) -> np.ndarray:
    return np.array([x for st in cfg for x in (len(st), *(v for f in st for v in f[:2]))], dtype=np.int32)


def _configs(cg, rng, walks: int, steps: int) -> None:
    """Reach configurations by random token walks under the (reference) masks."""
    for _ in range(walks):
        m = Matcher(cg)
        for _s in range(steps):
            ids = m.allowed_ids()
            t = int(ids[rng.integers(len(ids))])
            assert m.advance(t)
            if m.finished:
                break


def _check_every_token(cg, cfg) -> tuple[int, int]:
    """pd_check of every non-empty token from ``cfg`` against ``_run``: (decided, undecided)."""
    tb = cg.vocab.token_bytes
    ids = np.array([t for t in range(cg.vocab.n_tokens) if tb[t]], dtype=np.uint32)
    m = np.zeros(cg.n_words, dtype=np.uint32)
    und = np.empty(len(ids), dtype=np.uint32)
    n = _native.pd_check(cg._native_masker(), _stacks(cfg), ids, m, und)
    left = set(und[:n].tolist())
    for t in ids.tolist():
        got = bool(m[t >> 5] >> (t & 31) & 1)
        want = bool(cg._run(tb[t], cfg))
        if t in left:
            assert not got, (t, tb[t])  # undecided tokens get no bit
        else:
            assert got == want, (tb[t], cfg, got, want)
    return len(ids) - n, n


@pytest.mark.parametrize("name", list(CASES))
def test_every_token_from_every_configuration_tiny(name):
    """Tiny vocabulary: every token from every configuration that random walks reach is
    decided as ``_run`` decides (saturated rules included: their liveness is the native one)."""
    cg = compile_grammar(CASES[name], TINY, backend="pushdown")
    cg.native_check = cg.native_walk = False
    _configs(cg, np.random.default_rng(5), walks=40, steps=40)
    decided = undecided = saturated = 0
    for cfg in list(cg._configs):
        d, u = _check_every_token(cg, cfg)
        decided += d
        undecided += u
        saturated += any(cg._sat_of[f[2]] for st in cfg for f in st)
    assert decided > 50 and undecided == 0
    if name in ("nest", "shallow", "list"):
        assert saturated > 0


@pytest.mark.parametrize("name", list(CASES))
def test_same_masks_native_and_python_tiny(name):
    """Whole masks with the native check equal those of the Python steps, configuration by
    configuration (saturated ones included: they take the Python path either way)."""
    a = compile_grammar(CASES[name], TINY, backend="pushdown")
    b = compile_grammar(CASES[name], TINY, backend="pushdown")
    b.native_check = b.native_walk = False
    _configs(a, np.random.default_rng(9), walks=60, steps=60)
    for i, cfg in enumerate(list(a._configs)):
        want = b._compute(cfg)
        assert np.array_equal(a._compute(cfg), want), cfg
        assert np.array_equal(a.mask(i), want), cfg  # (through _compute_id's shortcuts)


def test_same_masks_native_and_python_llama_bpe():
    """Free-form values 2 levels deep on llama-bpe: identical masks along random walks."""
    v = get_vocab("llama-bpe")
    g = compile_schema(FREE_SCHEMA, free_depth=2).grammar
    fast = compile_grammar(g, v, backend="pushdown")
    ref = compile_grammar(g, v, backend="pushdown")
    ref.native_check = ref.native_walk = False
    assert _same_masks_along_walks(fast, ref, seed=21, walks=25, max_steps=200) > 300


def _with_sat(cg, sat: frozenset) -> int:
    """A counts id whose saturated set is ``sat`` (registered by hand: only _walk reads it)."""
    sid = cg._sat_id.get(sat)
    if sid is None:
        sid = cg._sat_id[sat] = len(cg._sat_sets)
        cg._sat_sets.append(sat)
    cg._sat_of.append(sid)
    cg._counts.append({})
    return len(cg._sat_of) - 1


def _same_frame_walks(fast, ref, sat: frozenset = frozenset()) -> int:
    """Every state of every rule as a top frame whose saturated set is ``sat``: the native
    walk's (local, candidate) masks equal the reference's."""
    fck, rck = _with_sat(fast, sat), _with_sat(ref, sat)
    n = 0
    for r, d in enumerate(fast.pushdown.dfas):
        for s in range(d.n_states):
            loc, cand = fast._walk(r, s, fck)
            rloc, rcand = ref._walk(r, s, rck)
            assert np.array_equal(fast._walk_masks[loc], ref._walk_masks[rloc]), (r, s)
            assert (cand < 0) == (rcand < 0), (r, s)
            if cand >= 0:
                assert np.array_equal(fast._walk_masks[cand], ref._walk_masks[rcand]), (r, s)
            n += 1
    return n


@pytest.mark.parametrize("name", list(CASES))
def test_frame_walks_native_and_python_tiny(name):
    fast = compile_grammar(CASES[name], TINY, backend="pushdown")
    ref = compile_grammar(CASES[name], TINY, backend="pushdown")
    ref.native_walk = False
    for sat in _sets_of_two(len(fast.pushdown.dfas)):
        assert _same_frame_walks(fast, ref, sat) >= 4


@pytest.mark.parametrize("profiles", [True, False], ids=["plain-text shortcuts", "whole-trie walks"])
def test_frame_walks_native_and_python_kubernetes(profiles):
    """kb_192 (33 rules, 3,500 states, string bodies among them) on llama-bpe, with and
    without the plain-text shortcuts: the same walks frame by frame."""
    v = get_vocab("llama-bpe")
    schema = json.loads((CORPORA / "jsonschemabench" / "Kubernetes" / "kb_192_Normalized.json").read_text())["schema"]
    g = compile_schema(schema).grammar
    fast = compile_grammar(g, v, backend="pushdown")
    ref = compile_grammar(g, v, backend="pushdown")
    ref.native_walk = False
    if not profiles:
        fast._loop_profiles = ref._loop_profiles = ()
    assert _same_frame_walks(fast, ref) > 3000
    if profiles:  # a saturated set that kills states (the value rule called from itself)
        sat = frozenset({max(range(len(fast.pushdown.dfas)), key=lambda r: fast.pushdown.dfas[r].n_states)})
        assert any(not x for lv in fast._live_for(fast._sat_of[_with_sat(fast, sat)]) for x in lv)
        assert _same_frame_walks(fast, ref, sat) > 3000


def test_kubernetes_pushdown_schema_every_candidate():
    """kb_208 (Kubernetes; "auto" picks pushdown for it): from every configuration random walks
    reach, the native check decides each candidate token, and 100 other tokens drawn at random,
    as ``_run`` does."""
    v = get_vocab("llama-bpe")
    schema = json.loads((CORPORA / "jsonschemabench" / "Kubernetes" / "kb_208_Normalized.json").read_text())["schema"]
    g = compile_schema(schema).grammar
    cg = compile_grammar(g, v, backend="pushdown")
    cg.native_check = cg.native_walk = False
    rng = np.random.default_rng(2)
    _configs(cg, rng, walks=6, steps=120)
    tb = v.token_bytes
    checked = 0
    for cfg in list(cg._configs)[:150]:
        m = np.zeros(cg.n_words, dtype=np.uint32)
        cand = np.zeros(cg.n_words, dtype=np.uint32)
        for st in cfg:
            loc, c = cg._walk(*st[-1])
            m |= cg._walk_masks[loc]
            if c >= 0:
                cand |= cg._walk_masks[c]
        ids = np.flatnonzero(np.unpackbits((cand & ~m).view(np.uint8), bitorder="little")[:v.n_tokens])
        ids = np.union1d(ids, [t for t in rng.integers(0, v.n_tokens, 100).tolist() if tb[t]])
        out = np.zeros(cg.n_words, dtype=np.uint32)
        und = np.empty(len(ids), dtype=np.uint32)
        n = _native.pd_check(cg._native_masker(), _stacks(cfg), ids.astype(np.uint32), out, und)
        left = set(und[:n].tolist())
        for t in ids.tolist():
            if t not in left:
                assert bool(out[t >> 5] >> (t & 31) & 1) == bool(cg._run(tb[t], cfg)), (tb[t], cfg)
                checked += 1
    assert checked > 5000


def test_pd_check_rejects_bad_input():
    cg = compile_grammar(LIST, TINY, backend="pushdown")
    pd = cg._native_masker()
    m = np.zeros(cg.n_words, dtype=np.uint32)
    und = np.empty(4, dtype=np.uint32)
    with pytest.raises(ValueError, match="out of range"):
        _native.pd_check(pd, np.array([1, 0, 10_000], dtype=np.int32), np.array([1], dtype=np.uint32), m, und)
    with pytest.raises(ValueError, match="out of range"):
        _native.pd_check(pd, np.array([1, 0, 0], dtype=np.int32), np.array([10_000], dtype=np.uint32), m, und)
    with pytest.raises(ValueError, match="undecided"):
        _native.pd_check(pd, np.array([1, 0, 0], dtype=np.int32), np.arange(8, dtype=np.uint32), m, und)
    with pytest.raises(ValueError, match="pd_new"):
        z = np.zeros(1, dtype=np.int32)
        _native.pd_new(3, np.zeros(1, dtype=np.uint8), np.zeros(2, dtype=np.uint64), np.zeros(1, dtype=np.int64),
                       np.array([5], dtype=np.int32), np.ones(1, dtype=np.int32), np.array([0, 1], dtype=np.int32),
                       np.zeros(256, dtype=np.uint8), np.zeros(1, dtype=np.uint8), np.zeros(2, dtype=np.int32), z[:0],
                       z[:0], np.zeros(2, dtype=np.int32), z[:0])  # the one transition targets state 5 of a 1-state rule


SPECIAL_VOCAB = Vocab.from_bytes([b"", b"a", b"b", b"<|e|>", b"ab"], eog_ids=[0], special={"<|e|>": 3})


def _sets_of_two(R: int) -> list[frozenset]:
    return [frozenset()] + [frozenset({a}) for a in range(R)] + \
        [frozenset({a, b}) for a in range(R) for b in range(a + 1, R)]


@pytest.mark.parametrize("name", list(CASES))
def test_native_liveness_is_the_fixpoint(name):
    """``_native.pd_live`` (what the native walks use for saturated sets) equals the Python
    fixpoint ``_Tables.live`` for every set of at most two forbidden rules."""
    cg = compile_grammar(CASES[name], TINY, backend="pushdown")
    for forbidden in _sets_of_two(len(cg.pushdown.dfas)):
        sid = len(cg._sat_sets)
        cg._sat_sets.append(forbidden)
        assert cg._live_for(sid) == cg._t.live(forbidden), forbidden


@pytest.mark.parametrize("g", SPECIAL_EXIT, ids=["self", "mutual"])
def test_native_liveness_and_masks_with_special_tokens(g):
    """Rules that finish only through a special token: the native liveness counts its moves,
    and the masks along random walks (special and end-of-generation bits included) are the
    reference's."""
    cg = compile_grammar(g, SPECIAL_VOCAB, backend="pushdown")
    assert any(cg._t.specs)
    for forbidden in _sets_of_two(len(cg.pushdown.dfas)):
        sid = len(cg._sat_sets)
        cg._sat_sets.append(forbidden)
        assert cg._live_for(sid) == cg._t.live(forbidden), forbidden
    a = compile_grammar(g, SPECIAL_VOCAB, backend="pushdown")
    b = compile_grammar(g, SPECIAL_VOCAB, backend="pushdown")
    b.native_check = b.native_walk = False
    _configs(a, np.random.default_rng(3), walks=60, steps=30)
    for i, cfg in enumerate(list(a._configs)):
        assert np.array_equal(a.mask(i), b._compute(cfg)), cfg


def test_native_liveness_kubernetes():
    v = get_vocab("llama-bpe")
    schema = json.loads((CORPORA / "jsonschemabench" / "Kubernetes" / "kb_192_Normalized.json").read_text())["schema"]
    cg = compile_grammar(compile_schema(schema).grammar, v, backend="pushdown")
    R = len(cg.pushdown.dfas)
    rng = np.random.default_rng(6)
    sets = [frozenset(rng.choice(R, size=k, replace=False).tolist()) for k in (1, 1, 2, 3, 5, 8) for _ in range(3)]
    dead = 0
    for forbidden in sets:
        sid = len(cg._sat_sets)
        cg._sat_sets.append(forbidden)
        got = cg._live_for(sid)
        assert got == cg._t.live(forbidden), forbidden
        dead += sum(not x for lv in got for x in lv)
    assert dead > 0  # some sets make states dead


@pytest.mark.parametrize("name", list(CASES))
def test_native_run_is_the_python_run(name):
    """``_run_native`` (``_native.pd_run``, what ``next_state`` uses) gives the configuration
    ``_run`` gives, recursion counts included, for every token from every reached
    configuration."""
    cg = compile_grammar(CASES[name], TINY, backend="pushdown")
    _configs(cg, np.random.default_rng(12), walks=40, steps=40)
    tb = TINY.token_bytes
    moved = 0
    for cfg in list(cg._configs):
        for t in range(TINY.n_tokens):
            if tb[t]:
                got, want = cg._run_native(tb[t], cfg), cg._run(tb[t], cfg)
                assert got == want, (tb[t], cfg)
                moved += bool(want)
    assert moved > 5


def test_native_run_kubernetes():
    v = get_vocab("llama-bpe")
    schema = json.loads((CORPORA / "jsonschemabench" / "Kubernetes" / "kb_192_Normalized.json").read_text())["schema"]
    cg = compile_grammar(compile_schema(schema).grammar, v, backend="pushdown")
    rng = np.random.default_rng(13)
    _configs(cg, rng, walks=4, steps=150)
    tb = v.token_bytes
    moved = 0
    for cfg in list(cg._configs)[:200]:
        i = cg._config_id[cfg]
        allowed = cg.allowed_ids(i)
        for t in [*rng.choice(allowed, size=min(20, len(allowed)), replace=False).tolist(),
                  *rng.integers(0, v.n_tokens, 20).tolist()]:
            if tb[t] and t not in v.eog_ids:
                got, want = cg._run_native(tb[t], cfg), cg._run(tb[t], cfg)
                assert got == want, (tb[t], cfg)
                moved += bool(want)
    assert moved > 300


def test_stats_count_the_native_tables():
    cg = compile_grammar(LIST, TINY, backend="pushdown")
    assert cg.stats()["table_bytes"] == 0  # nothing made before the first mask
    _configs(cg, np.random.default_rng(1), walks=5, steps=20)
    first = cg.stats()["table_bytes"]
    assert first > 0
    sid = len(cg._sat_sets)
    cg._sat_sets.append(frozenset({0}))
    cg._live_for(sid)  # a saturated set's liveness is kept by the masker
    assert cg.stats()["table_bytes"] > first
