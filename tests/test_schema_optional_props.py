"""Objects with many optional properties: the IR grows linearly in their number (it doubled
per optional property once: 16 Kubernetes ObjectMeta properties were 4.9 million states),
and the language is still exactly "any subset, in schema order, comma-separated"."""

from __future__ import annotations

import itertools
import json

import jsonschema
import numpy as np
import pytest

from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.ir.size import node_size
from decoding.vocab import Vocab

VOCAB = Vocab.from_bytes([b"", *[bytes([c]) for c in range(32, 127)]], eog_ids=[0])
NAMES = [f"p{i:02d}" for i in range(24)]


def _schema(n: int, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": {k: {"type": "integer", "minimum": 0, "maximum": 9} for k in NAMES[:n]},
            "required": list(required), "additionalProperties": False}


@pytest.mark.parametrize("n", [8, 16, 24])
def test_estimate_grows_linearly(n):
    g = compile_schema(_schema(n)).grammar
    assert max(node_size(node) for _, node in g.rules) < 60 * n


@pytest.mark.parametrize("n, required", [(6, ()), (6, ("p02",)), (7, ("p00", "p06"))])
def test_every_subset_in_order_and_nothing_else(n, required):
    schema = _schema(n, required)
    cg = compile_grammar(compile_schema(schema).grammar, VOCAB)
    keys = NAMES[:n]
    for r in range(n + 1):
        for sub in itertools.combinations(keys, r):
            doc = {k: i % 10 for i, k in enumerate(sub)}
            text = json.dumps(doc, separators=(",", ":")).encode()
            ok = all(k in sub for k in required)
            assert cg.accepts(text) == ok, text
    rng = np.random.default_rng(0)
    for _ in range(40):  # out of order, repeated, or with a stray comma: never
        sub = list(rng.choice(keys, size=3, replace=True))
        text = "{" + ",".join(f'"{k}":1' for k in sub) + "}"
        if sub != sorted(set(sub)) or len(set(sub)) != 3:
            assert not cg.accepts(text.encode()), text
    assert not cg.accepts(b'{,"p00":1}') and not cg.accepts(b'{"p00":1,}')


def test_the_kubernetes_object_meta_shape_compiles():
    """24 optional properties, some of them objects: compiles to a small automaton and
    random walks validate."""
    from decoding.testing import random_walk

    props = {k: ({"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}
                 if i % 4 == 0 else {"type": "string", "maxLength": 4}) for i, k in enumerate(NAMES)}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    cg = compile_grammar(compile_schema(schema).grammar, VOCAB)
    rng = np.random.default_rng(1)
    done = 0
    for _ in range(30):
        w = random_walk(cg, rng, max_steps=3000)
        if w.finished:
            jsonschema.validate(json.loads(w.text), schema)
            done += 1
    assert done >= 20
