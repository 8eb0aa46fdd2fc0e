"""Pushdown back-end: same language and same token masks as the explicit DFA where both
exist; grammars too large for one DFA (deep free-form JSON, the whole hibernate-mapping
DTD) generate only valid output, never dead-end, and close within a budget."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import ArtifactError, GrammarError, LimitError
from decoding.backends.select import compile_grammar
from decoding.ir import EMPTY, Grammar, Ref, Special, choice, lit, opt, seq, star
from decoding.runtime.matcher import Matcher
from decoding.backends.pushdown.index import compile_pushdown
from decoding.frontends.jsonschema import compile_schema
from decoding.testing import random_walk
from decoding.vocab import Vocab
from tests.conftest import get_vocab
from tests.xml_helpers import random_walk_bytes

# ----------------------------------------------------------------------------- grammars

NEST = Grammar("v", (("v", choice(lit("1"), seq(lit("["), opt(seq(Ref("v"), star(seq(lit(","), Ref("v"))))),
                                              lit("]")))),), max_depth=3)
MUTUAL = Grammar("a", (("a", seq(lit("("), opt(Ref("b")), lit(")"))),
                       ("b", seq(lit("<"), opt(Ref("a")), lit(">")))), max_depth=2)
NULLABLE = Grammar("r", (("r", seq(Ref("e"), lit("x"), Ref("e"))),
                         ("e", choice(EMPTY, lit("y"), seq(lit("("), Ref("r"), lit(")"))))), max_depth=2)
LEFT = Grammar("a", (("a", choice(lit("z"), seq(Ref("a"), lit("+z")))),), max_depth=4)
PREFIXES = Grammar("doc", (("doc", seq(lit("<d>"), star(choice(Ref("p"), Ref("ps"))), lit("</d>"))),
                           ("p", lit("<p/>")), ("ps", seq(lit("<ps>"), opt(Ref("p")), lit("</ps>")))),
                   max_depth=2)
GRAMMARS = {"nest": NEST, "mutual": MUTUAL, "nullable": NULLABLE, "left": LEFT, "prefixes": PREFIXES}


@pytest.mark.parametrize("name, text, ok", [
    ("nest", b"1", True), ("nest", b"[]", True), ("nest", b"[1,[1,[]]]", True),
    ("nest", b"[[[[]]]]", True),  # the start rule plus 3 nested expansions (max_depth=3)
    ("nest", b"[[[[[]]]]]", False),  # a 4th nested expansion
    ("nest", b"[[[1]]]", True), ("nest", b"[1,]", False), ("nest", b"[", False),
    ("mutual", b"()", True), ("mutual", b"(<()>)", True), ("mutual", b"(<(<>)>)", True),
    ("mutual", b"(<(<(<>)>)>)", False), ("mutual", b"(<)>", False),
    ("nullable", b"x", True), ("nullable", b"yxy", True), ("nullable", b"(x)x", True),
    ("nullable", b"(yx)x(x)", True), ("nullable", b"yy", False), ("nullable", b"", False),
    ("left", b"z", True), ("left", b"z+z+z+z+z", True), ("left", b"z+z+z+z+z+z", False),
    ("left", b"+z", False),
    ("prefixes", b"<d><p/><ps><p/></ps></d>", True), ("prefixes", b"<d><ps></ps><p/></d>", True),
    ("prefixes", b"<d><ps><ps></ps></ps></d>", False), ("prefixes", b"<d><p></d>", False),
])
def test_accepts(name, text, ok):
    g = GRAMMARS[name]
    pd = compile_grammar(g, TINY, backend="pushdown")
    assert pd.backend == "pushdown"
    assert pd.accepts(text) is ok
    assert compile_dfa(g).accepts(text) is ok  # the same language as the explicit DFA


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_language_as_dfa(name):
    """DFA random walks, their prefixes and one-byte edits: both back-ends agree."""
    g = GRAMMARS[name]
    dfa = compile_dfa(g)
    pd = compile_grammar(g, TINY, backend="pushdown")
    rng = random.Random(7)
    alphabet = sorted({b for t in TINY.token_bytes for b in t})
    checked = 0
    for _ in range(150):
        w = random_walk_bytes(dfa, rng, stop_prob=0.2, max_len=40)
        cands = [w, w[:-1], w + bytes([rng.choice(alphabet)])]
        if w:
            i = rng.randrange(len(w))
            cands += [w[:i] + w[i + 1:], w[:i] + bytes([rng.choice(alphabet)]) + w[i + 1:]]
        for c in cands:
            assert pd.accepts(c) == dfa.accepts(c), c
            checked += 1
    assert checked >= 600


TINY = Vocab.from_bytes([b"", *[bytes([c]) for c in b"1[],()<>xyz+/dps"], b"[[", b"]]", b"],", b"[1", b"1]",
                         b",[", b"()", b"(<", b">)", b"z+", b"+z", b"<d>", b"</d>", b"<p/>", b"<ps>",
                         b"</ps>", b"<p", b"/>", b"</", b"yx", b"xy", b")x", b"x("], eog_ids=[0])


def _ids(m) -> set[int]:
    return {int(i) for i in m.allowed_ids()}


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_same_masks_as_dfa_tiny_vocab(name):
    """At every step of random token walks the two back-ends allow exactly the same tokens."""
    g = GRAMMARS[name]
    cg = compile_grammar(g, TINY, backend="dfa")
    pd = compile_grammar(g, TINY, backend="pushdown")
    rng = np.random.default_rng(3)
    for _ in range(60):
        a, b = Matcher(cg), Matcher(pd)
        for _step in range(60):
            ids = _ids(a)
            assert ids == _ids(b)
            assert a.is_accepting() == b.is_accepting()
            t = int(rng.choice(sorted(ids)))
            assert a.advance(t) and b.advance(t)
            if a.finished:
                break


# ----------------------------------------------------------------------------- real vocabularies

FREE_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "meta": {},
                                                "tags": {"type": "array", "items": {"type": "string", "maxLength": 4},
                                                         "maxItems": 3}},
               "required": ["name", "meta"]}


def _same_masks_along_walks(x, y, *, seed: int, walks: int, max_steps: int) -> int:
    """Random token walks (tokens drawn from ``x``'s mask) on which ``x`` and ``y`` give the
    same mask at every step and both accept every token; the number of steps taken."""
    rng = np.random.default_rng(seed)
    steps = 0
    for _ in range(walks):
        a, b = Matcher(x), Matcher(y)
        for _step in range(max_steps):
            assert np.array_equal(a.mask(), b.mask()), (steps, b.state)
            ids = a.allowed_ids()
            t = int(ids[rng.integers(len(ids))])
            assert a.advance(t) and b.advance(t)
            steps += 1
            if a.finished:
                break
    return steps


def test_same_masks_as_dfa_llama_bpe():
    """A schema small enough for both back-ends (free-form values 2 levels deep): identical
    masks along 40 random walks on the 128k llama-bpe vocabulary."""
    v = get_vocab("llama-bpe")
    g = compile_schema(FREE_SCHEMA, free_depth=2).grammar
    cg = compile_grammar(g, v, backend="dfa")
    pd = compile_grammar(g, v, backend="pushdown")
    assert _same_masks_along_walks(cg, pd, seed=5, walks=40, max_steps=300) > 400


def test_plain_text_shortcut_gives_the_full_walk_masks():
    """Pushdown string bodies use the plain-text shortcut (decoding/backends/textloop.py)
    on the rule tables: the masks equal those of whole-trie walks along random walks."""
    v = get_vocab("llama-bpe")
    g = compile_schema(FREE_SCHEMA, free_depth=2).grammar
    fast = compile_grammar(g, v, backend="pushdown")
    full = compile_grammar(g, v, backend="pushdown")
    full._loop_profiles = ()
    assert _same_masks_along_walks(fast, full, seed=11, walks=20, max_steps=200) > 200
    assert any(fast._plain_chain(n, fast._tables(r, sid)[0], s) is not None
               for (r, s, sid) in fast._walks for n in fast._loop_profiles)  # the shortcut was taken


@pytest.mark.parametrize("vocab", ["llama-bpe", "gemma-4"])
def test_deep_free_values_walks_validate(vocab):
    """free_depth=16 is far beyond one explicit DFA; auto picks the pushdown back-end and
    every finished walk validates with jsonschema; the mask is never empty."""
    import jsonschema
    v = get_vocab(vocab)
    g = compile_schema(FREE_SCHEMA, free_depth=16).grammar
    with pytest.raises(LimitError):
        compile_grammar(g, v, backend="dfa", max_states=50_000)
    pd = compile_grammar(g, v)
    assert pd.backend == "pushdown"
    rng = np.random.default_rng(11)
    done = deepest = 0
    for _ in range(60):
        w = random_walk(pd, rng, max_steps=4000)
        if not w.finished:
            continue  # a uniform walk inside a free-form string rarely draws the closing quote
        inst = json.loads(w.text)
        jsonschema.validate(inst, FREE_SCHEMA)
        deepest = max(deepest, _depth(inst))
        done += 1
    assert done >= 20 and deepest >= 2


def _depth(x) -> int:
    if isinstance(x, dict):
        return 1 + max((_depth(v) for v in x.values()), default=0)
    if isinstance(x, list):
        return 1 + max((_depth(v) for v in x), default=0)
    return 0


def test_deep_instances_accepted():
    g = compile_schema(FREE_SCHEMA, free_depth=16).grammar
    pd = compile_grammar(g, get_vocab("llama-bpe"))
    deep: object = 1
    for i in range(15):
        deep = [deep] if i % 2 else {"k": deep}
    ok = {"name": "a", "meta": deep}
    assert pd.accepts(json.dumps(ok, separators=(",", ":")).encode())
    too_deep = {"name": "a", "meta": [deep, [[deep]]]}
    assert not pd.accepts(json.dumps(too_deep, separators=(",", ":")).encode())
    assert not pd.accepts(b'{"name":"a","meta":[1,}')


@pytest.mark.parametrize("extra", [0, 2, 7, 20])
def test_budget_closes(extra):
    """max_tokens = completion_cost(0) (fewest bytes) + extra: every walk ends complete and valid within the budget."""
    import jsonschema
    v = get_vocab("llama-bpe")
    pd = compile_grammar(compile_schema(FREE_SCHEMA, free_depth=16).grammar, v)
    budget = pd.completion_cost(0) + extra
    rng = np.random.default_rng(extra)
    for _ in range(8):
        w = random_walk(pd, rng, budget=budget, max_steps=budget + 2)
        assert w.finished and len(w.tokens) <= budget
        jsonschema.validate(json.loads(w.text), FREE_SCHEMA)


def test_budget_too_small_is_an_error():
    from decoding.runtime.budget import BudgetMatcher
    pd = compile_grammar(compile_schema(FREE_SCHEMA, free_depth=16).grammar, get_vocab("llama-bpe"))
    with pytest.raises(GrammarError, match="too small"):
        BudgetMatcher(pd, pd.completion_cost(0) - 1)


def test_backend_errors(tmp_path):
    with pytest.raises(GrammarError, match="backend"):
        compile_grammar(NEST, TINY, backend="lr1")
    pd = compile_grammar(NEST, TINY, backend="pushdown")
    from decoding.artifacts.format import write_artifact
    with pytest.raises(ArtifactError, match="pushdown"):
        write_artifact(pd, tmp_path / "x.gdart")
    assert compile_grammar(NEST, TINY).backend == "dfa"  # small: auto keeps the DFA


def test_unproductive_rule_removed():
    """A rule that can only recurse (no finite derivation) is dropped with its calls."""
    g = Grammar("r", (("r", choice(lit("a"), Ref("loop"))), ("loop", seq(lit("("), Ref("loop"), lit(")")))))
    pd = compile_pushdown(g)
    assert pd.names == ("r",)
    with pytest.raises(GrammarError):
        compile_pushdown(Grammar("loop", (("loop", seq(lit("("), Ref("loop"), lit(")"))),)))


def test_unusable_bytes_pruned():
    """Paths through bytes no single token spells are pruned as in the DFA back-end (so a
    walk can never get stuck on them)."""
    v = Vocab.from_bytes([b"", b"[", b"]", b"1", b"2x"], eog_ids=[0])
    g = Grammar("v", (("v", choice(lit("1"), lit("2x"), seq(lit("["), opt(Ref("v")), lit("]")))),))
    pd = compile_grammar(g, v, backend="pushdown")
    cg = compile_grammar(g, v, backend="dfa")
    for text in (b"[1]", b"[[]]", b"2x", b"[2x]"):
        assert pd.accepts(text) == cg.accepts(text) == (b"2" not in text)


def test_smollm2_hibernate_generation_valid(smollm2):
    """End to end with the real SmolLM2-135M: the whole hibernate-mapping DTD (pushdown
    back-end) as logits processor, budget-closed within max_tokens, DTD-valid for lxml."""
    import lxml.etree as ET

    from decoding.compiler import Compiler
    from decoding.frontends.xml.dtd import parse_dtd
    from decoding.runtime.generate import generate
    from decoding.frontends.xml.grammar import dtd_grammar
    from tests.xml_helpers import DTD_DIR
    d = parse_dtd((DTD_DIR / "hibernate-mapping-3.0.dtd").read_text(encoding="utf-8"))
    cg = Compiler(smollm2).compile_ir(dtd_grammar(d, "hibernate-mapping", max_depth=2))
    assert cg.backend == "pushdown"
    validator = ET.DTD(str(DTD_DIR / "hibernate-mapping-3.0.dtd"))
    for seed, cls in enumerate(["User with an id and a name", "Order with an id and a set of items"]):
        msgs = [{"role": "user", "content": f"Write a Hibernate XML mapping for the Java class {cls}."}]
        g = generate(smollm2, cg, messages=msgs, max_tokens=120, seed=seed)
        assert g.complete and g.n_tokens <= 120, g.text
        validator.validate(ET.fromstring(g.text.encode()))
        assert [e for e in validator.error_log if "DTD_CONTENT_NOT_DETERMINIST" not in e.type_name] == []


SPECIAL_EXIT = [
    # the recursion can only end through a special token
    Grammar("r", (("r", choice(seq(lit("a"), Ref("r"), lit("b")), Special("<|e|>"))),), max_depth=3),
    # mutual recursion, the special one call away from the saturated rule
    Grammar("x", (("x", choice(seq(lit("a"), Ref("y")), Ref("z"))), ("y", seq(Ref("x"), lit("b"))),
                  ("z", seq(Special("<|e|>"), opt(lit("b"))))), max_depth=2),
]


@pytest.mark.parametrize("g", SPECIAL_EXIT, ids=["self", "mutual"])
def test_saturated_recursion_finishes_through_a_special_token(g):
    """Liveness under saturated recursion counts special-token moves: a state that can only
    finish through a special token is live (it was dead, so the deepest level's mask was empty:
    a dead end).  Random walks never meet an empty mask and end with exactly the DFA's texts."""

    toks = [b"", b"a", b"b", b"<|e|>", b"ab"]
    v = Vocab.from_bytes(toks, eog_ids=[0], special={"<|e|>": 3})
    texts = {}
    for be in ("dfa", "pushdown"):
        cg = compile_grammar(g, v, backend=be)
        texts[be] = {random_walk(cg, np.random.default_rng(seed)).text for seed in range(150)}
    assert texts["pushdown"] == texts["dfa"] and len(texts["dfa"]) >= 3
