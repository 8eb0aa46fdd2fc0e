"""Native kernels against numpy references, on every implementation this CPU supports;
the kernel choice lives in the module state; the C core holds no mutable global."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from decoding import _native

IMPLS = [i for i in ("scalar", "sse2", "avx2", "avx512", "neon") if _native.impl_supported(i)]
ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "native"
CHECK_GLOBALS = NATIVE / "tests" / "check_no_globals.sh"
HAVE_CC_NM = shutil.which("cc") is not None and shutil.which("nm") is not None


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


def test_mask_mark_next():
    """The distinct states of a mask's set bits, as numpy reads them (entries outside the mark
    skipped), below and at the full length."""
    rng = np.random.default_rng(3)
    for n in (5000, 4999, 33):
        m = _mask(rng, 5000)
        nxt = rng.integers(-2, 60, 5024).astype(np.int32)
        mark = np.zeros(50, np.uint8)
        got = _native.mask_mark_next(m, n, nxt, mark)
        ids = np.flatnonzero(_bits(m, n))
        want = np.zeros(50, np.uint8)
        st = nxt[ids]
        want[st[(st >= 0) & (st < 50)]] = 1
        assert got == len(ids) and np.array_equal(mark, want)


@pytest.mark.parametrize("bad, msg", [
    (lambda: _native.mask_mark_next(np.zeros(4, np.uint32), 129, np.zeros(128, np.int32), np.zeros(4, np.uint8)),
     "outside"),
    (lambda: _native.mask_mark_next(np.zeros(4, np.uint32), 64, np.zeros(40, np.int32), np.zeros(4, np.uint8)),
     "outside"),
    (lambda: _native.mask_mark_next(np.zeros(4, np.uint32), 64, np.zeros(128, np.int64), np.zeros(4, np.uint8)),
     "format 'i'"),
    (lambda: _native.mask_mark_next(np.zeros(4, np.uint32), 64, np.zeros(128, np.int32), np.zeros(4, bool)),
     "format 'B'|expected"),
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


@pytest.mark.skipif(not HAVE_CC_NM, reason="no C compiler or nm")
def test_c_driver_host():
    """The C driver, preceded by the Makefile's own no-mutable-globals check of the core."""
    r = subprocess.run(["make", "-s", "-C", str(ROOT / "native"), "test-host"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all native tests passed" in r.stdout
    assert "no mutable globals" in r.stdout


def test_set_impl_switches_and_bad_name_keeps_choice():
    before = _native.impl()
    try:
        for name in IMPLS:
            _native.set_impl(name)
            assert _native.impl() == name
        with pytest.raises(ValueError, match="'sve9' is not available"):
            _native.set_impl("sve9")
        assert _native.impl() == IMPLS[-1]
    finally:
        _native.set_impl(before)


def _impl_in_fresh_process(env_value):
    env = {k: v for k, v in os.environ.items() if k != "GD_NATIVE_IMPL"}
    if env_value is not None:
        env["GD_NATIVE_IMPL"] = env_value
    r = subprocess.run([sys.executable, "-c", "from decoding import _native; print(_native.impl())"],
                       capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return r.stdout.strip()


def test_env_override_picks_the_initial_impl():
    best = _impl_in_fresh_process(None)
    assert best == IMPLS[-1]                                # the preferred one this CPU runs
    assert _impl_in_fresh_process("scalar") == "scalar"
    assert _impl_in_fresh_process("sve9") == best          # unknown names are ignored


# ---- no process-global mutable state -------------------------------------------------------

def _objects(tmp_path, sources, extra=()):
    """Compile each source to an object without PIC (const tables are then .rodata)."""
    objs = []
    for src in sources:
        obj = tmp_path / (src.stem + ".o")
        subprocess.run(["cc", "-O2", "-std=c11", "-fno-pic", "-fno-pie", "-I", str(NATIVE / "include"),
                        *extra, "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
        objs.append(obj)
    return objs


def _check_globals(objs):
    return subprocess.run(["sh", str(CHECK_GLOBALS), "nm", *map(str, objs)], capture_output=True, text=True)


@pytest.mark.skipif(not HAVE_CC_NM, reason="no C compiler or nm")
def test_core_has_no_mutable_globals(tmp_path):
    objs = _objects(tmp_path, sorted((NATIVE / "src").glob("*.c")))
    r = _check_globals(objs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"no mutable globals in {len(objs)} objects" in r.stdout


@pytest.mark.skipif(not HAVE_CC_NM, reason="no C compiler or nm")
def test_globals_check_fails_on_mutable_state(tmp_path):
    """The check can fail: a lazily filled table, a cached choice and an initialized global."""
    src = tmp_path / "decoy.c"
    src.write_text("static unsigned short lut[32]; static int ready; int chosen = 1;\n"
                   "static const int ok_table[2] = {1, 2};\n"
                   "int f(int i) { if (!ready) { lut[i] = 1; ready = 1; } return lut[i] + chosen + ok_table[i & 1]; }\n")
    r = _check_globals(_objects(tmp_path, [src]))
    assert r.returncode == 1
    for sym in ("lut", "ready", "chosen"):
        assert f" {sym}\n" in r.stdout + "\n", r.stdout
    assert "ok_table" not in r.stdout


@pytest.mark.skipif(not HAVE_CC_NM, reason="no C compiler or nm")
def test_binding_keeps_its_choice_in_module_state(tmp_path):
    """binding.c's only writable statics are the definition tables CPython's API requires."""
    (obj,) = _objects(tmp_path, [NATIVE / "binding.c"], ["-I", sysconfig.get_paths()["include"]])
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    writable = {line.split()[-1].split(".")[0] for line in out.splitlines()
                if len(line.split()) == 3 and line.split()[1] in "bBdDCgGsS"}
    assert writable <= {"methods", "module", "slots", "kwlist"}, writable
