"""decoding.heap: returning the C heap's free memory is possible here (glibc) and switchable off."""

from __future__ import annotations

import sys

import pytest

from decoding import heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim is Linux-only")
def test_release_on_glibc_and_the_switch(monkeypatch):
    assert heap.release_free_memory() is True
    monkeypatch.setenv("GD_NO_MALLOC_TRIM", "1")
    assert heap.release_free_memory() is False


def test_a_large_compile_releases_and_a_small_one_does_not(monkeypatch):
    from conftest import get_vocab
    from decoding import Compiler

    calls = []
    monkeypatch.setattr("decoding.compiler.release_free_memory", lambda: calls.append(1) or True)
    c = Compiler(get_vocab("gpt-2"), cache=False)
    monkeypatch.setattr("decoding.compiler.TRIM_AFTER_SECONDS", 1e9)
    c.compile_json_schema({"type": "string"})
    monkeypatch.setattr("decoding.compiler.TRIM_AFTER_SECONDS", 0.0)
    c.compile_json_schema({"type": "integer"})
    assert len(calls) == 1
