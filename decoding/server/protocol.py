"""Request bodies of ``/v1/chat/completions`` and ``/v1/completions``, checked into plain data.

:func:`parse_request` turns a decoded JSON body into a :class:`GenRequest` or raises
:class:`~decoding.server.errors.APIError` 400 naming the field.  Nothing here compiles: the
grammar part of a request is a :class:`GrammarSpec` (kind + source + options) that
:mod:`decoding.server.constraints` compiles.

Supported fields: the OpenAI ones used by clients (``model``, ``messages`` / ``prompt``,
``max_tokens`` / ``max_completion_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``,
``stream``, ``stream_options``, ``n`` (1 only), ``response_format``, ``tools``,
``tool_choice``, ``parallel_tool_calls``) and the extensions ``grammar`` (GBNF), ``dtd`` +
``root`` (+ ``dtd_options``), ``failsafe``, ``xml_tools``; fields the server does not use are ignored, as
OpenAI-compatible servers do."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from decoding.server.config import MAX_COPY_BIAS, ServerConfig
from decoding.server.errors import APIError

__all__ = ["GenRequest", "GrammarSpec", "ToolSpec", "parse_request", "message_text", "DTD_OPTIONS"]


#: the DTD front-end options a request may set (never compile options such as ``max_states``,
#: nor ``base_dir``: external entities come only from the server's ``dtd_dir``)
DTD_OPTIONS = ("cdata", "failsafe", "general_entities", "ids", "max_depth", "max_ws", "numeric_refs", "only",
               "text_patterns", "whitespace", "xml_declaration")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class GrammarSpec:
    """What to constrain the answer to.  ``kind``: ``json-schema``, ``dtd``, ``gbnf``,
    ``tool-call`` (the whole answer is one call of ``tools``), ``tool-auto`` (free text or
    one delimited call), or ``tool-xml-call`` / ``tool-xml-auto`` (the same with the call
    written as XML, :mod:`decoding.server.xmltools`).  ``param`` names the request field, for error messages."""

    kind: str
    source: Any
    param: str
    options: dict = field(default_factory=dict)
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True)
class GenRequest:
    chat: bool
    messages: list | None
    prompt: str | None
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: list | None
    stream: bool
    include_usage: bool
    grammar: GrammarSpec | None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: Any = "auto"
    fail_after_tokens: int | None = None
    #: logit bonus (nats) for starting a free value with a copy of ``copy_from`` (0: off;
    #: decoding.runtime.copy_bias): the last user message, or the completion prompt
    copy_bias: float = 0.0
    copy_from: str | None = None


#: the bonus of ``"copy_bias": true`` (decoding.runtime.copy_bias.DEFAULT_BONUS)
COPY_BIAS_ON = 2.0


def _copy_bias(body: dict, config: ServerConfig, constrained: bool) -> float:
    """The request's ``copy_bias`` (true, false or nats in [0, MAX_COPY_BIAS]; absent: the
    server's default), refused where no grammar constrains the answer."""
    v = body.get("copy_bias")
    if v is None:
        return float(config.copy_bias) if constrained else 0.0
    if isinstance(v, bool):
        v = COPY_BIAS_ON if v else 0.0
    elif not isinstance(v, (int, float)) or not 0 <= v <= MAX_COPY_BIAS:
        raise _bad(f"copy_bias: expected true, false or a number of nats in [0, {MAX_COPY_BIAS:g}]", "copy_bias")
    if v and not constrained:
        raise _bad("copy_bias: applies to constrained answers only (response_format json_schema/json_object, "
                   "grammar, dtd, or tools with tool_choice != 'none')", "copy_bias")
    if v and config.upstreams:
        raise _bad("copy_bias: not available when this server forwards to llama-server upstreams", "copy_bias")
    return float(v)


def _last_user_text(body: dict) -> str | None:
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return message_text(m.get("content"), "messages[].content")
    return None


def _bad(msg: str, param: str | None = None) -> APIError:
    return APIError(400, msg, param=param, code="invalid_request")


def _num(body: dict, name: str, default: Any, lo: float, hi: float, *, integer: bool = False) -> Any:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise _bad(f"{name}: expected {'an integer' if integer else 'a number'}, got {json.dumps(v)[:40]}", name)
    if not lo <= v <= hi:
        raise _bad(f"{name}: {v} is outside [{lo}, {hi}]", name)
    return v


def message_text(content: Any, where: str) -> str:
    """The text of a message ``content``: a string, null, or a list of ``{"type": "text"}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad(f"{where}[{i}]: only text content parts are supported", where)
            out.append(part["text"])
        return "".join(out)
    raise _bad(f"{where}: expected a string or a list of text parts", where)


def _messages(body: dict, markers: tuple[str, str]) -> list:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages: expected a non-empty list of messages", "messages")
    out = []
    for i, m in enumerate(msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"{where}: expected an object with a string 'role'", where)
        role = m["role"]
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise _bad(f"{where}.role: unknown role {role!r}", f"{where}.role")
        text = message_text(m.get("content"), f"{where}.content")
        if role == "assistant" and m.get("tool_calls"):
            calls = m["tool_calls"]
            if not isinstance(calls, list):
                raise _bad(f"{where}.tool_calls: expected a list", f"{where}.tool_calls")
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict):
                    raise _bad(f"{where}.tool_calls: each call needs a 'function' object", f"{where}.tool_calls")
                text += markers[0] + json.dumps({"name": fn.get("name"), "arguments": _args(fn.get("arguments"))},
                                                ensure_ascii=False) + markers[1]
        if role == "tool":
            role, text = "user", f"Tool result ({m.get('tool_call_id', '')}): {text}"
        if role == "developer":
            role = "system"
        out.append({"role": role, "content": text})
    return out


def _args(a: Any) -> Any:
    if isinstance(a, str):
        try:
            return json.loads(a)
        except ValueError:
            return a
    return a


def _tools(body: dict) -> tuple[ToolSpec, ...]:
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list) or not tools:
        raise _bad("tools: expected a non-empty list", "tools")
    out, seen = [], set()
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(t, dict) or t.get("type", "function") != "function" or not isinstance(t.get("function"), dict):
            raise _bad(f"{where}: expected {{'type': 'function', 'function': {{...}}}}", where)
        fn = t["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise _bad(f"{where}.function.name: expected a non-empty string of at most 64 characters", where)
        if name in seen:
            raise _bad(f"{where}.function.name: duplicate tool name {name!r}", where)
        seen.add(name)
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise _bad(f"{where}.function.parameters: expected a JSON Schema object", where)
        out.append(ToolSpec(name, str(fn.get("description") or ""), params))
    return tuple(out)


def _tool_choice(body: dict, tools: tuple[ToolSpec, ...]) -> Any:
    tc = body.get("tool_choice")
    if tc is None:
        return "auto" if tools else "none"
    if tc in ("auto", "none", "required"):
        if tc != "none" and not tools:
            raise _bad(f"tool_choice: {tc!r} needs 'tools'", "tool_choice")
        return tc
    if isinstance(tc, dict) and isinstance(tc.get("function"), dict) and isinstance(tc["function"].get("name"), str):
        name = tc["function"]["name"]
        if name not in {t.name for t in tools}:
            raise _bad(f"tool_choice: no tool named {name!r} in 'tools'", "tool_choice")
        return {"name": name}
    raise _bad("tool_choice: expected 'auto', 'none', 'required' or {'type': 'function', 'function': {'name': ...}}",
               "tool_choice")


def _grammar(body: dict, tools: tuple[ToolSpec, ...], tool_choice: Any, max_calls: int = 1) -> GrammarSpec | None:
    specs = []
    rf = body.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict) or not isinstance(rf.get("type"), str):
            raise _bad("response_format: expected an object with a 'type'", "response_format")
        t = rf["type"]
        if t == "json_object":
            specs.append(GrammarSpec("json-schema", {"type": "object"}, "response_format"))
        elif t == "json_schema":
            js = rf.get("json_schema")
            if not isinstance(js, dict) or "schema" not in js:
                raise _bad("response_format.json_schema: expected {'name', 'schema', 'strict'}",
                           "response_format.json_schema")
            if not isinstance(js["schema"], (dict, bool)):
                raise _bad("response_format.json_schema.schema: expected a JSON Schema (object or boolean)",
                           "response_format.json_schema.schema")
            specs.append(GrammarSpec("json-schema", js["schema"], "response_format.json_schema.schema"))
        elif t != "text":
            raise _bad(f"response_format.type: unknown type {t!r} (text, json_object, json_schema)",
                       "response_format.type")
    if body.get("grammar") is not None:
        if not isinstance(body["grammar"], str):
            raise _bad("grammar: expected GBNF text", "grammar")
        specs.append(GrammarSpec("gbnf", body["grammar"], "grammar"))
    if body.get("dtd") is not None:
        dtd, root, opts = body["dtd"], body.get("root"), body.get("dtd_options") or {}
        if not isinstance(dtd, str) or not isinstance(root, str) or not root:
            raise _bad("dtd: expected DTD text (or a file name under the server's DTD directory) and a 'root'",
                       "dtd")
        if not isinstance(opts, dict):
            raise _bad("dtd_options: expected an object", "dtd_options")
        for k in opts:
            if k not in DTD_OPTIONS:
                raise _bad(f"dtd_options: unknown or not allowed option {k!r}; allowed: {', '.join(DTD_OPTIONS)}",
                           "dtd_options")
        opts = dict(opts, root=root)
        if body.get("failsafe"):
            opts["failsafe"] = True
        specs.append(GrammarSpec("dtd", dtd, "dtd", opts))
    elif body.get("failsafe"):
        raise _bad("failsafe: applies to 'dtd' requests only", "failsafe")
    xml_tools = body.get("xml_tools", False)
    if not isinstance(xml_tools, bool):
        raise _bad("xml_tools: expected a boolean", "xml_tools")
    if tools and tool_choice != "none":
        kind = ("tool-xml-" if xml_tools else "tool-") + ("auto" if tool_choice == "auto" else "call")
        chosen = tools if not isinstance(tool_choice, dict) else tuple(t for t in tools if t.name == tool_choice["name"])
        # xml_tools: one call per answer (parallel_tool_calls applies to JSON calls)
        specs.append(GrammarSpec(kind, None, "tools", {"max_calls": 1 if xml_tools else max_calls}, tools=chosen))
    if len(specs) > 1:
        raise _bad("give at most one of response_format (json), grammar, dtd and tools with tool_choice != 'none'",
                   specs[1].param)
    return specs[0] if specs else None


def parse_request(body: Any, *, chat: bool, config: ServerConfig) -> GenRequest:
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    if _num(body, "n", 1, 1, 1, integer=True) != 1:
        raise _bad("n: only n=1 is supported", "n")
    mt = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = _num({"max_tokens": mt}, "max_tokens", config.default_max_tokens, 1, config.max_tokens_limit,
                      integer=True)
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise _bad("stop: expected a string or a list of strings", "stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream: expected a boolean", "stream")
    so = body.get("stream_options") or {}
    if not isinstance(so, dict):
        raise _bad("stream_options: expected an object", "stream_options")
    if chat:
        messages, prompt = _messages(body, (config.tool_call_start or "<tool_call>",
                                            config.tool_call_end or "</tool_call>")), None
        tools = _tools(body)
        tool_choice = _tool_choice(body, tools)
        parallel = body.get("parallel_tool_calls", True)
        if not isinstance(parallel, bool):
            raise _bad("parallel_tool_calls: expected a boolean", "parallel_tool_calls")
    else:
        p = body.get("prompt")
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
            p = p[0]
        if not isinstance(p, str) or not p:
            raise _bad("prompt: expected a non-empty string (or a list of one)", "prompt")
        messages, prompt, tools, tool_choice, parallel = None, p, (), "none", False
        if body.get("tools") is not None:
            raise _bad("tools: only on /v1/chat/completions", "tools")
    grammar = _grammar(body, tools, tool_choice, config.max_parallel_tool_calls if parallel else 1)
    if grammar is not None and stop:
        raise _bad("stop: not supported together with a grammar constraint (it would cut the structure)", "stop")
    copy_bias = _copy_bias(body, config, grammar is not None)
    copy_from = (_last_user_text(body) if chat else prompt) if copy_bias else None
    fail_after = None
    if config.test_hooks and body.get("x_fail_after_tokens") is not None:
        fail_after = _num(body, "x_fail_after_tokens", None, 0, 1 << 30, integer=True)
    return GenRequest(chat=chat, messages=messages, prompt=prompt, max_tokens=max_tokens,
                      temperature=_num(body, "temperature", 0.7, 0.0, 2.0),
                      top_p=_num(body, "top_p", 1.0, 0.0, 1.0),
                      seed=_num(body, "seed", None, -(1 << 63), (1 << 63) - 1, integer=True),
                      stop=stop or None, stream=stream, include_usage=bool(so.get("include_usage")),
                      grammar=grammar, tools=tools, tool_choice=tool_choice, fail_after_tokens=fail_after,
                      copy_bias=copy_bias, copy_from=copy_from)
