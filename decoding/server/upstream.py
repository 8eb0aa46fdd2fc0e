"""Upstream mode: ``python -m decoding serve --upstream URL [--upstream URL ...]``.

The server loads no model.  It checks each OpenAI request, turns its grammar (a JSON
Schema in ``response_format``, ``json_object``, GBNF in ``grammar``, or ``dtd`` + ``root``)
into the GBNF this project emits (:func:`decoding.backends.gbnf.emit.to_gbnf`), and forwards
it to one llama-server instance of a pool in llama-server's own ``grammar`` field:

- ``POST /v1/completions``      -> upstream ``POST /completion`` (``prompt``, ``n_predict``, ``grammar``);
- ``POST /v1/chat/completions`` -> upstream ``POST /v1/chat/completions`` (``messages``,
  ``max_tokens``, ``grammar``: llama-server applies the model's chat template);
- ``GET /health``: this server and every upstream (healthy, in flight, served, failures).

Pool invariants (:class:`UpstreamPool`)
- an upstream is chosen least-busy first (fewest requests in flight; ties go to the one
  that served fewest, so an idle pool is round-robin), among the healthy ones only;
- an upstream is taken out (unhealthy) when a connection to it fails, times out, or it
  answers 5xx other than 503; it comes back when its ``GET /health`` answers 200 again
  (a background check every ``health_interval_s``; also run at start);
- a request is never lost: a failed forward is retried on another upstream (503 "no slot"
  or "loading" too, without taking that one out); when none is healthy, the request
  waits up to ``wait_s`` (counted from the moment none is available, not from the start of
  the request) for one to come back, then fails with 503 ``no_upstream``.
  An upstream's 4xx is the client's error and is returned as is (400), not retried.

What replaces budget-aware closing (it needs the mask at every step, which llama-server
computes itself from the GBNF): ``n_predict`` is raised to a floor, the shortest answer
the grammar allows in bytes (every token is at least one byte, so the shortest answer always
fits; the grammar's own end makes llama-server stop early), and every answer is checked
by the guard (:mod:`decoding.guard`: JSON Schema / DTD validation, the automaton for GBNF).
An answer cut by ``n_predict`` or invalid is repaired when the guard can (JSON/XML, every
change reported in ``x_guard``), else the request is retried with twice the budget, up to
``max_attempts``; an answer that is still not valid is a 502 ``invalid_upstream_answer``,
never returned as valid.

Not in upstream mode: streaming (400), tools (400), ``n > 1`` (400).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Sequence

from decoding.errors import DecodingError, UsageError

__all__ = ["Upstream", "UpstreamPool", "UpstreamError", "UpstreamForwarder", "GrammarPlan",
           "plan_grammar", "create_upstream_app"]

log = logging.getLogger("decoding.upstream")


class UpstreamError(DecodingError):
    """A request that could not be served by the upstream pool: ``status`` (the HTTP
    status for the client), ``code`` (OpenAI-style error code)."""

    def __init__(self, message: str, *, status: int = 502, code: str = "upstream_error",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


# ----------------------------------------------------------------------------- the pool

@dataclass
class Upstream:
    url: str
    host: str = ""
    port: int = 0
    healthy: bool = True
    in_flight: int = 0
    served: int = 0
    failures: int = 0
    last_error: str = ""

    def __post_init__(self) -> None:
        u = urllib.parse.urlsplit(self.url)
        if u.scheme != "http" or not u.hostname:
            raise UsageError(f"--upstream {self.url!r}: expected http://HOST:PORT (llama-server)")
        self.host, self.port = u.hostname, u.port or 80
        self.url = f"http://{self.host}:{self.port}"

    def view(self) -> dict:
        return {"url": self.url, "healthy": self.healthy, "in_flight": self.in_flight, "served": self.served,
                "failures": self.failures, "last_error": self.last_error}


class _Retry(Exception):
    """Internal: this upstream could not serve the request; try another (``down``: take it out)."""

    def __init__(self, reason: str, down: bool) -> None:
        super().__init__(reason)
        self.down = down


class UpstreamPool:
    """llama-server instances behind one server (module docstring: choice, health, retries)."""

    def __init__(self, urls: Sequence[str], *, timeout_s: float = 300.0, connect_timeout_s: float = 3.0,
                 health_interval_s: float = 1.0, wait_s: float = 30.0, max_threads: int = 64) -> None:
        if not urls:
            raise UsageError("UpstreamPool: at least one --upstream URL is needed")
        self.upstreams = [Upstream(u) for u in urls]
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.health_interval_s, self.wait_s = health_interval_s, wait_s
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="upstream")
        self._task: asyncio.Task | None = None
        self.retries = 0

    # -- HTTP (blocking, in the pool's threads)
    def _http(self, up: Upstream, method: str, path: str, body: dict | None, timeout: float) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(up.host, up.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = conn.getresponse()
            raw = r.read()
            try:
                doc = json.loads(raw) if raw else None
            except ValueError:
                doc = {"raw": raw[:200].decode("utf-8", "replace")}
            return r.status, doc
        finally:
            conn.close()

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- health
    async def check_health(self) -> None:
        async def one(up: Upstream) -> None:
            try:
                status, doc = await self._run(self._http, up, "GET", "/health", None, self.connect_timeout_s)
                ok = status == 200 and (not isinstance(doc, dict) or doc.get("status", "ok") == "ok")
                reason = "" if ok else f"/health answered {status}"
            except OSError as e:
                ok, reason = False, f"/health: {type(e).__name__}: {e}"
            with self._lock:
                if ok != up.healthy:
                    log.warning("upstream %s %s%s", up.url, "back in the pool" if ok else "taken out: ", reason)
                up.healthy = ok
                if not ok:
                    up.last_error = reason
        await asyncio.gather(*(one(u) for u in self.upstreams))

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            try:
                await self.check_health()
            except Exception as e:  # noqa: BLE001 - logged; the loop must keep running
                log.error("upstream health check failed: %r", e)

    async def start(self) -> None:
        await self.check_health()
        self._task = asyncio.create_task(self._health_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- choice
    def pick(self, exclude: set[str] = frozenset()) -> Upstream | None:  # type: ignore[assignment]
        """The least-busy healthy upstream not in ``exclude`` (reserved: in_flight + 1)."""
        with self._lock:
            ups = [u for u in self.upstreams if u.healthy and u.url not in exclude]
            if not ups:
                return None
            up = min(ups, key=lambda u: (u.in_flight, u.served))
            up.in_flight += 1
            return up

    def _release(self, up: Upstream, *, ok: bool, down: bool = False, reason: str = "") -> None:
        with self._lock:
            up.in_flight -= 1
            if ok:
                up.served += 1
            else:
                up.failures += 1
                up.last_error = reason
                if down and up.healthy:
                    up.healthy = False
                    log.warning("upstream %s taken out: %s", up.url, reason)

    async def post(self, path: str, body: dict) -> tuple[dict, str]:
        """POST ``body`` to ``path`` of one upstream, retrying elsewhere until one answers
        200 (returns ``(answer, upstream url)``) or 4xx (UpstreamError 400).  Waits up to
        ``wait_s`` for an upstream when none is healthy (UpstreamError 503 after)."""
        tried: set[str] = set()
        deadline: float | None = None  # set when no upstream is available: the wait starts then
        reasons: list[str] = []
        while True:
            up = self.pick(tried)
            if up is None:
                if deadline is None:
                    deadline = time.monotonic() + self.wait_s
                if time.monotonic() > deadline:
                    raise UpstreamError("no upstream could serve the request within "
                                        f"{self.wait_s:g} s: {'; '.join(reasons[-4:]) or 'none healthy'}",
                                        status=503, code="no_upstream")
                tried.clear()  # every healthy one was tried: wait for a health check, then again
                await asyncio.sleep(min(self.health_interval_s, 0.5))
                continue
            deadline = None
            try:
                status, doc = await self._run(self._http, up, "POST", path, body, self.timeout_s)
                if status == 200 and isinstance(doc, dict):
                    self._release(up, ok=True)
                    return doc, up.url
                if 400 <= status < 500:
                    self._release(up, ok=True)
                    msg = (doc or {}).get("error", doc) if isinstance(doc, dict) else doc
                    raise UpstreamError(f"upstream {up.url} refused the request ({status}): "
                                        f"{json.dumps(msg)[:500]}", status=400, code="upstream_refused")
                raise _Retry(f"{up.url} answered {status}", down=status != 503)
            except _Retry as e:
                self._release(up, ok=False, down=e.down, reason=str(e))
                reasons.append(str(e))
            except OSError as e:  # connection refused/reset, timeout: take it out
                reason = f"{up.url}: {type(e).__name__}: {e}"
                self._release(up, ok=False, down=True, reason=reason)
                reasons.append(reason)
            tried.add(up.url)
            self.retries += 1

    def view(self) -> list[dict]:
        with self._lock:
            return [u.view() for u in self.upstreams]


# ----------------------------------------------------------------------------- grammars

@dataclass(frozen=True)
class GrammarPlan:
    """What travels to llama-server for one grammar, and how its answer is checked.

    ``gbnf``: our GBNF; ``floor``: the shortest answer in bytes (the ``n_predict`` floor);
    ``kind``: json-schema, dtd or gbnf; ``check``: source for the guard."""

    kind: str
    gbnf: str
    floor: int
    schema: Any = None
    dtd: Any = None
    root: str | None = None
    dfa: Any = None


_DTD_OPTION_NAMES = ("text_patterns", "max_depth", "whitespace", "max_ws", "xml_declaration", "only", "ids",
                     "cdata", "general_entities", "numeric_refs", "failsafe")


def plan_grammar(kind: str, source: Any, *, root: str | None = None, options: dict | None = None,
                 base_dir: str | None = None) -> GrammarPlan:
    """Front-end, GBNF and the answer check of one grammar (no tokenizer needed)."""
    from decoding.backends.automaton import compile_dfa
    from decoding.backends.gbnf.emit import to_gbnf
    from decoding.frontends.sources import build_grammar

    opts = dict(options or {})
    if kind == "dtd":
        opts["root"] = root
    g, _ = build_grammar(source, kind, base_dir=base_dir, **opts)
    dfa = None
    try:
        dfa = compile_dfa(g)
        floor = int(dfa.min_steps_to_accept()[0])
    except DecodingError:  # too large for a DFA: no floor beyond the request's own budget
        floor = 1
    plan = GrammarPlan(kind, to_gbnf(g), max(floor, 1), dfa=dfa if kind == "gbnf" else None)
    if kind == "json-schema":
        return GrammarPlan(kind, plan.gbnf, plan.floor, schema=source if not isinstance(source, str)
                           else json.loads(source))
    if kind == "dtd":
        from decoding.frontends.xml.dtd import parse_dtd

        return GrammarPlan(kind, plan.gbnf, plan.floor, dtd=parse_dtd(source, base_dir=base_dir), root=root)
    return plan


def check_answer(plan: GrammarPlan, text: str) -> tuple[bool, str, dict]:
    """``(ok, text to return, x_guard report)``: the answer validated, or repaired."""
    from decoding.guard import guard_json, guard_xml

    if plan.kind == "json-schema":
        r = guard_json(text, plan.schema)
        if r.ok and r.text == text.strip():
            return True, text, {"valid": True}
        rr = guard_json(text, plan.schema, repair=True)
        if rr.ok:
            return True, rr.text or "", {"valid": True, "repaired": True, "changes": len(rr.changes),
                                         "errors": [str(e) for e in rr.errors][:5]}
        return False, text, {"valid": False, "errors": [str(e) for e in (rr.errors or r.errors)][:5]}
    if plan.kind == "dtd":
        r = guard_xml(text, plan.dtd, root=plan.root)
        if r.ok and r.text == text.strip():
            return True, text, {"valid": True}
        rr = guard_xml(text, plan.dtd, root=plan.root, repair=True)
        if rr.ok:
            return True, rr.text or "", {"valid": True, "repaired": True, "changes": len(rr.changes),
                                         "errors": [str(e) for e in rr.errors][:5]}
        return False, text, {"valid": False, "errors": [str(e) for e in (rr.errors or r.errors)][:5]}
    if plan.dfa is not None:
        ok = bool(plan.dfa.accepts(text.encode("utf-8")))
        return ok, text, {"valid": ok} if ok else {"valid": False, "errors": ["not in the grammar's language"]}
    return True, text, {"valid": None, "note": "GBNF too large for a DFA check: unchecked"}


# ----------------------------------------------------------------------------- requests

def _bad(msg: str, param: str | None = None) -> UpstreamError:
    return UpstreamError(msg, status=400, code="invalid_request", param=param)


@dataclass
class UpstreamForwarder:
    """Turns one OpenAI request into llama-server calls (module docstring)."""

    pool: UpstreamPool
    dtd_dir: str | None = None
    default_max_tokens: int = 256
    max_tokens_limit: int = 2048
    max_attempts: int = 3
    _plans: dict = field(default_factory=dict)
    stats: dict = field(default_factory=lambda: {"requests": 0, "repaired": 0, "retried": 0, "invalid": 0})

    def plan_of(self, body: dict) -> GrammarPlan | None:
        rf = body.get("response_format")
        n = sum(x is not None for x in (rf, body.get("grammar"), body.get("dtd")))
        if n > 1:
            raise _bad("at most one of response_format, grammar, dtd per request", "response_format")
        if rf is not None:
            if not isinstance(rf, dict):
                raise _bad("response_format must be an object", "response_format")
            t = rf.get("type")
            if t == "text":
                return None
            if t == "json_object":
                key, args = ("json-schema", json.dumps({"type": "object"})), {}
            elif t == "json_schema":
                schema = (rf.get("json_schema") or {}).get("schema")
                if not isinstance(schema, (dict, bool)):
                    raise _bad("response_format.json_schema.schema must be a JSON Schema", "response_format")
                key, args = ("json-schema", json.dumps(schema)), {}  # key order is the properties' order
            else:
                raise _bad(f"response_format.type {t!r} is not supported", "response_format")
        elif body.get("grammar") is not None:
            if not isinstance(body["grammar"], str):
                raise _bad("grammar must be GBNF text", "grammar")
            key, args = ("gbnf", body["grammar"]), {}
        elif body.get("dtd") is not None:
            dtd, root = body["dtd"], body.get("root")
            if not isinstance(dtd, str) or not isinstance(root, str):
                raise _bad("dtd (text or a file name under --dtd-dir) and root (an element name) are needed", "dtd")
            opts = body.get("dtd_options") or {}
            if not isinstance(opts, dict) or set(opts) - set(_DTD_OPTION_NAMES):
                raise _bad(f"dtd_options: known options are {', '.join(_DTD_OPTION_NAMES)}", "dtd_options")
            if "<" not in dtd:
                dtd = self._named_dtd(dtd)
            key, args = ("dtd", dtd), {"root": root, "options": opts}
        else:
            return None
        ck = json.dumps([key, args])
        plan = self._plans.get(ck)
        if plan is None:
            kind, src = key
            try:
                source = json.loads(src) if kind == "json-schema" else src
                plan = plan_grammar(kind, source, root=args.get("root"), options=args.get("options"),
                                    base_dir=self.dtd_dir)
            except DecodingError as e:
                raise UpstreamError(f"{'response_format' if kind == 'json-schema' else kind}: {e}", status=422,
                                    code="unprocessable_grammar") from e
            if len(self._plans) > 256:
                self._plans.pop(next(iter(self._plans)))
            self._plans[ck] = plan
        return plan

    def _named_dtd(self, name: str) -> str:
        import os

        if self.dtd_dir is None:
            raise _bad(f"dtd {name!r}: a DTD named by file needs the server's --dtd-dir", "dtd")
        base = os.path.realpath(self.dtd_dir)
        path = os.path.realpath(os.path.join(base, name))
        if not path.startswith(base + os.sep) or not os.path.isfile(path):
            raise _bad(f"dtd {name!r}: no such file under --dtd-dir", "dtd")
        with open(path, encoding="utf-8") as f:
            return f.read()

    async def handle(self, route: str, body: Any) -> dict:
        if not isinstance(body, dict):
            raise _bad("the request body must be a JSON object")
        for f, why in (("stream", "streaming"), ("tools", "tools")):
            if body.get(f):
                raise _bad(f"{why} is not supported with --upstream", f)
        if body.get("n", 1) != 1:
            raise _bad("n must be 1", "n")
        mt = body.get("max_tokens", body.get("max_completion_tokens", self.default_max_tokens))
        if not isinstance(mt, int) or mt < 1 or mt > self.max_tokens_limit:
            raise _bad(f"max_tokens must be an integer in 1..{self.max_tokens_limit}", "max_tokens")
        plan = self.plan_of(body)
        self.stats["requests"] += 1
        budget = max(mt, plan.floor) if plan else mt
        report: dict = {}
        text, finish, usage, served_by = "", "stop", {}, ""
        for attempt in range(1, self.max_attempts + 1):
            text, finish, usage, served_by = await self._call(route, body, plan, budget)
            if plan is None:
                break
            ok, text2, report = check_answer(plan, text)
            report["attempt"] = attempt
            if ok:
                if report.get("repaired"):
                    self.stats["repaired"] += 1
                text, finish = text2, "stop"
                break
            self.stats["retried"] += 1
            budget = min(budget * 2, self.max_tokens_limit * 2)
        else:
            self.stats["invalid"] += 1
            raise UpstreamError(f"no valid answer after {self.max_attempts} attempts (last from {served_by}): "
                                f"{'; '.join(report.get('errors', []))[:400]}", status=502,
                                code="invalid_upstream_answer")
        return self._response(route, body, text, finish, usage, report if plan else None, served_by)

    async def _call(self, route: str, body: dict, plan: GrammarPlan | None, budget: int) -> tuple[str, str, dict, str]:
        common = {k: body[k] for k in ("temperature", "top_p", "seed", "stop") if body.get(k) is not None}
        if plan is not None:
            common.pop("stop", None)  # a stop string would cut the structure
            common["grammar"] = plan.gbnf
        if route == "chat":
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise _bad("messages must be a non-empty list", "messages")
            doc, url = await self.pool.post("/v1/chat/completions", {"messages": msgs, "max_tokens": budget, **common})
            try:
                ch = doc["choices"][0]
                return ch["message"].get("content") or "", ch.get("finish_reason") or "stop", doc.get("usage") or {}, url
            except (KeyError, IndexError, TypeError) as e:
                raise UpstreamError(f"upstream {url}: malformed chat answer ({e!r})", code="upstream_malformed") from e
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise _bad("prompt must be a non-empty string", "prompt")
        doc, url = await self.pool.post("/completion", {"prompt": prompt, "n_predict": budget,
                                                         "cache_prompt": True, **common})
        if not isinstance(doc.get("content"), str):
            raise UpstreamError(f"upstream {url}: malformed /completion answer (no content)", code="upstream_malformed")
        limit = doc.get("stop_type") == "limit" or doc.get("stopped_limit") or doc.get("truncated")
        usage = {"prompt_tokens": doc.get("tokens_evaluated", 0), "completion_tokens": doc.get("tokens_predicted", 0)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return doc["content"], "length" if limit else "stop", usage, url

    def _response(self, route: str, body: dict, text: str, finish: str, usage: dict, report: dict | None,
                  served_by: str) -> dict:
        base = {"id": f"up-{time.time_ns():x}", "created": int(time.time()), "model": body.get("model") or "upstream",
                "usage": usage, "x_upstream": served_by}
        if report is not None:
            base["x_guard"] = report
        if route == "chat":
            return {**base, "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": finish}]}
        return {**base, "object": "text_completion",
                "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}]}


# ----------------------------------------------------------------------------- the app

def create_upstream_app(config: Any, *, pool: UpstreamPool | None = None) -> Any:
    """The Starlette app of upstream mode for a :class:`~decoding.server.config.ServerConfig`
    with ``upstreams`` (or an explicit ``pool``, for tests)."""
    import hmac
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    pool = pool or UpstreamPool(list(getattr(config, "upstreams", ()) or ()))
    fwd = UpstreamForwarder(pool, dtd_dir=getattr(config, "dtd_dir", None),
                            default_max_tokens=getattr(config, "default_max_tokens", 256),
                            max_tokens_limit=getattr(config, "max_tokens_limit", 2048))
    api_key = getattr(config, "api_key", None)
    max_body = getattr(config, "max_body_bytes", 1 << 20)

    def error(status: int, message: str, code: str, param: str | None = None) -> JSONResponse:
        typ = "invalid_request_error" if status < 500 else "server_error"
        return JSONResponse({"error": {"message": message, "type": typ, "param": param, "code": code}},
                            status_code=status)

    async def forward(request: Request, route: str) -> JSONResponse:
        if api_key is not None:
            got = request.headers.get("authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {api_key}".encode()):
                return error(401, "invalid or missing API key", "invalid_api_key")
        raw = await request.body()
        if len(raw) > max_body:
            return error(413, f"body over {max_body} bytes", "body_too_large")
        try:
            body = json.loads(raw)
        except ValueError as e:
            return error(400, f"body is not JSON: {e}", "invalid_json")
        try:
            return JSONResponse(await fwd.handle(route, body))
        except UpstreamError as e:
            return error(e.status, str(e), e.code, e.param)
        except DecodingError as e:
            return error(422, str(e), "unprocessable_grammar")

    async def chat(request: Request) -> JSONResponse:
        return await forward(request, "chat")

    async def completions(request: Request) -> JSONResponse:
        return await forward(request, "completion")

    async def health(request: Request) -> JSONResponse:
        ups = pool.view()
        ok = any(u["healthy"] for u in ups)
        return JSONResponse({"status": "ok" if ok else "no_upstream", "mode": "upstream", "upstreams": ups,
                             "retries": pool.retries, **fwd.stats}, status_code=200 if ok else 503)

    @asynccontextmanager
    async def lifespan(app: Any):
        await pool.start()
        try:
            yield
        finally:
            await pool.stop()

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                            Route("/v1/completions", completions, methods=["POST"]),
                            Route("/health", health, methods=["GET"])], lifespan=lifespan)
    app.state.pool, app.state.forwarder = pool, fwd
    return app
