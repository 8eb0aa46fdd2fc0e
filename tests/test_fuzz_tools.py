"""The fuzz harness itself (evals/fuzz): shrinkers, pointer resolution, outcome classes,
and the subprocess worker's timeout, crash and memory handling."""

from __future__ import annotations

import json

import pytest

from evals.fuzz.shrink import Budget, shrink_json, shrink_text
from evals.fuzz.targets import resolve_pointer, run_input
from evals.fuzz.worker import Worker


def test_shrink_json_keeps_the_failure_and_drops_the_rest():
    value = {"a": {"b": [1, {"bad": [2, 3, 4]}], "c": "x" * 50}, "d": list(range(30))}
    out = shrink_json(value, lambda v: '"bad"' in json.dumps(v), Budget(500, 10))
    assert '"bad"' in json.dumps(out)
    assert len(json.dumps(out)) <= len('{"bad": []}')


def test_shrink_text_finds_the_core():
    text = "prose " * 40 + "<x>" + " more" * 40
    assert shrink_text(text, lambda t: "<x>" in t, Budget(2000, 10)) == "<x>"


def test_shrink_respects_the_budget():
    calls = []
    shrink_text("a" * 1000, lambda t: calls.append(1) or True, Budget(5, 10))
    assert len(calls) <= 5


@pytest.mark.parametrize("ptr,ok", [("", True), ("#", True), ("/a", True), ("/a/0/b~1c", True), ("/a/1", False),
                                    ("/x", False), ("a", False), ("/a/0/b~1c/z", False)])
def test_resolve_pointer(ptr, ok):
    assert resolve_pointer({"a": [{"b/c": 1}]}, ptr) is ok


def test_outcome_classes_in_process():
    assert run_input("schema", {"schema": {"type": "integer", "minimum": 0, "maximum": 9}}).kind == "ok"
    bad = run_input("schema", {"schema": {"type": 5}})
    assert bad.kind == "located", bad
    assert run_input("_selftest", {"do": "raise"}).signature.startswith("TypeError @ ")
    assert run_input("gbnf", {"gbnf": 'root ::= "a" (\n', "llama": False}).kind == "located"


def test_worker_hang_crash_restart_and_memory_cap():
    w = Worker(timeout=2.0, memory=2 * 1024 ** 3)
    try:
        assert w.run("_selftest", {"do": "ok"})["kind"] == "ok"
        hang = w.run("_selftest", {"do": "sleep", "arg": 10})
        assert hang["kind"] == "hang" and "targets.py:_selftest" in hang["signature"], hang
        died = w.run("_selftest", {"do": "abort"})
        assert died["kind"] == "crash" and died["signature"].startswith("worker died (signal 6)"), died
        assert w.run("_selftest", {"do": "ok"})["kind"] == "ok"          # restarted
        mem = w.run("_selftest", {"do": "alloc", "arg": 8 * 1024 ** 3})  # over the 2 GB cap
        assert mem["kind"] == "crash" and mem["signature"].startswith("MemoryError"), mem
        assert w.restarts == 2
    finally:
        w.close()
