"""Prompt construction from a tool definition (decoding.runtime.prompting) and the
'natural' JSON whitespace policy (issue 18)."""

from __future__ import annotations

import json

import pytest

from decoding.errors import DecodingError, UsageError
from decoding.frontends.jsonschema import compile_schema
from decoding.backends.automaton import compile_dfa
from decoding.runtime.prompting import (Example, ToolSpec, dump_json, strip_dtd_comments, tool_from_source,
                                        tool_messages)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
          "required": ["city", "n"], "additionalProperties": False}


@pytest.mark.parametrize("doc,ok", [
    ('{"city": "北京市", "n": 3}', True),
    ('{"city": "x", "n": 3, "tags": ["a", "b"]}', True),
    ('{"city": "x", "n": 3, "tags": []}', True),
    ('{"city":"x","n":3}', False),  # compact: not the natural layout
    ('{"city": "x","n": 3}', False),
    ('{ "city": "x", "n": 3}', False),  # no space inside brackets
    ('{"city":  "x", "n": 3}', False),
    ('{"city": "x", "n": 3}\n', False),
])
def test_natural_whitespace_is_exactly_jsondumps_layout(doc, ok):
    dfa = compile_dfa(compile_schema(SCHEMA, whitespace="natural").grammar)
    assert dfa.accepts(doc.encode("utf-8")) is ok


def test_natural_matches_dump_json_and_compact_does_not():
    value = {"city": "上海市", "n": 7, "tags": ["b"]}
    nat = compile_dfa(compile_schema(SCHEMA, whitespace="natural").grammar)
    comp = compile_dfa(compile_schema(SCHEMA, whitespace="compact").grammar)
    assert nat.accepts(dump_json(value, "natural").encode()) and not nat.accepts(dump_json(value, "compact").encode())
    assert comp.accepts(dump_json(value, "compact").encode()) and not comp.accepts(dump_json(value, "natural").encode())


def test_unknown_whitespace_is_a_located_error():
    with pytest.raises(DecodingError, match="whitespace must be"):
        compile_schema(SCHEMA, whitespace="pretty")
    with pytest.raises(UsageError, match="dump_json"):
        dump_json({}, "pretty")


def test_messages_show_schema_and_example_and_end_with_the_request():
    tool = ToolSpec("get_weather", "Weather of a city.", "json", schema=SCHEMA)
    ex = Example("Weather in Paris?", dump_json({"city": "Paris", "n": 1}))
    zero = tool_messages(tool, "Weather in 北京市?")
    one = tool_messages(tool, "Weather in 北京市?", ex)
    assert [m["role"] for m in zero] == ["system", "user"]
    assert [m["role"] for m in one] == ["system", "user", "assistant", "user"]
    assert one[0] == zero[0] and one[-1] == zero[-1] == {"role": "user", "content": "Weather in 北京市?"}
    assert "get_weather" in zero[0]["content"] and json.dumps(SCHEMA, separators=(",", ":")) in zero[0]["content"]
    assert one[2]["content"] == '{"city": "Paris", "n": 1}'
    # with the tool in the template's tools section, the system prompt does not repeat the schema
    assert json.dumps(SCHEMA, separators=(",", ":")) not in tool_messages(tool, "x", in_template=True)[0]["content"]


def test_dtd_tool_hides_comments():
    dtd = "<!-- e.g. <r><id>U9C123456</id></r> -->\n<!ELEMENT r (id)>\n<!ELEMENT id (#PCDATA)>"
    tool = tool_from_source("r", "dtd", dtd)
    assert "U9C123456" not in tool.layout and "<!ELEMENT r (id)>" in tool.layout
    assert strip_dtd_comments("<!--a-->x<!--\nb\n-->y") == "xy"
    assert "U9C123456" not in tool_messages(tool, "req")[0]["content"]


@pytest.mark.parametrize("kind,text,msg", [
    ("json-schema", "{nope", "not JSON"), ("json-schema", "[1]", "must be an object"), ("gbnf", "x", "kind must be"),
])
def test_tool_from_source_errors(kind, text, msg):
    with pytest.raises(UsageError, match=msg):
        tool_from_source("t", kind, text)


def test_tool_from_schema_takes_description_and_drops_meta():
    s = dict(SCHEMA, **{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "t",
                        "description": "Does t."})
    tool = tool_from_source("t", "json-schema", json.dumps(s))
    assert tool.description == "Does t." and tool.schema == SCHEMA
    assert tool.openai_tool()["function"]["parameters"] == SCHEMA


@pytest.mark.model
def test_render_prompt_uses_the_models_template():
    from decoding.models import load_model
    from decoding.runtime.prompting import render_prompt

    llm = load_model("smollm2", n_ctx=512)
    tool = ToolSpec("get_weather", "Weather.", "json", schema=SCHEMA)
    text = render_prompt(llm, tool, "Weather in 北京市?", model_name="smollm2")
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert "Weather in 北京市?" in text


def test_demo_examples_share_no_value_with_the_demo_requests():
    """The demo is not special-cased: its worked examples never contain a value the demo
    requests ask for."""
    import re

    from decoding.cli import DEMO, DEMO_EXAMPLES

    assert {n for n, _ in DEMO} == set(DEMO_EXAMPLES)
    for name, request in DEMO:
        user, answer = DEMO_EXAMPLES[name]
        values = answer.values() if isinstance(answer, dict) else re.findall(r">([^<>]+)</", answer)
        for v in values:
            if name == "user_query" and v == "query":  # fixed by the grammar (text pattern action = query)
                continue
            assert str(v) not in request, (name, v)
