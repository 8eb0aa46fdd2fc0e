"""The NFA built in C (``automaton._NativeNFA``: the IR serialised by ``_nfa_program``, built
by ``gd_nfa_build`` in native/src/nfa_build.c) against the Python builder ``automaton._NFA``
(``GD_PYTHON_NFA=1``): the same arrays (states, end state, every edge in the same order), the
same errors for the limits (max_nfa_states at every bound, max_nesting, the deadline, nesting
deeper than the stack), and the same minimal DFAs through ``compile_dfa`` on hand-written
grammars, JSON schemas of every jsonschemabench split, DTDs and GBNF grammars."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
import pytest

import decoding.backends.automaton as A
from decoding import _native
from decoding.errors import DecodingError, GrammarError, LimitError
from decoding.ir import Choice, Diff, Grammar, Inter, Ref, Repeat, Seq, Special, byteset, choice, inter, lit, rep, seq
from decoding.limits import DEFAULT_LIMITS

from conftest import CORPORA
from test_nfa_arrays import GRAMMARS, _chain, _multi
from test_nfa_replay import REPLAYED

COLS = ("eps_src", "eps_tgt", "e_src", "e_lo", "e_hi", "e_tgt", "sp_src", "sp_k", "sp_tgt")
D = byteset([(48, 57)])
AZ = byteset([(97, 122)])


def _arrays(cls: type, g: Grammar, max_states: int = DEFAULT_LIMITS.max_nfa_states, **kw):
    """(n, end, the arrays) or (exception type, message)."""
    specials = tuple(g.specials())
    nfa = cls(g, {t: i for i, t in enumerate(specials)}, max_states, **kw)
    start = nfa.new()
    try:
        end = nfa.build_start(start)
    except DecodingError as e:
        return type(e), str(e)
    return nfa.n, end, tuple(bytes(getattr(nfa, c)) for c in COLS)


def _same(g: Grammar, **kw) -> object:
    py = _arrays(A._NFA, g, **kw)
    c = _arrays(A._NativeNFA, g, **kw)
    assert c == py
    return py


def _compile(g: Grammar, monkeypatch, python_nfa: bool, **kw):
    monkeypatch.setenv("GD_PYTHON_NFA", "1" if python_nfa else "0")
    try:
        return "ok", A.compile_dfa(g, **kw)
    except DecodingError as e:
        return type(e), str(e)


def _same_dfa(g: Grammar, monkeypatch, **kw) -> None:
    py = _compile(g, monkeypatch, True, **kw)
    c = _compile(g, monkeypatch, False, **kw)
    if py[0] != "ok":
        assert c == py
        return
    assert c[0] == "ok"
    a, b = py[1], c[1]
    assert a.specials == b.specials and a.n_classes == b.n_classes
    assert np.array_equal(a.byte_class, b.byte_class)
    assert a.trans.dtype == b.trans.dtype and np.array_equal(a.trans, b.trans)
    assert np.array_equal(a.accepting, b.accepting)


HAND = {
    **GRAMMARS,
    **{f"replayed_{k}": v for k, v in REPLAYED.items()},
    "special_missing_id": Grammar.single(seq(lit("a"), Special("<x>"))),  # built with special_ids {} below
    "diff_in_rule": _multi("root", root=seq(Ref("a"), lit("-"), Ref("a")),
                           a=Diff(rep(AZ, 1, 4), lit("ab"))),
    "inter_unreached": Grammar("r", (("r", choice(lit("x"), seq(Ref("r"), Inter((rep(D, 1, 3), lit("12")))))),),
                               max_depth=1),
    "sep_loop_nested": _multi("root", root=seq(Ref("x"), Repeat(Seq((lit(","), Ref("x"))), 0, None)),
                              x=choice(D, seq(lit("["), Ref("x"), Repeat(Seq((lit(";"), Ref("x"))), 0, None),
                                              lit("]")))),
    "deep_choice": Grammar.single(choice(*(seq(lit(f"k{i}"), rep(D, 0, i % 5)) for i in range(300)))),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_same_arrays(name):
    g = HAND[name]
    if name == "special_missing_id":  # a Special with no id: left to Python, which raises KeyError
        for cls in (A._NFA, A._NativeNFA):
            nfa = cls(g, {}, 1000)
            with pytest.raises(KeyError):
                nfa.build_start(nfa.new())
        return
    _same(g)


@pytest.mark.parametrize("name", sorted(HAND))
def test_same_dfa(name, monkeypatch):
    if name != "special_missing_id":
        _same_dfa(HAND[name], monkeypatch)


@pytest.mark.parametrize("name", ["literal", "all_bytes", "repeat_shapes", "sep_list", "dfa_leaf", "inter_shared",
                                  "specials", "mutual", "recursive", "nested_repeats"])
def test_max_nfa_states_at_every_bound(name):
    g = GRAMMARS[name]
    size = _arrays(A._NFA, g)[0]
    for bound in range(1, size + 2):
        out = _same(g, max_states=bound)
        assert (out[0] is LimitError) == (bound < size), bound


def test_max_nfa_states_in_deep_rules():
    g = REPLAYED["safe_rule_used_often"]
    for bound in (40, 100, 333, 497, 498):
        out = _same(g, max_states=bound)
        assert (out[0] is LimitError) == (bound < 498)


def test_max_nesting():
    g = _chain(DEFAULT_LIMITS.max_nesting + 20)
    out = _same(g)
    assert out[0] is LimitError and "rules nested more than max_nesting" in out[1]
    rules = {"root": seq(Ref("deep"), Ref("b")), "b": seq(Ref("c"), lit("q")), "c": seq(lit("z"), Ref("d")),
             "d": lit("x" * 30), "deep": seq(Ref("l1")), "l1": Ref("l2"), "l2": Ref("l3"), "l3": Ref("b")}
    for nest in range(1, 8):
        _same(_multi("root", **rules), max_nesting=nest)


def test_deeper_than_the_stack_falls_back_to_python():
    depth = sys.getrecursionlimit() + 100
    out = _same(_chain(depth), max_states=10**7, max_nesting=10 * depth)
    assert out[0] is LimitError and "grammar nested too deeply to inline" in out[1]
    ok = _same(_chain(sys.getrecursionlimit() // 8), max_states=10**7, max_nesting=10**6)
    assert ok[0] != LimitError


def test_high_recursion_limit_keeps_the_c_stack_small(monkeypatch):
    """With a raised recursion limit the C builder still stops at its own frame cap and
    leaves the deeper grammar to Python (same arrays)."""
    monkeypatch.setattr(A, "_MAX_C_FRAMES", 500)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        out = _same(_chain(1500), max_states=10**7, max_nesting=10**6)
    finally:
        sys.setrecursionlimit(old)
    assert out[0] == 1501  # the start state and one per byte


def test_deadline():
    g = _multi("root", root=seq(lit("<"), Ref("body")), body=lit("x" * 5000))
    msgs = []
    for cls in (A._NFA, A._NativeNFA):
        dl = A._Deadline(0.5, "grammar 'root'")
        dl.at = 0.0
        msgs.append(_arrays(cls, g, deadline=dl))
    assert msgs[0] == msgs[1] and msgs[0][0] is LimitError
    assert "(during the NFA of rule 'body')" in msgs[0][1]


def test_failed_inter_falls_back_with_the_python_message(monkeypatch):
    """An Inter/Diff whose automaton is too big: the same LimitError (its rule named where the
    build first reaches it), and none if the build never reaches it."""
    big = Inter((rep(choice(AZ, D), 1, 40), seq(rep(AZ, 0, 20), lit("q"), rep(choice(AZ, D), 0, 20))))
    g = _multi("root", root=seq(lit("a"), Ref("inner")), inner=seq(lit("b"), big))
    for cls in (A._NFA, A._NativeNFA):
        nfa = cls(g, {}, 10**6)
        nfa.max_dfa = 10
        with pytest.raises(LimitError, match="rule 'inner'"):
            nfa.build_start(nfa.new())
    unreached = _multi("root", root=choice(lit("x"), seq(Ref("e"), big)), e=Choice(()))
    out = []
    for cls in (A._NFA, A._NativeNFA):
        nfa = cls(unreached, {}, 10**6)
        nfa.max_dfa = 10
        out.append((nfa.build_start(nfa.new()), nfa.n, bytes(nfa.e_src)))
    assert out[0] == out[1]


def test_python_switch(monkeypatch):
    g = GRAMMARS["star"]
    monkeypatch.setenv("GD_PYTHON_NFA", "1")
    assert type(A._new_nfa(g, {}, 100)) is A._NFA
    monkeypatch.setenv("GD_PYTHON_NFA", "0")
    assert type(A._new_nfa(g, {}, 100)) is A._NativeNFA
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1")
    assert type(A._new_nfa(g, {}, 100)) is A._NFARef


def test_nfa_matcher_native(monkeypatch):
    for name in ("star", "sep_list", "dfa_leaf", "inter_shared", "recursive"):
        g = GRAMMARS[name]
        m = A.NFAMatcher(g)
        dfa = A.compile_dfa(g)
        for data in (b"", b"a", b"abc12z", b"[1,ab,2]", b"<12a>", b"x", b"[x]", b"[[x]]", b"aqb-q"):
            assert m.accepts(data) == dfa.accepts(data), (name, data)


# ----------------------------------------------------------------------------- corpora

def _schemas(split: str, k: int) -> list[tuple[str, object]]:
    files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
    out = []
    for f in files[::max(1, len(files) // k)][:k]:
        try:
            out.append((f"{split}/{f.name}", json.loads(f.read_text(encoding="utf-8"))["schema"]))
        except (ValueError, KeyError):
            continue
    return out


SPLITS = sorted(p.name for p in (CORPORA / "jsonschemabench").iterdir() if p.is_dir()) \
    if (CORPORA / "jsonschemabench").is_dir() else []
SCHEMAS = [x for split in SPLITS for x in _schemas(split, 40)]


@pytest.mark.skipif(not SCHEMAS, reason="../shared/corpora/jsonschemabench not present")
@pytest.mark.parametrize("split", SPLITS)
def test_schemas_same_nfa_and_dfa(split, monkeypatch):
    from decoding.frontends.jsonschema import compile_schema
    lim = replace(DEFAULT_LIMITS, max_nfa_states=300_000)
    seen = 0
    for name, schema in SCHEMAS:
        if not name.startswith(split + "/"):
            continue
        try:
            g = compile_schema(schema).grammar
        except (DecodingError, RecursionError):
            continue
        _same(g, max_states=lim.max_nfa_states)
        if seen < 12:  # the whole pipeline on some (the NFA arrays are compared on all)
            _same_dfa(g, monkeypatch, limits=lim)
        seen += 1
    assert seen >= 10


def _dtd_grammars() -> list[tuple[str, Grammar]]:
    from decoding.frontends.xml.dtd import parse_dtd
    from decoding.frontends.xml.grammar import dtd_grammar
    base = CORPORA / "dtd"
    out = []
    for p in sorted(base.glob("*.dtd")):
        try:
            dtd = parse_dtd(p.read_text(encoding="utf-8"), source=p.name, base_dir=base)
        except DecodingError:
            continue
        for el in dtd.elements[:10]:
            try:
                out.append((f"{p.name}:{el.name}", dtd_grammar(dtd, el.name)))
            except DecodingError:
                continue
    return out


def _gbnf_grammars() -> list[tuple[str, Grammar]]:
    from decoding.frontends.gbnf.parse import parse_gbnf
    out = []
    for p in sorted((CORPORA / "gbnf").rglob("*.gbnf")):
        for depth in (2, 3):
            try:
                out.append((f"{p.name}@{depth}", parse_gbnf(p.read_text(encoding="utf-8"), max_depth=depth)))
            except DecodingError:
                continue
    return out


@pytest.mark.parametrize("kind", ["dtd", "gbnf"])
def test_dtd_and_gbnf_same_nfa_and_dfa(kind, monkeypatch):
    if not (CORPORA / kind).is_dir():
        pytest.skip(f"../shared/corpora/{kind} not present")
    grammars = _dtd_grammars() if kind == "dtd" else _gbnf_grammars()
    assert len(grammars) >= 10
    lim = replace(DEFAULT_LIMITS, max_nfa_states=300_000, max_compile_work=10**15)
    for name, g in grammars:
        _same(g, max_states=lim.max_nfa_states)
        _same_dfa(g, monkeypatch, limits=lim, max_states=20_000)


# ----------------------------------------------------------------------------- the binding

def _prog(code, lit_=b"", bodies=(), **kw):
    z32, z64 = np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64)
    args = dict(root=0, n0=1, s=0, max_depth=3, max_nesting=10, base_len=1, max_states=100, max_frames=100,
                budget=1e30)
    args.update(kw)
    return _native.nfa_build(np.array(code, dtype=np.int32), np.frombuffer(lit_, dtype=np.uint8),
                             np.array(bodies, dtype=np.int32), z32, z64, z32, np.zeros(0, dtype=np.uint8),
                             np.zeros(0, dtype=np.uint8), z32, z64, z32, *args.values())


def test_binding():
    r = _prog([A._NK_LIT, 0, 2], b"ab")
    assert r[:3] == (0, 3, 2)
    assert np.frombuffer(r[5], dtype=np.int32).tolist() == [0, 1] and r[6] == b"ab" == r[7]
    assert _prog([A._NK_SET, 0])[:3] == (0, 1, -1)
    assert _prog([A._NK_LIT, 0, 2], b"ab", max_states=2)[:3] == (A._NFA_STATES, 1, -1)
    assert _prog([A._NK_REF, 0], bodies=[0], max_depth=100)[0] == A._NFA_NESTING
    assert _prog([A._NK_REF, 0], bodies=[0], max_frames=5, max_nesting=1000)[0] == A._NFA_FALLBACK
    assert _prog([A._NK_FALLBACK, 7])[0::4] == (A._NFA_FALLBACK, 7)
    for bad in ([A._NK_LIT, 0, 3], [A._NK_SEQ, 2, 0], [99], [A._NK_SET, 1, 5, 4], [A._NK_REF, 1], [A._NK_LEAF, 0]):
        with pytest.raises(ValueError):
            _prog(bad, b"ab", bodies=[0] if bad[0] == A._NK_REF else ())
    with pytest.raises(ValueError):
        _prog([A._NK_LIT, 0, 0], s=1)
