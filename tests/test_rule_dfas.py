"""Rule DFAs (``automaton._rule_dfa_names``; C: ``gd_nfa_build_rule_dfas`` with the tail
sharing of ``build_into`` in ``native/src/nfa_build.c``; Python twin: ``_rule_leaves``): the
large acyclic rules of a grammar determinised and minimised on their own, bottom-up, and
embedded where they are referenced.  The minimal DFA must be the one the inlined NFA gives,
byte classes, state numbering and dtype included (``GD_NO_RULE_DFAS=1`` is that
construction), on hand-written grammars and on samples of the shared corpora; the same
errors for the limits; and ``gd_dfa_minimize_live`` tells exactly whether a table is
trimmed."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import decoding.backends.automaton as A
from decoding import _native
from decoding.errors import DecodingError, GrammarError, LimitError
from decoding.ir import (ByteSet, Choice, Grammar, Lit, Ref, Repeat, Seq, Special, byteset, char_class, choice, lit,
                         opt, rep, seq, star)
from decoding.ir.size import check_size, rule_estimates
from decoding.limits import DEFAULT_LIMITS

from conftest import CORPORA

D = byteset([(48, 57)])
AZ = byteset([(97, 122)])
STR = seq(lit('"'), star(char_class([(0x22, 0x22), (0x5C, 0x5C)], negate=True)), lit('"'))
NUM = choice(lit("0"), seq(opt(lit("-")), byteset([(49, 57)]), star(D)))
SUFFIX = star(D)
WORD = star(AZ)


def _multi(start: str, max_depth: int = 3, **rules) -> Grammar:
    return Grammar(start, tuple(rules.items()), max_depth)


def _obj(*props: tuple[str, object]) -> object:
    """An object of optional properties in order, as the JSON Schema front-end shapes it:
    each value once as the first property present and once after a comma."""
    body = Seq(())
    for i, (k, v) in enumerate(props):
        first = seq(lit(f'"{k}":'), v)
        body = first if i == 0 else choice(first, seq(body, opt(seq(lit(f',"{k}":'), v))))
    return seq(lit("{"), choice(Seq(()), body), lit("}"))


def _list(x: object) -> object:
    return seq(lit("["), opt(seq(x, Repeat(Seq((lit(","), x)), 0, None))), lit("]"))


GRAMMARS = {
    "object_of_objects": _multi(
        "root",
        root=_obj(("a", Ref("meta")), ("b", Ref("spec")), ("c", _list(Ref("meta")))),
        meta=_obj(("name", STR), ("uid", STR), ("n", NUM), ("labels", _list(STR))),
        spec=_obj(("x", Ref("meta")), ("y", NUM), ("z", choice(lit("true"), lit("false")))),
    ),
    "shared_in_branches": _multi(
        "root",
        root=choice(seq(lit("A:"), Ref("v")), seq(lit("B:"), Ref("v")), seq(lit("C:"), Ref("v"), lit("!"))),
        v=_list(choice(STR, NUM, Ref("w"))),
        w=_obj(("p", STR), ("q", _list(NUM))),
    ),
    "tail_suffixes": _multi(
        "root",
        root=choice(seq(lit("a"), star(AZ), lit(";")), seq(lit("bb"), star(AZ), lit(";")),
                    seq(Ref("r"), opt(seq(lit(","), star(AZ), lit(";"))))),
        r=seq(lit("<"), rep(D, 1, 3), lit(">")),
    ),
    "dead_edges_in_a_rule": _multi(  # the rule's NFA has edges that lead nowhere: the byte classes keep their cuts
        "root",
        root=seq(Ref("r"), lit("|"), Ref("r")),
        r=choice(seq(byteset([(0x40, 0x47)]), ByteSet(())), seq(byteset([(0xF0, 0xF3)]), Choice(())), star(AZ),
                 seq(lit("q"), byteset([(0x21, 0x2F)]), ByteSet(()))),
    ),
    "empty_rule": _multi("root", root=choice(Ref("e"), lit("x"), seq(Ref("e"), lit("y"))),
                         e=seq(lit("zz"), ByteSet(()))),
    "recursive_and_acyclic": _multi(
        "root", max_depth=3,
        root=seq(Ref("t"), lit("/"), Ref("leafy")),
        t=choice(Ref("leafy"), seq(lit("("), Ref("t"), star(seq(lit(","), Ref("t"))), lit(")"))),
        leafy=_obj(("k", STR), ("v", NUM)),
    ),
    "specials_in_a_rule": _multi("root", root=seq(Ref("s"), lit("="), Ref("plain"), Ref("s"), lit(";"), Ref("plain")),
                                 s=choice(seq(Special("<x>"), star(AZ)), lit("x")),
                                 plain=_obj(("k", STR), ("v", NUM))),
    "lone_start": Grammar.single(_obj(("a", STR), ("b", NUM))),
    "wrappers": _multi(  # outer and inner are built once each (inlined); core twice (a rule DFA)
        "root",
        root=seq(lit("<"), Ref("outer"), lit(">")),
        outer=_obj(("w", Ref("inner"))),
        inner=seq(lit("["), Ref("core"), lit("|"), Ref("core"), lit("]")),
        core=_obj(("p", STR), ("q", NUM), ("r", _list(STR))),
    ),
    # the same suffix in several branches, each behind a choice whose 40 branches remember
    # their own suffixes (the C builder's memo grows while a found suffix waits to be used)
    "many_suffixes": Grammar.single(choice(*(seq(choice(*(seq(lit(f"{i}:{j}"), WORD, lit(";")) for j in range(40))),
                                                 SUFFIX, lit("!")) for i in range(3)))),
    "repeated_once_written": _multi("root", root=seq(rep(Ref("item"), 2, 3), opt(Ref("once"))),
                                    item=_obj(("k", STR)), once=_obj(("z", NUM))),
}


def _all_on(monkeypatch) -> None:
    monkeypatch.setattr(A, "RULE_DFAS", True)
    monkeypatch.setattr(A, "RULE_DFAS_ABOVE", 0)
    monkeypatch.setattr(A, "RULE_DFA_MIN", 0)


def _outcome(g: Grammar, monkeypatch, off: bool, **kw):
    """compile_dfa's outcome; ``off``: the NFA built as before (no rule DFA, no shared tail)."""
    monkeypatch.setenv("GD_NO_RULE_DFAS", "1" if off else "0")
    monkeypatch.setenv("GD_NO_SHARED_TAILS", "1" if off else "0")
    try:
        return "ok", A.compile_dfa(g, **kw)
    except (LimitError, GrammarError) as e:
        return type(e), str(e), getattr(e, "limit", None)


def _same(a: A.DFA, b: A.DFA) -> None:
    assert a.specials == b.specials and a.n_classes == b.n_classes
    assert np.array_equal(a.byte_class, b.byte_class)
    assert a.trans.dtype == b.trans.dtype and np.array_equal(a.trans, b.trans)
    assert a.accepting.dtype == b.accepting.dtype and np.array_equal(a.accepting, b.accepting)


def _check(g: Grammar, monkeypatch, **kw) -> None:
    """The same DFA, or the same error.  Where the inlined subset construction went past
    ``SUBSET_STATES_FACTOR * max_states`` states the smaller ones of the rule DFAs may not:
    then the minimal DFA's size is what is refused (the same limit), or it fits."""
    old = _outcome(g, monkeypatch, True, **kw)
    new = _outcome(g, monkeypatch, False, **kw)
    if old[0] != "ok":
        if "its subset construction made more than" in old[1]:
            assert new[0] == "ok" or (new[0], new[2]) == (old[0], old[2])
        else:
            assert new == old
        return
    assert new[0] == "ok"
    _same(new[1], old[1])


@pytest.mark.parametrize("python_nfa", [False, True], ids=["c", "python"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_same_dfa_as_inlined(name, python_nfa, monkeypatch):
    _all_on(monkeypatch)
    monkeypatch.setenv("GD_PYTHON_NFA", "1" if python_nfa else "0")
    _check(GRAMMARS[name], monkeypatch)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_shared_tails_same_dfa(name, monkeypatch):
    """Tails shared without rule DFAs (every grammar the C builder makes: the lazy back-end's
    NFA too) against the NFA built as before (``GD_NO_SHARED_TAILS=1``)."""
    monkeypatch.setenv("GD_NO_RULE_DFAS", "1")
    g = GRAMMARS[name]
    out = []
    for off in ("1", "0"):
        monkeypatch.setenv("GD_NO_SHARED_TAILS", off)
        try:
            out.append(("ok", A.compile_dfa(g)))
        except (LimitError, GrammarError) as e:
            out.append((type(e), str(e)))
    if out[0][0] != "ok":
        assert out[1] == out[0]
    else:
        _same(out[1][1], out[0][1])


def test_shared_tails_make_a_smaller_nfa(monkeypatch):
    g = GRAMMARS["object_of_objects"]
    sizes = []
    for off in ("1", "0"):
        monkeypatch.setenv("GD_NO_SHARED_TAILS", off)
        sizes.append(A.grammar_nfa(g, DEFAULT_LIMITS, A._Deadline(10.0, "t"))[0].n)
    assert sizes[1] < sizes[0] * 0.6


def test_rules_are_chosen(monkeypatch):
    """Callees first; only rules built more than once where they are used (two references, a
    repetition, a reference from a recursive rule); never the start rule, a recursive rule or
    one reaching a special."""
    _all_on(monkeypatch)
    assert A._rule_dfa_names(GRAMMARS["object_of_objects"], DEFAULT_LIMITS) == ["meta", "spec"]
    assert A._rule_dfa_names(GRAMMARS["recursive_and_acyclic"], DEFAULT_LIMITS) == ["leafy"]
    assert A._rule_dfa_names(GRAMMARS["specials_in_a_rule"], DEFAULT_LIMITS) == ["plain"]
    assert A._rule_dfa_names(GRAMMARS["lone_start"], DEFAULT_LIMITS) == []
    # built once where they are used: inlined (a wrapper of one large rule is not determinised twice)
    assert A._rule_dfa_names(GRAMMARS["wrappers"], DEFAULT_LIMITS) == ["core"]
    assert A._rule_dfa_names(GRAMMARS["repeated_once_written"], DEFAULT_LIMITS) == ["item"]
    monkeypatch.setenv("GD_NO_RULE_DFAS", "1")
    assert A._rule_dfa_names(GRAMMARS["object_of_objects"], DEFAULT_LIMITS) == []


def test_off_by_default_and_switches():
    assert not A.RULE_DFAS and A._rule_dfas_off() and A.SHARE_TAILS


def test_env_turns_them_on(monkeypatch):
    monkeypatch.setattr(A, "RULE_DFAS_ABOVE", 0)
    monkeypatch.setattr(A, "RULE_DFA_MIN", 0)
    monkeypatch.setenv("GD_RULE_DFAS", "1")
    assert A._rule_dfa_names(GRAMMARS["object_of_objects"], DEFAULT_LIMITS) == ["meta", "spec"]
    monkeypatch.setenv("GD_NO_RULE_DFAS", "1")
    assert A._rule_dfa_names(GRAMMARS["object_of_objects"], DEFAULT_LIMITS) == []


def test_small_grammars_are_left_alone(monkeypatch):
    monkeypatch.setattr(A, "RULE_DFAS", True)
    g = GRAMMARS["object_of_objects"]
    assert check_size(g).states < A.RULE_DFAS_ABOVE
    assert A._rule_dfa_names(g, DEFAULT_LIMITS) == []


def test_nesting_bound_turns_it_off(monkeypatch):
    """Past max_nesting the rules are inlined as before (the builders report the nesting)."""
    _all_on(monkeypatch)
    g = GRAMMARS["object_of_objects"]
    assert A._rule_dfa_names(g, replace(DEFAULT_LIMITS, max_nesting=2)) == []
    chain = Grammar("r0", tuple((f"r{i}", seq(lit("a"), Ref(f"r{i + 1}"))) for i in range(300)) + (("r300", lit("b")),))
    assert A._rule_dfa_names(chain, DEFAULT_LIMITS) == []
    _check(chain, monkeypatch)


OBJ = GRAMMARS["object_of_objects"]
ACCEPT = [b'{}', b'{"a":{}}', b'{"a":{"name":"x","n":-12}}', b'{"b":{"x":{"uid":""},"z":true}}',
          b'{"a":{},"b":{},"c":[]}', b'{"c":[{},{"labels":["a","b"]}]}', b'{"b":{"y":0,"z":false},"c":[{"n":5}]}',
          b'{"a":{"name":"\xc3\xa9","uid":"1","n":3,"labels":[]},"c":[{"uid":"u"}]}']
REJECT = [b'', b'{', b'{,}', b'{"a":{}', b'{"b":{},"a":{}}', b'{"a":{},}', b'{"c":[{},]}', b'{"a":{"n":01}}',
          b'{"b":{"z":true,"y":0}}', b'{"a":{"name":"x","name":"y"}}', b'{"d":1}', b'{"c":[,]}']


@pytest.mark.parametrize("text", ACCEPT)
def test_accepts(text, monkeypatch):
    _all_on(monkeypatch)
    for off in (False, True):
        assert _outcome(OBJ, monkeypatch, off)[1].accepts(text)


@pytest.mark.parametrize("text", REJECT)
def test_rejects(text, monkeypatch):
    _all_on(monkeypatch)
    for off in (False, True):
        assert not _outcome(OBJ, monkeypatch, off)[1].accepts(text)


@pytest.mark.parametrize("max_states", [1, 5, 20, 60, 150, 400])
def test_dfa_limits_same_outcome(max_states, monkeypatch):
    """A rule whose own DFA is past max_states is inlined; the whole grammar then passes or
    fails as it did (its minimal DFA is what it was)."""
    _all_on(monkeypatch)
    for g in (OBJ, GRAMMARS["shared_in_branches"]):
        _check(g, monkeypatch, max_states=max_states)


def test_nfa_state_limit_is_a_limit_error(monkeypatch):
    _all_on(monkeypatch)
    lim = replace(DEFAULT_LIMITS, max_nfa_states=40)
    for off in (False, True):
        out = _outcome(OBJ, monkeypatch, off, limits=lim, size_checked=True)
        assert out[0] is LimitError and "max_nfa_states" in out[1]


def test_deadline_raises(monkeypatch):
    _all_on(monkeypatch)
    monkeypatch.setenv("GD_NO_RULE_DFAS", "0")
    with pytest.raises(LimitError, match="max_compile_seconds"):
        A.compile_dfa(OBJ, limits=replace(DEFAULT_LIMITS, max_compile_seconds=0.0))


def test_rule_estimates_read_the_last_check():
    g = GRAMMARS["shared_in_branches"]
    total = check_size(g)
    est = rule_estimates(g)
    assert est[g.start] == total
    assert set(est) == {"root", "v", "w"}
    assert rule_estimates(g) is est  # (remembered)
    g2 = Grammar(g.start, g.rules, g.max_depth)
    assert rule_estimates(g2) == est  # made when there was no check


def test_plain_nodes_as_their_minimal_dfas(monkeypatch):
    """Every registered plain node the C builder embeds as its minimal DFA: the same DFA as the
    node built as it is, and fewer NFA states."""
    from decoding.frontends.jsonschema import compile_schema
    from decoding.ir.nodes import plain_nodes
    compile_schema({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"},
                                                     "i": {"type": "integer"}}})
    _, _, at, _, leaves = A._plain_program_leafy()
    assert leaves, "a JSON string character has a smaller minimal DFA than NFA"
    replaced = 0
    for x in plain_nodes():
        if x.__class__ not in (Seq, Choice, Repeat):
            continue
        g = Grammar.single(x)
        outs = []
        for off in ("1", "0"):
            monkeypatch.setenv("GD_NO_SHARED_TAILS", off)
            outs.append(A.compile_dfa(g))
        _same(outs[1], outs[0])
        lf = A._plain_leaf(x)
        if lf is not None:
            replaced += 1
            monkeypatch.setenv("GD_NO_SHARED_TAILS", "1")
            old = A.grammar_nfa(g, DEFAULT_LIMITS, A._Deadline(10.0, "t"))[0].n
            monkeypatch.setenv("GD_NO_SHARED_TAILS", "0")
            assert A.grammar_nfa(g, DEFAULT_LIMITS, A._Deadline(10.0, "t"))[0].n < old
    assert replaced == len(leaves)


# ----------------------------------------------------------------------------- corpora

def _schemas(split: str, k: int) -> list[tuple[str, object]]:
    files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
    return [(f"{split}/{f.name}", json.loads(f.read_text(encoding="utf-8"))["schema"])
            for f in files[::max(1, len(files) // k)][:k]]


SAMPLES = [x for split, k in (("Kubernetes", 14), ("Glaiveai2K", 12), ("Snowplow", 8), ("Github_easy", 8))
           if (CORPORA / "jsonschemabench" / split).is_dir() for x in _schemas(split, k)]
KUBERNETES_LARGE = ["kb_449_Normalized.json", "kb_667_Normalized.json"]


@pytest.mark.skipif(not SAMPLES, reason="../shared/corpora/jsonschemabench not present")
@pytest.mark.parametrize("rule_dfas", [False, True], ids=["tails", "tails+rule_dfas"])
@pytest.mark.parametrize("name, schema", SAMPLES, ids=[n for n, _ in SAMPLES])
def test_corpus_same_dfa(name, schema, rule_dfas, monkeypatch):
    from decoding.frontends.jsonschema import compile_schema
    if rule_dfas:
        _all_on(monkeypatch)
    try:
        g = compile_schema(schema).grammar
        if check_size(g).states > 100_000:
            pytest.skip("sent to the lazy or pushdown back-end")
    except (DecodingError, RecursionError):
        pytest.skip("the front-end refuses it")
    _check(g, monkeypatch, size_checked=True)


@pytest.mark.parametrize("name", KUBERNETES_LARGE)
def test_large_kubernetes_same_dfa_at_the_default_thresholds(name, monkeypatch):
    from decoding.frontends.jsonschema import compile_schema
    path = CORPORA / "jsonschemabench" / "Kubernetes" / name
    if not path.exists():
        pytest.skip("corpus not present")
    monkeypatch.setattr(A, "RULE_DFAS", True)
    g = compile_schema(json.loads(path.read_text())["schema"]).grammar
    assert check_size(g).states >= A.RULE_DFAS_ABOVE
    assert len(A._rule_dfa_names(g, DEFAULT_LIMITS)) >= 5
    _check(g, monkeypatch, size_checked=True)


# ----------------------------------------------------------------------------- minimize_live

@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 5), st.integers(0, 2**32 - 1), st.floats(0.0, 1.0))
def test_minimize_live_flag(n, nsym, seed, density):
    rng = np.random.default_rng(seed)
    trans = np.where(rng.random((n, nsym)) < density, rng.integers(0, n, (n, nsym)), -1).astype(np.int32)
    acc = (rng.random(n) < 0.3).astype(np.uint8)
    k, _, _ = _native.dfa_trim(trans.reshape(-1), nsym, acc, None)
    reach = A._bfs(trans, np.array([0]))
    live_all = bool(np.all(A._bfs(trans, np.nonzero(acc)[0], reverse=True) >= 0)) if acc.any() else False
    res = _native.dfa_minimize_table(trans.reshape(-1), nsym, acc, 1.0, True)
    plain = _native.dfa_minimize_table(trans.reshape(-1), nsym, acc, 1.0)
    assert res[:3] == plain
    assert res[3] == live_all
    if np.all(reach >= 0):  # every state reachable: live means trimmed
        assert res[3] == (k == n)


def test_threads_build_the_same_dfas():
    """Compiles in threads at once (the native builds release the GIL; the plain leaves and
    their arrays are process-wide caches) make the DFAs a serial compile makes."""
    from concurrent.futures import ThreadPoolExecutor
    gs = [g for g in GRAMMARS.values()] * 3
    serial = []
    for g in gs:
        try:
            serial.append(A.compile_dfa(g))
        except (LimitError, GrammarError) as e:
            serial.append(type(e))
    def one(g):
        try:
            return A.compile_dfa(g)
        except (LimitError, GrammarError) as e:
            return type(e)
    with ThreadPoolExecutor(4) as ex:
        par = list(ex.map(one, gs))
    for a, b in zip(serial, par):
        if isinstance(a, A.DFA):
            _same(b, a)
        else:
            assert a is b
