"""Pushdown back-end compile (issue 14): the rules' automata built from one serialised
program (``_RuleBuilder``) are those :func:`compile_dfa` makes rule by rule (the reference
path, still taken where the C builder declines): the same minimal DFAs up to the numbering
of states and the order of the special columns, the same rules kept, the same errors."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from decoding.backends.pushdown import index as pdi
from decoding.backends.pushdown.index import compile_pushdown
from decoding.errors import GrammarError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Choice, Grammar, Ref, Special, byteset, lit, rep, seq

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "jsonschemabench"


def _reference(monkeypatch, fn):
    """``fn()`` with every rule built by compile_dfa (the reference path)."""
    with monkeypatch.context() as m:
        m.setattr(pdi._RuleBuilder, "usable", staticmethod(lambda: False))
        return fn()


def _same_dfa(a, b) -> None:
    """``a`` and ``b`` are one automaton: a bijection of states from the starts that keeps
    acceptance, every byte's move and every special's move (specials matched by text)."""
    assert a.n_states == b.n_states
    fa, fb = a.full_table(), b.full_table()
    sa = {sp: a.trans[:, a.n_classes + k] for k, sp in enumerate(a.specials)}
    sb = {sp: b.trans[:, b.n_classes + k] for k, sp in enumerate(b.specials)}
    pair = {0: 0}
    todo = deque([0])
    while todo:
        s = todo.popleft()
        t = pair[s]
        assert bool(a.accepting[s]) == bool(b.accepting[t])
        moves = list(zip(fa[s].tolist(), fb[t].tolist()))
        for sp in set(sa) | set(sb):
            moves.append((int(sa[sp][s]) if sp in sa else -1, int(sb[sp][t]) if sp in sb else -1))
        for x, y in moves:
            assert (x < 0) == (y < 0)
            if x < 0:
                continue
            if x in pair:
                assert pair[x] == y
            else:
                pair[x] = y
                todo.append(x)
    assert len(pair) == a.n_states and len(set(pair.values())) == b.n_states


def _same_pushdown(p, q, g: Grammar) -> None:
    """The same rules (a Ref-free rule named by the first of the rules with its body, in
    the order the calls were found: named here by the least of them), automata and calls."""
    same = pdi._SameBody()
    first: dict[int, str] = {}
    for name, body in sorted(g.rules):
        k = same.key(body)
        if k is not None:
            first.setdefault(k, name)

    def canon(name: str) -> str:
        k = same.key(g.rule(name))
        return name if k is None else first[k]
    assert sorted(map(canon, p.names)) == sorted(map(canon, q.names)) and p.names[0] == q.names[0]
    assert p.n_states == q.n_states and p.specials == q.specials
    qi = {canon(n): i for i, n in enumerate(q.names)}
    for i, name in enumerate(p.names):
        a, b = p.dfas[i], q.dfas[qi[canon(name)]]
        _same_dfa(a, b)

        def calls(d, cols, names):  # call -> the callee (canonical name), special -> index
            out = {}
            for c, (kind, k) in enumerate(cols):
                if (d.trans[:, d.n_classes + c] >= 0).any():
                    out[canon(d.specials[c][len(pdi.CALL):]) if kind == "call" else d.specials[c]] = \
                        (kind, canon(names[k]) if kind == "call" and k >= 0 else k)
            return out
        assert calls(a, p.cols[i], p.names) == calls(b, q.cols[qi[canon(name)]], q.names)


def _corpus(split: str, names: list[str]) -> list[Grammar]:
    out = []
    for n in names:
        f = CORPORA / split / f"{n}_Normalized.json"
        if f.exists():
            out.append(compile_schema(json.loads(f.read_text())["schema"]).grammar)
    return out


VALUE = Grammar("v", (
    ("v", Choice((Ref("obj"), Ref("arr"), Ref("str"), lit("null")))),
    ("obj", seq(lit("{"), rep(seq(Ref("str"), lit(":"), Ref("v"), lit(",")), 0, 3), lit("}"))),
    ("arr", seq(lit("["), Ref("v"), rep(seq(lit(","), Ref("v")), 0, None), lit("]"))),
    ("str", seq(lit('"'), rep(byteset([(97, 122)]), 0, 30), lit('"'))),
    ("str2", seq(lit('"'), rep(byteset([(97, 122)]), 0, 30), lit('"'))),  # unreachable
), max_depth=4)


@pytest.mark.parametrize("g", [VALUE], ids=["value"])
def test_same_automata_as_compile_dfa(monkeypatch, g):
    _same_pushdown(compile_pushdown(g), _reference(monkeypatch, lambda: compile_pushdown(g)), g)


def test_same_automata_as_compile_dfa_corpus(monkeypatch):
    gs = _corpus("Kubernetes", ["kb_192", "kb_208"]) + _corpus("Snowplow", ["sp_30"])
    if not gs:
        pytest.skip("corpora not found")
    for g in gs:
        usable = [b != 0x7F for b in range(256)]  # (prunes too)
        _same_pushdown(compile_pushdown(g, usable_bytes=usable),
                       _reference(monkeypatch, lambda: compile_pushdown(g, usable_bytes=usable)), g)


def test_unproductive_and_empty_rules(monkeypatch):
    g = Grammar("s", (
        ("s", Choice((Ref("a"), Ref("b"), seq(lit("x"), Ref("c"))))),
        ("a", seq(lit("a"), Choice(()))),  # accepts nothing
        ("b", seq(lit("b"), Ref("b"))),  # only recurses: not productive
        ("c", Choice((lit("c"), seq(lit("("), Ref("c"), lit(")"))))),
    ))
    p = compile_pushdown(g)
    _same_pushdown(p, _reference(monkeypatch, lambda: compile_pushdown(g)), g)
    assert set(p.names) == {"s", "c"}


def test_specials_and_literal_specials(monkeypatch):
    g = Grammar("s", (("s", seq(Special("<a>"), Ref("t"), Special("<b>"))),
                      ("t", Choice((lit("t"), seq(Special("<b>"), Ref("t")))))))
    for literal in ((), ("<b>",)):  # literal specials: compile_dfa builds the rules
        _same_pushdown(compile_pushdown(g, literal_specials=literal),
                       _reference(monkeypatch, lambda: compile_pushdown(g, literal_specials=literal)), g)


def test_same_errors(monkeypatch):
    big = Grammar("s", (("s", seq(lit("["), Ref("t"), lit("]"))),
                        ("t", seq(lit('"'), rep(byteset([(97, 122)]), 0, 300), lit('"')))))
    for kw in ({"max_rule_states": 50}, {"max_rule_states": 10**6}):
        def run(kw=kw):
            try:
                compile_pushdown(big, **kw)
            except (LimitError, GrammarError) as e:
                return type(e), str(e), getattr(e, "limit", None)
            return None
        assert run() == _reference(monkeypatch, run)
    with pytest.raises(LimitError, match="max_states=50 DFA states"):
        compile_pushdown(big, max_rule_states=50)


def test_fast_path_taken(monkeypatch):
    """The JSON Schema grammars take the one-program path (never compile_dfa) on the native
    pipeline (set here: under ``GD_PURE_PYTHON_DFA=1`` the reference pipeline is the point)."""
    monkeypatch.delenv("GD_PURE_PYTHON_DFA", raising=False)
    calls = []
    orig = pdi.compile_dfa
    try:
        pdi.compile_dfa = lambda *a, **k: calls.append(1) or orig(*a, **k)
        compile_pushdown(VALUE)
    finally:
        pdi.compile_dfa = orig
    assert not calls


def test_separated_loops_of_many_rules(monkeypatch):
    """Each rule's ``x ("," x)*`` is serialised as a record made for it (no IR node): the
    one program keeps those alive while it names them, so a later rule's loop is not taken
    for an earlier one's (their ids would be reused)."""
    rules = [("s", seq(lit("{"), Choice(tuple(Ref(f"a{i}") for i in range(30))), lit("}")))]
    for i in range(30):  # (a separated loop of calls: ``x`` is a Ref)
        x = Ref(f"x{i}")
        rules.append((f"a{i}", seq(lit("["), x, rep(seq(lit(","), x), 0, None), lit("]"))))
        rules.append((f"x{i}", seq(lit(f"x{i}"), rep(byteset([(97, 97 + i % 26)]), 1, 3))))
    g = Grammar("s", tuple(rules))
    _same_pushdown(compile_pushdown(g), _reference(monkeypatch, lambda: compile_pushdown(g)), g)


def test_program_names_only_live_records():
    """Every id the one program's offsets are keyed by is that of a live IR node or of a
    record the builder keeps (a freed record's id could be another's later)."""
    from decoding.ir.nodes import children, plain_nodes
    from decoding.limits import DEFAULT_LIMITS
    rules = [("s", seq(lit("{"), Choice(tuple(Ref(f"a{i}") for i in range(5))), lit("}")))]
    for i in range(5):
        x = Ref(f"x{i}")
        rules.append((f"a{i}", seq(lit("["), x, rep(seq(lit(","), x), 0, None), lit("]"))))
        rules.append((f"x{i}", lit(f"x{i}")))
    g = Grammar("s", tuple(rules))
    b = pdi._RuleBuilder(g, DEFAULT_LIMITS, 1000)
    for name, body in g.rules:
        assert b.build(name, body, 10.0) not in (None, NotImplemented)
    live = {id(x) for x in plain_nodes()} | {id(x) for x in b._keep}
    todo = [body for _, body in g.rules]
    while todo:
        n = todo.pop()
        if id(n) not in live:
            live.add(id(n))
            todo.extend(children(n))
    assert set(b.at) <= live
    assert len(b._keep) == 5  # (the five loops)
