"""Mask benchmark driver (evals/bench/maskbench.py): selection, statistics, our engine's
timed walk on a hand-built vocabulary, and peers reported as unavailable, never dropped."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from decoding.vocab import Vocab
from evals.bench.engines import Engine, Ours, Unavailable
from evals.bench.maskbench import render_markdown, run_engine, select_schemas, stats_us

SCHEMA = {"type": "object", "properties": {"a": {"type": "boolean"}, "n": {"type": "integer"}},
          "required": ["a"]}


def _vocab() -> Vocab:
    toks = [b""] + [bytes([c]) for c in range(0x20, 0x7F)] + [b'{"', b'":', b"true", b"false", b',"', b"12"]
    return Vocab.from_bytes(toks, eog_ids=[0])


def _case(v: Vocab, tests: list[tuple[bool, bytes]]) -> dict:
    return {"file": "t.json", "schema": SCHEMA,
            "tests": [(ok, [("canonical", b, v.greedy(b))]) for ok, b in tests]}


def test_select_schemas_evenly_spaced(tmp_path: Path) -> None:
    for i in range(10):
        (tmp_path / f"s{i:02d}.json").write_text("{}")
    names = [p.name for p in select_schemas(tmp_path, 4)]
    assert names == ["s00.json", "s02.json", "s05.json", "s07.json"]
    assert len(select_schemas(tmp_path, None)) == 10
    assert len(select_schemas(tmp_path, 50)) == 10


def test_stats_us() -> None:
    s = stats_us([1000, 2000, 3000, 4000])
    assert s["n"] == 4 and s["mean"] == pytest.approx(2.5) and s["max"] == pytest.approx(4.0)
    assert stats_us([])["mean"] is None


@pytest.mark.parametrize("valid,invalid", [
    ([b'{"a":true}', b'{"a":false,"n":12}'], [b'{"n":12}', b'{"a":1}', b'{"a":true']),
])
def test_ours_walk_accepts_valid_rejects_invalid(valid: list[bytes], invalid: list[bytes]) -> None:
    v = _vocab()
    case = _case(v, [(True, b) for b in valid] + [(False, b) for b in invalid])
    r = run_engine(Ours(), v, 0, [case], timeout=30, budget=None, log=io.StringIO())
    assert r["status"] == "ok"
    assert r["schemas_compiled"] == 1
    assert (r["valid_accepted"], r["valid_total"]) == (len(valid), len(valid))
    assert (r["invalid_accepted"], r["invalid_total"]) == (0, len(invalid))
    steps = sum(len(v.greedy(b)) + 1 for b in valid)  # every token, plus the final mask
    assert r["mask_us"]["n"] == steps and r["apply_us"]["n"] == steps
    assert r["mask_first_visit_us"]["n"] + r["mask_memoized_us"]["n"] == steps
    assert r["mask_memoized_us"]["n"] > 0  # the second instance revisits states


def test_rejected_valid_instance_is_counted() -> None:
    v = _vocab()
    r = run_engine(Ours(), v, 0, [_case(v, [(True, b'{"n":12,"a":true}')])], timeout=30, budget=None,
                   log=io.StringIO())
    assert r["valid_accepted"] == 0 and r["forms_used"] == {"rejected": 1}


@pytest.mark.parametrize("backend", ["dfa", "pushdown"])
def test_ours_runs_every_column_on_either_backend(backend: str) -> None:
    """The bench uses only the back-end contract: a pushdown-compiled schema fills every
    column like a DFA-compiled one, and the back-end is recorded and counted."""
    v = _vocab()
    case = _case(v, [(True, b'{"a":true}'), (True, b'{"a":false,"n":12}'), (False, b'{"a":1}')])
    r = run_engine(Ours(backend=backend), v, 0, [case], timeout=30, budget=None, log=io.StringIO())
    assert r["status"] == "ok" and r["schemas_compiled"] == 1
    assert r["per_schema"][0]["backend"] == backend
    assert r["backends"][backend]["schemas"] == 1 and set(r["backends"]) == {backend}
    assert (r["valid_accepted"], r["invalid_accepted"]) == (2, 0)
    assert r["memory"]["grammars_native_mb"] is not None and r["memory"]["setup_native_mb"] is not None
    assert r["mask_first_visit_us"]["n"] > 0 and r["mask_memoized_us"]["n"] > 0
    res = {"split": "S", "vocab": "V", "n_tokens": v.n_tokens, "n_schemas": 1, "command": "c",
           "engines": {"ours": r}, "machine": {"cpu": "x", "cpus": 2, "load_start": "0", "load_end": "0"}}
    md = render_markdown(res)
    assert f"| {backend} 1 |" in md and f"| {backend} | 1 |" in md


class _Raises(Ours):
    def walk(self, *a, **k):
        raise RuntimeError("limit hit")


def test_error_while_walking_is_counted_not_fatal() -> None:
    v = _vocab()
    r = run_engine(_Raises(), v, 0, [_case(v, [(True, b'{"a":true}'), (True, b'{"a":false}')])], timeout=30,
                   budget=None, log=io.StringIO())
    assert r["status"] == "ok" and r["valid_accepted"] == 0 and r["forms_used"] == {"rejected": 2}
    assert r["per_schema"][0]["walk_errors"] == ["RuntimeError: limit hit"] * 2
    assert r["mask_us"]["n"] == 0  # the partial walks' samples are dropped


class _Missing(Engine):
    name = "missing"

    def setup(self, vocab: Vocab) -> None:
        raise Unavailable("not installed (No module named 'missing')")


def test_unavailable_peer_is_reported_not_dropped() -> None:
    v = _vocab()
    r = run_engine(_Missing(), v, 0, [_case(v, [(True, b'{"a":true}')])], timeout=30, budget=None,
                   log=io.StringIO())
    assert r == {"status": "unavailable: not installed (No module named 'missing')"}
    res = {"split": "S", "vocab": "V", "n_tokens": 1, "n_schemas": 1, "command": "c", "engines": {"missing": r},
           "machine": {"cpu": "x", "cpus": 2, "load_start": "0", "load_end": "0"}}
    md = render_markdown(res)
    assert "| missing | unavailable: not installed" in md


class _Logged(Ours):
    """Ours, recording the order of its compiles in a shared list."""

    def __init__(self, name: str, log: list, backend: str = "auto") -> None:
        super().__init__(backend)
        self.name, self._log = name, log

    def compile(self, schema):
        self._log.append(self.name)
        return super().compile(schema)


def test_interleaved_pass_rotates_engines_and_walks_what_the_sequential_run_walked() -> None:
    """``--interleave``: each schema compiled afresh by every engine, the order rotated by one
    per schema, and the same instances walked in the same forms as the sequential run (the
    same number of mask steps)."""
    from evals.bench.maskbench import run_interleaved

    v = _vocab()
    cases = [dict(_case(v, [(True, b'{"a":true}'), (True, b'{"a":false,"n":12}'), (False, b'{"a":1}')]),
                  file=f"t{i}.json") for i in range(3)]
    order: list = []
    engs = [("ours", _Logged("ours", order)), ("ours-dfa", _Logged("ours-dfa", order, "dfa"))]
    seq = {}
    for name, e in engs:
        e.setup(v)
        seq[name] = run_engine(e, v, 0, cases, timeout=30, budget=None, log=io.StringIO())
    walked = {n: {r["file"]: r["walked"] for r in seq[n]["per_schema"]} for n, _ in engs}
    assert walked["ours"]["t0.json"] == [0, 0]  # (both valid instances in their first form)
    order.clear()
    il = run_interleaved(engs, v, 0, cases, walked, timeout=30)
    assert order == ["ours", "ours-dfa", "ours-dfa", "ours", "ours", "ours-dfa"]
    assert il["schemas_common"] == 3
    for name, _ in engs:
        e = il["engines"][name]
        assert e["schemas"] == 3 and e["compile_ms"]["n"] == 3
        assert e["mask_us"]["n"] == seq[name]["mask_us"]["n"]  # every step walked again
        assert e["common_mask_us"]["n"] == e["mask_us"]["n"]
    assert il["ratios"]["compile_p50"]["best_peer"] == "ours-dfa"
    res = {"split": "S", "vocab": "V", "n_tokens": v.n_tokens, "n_schemas": 3, "command": "c",
           "engines": seq, "interleaved": il,
           "machine": {"cpu": "x", "cpus": 2, "load_start": "0", "load_end": "0"}}
    md = render_markdown(res)
    assert "Interleaved pass" in md and "| interleaved metric |" in md and "| ours-dfa | 3 |" in md
