"""schemathesis against the live server's OpenAPI document (``/openapi.json``): every generated
request (valid and invalid bodies, paths, methods) gets a non-5xx answer, except the
documented 503 (queue full, ``code: queue_full``).

One uvicorn server in a thread on 127.0.0.1 over SmolLM2 (``tests/server_fixtures.serving``: its
own app, on the model the other modules use), with small ``max_tokens`` limits
so that the generated requests that do generate stay fast; a bounded number of examples per
operation and mode (``SCHEMATHESIS_EXAMPLES``, default 15: 78 requests in all, ~15 s on a 2-core
machine, most of it schemathesis generating bodies rather than the server answering; 25 make 128
requests, ~3 s more) keeps the file short.  The examples are derandomized: every run sends the
same ones.  ``SERVER_TEST_N=20`` (the benchmark run of the server tests) makes the default 25."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from hypothesis import HealthCheck, Phase, settings  # noqa: E402

from tests.server_fixtures import serving  # noqa: E402

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25" if os.environ.get("SERVER_TEST_N") else "15"))


@pytest.fixture(scope="module")
def live_server():
    with serving(log_level="error", dtd_dir=str(ROOT / "grammars"), max_tokens_limit=8, default_max_tokens=4,
                 queue_size=64, max_body_bytes=256 << 10) as (_, base):
        yield base


def _operations(base: str) -> list:
    schema = schemathesis.openapi.from_url(base + "/openapi.json")
    return [r.ok() for r in schema.get_all_operations()]


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_server_error_except_the_documented_503(live_server, mode):
    """Every operation of /openapi.json, ``EXAMPLES`` generated requests each (schemathesis'
    strategies driven by hypothesis; the pytest plugin of schemathesis 4.32 does not run under
    pytest 9, so the strategies are used directly)."""
    from hypothesis import given
    from hypothesis.errors import Unsatisfiable

    ops = _operations(live_server)
    assert {op.path for op in ops} >= {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health"}
    seen: list = []
    for op in ops:
        @given(case=op.as_strategy(generation_mode=schemathesis.GenerationMode(mode)))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def check(case):
            resp = case.call(timeout=60)
            seen.append((op.method, op.path, resp.status_code))
            if resp.status_code == 503:
                assert resp.json()["error"]["code"] == "queue_full" and "Retry-After" in resp.headers
                return
            assert resp.status_code < 500, (case.method, case.formatted_path, case.body, resp.status_code,
                                            resp.text[:500])

        try:
            check()
        except Unsatisfiable:  # negative mode: an operation with no parameter and no body has nothing to negate
            assert mode == "negative" and op.path not in ("/v1/chat/completions", "/v1/completions"), op.path
    assert {p for _, p, _ in seen} >= {"/v1/chat/completions", "/v1/completions"}, seen
    print(f"{mode}: {len(seen)} requests, statuses {sorted({s for _, _, s in seen})}")
    if mode == "positive":  # valid bodies of the generation routes reach the model
        assert any(s == 200 and p in ("/v1/chat/completions", "/v1/completions") for _, p, s in seen), seen
