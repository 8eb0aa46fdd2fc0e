"""The native minimisation (``gd_dfa_minimize``: premerge, then Valmari's refinement from
an initial partition by acceptance, shortest accepted word and symbol set) gives the same
partition and numbering as the Python reference ``_minimize_py`` on tables built to stress
that start: equivalent states in cycles (which the premerge cannot merge), states that agree
on all three keys but are not equivalent, dead states, and missing transitions next to
transitions into dead states (not equivalent here: a missing transition is its own class)."""

from __future__ import annotations

import numpy as np
import pytest

from decoding.backends import automaton as A


def _same(trans: np.ndarray, acc: np.ndarray) -> None:
    nsym = trans.shape[1]
    dfa = A.DFA(np.zeros(256, dtype=np.uint16), trans.astype(np.int32), acc.astype(bool), (), nsym)
    ref, nat = A._minimize_py(dfa), A._minimize(dfa)
    assert ref.n_states == nat.n_states
    assert np.array_equal(ref.trans.astype(np.int64), nat.trans.astype(np.int64))
    assert np.array_equal(ref.accepting, nat.accepting)


def _permuted(trans: np.ndarray, acc: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(len(trans))
    inv = np.argsort(order)
    t = trans[order]
    return np.where(t >= 0, inv[np.maximum(t, 0)], -1), acc[order]


def _cycled(base: np.ndarray, acc: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` copies of ``base``, each transition going to the next copy (mod ``k``): copy
    ``i`` of state ``s`` is equivalent to every other copy of ``s``, and no two rows are
    identical (the premerge merges nothing; the refinement must)."""
    n = len(base)
    out = np.full((n * k, base.shape[1]), -1, dtype=np.int64)
    for i in range(k):
        nxt = (i + 1) % k
        out[i * n:(i + 1) * n] = np.where(base >= 0, base + nxt * n, -1)
    return out, np.tile(acc, k)


@pytest.mark.parametrize("seed", range(60))
def test_cycled_copies(seed):
    rng = np.random.default_rng(seed)
    n, nsym, k = int(rng.integers(1, 25)), int(rng.integers(1, 6)), int(rng.integers(2, 5))
    base = rng.integers(-1, n, size=(n, nsym))
    base[rng.random((n, nsym)) < rng.random()] = -1
    acc = rng.random(n) < rng.random()
    trans, accs = _cycled(base, acc, k)
    _same(*_permuted(trans, accs, rng))


@pytest.mark.parametrize("seed", range(40))
def test_same_keys_not_equivalent(seed):
    """Two rings of equal length, every state with the same symbols and distance class, one
    ring accepting at a different place: the initial partition cannot tell the states apart,
    the refinement must."""
    rng = np.random.default_rng(1000 + seed)
    r = int(rng.integers(2, 12))
    nsym = int(rng.integers(1, 4))
    trans = np.full((2 * r, nsym), -1, dtype=np.int64)
    for ring in range(2):
        for i in range(r):
            trans[ring * r + i, :] = ring * r + (i + 1) % r
    acc = np.zeros(2 * r, dtype=bool)
    acc[0] = True
    acc[r + int(rng.integers(0, r))] = True
    _same(*_permuted(trans, acc, rng))


@pytest.mark.parametrize("seed", range(40))
def test_dead_states_and_missing_moves(seed):
    """States that differ only by a move into a dead state where the other has none (the same
    language, different classes here), and dead cycles."""
    rng = np.random.default_rng(2000 + seed)
    n, nsym = int(rng.integers(2, 20)), int(rng.integers(1, 5))
    live = rng.integers(-1, n, size=(n, nsym))
    live[rng.random((n, nsym)) < 0.5] = -1
    acc = rng.random(n) < 0.3
    dead = int(rng.integers(1, 4))  # dead states n .. n + dead - 1, in a cycle
    trans = np.full((n + dead, nsym), -1, dtype=np.int64)
    trans[:n] = live
    for d in range(dead):
        trans[n + d, 0] = n + (d + 1) % dead
    into_dead = (rng.random((n, nsym)) < 0.2) & (live < 0)
    trans[:n][into_dead] = n + rng.integers(0, dead, size=into_dead.sum())
    _same(*_permuted(trans, np.concatenate([acc, np.zeros(dead, dtype=bool)]), rng))


def test_a_large_cycled_table():
    """Sizes where the block and cord arrays no longer fit a cache line or two."""
    rng = np.random.default_rng(7)
    n, nsym = 400, 12
    base = rng.integers(-1, n, size=(n, nsym))
    base[rng.random((n, nsym)) < 0.7] = -1
    acc = rng.random(n) < 0.2
    trans, accs = _cycled(base, acc, 3)
    _same(*_permuted(trans, accs, rng))
