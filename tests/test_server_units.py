"""decoding.server pieces without a model or a socket: request checking, error mapping,
tool-call schemas and parsing, limits, admission."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from decoding.errors import DTDError, GBNFError, LimitError, ProcessorError, SchemaError, UsageError  # noqa: E402
from decoding.server.config import ServerConfig  # noqa: E402
from decoding.server.constraints import (TOOL_END, TOOL_START, _depth, tool_call_schema,  # noqa: E402
                                         tool_calls_from_text)
from decoding.server.engine import Engine, tool_prompt  # noqa: E402
from decoding.server.errors import APIError, from_decoding_error  # noqa: E402
from decoding.server.metrics import Metrics  # noqa: E402
from decoding.server.protocol import GrammarSpec, ToolSpec, parse_request  # noqa: E402

CFG = ServerConfig()
MSG = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}


def _chat(**body):
    return parse_request({"messages": MSG, **body}, chat=True, config=CFG)


def _bad(param_part: str, **body):
    with pytest.raises(APIError) as ei:
        _chat(**body)
    assert ei.value.status == 400 and param_part in ei.value.message, ei.value.message
    return ei.value


def test_plain_chat_and_defaults():
    r = _chat()
    assert r.chat and r.grammar is None and r.max_tokens == CFG.default_max_tokens and not r.stream


def test_response_formats():
    assert _chat(response_format={"type": "json_object"}).grammar.source == {"type": "object"}
    g = _chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string"}}}).grammar
    assert g.kind == "json-schema" and g.param == "response_format.json_schema.schema"
    assert _chat(response_format={"type": "text"}).grammar is None
    _bad("response_format.type", response_format={"type": "yaml"})
    _bad("json_schema", response_format={"type": "json_schema"})


def test_extensions_and_exclusivity():
    assert _chat(grammar='root ::= "a"').grammar.kind == "gbnf"
    g = _chat(dtd="<!ELEMENT a (#PCDATA)>", root="a", failsafe=True).grammar
    assert g.kind == "dtd" and g.options == {"root": "a", "failsafe": True}
    _bad("dtd", dtd="<!ELEMENT a (#PCDATA)>")
    _bad("failsafe", failsafe=True)
    _bad("max_states", dtd="<!ELEMENT a (#PCDATA)>", root="a", dtd_options={"max_states": 10 ** 9})
    _bad("base_dir", dtd="<!ELEMENT a (#PCDATA)>", root="a", dtd_options={"base_dir": "/"})
    _bad("at most one", grammar='root ::= "a"', response_format={"type": "json_object"})


def test_tools_and_tool_choice():
    assert _chat(tools=[TOOL]).grammar.kind == "tool-auto"
    assert _chat(tools=[TOOL], tool_choice="required").grammar.kind == "tool-call"
    assert _chat(tools=[TOOL], tool_choice="none").grammar is None
    named = _chat(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "add"}}).grammar
    assert named.kind == "tool-call" and [t.name for t in named.tools] == ["add"]
    _bad("tool_choice", tools=[TOOL], tool_choice={"type": "function", "function": {"name": "sub"}})
    _bad("tool_choice", tool_choice="required")
    _bad("duplicate", tools=[TOOL, TOOL])


@pytest.mark.parametrize("body,part", [
    ({"n": 2}, "n"), ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 10 ** 6}, "max_tokens"),
    ({"temperature": "hot"}, "temperature"), ({"stream": "yes"}, "stream"), ({"stop": 3}, "stop"),
    ({"messages": []}, "messages"), ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "text content"),
    ({"stop": ["}"], "response_format": {"type": "json_object"}}, "stop"),
])
def test_malformed_fields_are_400_naming_the_field(body, part):
    _bad(part, **body)


def test_completions_prompt():
    r = parse_request({"prompt": ["once"]}, chat=False, config=CFG)
    assert r.prompt == "once" and not r.chat
    for bad in (3, "", [""], ["a", "b"]):
        with pytest.raises(APIError, match="prompt"):
            parse_request({"prompt": bad}, chat=False, config=CFG)
    with pytest.raises(APIError, match="tools"):
        parse_request({"prompt": "x", "tools": [TOOL]}, chat=False, config=CFG)


def test_fault_hook_only_with_test_hooks():
    assert _chat(x_fail_after_tokens=2).fail_after_tokens is None
    r = parse_request({"messages": MSG, "x_fail_after_tokens": 2}, chat=True, config=ServerConfig(test_hooks=True))
    assert r.fail_after_tokens == 2


def test_history_with_tool_calls_and_tool_results():
    r = _chat(messages=[{"role": "user", "content": "add 1"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "1"}])
    assert r.messages[1]["content"] == TOOL_START + '{"name": "add", "arguments": {"a": 1}}' + TOOL_END
    assert r.messages[2]["role"] == "user" and "1" in r.messages[2]["content"]


def test_error_mapping():
    e = from_decoding_error(SchemaError("/properties/a", "pattern", "lookaround"), "response_format")
    assert e.status == 422 and e.extra["pointer"] == "/properties/a" and e.extra["keyword"] == "pattern"
    assert "/properties/a" in e.message and "pattern" in e.message
    e = from_decoding_error(GBNFError("unexpected end", 2, 7), "grammar")
    assert e.status == 422 and (e.extra["line"], e.extra["column"]) == (2, 7) and ":2:7" in e.message
    assert from_decoding_error(DTDError("bad", 1, 1)).code == "invalid_dtd"
    assert from_decoding_error(LimitError("too big", limit="max_states")).extra["limit"] == "max_states"
    assert from_decoding_error(UsageError("x")).status == 400
    try:
        raise ProcessorError("constrained decoding failed: boom") from RuntimeError("boom")
    except ProcessorError as pe:
        e = from_decoding_error(pe)
    assert e.status == 500 and "boom" in e.message
    body = APIError(503, "busy", code="queue_full").body()
    assert body == {"error": {"message": "busy", "type": "server_error", "param": None, "code": "queue_full"}}


def test_tool_call_schema_and_parsing():
    tools = (ToolSpec("add", "", {"type": "object"}), ToolSpec("neg", "", {"type": "object"}))
    assert tool_call_schema(tools[:1])["properties"]["name"] == {"const": "add"}
    assert len(tool_call_schema(tools)["anyOf"]) == 2
    spec = GrammarSpec("tool-call", None, "tools", tools=tools)
    content, calls = tool_calls_from_text('{"name": "add", "arguments": {"a": 1}}', spec)
    assert content is None and calls[0]["function"] == {"name": "add", "arguments": '{"a": 1}'}
    assert tool_calls_from_text('{"name": "add"', spec) == ('{"name": "add"', None)
    auto = GrammarSpec("tool-auto", None, "tools", tools=tools)
    content, calls = tool_calls_from_text(f'Sure. {TOOL_START}{{"name": "neg", "arguments": {{}}}}{TOOL_END}', auto)
    assert content == "Sure." and json.loads(calls[0]["function"]["arguments"]) == {}
    assert tool_calls_from_text("plain text", auto) == ("plain text", None)


def test_tool_prompt_lists_the_tools():
    r = _chat(tools=[TOOL], tool_choice="required")
    msgs = tool_prompt(r)
    assert msgs[0]["role"] == "system" and '"add"' in msgs[0]["content"] and msgs[1:] == MSG


def test_depth_limit_pointer():
    deep: dict = {"type": "string"}
    for i in range(5):
        deep = {"type": "object", "properties": {f"p{i}": deep}}
    assert _depth(deep, 100) is None
    assert _depth(deep, 3) == "/properties/p4/properties/p3"  # the first value 4 levels down


def test_config_checks_and_round_trip():
    with pytest.raises(UsageError, match="queue_size"):
        ServerConfig(queue_size=0)
    with pytest.raises(UsageError, match="dtd_dir"):
        ServerConfig(dtd_dir="/no/such/dir")
    c = ServerConfig(port=9, api_key="k")
    assert ServerConfig.from_json(c.to_json()) == c
    assert ServerConfig().host == "127.0.0.1"


def test_admission_is_bounded():
    eng = Engine(None, ServerConfig(queue_size=2, retry_after_s=3), Metrics())
    try:
        eng.admit()
        eng.admit()
        with pytest.raises(APIError) as ei:
            eng.admit()
        assert ei.value.status == 503 and ei.value.headers == {"Retry-After": "3"}
        eng.release()
        eng.admit()
        assert eng.depth == 2
    finally:
        eng.close()


def test_xml_tool_calls_read_back_typed_arguments():
    from decoding.server.xmltools import xml_call_arguments

    tools = (ToolSpec("add", "", {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
        "ok": {"type": "boolean"}, "note": {"type": ["string", "null"]}, "mode": {"enum": ["x", 2]}}}),)
    doc = ("<tool_call><add><a>1</a><b>2.5</b><tags><item>x &amp; y</item></tags><ok>true</ok><note/>"
           "<mode>2</mode></add></tool_call>")
    assert xml_call_arguments(doc, tools) == ("add", {"a": 1, "b": 2.5, "tags": ["x & y"], "ok": True,
                                                      "note": None, "mode": 2})
    assert xml_call_arguments("<tool_call><sub/></tool_call>", tools) is None
    assert xml_call_arguments("<tool_call><add>", tools) is None
    spec = GrammarSpec("tool-xml-auto", None, "tools", tools=tools)
    content, calls = tool_calls_from_text("ok " + doc + " done", spec)
    assert content == "ok  done" and calls[0]["function"]["name"] == "add" and calls[0]["xml"] == doc
    assert _chat(tools=[TOOL], xml_tools=True).grammar.kind == "tool-xml-auto"
    assert _chat(tools=[TOOL], tool_choice="required", xml_tools=True).grammar.kind == "tool-xml-call"


JSON_FMT = {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}


@pytest.mark.parametrize("value,bonus", [(True, 2.0), (False, 0.0), (0.5, 0.5), (0, 0.0)])
def test_copy_bias_request_field(value, bonus):
    msgs = [{"role": "user", "content": "old"}, {"role": "assistant", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "Weather in Lima?"}]}]
    r = parse_request({"messages": msgs, "response_format": JSON_FMT, "copy_bias": value}, chat=True, config=CFG)
    assert r.copy_bias == bonus
    assert r.copy_from == ("Weather in Lima?" if bonus else None)  # the last user message


def test_copy_bias_default_from_config_and_for_completions():
    from decoding.runtime.copy_bias import DEFAULT_BONUS
    from decoding.server.protocol import COPY_BIAS_ON
    assert COPY_BIAS_ON == DEFAULT_BONUS
    cfg = ServerConfig(copy_bias=1.5)
    r = parse_request({"messages": MSG, "response_format": JSON_FMT}, chat=True, config=cfg)
    assert (r.copy_bias, r.copy_from) == (1.5, "hi")
    r = parse_request({"messages": MSG}, chat=True, config=cfg)  # unconstrained: the default does not apply
    assert (r.copy_bias, r.copy_from) == (0.0, None)
    r = parse_request({"prompt": "Lima", "grammar": 'root ::= "a"', "copy_bias": True}, chat=False, config=CFG)
    assert (r.copy_bias, r.copy_from) == (2.0, "Lima")


@pytest.mark.parametrize("body,part", [
    ({"copy_bias": True}, "constrained answers only"),
    ({"copy_bias": "yes", "response_format": JSON_FMT}, "copy_bias: expected"),
    ({"copy_bias": -1, "response_format": JSON_FMT}, "copy_bias: expected"),
    ({"copy_bias": 11, "response_format": JSON_FMT}, "copy_bias: expected"),
])
def test_copy_bias_bad_requests(body, part):
    e = _bad(part, **body)
    assert e.param == "copy_bias"


def test_copy_bias_config_checks():
    with pytest.raises(UsageError, match="copy_bias"):
        ServerConfig(copy_bias=-0.1)
    with pytest.raises(UsageError, match="upstreams"):
        ServerConfig(copy_bias=2.0, upstreams=("http://127.0.0.1:9",))
    assert ServerConfig.from_json(ServerConfig(copy_bias=2.0).to_json()).copy_bias == 2.0
