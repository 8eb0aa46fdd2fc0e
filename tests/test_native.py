"""Native kernels against numpy references, on every implementation this CPU supports."""

from __future__ import annotations

import subprocess
import shutil
from pathlib import Path

import numpy as np
import pytest

from decoding import _native

IMPLS = [i for i in ("scalar", "sse2", "avx2", "avx512", "neon") if _native.impl_supported(i)]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=IMPLS)
def impl(request):
    before = _native.impl()
    _native.set_impl(request.param)
    yield request.param
    _native.set_impl(before)


def _mask(rng, n):
    w = rng.integers(0, 2**32, (n + 31) // 32, dtype=np.uint32)
    w[::4] = 0xFFFFFFFF
    w[1::5] = 0
    return w


def _bits(m, n):
    return np.unpackbits(m.view(np.uint8), bitorder="little")[:n].astype(bool)


def test_best_impl_is_active_by_default():
    assert _native.impl() in IMPLS
    assert _native.impl() != "scalar" or IMPLS == ["scalar"]


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, 49152, 262144 + 5])
def test_apply_contiguous(impl, n):
    rng = np.random.default_rng(n)
    m = _mask(rng, n)
    x = rng.standard_normal(n).astype(np.float32)
    ref = np.where(_bits(m, n), x, -np.inf).astype(np.float32)
    _native.apply_mask(x, m)
    assert np.array_equal(x, ref)


@pytest.mark.parametrize("n", [7, 32, 49152, 262144])
def test_apply_strided_llama_token_data(impl, n):
    rng = np.random.default_rng(n)
    m = _mask(rng, n)
    rec = np.zeros(n, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
    rec["id"] = np.arange(n)
    rec["logit"] = rng.standard_normal(n)
    rec["p"] = 0.25
    scores = rec["logit"]
    assert scores.strides == (12,)
    ref = np.where(_bits(m, n), scores, -np.inf).astype(np.float32)
    _native.apply_mask(scores, m)
    assert np.array_equal(rec["logit"], ref)
    assert np.array_equal(rec["id"], np.arange(n)) and np.all(rec["p"] == 0.25)


def test_and_or_count(impl):
    rng = np.random.default_rng(1)
    a, b = _mask(rng, 5000), _mask(rng, 5000)
    d = np.empty_like(a)
    _native.mask_and(d, a, b)
    assert np.array_equal(d, a & b)
    _native.mask_or(d, a, b)
    assert np.array_equal(d, a | b)
    assert _native.mask_count(a, 5000) == int(_bits(a, 5000).sum())


@pytest.mark.parametrize("bad, msg", [
    (lambda: _native.apply_mask(np.zeros(100, np.float64), np.zeros(4, np.uint32)), "format 'f'"),
    (lambda: _native.apply_mask(np.zeros(200, np.float32), np.zeros(4, np.uint32)), "smaller vocabulary"),
    (lambda: _native.apply_mask(np.zeros(10, np.float32), np.zeros(4, np.int64)), "format 'I'"),
    (lambda: _native.mask_and(np.zeros(3, np.uint32), np.zeros(4, np.uint32), np.zeros(4, np.uint32)), "lengths differ"),
    (lambda: _native.set_impl("sve9"), "not available"),
])
def test_bad_buffers_get_clear_errors(bad, msg):
    with pytest.raises((TypeError, ValueError), match=msg):
        bad()


def test_readonly_logits_rejected():
    x = np.zeros(64, np.float32)
    x.setflags(write=False)
    with pytest.raises(TypeError, match="writable"):
        _native.apply_mask(x, np.zeros(2, np.uint32))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_driver_host():
    r = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), "test-host"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all native tests passed" in r.stdout
