"""Task families: prompt text, grammar IR, validation target and field extraction.

One :class:`Family` per task family.  XML grammars come from ``grammars/*.dtd`` through
``grammars/xml_grammars.json`` (``grammar_from_spec``); the plist family generates from
the bounded profile ``evals/harness/grammars/plist_profile.dtd`` and is validated against
the full ``grammars/plist.dtd``.  JSON grammars come from ``grammars/*.json`` plus the
tool-routing schema defined here (a ``oneOf`` of 5 tool calls).

Invariants
- ``render(expected)`` is a document the family's grammar accepts and its validator
  passes (it is the few-shot example's answer).
- ``fields(value)`` returns the fields as decoded text, comparable with ``Task.expected``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable
from xml.etree import ElementTree as ET

from decoding.frontends.xml.dtd import parse_dtd
from decoding.ir import Grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.xml.grammar import dtd_grammar, grammar_from_spec
from decoding.frontends.xml.text import escape_text
from decoding.runtime.prompting import ToolSpec, dump_json

__all__ = ["Family", "FAMILY", "ROOT", "TOOL_ROUTING_SCHEMA", "DEFAULT_WHITESPACE", "dtd_layout"]

# JSON layout of generation and of the prompts' examples (issue 18: see docs/evals.md)
DEFAULT_WHITESPACE = "natural"

ROOT = Path(__file__).resolve().parents[2]
GRAMMARS = ROOT / "grammars"
HERE = Path(__file__).resolve().parent

_EMAIL = {"type": "string", "pattern": "^[a-z]{1,16}@[a-z]{1,16}\\.com$"}
TOOL_ARGS = {
    "get_weather": None,  # grammars/get_weather.json
    "search_product": None,  # grammars/search_product.json
    "send_email": {"type": "object", "properties": {"to": _EMAIL, "subject": {"type": "string", "minLength": 1,
                                                                             "maxLength": 40}},
                   "required": ["to", "subject"], "additionalProperties": False},
    "set_alarm": {"type": "object", "properties": {
        "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
        "label": {"type": "string", "maxLength": 20}}, "required": ["time"], "additionalProperties": False},
    "book_flight": {"type": "object", "properties": {
        "from": {"type": "string", "pattern": "^[A-Z]{3}$"}, "to": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "date": {"type": "string", "format": "date"}}, "required": ["from", "to", "date"],
        "additionalProperties": False},
}


def _schema(name: str) -> dict:
    s = json.loads((GRAMMARS / f"{name}.json").read_text(encoding="utf-8"))
    return {k: v for k, v in s.items() if k not in ("$schema", "title", "description")}


def _tool_routing_schema() -> dict:
    branches = []
    for name, args in TOOL_ARGS.items():
        branches.append({"type": "object", "properties": {"tool": {"const": name},
                                                          "arguments": args or _schema(name)},
                         "required": ["tool", "arguments"], "additionalProperties": False})
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "oneOf": branches}


TOOL_ROUTING_SCHEMA = _tool_routing_schema()


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # "xml" | "json"
    instruction: str  # system prompt of the free / constrained modes
    root: str | None  # XML root element
    max_tokens: int
    _grammar: Callable[..., Grammar]
    _render: Callable[[dict], str]
    _fields: Callable[[Any], dict]
    dtd_file: str | None = None
    schema: dict | None = None

    def grammar(self, whitespace: str = DEFAULT_WHITESPACE) -> Grammar:
        """The family's grammar; JSON families in the given whitespace policy (``"natural"``:
        ``", "`` and ``": "``, the generation default; ``"compact"``: none)."""
        return self._grammar(whitespace) if self.kind == "json" else self._grammar()

    def render(self, expected: dict, whitespace: str = DEFAULT_WHITESPACE) -> str:
        """The correct answer, in the layout of ``whitespace`` (JSON families)."""
        doc = self._render(expected)
        return dump_json(json.loads(doc), whitespace) if self.kind == "json" else doc

    def tool(self) -> ToolSpec:
        """The tool definition every mode's prompt is built from (schema or DTD layout)."""
        if self.kind == "json":
            return ToolSpec(self.name, self.instruction, "json", schema=self.schema)
        return ToolSpec(self.name, self.instruction, "xml", layout=dtd_layout(self.dtd_file) if self.dtd_file else "")

    def fields(self, value: Any) -> dict:
        """Fields of a parsed output (ElementTree element for XML, Python value for JSON)."""
        try:
            return self._fields(value)
        except (AttributeError, KeyError, TypeError, IndexError):
            return {}

    @property
    def dtd(self):
        return _load_dtd(self.dtd_file) if self.dtd_file else None


@lru_cache(maxsize=None)
def _load_dtd(path: str):
    return parse_dtd(Path(path).read_text(encoding="utf-8"), source=path, base_dir=str(Path(path).parent))


@lru_cache(maxsize=None)
def _spec(name: str) -> Grammar:
    specs = json.loads((GRAMMARS / "xml_grammars.json").read_text(encoding="utf-8"))
    # the tasks ask for the element only: no optional XML declaration (saves ~12 tokens)
    return grammar_from_spec(specs[name], str(GRAMMARS), xml_declaration="none")


@lru_cache(maxsize=None)
def _plist_grammar() -> Grammar:
    p = HERE / "grammars" / "plist_profile.dtd"
    return dtd_grammar(_load_dtd(str(p)), "plist", xml_declaration="none", text_patterns={
        "key": "[A-Za-z][A-Za-z0-9_]{0,31}", "string": "[^\\n]{0,24}", "integer": "[+-]?[0-9]{1,12}"})


_JSON_GRAMMARS: dict[tuple[str, str], Grammar] = {}


def _json_grammar(name: str, schema: dict, whitespace: str = DEFAULT_WHITESPACE) -> Grammar:
    """Grammar of ``schema`` (property order as written: the compiler keeps schema order)."""
    if (name, whitespace) not in _JSON_GRAMMARS:
        _JSON_GRAMMARS[name, whitespace] = compile_schema(schema, whitespace=whitespace).grammar
    return _JSON_GRAMMARS[name, whitespace]


def dtd_layout(path: str) -> str:
    """The DTD text without comments (comments may hold worked examples: never shown)."""
    return re.sub(r"<!--.*?-->\s*", "", Path(path).read_text(encoding="utf-8"), flags=re.S).strip()


def _children(el) -> dict:
    return {c.tag: (c.text or "") for c in el}


def _xml_text(s: str) -> str:
    return escape_text(s)


def _plist_fields(el) -> dict:
    d = el.find("dict")
    kids = list(d)
    out = {}
    for k, v in zip(kids[0::2], kids[1::2]):
        if k.tag == "key":
            out[k.text or ""] = v.tag if v.tag in ("true", "false") else (v.text or "")
    return out


def _plist_render(e: dict) -> str:
    val = "<true/>" if e["enabled"] == "true" else "<false/>"
    return (f'<plist version="1.0"><dict><key>name</key><string>{_xml_text(e["name"])}</string>'
            f'<key>build</key><integer>{e["build"]}</integer><key>enabled</key>{val}</dict></plist>')


def _soap_fields(el) -> dict:
    body = el[0] if len(el) == 1 else el[-1]
    call = body[0]
    return _children(call)


def _json_fields(v: Any) -> dict:
    return {k: (str(x) if not isinstance(x, bool) else ("true" if x else "false")) for k, x in v.items()}


def _routing_fields(v: Any) -> dict:
    return {"tool": v["tool"], **_json_fields(v["arguments"])}


def _routing_render(e: dict) -> str:
    args = {k: v for k, v in e.items() if k != "tool"}
    if "max_price" in args:
        args["max_price"] = int(args["max_price"])
    return json.dumps({"tool": e["tool"], "arguments": args}, ensure_ascii=False, separators=(",", ":"))


def _product_render(e: dict) -> str:
    return json.dumps({"query": e["query"], "category": e["category"], "max_price": int(e["max_price"])},
                      ensure_ascii=False, separators=(",", ":"))


_SOAP_NS = ('<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
            '<urn:ExecuteCommand xmlns:urn="http://tempuri.org/">')

FAMILY: dict[str, Family] = {f.name: f for f in [
    Family("user_query", "xml",
           "You are a tool-calling assistant. Reply with only an XML <request> element that contains "
           "<user_id> (digits) and <action>query</action>.",
           "request", 48, lambda: _spec("user_query"),
           lambda e: f"<request><user_id>{e['user_id']}</user_id><action>query</action></request>",
           _children, dtd_file=str(GRAMMARS / "user_query.dtd")),
    Family("soap_command", "xml",
           "You are a tool-calling assistant. Reply with only a SOAP 1.1 envelope (soap:Envelope, soap:Body) "
           "that calls urn:ExecuteCommand (xmlns:urn=\"http://tempuri.org/\") with <command> and <id>.",
           "soap:Envelope", 160, lambda: _spec("soap_execute_command"),
           lambda e: f"{_SOAP_NS}<command>{e['command']}</command><id>{e['id']}</id>"
                     "</urn:ExecuteCommand></soap:Body></soap:Envelope>",
           _soap_fields, dtd_file=str(GRAMMARS / "soap_execute_command.dtd")),
    Family("vehicle_request", "xml",
           "You are a tool-calling assistant. Reply with only an XML <request> element that contains "
           "<vin> (17 characters) and <timestamp> (ISO 8601 UTC, YYYY-MM-DDThh:mm:ssZ).",
           "request", 64, lambda: _spec("vehicle_request"),
           lambda e: f"<request><vin>{e['vin']}</vin><timestamp>{e['timestamp']}</timestamp></request>",
           _children, dtd_file=str(GRAMMARS / "vehicle_request.dtd")),
    Family("plist_dict", "xml",
           "You are a configuration assistant. Reply with only an Apple plist: <plist version=\"1.0\"><dict> with "
           "the keys name (<string>), build (<integer>) and enabled (<true/> or <false/>).",
           "plist", 80, _plist_grammar, _plist_render, _plist_fields, dtd_file=str(GRAMMARS / "plist.dtd")),
    Family("get_weather", "json",
           "You are a tool-calling assistant. Reply with only the JSON arguments of get_weather: "
           "{\"city\": full Chinese city name, \"date\": \"YYYY-MM-DD\"}.",
           None, 48, lambda ws=DEFAULT_WHITESPACE: _json_grammar("get_weather", _schema("get_weather"), ws),
           lambda e: json.dumps({"city": e["city"], "date": e["date"]}, ensure_ascii=False, separators=(",", ":")),
           _json_fields, schema=_schema("get_weather")),
    Family("search_product", "json",
           "You are a tool-calling assistant. Reply with only the JSON arguments of search_product: "
           "{\"query\": text, \"category\": one of 数码/服饰/食品/家居, \"max_price\": integer}.",
           None, 48, lambda ws=DEFAULT_WHITESPACE: _json_grammar("search_product", _schema("search_product"), ws),
           _product_render, _json_fields, schema=_schema("search_product")),
    Family("tool_routing", "json",
           "You are a tool-calling assistant with 5 tools: get_weather(city, date), search_product(query, "
           "category, max_price), send_email(to, subject), set_alarm(time HH:MM, label), book_flight(from, to, "
           "date). Reply with only JSON {\"tool\": name, \"arguments\": {...}}.",
           None, 64, lambda ws=DEFAULT_WHITESPACE: _json_grammar("tool_routing", TOOL_ROUTING_SCHEMA, ws),
           _routing_render, _routing_fields, schema=TOOL_ROUTING_SCHEMA),
]}
