"""The JSON Schema front-end's fast paths give what the slow paths give (issue 14):

- size estimates seeded with the per-process estimates of the nodes every compile reaches
  (``compile._constants``, ``_seeded_fold``) and of the per-process parts of ``not_in``
  tries (``_shared_estimate``) against an empty memo per compile;
- ``_reachable`` not walking those nodes (nor the ``not_in`` parts) against walking them;
- ``hoist`` reading the counted estimate where no repetition in it was counted
  (``_uncounted_estimate``, ``Estimate.cut``) against always estimating with ``counted=False``;
- ``_check_rules`` comparing only rule bodies with equal estimates against deduplicating
  them by hash (the same LimitErrors, also under small limits);
- ``_unproductive`` remembering productive nodes across its passes (and knowing the
  constant nodes' from the start) against evaluating every rule afresh in each pass.

Compared on hand-written schemas (large bounds, cycles, duplicate definitions, failures)
and real ones: the same IR (canonical text), dropped/ignored lists, or the same exception
(type, pointer, keyword, limit, message)."""

from __future__ import annotations

import dataclasses

import pytest

import decoding.frontends.jsonschema.compile as C
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Choice, Grammar, Node, Ref, Repeat, Seq, reachable_rules
from decoding.limits import DEFAULT_LIMITS

from conftest import HAND_SCHEMAS, bench_schemas, frontend_outcome

HAND = {k: HAND_SCHEMAS[k] for k in ("string", "long_string", "numbers", "big_array", "free", "extras", "same_definitions",
                                     "recursive", "no_exit_cycle", "self", "enum_big", "pattern", "unsat", "bad_pattern")}


SCHEMAS = {**HAND, **bench_schemas(8)}


def _outcome(schema: object, **kw) -> tuple:
    return frontend_outcome(schema, **kw)


# ------------------------------------------------------------------ the slow paths

def _check_rules_by_hash(g: Grammar, c) -> None:
    """``_check_rules`` as it was: distinct bodies found by hashing."""
    seen: dict[Node, tuple[int, int, str]] = {}
    for name, node in g.rules:
        if node in seen:
            continue
        est = C._estimate(node, True, c._estimates)
        seen[node] = (est.states, est.work, name)
        if est.states > c.max_nfa:
            raise C._limit(C._rule_pointer(name), f"rule '{name}' expands to about {est.states} automaton states",
                           "max_nfa", c.max_nfa, est.states)
        if est.work > c.limits.max_compile_work:
            raise C._limit(C._rule_pointer(name), f"rule '{name}' costs about {est.work} steps to determinise",
                           "max_compile_work", c.limits.max_compile_work, est.work)
    total_states = sum(v[0] for v in seen.values())
    total_work = sum(v[1] for v in seen.values())
    biggest = C._rule_pointer(max(seen.values(), key=lambda v: (v[1], v[0]))[2])
    if total_states > c.limits.max_nfa_states:
        raise C._limit(biggest, f"the schema's {len(seen)} rules expand to about {total_states} automaton "
                       "states in total (the largest is here)", "max_nfa_states", c.limits.max_nfa_states,
                       total_states)
    if total_work > c.limits.max_compile_work:
        raise C._limit(biggest, f"the schema's {len(seen)} rules cost about {total_work} steps to "
                       "determinise in total (the largest is here)", "max_compile_work",
                       c.limits.max_compile_work, total_work)


def _unproductive_afresh(root: Node, rules: dict[str, Node], shared: object = None) -> str | None:
    """``_unproductive`` as it was: every pass evaluates each rule with a fresh memo (nothing
    known of the ``shared`` parts)."""
    good: set[str] = set()

    def productive(node: Node) -> bool:
        memo: dict[int, bool] = {}
        stack: list[tuple[Node, bool]] = [(node, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in memo:
                continue
            if isinstance(n, Ref):
                memo[id(n)] = n.name in good
            elif isinstance(n, (Seq, Choice)):
                if not done:
                    stack.append((n, True))
                    stack.extend((x, False) for x in n.items if id(x) not in memo)
                    continue
                vals = [memo[id(x)] for x in n.items]
                memo[id(n)] = all(vals) if isinstance(n, Seq) else any(vals)
            elif isinstance(n, Repeat):
                if n.min == 0:
                    memo[id(n)] = True
                elif not done:
                    stack.append((n, True))
                    stack.append((n.item, False))
                    continue
                else:
                    memo[id(n)] = memo[id(n.item)]
            else:
                memo[id(n)] = True
        return memo[id(node)]

    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in good and productive(body):
                good.add(name)
                changed = True
    if productive(root):
        return None
    bad = [n for n in rules if n not in good]
    return bad[0] if bad else ""


def _reachable_walking_all(root: Node, rules: dict[str, Node], shared: object = None,
                           facts: object = None) -> dict[str, Node]:
    """``_reachable`` walking the constant nodes (and the ``shared`` parts) too (no ``facts``:
    the grammar is then built by ``Grammar``'s own walk)."""
    seen = set(reachable_rules(root, rules.__getitem__))
    return {k: v for k, v in rules.items() if k in seen}


def _slow(m: pytest.MonkeyPatch) -> None:
    m.setattr(C, "_seeded_fold", lambda counted: ({}, []))
    m.setattr(C, "_shared_estimate", lambda node: None)  # not_in's parts: estimated in each compile
    m.setattr(C, "_uncounted_estimate", lambda node, memo: C._estimate(node, False, memo))  # hoist: counted=False
    m.setattr(C, "_reachable", _reachable_walking_all)
    m.setattr(C, "_check_rules", _check_rules_by_hash)
    m.setattr(C, "_unproductive", _unproductive_afresh)


# ------------------------------------------------------------------ tests

@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_same_outcome_as_slow_paths(name, monkeypatch):
    schema = SCHEMAS[name]
    new = _outcome(schema)
    with monkeypatch.context() as m:
        _slow(m)
        old = _outcome(schema)
    assert new == old
    assert _outcome(schema) == new  # the seed is not disturbed by a compile without it


SMALL = [dict(max_nfa=50), dict(max_nfa=400), dict(limits=dataclasses.replace(DEFAULT_LIMITS, max_nfa_states=300)),
         dict(limits=dataclasses.replace(DEFAULT_LIMITS, max_compile_work=2_000))]


@pytest.mark.parametrize("kw", SMALL, ids=["max_nfa50", "max_nfa400", "max_nfa_states300", "work2000"])
@pytest.mark.parametrize("name", sorted(HAND) + sorted(SCHEMAS)[::6])
def test_same_limit_errors_as_slow_paths(name, kw, monkeypatch):
    schema = SCHEMAS[name]
    new = _outcome(schema, **kw)
    with monkeypatch.context() as m:
        _slow(m)
        old = _outcome(schema, **kw)
    assert new == old


def test_some_limits_hit():
    """The small limits above do fail some schemas at a rule (the comparison means something)."""
    hits = {o[4] for n in HAND for kw in SMALL if (o := _outcome(SCHEMAS[n], **kw))[0] == "error"}
    assert {"max_nfa", "max_nfa_states", "max_compile_work"} <= hits


def test_unproductive_on_hand_grammars():
    """Cycles without exit, found in a later pass, and a productive grammar: the same answer."""
    a, b, c = Ref("a"), Ref("b"), Ref("c")
    from decoding.ir import lit, rep, seq, choice
    cases = [
        (seq(a, b), {"a": seq(lit("x"), b), "b": choice(seq(c, lit("y")), lit("z")), "c": seq(a, lit("q"))}),
        (a, {"a": seq(lit("("), a, lit(")"))}),
        (choice(a, lit("k")), {"a": rep(a, 1, 3)}),
        (seq(c, a), {"c": seq(b, b), "b": seq(a, lit("1")), "a": choice(lit("0"), seq(c, lit("2")))}),
    ]
    for root, rules in cases:
        assert C._unproductive(root, rules) == _unproductive_afresh(root, rules)


def test_productive_by_the_rules_of_derives():
    """The front-end's ``_productive`` answers as ``decoding.ir.productive._derives`` on every
    kind of node, those the front-end never builds included (so its proof that the start is
    productive is ``find_empty``'s)."""
    from decoding.ir import EMPTY, NOTHING, ByteSet, Diff, Inter, Special, byteset, lit, rep, seq
    from decoding.ir.productive import _derives
    a, z = lit("a"), byteset([(48, 57)])
    nodes = [a, z, ByteSet(()), Special("<s>"), Inter((a, z)), Diff(a, z), EMPTY, NOTHING, Ref("r"), Ref("q"),
             Repeat(a, 3, 2), Repeat(a, 0, 0), Repeat(NOTHING, 0, 2), Repeat(NOTHING, 2, 1), Repeat(NOTHING, 1, 3),
             Repeat(ByteSet(()), 1, None), Seq((a, ByteSet(()))), Choice((NOTHING, Ref("q"))), seq(a, Ref("r")),
             Choice((Seq((NOTHING,)), rep(z, 2, 4)))]
    for n in nodes:
        assert C._productive(n, {"r"}, set()) == _derives(n, {"r"}), n


def test_constants():
    """The constant nodes hold no Ref, derive some string, and their seeded estimates
    are the estimates of a fresh memo."""
    from decoding.ir import walk
    from decoding.ir.size import _node_estimate
    k = C._constants()
    inside = [n for r in k.nodes for n in walk(r)]
    assert k.ids == frozenset(map(id, inside)) and not any(isinstance(n, Ref) for n in inside)
    assert k.productive <= k.ids and all(id(r) in k.productive for r in k.nodes)
    for counted in (False, True):
        for r in k.nodes:
            assert k.estimates[counted][id(r)] == _node_estimate(r, counted)


@pytest.mark.parametrize("name", sorted(SCHEMAS)[::2] + ["long_string", "big_array", "enum_big"])
def test_uncut_nodes_estimate_alike(name):
    """Where no repetition was counted (``Estimate.cut`` False), the counted and uncounted
    estimates agree (the reason hoist may read either); on every node of the grammar."""
    from decoding.ir import walk
    from decoding.ir.size import _node_estimate
    try:
        g = compile_schema(SCHEMAS[name]).grammar
    except Exception:  # noqa: BLE001 - nothing to look at
        return
    est: dict = {flag: ({}, []) for flag in (False, True)}  # shared per flag, as compile does
    alike = 0
    for _, body in g.rules:
        for n in walk(body):
            c = _node_estimate(n, True, *est[True])
            u = _node_estimate(n, False, *est[False])
            assert not u.cut
            if not c.cut:
                alike += 1
                assert c == u and dataclasses.astuple(c) == dataclasses.astuple(u)
    assert alike


def test_cut_sees_large_repetitions():
    from decoding.ir import lit, rep, seq
    from decoding.ir.size import COUNTED_WINDOW, _node_estimate
    w = COUNTED_WINDOW + 1
    inside = seq(lit("a"), rep(lit("b"), 0, w + 1))
    assert _node_estimate(inside, True).cut and _node_estimate(rep(lit("b"), w + 1, None), True).cut
    assert not _node_estimate(seq(lit("a"), rep(lit("b"), 3, w + 3)), True).cut
    assert not _node_estimate(inside, False).cut
