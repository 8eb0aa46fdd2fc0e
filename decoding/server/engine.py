"""One model per process, one generation at a time, a bounded queue in front.

Invariants
- the llama model is not thread-safe: every generation runs on the engine's single worker
  thread (a one-thread executor); compiles run elsewhere (see
  :class:`~decoding.server.constraints.GrammarService`);
- admission is bounded: at most ``queue_size`` requests wait or run; one more is refused
  (:class:`~decoding.server.errors.APIError` 503 with ``Retry-After``) instead of queued;
- a constrained answer is never returned unconstrained: if the logits processor failed
  (its sticky error), the request fails with 500 and the cause;
- a streamed generation stops at the next token once its consumer is gone (``cancel``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from decoding.errors import ProcessorError
from decoding.runtime.processor import GrammarLogitsProcessor
from decoding.server.config import ServerConfig
from decoding.server.constraints import TOOL_END, TOOL_START, Constraint
from decoding.server.errors import APIError
from decoding.server.metrics import Metrics
from decoding.server.protocol import GenRequest

__all__ = ["Engine", "Result", "load_llm", "tool_prompt"]


def load_llm(config: ServerConfig) -> Any:
    """The ``llama_cpp.Llama`` of ``config.model``: a packaged model name or a GGUF path."""
    from decoding.models import MODELS, load_model

    if config.model in MODELS:
        return load_model(config.model, n_ctx=config.n_ctx)
    import os

    import llama_cpp

    from decoding.errors import VocabError

    if not os.path.isfile(config.model):
        raise VocabError(f"--model {config.model!r}: neither a packaged model ({', '.join(MODELS)}) nor a file")
    n = max(1, (os.cpu_count() or 2) // 2)
    return llama_cpp.Llama(model_path=config.model, n_ctx=config.n_ctx, verbose=False, n_threads=n,
                           n_threads_batch=n)


def tool_prompt(req: GenRequest) -> list:
    """The chat messages with the tool descriptions prepended as a system message (the
    packaged models' chat templates do not render ``tools``)."""
    import json

    g = req.grammar
    tools = g.tools if g is not None and g.kind.startswith("tool") else ()
    if not tools:
        return req.messages or []
    listing = "\n".join(json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters},
                                   ensure_ascii=False) for t in tools)
    if g.kind.startswith("tool-xml-"):
        call = "<tool_call><FUNCTION_NAME><ARGUMENT_NAME>value</ARGUMENT_NAME>...</FUNCTION_NAME></tool_call>"
        how = (f"Answer with exactly one XML function call: {call}" if g.kind == "tool-xml-call" else
               f"To call a function, write {call}; otherwise answer in plain text.")
    else:
        how = ('Answer with exactly one JSON object {"name": <function name>, "arguments": {...}}.'
               if g.kind == "tool-call" else
               f'To call a function, write {TOOL_START}{{"name": <function name>, "arguments": {{...}}}}{TOOL_END}; '
               "otherwise answer in plain text.")
    msgs = list(req.messages or [])
    sys_text = f"You can call these functions:\n{listing}\n{how}"
    if msgs and msgs[0]["role"] == "system":
        msgs[0] = {"role": "system", "content": msgs[0]["content"] + "\n\n" + sys_text}
    else:
        msgs.insert(0, {"role": "system", "content": sys_text})
    return msgs


@dataclass
class Result:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    complete: bool


class _Timed:
    """Wraps the grammar processor: times each mask, and (test hook) injects a fault after
    ``fail_after`` calls, recorded as the matcher's sticky error like any other failure."""

    def __init__(self, proc: GrammarLogitsProcessor, fail_after: int | None) -> None:
        self.proc = proc
        self.fail_after = fail_after
        self.ns = 0
        self.calls = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            self.proc.matcher.fail(ProcessorError(f"injected fault after {self.fail_after} tokens (test hook)"))
        t0 = time.perf_counter_ns()
        out = self.proc(input_ids, scores)
        self.ns += time.perf_counter_ns() - t0
        return out


class Engine:
    """The model of this process and its one generation thread."""

    def __init__(self, llm: Any, config: ServerConfig, metrics: Metrics) -> None:
        self.llm = llm
        self.config = config
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decoding-gen")
        self._lock = threading.Lock()
        self._active = 0

    # ------------------------------------------------------------------ admission
    def admit(self) -> None:
        """Take a queue slot or raise 503."""
        with self._lock:
            if self._active >= self.config.queue_size:
                raise APIError(503, f"the server is busy: {self._active} requests queued or running "
                               f"(queue_size={self.config.queue_size}); retry later",
                               code="queue_full", headers={"Retry-After": str(self.config.retry_after_s)})
            self._active += 1
            self.metrics.queue_depth.set(self._active)

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            self.metrics.queue_depth.set(self._active)

    @property
    def depth(self) -> int:
        return self._active

    def submit(self, fn: Callable, *args: Any) -> Any:
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ generation (worker thread)
    def _call(self, req: GenRequest, con: Constraint | None, stream: bool) -> tuple[Any, _Timed | None]:
        from llama_cpp import LogitsProcessorList

        timed = None
        kw: dict[str, Any] = dict(max_tokens=req.max_tokens, temperature=req.temperature, top_p=req.top_p,
                                  seed=req.seed, stream=stream)
        if con is not None:
            timed = _Timed(GrammarLogitsProcessor(con.compiled, max_tokens=req.max_tokens), req.fail_after_tokens)
            kw["logits_processor"] = LogitsProcessorList([timed])
        elif req.stop:
            kw["stop"] = req.stop
        if req.chat:
            return self.llm.create_chat_completion(messages=tool_prompt(req), **kw), timed
        return self.llm.create_completion(req.prompt, **kw), timed

    def _finish(self, timed: _Timed | None, con: Constraint | None, text: str, reason: str, n: int) -> bool:
        """Raise on a processor failure; record mask time; say whether the answer is complete."""
        if timed is None:
            return True
        timed.proc.raise_if_failed()
        if n:
            self.metrics.mask_us.observe(timed.ns / 1000 / max(1, timed.calls))
        if reason == "stop":
            return timed.proc.matcher.is_accepting()
        return not con.compiled.special_token_ids and con.compiled.accepts(text.encode("utf-8"))

    def generate(self, req: GenRequest, con: Constraint | None) -> Result:
        """One whole answer (runs on the worker thread)."""
        out, timed = self._call(req, con, False)
        ch = out["choices"][0]
        text = (ch["message"]["content"] or "") if req.chat else ch["text"]
        reason = ch.get("finish_reason") or "stop"
        usage = out.get("usage") or {}
        n = int(usage.get("completion_tokens", 0))
        complete = self._finish(timed, con, text, reason, n)
        self.metrics.tokens.inc(n)
        return Result(text, reason, int(usage.get("prompt_tokens", 0)), n, complete)

    def stream(self, req: GenRequest, con: Constraint | None, emit: Callable[[str], None],
               cancelled: threading.Event) -> Result:
        """Generate, calling ``emit(text_piece)`` per token (runs on the worker thread); stops
        early (finish_reason ``cancelled``) once ``cancelled`` is set."""
        it, timed = self._call(req, con, True)
        pieces: list[str] = []
        reason = "stop"
        n = 0
        try:
            for chunk in it:
                if cancelled.is_set():
                    reason = "cancelled"
                    break
                ch = chunk["choices"][0]
                piece = (ch.get("delta", {}).get("content") or "") if req.chat else (ch.get("text") or "")
                if piece:
                    n += 1
                    pieces.append(piece)
                    emit(piece)
                if ch.get("finish_reason"):
                    reason = ch["finish_reason"]
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        text = "".join(pieces)
        complete = self._finish(timed, con, text, reason, n) if reason != "cancelled" else False
        self.metrics.tokens.inc(n)
        prompt_tokens = 0
        return Result(text, reason, prompt_tokens, n, complete)
