"""Round trip IR -> GBNF -> IR on 100 real schemas, compared by random walks both ways."""

from __future__ import annotations

import json

from decoding.backends.automaton import compile_dfa
from decoding.errors import DecodingError
from decoding.backends.gbnf.emit import to_gbnf
from decoding.frontends.gbnf.parse import parse_gbnf
from decoding.frontends.jsonschema import compile_schema

from gbnf_util import SHARED, random_walks

BENCH = SHARED / "corpora" / "jsonschemabench"


def test_roundtrip_100_schemas():
    done, failures = 0, []
    for split in ("Glaiveai2K", "Github_easy"):
        for f in sorted((BENCH / split).glob("*.json")):
            if done >= 100:
                break
            try:
                g = compile_schema(json.loads(f.read_text())["schema"]).grammar
                a = compile_dfa(g)
            except DecodingError:
                continue  # front-end coverage is scored elsewhere
            text = to_gbnf(g)
            b = compile_dfa(parse_gbnf(text, max_depth=g.max_depth))
            bad = [s for s in random_walks(a, 12, seed=done) if not b.accepts(s)]
            bad += [s for s in random_walks(b, 12, seed=done + 1) if not a.accepts(s)]
            if bad:
                failures.append((f.name, bad[:2]))
            done += 1
    assert done == 100
    assert not failures, failures[:3]
