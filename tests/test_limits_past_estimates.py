"""Estimates refuse at once; ``Compiler`` (back-end "auto") then tries the build and only the
bounds met while building refuse (:attr:`decoding.limits.Limits.refuse_on_estimates`).

The size estimates made before any automaton is built are upper bounds: a ``oneOf`` whose
branches reach a recursive definition is estimated at millions of states (each branch
inlined to the recursion bound inside the exclusion) and compiles to about a thousand.
Real schemas of JSONSchemaBench (Github_easy) that the estimates refused must compile, accept
none of the corpus's invalid instances and generate only valid instances (random walks
validated by jsonschema); grammars that are really too large must still fail, on a bound met while
building, naming both it and the estimate; and the front-end called directly keeps refusing
on estimates unless told not to."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import numpy as np
import pytest

from decoding.compiler import Compiler
from decoding.errors import LimitError
from decoding.frontends.jsonschema import canonicalize, compile_schema
from decoding.limits import DEFAULT_LIMITS
from decoding.testing import random_walk

from conftest import CORPORA, get_vocab

REFUSED_ON_ESTIMATES = ["o37786", "o37787", "o37788", "o35866"]  # Github_easy, the generation default


def _case(name: str) -> dict:
    return json.loads((CORPORA / "jsonschemabench" / "Github_easy" / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def compiler():
    return Compiler(get_vocab("llama-bpe"), cache=False)


@pytest.mark.parametrize("name", REFUSED_ON_ESTIMATES)
def test_the_front_end_refuses_them_on_an_estimate(name):
    """What "auto" goes past: the front-end with the default limits refuses each on an
    estimate, and builds the grammar when estimates may not refuse."""
    schema = _case(name)["schema"]
    with pytest.raises(LimitError) as ei:
        compile_schema(schema)
    assert ei.value.estimated and ei.value.limit in ("max_nfa", "max_nfa_states", "max_compile_work")
    assert "about" in str(ei.value)
    relaxed = dataclasses.replace(DEFAULT_LIMITS, refuse_on_estimates=False)
    assert compile_schema(schema, limits=relaxed).grammar.rules


@pytest.mark.parametrize("name", REFUSED_ON_ESTIMATES)
def test_auto_compiles_them_exactly(compiler, name):
    case = _case(name)
    schema = case["schema"]
    cg = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft7Validator(schema, format_checker=None)
    tests = case["tests"]
    for t in tests:  # (the corpus's instances, where it has some: no invalid one accepted)
        try:
            text = canonicalize(schema, t["data"])
        except Exception:  # (an instance the generation default does not spell: not generated)
            assert not t["valid"] or not validator.is_valid(t["data"])
            continue
        accepted = cg.accepts(text.encode())
        if not t["valid"]:
            assert not accepted, f"{name}: accepted an invalid instance: {text[:200]}"
    rng = np.random.default_rng(14)
    for _ in range(6):  # (a budgeted walk closes the structure within its budget)
        w = random_walk(cg, rng, budget=160)
        assert w.finished
        validator.validate(json.loads(w.text))


def test_really_too_large_fails_on_a_bound_met_while_building():
    """Two enums of 60,000 words of 40 letters: refused on the estimate, then the NFA
    builder stops at max_nfa_states states made; the error names both."""
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, 40)) for _ in range(60_000)]
    schema = {"type": "object", "properties": {"a": {"enum": words}, "b": {"enum": words[::-1]}},
              "required": ["a", "b"]}
    with pytest.raises(LimitError) as ei:
        Compiler(get_vocab("gpt-2"), cache=False).compile_json_schema(schema)
    e = ei.value
    assert not e.estimated and e.limit in ("max_nfa_states", "max_dfa_states", "max_subset_bytes",
                                           "max_compile_seconds")
    assert "tried past the estimate that refused it first" in str(e) and "expands to about" in str(e)
    assert e.pointer is not None


def test_a_backend_chosen_by_the_caller_is_not_retried():
    """Only "auto" goes past an estimate: the DFA back-end asked for keeps refusing."""
    schema = _case("o35866")["schema"]
    with pytest.raises(LimitError) as ei:
        Compiler(get_vocab("gpt-2"), cache=False, backend="dfa").compile_json_schema(schema)
    assert ei.value.estimated


def test_the_second_compile_is_bounded_by_past_estimates_seconds():
    """A repetition estimated at ~10^8 determinising steps: refused at once by the front-end;
    past the estimate, the build stops at ``past_estimates_seconds`` (here 0.3 s), and the
    error names the deadline, that budget and the estimate."""
    import time

    schema = {"type": "string", "pattern": "^(a{0,100}){0,100}$"}
    with pytest.raises(LimitError) as ei:
        compile_schema(schema)
    assert ei.value.estimated and ei.value.limit == "max_compile_work"
    lim = dataclasses.replace(DEFAULT_LIMITS, past_estimates_seconds=0.3)
    t0 = time.monotonic()
    with pytest.raises(LimitError) as ei:
        Compiler(get_vocab("gpt-2"), cache=False, limits=lim).compile_json_schema(schema)
    took = time.monotonic() - t0
    e = ei.value
    assert not e.estimated and e.limit == "max_compile_seconds"
    assert "past_estimates_seconds=0.3" in str(e) and "max_compile_work" in str(e)
    assert took < 0.3 + 3.0  # (a bound, not a speed: the deadline is checked between construction steps)
