"""The OpenAI-compatible server (decoding.server), driven by the real ``openai`` client.

One uvicorn server runs in a thread of the test process on 127.0.0.1 (a free port), over the
packaged SmolLM2 (``tests/server_fixtures.serving``, ``tests/conftest.get_model``).
``max_tokens`` stays small for speed, and the tool-call tests run one after the other, grouped
by tool_choice, so that consecutive requests share their long system prompt (the tools listed),
which llama.cpp then does not evaluate again (its prefix cache).

How many answers each validity test requests, by default: 8 json_schema answers (8 cities,
8 seeds), 6 forced JSON tool calls (1 per named tool, 4 with "required"; the parallel test
before them adds 3 with the named add), 3 forced XML ones (2 "required", 1 named) and 4 answers
per DTD (2 naming the DTD file, 2 sending its text): every path runs several times, and all of
``tests/test_server*.py`` stays well under 2 minutes on a 2-core machine, where an answer costs
~0.8 s (JSON), ~1-1.5 s (a tool call, its prompt cached) or ~2.5 s (a SOAP envelope: 100
tokens, mostly forced).  ``SERVER_TEST_N=20`` makes them 20 each (the forced JSON tool calls
5 + 5 + 10), the XML tool calls 10 (5 + 5): the issue's 20/20 run, 2-3 minutes for this file.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
openai = pytest.importorskip("openai")

from tests.server_fixtures import serving  # noqa: E402

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
GRAMMARS = ROOT / "grammars"
_N = os.environ.get("SERVER_TEST_N")
N_JSON, N_TOOLS, N_DTD = (int(_N),) * 3 if _N else (8, 6, 4)
KEY = "sk-test-key"
WEATHER = json.loads((GRAMMARS / "get_weather.json").read_text())
XML_SPECS = json.loads((GRAMMARS / "xml_grammars.json").read_text())
CITIES = ["Paris", "Beijing", "Lima", "Oslo", "Cairo", "Tokyo", "Quito", "Rome", "Delhi", "Accra"]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather forecast for a city on a date",
        "parameters": WEATHER}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "additionalProperties": False}}},
]


@pytest.fixture(scope="module")
def server():
    with serving(api_key=KEY, dtd_dir=str(GRAMMARS), test_hooks=True, max_body_bytes=64 << 10, queue_size=4,
                 max_tokens_limit=512) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    c = openai.OpenAI(api_key=KEY, base_url=server[1] + "/v1", max_retries=0, timeout=60)
    yield c
    c.close()  # no idle keep-alive connection for the server's graceful shutdown to wait on


def _chat(client, content: str, **kw):
    return client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": content}], **kw)


def _http(base: str, method: str, path: str, body: bytes | None = None, key: str | None = KEY,
          headers: dict | None = None) -> tuple[int, dict, bytes]:
    h = {"Content-Type": "application/json", **(headers or {})}
    if key:
        h["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(base + path, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def _metric(base: str, name: str) -> float:
    _, _, text = _http(base, "GET", "/metrics", key=None)
    m = re.search(rf"^{name} ([0-9.e+]+)$", text.decode(), re.M)
    return float(m.group(1)) if m else 0.0


# ----------------------------------------------------------------------------- structured output

def test_json_schema_answers_validate(client):
    validator = jsonschema.Draft202012Validator(WEATHER, format_checker=jsonschema.FormatChecker())
    fmt = {"type": "json_schema", "json_schema": {"name": "get_weather", "schema": WEATHER, "strict": True}}
    for i in range(N_JSON):
        r = _chat(client, f"What is the weather in {CITIES[i % len(CITIES)]} tomorrow?", max_tokens=40,
                  temperature=0.8, seed=i, response_format=fmt)
        ch = r.choices[0]
        assert ch.finish_reason == "stop", (i, ch)
        validator.validate(json.loads(ch.message.content))


def test_copy_bias_reaches_the_processor_and_answers_stay_valid(client, monkeypatch):
    """``"copy_bias": true``: the processor gets the last user message as its copy source
    (decoding.runtime.copy_bias) and the answers still validate."""
    import decoding.server.engine as engine
    seen: list = []

    class Spy(engine.GrammarLogitsProcessor):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            seen.append(self.copy)

    monkeypatch.setattr(engine, "GrammarLogitsProcessor", Spy)
    validator = jsonschema.Draft202012Validator(WEATHER, format_checker=jsonschema.FormatChecker())
    fmt = {"type": "json_schema", "json_schema": {"name": "get_weather", "schema": WEATHER, "strict": True}}
    for bias, city in ((True, "Quito"), (False, "Oslo")):
        r = _chat(client, f"What is the weather in {city} on 2025-06-01?", max_tokens=40, temperature=0,
                  response_format=fmt, extra_body={"copy_bias": bias})
        assert r.choices[0].finish_reason == "stop"
        validator.validate(json.loads(r.choices[0].message.content))
    assert seen[0] is not None and seen[0].source == "What is the weather in Quito on 2025-06-01?"
    assert seen[0].bonus == 2.0
    assert seen[1] is None


def test_json_object(client):
    r = _chat(client, "Describe Paris as JSON.", max_tokens=40, seed=1, response_format={"type": "json_object"})
    assert isinstance(json.loads(r.choices[0].message.content), dict)


# ----------------------------------------------------------------------------- tool calls
# (in this order: each test starts with the tool listing the one before ended with)

def _valid_calls(calls) -> list[str]:
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), params[call.function.name],
                            format_checker=jsonschema.FormatChecker())
    assert len({c.id for c in calls}) == len(calls)
    return [c.function.name for c in calls]


def test_parallel_tool_calls_several_valid_calls_or_at_most_one(server, client):
    n_max = server[0].state.server.config.max_parallel_tool_calls
    prompt = "Add 1 and 2. Then add 30 and 40. Then add 5 and 6."
    counts = []
    add = {"type": "function", "function": {"name": "add"}}  # a short tool: several calls fit in 48 tokens
    for seed in range(8):  # parallel_tool_calls defaults to true, as in OpenAI's API; until one answer has several
        r = _chat(client, prompt, max_tokens=48, seed=seed, temperature=0.7, tools=TOOLS, tool_choice=add)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        counts.append(len(_valid_calls(ch.message.tool_calls)))
        if counts[-1] >= 2:
            break
    assert all(1 <= c <= n_max for c in counts) and max(counts) >= 2, counts
    r = _chat(client, prompt, max_tokens=48, seed=0, temperature=0.7, tools=TOOLS, tool_choice=add,
              parallel_tool_calls=False)
    assert len(_valid_calls(r.choices[0].message.tool_calls)) == 1


def test_forced_tool_calls_valid(client):
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    # grouped by tool_choice so that consecutive requests share their system prompt (the tools
    # listed), which llama.cpp then reuses (prefix cache): first the named add (the prompt of the
    # test above), then the named get_weather, then "required" (its listing starts with
    # get_weather's: both tools), whose prompt the XML test below goes on with
    named = [{"type": "function", "function": {"name": n}} for n in ("add", "get_weather")]
    quarter = max(1, N_TOOLS // 4)
    choices = [named[0]] * quarter + [named[1]] * quarter + ["required"] * max(1, N_TOOLS - 2 * quarter)
    for i, choice in enumerate(choices):
        r = _chat(client, f"Add {i} and {i + 3}, or tell the weather in {CITIES[i % len(CITIES)]}.", max_tokens=48,
                  seed=i, temperature=0.7, tools=TOOLS, tool_choice=choice, parallel_tool_calls=False)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls" and len(ch.message.tool_calls) == 1, (i, ch)
        call = ch.message.tool_calls[0]
        if isinstance(choice, dict):
            assert call.function.name == choice["function"]["name"]
        jsonschema.validate(json.loads(call.function.arguments), params[call.function.name],
                            format_checker=jsonschema.FormatChecker())


def test_forced_xml_tool_calls_valid(client):
    params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    n = max(2, N_TOOLS // 2)
    # grouped by tool_choice, as above: "required" first, whose listing (both tools) the test above
    # ended with
    for i in range(n):
        choice = "required" if i < (n + 1) // 2 else {"type": "function", "function": {"name": "get_weather"}}
        r = _chat(client, f"Weather in {CITIES[i % len(CITIES)]} on 2025-03-0{i % 9 + 1}, or add {i} and 2.",
                  max_tokens=64, seed=i, tools=TOOLS, tool_choice=choice, extra_body={"xml_tools": True})
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls" and ch.message.tool_calls, (i, ch)
        call = ch.message.tool_calls[0]
        xml = (call.model_extra or {}).get("xml", "")
        assert xml.startswith("<tool_call><" + call.function.name + ">"), xml
        jsonschema.validate(json.loads(call.function.arguments), params[call.function.name],
                            format_checker=jsonschema.FormatChecker())


def test_tool_choice_auto_text_or_valid_call(client):
    # after the XML test (the prefix of both tools' listing is cached); SmolLM2 answers this in
    # plain text, cut at max_tokens: 40 tokens of it check as much as 60 did
    r = _chat(client, "Add 2 and 3.", max_tokens=40, seed=3, tools=TOOLS, tool_choice="auto")
    ch = r.choices[0]
    for call in ch.message.tool_calls or ():
        jsonschema.validate(json.loads(call.function.arguments),
                            {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}[call.function.name])
    assert ch.message.tool_calls or ch.message.content is not None


def test_parse_pydantic_model(client):
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str
        temperature_c: int
        sunny: bool

    r = client.chat.completions.parse(model="smollm2", messages=[{"role": "user", "content": "Weather in Rome?"}],
                                      response_format=Weather, max_tokens=48, seed=2)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Weather)


def test_streaming_concatenates_to_the_same_valid_document(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "get_weather", "schema": WEATHER, "strict": True}}
    kw = dict(max_tokens=40, temperature=0.0, seed=5, response_format=fmt)
    whole = _chat(client, "Weather in Oslo on 2025-01-02?", **kw).choices[0].message.content
    chunks = list(_chat(client, "Weather in Oslo on 2025-01-02?", stream=True, **kw))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1
    assert text == whole
    jsonschema.validate(json.loads(text), WEATHER)


def test_concurrent_requests_each_follow_their_own_grammar(client):
    from concurrent.futures import ThreadPoolExecutor

    schemas = [{"type": "object", "properties": {k: {"type": t}}, "required": [k], "additionalProperties": False}
               for k, t in (("alpha", "integer"), ("beta", "boolean"), ("gamma", "string"))]

    def one(i: int) -> tuple[int, str]:
        s = schemas[i % 3]
        r = _chat(client, "Answer in JSON.", max_tokens=24, seed=i, temperature=0.9,
                  response_format={"type": "json_schema", "json_schema": {"name": f"s{i % 3}", "schema": s}})
        return i, r.choices[0].message.content

    with ThreadPoolExecutor(3) as pool:  # 3 at a time: within the test server's queue of 4
        for i, text in pool.map(one, range(6)):
            jsonschema.validate(json.loads(text), schemas[i % 3])


def test_completions_gbnf_and_stream(client):
    g = 'root ::= " " ("Paris" | "Lyon" | "Nice")'
    r = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8,
                                  extra_body={"grammar": g})
    assert r.choices[0].text in (" Paris", " Lyon", " Nice")
    st = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8, stream=True,
                                   extra_body={"grammar": g})
    assert "".join(c.choices[0].text for c in st if c.choices) in (" Paris", " Lyon", " Nice")


# user_query's answers end by themselves (30-50 tokens); every SOAP answer runs to max_tokens, where
# the budget closes the envelope (its shortest complete form is 82 tokens, mostly forced): 100
# leaves it 18 tokens of choice and costs a sixth less than 120
@pytest.mark.parametrize("name, max_tokens", [("user_query", 120), ("soap_execute_command", 100)],
                         ids=["user_query", "soap_execute_command"])
def test_dtd_answers_are_dtd_valid(client, name, max_tokens):
    from lxml import etree

    spec = XML_SPECS[name]
    dtd = etree.DTD(str(GRAMMARS / spec["dtd"]))
    text = (GRAMMARS / spec["dtd"]).read_text()
    for i in range(N_DTD):
        body = {"dtd": text if i % 2 else spec["dtd"], "root": spec["root"],
                "dtd_options": {"text_patterns": spec["text_patterns"]}}
        r = _chat(client, "Look up user 42." if name == "user_query" else "Run GetUserInfo for user U1.",
                  max_tokens=max_tokens, seed=i, temperature=0.8, extra_body=body)
        ch = r.choices[0]
        assert ch.finish_reason == "stop", (i, ch)
        doc = etree.fromstring(ch.message.content.encode())
        assert dtd.validate(doc), (i, ch.message.content, dtd.error_log)


# ----------------------------------------------------------------------------- errors

def test_unsupported_schema_is_422_with_pointer_and_keyword(client, server):
    base = server[1]
    before = _metric(base, "decoding_unprocessable_total")
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?<=a)b"}}}
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        _chat(client, "x", max_tokens=20,
              response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}})
    msg = str(ei.value)
    assert "/properties/code" in msg and "pattern" in msg
    err = ei.value.body if "pointer" in (ei.value.body or {}) else (ei.value.body or {}).get("error", ei.value.body)
    assert err["pointer"] == "/properties/code" and err["keyword"] == "pattern"
    assert _metric(base, "decoding_unprocessable_total") == before + 1


def test_invalid_gbnf_and_dtd_are_422_with_line_column(client):
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        _chat(client, "x", max_tokens=10, extra_body={"grammar": 'root ::= "a"\nbad ::= ( "b"'})
    assert re.search(r":2:\d+", str(ei.value)), str(ei.value)
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        _chat(client, "x", max_tokens=10, extra_body={"dtd": "<!ELEMENT a (b>", "root": "a"})
    assert re.search(r":1:\d+", str(ei.value)), str(ei.value)


def test_max_tokens_below_the_grammar_minimum_is_422_before_generation(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}
    with pytest.raises(openai.UnprocessableEntityError, match="max_tokens=3 is too small"):
        _chat(client, "x", max_tokens=3, response_format=fmt)
    with pytest.raises(openai.UnprocessableEntityError, match="max_tokens=3 is too small"):
        _chat(client, "x", max_tokens=3, response_format=fmt, stream=True)


def test_dtd_external_entities_stay_in_the_configured_directory(client):
    for target in ("/etc/passwd", "../pyproject.toml", "http://example.com/x.dtd"):
        dtd = f'<!ENTITY % ext SYSTEM "{target}"> %ext; <!ELEMENT a (#PCDATA)>'
        with pytest.raises(openai.UnprocessableEntityError):
            _chat(client, "x", max_tokens=10, extra_body={"dtd": dtd, "root": "a"})
    with pytest.raises(openai.BadRequestError):  # a named DTD outside the directory
        _chat(client, "x", max_tokens=10, extra_body={"dtd": "../pyproject.toml", "root": "a"})


def test_401_without_or_with_a_bad_key(server):
    bad = openai.OpenAI(api_key="wrong", base_url=server[1] + "/v1", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    status, _, body = _http(server[1], "POST", "/v1/chat/completions", b"{}", key=None)
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"


def test_400_malformed_requests(client, server):
    status, _, body = _http(server[1], "POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and "JSON" in json.loads(body)["error"]["message"]
    status, _, body = _http(server[1], "POST", "/v1/chat/completions", b"[" * 50000)
    assert status == 400, body
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="smollm2", messages=[])
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        _chat(client, "x", tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        _chat(client, "x", max_tokens=100000)


def test_413_body_over_the_limit(client):
    with pytest.raises(openai.APIStatusError) as ei:
        _chat(client, "x" * (80 << 10), max_tokens=5)
    assert ei.value.status_code == 413


def test_503_with_retry_after_when_the_queue_is_full(server):
    app, base = server
    engine = app.state.server.engine
    taken = 0
    try:
        while engine.depth < engine.config.queue_size:
            engine.admit()
            taken += 1
        status, headers, body = _http(base, "POST", "/v1/completions",
                                      json.dumps({"prompt": "hi", "max_tokens": 2}).encode())
        assert status == 503 and headers.get("retry-after") == "1"
        assert json.loads(body)["error"]["code"] == "queue_full"
    finally:
        for _ in range(taken):
            engine.release()


def test_processor_failure_is_500_with_the_cause(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}
    with pytest.raises(openai.InternalServerError, match="injected fault"):
        _chat(client, "Weather?", max_tokens=40, response_format=fmt, extra_body={"x_fail_after_tokens": 3})
    with pytest.raises(openai.APIError, match="injected fault"):  # streamed: an error event, no [DONE]
        list(_chat(client, "Weather?", max_tokens=40, stream=True, response_format=fmt,
                   extra_body={"x_fail_after_tokens": 3}))


# ----------------------------------------------------------------------------- cache and endpoints

def test_reordered_schema_is_a_cache_hit(server):
    _, base = server
    schema = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 9},
                                                "level": {"type": "integer"}},
              "required": ["zone", "level"], "additionalProperties": False}
    reordered = {"additionalProperties": False, "required": ["zone", "level"],
                 "properties": {"zone": {"maxLength": 9, "type": "string"}, "level": {"type": "integer"}},
                 "type": "object"}

    def body(s, indent):
        return json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": "Zone?"}], "max_tokens": 30,
                           "response_format": {"type": "json_schema", "json_schema": {"name": "z", "schema": s}}},
                          indent=indent).encode()

    status, _, _ = _http(base, "POST", "/v1/chat/completions", body(schema, None))
    assert status == 200
    hits = _metric(base, "decoding_grammar_cache_hits_total")
    status, _, out = _http(base, "POST", "/v1/chat/completions", body(reordered, 7))
    assert status == 200, out
    assert _metric(base, "decoding_grammar_cache_hits_total") == hits + 1


def test_models_health_metrics(client, server):
    assert [m.id for m in client.models.list()] == ["smollm2"]
    assert client.models.retrieve("smollm2").id == "smollm2"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-9")
    status, _, body = _http(server[1], "GET", "/v1/nothing-here")
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
    status, _, body = _http(server[1], "GET", "/health", key=None)
    health = json.loads(body)
    assert status == 200 and health["status"] == "ok"
    # SmolLM2's chat template has no tools section: the fallback markers
    assert health["tool_call_markers"] == ["<tool_call>", "</tool_call>"]
    assert health["tool_call_markers_source"] == "fallback: the chat template has no tools section"
    _, _, text = _http(server[1], "GET", "/metrics", key=None)
    for name in ("decoding_requests_total", "decoding_compile_ms_bucket", "decoding_mask_us_per_token_bucket",
                 "decoding_grammar_cache_hits_total", "decoding_unprocessable_total", "decoding_queue_depth"):
        assert name in text.decode(), name


# ----------------------------------------------------------------------------- usage, faults

def test_streamed_usage_reports_prompt_tokens(client):
    kw = dict(max_tokens=12, temperature=0.0, seed=4)
    whole = _chat(client, "Name a color.", **kw).usage
    chunks = list(_chat(client, "Name a color.", stream=True, stream_options={"include_usage": True}, **kw))
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens == whole.prompt_tokens > 0
    assert usage.completion_tokens == whole.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_processor_exception_is_500_and_a_concurrent_request_succeeds(client):
    from concurrent.futures import ThreadPoolExecutor

    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}
    with ThreadPoolExecutor(2) as pool:
        other = pool.submit(_chat, client, "Weather in Rome?", max_tokens=40, seed=8, response_format=fmt)
        with pytest.raises(openai.InternalServerError) as ei:
            _chat(client, "Weather?", max_tokens=40, response_format=fmt, extra_body={"x_fail_after_tokens": 5})
        ok = other.result(timeout=120)
    err = ei.value.body if "code" in (ei.value.body or {}) else (ei.value.body or {}).get("error", {})
    assert err["code"] == "processor_error" and "RuntimeError" in err["message"] and "injected" in err["message"]
    jsonschema.validate(json.loads(ok.choices[0].message.content), WEATHER)


LONG = {"grammar": "root ::= [0-9]{300}"}  # at least 300 tokens (one digit per token): seconds of work


def _raw_post(base: str, body: dict) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\n"
              f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def _generated(base: str) -> float:
    return _metric(base, "decoding_generated_tokens_total")


def _wait_depth_zero(base: str, limit: float) -> float:
    t0 = time.time()
    while json.loads(_http(base, "GET", "/health")[2])["queue_depth"] != 0:
        assert time.time() - t0 < limit, f"the slot was not freed within {limit} s of the disconnect"
        time.sleep(0.02)
    return time.time() - t0


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_disconnects_stops_its_generation_and_frees_its_slot(server, client, stream):
    from concurrent.futures import ThreadPoolExecutor

    _, base = server
    before = _generated(base)
    s = _raw_post(base, {"prompt": "Digits:", "max_tokens": 300, "stream": stream, **LONG})
    pool = ThreadPoolExecutor(1)  # another request, queued behind the long one: it must not be lost
    other = pool.submit(client.completions.create, model="smollm2", prompt="The capital of France is", max_tokens=8,
                        extra_body={"grammar": 'root ::= " " ("Paris" | "Lyon" | "Nice")'})
    if stream:
        assert s.recv(12).startswith(b"HTTP/1.1 200")
        time.sleep(0.5)  # some tokens streamed
    else:
        t0 = time.time()
        while json.loads(_http(base, "GET", "/health")[2])["queue_depth"] == 0:
            assert time.time() - t0 < 10
            time.sleep(0.02)
        time.sleep(0.8)  # generating (300 tokens take several seconds)
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    t0 = time.time()
    while json.loads(_http(base, "GET", "/health")[2])["queue_depth"] > 1 and not other.done():
        assert time.time() - t0 < 1.0, "the slot of the disconnected client was not freed within 1 s"
        time.sleep(0.02)
    assert other.result(timeout=30).choices[0].text in (" Paris", " Lyon", " Nice")
    pool.shutdown()
    _wait_depth_zero(base, 5.0)
    done = _generated(base) - before - other.result().usage.completion_tokens
    assert 0 < done < 300, done  # stopped early: it did not run to the end
