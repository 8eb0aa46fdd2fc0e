"""The counted back-end keeps one table (decoding.backends.counted.CountedGrammar): the mask
automaton's, plus the own rows of the states with an ``<en>`` move and the marker moves as
lists.  Checked here: ``cg.dfa`` rebuilds exactly the marker automaton the grammar was built
from; no second table is kept; and stepping over the one table takes the same path as the
reference stepping over the marker automaton (the algorithm as it was written before the
tables were merged), byte by byte, on words near and across the bounds and on random bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from decoding.backends import counted
from decoding.backends.automaton import DFA, compile_dfa
from decoding.backends.counted import CountedGrammar, window
from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, byteset, lit, rep, seq
from test_counted import GRAMMARS, TINY, _words

COUNTED = [n for n, (_, k) in GRAMMARS.items() if k]


def _marker_dfa(g: Grammar) -> DFA:
    """The marker automaton as compile_counted builds it (no products in these grammars)."""
    g2, loops, products = counted.rewrite_products(g, window(TINY))
    assert loops and not products
    markers = {t for lp in loops for t in (lp.en, lp.tp)}
    literal = [t for t in g2.specials() if t not in markers and TINY.special_token(t) is None]
    return compile_dfa(g2, literal_specials=literal).prune(TINY.single_byte_tokens())


def _run_ref(cg: CountedGrammar, d: DFA, s: int, c: int, data: bytes) -> tuple[int, int] | None:
    """The stepping of :meth:`CountedGrammar._run` over the marker automaton's own rows."""
    ncls = d.n_classes
    col = {t: j for j, t in enumerate(d.specials)}
    for b in data:
        cb = int(d.byte_class[b])
        for lp in cg.loops:
            if lp.en in col and d.trans[s, ncls + col[lp.en]] >= 0 and d.trans[s, cb] < 0:
                s, c = int(d.trans[s, ncls + col[lp.en]]), 0
                break
        for lp in cg.loops:
            if lp.tp in col and d.trans[s, ncls + col[lp.tp]] >= 0 and b in lp.first:
                if c == lp.x:
                    s, c = int(d.trans[s, ncls + col[lp.tp]]), 0
                else:
                    c += 1
                break
        s = int(d.trans[s, cb])
        if s < 0:
            return None
        if c and cg._mid[s] < 0:
            c = 0
    return s, c


@pytest.mark.parametrize("name", COUNTED)
def test_dfa_rebuilds_the_marker_automaton(name):
    g, _ = GRAMMARS[name]
    cg = compile_grammar(g, TINY, backend="counted")
    d, r = _marker_dfa(g), cg.dfa
    assert r.specials == d.specials and r.n_classes == d.n_classes
    assert np.array_equal(r.byte_class, d.byte_class)
    assert r.trans.dtype == d.trans.dtype and np.array_equal(r.trans, d.trans)
    assert np.array_equal(r.accepting, d.accepting)


@pytest.mark.parametrize("name", COUNTED)
def test_one_table_is_kept(name):
    cg = compile_grammar(GRAMMARS[name][0], TINY, backend="counted")
    n = cg.inner.dfa.n_states
    big = [k for k, v in vars(cg).items() if isinstance(v, DFA)
           or (isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[0] == n)]
    assert big == []
    assert len(cg._own) == len({s for s, t in enumerate(cg._en) if t >= 0})


@pytest.mark.parametrize("name", COUNTED)
def test_stepping_over_one_table_is_the_marker_stepping(name):
    g, _ = GRAMMARS[name]
    cg = compile_grammar(g, TINY, backend="counted")
    d = cg.dfa
    rng = np.random.default_rng(7)
    words = _words(g, 30, seed=5)
    alphabet = b'"abcx,[]0123\xc3\xa9'
    words += [bytes(rng.choice(list(alphabet), size=int(rng.integers(1, 40)))) for _ in range(200)]
    for w in words:
        for i in range(len(w) + 1):  # every prefix: the state after it, then the rest from there
            assert cg._run(0, 0, w[:i]) == _run_ref(cg, d, 0, 0, w[:i]), (w, i)
        assert cg.accepts(w) == (lambda r: r is not None and bool(cg._acc[r[0]]))(_run_ref(cg, d, 0, 0, w))


def test_a_large_counted_schema_keeps_one_table():
    """A counted JSON schema of two strings: the grammar's arrays hold one table of the
    automaton's size (the mask automaton's), and the rebuilt marker automaton steps alike."""
    from conftest import get_vocab

    v = get_vocab("llama-bpe")
    s = {"type": "string", "maxLength": 400}
    schema = {"type": "object", "properties": {"a": s, "b": s}, "additionalProperties": False}
    cg = compile_grammar(compile_schema(schema).grammar, v)
    assert cg.backend == "counted"
    n = cg.inner.dfa.n_states
    assert not any(isinstance(x, DFA) for x in vars(cg).values())
    assert sum(x.nbytes for x in vars(cg).values() if isinstance(x, np.ndarray) and x.ndim == 2) == 0
    d = cg.dfa
    assert d.n_states == n and d.trans.shape[1] == d.n_classes + len(d.specials)
    text = b'{"a":"' + b"x" * 399 + b'","b":"' + "\u00e9".encode() * 10 + b'"}'
    for i in range(0, len(text) + 1, 7):
        assert cg._run(0, 0, text[:i]) == _run_ref(cg, d, 0, 0, text[:i])
    assert cg.accepts(text) and not cg.accepts(text.replace(b"x" * 399, b"x" * 401))


def test_a_byte_that_continues_the_prefix_is_stepped_on_the_own_row():
    """``x [0-3]*`` before a counted ``[a-c]{0,20}``: in the states with the ``<en>`` move a
    digit continues the prefix (own row) and a letter enters the middle (merged row); the
    counter starts at the first letter whatever digits came before."""
    a_c = byteset([(ord("a"), ord("c"))])
    g = Grammar.single(seq(lit("x"), rep(byteset([(ord("0"), ord("3"))]), 0, None), rep(a_c, 0, 20), lit("x")))
    cg = compile_grammar(g, TINY, backend="counted")
    assert isinstance(cg, CountedGrammar) and cg._own
    assert any(any(o != m for o, m in zip(row, cg._trans[s])) for s, row in cg._own.items())
    oracle = compile_grammar(g, TINY, backend="dfa")
    words = [b"x" + b"0123"[: k % 5] + b"abc" * (k // 3) + b"a" * (k % 3) + b"x" for k in range(26)]
    words += [w.replace(b"x", b"x12", 1) for w in words]
    assert any(oracle.accepts(w) for w in words) and not all(oracle.accepts(w) for w in words)
    for w in words:
        assert cg.accepts(w) == oracle.accepts(w), w
