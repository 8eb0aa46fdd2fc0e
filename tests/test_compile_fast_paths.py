"""The compile pipeline's shared facts give what computing afresh gives (issue 14):

- :func:`decoding.ir.size.check_size` reusing the JSON Schema front-end's subtree estimates
  (``attach_estimates``) against estimating the grammar afresh: the same estimate and the
  same LimitError (rule, limit, message), inline or rule by rule, counted or not, also under
  limits small enough to fail; the estimates are released by the back-end selection;
- the registered plain nodes (``register_plain``: the front-end's JSON string character,
  integer and number) skipped by the grammar check, by ``productive_rules``/``find_empty``
  and written once by ``canonical_ir_text``: the same specials and errors, the same
  productive rules and blame, the same text as ``canonical_text(to_data(g))``;
- ``Grammar.rule_refs`` against a walk of the rule body.
"""

from __future__ import annotations

import dataclasses

import pytest

import decoding.ir.size as S
from decoding.errors import GrammarError, LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.jsonschema.jsonstr import any_json_char
from decoding.frontends.jsonschema.numbers import INTEGER, NUMBER
from decoding.ir import (Diff, Grammar, Inter, Ref, Special, byteset, choice, lit, plain_ids, register_plain, rep, seq,
                         star, walk)
from decoding.ir.key import canonical_ir_text, canonical_text
from decoding.ir.nodes import Choice, Repeat, Seq, to_data
from decoding.ir.productive import find_empty, productive_rules
from decoding.limits import DEFAULT_LIMITS

from conftest import HAND_SCHEMAS as SHARED_HAND, bench_schemas

HAND_SCHEMAS = {k: SHARED_HAND[k] for k in ("string", "long_string", "numbers", "big_array", "counted_strings",
                                            "recursive", "mutual", "same_definitions", "enum_big", "pattern", "not")}


SCHEMAS = {**HAND_SCHEMAS, **bench_schemas(10, offset=3)}


def _grammar(schema: object) -> Grammar | None:
    try:
        return compile_schema(schema).grammar
    except Exception:  # noqa: BLE001 - schemas the front-end refuses have no grammar to check
        return None


def _size(g: Grammar, limits, **kw) -> tuple:
    try:
        e = S.check_size(g, limits, **kw)
    except LimitError as err:
        return ("error", str(err), err.limit, err.value)
    return ("ok", dataclasses.astuple(e))


def _afresh(g: Grammar) -> Grammar:
    """An equal grammar with no estimates attached (new node objects: the same IR)."""
    from decoding.ir.nodes import from_data
    return from_data(to_data(g))


SMALL = [DEFAULT_LIMITS, dataclasses.replace(DEFAULT_LIMITS, max_nfa_states=300),
         dataclasses.replace(DEFAULT_LIMITS, max_compile_work=2000),
         dataclasses.replace(DEFAULT_LIMITS, max_nfa_states=40, max_compile_work=100)]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_check_size_with_attached_estimates(name: str) -> None:
    g = _grammar(SCHEMAS[name])
    if g is None:
        pytest.skip("the front-end refuses this schema")
    assert S._attached(g, False, True) is not None, "the front-end attaches its estimates"
    fresh = _afresh(g)
    assert S._attached(fresh, False, True) is None
    for limits in SMALL:
        for counted in (False, True):
            for inline in (True, False):
                got = _size(g, limits, counted=counted, inline=inline)
                want = _size(fresh, limits, counted=counted, inline=inline)
                assert got == want, (name, limits, counted, inline)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_check_size_of_grammars_made_of_attached_nodes(name: str) -> None:
    """A grammar made of the nodes of one with estimates attached (each rule alone, its Refs
    as specials, as the pushdown back-end checks them) reads those estimates
    (``_any_attached``): the same estimates and errors as with nothing attached."""
    from decoding.backends.pushdown.index import _Calls
    g = _grammar(SCHEMAS[name])
    if g is None:
        pytest.skip("the front-end refuses this schema")
    calls = _Calls()
    subs = [Grammar(rule, ((rule, calls.body(body)),), g.max_depth) for rule, body in g.rules]
    assert all(S._attached(sub, False, True) is None for sub in subs) and S._any_attached(False, True) is not None

    def sizes() -> list:
        return [_size(sub, limits, inline=inline, counted=counted) for sub in subs for limits in SMALL
                for inline in (True, False) for counted in (False, True)]
    got = sizes()
    attached = dict(S._ATTACHED)
    S._ATTACHED.clear()
    try:
        want = sizes()
    finally:
        S._ATTACHED.update(attached)
    assert got == want


def test_estimates_released_by_compile_grammar() -> None:
    from decoding.backends.select import compile_grammar
    from decoding.vocab import Vocab

    g = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}}).grammar
    assert S._attached(g, False, True) is not None
    vocab = Vocab.from_bytes([bytes([i]) for i in range(256)] + [b"</s>"], eog_ids=[256])
    compile_grammar(g, vocab)
    assert S._attached(g, False, True) is None
    assert S._attached(g, True, False) is None


def test_attached_estimates_go_with_the_grammar() -> None:
    import gc

    g = compile_schema({"type": "array", "items": {"type": "integer"}}).grammar
    key = id(g)
    assert key in S._ATTACHED
    del g
    gc.collect()
    assert key not in S._ATTACHED


def test_cut_flag_says_when_counted_differs() -> None:
    """``Estimate.cut`` is False exactly where the counted estimate is the uncounted one
    (on these nodes); it is not compared."""
    nodes = [rep(any_json_char(), 0, 5000), seq(lit('"'), rep(any_json_char(), 3, 10), lit('"')),
             rep(byteset([(48, 57)]), 200, 400), choice(lit("a"), rep(lit("b"), 0, 1000)), INTEGER, NUMBER]
    cut = 0
    for n in nodes:
        c, u = S._node_estimate(n, True), S._node_estimate(n, False)
        assert u.cut is False
        if c.cut:
            cut += 1
        else:
            assert c == u and dataclasses.astuple(c) == dataclasses.astuple(u)
    assert cut >= 2
    assert S._node_estimate(nodes[0], True) == S._node_estimate(nodes[0], True)


# ------------------------------------------------------------------ plain nodes

def _register_constants() -> None:
    for n in (any_json_char(), INTEGER, NUMBER):
        register_plain(n)


def test_register_plain_refuses() -> None:
    for bad in (seq(lit("a"), Ref("x")), choice(lit("a"), Special("<s>")), Inter((lit("a"), lit("a"))),
                Diff(lit("a"), lit("b")), seq(lit("a"), byteset([])), rep(byteset([]), 0, 3)):
        with pytest.raises(GrammarError):
            register_plain(bad)
    ok = rep(seq(lit("ab"), byteset([(48, 57)])), 1, 3)
    register_plain(ok)
    assert id(ok) in plain_ids()


def _canon_slow(g: Grammar) -> str:
    return canonical_text(to_data(g))


def _refs_walk(node) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for n in walk(node):
        if isinstance(n, Ref):
            out.setdefault(n.name)
    return tuple(out)


def _productive_slow(g: Grammar) -> set[str]:
    """The least fixpoint, computed naively (every rule re-evaluated until nothing changes)."""
    def derives(n, ok) -> bool:
        if isinstance(n, Seq):
            return all(derives(x, ok) for x in n.items)
        if isinstance(n, Choice):
            return any(derives(x, ok) for x in n.items)
        if isinstance(n, Repeat):
            return n.min == 0 or (not (n.max is not None and n.max < n.min) and derives(n.item, ok))
        if isinstance(n, Ref):
            return n.name in ok
        if type(n).__name__ == "ByteSet":
            return bool(n.ranges)
        return True

    reach = {g.start}
    todo = [g.start]
    while todo:
        for r in _refs_walk(g.rule(todo.pop())):
            if r not in reach:
                reach.add(r)
                todo.append(r)
    ok: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name in reach:
            if name not in ok and derives(g.rule(name), ok):
                ok.add(name)
                changed = True
    return ok


S_CHAR = any_json_char()
HAND_GRAMMARS = {
    "plain_inside": Grammar("r", (("r", seq(lit('"'), star(S_CHAR), lit('"'), Special("<e>"), INTEGER)),)),
    "plain_root": Grammar("r", (("r", S_CHAR), ("x", seq(NUMBER, Ref("r"))))),
    "no_exit": Grammar("a", (("a", seq(S_CHAR, Ref("b"))), ("b", seq(INTEGER, Ref("a"))))),
    "blocked": Grammar("a", (("a", choice(seq(Ref("b"), S_CHAR), seq(Ref("c"), NUMBER))),
                             ("b", seq(lit("x"), Ref("b"))), ("c", rep(Ref("b"), 1, 2)))),
    "shared": Grammar("a", (("a", seq(Ref("b"), choice(S_CHAR, Ref("c")), Ref("c"))),
                            ("b", choice(INTEGER, seq(lit("["), Ref("a"), lit("]")))), ("c", choice(S_CHAR, Ref("b"))))),
    "empty_set": Grammar("a", (("a", seq(S_CHAR, byteset([]))),)),
}


def _grammars() -> dict[str, Grammar]:
    _register_constants()
    out = dict(HAND_GRAMMARS)
    for name, schema in SCHEMAS.items():
        g = _grammar(schema)
        if g is not None:
            out[name] = g
    return out


def test_plain_nodes_change_no_pass() -> None:
    _register_constants()
    assert {id(any_json_char()), id(INTEGER), id(NUMBER)} <= plain_ids()
    for name, g in _grammars().items():
        assert canonical_ir_text(g) == _canon_slow(g), name
        for rule, body in g.rules:
            assert g.rule_refs(rule) == _refs_walk(body), (name, rule)
        assert productive_rules(g) == _productive_slow(g), name
        # the grammar check: the same specials (first-seen order) as a full walk
        specials: dict[str, None] = {}
        seen: set[int] = set()
        for _, body in g.rules:
            for n in walk(body, seen):
                if isinstance(n, Special):
                    specials.setdefault(n.text)
        assert g.specials() == list(specials), name


def test_find_empty_blames_the_same_rule() -> None:
    _register_constants()
    assert find_empty(HAND_GRAMMARS["no_exit"]) == ("a", "every expansion recurses through 'a' -> 'b' -> 'a' "
                                                         "(no finite string)")
    assert find_empty(HAND_GRAMMARS["blocked"])[0] == "b"
    assert find_empty(HAND_GRAMMARS["empty_set"]) == ("a", "accepts no string")
    assert find_empty(HAND_GRAMMARS["shared"]) is None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_front_end_productive_start_is_find_empty(name: str) -> None:
    """The JSON Schema front-end records its grammar's start as productive
    (``known_productive``): ``find_empty`` of the same grammar built afresh agrees."""
    g = _grammar(SCHEMAS[name])
    if g is None:
        pytest.skip("the front-end refuses this schema")
    assert g._empty == (None,)
    fresh = _afresh(g)
    assert fresh._empty == () and find_empty(fresh) is None and fresh._empty == (None,)


def test_find_empty_once_per_grammar() -> None:
    """find_empty's answer is kept with the grammar object (and an equal grammar built
    afresh finds the same)."""
    for g in HAND_GRAMMARS.values():
        first = find_empty(g)
        assert g._empty == (first,) and find_empty(g) == first == find_empty(_afresh(g))


def test_grammar_check_with_plain_nodes() -> None:
    _register_constants()
    with pytest.raises(GrammarError, match="refers to undefined rule 'nope'"):
        Grammar("r", (("r", seq(S_CHAR, INTEGER, Ref("nope"))),))
    with pytest.raises(GrammarError, match="intersection/difference operand contains a reference"):
        Grammar("r", (("r", seq(S_CHAR, Inter((S_CHAR, Ref("r"))))),))


# ------------------------------------------------------------------ estimates

def test_fast_estimate_constructor() -> None:
    import random

    rnd = random.Random(7)
    for _ in range(200):
        vals = (rnd.randrange(10**6), rnd.randrange(100), rnd.choice([None, 5, 10**9]), rnd.randrange(10**8),
                rnd.random() < .5, rnd.randrange(1 << 257), rnd.random() < .5, rnd.random() < .5,
                rnd.random() < .5)
        a, b = S._est(*vals), S.Estimate(*vals)
        assert a == b and dataclasses.astuple(a) == dataclasses.astuple(b) and repr(a) == repr(b)
    assert S._est(1, 1, 1, 0) == S.Estimate(1, 1, 1, 0) and S._est(1, 1, 1, 0).first == S.Estimate(1, 1, 1, 0).first


def _seq_reference(n, kids) -> tuple:
    """The sequence estimate as it was computed before the one-pass loop."""
    items = n.items
    states = sum(e.states for i, e in enumerate(kids) if not (i > 0 and S.is_sep_loop(items[i - 1], items[i])))
    his = [e.hi for e in kids]
    first = 0
    for e in kids:
        first |= e.first
        if e.lo > 0:
            break
    return (states, sum(e.lo for e in kids), None if None in his else sum(his), sum(e.work for e in kids),
            any(e.amb for e in kids), first, any(e.refs for e in kids), all(e.pf for e in kids),
            any(e.cut for e in kids))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_node_fold_and_sequences(name: str) -> None:
    """``_node_fold`` gives ``_fold``'s estimates and memo in node mode (Refs as one symbol), and
    every sequence's estimate is the one of the earlier formula."""
    g = _grammar(SCHEMAS[name])
    if g is None:
        pytest.skip("the front-end refuses this schema")
    for counted in (False, True):
        m1: dict = {}
        m2: dict = {}
        k1: list = []
        k2: list = []
        for _, body in g.rules:
            a = S._node_fold(body, counted, m1, k1)
            b = S._fold(body, lambda r: S._ONE, m2, lambda r: None, lambda r, e: e, lambda: True, counted, k2)
            assert dataclasses.astuple(a) == dataclasses.astuple(b)
        assert {i: dataclasses.astuple(e) for i, e in m1.items()} == {i: dataclasses.astuple(e) for i, e in m2.items()}
        # the same nodes kept alive (``_node_fold`` keeps a node's leaf children as it reads them,
        # so the order may differ; the list only keeps memo's ids valid)
        assert sorted(id(x) for x in k1) == sorted(id(x) for x in k2) and len(k1) == len(set(map(id, k1)))
        for _, body in g.rules:
            for n in walk(body):
                if isinstance(n, Seq):
                    kids = [S._ONE if isinstance(x, Ref) else m1[id(x)] for x in n.items]
                    assert dataclasses.astuple(S._combine(n, kids, counted)) == _seq_reference(n, kids)


def _seq_before(*items):
    """``seq`` as it was written before (flatten, merge literals, then look for NOTHING)."""
    from decoding.ir import NOTHING
    from decoding.ir.nodes import Lit

    flat = []
    for it in items:
        flat.extend(it.items) if isinstance(it, Seq) else flat.append(it)
    merged: list = []
    for it in flat:
        if isinstance(it, Lit) and merged and isinstance(merged[-1], Lit):
            merged[-1] = Lit(merged[-1].data + it.data)
        elif isinstance(it, Lit) and not it.data:
            continue
        else:
            merged.append(it)
    if any(m == NOTHING for m in merged):
        return NOTHING
    return merged[0] if len(merged) == 1 else Seq(tuple(merged))


def test_seq_builder_as_before() -> None:
    import random

    from decoding.ir import EMPTY, NOTHING
    from decoding.ir.nodes import Lit

    rnd = random.Random(1)
    pool = [Lit(b""), lit("a"), lit("bc"), NOTHING, EMPTY, byteset([(1, 2)]), Ref("x"), Choice((lit("a"),)),
            Seq((lit("q"), Ref("y"))), Seq((Lit(b""), lit("z"))), Seq((NOTHING, lit("w")))]
    for _ in range(5000):
        items = [rnd.choice(pool) for _ in range(rnd.randrange(0, 6))]
        assert seq(*items) == _seq_before(*items), items


def _set_strings_before(n, budget):
    """``size._set_strings`` as it was, expanding every child in order."""
    from decoding.ir.nodes import ByteSet, Lit
    if isinstance(n, Lit):
        return [tuple(1 << b for b in n.data)] if len(n.data) <= S.SET_STRING_LEN_MAX else None
    if isinstance(n, ByteSet):
        return [(S._byte_mask(n.ranges),)] if n.ranges else None
    if isinstance(n, Choice):
        out: list = []
        for x in n.items:
            sub = _set_strings_before(x, budget - len(out))
            if sub is None:
                return None
            out.extend(sub)
            if len(out) > budget:
                return None
        return out
    if isinstance(n, Seq):
        acc: list = [()]
        for x in n.items:
            sub = _set_strings_before(x, budget)
            if sub is None or len(acc) * len(sub) > budget:
                return None
            acc = [a + b for a in acc for b in sub]
            if any(len(a) > S.SET_STRING_LEN_MAX for a in acc):
                return None
        return acc
    return None


def test_set_strings_as_before() -> None:
    """``_set_strings`` looking for a child that has none before expanding any: the same
    answers on random small IR (Refs, repetitions, long literals and empty sets inside)."""
    import random

    from decoding.ir.nodes import ByteSet, Lit
    rnd = random.Random(3)

    def node(depth):
        k = rnd.randrange(9 if depth else 4)
        if k == 0:
            return Lit(bytes(rnd.randrange(97, 100) for _ in range(rnd.choice([0, 1, 2, 17]))))
        if k == 1:
            return ByteSet(rnd.choice([(), ((97, 98),), ((48, 57), (97, 97))]))
        if k == 2:
            return rnd.choice([Ref("r"), Special("<s>"), Repeat(Lit(b"a"), 0, 2)])
        if k == 3:
            return Choice(())
        items = tuple(node(depth - 1) for _ in range(rnd.randrange(0, 4)))
        return Seq(items) if k % 2 else Choice(items)

    for _ in range(3000):
        n = node(3)
        for budget in (2, 16, 256):
            assert S._set_strings(n, budget) == _set_strings_before(n, budget), n
        kids = list(n.items) if isinstance(n, (Seq, Choice)) else [n]
        assert S._set_strings_differ(kids) == _set_strings_differ_before(kids)


def _set_strings_differ_before(branches) -> bool:
    tagged: list = []
    for i, x in enumerate(branches):
        sub = _set_strings_before(x, S.SET_STRINGS_MAX - len(tagged))
        if sub is None:
            return False
        tagged.extend((t, i) for t in sub)
        if len(tagged) > S.SET_STRINGS_MAX:
            return False
    for j, (b, bi) in enumerate(tagged):
        for a, ai in tagged[:j]:
            if ai == bi or not a or not b or not (a[0] & b[0]):
                continue
            if all(p & q for p, q in zip(a, b)):
                return False
    return True


def _choice_before(*items):
    """``choice`` as it was: each composite alternative compared with every earlier one."""
    if len(items) == 1 and not isinstance(items[0], Choice):
        return items[0]
    flat: list = []
    for it in items:
        for x in (it.items if isinstance(it, Choice) else (it,)):
            if x not in flat:
                flat.append(x)
    return flat[0] if len(flat) == 1 else Choice(tuple(flat))


def test_choice_dedup_as_before() -> None:
    """``choice`` comparing composites only within buckets of equal shallow keys
    (``nodes._shallow``) drops exactly the alternatives the full comparison drops, in the
    same order: random alternatives built twice (equal, not the same objects), repetitions
    of one item with other bounds, sequences that differ only inside, differences, and a
    19-digit integer range built afresh."""
    import random

    from decoding.frontends.jsonschema.numbers import _integer_range

    rnd = random.Random(5)

    def node(r, depth):
        k = r.randrange(8 if depth else 3)
        if k == 0:
            return lit(r.choice(["a", "b", "ab", ""]))
        if k == 1:
            return byteset([(48, 48 + r.randrange(3))])
        if k == 2:
            return Ref(r.choice("xy"))
        if k == 3:
            return Seq(tuple(node(r, depth - 1) for _ in range(r.randrange(2, 4))))
        if k == 4:
            return Choice(tuple(node(r, depth - 1) for _ in range(r.randrange(2, 4))))
        if k == 5:
            lo = r.randrange(3)
            return Repeat(node(r, depth - 1), lo, r.choice([None, lo + r.randrange(3)]))
        if k == 6:
            return Diff(node(r, depth - 1), node(r, depth - 1))
        return Inter((node(r, depth - 1), node(r, depth - 1)))

    for i in range(3000):
        seed = rnd.randrange(1 << 30)
        items = [node(random.Random(seed + j % 4), 3) for j in range(rnd.randrange(1, 9))]  # repeats: equal copies
        got, want = choice(*items), _choice_before(*items)
        assert got == want, items
        assert (got.items if isinstance(got, Choice) else (got,)) == (want.items if isinstance(want, Choice) else (want,))
    a, b = _integer_range(0, 9223372036854776000), _integer_range(0, 9223372036854776000)
    assert a is not b and choice(a, b) == _choice_before(a, b) == a


def test_grammar_key_text_as_canonical_text() -> None:
    """``grammar_key``'s formatted text is ``canonical_text`` of the same object, so every key
    stays what it was (hex digests and fingerprints, other versions, index options)."""
    from decoding.ir.key import _sha, grammar_key

    for version, digest, fp, index in [(3, "ab" * 32, "cd" * 32, None), (17, "0" * 64, "f1" * 8, {}),
                                       (3, "ab" * 32, "cd" * 32, {"x": 1}), (3, "a-b", "c\"d", None)]:
        want = _sha(canonical_text({"format": version, "grammar": digest, "vocab": fp, "index": index or {}}))[:40]
        assert grammar_key(digest, fp, version=version, index_options=index) == want


def test_with_compile_seconds_is_replace() -> None:
    from decoding.limits import Limits, with_compile_seconds

    lim = Limits(max_nfa_states=7, max_compile_seconds=3.0)
    got = with_compile_seconds(lim, 1.5)
    assert got == dataclasses.replace(lim, max_compile_seconds=1.5) and lim.max_compile_seconds == 3.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.max_compile_seconds = 2.0  # type: ignore[misc]
