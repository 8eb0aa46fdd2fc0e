"""The requests of the server load benchmark and the check of each answer against its OWN grammar.

Seven request kinds: five JSON schemas, the user-query DTD of ``grammars/`` and plain chat.
Every schema has ``additionalProperties: false`` and a required key that no other schema
has, so an answer constrained by another request's grammar fails its own schema (and a JSON
answer fails the DTD, an XML answer every schema).  :func:`check` says ``ok``, ``invalid``
(not valid against its own grammar) or ``cross`` (invalid for its own grammar but valid
for another kind's: the signature of a grammar applied to the wrong request).  A plain
(unconstrained) answer is ``cross`` when it is a complete document of one of the six
grammars, which free text from this model never is by chance at these lengths.

The unconstrained load uses the same prompts, seeds and ``max_tokens`` with no
``response_format`` / ``dtd``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Job", "KINDS", "SCHEMAS", "jobs", "check", "DTD_NAME", "ROOT"]

ROOT = Path(__file__).resolve().parents[2]
GRAMMARS = ROOT / "grammars"
DTD_NAME = "user_query.dtd"

SCHEMAS: dict[str, dict] = {
    "city": {"type": "object", "properties": {"city_name": {"type": "string", "maxLength": 24},
                                              "temp_c": {"type": "integer", "minimum": -60, "maximum": 60}},
             "required": ["city_name", "temp_c"], "additionalProperties": False},
    "book": {"type": "object", "properties": {"book_title": {"type": "string", "maxLength": 32},
                                              "year": {"type": "integer", "minimum": 1800, "maximum": 2030}},
             "required": ["book_title", "year"], "additionalProperties": False},
    "shop": {"type": "object", "properties": {"shop_kind": {"enum": ["bakery", "pharmacy", "bookshop", "cafe"]},
                                              "is_open": {"type": "boolean"}},
             "required": ["shop_kind", "is_open"], "additionalProperties": False},
    "tags": {"type": "object", "properties": {"tag_list": {"type": "array", "maxItems": 3,
                                                           "items": {"type": "string", "maxLength": 12}}},
             "required": ["tag_list"], "additionalProperties": False},
    "point": {"type": "object", "properties": {"point_xy": {
        "type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"], "additionalProperties": False}},
        "required": ["point_xy"], "additionalProperties": False},
}

KINDS = (*SCHEMAS, "dtd", "plain")

_PROMPTS = {
    "city": ["What is the temperature in {w} today?", "Give the city and its temperature: {w}."],
    "book": ["Name a famous book about {w} and its year.", "A classic novel set in {w}, with its year?"],
    "shop": ["Is the {w} bakery open now?", "What kind of shop is on {w} street, and is it open?"],
    "tags": ["Give up to three tags for a photo of {w}.", "Tag this post about {w}."],
    "point": ["Give the x and y coordinates of {w} on a map.", "Where is {w} on the grid (x, y)?"],
    "dtd": ["Look up user {n}.", "Query the account of user number {n}."],
    "plain": ["Say hello to someone from {w} in one sentence.", "Tell me one fact about {w}."],
}
_WORDS = ["Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Quito", "Rome", "Delhi", "Accra", "Kyiv", "Hanoi"]


@dataclass(frozen=True)
class Job:
    """One request: ``kind`` (a schema name, ``dtd`` or ``plain``), its prompt and seed."""

    client: int
    index: int
    kind: str
    prompt: str
    seed: int
    max_tokens: int

    def body(self, constrained: bool, model: str) -> dict[str, Any]:
        """The chat-completions request body (``constrained`` False: no grammar at all)."""
        b: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": self.prompt}],
                             "max_tokens": self.max_tokens, "seed": self.seed, "temperature": 0.8}
        if not constrained or self.kind == "plain":
            return b
        if self.kind == "dtd":
            spec = json.loads((GRAMMARS / "xml_grammars.json").read_text())["user_query"]
            b.update(dtd=DTD_NAME, root=spec["root"], dtd_options={"text_patterns": spec["text_patterns"]})
        else:
            b["response_format"] = {"type": "json_schema",
                                    "json_schema": {"name": self.kind, "schema": SCHEMAS[self.kind], "strict": True}}
        return b


def jobs(clients: int, per_client: int, max_tokens: int, dtd_max_tokens: int) -> list[list[Job]]:
    """``per_client`` jobs for each client; the kinds rotate so that every client mixes all seven."""
    out = []
    for c in range(clients):
        row = []
        for i in range(per_client):
            k = (c + i) % len(KINDS)
            kind = KINDS[k]
            tpl = _PROMPTS[kind][(c * per_client + i) % 2]
            prompt = tpl.format(w=_WORDS[(c * 7 + i) % len(_WORDS)], n=1000 + c * per_client + i)
            row.append(Job(c, i, kind, prompt, seed=c * 1000 + i,
                           max_tokens=dtd_max_tokens if kind == "dtd" else max_tokens))
        out.append(row)
    return out


class _Validators:
    def __init__(self) -> None:
        import jsonschema
        from lxml import etree

        self.json = {k: jsonschema.Draft202012Validator(s) for k, s in SCHEMAS.items()}
        self.dtd = etree.DTD(str(GRAMMARS / DTD_NAME))
        self.root = json.loads((GRAMMARS / "xml_grammars.json").read_text())["user_query"]["root"]

    def valid(self, kind: str, text: str) -> bool:
        if kind == "dtd":
            from lxml import etree

            try:
                doc = etree.fromstring(text.encode("utf-8"))
            except (etree.XMLSyntaxError, ValueError):
                return False
            return doc.tag == self.root and self.dtd.validate(doc)
        try:
            obj = json.loads(text)
        except ValueError:
            return False
        return self.json[kind].is_valid(obj)


_V: _Validators | None = None


def check(kind: str, text: str | None) -> str:
    """``ok``, ``invalid`` or ``cross`` for the answer ``text`` of a constrained ``kind`` request."""
    global _V
    if _V is None:
        _V = _Validators()
    text = text or ""
    others = [k for k in KINDS if k not in (kind, "plain")]
    if kind == "plain":
        return "cross" if any(_V.valid(k, text.strip()) for k in others) else "ok"
    if _V.valid(kind, text):
        return "ok"
    return "cross" if any(_V.valid(k, text) for k in others) else "invalid"
