"""One model per process, one generation at a time, a bounded queue in front.

Invariants
- the llama model is not thread-safe: every generation runs on the engine's single worker
  thread (a one-thread executor); compiles run elsewhere (see
  :class:`~decoding.server.constraints.GrammarService`);
- admission is bounded: at most ``queue_size`` requests wait or run; one more is refused
  (:class:`~decoding.server.errors.APIError` 503 with ``Retry-After``) instead of queued;
- a constrained answer is never returned unconstrained: if the logits processor failed
  (its sticky error), the request fails with 500 and the cause;
- a generation stops at the next token once its client is gone (``cancelled``, streamed or
  not): :class:`_Probe`, the last logits processor of every generation, then allows only
  end-of-generation tokens; it also records the prompt length (``usage.prompt_tokens`` of a
  streamed answer);
- nothing raised inside the logits-processor chain escapes into llama.cpp (where a Python
  exception in the sampler callback would be printed and ignored, leaving that token
  unconstrained): it is recorded as the matcher's sticky error and the request fails.
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
from decoding.server.constraints import Constraint
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


def tool_prompt(req: GenRequest, markers: tuple[str, str] = ("<tool_call>", "</tool_call>")) -> list:
    """The chat messages with the tool descriptions prepended as a system message (the
    packaged models' chat templates do not render ``tools``).  ``markers``: the tool-call
    delimiters of the model (:mod:`decoding.server.toolmarkers`)."""
    import json

    g = req.grammar
    tools = g.tools if g is not None and g.kind.startswith("tool") else ()
    if not tools:
        return req.messages or []
    start, end = markers
    n = int(g.options.get("max_calls", 1))
    listing = "\n".join(json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters},
                                   ensure_ascii=False) for t in tools)
    one = '{"name": <function name>, "arguments": {...}}'
    if g.kind.startswith("tool-xml-"):
        call = "<tool_call><FUNCTION_NAME><ARGUMENT_NAME>value</ARGUMENT_NAME>...</FUNCTION_NAME></tool_call>"
        how = (f"Answer with exactly one XML function call: {call}" if g.kind == "tool-xml-call" else
               f"To call a function, write {call}; otherwise answer in plain text.")
    elif g.kind == "tool-call":
        how = (f"Answer with exactly one JSON object {one}." if n == 1 else
               f"Answer with a JSON array of 1 to {n} function calls, each {one}.")
    else:
        how = (f"To call a function, write {start}{one}{end}"
               + ("" if n == 1 else f" (up to {n} calls, one after the other)") + "; otherwise answer in plain text.")
    msgs = list(req.messages or [])
    sys_text = f"You can call these functions:\n{listing}\n{how}"
    if msgs and msgs[0]["role"] == "system":
        msgs[0] = {"role": "system", "content": msgs[0]["content"] + "\n\n" + sys_text}
    else:
        msgs.insert(0, {"role": "system", "content": sys_text})
    return msgs


def _eog_only(scores: Any, eog_ids: Any) -> None:
    """Allow only the end-of-generation tokens (at a fixed logit: the grammar mask may have
    put them at -inf)."""
    scores[:] = -float("inf")
    scores[eog_ids] = 0.0


@dataclass
class Result:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    complete: bool


class _Timed:
    """Wraps the grammar processor: times each mask; an exception raised here (or, with the
    test hook ``x_fail_after_tokens``, one injected after ``fail_after`` tokens) becomes the
    matcher's sticky error and ends the generation, so the request fails with 500."""

    def __init__(self, proc: GrammarLogitsProcessor, fail_after: int | None) -> None:
        self.proc = proc
        self.fail_after = fail_after
        self.ns = 0
        self.calls = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.calls += 1
        t0 = time.perf_counter_ns()
        try:
            if self.fail_after is not None and self.calls > self.fail_after:
                raise RuntimeError(f"injected fault: the logits processor raised after {self.fail_after} tokens "
                                   "(test hook x_fail_after_tokens)")
            out = self.proc(input_ids, scores)
        except BaseException as e:  # noqa: BLE001 - recorded; raise_if_failed re-raises it as the cause
            self.proc.matcher.fail(e)
            _eog_only(scores, sorted(self.proc.compiled.vocab.eog_ids))
            out = scores
        self.ns += time.perf_counter_ns() - t0
        return out


class _Probe:
    """The last logits processor of every generation: records the prompt length (the
    ``input_ids`` of its first call) and, once ``cancelled`` is set, allows only
    end-of-generation tokens so that the generation ends at this token."""

    def __init__(self, eog_ids: list[int], cancelled: threading.Event | None) -> None:
        self.eog_ids = eog_ids
        self.cancelled = cancelled
        self.prompt_tokens: int | None = None
        self.calls = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
        self.calls += 1
        if self.cancelled is not None and self.cancelled.is_set():
            _eog_only(scores, self.eog_ids)
        return scores


def _model_eog_ids(llm: Any) -> list[int]:
    """The end-of-generation token ids of ``llm`` (``llama_vocab_is_eog``)."""
    try:
        import llama_cpp

        vocab = llm._model.vocab
        ids = [t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)]
    except (AttributeError, TypeError):  # a stand-in model without a llama.cpp vocabulary
        ids = []
    return ids or [int(llm.token_eos())]


class Engine:
    """The model of this process and its one generation thread."""

    def __init__(self, llm: Any, config: ServerConfig, metrics: Metrics) -> None:
        self.llm = llm
        self.config = config
        self.metrics = metrics
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decoding-gen")
        self._lock = threading.Lock()
        self._active = 0
        self._eog_ids: list[int] | None = None  # the model's end-of-generation ids, on first use
        self.markers: tuple[str, str] = ("<tool_call>", "</tool_call>")  # set by the app (toolmarkers)

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
    def _call(self, req: GenRequest, con: Constraint | None, stream: bool,
              cancelled: threading.Event | None) -> tuple[Any, _Timed | None, _Probe]:
        from llama_cpp import LogitsProcessorList

        timed = None
        if self._eog_ids is None:
            self._eog_ids = _model_eog_ids(self.llm)
        probe = _Probe(self._eog_ids, cancelled)
        kw: dict[str, Any] = dict(max_tokens=req.max_tokens, temperature=req.temperature, top_p=req.top_p,
                                  seed=req.seed, stream=stream)
        procs: list = [probe]
        if con is not None:
            copy = dict(copy_from=req.copy_from, copy_bonus=req.copy_bias) if req.copy_bias and req.copy_from else {}
            timed = _Timed(GrammarLogitsProcessor(con.compiled, max_tokens=req.max_tokens, **copy),
                           req.fail_after_tokens)
            procs.insert(0, timed)
        elif req.stop:
            kw["stop"] = req.stop
        kw["logits_processor"] = LogitsProcessorList(procs)
        if req.chat:
            return self.llm.create_chat_completion(messages=tool_prompt(req, self.markers), **kw), timed, probe
        return self.llm.create_completion(req.prompt, **kw), timed, probe

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

    def _cancelled(self, req: GenRequest) -> Result:
        return Result("", "cancelled", 0, 0, False)

    def generate(self, req: GenRequest, con: Constraint | None, cancelled: threading.Event | None = None) -> Result:
        """One whole answer (runs on the worker thread); ends early (finish_reason
        ``cancelled``) once ``cancelled`` is set (the client went away)."""
        if cancelled is not None and cancelled.is_set():  # gone while queued: do not start
            return self._cancelled(req)
        out, timed, probe = self._call(req, con, False, cancelled)
        ch = out["choices"][0]
        text = (ch["message"]["content"] or "") if req.chat else ch["text"]
        reason = ch.get("finish_reason") or "stop"
        usage = out.get("usage") or {}
        n = int(usage.get("completion_tokens", 0))
        self.metrics.tokens.inc(n)
        if cancelled is not None and cancelled.is_set():
            return Result(text, "cancelled", int(usage.get("prompt_tokens", 0)), n, False)
        complete = self._finish(timed, con, text, reason, n)
        return Result(text, reason, int(usage.get("prompt_tokens", 0)), n, complete)

    def stream(self, req: GenRequest, con: Constraint | None, emit: Callable[[str], None],
               cancelled: threading.Event) -> Result:
        """Generate, calling ``emit(text_piece)`` per token (runs on the worker thread); stops
        early (finish_reason ``cancelled``) once ``cancelled`` is set."""
        if cancelled.is_set():
            return self._cancelled(req)
        it, timed, probe = self._call(req, con, True, cancelled)
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
                    pieces.append(piece)
                    emit(piece)
                if ch.get("finish_reason"):
                    reason = ch["finish_reason"]
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        text = "".join(pieces)
        # one processor call per sampled token; the last one sampled is the end-of-generation
        # token when the answer stopped (not counted, as in llama.cpp's non-streamed usage)
        n = max(0, probe.calls - (1 if reason == "stop" else 0))
        self.metrics.tokens.inc(n)
        complete = self._finish(timed, con, text, reason, n) if reason != "cancelled" else False
        return Result(text, reason, probe.prompt_tokens or 0, n, complete)
