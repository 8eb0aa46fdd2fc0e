"""anyOf/oneOf branches that are bare references into a recursive definition (the
``json_react_element`` shape of JSONSchemaBench Github_easy o83258): each such branch is
compiled as its reference (a rule, recursion cut at ``max_depth``), never inlined into
itself; accepted and rejected instances, and random walks validated by jsonschema."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import canonicalize, compile_schema
from decoding.testing import random_walk
from decoding.vocab import Vocab

VOCAB = Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"</s>"], eog_ids=[256])
ELEMENT = {
    "$ref": "#/definitions/el",
    "definitions": {"el": {
        "type": "object", "additionalProperties": False, "required": ["type"],
        "properties": {
            "type": {"type": "string", "description": "tag name"},
            "children": {"description": "text, one element or a list of them", "oneOf": [
                {"type": "string"}, {"$ref": "#/definitions/el"},
                {"type": "array", "items": {"$ref": "#/definitions/el"}}]}}}},
}


@pytest.mark.parametrize("kw", ["oneOf", "anyOf"])
@pytest.mark.parametrize("value,ok", [
    ({"type": "div"}, True),
    ({"type": "div", "children": "hi"}, True),
    ({"type": "div", "children": {"type": "p", "children": "x"}}, True),
    ({"type": "ul", "children": [{"type": "li", "children": "a"}, {"type": "li"}]}, True),
    ({"children": "hi"}, False),
    ({"type": "div", "children": 3}, False),
    ({"type": "div", "children": [{"children": "x"}]}, False),
])
def test_recursive_reference_branches(kw, value, ok) -> None:
    schema = json.loads(json.dumps(ELEMENT).replace('"oneOf"', f'"{kw}"'))
    cg = compile_grammar(compile_schema(schema).grammar, VOCAB, backend="auto")
    assert jsonschema.Draft7Validator(schema).is_valid(value) is ok
    assert cg.accepts(canonicalize(schema, value).encode()) is ok


def test_walks_validate() -> None:
    cg = compile_grammar(compile_schema(ELEMENT).grammar, VOCAB, backend="auto")
    rng = np.random.default_rng(3)
    v = jsonschema.Draft7Validator(ELEMENT)
    for _ in range(10):
        w = random_walk(cg, rng, budget=200)
        assert v.is_valid(json.loads(w.text)), w.text
