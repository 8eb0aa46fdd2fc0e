"""The subset-construction work estimate (:func:`decoding.ir.size.estimate_work`): honest for
repetitions of a prefix code (a JSON string character: linear, measured), and still the
square (or more) for items that parse several ways, which really are that expensive."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import LimitError
from decoding.frontends.gbnf.parse import parse_gbnf
from decoding.frontends.jsonschema import compile_schema
from decoding.ir import Dfa, Grammar, byteset, choice, lit, rep, seq
from decoding.ir.size import _node_estimate, check_size, estimate_work
from decoding.limits import DEFAULT_LIMITS


def _string(n: int) -> Grammar:
    return compile_schema({"type": "string", "maxLength": n}).grammar


def test_json_string_characters_are_a_prefix_code():
    char = _string(5).rule("root").items[1].item  # '"' char{0,5} '"'
    e = _node_estimate(char)
    assert e.pf and not e.amb and e.lo == 1


@pytest.mark.parametrize("n", [256, 1024, 4096, 8192])
def test_json_string_work_is_linear_in_max_length(n):
    """Measured (2-core EPYC): 0.02/0.20/0.77/1.50 s to determinise; the square of the NFA
    was 4.7/76/1208/4832 M steps, the estimate is now states x one character's states."""
    w = estimate_work(_string(n))
    assert abs(w / (estimate_work(_string(256)) * n / 256) - 1) < 0.01  # linear in n
    assert w < DEFAULT_LIMITS.max_compile_work


def test_json_string_of_4096_compiles_with_the_default_limits():
    g = _string(4096)
    check_size(g)  # no LimitError: the estimate was 1.2e9 steps before (Snowplow sp_261)
    t0 = time.thread_time()
    dfa = compile_dfa(g)
    assert time.thread_time() - t0 < 6.0
    assert dfa.accepts(b'"' + b"a" * 4096 + b'"') and not dfa.accepts(b'"' + b"a" * 4097 + b'"')
    assert dfa.accepts(b'"' + "é".encode() * 4096 + b'"') and dfa.accepts(b'"' + b"\\n" * 4096 + b'"')


@pytest.mark.parametrize("text", [
    'root ::= ("a" | "ab" | "b"){0,2000}',   # "ab" or "a" "b": over 9 s and 256 MB
    'root ::= ([a-z] | "xy"){0,400} "!"',    # 35 s
    'root ::= ("a"{0,100}){0,100}',          # the item may be empty
], ids=["a-ab-b", "class-or-xy", "rep-of-rep"])
def test_items_that_parse_several_ways_are_still_refused(text):
    g = parse_gbnf(text)
    t0 = time.thread_time()
    with pytest.raises(LimitError) as e:
        compile_dfa(g)
    assert time.thread_time() - t0 < 1.0
    assert "max_compile_work=" in str(e.value) and "rule 'root'" in str(e.value)


def test_prefix_code_rules():
    """What counts as a prefix code (``Estimate.pf``), and what does not."""
    az = byteset([(97, 122)])
    yes = [lit("abc"), az, seq(lit("a"), az), choice(lit("ab"), lit("cd")), choice(lit("\\b"), lit("\\u00")),
           rep(az, 3, 3), Dfa(((( 97, 97, 1),), ()), (1,))]
    no = [rep(az, 1, 2), choice(lit("a"), lit("ab")), choice(az, lit("xy")), seq(az, rep(az, 0, 3)),
          choice(lit(""), lit("a")), Dfa((((97, 97, 1),), ((97, 97, 1),)), (1,))]
    assert all(_node_estimate(x).pf for x in yes)
    assert not any(_node_estimate(x).pf for x in no)


def test_a_prefix_code_with_many_copies_compiles_fast():
    """``("a" | "b" x 40 | "cc"){0,2000}``: 82,001 DFA states in 0.7 s (the square estimate,
    192 M steps, refused it)."""
    g = parse_gbnf('root ::= ("a" | "' + "b" * 40 + '" | "cc"){0,2000}')
    assert estimate_work(g) < DEFAULT_LIMITS.max_compile_work
    dfa = compile_dfa(g, limits=replace(DEFAULT_LIMITS, max_compile_seconds=30))
    assert dfa.accepts(b"a" * 1999 + b"cc") and not dfa.accepts(b"a" * 2000 + b"cc")



def test_set_strings_shortcut_gives_the_same_estimates(monkeypatch):
    """``_choice`` skips :func:`~decoding.ir.size._set_strings_differ` when a branch starting
    alike is unbounded, longer than ``SET_STRING_LEN_MAX`` or holds a Ref (it would say False:
    no short finite sequence of byte sets): the estimates are those with the shortcut off."""
    import random

    import decoding.ir.size as size
    from decoding.ir import Ref

    rnd = random.Random(7)
    long = size.SET_STRING_LEN_MAX
    ab = byteset([(97, 98)])
    leaves = [lit("a"), lit("ab"), lit("ay"), lit("a" * long), lit("a" * (long + 1)), ab, byteset([(98, 99)]),
              seq(ab, lit("x")), seq(ab, lit("xyz")), Ref("r")]

    def node(depth: int):
        if depth == 0 or rnd.random() < 0.3:
            return rnd.choice(leaves)
        k = rnd.randrange(3)
        kids = [node(depth - 1) for _ in range(rnd.randrange(1, 4))]
        return seq(*kids) if k == 0 else choice(*kids) if k == 1 else rep(kids[0], 0, rnd.choice([1, 3, None]))
    nodes = [choice(*[node(3) for _ in range(rnd.randrange(2, 4))]) for _ in range(600)]
    on = [_node_estimate(n) for n in nodes]
    monkeypatch.setattr(size, "SET_STRINGS_SHORTCUT", False)
    off = [_node_estimate(n) for n in nodes]
    assert on == off
    # the shortcut is taken, and on choices whose set strings decide (both outcomes seen)
    assert len({(e.pf, e.amb) for e in off}) >= 3
    assert sum(not e.amb and e.hi is not None and 1 < e.hi <= long for e in off) > 20
