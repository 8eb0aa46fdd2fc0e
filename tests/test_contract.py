"""The back-end contract (decoding.backends.contract): the SAME checks on every back-end, on a
tiny hand-built vocabulary (every token checked) and on the real llama-bpe vocabulary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import get_vocab
from decoding.backends.contract import COST_UNREACHABLE, EOG, FORBIDDEN, CompiledGrammar
from decoding.backends.select import compile_grammar
from decoding.backends.tables import vocab_tables
from decoding.errors import DecodingError, ProcessorError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Grammar, Ref, Special, choice, lit, opt, seq, star
from decoding.runtime.budget import BudgetMatcher
from decoding.runtime.matcher import Matcher
from decoding.testing import random_walk
from decoding.vocab import Vocab

BACKENDS = ["dfa", "lazy", "pushdown"]
COMMON_STATS = {"backend", "states", "distinct_masks", "mask_bytes", "vocab", "fingerprint"}

TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in b"1[],()<>xyz+/dps"], b"[[", b"]]", b"],", b"[1", b"1]",
                         b",[", b"()", b"(<", b">)", b"<d>", b"</d>", b"<p/>", b"<ps>", b"</ps>", b"<p", b"/>",
                         b"</", b""], eog_ids=[0], special={"<|call|>": 34})

GRAMMARS = {
    "nest": Grammar("v", (("v", choice(lit("1"), seq(lit("["), opt(seq(Ref("v"), star(seq(lit(","), Ref("v"))))),
                                                     lit("]")))),), max_depth=3),
    "mutual": Grammar("a", (("a", seq(lit("("), opt(Ref("b")), lit(")"))),
                            ("b", seq(lit("<"), opt(Ref("a")), lit(">")))), max_depth=2),
    "prefixes": Grammar("doc", (("doc", seq(lit("<d>"), star(choice(Ref("p"), Ref("ps"))), lit("</d>"))),
                                ("p", lit("<p/>")), ("ps", seq(lit("<ps>"), opt(Ref("p")), lit("</ps>")))),
                        max_depth=2),
    "special": Grammar("s", (("s", seq(lit("x"), star(seq(Special("<|call|>"), lit("(y)")))),),)),
}
CASES = {
    "nest": ([b"1", b"[]", b"[1,[1,[]]]", b"[[[[]]]]"], [b"", b"[", b"[1,]", b"[[[[[]]]]]", b"11"]),
    "mutual": ([b"()", b"(<()>)", b"(<(<>)>)"], [b"(", b"(<)>", b"(<(<(<>)>)>)", b"()()"]),
    "prefixes": ([b"<d></d>", b"<d><p/><ps><p/></ps></d>"], [b"<d>", b"<d><ps><ps></ps></ps></d>", b"<d><p></d>"]),
    "special": ([b"x"], [b"", b"xx", b"x(y)"]),  # specials are not text: accepts() never sees them
}

FREE_SCHEMA = {"type": "object",
               "properties": {"name": {"type": "string", "maxLength": 6}, "meta": {},
                              "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3}},
               "required": ["name", "meta"]}


def _tiny(name: str, backend: str) -> CompiledGrammar:
    return compile_grammar(GRAMMARS[name], TINY, backend=backend)


_real: dict = {}


def _llama(backend: str) -> CompiledGrammar:
    if backend not in _real:
        g = compile_schema(FREE_SCHEMA, free_depth=2).grammar
        _real[backend] = compile_grammar(g, get_vocab("llama-bpe"), backend=backend)
    return _real[backend]


def _bit(m: np.ndarray, t: int) -> bool:
    return bool((int(m[t >> 5]) >> (t & 31)) & 1)


def _visited_states(cg: CompiledGrammar, seed: int, walks: int, steps: int) -> list[int]:
    """States met along ``walks`` uniform random token walks (the start first)."""
    rng = np.random.default_rng(seed)
    seen = [0]
    for _ in range(walks):
        m = Matcher(cg)
        for _ in range(steps):
            ids = m.allowed_ids()
            assert len(ids), "empty mask"
            m.advance(int(ids[rng.integers(len(ids))]))
            if m.finished:
                break
            if m.state not in seen:
                seen.append(m.state)
    return seen


def _check_state(cg: CompiledGrammar, s: int, tokens) -> None:
    """mask / allowed_ids / next_state / EOG / costs agree in state ``s`` for ``tokens``."""
    m = cg.mask(s)
    assert m.dtype == np.uint32 and m.shape == (cg.n_words,) and not m.flags.writeable
    ids = cg.allowed_ids(s)
    assert not ids.flags.writeable and np.all(np.diff(ids) > 0)
    bits = np.unpackbits(m.view(np.uint8), bitorder="little")
    assert np.array_equal(ids, np.flatnonzero(bits[:cg.vocab.n_tokens])) and not bits[cg.vocab.n_tokens:].any()
    acc = cg.is_accepting(s)
    assert acc or len(ids), f"empty mask in non-accepting state {s}"
    for t in cg.vocab.eog_ids:
        assert _bit(m, t) == acc  # end-of-generation exactly in accepting states
        assert cg.next_state(s, t) == (EOG if acc else FORBIDDEN)
    for t in tokens:
        ns = cg.next_state(s, int(t))
        assert (ns != FORBIDDEN) == _bit(m, int(t)), (s, t)
        if ns >= 0:
            assert cg.completion_cost(ns) < COST_UNREACHABLE  # live: can still finish
    c = cg.completion_cost(s)
    assert (c == 0) == acc  # nothing left to write exactly where the output may end
    sids, costs = cg.successor_costs(s)
    assert np.array_equal(sids, ids)
    text = costs[costs != EOG]
    # every back-end's is exact today: the DFA's read from its budget table, the others'
    # computed from successor_costs
    assert cg.worst_successor_cost(s) == (int(text.max()) if len(text) else 0)
    if c > 0:
        assert len(text) and int(text.min()) <= c - 1  # some token brings the end closer
    for t, cost in zip(sids.tolist()[:64], costs.tolist()[:64]):
        ns = cg.next_state(s, t)
        if ns == EOG:
            assert cost == EOG
        else:
            assert cost >= cg.completion_cost(ns)


# ----------------------------------------------------------------------------- tiny vocabulary

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_accepts_and_rejects(name, backend):
    cg = _tiny(name, backend)
    good, bad = CASES[name]
    assert all(cg.accepts(x) for x in good), [x for x in good if not cg.accepts(x)]
    assert not any(cg.accepts(x) for x in bad), [x for x in bad if cg.accepts(x)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_protocol_backend_and_stats(name, backend):
    cg = _tiny(name, backend)
    assert isinstance(cg, CompiledGrammar)
    assert cg.backend == backend
    assert cg.precompute() is cg
    st = cg.stats()
    assert COMMON_STATS <= set(st) and st["backend"] == backend
    assert st["vocab"] == TINY.name and st["fingerprint"] == TINY.fingerprint
    assert st["distinct_masks"] >= 1 and isinstance(st["mask_bytes"], int) and st["mask_bytes"] >= 0  # sparse: 4 per id
    json.dumps(st)
    json.dumps(cg.meta)  # plain data only


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_mask_next_state_eog_and_costs_every_token(name, backend):
    cg = _tiny(name, backend)
    for s in _visited_states(cg, seed=1, walks=30, steps=40):
        _check_state(cg, s, range(TINY.n_tokens))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_random_walks_never_dead_end_and_are_accepted(name, backend):
    cg = _tiny(name, backend)
    rng = np.random.default_rng(2)
    done = 0
    for _ in range(50):
        w = random_walk(cg, rng, max_steps=200)
        if w.finished:
            done += 1
            if not cg.special_token_ids:
                assert cg.accepts(w.text)
    assert done >= 25


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_forced_bytes_agree_between_backends(name):
    a, b = _tiny(name, "dfa"), _tiny(name, "pushdown")
    rng = np.random.default_rng(3)
    forced = 0
    for _ in range(30):
        ma, mb = Matcher(a), Matcher(b)
        for _ in range(40):
            fa = ma.forced_bytes()
            assert fa == mb.forced_bytes()
            forced += len(fa)
            ids = ma.allowed_ids()
            assert np.array_equal(ids, mb.allowed_ids())
            t = int(ids[rng.integers(len(ids))])
            assert ma.advance(t) and mb.advance(t)
            if ma.finished:
                break
    assert forced > 0
    if name == "prefixes":
        assert a.forced_bytes(0) == b.forced_bytes(0) == b"<d><"  # then <p/>, <ps> or </d>


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(GRAMMARS))
@pytest.mark.parametrize("extra", [0, 1, 4])
def test_budgeted_walks_finish_within_max_tokens(name, backend, extra):
    cg = _tiny(name, backend)
    budget = cg.completion_cost(0) + extra
    rng = np.random.default_rng(extra)
    for _ in range(25):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished and len(w.tokens) <= budget


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_costs_on_the_dfa_bounds_on_pushdown(backend):
    """The DFA's cost is the fewest tokens ("<d>" "</d>"), and the lazy DFA's (its automaton
    made explicit on the first budget query); pushdown counts bytes (an upper bound: every
    byte is a token of its own)."""
    cg = _tiny("prefixes", backend)
    exact = _tiny("prefixes", "dfa").completion_cost(0)
    assert exact == 2  # "<d>" "</d>"
    assert cg.completion_cost(0) == (2 if backend in ("dfa", "lazy") else len(b"<d></d>"))


def _reference_budget(cg) -> tuple[np.ndarray, np.ndarray]:
    """(min_tokens, worst_successor) as shortest paths over ``successors()``, state by state."""
    n = cg.dfa.n_states
    succ = {}
    todo, seen = [0], {0}
    while todo:
        s = todo.pop()
        _, nxt = cg.successors(s)
        succ[s] = sorted(set(int(t) for t in nxt if t >= 0))
        for t in succ[s]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    dist = np.full(n, COST_UNREACHABLE, dtype=np.int64)
    dist[np.nonzero(cg.dfa.accepting)[0]] = 0
    changed = True
    while changed:
        changed = False
        for s, ts in succ.items():
            best = min((dist[t] + 1 for t in ts if dist[t] != COST_UNREACHABLE), default=None)
            if best is not None and (dist[s] == COST_UNREACHABLE or best < dist[s]):
                dist[s], changed = best, True
    worst = np.zeros(n, dtype=np.int64)
    for s, ts in succ.items():
        if ts:
            worst[s] = max(int(dist[t]) for t in ts)
    return dist.astype(np.int32), worst.astype(np.int32)


@pytest.mark.parametrize("name", [*sorted(GRAMMARS), "llama-bpe"])
def test_the_dfa_budget_table_is_shortest_paths_over_successors(name):
    cg = _llama("dfa") if name == "llama-bpe" else _tiny(name, "dfa")
    mt, worst = _reference_budget(cg)
    bt = cg.budget_table()
    assert np.array_equal(bt.min_tokens, mt) and np.array_equal(bt.worst_successor, worst)


SUCCESSOR_SCHEMAS = {
    "free": FREE_SCHEMA,
    "strings": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "maxLength": 40},
                                                 "c": {"type": "string", "minLength": 3, "maxLength": 9},
                                                 "d": {"type": "string", "pattern": "^[a-z]+$"},
                                                 "e": {"enum": ["x\u00e9y", "z"]}}, "required": ["a"]},
    "nested": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}, "n": {"type": "integer"}},
                                           "required": ["k"]}, "maxItems": 3},
    # keys of a map: any name but the declared ones (a state per declared prefix: "near" a chain)
    "map": {"type": "object", "properties": {"alpha": {"type": "integer"}, "beta_x": {"type": "string"}},
            "additionalProperties": {"type": "string"}},
}


@pytest.mark.parametrize("vocab", ["llama-bpe", "gemma-4"])
def test_profile_first_bytes_and_char_counts(vocab):
    """A profile's plain tokens' first bytes and distinct character counts, as their bytes say."""
    v = get_vocab(vocab)
    prof = vocab_tables(v).profile("json-string")
    ids = np.flatnonzero(prof.n_chars > 0)
    assert np.array_equal(np.flatnonzero(prof.first_bytes), sorted({v.token_bytes[i][0] for i in ids}))
    assert np.array_equal(prof.char_counts, np.unique(prof.n_chars[ids]))


@pytest.mark.parametrize("vocab", ["llama-bpe", "gemma-4"])
@pytest.mark.parametrize("schema", sorted(SUCCESSOR_SCHEMAS))
def test_successor_states_are_the_successors_states(schema, vocab):
    """``DFAGrammar.successor_states`` (the chain of a string body read for the plain tokens,
    only the other tokens walked) gives, in every state, exactly the distinct states of
    ``successors`` (one walk of every token)."""
    cg = compile_grammar(compile_schema(SUCCESSOR_SCHEMAS[schema]).grammar, get_vocab(vocab), backend="dfa")
    chained = near = 0
    tabs = vocab_tables(cg.vocab)
    for s in range(cg.dfa.n_states):
        _, nxt = cg.successors(s)
        assert np.array_equal(cg.successor_states(s), np.unique(nxt[nxt >= 0])), s
        chained += cg._loop_profiles and cg._plain_chain(cg._loop_profiles[0], s) not in (None, 0)
        a = int(cg._table[s, cg._classes[0x61]])
        near += a >= 0 and a != s and cg._near_chain(s, a, tabs, np.zeros(cg.dfa.n_states, dtype=bool)) is not None
    assert chained  # (the shortcut was taken somewhere)
    assert near or schema != "map"  # (and the near-chain one on the map's keys)


def test_successor_states_from_threads():
    """Threads reading a map's near-chain states at once (each writes the scratch rows of its
    own widened table) get every state's successors right."""
    import threading
    cg = compile_grammar(compile_schema(SUCCESSOR_SCHEMAS["map"]).grammar, get_vocab("llama-bpe"), backend="dfa")
    want = {}
    for s in range(cg.dfa.n_states):
        _, nxt = cg.successors(s)
        want[s] = np.unique(nxt[nxt >= 0])
    bad: list = []

    def run(order):
        for s in order:
            if not np.array_equal(cg.successor_states(s), want[s]):
                bad.append(s)
        cg._drop_wide()
    states = list(range(cg.dfa.n_states)) * 3
    ts = [threading.Thread(target=run, args=(states[k::4],)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad and not cg._wide_tables


def test_successor_states_on_a_chain_of_period_two():
    """A string body of an even number of characters: plain characters cycle through two
    states, so a plain token of ``m`` characters ends in the one ``m`` is even or odd for."""
    from decoding.frontends.jsonschema.jsonstr import any_json_char
    c = any_json_char()
    g = Grammar("s", (("s", seq(lit('"'), star(seq(c, c)), lit('"'))),))
    cg = compile_grammar(g, get_vocab("llama-bpe"), backend="dfa")
    periodic = 0
    for s in range(cg.dfa.n_states):
        _, nxt = cg.successors(s)
        got = cg.successor_states(s)
        assert np.array_equal(got, np.unique(nxt[nxt >= 0])), s
        periodic += cg._plain_chain("json-string", s) not in (None, 0) and len(got) >= 2
    assert periodic


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_successor_states_on_hand_grammars(name):
    """The same on the hand-built vocabulary's grammars (a special token among them)."""
    cg = _tiny(name, "dfa")
    for s in range(cg.dfa.n_states):
        _, nxt = cg.successors(s)
        assert np.array_equal(cg.successor_states(s), np.unique(nxt[nxt >= 0])), s


@pytest.mark.parametrize("schema", ["long_string", "counted_strings"])
def test_counted_costs_with_successor_states(schema, monkeypatch):
    """The counted back-end's costs read ``successor_states`` where no token is filtered; the
    same costs as with the distinct states of ``successors`` everywhere."""
    from conftest import HAND_SCHEMAS
    v = get_vocab("llama-bpe")
    g = compile_schema(HAND_SCHEMAS[schema]).grammar
    new = compile_grammar(g, v, backend="counted")
    old = compile_grammar(g, v, backend="counted")

    def reference(s, bufs=None):
        _, nxt = old.inner.successors(s)
        return np.unique(nxt[nxt >= 0]).astype(np.int32)
    monkeypatch.setattr(old.inner, "successor_states", reference)
    assert np.array_equal(new._compute_costs(), old._compute_costs())


def test_lazy_costs_are_the_move_bound_above_the_exact_cap(monkeypatch):
    """Past ``EXACT_BUDGET_STATES`` the lazy DFA's budgets stay its fewest moves (bytes)."""
    from decoding.backends.dfa import lazy as lazy_mod
    monkeypatch.setattr(lazy_mod, "EXACT_BUDGET_STATES", 1)
    cg = _tiny("prefixes", "lazy")
    assert cg.completion_cost(0) == len(b"<d></d>")
    ids, costs = cg.successor_costs(0)
    assert len(ids) and (costs >= 0).all()


# ----------------------------------------------------------------------------- real vocabulary

@pytest.mark.parametrize("backend", BACKENDS)
def test_real_vocab_contract(backend):
    cg = _llama(backend)
    assert isinstance(cg, CompiledGrammar) and cg.backend == backend
    assert COMMON_STATS <= set(cg.stats())
    good = [b'{"name":"ab","meta":{}}', b'{"name":"","meta":[1,{"a":null}],"tags":["x"]}']
    bad = [b'{"name":"abcdefg","meta":1}', b'{"meta":1}', b'{"name":"a","meta":1,"tags":["xxxxx"]}']
    assert all(cg.accepts(x) for x in good) and not any(cg.accepts(x) for x in bad)
    rng = np.random.default_rng(4)
    for s in _visited_states(cg, seed=4, walks=4, steps=60)[:25]:
        ids = cg.allowed_ids(s)
        sample = np.concatenate([rng.choice(ids, min(len(ids), 100), replace=False),
                                 rng.integers(0, cg.vocab.n_tokens, 100)])
        _check_state(cg, s, sample)


def test_real_vocab_backends_agree():
    a, b = _llama("dfa"), _llama("pushdown")
    rng = np.random.default_rng(6)
    for _ in range(10):
        ma, mb = Matcher(a), Matcher(b)
        for _ in range(200):
            assert np.array_equal(ma.mask(), mb.mask())
            assert ma.forced_bytes() == mb.forced_bytes()
            ids = ma.allowed_ids()
            t = int(ids[rng.integers(len(ids))])
            assert ma.advance(t) and mb.advance(t)
            if ma.finished:
                break


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("extra", [0, 5])
def test_real_vocab_budgeted_walks(backend, extra):
    cg = _llama(backend)
    budget = cg.completion_cost(0) + extra
    rng = np.random.default_rng(10 + extra)
    for _ in range(6):
        w = random_walk(cg, rng, budget=budget, max_steps=budget + 1)
        assert w.finished and len(w.tokens) <= budget
        assert cg.accepts(w.text)
        json.loads(w.text)


# ----------------------------------------------------------------------------- runtime over the contract

class _Broken:
    """Delegates to a real compiled grammar but raises inside ``mask`` after ``ok`` calls."""

    def __init__(self, cg: CompiledGrammar, ok: int) -> None:
        self._cg, self._ok = cg, ok
        self.vocab, self.n_words = cg.vocab, cg.n_words

    def __getattr__(self, name):
        return getattr(self._cg, name)

    def mask(self, state: int) -> np.ndarray:
        self._ok -= 1
        if self._ok < 0:
            raise DecodingError("broken back-end: mask failed")
        return self._cg.mask(state)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matcher_sticky_error(backend):
    cg = _tiny("nest", backend)
    m = Matcher(_Broken(cg, ok=1))  # type: ignore[arg-type]
    assert _bit(m.mask(), 2)  # "[" allowed (the one mask that works)
    assert m.advance(2) and m.error is None  # moves do not need the mask
    em = m.mask()  # raises inside the back-end: recorded, not propagated
    assert isinstance(m.error, DecodingError)
    assert [t for t in range(TINY.n_tokens) if _bit(em, t)] == [0]  # only end-of-generation
    assert m.allowed_ids().tolist() == [0]
    assert not m.advance(2) and m.advance(0) and m.finished and not m.is_accepting()
    with pytest.raises(ProcessorError, match="mask failed"):
        m.raise_if_failed()
    m.reset()
    assert m.error is None
    m.raise_if_failed()


def test_budget_matcher_is_one_class_for_both_backends():
    for backend in BACKENDS:
        bm = BudgetMatcher(_tiny("nest", backend), 3)
        assert type(bm) is BudgetMatcher
