"""``serve --upstream`` in front of real llama.cpp grammar engines with SmolLM2 (issue 17).

Two kinds of upstream, each started twice as subprocesses on 127.0.0.1:

- ``llama-server``: the binary ``make llama-server`` builds (``$LLAMA_SERVER`` or
  ``~/.cache/guarded-decoding/llama-server-0.3.36/bin/llama-server``); skipped with a clear
  message when it is not built;
- ``llamacpp``: a llama-server stand-in (this file run as a script): llama-cpp-python's
  ``Llama`` with ``LlamaGrammar.from_string(grammar)``, i.e. the llama.cpp grammar sampler
  vendored in llama-cpp-python 0.3.36, behind the same ``/health``, ``/completion`` and
  ``/v1/chat/completions`` shapes, one slot.  It is not the llama-server binary: it shows
  that our GBNF, enforced by llama.cpp's own grammar engine on a real model, gives valid
  answers through the upstream pool.

``UPSTREAM_LOAD_N`` (default 2) requests per client for the 8-client load with one upstream
killed halfway; ``UPSTREAM_LOAD_N=50`` is the issue's run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="the server extra is not installed")

HERE = Path(__file__).resolve()
LLAMA_SERVER = Path(os.environ.get("LLAMA_SERVER") or
                    Path.home() / ".cache" / "guarded-decoding" / "llama-server-0.3.36" / "bin" / "llama-server")

pytestmark = pytest.mark.model


def _smollm2() -> str:
    from decoding.models import model_path

    return str(model_path("smollm2"))


def _start(kind: str, port: int) -> subprocess.Popen:
    if kind == "llama-server":
        cmd = [str(LLAMA_SERVER), "-m", _smollm2(), "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
               "-np", "2", "-t", "1", "--no-webui"]
    else:
        cmd = [sys.executable, str(HERE), "serve", str(port)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    import http.client

    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            pytest.fail(f"upstream on port {port} exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"upstream on port {port} not healthy after {timeout} s")


@pytest.fixture(params=["llama-server", "llamacpp"])
def upstreams(request):
    kind = request.param
    if kind == "llama-server" and not os.access(LLAMA_SERVER, os.X_OK):
        pytest.skip(f"llama-server is not built ({LLAMA_SERVER} missing): run `make llama-server` "
                    "(needs the llama-cpp-python 0.3.36 sdist on this machine; see docs/scale-out.md)")
    from test_upstream import _free_port

    procs = []

    def start(n: int) -> list[tuple[subprocess.Popen, str]]:
        out = []
        for _ in range(n):
            port = _free_port()
            p = _start(kind, port)
            procs.append(p)
            out.append((p, port))
        for p, port in out:
            _wait_healthy(port, p)
        return [(p, f"http://127.0.0.1:{port}") for p, port in out]
    yield kind, start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_two_upstreams_one_killed_halfway(upstreams):
    from test_upstream import _Server, load_run

    kind, start = upstreams
    n = int(os.environ.get("UPSTREAM_LOAD_N", "2"))
    (pa, ua), (pb, ub) = start(2)
    srv = _Server([ua, ub], timeout_s=300)  # one-slot upstreams queue 8 clients: the default timeout
    try:
        stats = load_run(srv, 8, n, on_half=pa.kill)
        status, h = srv.get("/health")
    finally:
        srv.stop()
    pb.kill()
    (pc, uc), = start(1)
    one = _Server([uc], timeout_s=300)
    try:
        alone = load_run(one, 8, n)
    finally:
        one.stop()
    print(f"\n[{kind}] 8 clients x {n}, two upstreams, one killed halfway: {stats}"
          f"\n[{kind}] 8 clients x {n}, one upstream: {alone}"
          f"\n[{kind}] guard: {({k: h[k] for k in ('requests', 'repaired', 'retried', 'invalid')})}, "
          f"pool retries {h['retries']}")
    assert stats["lost"] == 0 and stats["invalid"] == 0, stats
    assert alone["lost"] == 0 and alone["invalid"] == 0, alone
    assert h["upstreams"][0]["healthy"] is False


# ----------------------------------------------------------------------------- the stand-in

def _serve_standin(port: int) -> None:
    """llama-server's /health, /completion, /v1/chat/completions over llama-cpp-python."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from llama_cpp import LlamaGrammar

    from decoding.models import load_model

    llm = load_model("smollm2", n_ctx=2048)
    lock = threading.Lock()  # one slot: llama.cpp contexts are not thread-safe
    grammars: dict[str, LlamaGrammar] = {}

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, status: int, doc: dict) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(200, {"status": "ok"}) if self.path == "/health" else self._send(404, {"error": "not found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            kw = {k: body[k] for k in ("temperature", "top_p", "seed") if k in body}
            with lock:
                if body.get("grammar"):
                    g = grammars.get(body["grammar"])
                    if g is None:
                        try:
                            g = grammars[body["grammar"]] = LlamaGrammar.from_string(body["grammar"], verbose=False)
                        except Exception as e:  # noqa: BLE001 - llama-server answers 400 too
                            self._send(400, {"error": {"code": 400, "message": f"failed to parse grammar: {e}"}})
                            return
                    kw["grammar"] = g
                if self.path == "/completion":
                    r = llm.create_completion(body["prompt"], max_tokens=body.get("n_predict", 64), **kw)
                    ch = r["choices"][0]
                    self._send(200, {"content": ch["text"], "stop_type": "limit" if ch["finish_reason"] == "length"
                                     else "eos", "tokens_predicted": r["usage"]["completion_tokens"],
                                     "tokens_evaluated": r["usage"]["prompt_tokens"]})
                elif self.path == "/v1/chat/completions":
                    self._send(200, llm.create_chat_completion(body["messages"], max_tokens=body.get("max_tokens", 64),
                                                               **kw))
                else:
                    self._send(404, {"error": "not found"})

    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        _serve_standin(int(sys.argv[2]))
