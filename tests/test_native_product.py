"""The intersection/difference product in C (``gd_dfa_product``, used by
``automaton._product``) against the Python reference (``GD_PURE_PYTHON_DFA=1``): the same
pair table (numbering included) before minimisation, the same minimal DFA after, on random
DFAs over random byte classes, with ``b`` empty, and under a state limit."""

from __future__ import annotations

import random

import numpy as np
import pytest

import decoding.backends.automaton as A
from decoding.errors import LimitError

INTER = dict(keep_b_dead=False, accept=lambda p, q: p and q)
DIFF = dict(keep_b_dead=True, accept=lambda p, q: p and not q)


def _random_dfa(rng: random.Random, n: int, ncls: int) -> A.DFA:
    cuts = sorted(rng.sample(range(1, 256), ncls - 1))
    bc = np.zeros(256, dtype=np.uint16)
    for c in cuts:
        bc[c:] += 1
    trans = np.array([[rng.randrange(n) if rng.random() < 0.6 else -1 for _ in range(ncls)] for _ in range(n)],
                     dtype=np.int32)
    acc = np.array([rng.random() < 0.3 for _ in range(n)], dtype=bool)
    return A.DFA(bc, trans, acc, (), ncls)


def _run(monkeypatch, pure: bool, a, b, kw, **extra):
    monkeypatch.setenv("GD_PURE_PYTHON_DFA", "1" if pure else "0")
    tables = []
    real = A._minimize
    monkeypatch.setattr(A, "_minimize", lambda d, dl: (tables.append(d), real(d, dl))[1])
    out = A._product(a, b, max_states=extra.get("max_states", 100_000),
                     deadline=A._Deadline(60.0, "test"), where="test", **kw)
    monkeypatch.setattr(A, "_minimize", real)
    return out, tables


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("op", ["inter", "diff", "diff_empty"])
def test_same_product_as_python(seed: int, op: str, monkeypatch) -> None:
    rng = random.Random(seed)
    a = _random_dfa(rng, rng.randrange(1, 30), rng.randrange(1, 9))
    b = None if op == "diff_empty" else _random_dfa(rng, rng.randrange(1, 30), rng.randrange(1, 9))
    kw = INTER if op == "inter" else DIFF
    py, py_tables = _run(monkeypatch, True, a, b, kw)
    c, c_tables = _run(monkeypatch, False, a, b, kw)
    assert (py is None) == (c is None)
    assert len(py_tables) == len(c_tables)
    for x, y in zip(py_tables, c_tables):  # the pruned pair tables, before minimisation
        assert np.array_equal(x.trans, y.trans) and np.array_equal(x.accepting, y.accepting)
        assert np.array_equal(x.byte_class, y.byte_class)
    if py is not None:
        assert np.array_equal(py.trans, c.trans) and np.array_equal(py.accepting, c.accepting)


def test_state_limit_is_the_same_error(monkeypatch) -> None:
    rng = random.Random(5)
    a = _random_dfa(rng, 40, 6)
    b = _random_dfa(rng, 40, 6)
    msgs = []
    for pure in (True, False):
        with pytest.raises(LimitError) as e:
            _run(monkeypatch, pure, a, b, DIFF, max_states=3)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "max_states=3" in msgs[0]
