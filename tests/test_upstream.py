"""Upstream mode (decoding.server.upstream) against fake llama-server instances (issue 17).

The fakes are test doubles of llama-server's HTTP protocol, not mocks of our code: real HTTP
servers on 127.0.0.1 (the standard library's ThreadingHTTPServer) answering ``GET /health``
(``{"status": "ok"}``), ``POST /completion`` (``prompt``, ``n_predict``, ``grammar`` ->
``content``, ``stop_type``, ``tokens_predicted``) and ``POST /v1/chat/completions``.  They
generate from the GBNF they receive: it is parsed by this project's GBNF front-end and an
answer is drawn by a random walk of its automaton, cut at ``n_predict`` bytes (then
``stop_type: "limit"``), so an answer is valid only if the right grammar travelled.  Faults
are switched per fake: killed (socket closed), HTTP 500, 503, a truncated or broken answer.

``UPSTREAM_LOAD_N=50`` runs the issue's 8 clients x 50 requests (default 8 x 12).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the server extra is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the server extra is not installed")

from decoding.backends.automaton import compile_dfa  # noqa: E402
from decoding.backends.gbnf.emit import to_gbnf  # noqa: E402
from decoding.frontends.gbnf.parse import parse_gbnf  # noqa: E402
from decoding.frontends.sources import build_grammar  # noqa: E402
from decoding.guard import validate_json, validate_xml  # noqa: E402
from decoding.frontends.xml.dtd import parse_dtd  # noqa: E402
from decoding.server.upstream import UpstreamForwarder, UpstreamPool, create_upstream_app  # noqa: E402

from gbnf_util import random_walks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WEATHER = json.loads((ROOT / "grammars" / "get_weather.json").read_text())
PRODUCT = json.loads((ROOT / "grammars" / "search_product.json").read_text())
USER_QUERY = (ROOT / "grammars" / "user_query.dtd").read_text()


# ----------------------------------------------------------------------------- the fake llama-server

class FakeLlamaServer:
    """One fake llama-server on 127.0.0.1 (module docstring).  ``mode``: "ok", "500",
    "503", "truncate" (every other answer cut in half, stop_type "limit"), "garbage" (not in the
    grammar), "400"."""

    def __init__(self, port: int = 0, *, delay_s: float = 0.0, slots: int = 64) -> None:
        self.mode = "ok"
        self.delay_s = delay_s
        self._slots = threading.Semaphore(slots)  # llama-server's parallel slots (-np)
        self.bodies: list[dict] = []
        self.served = 0
        self._dfas: dict[str, object] = {}
        self._lock = threading.Lock()
        self._rng = random.Random(port)
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _send(self, status: int, doc: dict) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/health":
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"error": {"code": 404, "message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake._lock:
                    fake.bodies.append(body)
                if fake.delay_s:
                    with fake._slots:  # a slot is busy for delay_s per request
                        time.sleep(fake.delay_s)
                if fake.mode in ("500", "503", "400"):
                    self._send(int(fake.mode), {"error": {"code": int(fake.mode), "message": f"fake {fake.mode}"}})
                    return
                budget = body.get("n_predict", body.get("max_tokens", 16))
                text, limit = fake.generate(body.get("grammar"), budget)
                with fake._lock:
                    fake.served += 1
                if self.path == "/completion":
                    self._send(200, {"content": text, "stop_type": "limit" if limit else "eos",
                                     "tokens_predicted": len(text), "tokens_evaluated": len(body.get("prompt", ""))})
                elif self.path == "/v1/chat/completions":
                    self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                  "finish_reason": "length" if limit else "stop"}],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": len(text), "total_tokens": 3 + len(text)}})
                else:
                    self._send(404, {"error": {"code": 404, "message": "not found"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def generate(self, gbnf: str | None, budget: int) -> tuple[str, bool]:
        """An answer in the language of ``gbnf`` (one byte per "token"), cut at ``budget``."""
        if gbnf is None:
            return "free text", False
        with self._lock:
            dfa = self._dfas.get(gbnf)
            if dfa is None:
                dfa = self._dfas[gbnf] = compile_dfa(parse_gbnf(gbnf))
            seed = self._rng.randrange(1 << 30)
        text = random_walks(dfa, 1, seed=seed, max_len=40)[0].decode("utf-8")
        if self.mode == "truncate":  # every other answer is cut in half (as if n_predict ran out)
            with self._lock:
                self._cuts = getattr(self, "_cuts", 0) + 1
                cut = self._cuts % 2 == 1
            if cut:
                return text[: max(1, len(text) // 2)], True
        if self.mode == "garbage":
            return "<<not in the grammar>>", False
        if len(text.encode()) > budget:
            return text.encode()[:budget].decode("utf-8", "ignore"), True
        return text, False

    def kill(self) -> None:
        """Stop listening and close the socket (as a killed process would)."""
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fakes():
    made: list[FakeLlamaServer] = []

    def make(n: int = 2, **kw) -> list[FakeLlamaServer]:
        new = [FakeLlamaServer(**kw) for _ in range(n)]
        made.extend(new)
        return new
    yield make
    for f in made:
        try:
            f.kill()
        except Exception:  # noqa: BLE001 - already killed by the test
            pass


def _run(coro):
    return asyncio.run(coro)


async def _with_pool(urls, fn, **kw):
    pool = UpstreamPool(urls, health_interval_s=0.2, wait_s=kw.pop("wait_s", 5.0), timeout_s=10)
    await pool.start()
    try:
        return await fn(pool, UpstreamForwarder(pool, **kw))
    finally:
        await pool.stop()


def _valid(kind: str, text: str) -> bool:
    if kind == "weather":
        return not validate_json(text, WEATHER)[1]
    if kind == "product":
        return not validate_json(text, PRODUCT)[1]
    return not validate_xml(text, parse_dtd(USER_QUERY), root="request")


def _request(kind: str, i: int) -> tuple[str, dict]:
    if kind == "dtd":
        return "completion", {"prompt": f"query {i}", "dtd": USER_QUERY, "root": "request", "max_tokens": 64,
                              "dtd_options": {"text_patterns": {"user_id": "[0-9]{1,18}", "action": "query"}}}
    schema = WEATHER if kind == "weather" else PRODUCT
    return "chat", {"messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 64,
                    "response_format": {"type": "json_schema", "json_schema": {"name": kind, "schema": schema}}}


def _text(resp: dict) -> str:
    ch = resp["choices"][0]
    return ch["message"]["content"] if "message" in ch else ch["text"]


# ----------------------------------------------------------------------------- grammar transport

@pytest.mark.parametrize("kind", ["weather", "product", "dtd"])
def test_our_gbnf_travels_and_answers_are_valid(fakes, kind):
    (a,) = fakes(1)

    async def go(pool, fwd):
        route, body = _request(kind, 0)
        return [await fwd.handle(route, dict(body)) for _ in range(4)]
    out = _run(_with_pool([a.url], go))
    assert all(_valid(kind, _text(r)) and r["choices"][0]["finish_reason"] == "stop" for r in out)
    sent = a.bodies[0]
    if kind == "dtd":
        g, _ = build_grammar(USER_QUERY, "dtd", root="request",
                             text_patterns={"user_id": "[0-9]{1,18}", "action": "query"})
        assert sent["n_predict"] >= compile_dfa(g).min_steps_to_accept()[0]  # the floor
    else:
        g, _ = build_grammar(WEATHER if kind == "weather" else PRODUCT, "json-schema")
        assert sent["max_tokens"] >= 64
    assert sent["grammar"] == to_gbnf(g)


def test_max_tokens_floor_from_the_grammar(fakes):
    (a,) = fakes(1)

    async def go(pool, fwd):
        route, body = _request("weather", 0)
        body["max_tokens"] = 2  # below the shortest valid answer
        return await fwd.handle(route, body)
    r = _run(_with_pool([a.url], go))
    g, _ = build_grammar(WEATHER, "json-schema")
    floor = int(compile_dfa(g).min_steps_to_accept()[0])
    assert a.bodies[0]["max_tokens"] == floor > 2
    assert _valid("weather", _text(r))


# ----------------------------------------------------------------------------- routing

def test_idle_pool_is_round_robin_and_busy_pool_least_busy(fakes):
    a, b = fakes(2, delay_s=0.3)

    async def go(pool, fwd):
        for i in range(4):  # one at a time: alternates
            await fwd.handle(*_request("weather", i))
        first = (a.served, b.served)
        await asyncio.gather(*(fwd.handle(*_request("weather", i)) for i in range(6)))
        return first
    first = _run(_with_pool([a.url, b.url], go))
    assert first == (2, 2)
    assert (a.served, b.served) == (5, 5)


@pytest.mark.parametrize("fault", ["kill", "500"])
def test_failed_upstream_taken_out_and_request_retried(fakes, fault):
    a, b = fakes(2)

    async def go(pool, fwd):  # the fault comes after the pool saw both healthy
        if fault == "kill":
            a.kill()
        else:
            a.mode = "500"
        out = [await fwd.handle(*_request("product", i)) for i in range(4)]
        return out, pool.view(), pool.retries
    out, view, retries = _run(_with_pool([a.url, b.url], go))
    assert all(_valid("product", _text(r)) for r in out)
    assert b.served == 4 and retries >= 1
    assert [u["healthy"] for u in view] == [False, True]
    assert view[0]["last_error"]


def test_503_retried_elsewhere_without_taking_it_out(fakes):
    a, b = fakes(2)
    a.mode = "503"

    async def go(pool, fwd):
        out = [await fwd.handle(*_request("weather", i)) for i in range(3)]
        return out, pool.view()
    out, view = _run(_with_pool([a.url, b.url], go))
    assert b.served == 3 and all(_valid("weather", _text(r)) for r in out)
    assert view[0]["healthy"] is True and view[0]["failures"] >= 1


def test_upstream_back_after_restart_rejoins(fakes):
    (a,) = fakes(1)
    b = fakes(1)[0]
    port = a.port
    a.kill()

    async def go(pool, fwd):
        await fwd.handle(*_request("weather", 0))
        assert [u["healthy"] for u in pool.view()] == [False, True]
        again = FakeLlamaServer(port)
        try:
            for _ in range(50):
                await asyncio.sleep(0.1)
                if pool.view()[0]["healthy"]:
                    break
            assert pool.view()[0]["healthy"], "restarted upstream not back in the pool"
            await asyncio.gather(*(fwd.handle(*_request("weather", i)) for i in range(4)))
            return again.served
        finally:
            again.kill()
    assert _run(_with_pool([a.url, b.url], go)) >= 1


def test_all_upstreams_down_is_503_after_waiting(fakes):
    a, b = fakes(2)
    a.kill()
    b.kill()

    async def go(pool, fwd):
        t0 = time.monotonic()
        with pytest.raises(Exception) as ei:
            await fwd.handle(*_request("weather", 0))
        return ei.value, time.monotonic() - t0
    err, waited = _run(_with_pool([a.url, b.url], go, wait_s=0.8))
    assert getattr(err, "status", None) == 503 and err.code == "no_upstream"
    assert waited >= 0.8


def test_client_error_from_upstream_is_400_not_retried(fakes):
    a, b = fakes(2)
    a.mode = b.mode = "400"

    async def go(pool, fwd):
        with pytest.raises(Exception) as ei:
            await fwd.handle(*_request("weather", 0))
        return ei.value
    err = _run(_with_pool([a.url, b.url], go))
    assert err.status == 400 and err.code == "upstream_refused"
    assert len(a.bodies) + len(b.bodies) == 1


# ----------------------------------------------------------------------------- guard: repair / retry

def test_truncated_answer_repaired_or_retried(fakes):
    (a,) = fakes(1)
    a.mode = "truncate"

    async def go(pool, fwd):
        return [await fwd.handle(*_request(k, i)) for i, k in enumerate(["weather", "dtd", "weather", "dtd"])]
    out = _run(_with_pool([a.url], go))
    for r, k in zip(out, ["weather", "dtd", "weather", "dtd"]):
        assert _valid(k, _text(r)), _text(r)
        assert r["x_guard"]["valid"] is True
    # each request's first answer was cut: it was repaired, or retried (second attempt)
    assert all(r["x_guard"].get("repaired") or r["x_guard"]["attempt"] == 2 for r in out)


def test_invalid_answers_are_502_never_returned(fakes):
    (a,) = fakes(1)
    a.mode = "garbage"

    async def go(pool, fwd):
        with pytest.raises(Exception) as ei:
            await fwd.handle("completion", {"prompt": "x", "grammar": 'root ::= "yes" | "no"', "max_tokens": 4})
        return ei.value
    err = _run(_with_pool([a.url], go))
    assert err.status == 502 and err.code == "invalid_upstream_answer"
    assert len(a.bodies) == 3  # max_attempts


@pytest.mark.parametrize("body,status,needle", [
    ({"prompt": "x", "stream": True}, 400, "streaming"),
    ({"prompt": "x", "grammar": "root ::= undefined\n"}, 422, "undefined"),
    ({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"pattern": "(?<=a)"}}}},
     422, "lookaround"),
    ({"prompt": "x", "grammar": 'root ::= "a"', "dtd": "<!ELEMENT a EMPTY>", "root": "a"}, 400, "at most one"),
    ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
])
def test_request_errors(fakes, body, status, needle):
    (a,) = fakes(1)

    async def go(pool, fwd):
        with pytest.raises(Exception) as ei:
            await fwd.handle("completion", body)
        return ei.value
    err = _run(_with_pool([a.url], go))
    assert err.status == status and needle in str(err)
    assert a.bodies == []


# ----------------------------------------------------------------------------- over HTTP, with load

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    def __init__(self, urls, timeout_s: float = 30):
        from decoding.server.config import ServerConfig

        self.port = _free_port()
        cfg = ServerConfig(port=self.port)
        self.pool = UpstreamPool(urls, health_interval_s=0.2, wait_s=10, timeout_s=timeout_s)
        self.app = create_upstream_app(cfg, pool=self.pool)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        for _ in range(100):
            if self.server.started:
                break
            time.sleep(0.05)

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        try:
            c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def get(self, path: str) -> tuple[int, dict]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


def load_run(server: _Server, clients: int, per_client: int, on_half=None) -> dict:
    """``clients`` threads x ``per_client`` requests (weather, product, dtd in turn);
    ``on_half`` is called once half of all requests are answered."""
    total = clients * per_client
    done, lock, half_fired = [0], threading.Lock(), threading.Event()
    results: list[tuple[str, int, dict]] = []

    def client(c: int) -> None:
        for i in range(per_client):
            kind = ("weather", "product", "dtd")[(c + i) % 3]
            route, body = _request(kind, c * 1000 + i)
            status, doc = server.post("/v1/chat/completions" if route == "chat" else "/v1/completions", body)
            with lock:
                results.append((kind, status, doc))
                done[0] += 1
                fire = done[0] >= total // 2 and not half_fired.is_set()
                if fire:
                    half_fired.set()
            if fire and on_half:
                on_half()

    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    secs = time.perf_counter() - t0
    lost = sum(1 for _, s, _ in results if s != 200) + (total - len(results))
    invalid = sum(1 for k, s, d in results if s == 200 and not _valid(k, _text(d)))
    return {"requests": total, "lost": lost, "invalid": invalid, "seconds": secs, "rps": total / secs}


def test_http_load_with_one_upstream_killed_halfway(fakes):
    """8 clients x n requests (JSON schemas and a DTD) through the HTTP server; one of two
    upstreams (2 slots, 20 ms per request each) killed halfway: nothing lost, nothing
    invalid.  The same load on one upstream alone is printed for comparison (not asserted:
    speed is for benchmarks)."""
    a, b, c = fakes(3, delay_s=0.02, slots=2)
    n = int(os.environ.get("UPSTREAM_LOAD_N", "12"))
    srv = _Server([a.url, b.url])
    try:
        status, h = srv.get("/health")
        assert status == 200 and [u["healthy"] for u in h["upstreams"]] == [True, True]
        stats = load_run(srv, 8, n, on_half=a.kill)
        status, h = srv.get("/health")
    finally:
        srv.stop()
    one = _Server([c.url])
    try:
        alone = load_run(one, 8, n)
    finally:
        one.stop()
    print(f"\n8 clients x {n}, two upstreams, one killed halfway: {stats}\n"
          f"8 clients x {n}, one upstream: {alone}")
    assert alone["lost"] == 0 and alone["invalid"] == 0
    assert stats["lost"] == 0 and stats["invalid"] == 0, stats
    assert h["upstreams"][0]["healthy"] is False and h["upstreams"][1]["healthy"] is True
    assert a.served > 0 and b.served > 0


def test_http_errors_are_openai_shaped(fakes):
    (a,) = fakes(1)
    srv = _Server([a.url])
    try:
        status, doc = srv.post("/v1/completions", {"prompt": "x", "grammar": "root ::= nope\n"})
    finally:
        srv.stop()
    assert status == 422 and doc["error"]["code"] == "unprocessable_grammar" and "nope" in doc["error"]["message"]


def test_cli_serve_upstream_forwards(fakes):
    """``python -m decoding serve --upstream URL --upstream URL`` in a subprocess: no model is
    loaded, a request is answered by the fakes."""
    import subprocess
    import sys

    a, b = fakes(2)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "decoding", "serve", "--port", str(port),
                             "--upstream", a.url, "--upstream", b.url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        srv = _Server.__new__(_Server)
        srv.port = port
        for _ in range(300):
            try:
                status, h = srv.get("/health")
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("serve --upstream did not start: " + (proc.stdout.read() if proc.poll() is not None else ""))
        assert status == 200 and h["mode"] == "upstream" and len(h["upstreams"]) == 2
        status, doc = srv.post("/v1/chat/completions", _request("weather", 0)[1])
        assert status == 200 and _valid("weather", _text(doc))
    finally:
        proc.terminate()
        proc.wait(20)
    assert a.served + b.served == 1


def test_wait_for_an_upstream_counts_from_when_none_is_left(fakes):
    """A request whose only upstream timed out after longer than wait_s still waits wait_s
    for it to come back (regression: the wait was counted from the start of the request,
    so a slow upstream's timeout lost the request at once)."""
    (a,) = fakes(1, delay_s=0.6, slots=1)

    async def go(pool, fwd):
        pool.timeout_s = 0.5  # the first forward times out (0.6 s answer), the upstream is taken out
        task = asyncio.ensure_future(fwd.handle(*_request("weather", 0)))
        await asyncio.sleep(0.55)
        pool.timeout_s = 10   # the retry after the health check gets its answer
        return await task, pool.view()
    r, view = _run(_with_pool([a.url], go, wait_s=0.4))
    assert _valid("weather", _text(r))
    assert view[0]["failures"] == 1 and "timed out" in view[0]["last_error"]
