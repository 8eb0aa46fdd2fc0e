"""Large bounded repetitions on the pushdown back-end (decoding/backends/pushdown/repeats.py):
split into helper rules that count in binary on the stack, with the language of the unrolled
DFA, the same masks, walks that validate, few stacks, and the Snowplow schemas that were over
the limits compiled."""

from __future__ import annotations

import json

import numpy as np
import pytest

from decoding.backends.automaton import DFA, compile_dfa
from decoding.backends.pushdown import repeats
from decoding.backends.pushdown.repeats import split_repeats
from decoding.backends.select import compile_grammar
from decoding.errors import LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import ByteSet, Choice, Grammar, Lit, Ref, Repeat, Seq
from decoding.ir.size import node_size
from decoding.testing import random_walk
from tests.conftest import get_vocab
from tests.test_pushdown import _same_masks_along_walks

# a JSON-like string character: a prefix code (disjoint first bytes), a 2-byte UTF-8 sequence
CH = Choice((ByteSet(((0x20, 0x21), (0x23, 0x5b), (0x5d, 0x7e))), Lit(b'\\"'), Lit(b"\\\\"),
             Seq((ByteSet(((0xc2, 0xdf),)), ByteSet(((0x80, 0xbf),))))))
#: test thresholds: split above 50 estimated states, leaves of 16 copies
ABOVE = 50
BLOCK = 16 * node_size(CH)


def _quoted(lo: int, hi: int | None, close: object = Lit(b'"')) -> Grammar:
    return Grammar.single(Seq((Lit(b'"'), Repeat(CH, lo, hi), close)))  # type: ignore[arg-type]


def _equivalent(a: DFA, b: DFA) -> bool:
    """The two byte DFAs accept the same strings (product breadth-first search; -1: dead)."""
    pairs = sorted({(int(a.byte_class[x]), int(b.byte_class[x])) for x in range(256)})
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        s, t = todo.pop()
        if bool(s >= 0 and a.accepting[s]) != bool(t >= 0 and b.accepting[t]):
            return False
        for ca, cb in pairs:
            nxt = (int(a.trans[s, ca]) if s >= 0 else -1, int(b.trans[t, cb]) if t >= 0 else -1)
            if nxt != (-1, -1) and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return True


def _text(n: int, seed: int) -> bytes:
    """``n`` characters of CH, mixed (ASCII, escapes, 2-byte UTF-8)."""
    rng = np.random.default_rng(seed)
    pool = [b"a", b"Z", b" ", b'\\"', b"\\\\", "é".encode(), b"~"]
    return b"".join(pool[i] for i in rng.integers(len(pool), size=n))


@pytest.fixture
def small_thresholds(monkeypatch):
    """The pushdown back-end splits at the test thresholds."""
    monkeypatch.setattr(repeats, "SPLIT_ABOVE", ABOVE)
    monkeypatch.setattr(repeats, "BLOCK_STATES", BLOCK)


@pytest.fixture
def json_thresholds(monkeypatch):
    """JSON strings (a character: 72 estimated states) split past 300 characters, into
    leaves of 256 (a token crosses leaves every 256 characters: each crossing is checked
    exactly, at the leaf's last characters most tokens are candidates, so small leaves make
    walks slow)."""
    monkeypatch.setattr(repeats, "SPLIT_ABOVE", 72 * 300)
    monkeypatch.setattr(repeats, "BLOCK_STATES", 72 * 256)


# ----------------------------------------------------------------------------- the rewrite

BOUNDS = [(0, 200), (3, 201), (0, 15), (0, 16), (0, 17), (1, 9), (16, 16), (100, 100), (37, 38), (5, None),
          (40, None), (100, 1000), (0, 255), (0, 256), (511, 1024), (0, 1023)]


@pytest.mark.parametrize("lo, hi", BOUNDS)
@pytest.mark.parametrize("close", ["lit", "set"])
def test_split_same_language_as_unrolled(lo, hi, close):
    """The split grammar's DFA (refs inlined) is equivalent to the unrolled one, with the
    closing item folded into the helpers (a literal) or left in the caller (a byte set)."""
    g = _quoted(lo, hi, Lit(b'"') if close == "lit" else ByteSet(((0x22, 0x22),)))
    s = split_repeats(g, above=ABOVE, block=BLOCK)
    assert s is not g
    if (hi or 0) - lo > 16:
        assert any("<x0*0.." in n for n in s.names)  # counted by helpers, not inline
    assert _equivalent(compile_dfa(g), compile_dfa(s))


@pytest.mark.parametrize("lo, hi", [(0, 200), (3, 201), (16, 16), (37, 38), (5, None), (100, 1000), (511, 1024)])
def test_pushdown_boundaries(lo, hi, small_thresholds):
    """Texts of lengths around ``lo`` and ``hi`` are accepted by the pushdown back-end
    exactly as by the unrolled DFA (and as the bounds say)."""
    g = _quoted(lo, hi)
    pd = compile_grammar(g, get_vocab("llama-bpe"), backend="pushdown")
    assert any("<x0*" in n for n in pd.pushdown.names) or hi is None
    dfa = compile_dfa(g)
    top = hi if hi is not None else lo + 40
    for n in sorted({max(0, lo - 1), lo, lo + 1, (lo + top) // 2, top - 1, top, top + 1}):
        for seed in range(2):
            t = b'"' + _text(n, seed + n) + b'"'
            want = lo <= n and (hi is None or n <= hi)
            assert dfa.accepts(t) is want, n
            assert pd.accepts(t) is want, n
            assert not pd.accepts(t[:-1])  # unterminated
            assert not pd.accepts(t + b'"')


def test_names_deterministic_distinct_and_idempotent():
    taken = "root<x0*16>"  # the name the 16-copy leaf would get
    body = Seq((Lit(b'"'), Repeat(CH, 0, 5000), Lit(b'"'), Ref(taken)))

    def make() -> Grammar:
        return Grammar("root", (("root", body), (taken, Seq((Lit(b'"'), Repeat(CH, 2, 3000), Lit(b'"'))))))

    a, b = (split_repeats(make(), above=ABOVE, block=BLOCK) for _ in range(2))
    assert a.names == b.names
    assert [str(x) for _, x in a.rules] == [str(x) for _, x in b.rules]
    new = [n for n in a.names if n not in ("root", taken)]
    assert new and all(n.startswith("root<x0*") for n in new)  # one item: its helpers shared
    assert taken + "'" in new  # the taken name got a prime
    assert split_repeats(a, above=ABOVE, block=BLOCK) is a  # nothing left to split
    assert a.max_depth == make().max_depth
    # no helper refers to itself, through others either
    for n in new:
        todo, seen = list(a.rule_refs(n)), set()
        while todo:
            r = todo.pop()
            assert r != n
            if r not in seen:
                seen.add(r)
                todo.extend(a.rule_refs(r))


@pytest.mark.parametrize("body", [
    Seq((Lit(b'"'), Repeat(CH, 0, 3), Lit(b'"'))),  # small
    Seq((Lit(b'"'), Repeat(Repeat(CH, 0, 2), 0, 5000), Lit(b'"'))),  # nullable item
    Seq((Lit(b'"'), Repeat(Choice((Lit(b"a"), Lit(b"ab"))), 0, 5000), Lit(b'"'))),  # not a prefix code
    Seq((Lit(b'"'), Repeat(CH, 0, 5000), Repeat(CH, 0, 5000), Lit(b'"'))),  # copies may follow
    Seq((Repeat(CH, 0, 5000), Lit(b'"'))),  # where it starts is not known here
    Seq((Lit(b'"'), Repeat(CH, 0, 5000), Repeat(Lit(b"!"), 0, 1), Lit(b'"'))),  # nullable next
    Seq((Lit(b"["), Repeat(Seq((Lit(b","), Ref("v"))), 0, 5000), Lit(b"]"))),  # holds a Ref
])
def test_left_alone(body):
    """Small, or where copies could be read more than one way (the stacks would multiply)."""
    g = Grammar("root", (("root", body), ("v", Lit(b"1"))))
    assert split_repeats(g, above=ABOVE, block=BLOCK) is g
    assert split_repeats(g) is g


# ----------------------------------------------------------------------------- masks and walks

SCALED = {"type": "object", "properties": {
    "a": {"type": "string", "maxLength": 1200},
    "b": {"type": "string", "minLength": 3, "maxLength": 900},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 200}},
    "required": ["a", "b"]}


def test_same_masks_as_dfa_llama_bpe(json_thresholds):
    """Split at small thresholds, the pushdown back-end gives the unrolled DFA's masks at
    every step of random walks on the 128k llama-bpe vocabulary."""
    v = get_vocab("llama-bpe")
    g = compile_schema(SCALED).grammar
    cg = compile_grammar(g, v, backend="dfa")
    pd = compile_grammar(g, v, backend="pushdown")
    assert sum("<x" in n for n in pd.pushdown.names) >= 4
    assert _same_masks_along_walks(cg, pd, seed=5, walks=12, max_steps=400) > 1000


RECURSIVE = {"$defs": {"node": {"type": "object", "properties": {
    "text": {"type": "string", "maxLength": 100000},
    "name": {"type": "string", "minLength": 3, "maxLength": 70000},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5000},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 20000}},
    "required": ["name"]}}, "$ref": "#/$defs/node"}


@pytest.mark.parametrize("extra", [0, 5, 40])
def test_recursive_schema_budgeted_walks_validate(extra):
    """The default thresholds: a $ref-recursive object with strings of maxLength 100000 and
    70000 and an array of 5000 strings compiles on the pushdown back-end with helper rules;
    walks within completion_cost + extra tokens never meet an empty mask and validate."""
    import jsonschema
    v = get_vocab("llama-bpe")
    pd = compile_grammar(compile_schema(RECURSIVE).grammar, v, backend="pushdown")
    names = pd.pushdown.names
    assert any("<x" in n and "*0..100000" in n for n in names)  # maxLength 100000
    assert any("*3..70000" in n for n in names)  # minLength 3 maxLength 70000
    assert pd.pushdown.n_states < 150_000
    rng = np.random.default_rng(extra)
    budget = pd.completion_cost(0) + extra
    for _ in range(6):
        w = random_walk(pd, rng, budget=budget, max_steps=budget + 2)
        assert w.finished and len(w.tokens) <= budget
        jsonschema.validate(json.loads(w.text), RECURSIVE)


def test_recursive_schema_walks_validate(json_thresholds):
    """Scaled down and split at small thresholds: unbudgeted walks finish, validate, and
    the mask is never empty."""
    import jsonschema
    schema = json.loads(json.dumps(RECURSIVE).replace("100000", "1200").replace("70000", "900")
                        .replace("5000", "60").replace("20000", "40"))
    pd = compile_grammar(compile_schema(schema).grammar, get_vocab("llama-bpe"), backend="pushdown")
    assert sum("<x" in n for n in pd.pushdown.names) >= 4
    rng = np.random.default_rng(3)
    done = 0
    for _ in range(12):
        w = random_walk(pd, rng, max_steps=1000)
        if w.finished:
            jsonschema.validate(json.loads(w.text), schema)
            done += 1
    assert done >= 4


def test_default_thresholds_boundaries_and_cost():
    """A string of minLength 1500 and maxLength 5000 (split by default): lengths around the
    bounds as the unrolled DFA says; completion_cost is the fewest bytes."""
    schema = {"type": "string", "minLength": 1500, "maxLength": 5000}
    g = compile_schema(schema).grammar
    assert split_repeats(g) is not g
    pd = compile_grammar(g, get_vocab("llama-bpe"), backend="pushdown")
    dfa = compile_dfa(g)
    for n in (1499, 1500, 1501, 3000, 4999, 5000, 5001):
        t = b'"' + _text(n, n) + b'"'
        assert pd.accepts(t) is dfa.accepts(t) is (1500 <= n <= 5000), n
    assert pd.completion_cost(0) == 1502


def test_stacks_stay_few_in_a_long_string():
    """Inside a string of maxLength 1,000,000 a configuration holds O(log n) stacks."""
    g = compile_schema({"type": "string", "maxLength": 1_000_000}).grammar
    pd = compile_grammar(g, get_vocab("llama-bpe"), backend="pushdown")
    cfg = pd._run(b'"', pd._configs[0])
    most = 0
    for k in range(8):
        cfg = pd._run(_text(700, k), cfg)
        assert cfg
        most = max(most, len(pd._closure(cfg)))
    assert most <= 48
    assert pd._accepting_cfg(pd._run(b'"', cfg))


# ----------------------------------------------------------------------------- Snowplow

@pytest.mark.parametrize("name", ["sp_204", "sp_328", "sp_400"])
def test_snowplow_over_the_limits_compiles(name, monkeypatch):
    """Formerly a LimitError in the spec-faithful mode (evals/conformance/run.py): compiled,
    every valid instance accepted, every invalid one rejected."""
    from evals.conformance import run
    path = run.BENCH_DIR / "Snowplow" / f"{name}_Normalized.json"
    if not path.exists():
        pytest.skip("JSONSchemaBench is not in ../shared")
    data = json.loads(path.read_text())
    rec = run.check_schema(data["schema"], data["tests"], timeout=120.0, options=run.BENCH_OPTIONS)
    assert rec["status"] == "compiled", rec
    assert rec["backend"] == "pushdown"
    assert rec["valid_accepted"] == rec["valid"] and rec["invalid_accepted"] == 0
    monkeypatch.setattr(repeats, "SPLIT_ABOVE", 10 ** 12)  # not split: over the limits again
    g = compile_schema(data["schema"], **run.BENCH_OPTIONS).grammar
    with pytest.raises(LimitError):
        compile_grammar(g, run.vocab(), max_states=run.MAX_STATES, backend="pushdown")
