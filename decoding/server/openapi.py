"""The request-body schemas of the generation routes, for the OpenAPI document (``/openapi.json``).

The handlers read and check the raw body themselves (:mod:`decoding.server.protocol`: 400s in
the OpenAI error format, not FastAPI's 422 validation errors); these schemas only describe
the body so that clients and API fuzzers (schemathesis) know its shape."""

from __future__ import annotations

__all__ = ["CHAT_BODY", "COMPLETION_BODY", "ERROR_RESPONSES", "request_body"]

_ERROR = {"type": "object", "properties": {"error": {"type": "object", "properties": {
    "message": {"type": "string"}, "type": {"type": "string"}, "param": {"type": ["string", "null"]},
    "code": {"type": ["string", "null"]}}, "required": ["message", "type"]}}, "required": ["error"]}

_COMMON = {
    "model": {"type": "string"},
    "max_tokens": {"type": "integer", "minimum": 1},
    "max_completion_tokens": {"type": "integer", "minimum": 1},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
    "seed": {"type": "integer"},
    "n": {"type": "integer", "enum": [1]},
    "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    "stream": {"type": "boolean"},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
    "response_format": {"type": "object", "properties": {
        "type": {"type": "string", "enum": ["text", "json_object", "json_schema"]},
        "json_schema": {"type": "object", "properties": {"name": {"type": "string"}, "schema": {},
                                                         "strict": {"type": "boolean"}}, "required": ["schema"]}},
        "required": ["type"]},
    "grammar": {"type": "string", "description": "GBNF (extension)"},
    "dtd": {"type": "string", "description": "DTD text, or a file name under the server's DTD directory"},
    "root": {"type": "string"},
    "dtd_options": {"type": "object"},
    "failsafe": {"type": "boolean"},
    "copy_bias": {"anyOf": [{"type": "boolean"}, {"type": "number", "minimum": 0, "maximum": 10}],
                  "description": "logit bonus (nats; true: 2) for copying the request into a value (extension)"},
}

CHAT_BODY = {"type": "object", "required": ["messages"], "properties": {
    **_COMMON,
    "messages": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["role"], "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": {
            "type": "object", "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}]},
        "tool_calls": {"type": "array"}, "tool_call_id": {"type": "string"}}}},
    "tools": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
        "type": {"const": "function"},
        "function": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}, "parameters": {"type": "object"}}}}}},
    "tool_choice": {"anyOf": [{"type": "string", "enum": ["auto", "none", "required"]}, {"type": "object"}]},
    "parallel_tool_calls": {"type": "boolean"},
    "xml_tools": {"type": "boolean"},
}}

COMPLETION_BODY = {"type": "object", "required": ["prompt"], "properties": {
    **_COMMON, "prompt": {"anyOf": [{"type": "string", "minLength": 1},
                                 {"type": "array", "items": {"type": "string", "minLength": 1},
                                                         "minItems": 1, "maxItems": 1}]}}}

ERROR_RESPONSES = {str(code): {"description": what, "content": {"application/json": {"schema": _ERROR}}}
                   for code, what in ((400, "malformed request"), (401, "missing or bad API key"),
                                      (413, "body over the limit"),
                                      (422, "grammar cannot be enforced (pointer or line:column, keyword, reason)"),
                                      (500, "the constraint failed during generation"),
                                      (503, "queue full (Retry-After)"))}


def request_body(schema: dict) -> dict:
    """``openapi_extra`` for a route whose JSON body has ``schema``."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
