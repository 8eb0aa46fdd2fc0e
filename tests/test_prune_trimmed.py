"""``automaton._prune`` of a DFA known trimmed (``DFA.trimmed``, set by ``minimal_dfa``) with
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

from conftest import DFA_SCHEMAS, assert_same_dfa

SCHEMAS = DFA_SCHEMAS


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_trimmed_prune_is_the_native_trim(name):
    d = A.compile_dfa(compile_schema(SCHEMAS[name]).grammar)
    assert d.trimmed
    plain = replace(d, trimmed=False)
    every = np.ones(256, dtype=bool)
    for usable in (None, every, [True] * 256):
        got = A._prune(d, usable)
        assert got is d  # the shortcut
        assert_same_dfa(got, A._prune(plain, usable))
    some = every.copy()
    some[0x80:] = False  # a restriction: the native trim runs (ASCII-only schemas keep their states)
    try:
        want = A._prune(plain, some)
    except DecodingError:
        with pytest.raises(DecodingError):
            A._prune(d, some)
    else:
        assert_same_dfa(A._prune(d, some), want)
