"""Compile the grammar part of a request, and read tool calls back out of the answer.

Compile once: every grammar goes through the one :class:`~decoding.Compiler`, whose cache is
keyed by the canonical grammar key (and a source alias), so a schema resent with its keys
reordered or other whitespace is a cache hit.  Compiles run outside the generation lock,
serialized among themselves by ``Compiler``-level lock so that cache-hit accounting is exact.

Tool calls (``max_calls`` = 1, or the server's ``max_parallel_tool_calls`` N when the
request has ``parallel_tool_calls`` true, the OpenAI default)
- ``tool_choice`` ``required`` or a named function: the whole answer is one JSON object
  ``{"name": <tool>, "arguments": <its parameters schema>}`` (``anyOf`` over the tools), or,
  with N > 1, a JSON array of 1..N such objects.
- ``auto``: free text that may contain up to ``max_calls`` regions ``START{...}END`` each
  holding such an object (:func:`decoding.frontends.anchors.anchored`, lazy mode): text
  outside the regions is free, a region is constrained, and an opened region is always
  closed.  START / END are the model's markers (:mod:`decoding.server.toolmarkers`)."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decoding.backends.contract import CompiledGrammar
from decoding.compiler import Compiler
from decoding.errors import DecodingError
from decoding.frontends.anchors import anchored
from decoding.server.config import ServerConfig
from decoding.server.errors import APIError, from_decoding_error
from decoding.server.metrics import Metrics
from decoding.server.protocol import GrammarSpec, ToolSpec
from decoding.server.xmltools import XML_ROOT, xml_call_arguments, xml_tool_grammar

__all__ = ["Constraint", "GrammarService", "tool_call_schema", "tool_calls_schema", "tool_calls_from_text",
           "TOOL_START", "TOOL_END"]

#: the default (fallback) tool-call markers
TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"


@dataclass(frozen=True)
class Constraint:
    compiled: CompiledGrammar
    spec: GrammarSpec
    cache_hit: bool
    compile_ms: float


def tool_call_schema(tools: tuple[ToolSpec, ...]) -> dict:
    """The JSON Schema of one call of one of ``tools``."""
    alts = [{"type": "object",
             "properties": {"name": {"const": t.name}, "arguments": t.parameters},
             "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    return alts[0] if len(alts) == 1 else {"anyOf": alts}


def tool_calls_schema(tools: tuple[ToolSpec, ...], max_calls: int) -> dict:
    """The JSON Schema of a forced answer: one call, or an array of 1..``max_calls`` calls."""
    one = tool_call_schema(tools)
    return one if max_calls == 1 else {"type": "array", "items": one, "minItems": 1, "maxItems": max_calls}


def _depth(x: Any, limit: int, pointer: str = "") -> str | None:
    """The pointer of the first place nested deeper than ``limit`` (iterative), or None."""
    stack = [(x, pointer, 0)]
    while stack:
        v, p, d = stack.pop()
        if d > limit:
            return p or "/"
        if isinstance(v, dict):
            stack.extend((w, f"{p}/{str(k).replace('~', '~0').replace('/', '~1')}", d + 1) for k, w in v.items())
        elif isinstance(v, list):
            stack.extend((w, f"{p}/{i}", d + 1) for i, w in enumerate(v))
    return None


def tool_calls_from_text(text: str, spec: GrammarSpec,
                         markers: tuple[str, str] = (TOOL_START, TOOL_END)) -> tuple[str | None, list[dict] | None]:
    """``(content, tool_calls)`` of a constrained answer (``tool_calls`` None when there is no
    complete call); ``markers`` delimit the calls of ``tool_choice: auto``."""
    def call(obj: Any) -> dict | None:
        if not isinstance(obj, dict) or "name" not in obj or "arguments" not in obj:
            return None
        return {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                "function": {"name": obj["name"], "arguments": json.dumps(obj["arguments"], ensure_ascii=False)}}

    def parse(doc: str) -> Any:
        try:
            return json.loads(doc)
        except ValueError:
            return None

    if spec.kind.startswith("tool-xml-"):
        start, end = f"<{XML_ROOT}>", f"</{XML_ROOT}>"
        i = text.find(start)
        j = text.find(end, i + 1) if i >= 0 else -1
        got = xml_call_arguments(text[i:j + len(end)], spec.tools) if j >= 0 else None
        if got is None:
            return text, None
        c = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "xml": text[i:j + len(end)],
             "function": {"name": got[0], "arguments": json.dumps(got[1], ensure_ascii=False)}}
        content = (text[:i] + text[j + len(end):]).strip()
        return content or None, [c]
    if spec.kind == "tool-call":
        obj = parse(text)
        objs = obj if isinstance(obj, list) and obj else [obj]
        calls = [call(o) for o in objs]
        return (None, calls) if all(calls) else (text, None)
    start, end = markers
    content, calls, rest = [], [], text
    while True:
        head, sep, after = rest.partition(start)
        if not sep:
            content.append(rest)
            break
        doc, sep2, tail = after.partition(end)
        c = call(parse(doc)) if sep2 else None
        if c is None:  # an unclosed or unreadable region stays text
            content.append(rest)
            break
        content.append(head)
        calls.append(c)
        rest = tail
    if not calls:
        return text, None
    joined = "".join(content).strip()
    return joined or None, calls


class GrammarService:
    """Compiles :class:`GrammarSpec` s for one model's tokenizer, with limits and metrics."""

    def __init__(self, compiler: Compiler, config: ServerConfig, metrics: Metrics,
                 markers: tuple[str, str] = (TOOL_START, TOOL_END)) -> None:
        self.compiler = compiler
        self.config = config
        self.metrics = metrics
        self.markers = markers
        self._lock = threading.Lock()

    def _hits(self) -> int:
        c = self.compiler.cache
        return 0 if c is None else c.stats["memory_hits"] + c.stats["disk_hits"]

    def _check_size(self, spec: GrammarSpec) -> None:
        src = spec.source if isinstance(spec.source, str) else json.dumps(spec.source)
        extra = sum(len(json.dumps(t.parameters)) for t in spec.tools)
        size = len(src.encode("utf-8")) + extra
        if size > self.config.max_schema_bytes:
            raise APIError(422, f"{spec.param}: the grammar source is {size} bytes, over the limit of "
                           f"{self.config.max_schema_bytes} (max_schema_bytes)", param=spec.param,
                           code="grammar_limit", limit="max_schema_bytes")
        objs = [(spec.source, spec.param)] if spec.kind == "json-schema" else \
            [(t.parameters, f"tools[{i}].function.parameters") for i, t in enumerate(spec.tools)]
        for obj, param in objs:
            where = _depth(obj, self.config.max_schema_depth)
            if where is not None:
                raise APIError(422, f"{param}: {where}: nesting deeper than {self.config.max_schema_depth} "
                               "(max_schema_depth)", param=param, code="grammar_limit", pointer=where,
                               limit="max_schema_depth")

    def _dtd_source(self, spec: GrammarSpec) -> tuple[Any, str | None]:
        """The DTD text or file path, and the base directory of its external entities."""
        base = self.config.dtd_dir
        src = spec.source
        if "<" in src:
            return src, base
        if base is None:
            raise APIError(400, "dtd: a DTD file name needs the server's DTD directory (--dtd-dir); send the "
                           "DTD text instead", param="dtd")
        root = os.path.realpath(base)
        path = os.path.realpath(os.path.join(root, src))
        if os.path.commonpath([root, path]) != root or not os.path.isfile(path):
            raise APIError(400, f"dtd: no file {src!r} under the server's DTD directory", param="dtd")
        return Path(path), base

    def _compile(self, spec: GrammarSpec) -> CompiledGrammar:
        c = self.compiler
        if spec.kind == "json-schema":
            return c.compile_json_schema(spec.source, **spec.options)
        if spec.kind == "gbnf":
            return c.compile_gbnf(spec.source, **spec.options)
        if spec.kind == "dtd":
            opts = dict(spec.options)
            src, base = self._dtd_source(spec)
            return c.compile_dtd(src, base_dir=base, **opts)
        if spec.kind.startswith("tool-xml-"):
            return c.compile_ir(xml_tool_grammar(spec.tools, auto=spec.kind == "tool-xml-auto"))
        n = int(spec.options.get("max_calls", 1))
        if spec.kind == "tool-call":
            return c.compile_json_schema(tool_calls_schema(spec.tools, n))
        g = c.prepare_source(tool_call_schema(spec.tools), "json-schema").grammar
        return c.compile_ir(anchored(g, *self.markers, mode="lazy", max_regions=n))

    def compile(self, spec: GrammarSpec, max_tokens: int | None = None) -> Constraint:
        """The compiled grammar of ``spec``; APIError 422 (located) when it cannot be enforced,
        or when its shortest complete output needs more than ``max_tokens`` tokens."""
        self._check_size(spec)
        with self._lock:
            before = self._hits()
            t0 = time.perf_counter()
            try:
                cg = self._compile(spec)
            except APIError:
                raise
            except DecodingError as e:
                raise from_decoding_error(e, spec.param) from e
            except RecursionError as e:
                raise APIError(422, f"{spec.param}: the grammar is nested too deeply to compile",
                               param=spec.param, code="grammar_limit") from e
            ms = (time.perf_counter() - t0) * 1000
            hit = self._hits() > before
        if hit:
            self.metrics.cache_hits.inc()
        else:
            self.metrics.cache_misses.inc()
            self.metrics.compile_ms.observe(ms)
        if max_tokens is not None:
            try:
                need = cg.completion_cost(0)
            except DecodingError as e:
                raise from_decoding_error(e, spec.param) from e
            if need > max_tokens:
                raise APIError(422, f"max_tokens={max_tokens} is too small for {spec.param}: its shortest complete "
                               f"output needs {need} tokens", param="max_tokens", code="max_tokens_too_small")
        return Constraint(cg, spec, hit, ms)
