"""Tool calls of the server without a socket: several calls per answer (parallel_tool_calls),
the tool-call markers read from a model's chat template (on the packaged GGUFs' real
metadata, and on template texts of tool-trained models), and the grammars built from them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from decoding.errors import UsageError  # noqa: E402
from decoding.server.config import ServerConfig  # noqa: E402
from decoding.server.constraints import tool_calls_from_text, tool_calls_schema  # noqa: E402
from decoding.server.protocol import GrammarSpec, ToolSpec, parse_request  # noqa: E402
from decoding.server.toolmarkers import FALLBACK, markers_from_template, model_tool_markers  # noqa: E402

ADD = ToolSpec("add", "", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
NEG = ToolSpec("neg", "", {"type": "object", "properties": {}})
TOOLS_BODY = [{"type": "function", "function": {"name": "add", "parameters": ADD.parameters}}]
MSG = [{"role": "user", "content": "hi"}]


def _spec(kind: str, n: int) -> GrammarSpec:
    return GrammarSpec(kind, None, "tools", {"max_calls": n}, tools=(ADD, NEG))


# ----------------------------------------------------------------------------- parallel_tool_calls

@pytest.mark.parametrize("body, kind, calls", [
    ({}, "tool-auto", 4),                                       # OpenAI default: parallel true
    ({"parallel_tool_calls": True}, "tool-auto", 4),
    ({"parallel_tool_calls": False}, "tool-auto", 1),
    ({"tool_choice": "required"}, "tool-call", 4),
    ({"tool_choice": "required", "parallel_tool_calls": False}, "tool-call", 1),
    ({"tool_choice": {"type": "function", "function": {"name": "add"}}}, "tool-call", 4),
    ({"tool_choice": "required", "xml_tools": True}, "tool-xml-call", 1),  # XML: one call per answer
])
def test_parallel_tool_calls_sets_the_number_of_calls(body, kind, calls):
    g = parse_request({"messages": MSG, "tools": TOOLS_BODY, **body}, chat=True, config=ServerConfig()).grammar
    assert g.kind == kind and g.options["max_calls"] == calls


def test_max_parallel_tool_calls_is_configurable_and_checked():
    g = parse_request({"messages": MSG, "tools": TOOLS_BODY}, chat=True,
                      config=ServerConfig(max_parallel_tool_calls=2)).grammar
    assert g.options["max_calls"] == 2
    with pytest.raises(UsageError):
        ServerConfig(max_parallel_tool_calls=0)
    with pytest.raises(Exception, match="parallel_tool_calls"):
        parse_request({"messages": MSG, "tools": TOOLS_BODY, "parallel_tool_calls": "yes"}, chat=True,
                      config=ServerConfig())


def test_forced_calls_schema_is_one_call_or_an_array_of_1_to_n():
    assert tool_calls_schema((ADD,), 1)["properties"]["name"] == {"const": "add"}
    arr = tool_calls_schema((ADD, NEG), 3)
    assert arr["type"] == "array" and arr["minItems"] == 1 and arr["maxItems"] == 3


@pytest.mark.parametrize("text, names", [
    ('[{"name": "add", "arguments": {"a": 1}}, {"name": "neg", "arguments": {}}]', ["add", "neg"]),
    ('[{"name": "add", "arguments": {"a": 1}}]', ["add"]),
    ('{"name": "add", "arguments": {"a": 2}}', ["add"]),
])
def test_forced_answers_give_one_tool_call_per_array_item(text, names):
    content, calls = tool_calls_from_text(text, _spec("tool-call", 4))
    assert content is None and [c["function"]["name"] for c in calls] == names
    assert len({c["id"] for c in calls}) == len(calls)
    for c in calls:
        assert isinstance(json.loads(c["function"]["arguments"]), dict)


@pytest.mark.parametrize("markers", [FALLBACK, ("<|tool_call_start|>", "<|tool_call_end|>")])
def test_auto_answers_with_several_regions(markers):
    s, e = markers
    text = f'First. {s}{{"name": "add", "arguments": {{"a": 1}}}}{e}\n{s}{{"name": "neg", "arguments": {{}}}}{e} Done.'
    content, calls = tool_calls_from_text(text, _spec("tool-auto", 4), markers)
    assert [c["function"]["name"] for c in calls] == ["add", "neg"]
    assert content == "First. \n Done."
    # an unclosed second region stays text; the first call is kept
    content, calls = tool_calls_from_text(f'{s}{{"name": "neg", "arguments": {{}}}}{e} {s}{{"na', _spec("tool-auto", 4),
                                          markers)
    assert len(calls) == 1 and content == f"{s}{{\"na"


# ----------------------------------------------------------------------------- markers from the chat template

QWEN25_TOOLS = (  # the tools section of Qwen2.5-Instruct's chat template (abridged)
    "{%- if tools %}{{- '<|im_start|>system\\n' }}# Tools\\n<tools>{%- for tool in tools %}{{- tool | tojson }}"
    "{%- endfor %}</tools>\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n{%- endif %}")
LFM2_TOOLS = ("{%- if tools -%}List of tools: <|tool_list_start|>{{ tools | tojson }}<|tool_list_end|>{%- endif -%}"
              "{%- for m in messages -%}{%- if m.tool_calls -%}<|tool_call_start|>{{ m.tool_calls }}"
              "<|tool_call_end|>{%- endif -%}{%- endfor -%}")
FUNCTIONGEMMA = ("{%- for tool in tools -%}<start_function_declaration>{{ tool }}<end_function_declaration>"
                 "{%- endfor -%}<start_function_call>call:{{ name }}{...}<end_function_call>")


@pytest.mark.parametrize("template, start, end, source", [
    (QWEN25_TOOLS, "<tool_call>", "</tool_call>", "chat template"),
    (LFM2_TOOLS, "<|tool_call_start|>", "<|tool_call_end|>", "chat template"),
    (FUNCTIONGEMMA, "<start_function_call>", "<end_function_call>", "chat template"),
    ("{% for m in messages %}{{ m.content }}{% endfor %}", *FALLBACK, "fallback: the chat template has no tools"),
    ("{% if tools %}{{ tools | tojson }}{% endif %}", *FALLBACK, "fallback: the chat template's tools section"),
    (None, *FALLBACK, "fallback: no chat template"),
    ("", *FALLBACK, "fallback: no chat template"),
])
def test_markers_from_template(template, start, end, source):
    m = markers_from_template(template)
    assert (m.start, m.end) == (start, end) and m.source.startswith(source), m


@pytest.mark.model
@pytest.mark.parametrize("name, source", [
    ("smollm2", "fallback: the chat template has no tools section"),   # roles and contents only
    ("gemma3", "fallback: no chat template in the model"),             # the GGUF has no tokenizer.chat_template
])
def test_markers_of_the_packaged_models_real_gguf_metadata(name, source):
    llama_cpp = pytest.importorskip("llama_cpp")
    from decoding.models import model_path

    try:
        path = model_path(name)
    except Exception as e:  # noqa: BLE001 - a model that is not installed here
        pytest.skip(f"{name}: {e}")
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template")
    if name == "smollm2":
        assert "<|im_start|>" in template and "tools" not in template
    else:
        assert template is None
    m = model_tool_markers(llm)
    assert m.pair == FALLBACK and m.source == source


@pytest.mark.model
def test_the_auto_grammar_uses_the_markers_it_is_given():
    """GrammarService with the LFM2 markers: calls between them are accepted; the fallback
    markers are plain text there (and vice versa)."""
    from decoding.compiler import Compiler
    from decoding.server.constraints import GrammarService
    from decoding.server.metrics import Metrics
    from tests.conftest import get_model

    llm = get_model("smollm2")
    call = b'{"name":"add","arguments":{"a":1}}'
    for s, e in (FALLBACK, ("<|tool_call_start|>", "<|tool_call_end|>")):
        other = ("<|tool_call_start|>", "<|tool_call_end|>") if (s, e) == FALLBACK else FALLBACK
        svc = GrammarService(Compiler(llm), ServerConfig(), Metrics(), (s, e))
        cg = svc.compile(_spec("tool-auto", 2)).compiled
        two = b"ok " + s.encode() + call + e.encode() + b" " + s.encode() + call + e.encode()
        three = two + b" " + s.encode() + call + e.encode()
        assert cg.accepts(two) and cg.accepts(b"plain text")
        assert not cg.accepts(three)                                  # at most max_calls regions
        assert not cg.accepts(b"x " + s.encode() + b'{"name":"add"}' + e.encode())  # arguments required
        assert cg.accepts(b"x " + other[0].encode() + b"anything")    # another model's marker is text
