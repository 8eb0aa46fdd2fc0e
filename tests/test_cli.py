"""Command line (subprocess): compile / inspect / gbnf, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, vocab_path

GPT2 = str(vocab_path("gpt-2"))
GRAMMARS = ROOT / "grammars"


def run(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "decoding", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifacts")
    gb = out / "digits.gbnf"
    gb.write_text('# two digits\nroot ::= [0-9] [0-9]\n')
    p = run("compile", str(GRAMMARS / "get_weather.json"), str(gb), "--vocab", GPT2, "-o", str(out))
    assert p.returncode == 0, p.stderr
    return out, p


def test_compile_writes_artifacts_and_skips_up_to_date(built):
    out, p = built
    assert (out / "get_weather.gdc").is_file() and (out / "digits.gdc").is_file()
    assert "get_weather.gdc:" in p.stdout and "distinct masks" in p.stdout
    again = run("compile", str(GRAMMARS / "get_weather.json"), "--vocab", GPT2, "-o", str(out))
    assert again.returncode == 0 and "up to date" in again.stdout


def test_compile_manifest_with_dtd_spec(tmp_path):
    m = tmp_path / "manifest.json"
    m.write_text(json.dumps({"grammars": [
        {"name": "uq", "source": str(GRAMMARS / "user_query.dtd"), "kind": "dtd", "options": {"root": "request"}},
        {"name": "user_query", "kind": "dtd", "spec": str(GRAMMARS / "xml_grammars.json")}]}))
    p = run("compile", "--manifest", str(m), "--vocab", GPT2, "-o", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert {f.name for f in (tmp_path / "out").iterdir()} == {"uq.gdc", "user_query.gdc"}


def test_inspect_reports_states_masks_bytes_fingerprint(built):
    out, _ = built
    p = run("inspect", str(out / "get_weather.gdc"))
    assert p.returncode == 0, p.stderr
    for word in ("states", "distinct masks", "bytes", "fingerprint", "grammar key", "sha256 ok"):
        assert word in p.stdout
    j = run("inspect", "--json", str(out / "digits.gdc"))
    h = json.loads(j.stdout)
    assert h["dfa"]["n_states"] == 3 and h["vocab"]["n_tokens"] == 50257 and h["bytes"] > 0


def test_gbnf_prints_grammar():
    p = run("gbnf", str(GRAMMARS / "user_query.dtd"), "--root", "request")
    assert p.returncode == 0, p.stderr
    assert "::=" in p.stdout and "<request>" in p.stdout


@pytest.mark.parametrize("case", ["bad-schema", "no-root", "missing", "bad-gbnf", "bad-option"])
def test_errors_are_one_line_with_exit_code_2(tmp_path, case):
    if case == "bad-schema":
        f = tmp_path / "s.json"
        f.write_text('{"type": "object", "properties": {"a": {"type": "nope"}}}')
        assert_one_line_error(run("gbnf", str(f)), str(f), "/properties/a", "type")
    elif case == "no-root":
        assert_one_line_error(run("gbnf", str(GRAMMARS / "user_query.dtd")), "user_query.dtd", "root")
    elif case == "missing":
        assert_one_line_error(run("compile", str(tmp_path / "nope.json"), "--vocab", GPT2, "-o", str(tmp_path)),
                              "nope.json", "no such file")
    elif case == "bad-gbnf":
        f = tmp_path / "g.gbnf"
        f.write_text('root ::= "a" |\n  ( "b"\n')
        assert_one_line_error(run("gbnf", str(f)), f"{f}:2:")
    else:
        assert_one_line_error(run("gbnf", str(GRAMMARS / "get_weather.json"), "-O", "colour=red"),
                              "get_weather.json", "unknown option 'colour'")


def test_corrupt_artifact_is_a_one_line_error(built, tmp_path):
    out, _ = built
    raw = bytearray((out / "digits.gdc").read_bytes())
    raw[-100] ^= 1
    bad = tmp_path / "bad.gdc"
    bad.write_bytes(bytes(raw))
    assert_one_line_error(run("inspect", str(bad)), str(bad), "checksum")


def test_compile_options_reach_the_back_end(tmp_path):
    assert_one_line_error(run("compile", str(GRAMMARS / "get_weather.json"), "--vocab", GPT2, "-o", str(tmp_path),
                              "-O", "max_states=5"), "get_weather.json", "max_states=5")
