"""The NFA built straight into flat arrays (``automaton._NFA``) and the native pipeline
(``gd_nfa_determinize_coo``, ``gd_dfa_prune``, ``gd_dfa_bfs``, ``gd_dfa_minimize``) against
the all-Python reference (``_NFARef`` lists, ``_determinize_py``, ``_prune_py``,
``_minimize_py``; ``GD_PURE_PYTHON_DFA=1``): the same NFA (states, end state, edges), the
same DFAs (tables, state numbering and dtype included), the same errors for the limits
(max_nfa_states, max_nesting, nesting deeper than the stack, the compile deadline), on
hand-written grammars, the first 40 Glaiveai2K schemas and random tables."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import decoding.backends.automaton as A
from decoding import _native
from decoding.errors import GrammarError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import (ByteSet, Choice, Dfa, Grammar, Lit, Ref, Repeat, Seq, Special, byteset, char_class, choice,
                         diff, inter, lit, opt, plus, rep, seq, star)
from decoding.limits import DEFAULT_LIMITS

from conftest import CORPORA

D = byteset([(48, 57)])
AZ = byteset([(97, 122)])
EMPTY_SET = ByteSet(())  # the empty language
LEAF = Dfa((((48, 57, 1),), ((48, 57, 1), (97, 97, 2)), ((0, 255, 2),)), (1, 2))
SHARED_INTER = inter(rep(AZ, 1, 6), seq(star(AZ), lit("q"), star(AZ)))


def _multi(start: str, **rules) -> Grammar:
    return Grammar(start, tuple(rules.items()))


GRAMMARS = {
    "literal": Grammar.single(lit("hello")),
    "empty_literal": Grammar.single(Lit(b"")),
    "all_bytes": Grammar.single(choice(Lit(bytes(range(256))), Lit(bytes(range(255, -1, -1))))),
    "choice_with_empty_branches": Grammar.single(Choice((EMPTY_SET, Lit(b"a"), Seq((Lit(b"xyz"), EMPTY_SET)),
                                                         Lit(b"b"), Choice(())))),
    "seq_dies_midway": Grammar.single(choice(Seq((Lit(b"ab"), D, EMPTY_SET, Lit(b"c"))), lit("ok"))),
    "repeat_shapes": Grammar.single(Seq((Repeat(Lit(b"a"), 0, 0), Repeat(D, 2, 2), Repeat(EMPTY_SET, 0, 3),
                                         Repeat(EMPTY_SET, 0, None), Repeat(AZ, 1, None), Repeat(lit("xy"), 0, 3)))),
    "repeat_empty_min": Grammar.single(choice(Repeat(EMPTY_SET, 1, None), lit("z"))),
    "star": Grammar.single(seq(lit("a"), star(choice(lit("bc"), D)), lit("z"))),
    "plus": Grammar.single(plus(choice(AZ, lit("-")))),
    "bounded": Grammar.single(seq(rep(D, 2, 5), opt(seq(lit("."), rep(D, 1, 3))))),
    "nested_repeats": Grammar.single(rep(rep(choice(AZ, lit("xy")), 1, 3), 0, 4)),
    "ranges": Grammar.single(star(choice(byteset([(0, 31), (200, 255)]), byteset([(32, 33), (35, 90)])))),
    "utf8": Grammar.single(seq(lit('"'), rep(char_class([(0x22, 0x22), (0x5C, 0x5C)], negate=True), 0, 6),
                               lit('"'))),
    "specials": Grammar.single(seq(Special("<s>"), star(choice(AZ, Special("<sep>"))), Special("</s>"))),
    "special_or_text": Grammar.single(choice(seq(Special("<a>"), lit("x")), lit("<a>y"), star(Special("<b>")))),
    "recursive": Grammar("v", (("v", choice(lit("x"), seq(lit("["), opt(Ref("v")), lit("]")))),), max_depth=4),
    "mutual": Grammar("a", (("a", choice(lit("1"), seq(lit("("), Ref("b"), lit(")")))),
                            ("b", seq(Ref("a"), star(seq(lit("+"), Ref("a")))))), max_depth=3),
    "sep_list": _multi("root", root=seq(lit("["), Ref("x"), Repeat(Seq((lit(","), Ref("x"))), 0, None), lit("]")),
                       x=choice(D, lit("ab"))),
    "sep_list_empty_separator": _multi("root", root=Seq((Ref("x"), Repeat(Seq((EMPTY_SET, Ref("x"))), 0, None))),
                                       x=plus(D)),
    "dfa_leaf": Grammar.single(seq(lit("<"), LEAF, lit(">"), opt(LEAF))),
    "inter": Grammar.single(inter(rep(AZ, 1, 8), seq(star(AZ), lit("q"), star(AZ)))),
    "inter_shared": Grammar.single(seq(SHARED_INTER, lit("-"), SHARED_INTER, opt(SHARED_INTER))),
    "inter_empty": Grammar.single(choice(inter(lit("a"), lit("b")), lit("c"))),
    "diff": Grammar.single(diff(rep(choice(AZ, D), 1, 6), seq(lit("ab"), star(AZ)))),
    "diff_of_empty": Grammar.single(choice(diff(lit("a"), lit("a")), lit("d"))),
    "enum": Grammar.single(choice(*(lit(f"item_{i:05d}_value") for i in range(2000)))),
}


def _build(cls: type, g: Grammar, max_states: int = DEFAULT_LIMITS.max_nfa_states, **kw):
    specials = tuple(g.specials())
    nfa = cls(g, {t: i for i, t in enumerate(specials)}, max_states, **kw)
    start = nfa.new()
    return nfa, start, nfa.build_start(start), specials


def _per_state(nfa) -> list[tuple[list, list, list]]:
    eps, edges, spec = A._nfa_lists(nfa)
    return [(sorted(eps[s]), sorted(edges[s]), sorted(spec[s])) for s in range(len(eps))]


def _outcome(f):
    """("ok", value) or (exception type, message, limit attribute)."""
    try:
        return "ok", f()
    except (LimitError, GrammarError) as e:
        return type(e), str(e), getattr(e, "limit", None)


def _same_dfa(a: A.DFA, b: A.DFA) -> None:
    assert a.specials == b.specials and a.n_classes == b.n_classes
    assert a.byte_class.dtype == b.byte_class.dtype and np.array_equal(a.byte_class, b.byte_class)
    assert a.trans.dtype == b.trans.dtype and np.array_equal(a.trans, b.trans)
    assert a.accepting.dtype == b.accepting.dtype and np.array_equal(a.accepting, b.accepting)


def _compile(g: Grammar, monkeypatch, pure: bool, **kw):
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1" if pure else "0")
    return _outcome(lambda: A.compile_dfa(g, **kw))


USABLE = {
    "all": [True] * 256,
    "ascii": [b < 128 for b in range(256)],
    "no_digits": np.array([not 48 <= b <= 57 for b in range(256)]),
    "letters": np.array([97 <= b <= 122 for b in range(256)]),
    "none": np.zeros(256, dtype=bool),
}


def _check_dfa_steps(dfa: A.DFA, monkeypatch) -> None:
    """prune (each usable-byte set) and min_steps_to_accept: native == reference."""
    for ub in USABLE.values():
        ref = _outcome(lambda: A._prune_py(dfa, ub))
        new = _outcome(lambda: A._prune(dfa, ub))
        if ref[0] == "ok":
            assert new[0] == "ok"
            _same_dfa(ref[1], new[1])
        else:
            assert new == ref
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1")
    py = dfa.min_steps_to_accept()
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "0")
    c = dfa.min_steps_to_accept()
    assert c.dtype == py.dtype and np.array_equal(c, py)


def _check_grammar(g: Grammar, monkeypatch) -> None:
    ref, s0, end_ref, _ = _build(A._NFARef, g)
    new, s1, end_new, _ = _build(A._NFA, g)
    assert (s0, end_ref, len(ref.eps)) == (s1, end_new, new.n)
    assert _per_state(ref) == _per_state(new)
    py = _compile(g, monkeypatch, True)
    c = _compile(g, monkeypatch, False)
    if py[0] != "ok":
        assert c == py
        return
    assert c[0] == "ok"
    _same_dfa(py[1], c[1])
    _check_dfa_steps(py[1], monkeypatch)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_grammar_same_nfa_and_dfa(name, monkeypatch):
    _check_grammar(GRAMMARS[name], monkeypatch)


def test_unpruned_dfas_match(monkeypatch):
    """The raw subset construction of each grammar (dead ends included): the same table."""
    dl = A._Deadline(60.0, "t")
    for name, g in GRAMMARS.items():
        ref, start, end, specials = _build(A._NFARef, g)
        new, _, _, _ = _build(A._NFA, g)
        if end is None:
            continue
        py = A._determinize_py(ref, start, end, specials, dl, 10**6, "t")
        c = A._determinize(new, start, end, specials, dl, 10**6, "t")
        assert np.array_equal(py.trans, c.trans) and np.array_equal(py.accepting, c.accepting), name
        assert np.array_equal(py.byte_class, c.byte_class) and py.n_classes == c.n_classes, name
        _check_dfa_steps(py, monkeypatch)


def _glaive(n: int) -> list[tuple[str, object]]:
    bench = CORPORA / "jsonschemabench" / "Glaiveai2K"
    return [(p.name, json.loads(p.read_text())["schema"]) for p in sorted(bench.glob("*.json"))[:n]]


GLAIVE = _glaive(40)


@pytest.mark.skipif(not GLAIVE, reason="../shared/corpora/jsonschemabench/Glaiveai2K not present")
@pytest.mark.parametrize("name, schema", GLAIVE, ids=[n for n, _ in GLAIVE])
def test_glaive_schema_same_nfa_and_dfa(name, schema, monkeypatch):
    _check_grammar(compile_schema(schema).grammar, monkeypatch)


def test_enough_glaive_schemas():
    if (CORPORA / "jsonschemabench" / "Glaiveai2K").is_dir():
        assert len(GLAIVE) == 40


# ----------------------------------------------------------------------------- limits

@pytest.mark.parametrize("name", ["literal", "all_bytes", "repeat_shapes", "sep_list", "dfa_leaf", "inter_shared",
                                  "specials", "mutual"])
def test_max_nfa_states_same_error_at_every_bound(name):
    """For every bound up to the NFA's size: both builders fail (same message) or both pass."""
    g = GRAMMARS[name]
    size = len(_build(A._NFARef, g)[0].eps)
    for bound in range(1, size + 2):
        ref = _outcome(lambda: _build(A._NFARef, g, bound)[2])
        new = _outcome(lambda: _build(A._NFA, g, bound)[2])
        assert new == ref, bound
        if bound < size:
            assert ref[0] is LimitError and "(limit max_nfa_states)" in ref[1]
            assert f"more than {bound} NFA states" in ref[1]
        else:  # exactly max_nfa_states states is fine
            assert ref[0] == "ok"


def test_max_nfa_states_through_compile_dfa(monkeypatch):
    g = GRAMMARS["enum"]
    for bound in (100, 5000, 31_000):
        lim = replace(DEFAULT_LIMITS, max_nfa_states=bound)
        py = _compile(g, monkeypatch, True, limits=lim)
        c = _compile(g, monkeypatch, False, limits=lim)
        assert c[0] is LimitError and c == py
        assert "NFA states" in c[1] or "max_nfa_states" in c[1]


def _chain(n: int) -> Grammar:
    """r0 -> r1 -> ... -> r{n-1}: rules nested n deep."""
    rules = [(f"r{i}", seq(lit("a"), Ref(f"r{i + 1}"))) for i in range(n - 1)] + [(f"r{n - 1}", lit("b"))]
    return Grammar("r0", tuple(rules))


def test_max_nesting_same_error(monkeypatch):
    g = _chain(DEFAULT_LIMITS.max_nesting + 20)
    ref = _outcome(lambda: _build(A._NFARef, g)[2])
    new = _outcome(lambda: _build(A._NFA, g)[2])
    assert new == ref and ref[0] is LimitError
    assert f"rules nested more than max_nesting={DEFAULT_LIMITS.max_nesting} deep" in ref[1]
    lim = replace(DEFAULT_LIMITS, max_compile_work=10**15, max_nfa_states=10**7)
    assert _compile(g, monkeypatch, False, limits=lim) == _compile(g, monkeypatch, True, limits=lim)


def test_nested_too_deeply_is_a_limit_error_not_recursion_error():
    """Deeper than Python's stack allows (max_nesting raised out of the way): the
    RecursionError becomes the same LimitError in both builders."""
    depth = sys.getrecursionlimit() + 100
    g = _chain(depth)
    outcomes = []
    for cls in (A._NFARef, A._NFA):
        outcomes.append(_outcome(lambda: _build(cls, g, 10**7, max_nesting=10 * depth)[2]))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] is LimitError and "grammar nested too deeply to inline" in outcomes[0][1]
    assert f"limit max_nesting={10 * depth}" in outcomes[0][1]


def test_deadline_during_the_nfa_build():
    """An expired deadline is found at the 4096th state, by either builder, same message."""
    g = _multi("root", root=seq(lit("<"), Ref("body")), body=lit("x" * 5000))
    msgs = []
    for cls in (A._NFARef, A._NFA):
        dl = A._Deadline(0.5, "grammar 'root'")
        dl.at = 0.0  # spent
        msgs.append(_outcome(lambda: _build(cls, g, deadline=dl)[2]))
    assert msgs[0] == msgs[1]
    assert msgs[0][0] is LimitError
    assert msgs[0][1] == ("grammar 'root': compiling took longer than max_compile_seconds=0.5 (during the NFA "
                          "of rule 'body'); simplify the grammar or raise the limit")
    small = Grammar.single(lit("x" * 100))  # below 4096 states: never checked
    dl = A._Deadline(0.5, "g")
    dl.at = 0.0
    assert _build(A._NFA, small, deadline=dl)[2] == 100


def test_pure_python_switch_uses_the_list_builder(monkeypatch):
    def boom(*_a):
        raise AssertionError("flat builder used")
    monkeypatch.setattr(A._NFA, "build_start", boom)
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1")
    assert A.compile_dfa(GRAMMARS["star"]).accepts(b"abc12z")
    assert A.NFAMatcher(GRAMMARS["star"]).accepts(b"abc12z")
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "0")
    with pytest.raises(AssertionError, match="flat builder used"):
        A.compile_dfa(GRAMMARS["star"])


def test_nfa_matcher_agrees_with_the_dfa(monkeypatch):
    for name in ("star", "sep_list", "dfa_leaf", "inter_shared", "choice_with_empty_branches"):
        g = GRAMMARS[name]
        dfa = A.compile_dfa(g)
        m = A.NFAMatcher(g)
        for data in (b"", b"a", b"az", b"abc12z", b"[1,ab,2]", b"<12a>", b"<1>", b"q", b"aqb-q", b"b", b"xyz"):
            assert m.accepts(data) == dfa.accepts(data), (name, data)


# ----------------------------------------------------------------------------- random tables

@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.integers(1, 25), st.integers(1, 4), st.integers(0, 2), st.integers(0, 2**32 - 1))
def test_random_tables_prune_and_distances(n, ncls, n_specials, seed):
    """Any table (unreachable states, dead ends, specials): the same pruned DFA or the same
    error for every usable-byte set, and the same distances to acceptance."""
    rng = np.random.default_rng(seed)
    nsym = ncls + n_specials
    trans = rng.integers(-1, n, size=(n, nsym), dtype=np.int32)
    trans[rng.random((n, nsym)) < rng.random()] = -1
    acc = rng.random(n) < rng.random()
    bc = np.sort(rng.integers(0, ncls, 256)).astype(np.uint16)
    bc[:ncls] = np.arange(ncls)  # every class has a byte
    bc = np.sort(bc)
    dfa = A.DFA(bc, trans.astype(A.state_dtype(n)), acc, tuple(f"<{k}>" for k in range(n_specials)), ncls)
    for ub in (None, rng.random(256) < 0.5, [bool(x) for x in rng.random(256) < 0.8]):
        ref = _outcome(lambda: A._prune_py(dfa, ub))
        new = _outcome(lambda: A._prune(dfa, ub))
        if ref[0] == "ok":
            assert new[0] == "ok"
            _same_dfa(ref[1], new[1])
        else:
            assert new == ref
    dist = A._bfs(trans, np.nonzero(acc)[0], reverse=True)
    rev = A._reverse_edges(trans)
    expect = np.full(n, -1, dtype=np.int32)
    frontier = list(np.nonzero(acc)[0])
    expect[frontier] = 0
    d = 0
    while frontier:
        d += 1
        nxt = [s for t in frontier for s in rev[t] if expect[s] < 0]
        for s in nxt:
            expect[s] = d
        frontier = sorted(set(nxt))
    assert np.array_equal(dist, expect)
    reach = A._bfs(trans, np.zeros(1, dtype=np.int32))
    assert (reach >= 0).sum() >= 1 and reach[0] == 0


# ----------------------------------------------------------------------------- the bindings

def _coo(n=2, start=0, end=1, **over):
    a = {"eps_src": [0], "eps_tgt": [1], "e_src": [0], "e_lo": [97], "e_hi": [98], "e_tgt": [1],
         "sp_src": [], "sp_sym": [], "sp_tgt": []}
    a.update(over)
    arrs = [np.array(a[k], dtype=np.uint8 if k in ("e_lo", "e_hi") else np.int32)
            for k in ("eps_src", "eps_tgt", "e_src", "e_lo", "e_hi", "e_tgt", "sp_src", "sp_sym", "sp_tgt")]
    return _native.nfa_determinize_coo(n, start, end, *arrs, over.get("n_specials", 0), 10, 1.0)


def test_coo_binding():
    bcb, ncls, tb, ab = _coo()
    bc = np.frombuffer(bcb, dtype=np.uint16)
    assert ncls == 3 and bc[96] == 0 and bc[97] == bc[98] == 1 and bc[99] == 2
    assert np.frombuffer(tb, dtype=np.int32).tolist() == [-1, 1, -1, -1, -1, -1] and list(ab) == [1, 1]
    _, ncls, tb, ab = _coo(sp_src=[0], sp_sym=[0], sp_tgt=[1], n_specials=1, eps_src=[], eps_tgt=[])
    assert np.frombuffer(tb, dtype=np.int32).tolist() == [-1, 1, -1, 1, -1, -1, -1, -1] and list(ab) == [0, 1]
    for bad in ({"e_tgt": [2]}, {"eps_src": [-1]}, {"e_lo": [99]},  # lo > hi
                {"sp_src": [0], "sp_sym": [1], "sp_tgt": [1], "n_specials": 1}, {"start": 2}, {"n": 0}):
        with pytest.raises(ValueError):
            kw = dict(bad)
            _coo(**{k: kw.pop(k) for k in ("n", "start", "end") if k in kw}, **kw)
    with pytest.raises(ValueError, match="differ in length"):
        _coo(e_tgt=[1, 1])
    with pytest.raises(TypeError):
        _native.nfa_determinize_coo(2, 0, 1, *([np.zeros(0, dtype=np.int64)] * 9), 0, 10, 1.0)


def test_bfs_and_prune_bindings():
    t = np.array([1, -1, -1, 0, -1, -1], dtype=np.int32)  # 3 states, 2 symbols: 0 -a-> 1, 1 -b-> 0
    dist = np.empty(3, dtype=np.int32)
    assert _native.dfa_bfs(t, 2, None, None, False, np.array([0], dtype=np.int32), dist) == 2
    assert dist.tolist() == [0, 1, -1]
    assert _native.dfa_bfs(t, 2, np.array([1, 0], dtype=np.uint8), None, True, np.array([0], dtype=np.int32),
                           dist) == 1
    assert dist.tolist() == [0, -1, -1]
    with pytest.raises(ValueError):
        _native.dfa_bfs(np.array([3, -1, -1, 0, -1, -1], dtype=np.int32), 2, None, None, False,
                        np.array([0], dtype=np.int32), dist)
    with pytest.raises(ValueError):
        _native.dfa_bfs(t, 2, None, None, False, np.array([3], dtype=np.int32), dist)
    with pytest.raises(ValueError):
        _native.dfa_bfs(t, 4, None, None, False, np.array([0], dtype=np.int32), dist)
    out = np.empty(6, dtype=np.int32)
    acc_out = np.empty(3, dtype=np.uint8)
    assert _native.dfa_prune(t, 2, np.array([0, 1, 0], dtype=np.uint8), None, out, acc_out) == 2
    assert out[:4].tolist() == [1, -1, -1, 0] and acc_out[:2].tolist() == [0, 1]
    assert _native.dfa_prune(t, 2, np.array([0, 0, 1], dtype=np.uint8), None, out, acc_out) == 0
    with pytest.raises(ValueError):
        _native.dfa_prune(t, 2, np.array([0, 1, 0], dtype=np.uint8), None, out[:5], acc_out)


def test_no_nfa_arrays_left():
    """The list-to-array conversion is gone: the builder makes the arrays."""
    assert not hasattr(A, "_nfa_arrays")
    nfa, _, end, _ = _build(A._NFA, GRAMMARS["literal"])
    assert nfa.e_src.typecode == "i" and nfa.e_lo.typecode == "B" and end == 5
    assert re.fullmatch(r"\d+", str(nfa.n))
