"""The FastAPI application: OpenAI-compatible routes over one :class:`Engine`.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions`` (JSON, or SSE with
``stream: true`` ending in ``data: [DONE]``), ``GET /v1/models[/{id}]``, ``GET /health``,
``GET /metrics`` (Prometheus text).  ``/v1/*`` needs ``Authorization: Bearer <key>`` when the
server has an API key; ``/health`` and ``/metrics`` do not.

Order of checks for a generation request: API key (401) → body size (413) → JSON (400) →
fields (400) → queue slot (503) → grammar compile, outside the generation lock (422) →
generation on the engine thread (500 with the cause if the processor failed)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import os
import threading
import time
import uuid
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from decoding.compiler import Compiler
from decoding.server.config import ServerConfig
from decoding.server.constraints import Constraint, GrammarService, tool_calls_from_text
from decoding.server.engine import Engine, Result, load_llm
from decoding.server.errors import APIError, error_body, from_decoding_error
from decoding.server.metrics import CONTENT_TYPE_LATEST, Metrics
from decoding.server.openapi import CHAT_BODY, COMPLETION_BODY, ERROR_RESPONSES, request_body
from decoding.server.protocol import GenRequest, parse_request
from decoding.server.toolmarkers import model_tool_markers

__all__ = ["create_app"]


async def _client_gone(request: Request) -> None:
    """Return when the client of ``request`` (whose body was read) disconnects: the next ASGI
    message after the body is ``http.disconnect`` (uvicorn reads the socket while we wait).
    Raises if the server sends anything else."""
    msg = await request.receive()
    if msg["type"] != "http.disconnect":
        raise RuntimeError(f"unexpected ASGI message {msg['type']!r} after the request body")


def _model_id(config: ServerConfig) -> str:
    return os.path.basename(config.model)


def _reason(res: Result) -> str:
    """``stop`` for a complete answer (a constrained answer closed by the budget at
    ``max_tokens`` is complete, so ``stop``), else ``length``."""
    return "stop" if res.complete else "length"


class _Server:
    """What the routes share: config, metrics, engine, grammar service."""

    def __init__(self, config: ServerConfig, llm: Any) -> None:
        from decoding.artifacts.cache import GrammarCache

        if config.tool_call_start is None:  # the model's own markers, else the fallback
            found = model_tool_markers(llm)
            config = dataclasses.replace(config, tool_call_start=found.start, tool_call_end=found.end)
            self.markers_source = found.source
        else:
            self.markers_source = "configured"
        self.config = config
        self.markers = (config.tool_call_start, config.tool_call_end)
        self.metrics = Metrics()
        self.engine = Engine(llm, config, self.metrics)
        self.engine.markers = self.markers
        cache = GrammarCache(config.cache_dir) if config.cache_dir else None
        self.grammars = GrammarService(Compiler(llm, cache=cache), config, self.metrics, self.markers)
        self.model_id = _model_id(config)

    # ------------------------------------------------------------------ request checks
    def check_key(self, request: Request) -> None:
        key = self.config.api_key
        if key is None:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {key}".encode()):
            raise APIError(401, "missing or invalid API key (Authorization: Bearer <key>)", code="invalid_api_key")

    async def read_json(self, request: Request) -> Any:
        limit = self.config.max_body_bytes
        cl = request.headers.get("content-length")
        if cl is not None and cl.isdigit() and int(cl) > limit:
            raise APIError(413, f"request body of {cl} bytes is over the limit of {limit} (max_body_bytes)",
                           code="body_too_large")
        buf = bytearray()
        async for chunk in request.stream():
            buf += chunk
            if len(buf) > limit:
                raise APIError(413, f"request body is over the limit of {limit} bytes (max_body_bytes)",
                               code="body_too_large")
        try:
            return json.loads(bytes(buf))
        except ValueError as e:
            raise APIError(400, f"the request body is not valid JSON: {e}", code="invalid_json") from e
        except RecursionError as e:
            raise APIError(400, "the request body is nested too deeply", code="invalid_json") from e

    # ------------------------------------------------------------------ generation
    async def handle(self, request: Request, *, chat: bool) -> Response:
        self.check_key(request)
        body = await self.read_json(request)
        req = parse_request(body, chat=chat, config=self.config)
        self.engine.admit()
        released = False
        try:
            con = await run_in_threadpool(self.grammars.compile, req.grammar, req.max_tokens) \
                if req.grammar else None
            if req.stream:
                resp = self.stream(req, con, chat)
                released = True  # the stream releases its slot when its generation ends
                return resp
            cancelled = threading.Event()
            fut = asyncio.wrap_future(self.engine.submit(self.engine.generate, req, con, cancelled))
            gone = asyncio.ensure_future(_client_gone(request))  # watch the client while the answer is generated
            try:
                done, _ = await asyncio.wait({fut, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone in done and gone.exception() is None:
                    cancelled.set()  # the client went away: the generation ends at its next token
                res = await asyncio.shield(fut)
            except APIError:
                raise
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - mapped to an HTTP error with the cause
                raise from_decoding_error(e) from e
            finally:
                gone.cancel()
                cancelled.set()
                if not fut.done():  # this handler was cancelled: keep the slot until the generation ends
                    await asyncio.wait({fut})
            if res.finish_reason == "cancelled":
                raise APIError(499, "the client closed the connection before the answer was complete",
                               code="client_closed_request")
            return JSONResponse(self.answer(req, con, res, chat))
        finally:
            if not released:
                self.engine.release()

    def _message(self, req: GenRequest, con: Constraint | None, res: Result) -> tuple[dict, str]:
        reason = _reason(res)
        msg: dict[str, Any] = {"role": "assistant", "content": res.text}
        if con is not None and con.spec.kind.startswith("tool"):
            content, calls = tool_calls_from_text(res.text, con.spec, self.markers)
            msg["content"] = content
            if calls:
                msg["tool_calls"] = calls
                reason = "tool_calls"
        return msg, reason

    def answer(self, req: GenRequest, con: Constraint | None, res: Result, chat: bool) -> dict:
        usage = {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                 "total_tokens": res.prompt_tokens + res.completion_tokens}
        head = {"created": int(time.time()), "model": self.model_id, "usage": usage}
        if chat:
            msg, reason = self._message(req, con, res)
            return {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", **head,
                    "choices": [{"index": 0, "message": msg, "finish_reason": reason, "logprobs": None}]}
        reason = _reason(res)
        return {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", **head,
                "choices": [{"index": 0, "text": res.text, "finish_reason": reason, "logprobs": None}]}

    def stream(self, req: GenRequest, con: Constraint | None, chat: bool) -> StreamingResponse:
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        cancelled = threading.Event()
        buffered = con is not None and con.spec.kind.startswith("tool")  # tool calls: one delta at the end

        def put(item: tuple) -> None:
            try:
                loop.call_soon_threadsafe(q.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody listens
                cancelled.set()

        def run() -> None:
            try:
                res = self.engine.stream(req, con, (lambda p: None) if buffered else (lambda p: put(("piece", p))),
                                         cancelled)
                put(("done", res))
            except BaseException as e:  # noqa: BLE001 - sent to the client as an error event
                put(("error", e))

        fut = self.engine.submit(run)
        fut.add_done_callback(lambda f: self.engine.release())
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())

        def chunk(delta: dict | None, text: str | None, reason: str | None, usage: dict | None = None) -> str:
            if chat:
                d = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": self.model_id,
                     "choices": [] if delta is None else
                     [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}]}
            else:
                d = {"id": cid, "object": "text_completion", "created": created, "model": self.model_id,
                     "choices": [] if text is None else
                     [{"index": 0, "text": text, "finish_reason": reason, "logprobs": None}]}
            if usage is not None:
                d["usage"] = usage
            return f"data: {json.dumps(d, ensure_ascii=False)}\n\n"

        async def events() -> AsyncIterator[str]:
            try:
                if chat:
                    yield chunk({"role": "assistant", "content": ""}, None, None)
                while True:
                    kind, x = await q.get()
                    if kind == "piece":
                        yield chunk({"content": x}, x, None)
                        continue
                    if kind == "error":
                        err = from_decoding_error(x)
                        self.metrics.requests.labels(endpoint="stream", status=str(err.status)).inc()
                        yield f"data: {json.dumps(err.body())}\n\n"
                        return
                    res: Result = x
                    if chat:
                        msg, reason = self._message(req, con, res)
                        if buffered:
                            delta: dict[str, Any] = {}
                            if msg.get("content"):
                                delta["content"] = msg["content"]
                            if msg.get("tool_calls"):
                                delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(msg["tool_calls"])]
                            yield chunk(delta, None, reason)
                        else:
                            yield chunk({}, None, reason)
                    else:
                        reason = _reason(res)
                        yield chunk(None, "", reason)
                    if req.include_usage:
                        u = {"prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
                             "total_tokens": res.prompt_tokens + res.completion_tokens}
                        yield chunk(None, None, None, usage=u)
                    yield "data: [DONE]\n\n"
                    return
            finally:
                cancelled.set()

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def create_app(config: ServerConfig | None = None, *, llm: Any = None) -> FastAPI:
    """The app for ``config``; ``llm`` (a ``llama_cpp.Llama``) defaults to loading
    ``config.model``."""
    config = config or ServerConfig()
    srv = _Server(config, llm if llm is not None else load_llm(config))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        srv.engine.close()

    app = FastAPI(title="guarded-decoding", version="0.1.0", lifespan=lifespan,
                  description="OpenAI-compatible completions with grammar-guaranteed structured output")
    app.state.server = srv

    @app.exception_handler(APIError)
    async def _api_error(request: Request, e: APIError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status, headers=e.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(e.status_code, f"{request.method} {request.url.path}: {e.detail}",
                                       code="not_found" if e.status_code == 404 else None),
                            status_code=e.status_code, headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def _internal(request: Request, e: Exception) -> JSONResponse:
        err = from_decoding_error(e)
        return JSONResponse(err.body(), status_code=err.status)

    @app.middleware("http")
    async def _count(request: Request, call_next: Any) -> Response:
        try:
            resp = await call_next(request)
            status = resp.status_code
        except Exception:
            status = 500
            raise
        finally:
            srv.metrics.requests.labels(endpoint=request.url.path, status=str(status)).inc()
            if status == 422:
                srv.metrics.unprocessable.inc()
        if config.test_hooks:  # lets fault tests find (and kill) the worker that answers
            resp.headers["X-Worker-Pid"] = str(os.getpid())
        return resp

    @app.post("/v1/chat/completions", openapi_extra=request_body(CHAT_BODY), responses=ERROR_RESPONSES)
    async def chat_completions(request: Request) -> Response:
        return await srv.handle(request, chat=True)

    @app.post("/v1/completions", openapi_extra=request_body(COMPLETION_BODY), responses=ERROR_RESPONSES)
    async def completions(request: Request) -> Response:
        return await srv.handle(request, chat=False)

    @app.get("/v1/models")
    async def models(request: Request) -> dict:
        srv.check_key(request)
        return {"object": "list", "data": [{"id": srv.model_id, "object": "model", "created": 0,
                                            "owned_by": "guarded-decoding"}]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str, request: Request) -> dict:
        srv.check_key(request)
        if model_id != srv.model_id:
            raise APIError(404, f"model {model_id!r} is not served here (this server has {srv.model_id!r})",
                           param="model", code="model_not_found")
        return {"id": srv.model_id, "object": "model", "created": 0, "owned_by": "guarded-decoding"}

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": srv.model_id, "queue_depth": srv.engine.depth,
                "queue_size": config.queue_size, "tool_call_markers": list(srv.markers),
                "tool_call_markers_source": srv.markers_source}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(srv.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app
