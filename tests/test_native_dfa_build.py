"""The native subset construction, pruning and minimisation (native/src/dfa_build.c) against
the pure-Python reference (``_determinize_py``, ``_prune_py``, ``_minimize_py``): the same
automata, state numbering included, on hand-written grammars, JSON Schemas, random NFAs and
random DFA tables; the limits (max_states, the compile deadline) raise the same LimitError.
The NFA builders themselves (flat arrays against lists) are compared in test_nfa_arrays.py."""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import decoding.backends.automaton as A
from decoding import _native
from decoding.errors import GrammarError, LimitError
from decoding.frontends.gbnf.parse import parse_gbnf
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import (Grammar, Ref, Special, byteset, char_class, choice, diff, inter, lit, opt, plus, rep,
                         seq, star)
from decoding.limits import DEFAULT_LIMITS

from conftest import CORPORA, ROOT

D = byteset([(48, 57)])
AZ = byteset([(97, 122)])

GRAMMARS = {
    "literal": Grammar.single(lit("hello")),
    "empty": Grammar.single(lit("")),
    "choice": Grammar.single(choice(lit("abc"), lit("abd"), lit("b"), lit(""))),
    "star": Grammar.single(seq(lit("a"), star(choice(lit("bc"), D)), lit("z"))),
    "plus": Grammar.single(plus(choice(AZ, lit("-")))),
    "bounded": Grammar.single(seq(rep(D, 2, 5), opt(seq(lit("."), rep(D, 1, 3))))),
    "repeat_choice": Grammar.single(rep(choice(AZ, lit("xy")), 0, 12)),
    "ranges": Grammar.single(star(choice(byteset([(0, 31), (200, 255)]), byteset([(32, 33), (35, 90)])))),
    "utf8": Grammar.single(seq(lit('"'), rep(char_class([(0x22, 0x22), (0x5C, 0x5C)], negate=True), 0, 6),
                               lit('"'))),
    "specials": Grammar.single(seq(Special("<s>"), star(choice(AZ, Special("<sep>"))), Special("</s>"))),
    "special_or_text": Grammar.single(choice(seq(Special("<a>"), lit("x")), lit("<a>y"), star(Special("<b>")))),
    "recursive": Grammar("v", (("v", choice(lit("x"), seq(lit("["), opt(Ref("v")), lit("]")))),), max_depth=4),
    "sep_list": Grammar.single(seq(lit("["), D, star(seq(lit(","), D)), lit("]"))),
    "inter": Grammar.single(inter(rep(AZ, 1, 8), seq(star(AZ), lit("q"), star(AZ)))),
    "diff": Grammar.single(diff(rep(choice(AZ, D), 1, 6), seq(lit("ab"), star(AZ)))),
    "enum": Grammar.single(choice(*(lit(f"item_{i:03d}") for i in range(60)))),
}


def _compile(g: Grammar, monkeypatch, pure: bool, **kw) -> A.DFA:
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1" if pure else "0")
    return A.compile_dfa(g, **kw)


def _canonical(dfa: A.DFA) -> tuple[np.ndarray, np.ndarray]:
    """Table and acceptance renumbered in BFS order from 0 (symbols in increasing order)."""
    trans = dfa.trans.astype(np.int64)
    new = {0: 0}
    order = [0]
    i = 0
    while i < len(order):
        for t in trans[order[i]].tolist():
            if t >= 0 and t not in new:
                new[t] = len(order)
                order.append(t)
        i += 1
    table = np.array([[new[t] if t >= 0 else -1 for t in trans[s].tolist()] for s in order], dtype=np.int64)
    return table, dfa.accepting[order]


def _random_bytes(dfa: A.DFA, rng: random.Random, n: int) -> list[bytes]:
    """Walks of the DFA (mostly accepted strings) and their mutations, plus random noise."""
    out = []
    for _ in range(n):
        s, data = 0, bytearray()
        for _ in range(rng.randrange(40)):
            if dfa.accepting[s] and rng.random() < 0.2:
                break
            cols = [c for c in range(dfa.n_classes) if dfa.trans[s, c] >= 0]
            if not cols:
                break
            c = rng.choice(cols)
            data.append(rng.choice([b for b in range(256) if dfa.byte_class[b] == c]))
            s = int(dfa.trans[s, c])
        if rng.random() < 0.4 and data:
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
        out.append(bytes(data))
        out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(6))))
    return out


def _assert_same(a: A.DFA, b: A.DFA, rng: random.Random | None = None) -> None:
    assert a.n_states == b.n_states
    assert a.n_classes == b.n_classes and a.specials == b.specials
    assert np.array_equal(a.byte_class, b.byte_class)
    ta, aa = _canonical(a)
    tb, ab = _canonical(b)
    assert np.array_equal(ta, tb) and np.array_equal(aa, ab)  # isomorphic
    # the numbering is the same too, and so is the table's dtype
    assert a.trans.dtype == b.trans.dtype
    assert np.array_equal(a.trans, b.trans) and np.array_equal(a.accepting, b.accepting)
    if rng is not None:
        for data in _random_bytes(a, rng, 150):
            assert a.accepts(data) == b.accepts(data), data


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_grammars_compile_to_the_same_dfa(name, monkeypatch):
    g = GRAMMARS[name]
    _assert_same(_compile(g, monkeypatch, True), _compile(g, monkeypatch, False), random.Random(name))


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_determinize_and_minimize_match_before_pruning(name):
    """The raw subset construction (before pruning) and the minimisation of the pruned DFA."""
    g = GRAMMARS[name]
    specials = tuple(g.specials())
    sid = {t: i for i, t in enumerate(specials)}
    ref = A._NFARef(g, sid, DEFAULT_LIMITS.max_nfa_states)  # the list reference
    nfa = A._NFA(g, sid, DEFAULT_LIMITS.max_nfa_states)  # the flat arrays
    start = nfa.new()
    end = nfa.build_start(start)
    assert ref.new() == start and ref.build_start(start) == end
    dl = A._Deadline(60.0, "test")
    py = A._determinize_py(ref, start, end, specials, dl, 10**6, "test")
    c = A._determinize(nfa, start, end, specials, dl, 10**6, "test")
    assert np.array_equal(py.byte_class, c.byte_class) and py.n_classes == c.n_classes
    assert np.array_equal(py.trans, c.trans) and np.array_equal(py.accepting, c.accepting)
    pruned = A._prune_py(py, None)
    _assert_same(pruned, A._prune(c, None))
    _assert_same(A._minimize_py(pruned, dl), A._minimize(pruned, dl))


def _schemas() -> list[tuple[str, object]]:
    out = [(p.name, json.loads(p.read_text())) for p in sorted((ROOT / "tests" / "schemas").glob("*.json"))]
    bench = CORPORA / "jsonschemabench" / "Glaiveai2K"
    out += [(p.name, json.loads(p.read_text())["schema"]) for p in sorted(bench.glob("*.json"))[:40]]
    return out


SCHEMAS = _schemas()


@pytest.mark.parametrize("name, schema", SCHEMAS, ids=[n for n, _ in SCHEMAS])
def test_json_schemas_compile_to_the_same_dfa(name, schema, monkeypatch):
    g = compile_schema(schema).grammar
    try:
        py = _compile(g, monkeypatch, True)
    except GrammarError as e:  # a limit: the native path must say the same
        with pytest.raises(type(e), match="^" + __import__("re").escape(str(e)) + "$"):
            _compile(g, monkeypatch, False)
        return
    _assert_same(py, _compile(g, monkeypatch, False), random.Random(name))


def test_enough_schemas_were_compared():
    assert len(SCHEMAS) >= 5
    if (CORPORA / "jsonschemabench" / "Glaiveai2K").is_dir():
        assert len(SCHEMAS) >= 45


# ----------------------------------------------------------------------------- limits

def _limit_message(g: Grammar, monkeypatch, pure: bool, **kw) -> str:
    with pytest.raises(LimitError) as ei:
        _compile(g, monkeypatch, pure, **kw)
    return str(ei.value)


@pytest.mark.parametrize("max_states", [1, 2, 5, 8])
def test_max_states_is_the_same_limit_error(max_states, monkeypatch):
    g = GRAMMARS["enum"]
    py = _limit_message(g, monkeypatch, True, max_states=max_states)
    c = _limit_message(g, monkeypatch, False, max_states=max_states)
    assert c == py
    assert f"automaton exceeds max_states={max_states} DFA states (limit max_dfa_states)" in c
    assert c.startswith("grammar 'root': ")


def test_max_states_counts_the_minimal_dfa(monkeypatch):
    """``max_states`` bounds the minimal DFA: "repeat_choice" determinises to 85 states and
    minimises to 25, so it compiles with max_states=25 and not 24; the subset construction
    may make SUBSET_STATES_FACTOR (8) times max_states (80 is too few for max_states=10)."""
    g = GRAMMARS["repeat_choice"]
    assert A.SUBSET_STATES_FACTOR == 8
    for pure in (True, False):
        assert _compile(g, monkeypatch, pure, max_states=25).n_states == 25
    over = _limit_message(g, monkeypatch, False, max_states=24)
    assert over == _limit_message(g, monkeypatch, True, max_states=24)
    assert "automaton exceeds max_states=24 DFA states (limit max_dfa_states): its minimal DFA has 25" in over
    sub = _limit_message(g, monkeypatch, False, max_states=10)
    assert sub == _limit_message(g, monkeypatch, True, max_states=10)
    assert "automaton exceeds max_states=10 DFA states (limit max_dfa_states): its subset construction " \
           "made more than 80 states (8 x max_states) before minimisation" in sub


@pytest.mark.parametrize("pure", [True, False])
def test_max_subset_bytes_bounds_the_subset_construction(pure, monkeypatch):
    """The memory bound: the subset construction's table and sets (``_subset_bytes``)."""
    g = GRAMMARS["repeat_choice"]
    dfa = _compile(g, monkeypatch, pure)
    table = A._subset_bytes(85, dfa.trans.shape[1], 85, 0)  # the table alone, sets not counted
    with pytest.raises(LimitError) as e:
        _compile(g, monkeypatch, pure, limits=replace(DEFAULT_LIMITS, max_subset_bytes=table))
    assert e.value.limit == "max_subset_bytes" and f"max_subset_bytes={table} bytes" in str(e.value)
    big = replace(DEFAULT_LIMITS, max_subset_bytes=100 * table)
    assert np.array_equal(_compile(g, monkeypatch, pure, limits=big).trans, dfa.trans)


def test_max_states_of_an_intersection_operand(monkeypatch):
    g = GRAMMARS["inter"]
    assert _limit_message(g, monkeypatch, False, max_states=3) == _limit_message(g, monkeypatch, True,
                                                                                 max_states=3)


def test_max_states_exactly_reached_is_fine(monkeypatch):
    g = GRAMMARS["star"]
    specials = ()
    nfa = A._NFA(g, {}, DEFAULT_LIMITS.max_nfa_states)
    start = nfa.new()
    end = nfa.build_start(start)
    n = A._determinize_py(nfa, start, end, specials, A._Deadline(60, "t"), 10**6, "t").n_states
    dfa = A._determinize(nfa, start, end, specials, A._Deadline(60, "t"), n, "t")
    assert dfa.n_states == n
    with pytest.raises(LimitError, match=f"t: automaton exceeds max_states={n - 1} DFA states"):
        A._determinize(nfa, start, end, specials, A._Deadline(60, "t"), n - 1, "t")


def test_deadline_inside_the_native_subset_construction(monkeypatch):
    """The heavy grammar of test_hostile_dtd_gbnf: the C loop reads the clock and stops."""
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "0")
    lim = replace(DEFAULT_LIMITS, max_compile_seconds=0.3, max_compile_work=10 ** 12)
    g = parse_gbnf('root ::= ([a-z] | "xy"){0,400} "!"')
    t0 = time.perf_counter()
    with pytest.raises(LimitError, match=r"max_compile_seconds=0\.3 \(during"):
        A.compile_dfa(g, limits=lim)
    assert time.perf_counter() - t0 < 1.5


def test_spent_budget_raises_the_deadline_message():
    g = GRAMMARS["star"]
    nfa = A._NFA(g, {}, DEFAULT_LIMITS.max_nfa_states)
    start = nfa.new()
    end = nfa.build_start(start)
    dl = A._Deadline(60.0, "grammar 'root'")
    dfa = A._determinize(nfa, start, end, (), dl, 10**6, "t")
    dl.at = time.monotonic() - 1  # spent
    msg = ("grammar 'root': compiling took longer than max_compile_seconds=60 (during {}); "
           "simplify the grammar or raise the limit")
    with pytest.raises(LimitError) as ei:
        A._determinize(nfa, start, end, (), dl, 10**6, "t")
    assert str(ei.value) == msg.format("the subset construction")
    with pytest.raises(LimitError) as ei:
        A._minimize(A._prune(dfa, None), dl)
    assert str(ei.value) == msg.format("the minimisation")


def test_native_budget_is_checked_by_the_c_code():
    """Called directly with a spent budget, both functions say so (TimeoutError)."""
    g = GRAMMARS["star"]
    nfa = A._NFA(g, {}, DEFAULT_LIMITS.max_nfa_states)
    start = nfa.new()
    end = nfa.build_start(start)
    arrays = (nfa.eps_src, nfa.eps_tgt, nfa.e_src, nfa.e_lo, nfa.e_hi, nfa.e_tgt, nfa.sp_src, nfa.sp_k, nfa.sp_tgt)
    with pytest.raises(TimeoutError):
        _native.nfa_determinize_coo(nfa.n, start, end, *arrays, 0, 1000, 0.0)
    with pytest.raises(OverflowError):
        _native.nfa_determinize_coo(nfa.n, start, end, *arrays, 0, 1, float("inf"))
    _, ncls, tb, ab = _native.nfa_determinize_coo(nfa.n, start, end, *arrays, 0, 1000, float("inf"))
    block = np.empty(len(ab), dtype=np.int32)
    acc = np.frombuffer(ab, dtype=np.uint8)
    with pytest.raises(TimeoutError):
        _native.dfa_minimize(np.frombuffer(tb, dtype=np.int32), ncls, acc, block, -1.0)
    assert _native.dfa_minimize(np.frombuffer(tb, dtype=np.int32), ncls, acc, block, float("nan")) >= 1


def test_malformed_arrays_are_rejected():
    eo = np.array([0, 1, 1], dtype=np.int32)
    et = np.array([1], dtype=np.int32)
    mo = np.array([0, 1, 1], dtype=np.int32)
    mv = np.array([0, 1], dtype=np.int32)
    tb, ab = _native.nfa_determinize(eo, et, mo, mv, 0, 1, 1, 10, 1.0)
    assert np.frombuffer(tb, dtype=np.int32).tolist() == [1, -1] and list(ab) == [1, 1]
    with pytest.raises(ValueError):  # target out of range
        _native.nfa_determinize(eo, np.array([2], dtype=np.int32), mo, mv, 0, 1, 1, 10, 1.0)
    with pytest.raises(ValueError):  # symbol not below nsym
        _native.nfa_determinize(eo, et, mo, np.array([1, 1], dtype=np.int32), 0, 1, 1, 10, 1.0)
    with pytest.raises(ValueError):  # start out of range
        _native.nfa_determinize(eo, et, mo, mv, 5, 1, 1, 10, 1.0)
    with pytest.raises(ValueError):  # lengths disagree
        _native.nfa_determinize(eo, et, mo, np.array([0, 1, 0, 1], dtype=np.int32), 0, 1, 1, 10, 1.0)
    with pytest.raises(TypeError):
        _native.nfa_determinize(eo.astype(np.int64), et, mo, mv, 0, 1, 1, 10, 1.0)
    block = np.empty(2, dtype=np.int32)
    acc = np.array([0, 1], dtype=np.uint8)
    with pytest.raises(ValueError):  # a target beyond the table
        _native.dfa_minimize(np.array([2, -1], dtype=np.int32), 1, acc, block, 1.0)
    with pytest.raises(ValueError):  # table not n * nsym
        _native.dfa_minimize(np.array([1, -1, 0], dtype=np.int32), 1, acc, block, 1.0)
    assert _native.dfa_minimize(np.array([1, -1], dtype=np.int32), 1, acc, block, 1.0) == 2


def test_pure_python_switch(monkeypatch):
    def boom(*_a):
        raise AssertionError("native code called")
    for name in ("nfa_determinize", "nfa_determinize_coo", "dfa_minimize", "dfa_prune", "dfa_bfs", "dfa_trim",
                 "dfa_minimize_table"):
        monkeypatch.setattr(_native, name, boom)
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1")
    assert A.compile_dfa(GRAMMARS["star"]).accepts(b"abc12z")
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "0")
    with pytest.raises(AssertionError, match="native code called"):
        A.compile_dfa(GRAMMARS["star"])


# ----------------------------------------------------------------------------- random automata

def _random_nfa(draw_ints, n: int, n_specials: int) -> A._NFARef:
    nfa = A._NFARef.__new__(A._NFARef)
    nfa.eps, nfa.edges, nfa.spec = [], [], []
    it = iter(draw_ints)
    for _ in range(n):
        nfa.eps.append([next(it) % n for _ in range(next(it) % 3)])
        es = []
        for _ in range(next(it) % 3):
            lo = next(it) % 8 * 32 + next(it) % 4
            es.append((lo, min(255, lo + next(it) % 50), next(it) % n))
        nfa.edges.append(es)
        nfa.spec.append([(next(it) % n_specials, next(it) % n) for _ in range(next(it) % 2)] if n_specials else [])
    return nfa


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.integers(2, 14), st.integers(0, 2), st.lists(st.integers(0, 2**16), min_size=600, max_size=600),
       st.data())
def test_random_nfas(n, n_specials, ints, data):
    nfa = _random_nfa(ints, n, n_specials)
    start = data.draw(st.integers(0, n - 1))
    end = data.draw(st.integers(0, n - 1))
    specials = tuple(f"<{k}>" for k in range(n_specials))
    dl = A._Deadline(60.0, "test")
    py = A._determinize_py(nfa, start, end, specials, dl, 10**6, "test")
    c = A._determinize(A._NFA.from_lists(nfa.eps, nfa.edges, nfa.spec), start, end, specials, dl, 10**6, "test")
    assert np.array_equal(py.byte_class, c.byte_class) and py.n_classes == c.n_classes
    assert np.array_equal(py.trans, c.trans) and np.array_equal(py.accepting, c.accepting)
    _assert_same(A._minimize_py(py, dl), A._minimize(py, dl))  # unpruned: dead-end states too
    try:
        pruned = A._prune_py(py, None)
    except GrammarError as e:
        with pytest.raises(GrammarError, match="^" + __import__("re").escape(str(e)) + "$"):
            A._prune(py, None)
        return
    _assert_same(pruned, A._prune(py, None))
    _assert_same(A._minimize_py(pruned, dl), A._minimize(pruned, dl))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 30), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_random_dfa_tables(n, nsym, seed):
    """Any table, reachable or not, with dead ends: same partition (and numbering)."""
    rng = np.random.default_rng(seed)
    trans = rng.integers(-1, n, size=(n, nsym), dtype=np.int32)
    trans[rng.random((n, nsym)) < rng.random()] = -1
    acc = rng.random(n) < rng.random()
    dfa = A.DFA(np.zeros(256, dtype=np.uint16), trans, acc, (), nsym)
    _assert_same(A._minimize_py(dfa), A._minimize(dfa))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 25), st.integers(1, 6), st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_random_dfa_tables_with_duplicated_parts(n, nsym, seed, copies):
    """A table plus copies of it (the same sub-automaton reached several ways, as the subset
    construction makes for Snowplow's optional properties): the native minimisation merges
    identical rows first, then refines; the same partition and numbering as the reference."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-1, n, size=(n, nsym), dtype=np.int32)
    base[rng.random((n, nsym)) < rng.random()] = -1
    acc0 = rng.random(n) < rng.random()
    parts, accs = [], []
    for k in range(copies):
        t = np.where(base >= 0, base + k * n, -1)
        out = rng.random((n, nsym)) < 0.1  # a few edges into another copy
        t = np.where(out & (base >= 0), base + int(rng.integers(0, copies)) * n, t)
        parts.append(t)
        accs.append(acc0)
    trans = np.concatenate(parts).astype(np.int32)
    order = rng.permutation(len(trans))  # copies interleaved
    inv = np.argsort(order)
    trans = np.where(trans[order] >= 0, inv[np.maximum(trans[order], 0)], -1).astype(np.int32)
    acc = np.concatenate(accs)[order]
    dfa = A.DFA(np.zeros(256, dtype=np.uint16), trans, acc, (), nsym)
    _assert_same(A._minimize_py(dfa), A._minimize(dfa))


def test_large_enum_matches():
    """A few thousand alternatives: many states, a wide start state."""
    g = Grammar.single(choice(*(lit(f"item_{i:05d}_value") for i in range(2000))))
    nfa = A._NFA(g, {}, DEFAULT_LIMITS.max_nfa_states)
    start = nfa.new()
    end = nfa.build_start(start)
    ref = A._NFARef(g, {}, DEFAULT_LIMITS.max_nfa_states)
    assert ref.new() == start and ref.build_start(start) == end
    dl = A._Deadline(120.0, "test")
    py = A._determinize_py(ref, start, end, (), dl, 10**6, "test")
    c = A._determinize(nfa, start, end, (), dl, 10**6, "test")
    assert np.array_equal(py.trans, c.trans) and np.array_equal(py.accepting, c.accepting)
    pruned = A._prune(c, None)
    m = A._minimize(pruned, dl)
    _assert_same(A._minimize_py(pruned, dl), m)
    assert m.accepts(b"item_01999_value") and not m.accepts(b"item_02000_value")


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 30), st.integers(1, 5), st.integers(0, 2**32 - 1), st.booleans())
def test_random_dfa_tables_trim(n, nsym, seed, usable):
    """``_prune`` (``dfa_trim``: the table made only when a state is dropped, else the input
    kept) against the reference on any table, and with some byte classes unusable."""
    rng = np.random.default_rng(seed)
    trans = rng.integers(-1, n, size=(n, nsym), dtype=np.int32)
    trans[rng.random((n, nsym)) < rng.random()] = -1
    acc = rng.random(n) < rng.random()
    bc = (np.arange(256) % nsym).astype(np.uint16)
    dfa = A.DFA(bc, trans, acc, (), nsym)
    ub = (rng.random(256) < 0.7).tolist() if usable else None
    try:
        ref = A._prune_py(dfa, ub)
    except GrammarError as e:
        with pytest.raises(GrammarError, match="^" + __import__("re").escape(str(e)) + "$"):
            A._prune(dfa, ub)
        return
    got = A._prune(dfa, ub)
    _assert_same(ref, got)
    assert got.trans.dtype == A.state_dtype(got.n_states) and got.accepting.dtype == bool
    assert not got.trans.flags.writeable and not got.accepting.flags.writeable
    if ref.n_states == n:  # nothing dropped: the same table, trimmed again to itself
        _assert_same(got, A._prune(got, ub))


def test_trim_and_minimize_table_bindings():
    """The result-making bindings: None when nothing changes, errors as their siblings."""
    t = np.array([1, -1, -1, 0, -1, -1], dtype=np.int32)  # 3 states, nsym 2: 0 -a-> 1 -b-> 0
    k, tb, ab = _native.dfa_trim(t, 2, np.array([0, 1, 0], dtype=np.uint8), None)
    assert k == 2 and np.frombuffer(tb, dtype=np.int32).tolist() == [1, -1, -1, 0] and list(ab) == [0, 1]
    assert _native.dfa_trim(t, 2, np.array([0, 0, 1], dtype=np.uint8), None) == (0, None, None)
    assert _native.dfa_trim(t[:4], 2, np.array([0, 1], dtype=np.uint8), None) == (2, None, None)
    with pytest.raises(ValueError):
        _native.dfa_trim(t, 2, np.array([0, 1], dtype=np.uint8), None)  # table not n * nsym
    with pytest.raises(ValueError):
        _native.dfa_trim(t, 2, np.array([0, 1, 0], dtype=np.uint8), np.ones(3, dtype=np.uint8))
    with pytest.raises(ValueError):  # a target beyond the table
        _native.dfa_trim(np.array([3, -1, -1, 0, -1, -1], dtype=np.int32), 2, np.array([0, 1, 0], dtype=np.uint8),
                         None)
    with pytest.raises(TypeError):
        _native.dfa_trim(t.astype(np.int64), 2, np.array([0, 1, 0], dtype=np.uint8), None)
    acc = np.array([0, 1, 1], dtype=np.uint8)
    two = np.array([1, 2, -1, -1, -1, -1], dtype=np.int32)  # 1 and 2: the same accepting sink
    k, tb, ab = _native.dfa_minimize_table(two, 2, acc, 1.0)
    assert k == 2 and np.frombuffer(tb, dtype=np.int32).tolist() == [1, 1, -1, -1] and list(ab) == [0, 1]
    assert _native.dfa_minimize_table(np.array([1, -1, -1, -1], dtype=np.int32), 2, acc[:2], 1.0) == (2, None, None)
    with pytest.raises(ValueError):
        _native.dfa_minimize_table(np.array([3, -1, -1, 0, -1, -1], dtype=np.int32), 2, acc, 1.0)
    with pytest.raises(ValueError):
        _native.dfa_minimize_table(two[:5], 2, acc, 1.0)
    with pytest.raises(TimeoutError):
        _native.dfa_minimize_table(two, 2, acc, -1.0)
