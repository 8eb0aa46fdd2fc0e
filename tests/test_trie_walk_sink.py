"""The trie walk with a sink state (``_native.trie_walk(..., sink)``): the same mask and
next states as the plain walk on tables where ``sink`` leads to itself on every class, and
a clear error when the given sink is not absorbing."""

from __future__ import annotations

import numpy as np
import pytest

from decoding import _native
from decoding.vocab import Vocab


def _vocab_trie(seed: int):
    rng = np.random.default_rng(seed)
    toks = sorted({bytes(rng.integers(0, 4, rng.integers(1, 6)).astype(np.uint8) + 97) for _ in range(300)})
    v = Vocab.from_bytes(toks)
    from decoding.backends.tables import vocab_tables
    return v, vocab_tables(v).trie


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("dtype", [np.int32, np.int16])
def test_sink_walk_equals_the_plain_walk(seed, dtype):
    v, trie = _vocab_trie(seed)
    rng = np.random.default_rng(100 + seed)
    n, ncols = int(rng.integers(2, 12)), 5
    classes = np.zeros(256, dtype=np.uint8)
    classes[97:101] = np.arange(1, 5)
    t = rng.integers(-1, n, (n + 1, ncols)).astype(dtype)
    t[n, :] = n  # the sink
    for s in range(n + 1):
        a = np.empty(v.n_words, dtype=np.uint32)
        b = np.empty(v.n_words, dtype=np.uint32)
        na = np.full(v.n_words * 32, -7, dtype=np.int32)
        nb = np.full(v.n_words * 32, -7, dtype=np.int32)
        ca = _native.trie_walk(trie, classes, t.reshape(-1), ncols, s, a, na)
        cb = _native.trie_walk(trie, classes, t.reshape(-1), ncols, s, b, nb, n)
        assert ca == cb and np.array_equal(a, b) and np.array_equal(na, nb), s


def test_a_sink_that_is_not_absorbing_is_an_error():
    v, trie = _vocab_trie(0)
    classes = np.zeros(256, dtype=np.uint8)
    t = np.array([[1], [0]], dtype=np.int32)
    m = np.empty(v.n_words, dtype=np.uint32)
    with pytest.raises(ValueError, match="sink: its row does not lead to itself"):
        _native.trie_walk(trie, classes, t.reshape(-1), 1, 0, m, None, 1)
    with pytest.raises(ValueError, match="sink: not a state"):
        _native.trie_walk(trie, classes, t.reshape(-1), 1, 0, m, None, 5)
