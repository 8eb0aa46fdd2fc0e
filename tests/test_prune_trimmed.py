"""``automaton._prune`` of a DFA known trimmed (``DFA.trimmed``, set by ``_minimal_dfa``) with
every column usable returns it as it is, without ``gd_dfa_trim``: the same table, acceptance,
byte classes and dtype as the native trim makes of the same DFA not marked trimmed, on the
minimal DFAs of hand-written and JSONSchemaBench schemas."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import decoding.backends.automaton as A
from decoding.errors import DecodingError
from decoding.frontends.jsonschema import compile_schema

from conftest import HAND_SCHEMAS, bench_schemas

#: the schemas with one explicit DFA (unsat / bad_pattern / self / no_exit_cycle have no grammar; the counted-size,
#: long-string, big-array and Snowplow ones exceed the explicit DFA's limits)
NO_DFA = {"hand/unsat", "hand/bad_pattern", "hand/self", "hand/no_exit_cycle", "hand/counted_strings", "hand/long_string", "hand/big_array",
          "Snowplow/sp_0_Normalized"}
SCHEMAS = {name: v for name, v in {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **bench_schemas(6)}.items()
           if name not in NO_DFA}


def _same(a: A.DFA, b: A.DFA) -> None:
    assert a.trans.dtype == b.trans.dtype
    assert np.array_equal(a.trans, b.trans)
    assert np.array_equal(a.accepting, b.accepting)
    assert np.array_equal(a.byte_class, b.byte_class)
    assert (a.specials, a.n_classes) == (b.specials, b.n_classes)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_trimmed_prune_is_the_native_trim(name):
    d = A.compile_dfa(compile_schema(SCHEMAS[name]).grammar)
    assert d.trimmed
    plain = replace(d, trimmed=False)
    every = np.ones(256, dtype=bool)
    for usable in (None, every, [True] * 256):
        got = A._prune(d, usable)
        assert got is d  # the shortcut
        _same(got, A._prune(plain, usable))
    some = every.copy()
    some[0x80:] = False  # a restriction: the native trim runs (ASCII-only schemas keep their states)
    try:
        want = A._prune(plain, some)
    except DecodingError:
        with pytest.raises(DecodingError):
            A._prune(d, some)
    else:
        _same(A._prune(d, some), want)
