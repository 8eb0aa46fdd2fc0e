"""The server as ``--workers 2`` processes (uvicorn's supervisor), started in a subprocess on
127.0.0.1: a worker killed mid-request fails that request only (a request on the other
worker at the same time completes); the server keeps serving, and the workers share the
on-disk grammar cache."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from tests.server_fixtures import free_port  # noqa: E402

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
          "additionalProperties": False}


def _get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {}, e.read()


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    port = free_port()
    cache = tmp_path_factory.mktemp("grammar-cache")
    code = textwrap.dedent(f"""
        from decoding.server import ServerConfig, serve
        serve(ServerConfig(port={port}, workers=2, test_hooks=True, n_ctx=1024, cache_dir={str(cache)!r}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    pids: set = set()
    try:
        while len(pids) < 2:  # both workers up (each answers /health with its pid)
            assert proc.poll() is None and time.time() < deadline, "the server did not start 2 workers"
            try:
                pids.add(_get(base + "/health")[1].get("x-worker-pid"))
            except OSError:
                pass
            pids.discard(None)
            if len(pids) < 2:  # not a busy loop: the CPU goes to the worker still loading its model
                time.sleep(0.1)
        yield base, proc, cache
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _ask(client, i: int):
    return client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": f"Give n = {i}."}], max_tokens=16, seed=i,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}})


def test_workers_share_the_disk_cache_and_survive_a_killed_worker(workers):
    base, proc, cache = workers
    client = openai.OpenAI(api_key="-", base_url=base + "/v1", max_retries=0, timeout=30)
    for i in range(4):  # both workers answer; the second compile of SCHEMA per worker is a hit
        assert isinstance(json.loads(_ask(client, i).choices[0].message.content)["n"], int)
    assert list(cache.rglob("*.gdc")), "nothing written to the shared disk cache"
    metrics = _get(base + "/metrics")[2].decode()  # summed over both workers
    ok = re.search(r'^decoding_requests_total\{endpoint="/v1/chat/completions",status="200"\} ([0-9.]+)$',
                   metrics, re.M)
    assert ok and float(ok.group(1)) == 4, metrics[:2000]
    assert "decoding_requests_created" not in metrics  # the multiprocess collector answered

    # a long streamed answer; kill the worker that serves it mid-generation, while another
    # request is being answered by the other worker
    def long_stream(max_tokens: int):
        raw = client.with_raw_response.completions.create(model="smollm2", prompt="Once upon a time",
                                                          max_tokens=max_tokens, stream=True, temperature=0.9)
        return int(raw.headers["x-worker-pid"]), raw.parse()

    pid, stream = long_stream(400)
    next(iter(stream))
    others = []
    for _ in range(8):  # the OS picks the worker: open streams until one is on the other worker
        p2, s2 = long_stream(40)
        if p2 != pid:
            break
        others.append(s2)
    assert p2 != pid, "no request reached the second worker"
    next(iter(s2))
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(openai.APIError):  # APIConnectionError: the connection dropped mid-stream
        for _ in stream:
            pass
    for o in others:
        o.close()
    text = "".join(c.choices[0].text for c in s2 if c.choices)  # the other worker's answer completes
    assert text.strip()
    # the server keeps serving (the other worker, then a restarted one)
    for i in range(4):
        assert isinstance(json.loads(_ask(client, 10 + i).choices[0].message.content)["n"], int)
    assert proc.poll() is None
    client.close()  # no idle keep-alive connection left for the graceful shutdown to wait on
