"""Smoke version of the load benchmark (``python -m evals.server_load``, docs/server.md):
the server started as ``python -m decoding serve`` on 127.0.0.1, 7 concurrent clients x 1
request (one of each kind: five schemas, the DTD, plain chat), constrained then not; and the
answer check that the benchmark's 0-invalid / 0-cross figures rest on."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("lxml")
pytest.importorskip("openai")

from evals.server_load.workload import KINDS, SCHEMAS, check, jobs  # noqa: E402

SAMPLES = {
    "city": '{"city_name": "Lima", "temp_c": 21}',
    "book": '{"book_title": "Dune", "year": 1965}',
    "shop": '{"shop_kind": "cafe", "is_open": true}',
    "tags": '{"tag_list": ["sea", "sun"]}',
    "point": '{"point_xy": {"x": 1.5, "y": -2}}',
    "dtd": "<request><user_id>42</user_id><action>query</action></request>",
}


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_each_answer_is_checked_against_its_own_grammar_only(kind):
    assert check(kind, SAMPLES[kind]) == "ok"
    for other, text in SAMPLES.items():  # another request's grammar: detected as such
        if other != kind:
            assert check(kind, text) == "cross", (kind, other)
    assert check(kind, "Sure! Here it is.") == "invalid"
    assert check("plain", SAMPLES[kind]) == "cross"


@pytest.mark.parametrize("kind, text", [
    ("city", '{"city_name": "Lima", "temp_c": 21, "year": 3}'),     # additionalProperties
    ("city", '{"city_name": "Lima", "temp_c": 99}'),                # maximum
    ("tags", '{"tag_list": ["a", "b", "c", "d"]}'),                 # maxItems
    ("dtd", "<request><action>query</action></request>"),          # DTD content model
    ("dtd", "<request><user_id>4</user_id><action>query</action>"),  # not well-formed
])
def test_invalid_answers_are_invalid(kind, text):
    assert check(kind, text) == "invalid"


def test_the_schemas_have_distinct_required_keys():
    keys = [frozenset(s["required"]) for s in SCHEMAS.values()]
    assert all(not (a & b) for i, a in enumerate(keys) for b in keys[i + 1:])
    assert all(s.get("additionalProperties") is False for s in SCHEMAS.values())
    assert [j.kind for row in jobs(7, 1, 16, 40) for j in row] == list(KINDS)


def _readme_server_snippet() -> str:
    """The README's server section: its `python -m decoding serve` line and its Python block."""
    from evals.server_load.workload import ROOT

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Server"):]
    section = section[:section.index("\n## ", 5)]
    assert "python -m decoding serve" in section
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.model
def test_readme_snippet_and_smoke_load_against_a_started_server(tmp_path, capsys):
    """``python -m decoding serve`` started as the README says; the README's openai snippet
    runs against it (its port swapped); then the smoke load."""
    import jsonschema

    from evals.server_load.run import _free_port, run, start_server, stop_server

    port = _free_port()
    proc = start_server("smollm2", port, 16, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    try:
        code = _readme_server_snippet()
        assert "http://127.0.0.1:8000/v1" in code
        ns: dict = {}
        exec(compile(code.replace("http://127.0.0.1:8000", base), "README.md", "exec"), ns)  # noqa: S102
        jsonschema.validate(json.loads(ns["r"].choices[0].message.content), ns["schema"])
        ns["client"].close()  # no idle keep-alive connection for the server's graceful shutdown to wait on
        r = run(clients=7, per_client=1, blocks=1, max_tokens=16, dtd_max_tokens=40, base_url=base, out=tmp_path)
    finally:
        stop_server(proc)
    con, free = r["constrained"], r["unconstrained"]
    assert con["requests"] == free["requests"] == 7
    assert (con["lost"], con["invalid"], con["cross"], free["lost"]) == (0, 0, 0, 0), con["failures"]
    assert con["ok"] == 7 and con["completion_tokens"] > 0 and free["completion_tokens"] > 0
    assert r["ratios_constrained_over_unconstrained"]["throughput_tok_s"] > 0
    saved = json.loads((tmp_path / "server_load.json").read_text())
    assert saved["constrained"]["ok"] == 7 and "| lost | 0 | 0 |" in (tmp_path / "server_load.md").read_text()
