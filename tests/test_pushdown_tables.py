"""Pushdown back-end's compact compile-time data: rule bodies with calls mapped once for all
rules (the IR's sharing kept, the same automata as mapping each rule's tree), mask-walk
tables over each rule's byte classes refined by its exit sets (the 256-column tables with
equal columns merged), and walk memos interned in a mask table."""

from __future__ import annotations

import numpy as np
import pytest

from decoding.backends.automaton import compile_dfa
from decoding.backends.pushdown.index import CALL, _Calls, compile_pushdown
from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Choice, Grammar, Lit, Node, Ref, Repeat, Seq, Special, map_leaves
from decoding.runtime.matcher import Matcher
from tests.conftest import get_vocab
from tests.test_pushdown import FREE_SCHEMA, GRAMMARS, TINY


def _as_calls(n: Node) -> Node:
    return Special(CALL + n.name) if isinstance(n, Ref) else n


def test_calls_body_is_map_leaves_keeping_sharing():
    free = Seq((Lit(b"x"), Repeat(Lit(b"y"))))  # no Ref: kept as it is
    held = Seq((Lit(b"("), Ref("b"), Lit(b")")))  # shared by both rules: mapped once
    a = Choice((free, held, Seq((held, Ref("a")))))
    b = Seq((free, Repeat(held, 0, 1)))
    calls = _Calls()
    ma, mb = calls.body(a), calls.body(b)
    assert ma == map_leaves(a, _as_calls) and mb == map_leaves(b, _as_calls)
    assert ma.items[0] is free and mb.items[0] is free
    assert ma.items[1] is ma.items[2].items[0] is mb.items[1].item
    assert calls.body(free) is free


def _walk(cp, vocab, *, seed: int, walks: int, steps: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(walks):
        m = Matcher(cp)
        for _step in range(steps):
            ids = [t for t in m.allowed_ids().tolist() if t not in vocab.eog_ids]
            if not ids:
                break
            assert m.advance(int(ids[rng.integers(len(ids))]))


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_rule_automata_as_with_each_rule_mapped(name):
    """Each rule's automaton is the one of its own tree with calls as specials."""
    g = GRAMMARS[name]
    pd = compile_pushdown(g)
    for rule, d in zip(pd.names, pd.dfas):
        ref = compile_dfa(Grammar(rule, ((rule, map_leaves(g.rule(rule), _as_calls)),), g.max_depth))
        assert d.specials == ref.specials and np.array_equal(d.trans, ref.trans)
        assert np.array_equal(d.byte_class, ref.byte_class) and np.array_equal(d.accepting, ref.accepting)


def _check_tables(cp) -> int:
    """Every mask-walk table of ``cp`` is the 256-column table (each byte its DFA class's
    moves into live states; over: exit bytes to the sink) read through the rule's columns."""
    t = cp._t
    for (r, sid), (loc, over) in cp._tabs.items():
        d = cp.pushdown.dfas[r]
        n = d.n_states
        full = d.full_table()
        ref = np.full((n + 1, 256), -1, dtype=np.int64)
        ref[:n] = full
        live = cp._live_for(sid)
        if live is not None:
            lv = np.array(live[r] + [False], dtype=bool)
            ref[:n] = np.where((full >= 0) & lv[np.maximum(full, 0)] & lv[:n, None], full, -1)
        ref_over = np.concatenate([ref, ref[:n]])  # then the start rows: no exit at the first byte
        ref_over[n] = n
        for s, ex in t.exit[r].items():
            ref_over[s, [b for b in range(256) if ex >> b & 1]] = n
        cls = t.classes(r)[0]
        assert loc.dtype == np.int16 and over.dtype == np.int16  # (the states fit)
        assert np.array_equal(loc[:, cls], ref) and np.array_equal(over[:, cls], ref_over)
    return len(cp._tabs)


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_rule_tables_merge_equal_byte_columns(name):
    cp = compile_grammar(GRAMMARS[name], TINY, backend="pushdown")
    cp.native_walk = False  # the Python tables (saturated sets; the native walks' reference)
    _walk(cp, TINY, seed=1, walks=20, steps=40)
    assert _check_tables(cp) >= 1


def test_rule_tables_llama_bpe_and_sparse_walk_memos():
    """A JSON schema with free-form values on the 128k vocabulary: the tables as above, and
    the walk memos take far less than two dense masks per walk."""
    v = get_vocab("llama-bpe")
    cp = compile_grammar(compile_schema(FREE_SCHEMA, free_depth=2).grammar, v, backend="pushdown")
    cp.native_walk = False  # the Python tables (saturated sets; the native walks' reference)
    _walk(cp, v, seed=2, walks=10, steps=150)
    assert _check_tables(cp) >= 2
    assert any(len(cp._t.classes(r)[1]) < 64 for r, _ in cp._tabs)  # far fewer columns than bytes
    assert len(cp._walks) >= 10
    assert cp._walk_masks.nbytes * 4 < len(cp._walks) * 2 * cp.n_words * 4


def _live_reference(t, forbidden) -> list[list[bool]]:
    """Liveness by a worklist over the reverse byte and call edges (the definition)."""
    live = [list(f) for f in t.fin]
    work = [(r, s) for r, f in enumerate(t.fin) for s, x in enumerate(f) if x]
    rev = t.rev()
    while work:
        r, tt = work.pop()
        off, src = rev[r]
        back = [(r, s) for s in src[off[tt]:off[tt + 1]].tolist()]
        back += [(r, s) for s, x in t.rev_c[r].get(tt, ()) if x not in forbidden and live[x][0]]
        if tt == 0 and r not in forbidden:  # the calls of r whose return is live
            back += [(q, s) for q, s, t2 in t.calls_to[r] if live[q][t2]]
        for q, s in back:
            if not live[q][s]:
                live[q][s] = True
                work.append((q, s))
    return live


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_live_states_are_the_least_fixpoint(name):
    cp = compile_grammar(GRAMMARS[name], TINY, backend="pushdown")
    t = cp._t
    n = len(cp.pushdown.dfas)
    for forbidden in [frozenset(), *(frozenset({r}) for r in range(n)), frozenset(range(n))]:
        assert t.live(forbidden) == _live_reference(t, forbidden), forbidden
