"""Ratchet: the JSON-Schema-Test-Suite (draft2020-12 and the draft7 core files) and a fixed
JSONSchemaBench sample must not regress against evals/baselines/ (regenerate with ``python -m evals.conformance.run --update [--suite draft7]``)."""

from __future__ import annotations

import json

from evals.conformance import run

SAMPLE_PER_SPLIT = 6


def test_suite_no_regression_and_no_invalid_accepted():
    base = json.loads(run.SUITE_BASE.read_text())
    res = run.run_suite(timeout=10.0)
    assert run.regressions(res, base) == []
    assert sum(f["invalid_accepted"] for f in res["files"].values()) == 0
    # a compile stopped by the clock is machine load, not a regression (as in regressions())
    timeouts = sum(1 for r in res["schemas"].values() if r["status"] == "timeout")
    assert sum(f["compiled"] for f in res["files"].values()) + timeouts >= sum(
        f["compiled"] for f in base["files"].values())


def test_draft7_suite_no_regression_and_no_invalid_accepted():
    """The draft7 core files (evals/conformance/fixtures/draft7; about 25 s)."""
    base = json.loads(run.DRAFT7_BASE.read_text())
    res = run.run_suite(timeout=10.0, suite="draft7")
    assert base["suite"] == res["suite"] == "draft7" and base["mode"] == res["mode"]
    assert run.regressions(res, base) == []
    assert sum(f["invalid_accepted"] for f in res["files"].values()) == 0
    timeouts = sum(1 for r in res["schemas"].values() if r["status"] == "timeout")
    assert sum(f["compiled"] for f in res["files"].values()) + timeouts >= sum(
        f["compiled"] for f in base["files"].values())


def test_bench_sample_no_regression():
    base = json.loads(run.BENCH_BASE.read_text())
    assert base["mode"] == run.BENCH_OPTIONS  # baselines record the measuring mode
    # a deterministic sample of schemas already in the baseline, fast ones first
    picked = {}
    for split in run.SPLITS:
        keys = sorted((k for k, r in base["schemas"].items()
                       if k.startswith(split + "/") and r["status"] == "compiled" and r["ms"] < 300),
                      key=lambda k: k)
        picked.update({k: base["schemas"][k] for k in keys[:SAMPLE_PER_SPLIT]})
    assert len(picked) >= 3 * SAMPLE_PER_SPLIT
    new = {}
    for key in picked:
        split, name = key.split("/", 1)
        data = json.loads((run.BENCH_DIR / split / name).read_text())
        new[key] = run.check_schema(data["schema"], data["tests"], timeout=10.0, options=run.BENCH_OPTIONS)
    assert run.regressions({"schemas": new}, {"schemas": picked}) == []
