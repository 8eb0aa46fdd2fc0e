"""The GBNF export path for vLLM's built-in backends (issue 17).

vLLM's ``structured_outputs={"grammar": ...}`` hands the grammar text to xgrammar's EBNF
parser (``xgrammar.Grammar.from_ebnf``).  These tests check that the GBNF this project
emits (``python -m decoding gbnf`` = :func:`decoding.backends.gbnf.emit.to_gbnf`) parses
there for every shipped grammar and for 100 JSONSchemaBench schemas, and that it means the
same language: random walks of our compiled grammar (:func:`decoding.testing.random_walk`,
on a real tokenizer) are accepted by xgrammar's matcher, and a walk with its last byte
changed into one our DFA refuses is refused by xgrammar too.

Skipped when xgrammar is not installed (the ``peers`` extra).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

xg = pytest.importorskip("xgrammar", reason="xgrammar is not installed (pip install 'guarded-decoding[peers]')")

from decoding.backends.gbnf.emit import to_gbnf  # noqa: E402
from decoding.compiler import Compiler  # noqa: E402
from decoding.errors import DecodingError  # noqa: E402
from decoding.frontends.sources import build_grammar, read_source  # noqa: E402
from decoding.testing import random_walk  # noqa: E402

from conftest import CORPORA, ROOT, get_vocab  # noqa: E402

GRAMMARS = ROOT / "grammars"
BENCH = CORPORA / "jsonschemabench"
N_SCHEMAS = 100


def _shipped() -> list[tuple[str, str, object, dict]]:
    """(name, kind, source, front-end options) of every grammar in grammars/manifest.json."""
    spec = json.loads((GRAMMARS / "xml_grammars.json").read_text())
    out = []
    for e in json.loads((GRAMMARS / "manifest.json").read_text())["grammars"]:
        if e["kind"] == "dtd":
            opts = dict(spec[e["name"]])
            out.append((e["name"], "dtd", read_source(GRAMMARS / opts.pop("dtd")), opts))
        else:
            out.append((e["name"], e["kind"], json.loads(read_source(GRAMMARS / e["source"])), {}))
    return out


def _bench_sample() -> list[tuple[str, dict]]:
    """The first 100 schemas (sorted by file name, Glaiveai2K then Github_easy) that our
    front-end compiles: deterministic, and the same sample as tests/test_gbnf_roundtrip.py."""
    out: list[tuple[str, dict]] = []
    for split in ("Glaiveai2K", "Github_easy"):
        files = sorted((BENCH / split).glob("*.json"))
        assert files, f"{BENCH / split}: no schemas; the shared corpora are missing"
        for f in files:
            if len(out) >= N_SCHEMAS:
                return out
            schema = json.loads(f.read_text())["schema"]
            try:
                build_grammar(schema, "json-schema", name=f.name)
            except DecodingError:
                continue  # front-end coverage is scored elsewhere
            out.append((f"{split}/{f.name}", schema))
    return out


SHIPPED = _shipped()
BENCH_SAMPLE = _bench_sample()


def _gbnf(source, kind: str, opts: dict, name: str) -> str:
    g, _ = build_grammar(source, kind, name=name, base_dir=str(GRAMMARS), **opts)
    return to_gbnf(g)


def _xg_parse(text: str, where: str):
    try:
        return xg.Grammar.from_ebnf(text, root_rule_name="root")
    except Exception as e:  # noqa: BLE001 - reported with the grammar's place
        pytest.fail(f"{where}: xgrammar refused our GBNF: {str(e).strip()[-300:]}\n--- GBNF ---\n{text[:2000]}")


@pytest.mark.parametrize("name,kind,source,opts", SHIPPED, ids=[s[0] for s in SHIPPED])
def test_shipped_grammar_parses_in_xgrammar(name, kind, source, opts):
    _xg_parse(_gbnf(source, kind, opts, name), f"grammars/{name}")


def test_100_jsonschemabench_schemas_parse_in_xgrammar():
    assert len(BENCH_SAMPLE) == N_SCHEMAS
    refused = []
    for name, schema in BENCH_SAMPLE:
        text = _gbnf(schema, "json-schema", {}, name)
        try:
            xg.Grammar.from_ebnf(text, root_rule_name="root")
        except Exception as e:  # noqa: BLE001 - collected and reported below
            refused.append((name, str(e).strip()[-200:]))
    assert not refused, f"{len(refused)}/{N_SCHEMAS} refused by xgrammar: {refused[:3]}"


# ----------------------------------------------------------------------------- same language

_COMPILER = None


def _compiler() -> Compiler:
    global _COMPILER
    if _COMPILER is None:
        _COMPILER = Compiler(get_vocab("llama-bpe"), cache=False)
    return _COMPILER


def _xg_matcher_factory(text: str):
    compiled = xg.GrammarCompiler(xg.TokenizerInfo([])).compile_grammar(xg.Grammar.from_ebnf(text))

    def accepts(data: bytes) -> bool:
        m = xg.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return bool(m.accept_string(data)) and bool(m.is_terminated())
    return accepts


WALKED = list(SHIPPED) + [(n, "json-schema", s, {}) for n, s in BENCH_SAMPLE[:8]]


@pytest.mark.parametrize("name,kind,source,opts", WALKED, ids=[s[0] for s in WALKED])
def test_random_walks_accepted_by_xgrammar_matcher(name, kind, source, opts):
    comp = _compiler()
    if kind == "dtd":
        cg = comp.compile_source(source, "dtd", name=name, base_dir=GRAMMARS, **opts)
    else:
        cg = comp.compile_source(source, kind, name=name, **opts)
    accepts = _xg_matcher_factory(_gbnf(source, kind, opts, name))
    rng = np.random.default_rng(17)
    walks = [random_walk(cg, rng, budget=160) for _ in range(6)]
    assert all(w.finished for w in walks)
    refused = [w.text for w in walks if not accepts(w.text)]
    assert not refused, f"{name}: xgrammar's matcher refused our walks: {refused[:2]}"
    # and a refused neighbour: the walk's text with a byte appended that our grammar refuses
    # after it (a complete walk followed by junk), must be refused by xgrammar as well
    for w in walks[:2]:
        bad = w.text + b"\x01"
        assert not cg.accepts(bad)
        assert not accepts(bad), f"{name}: xgrammar accepts {bad[-40:]!r} which our grammar refuses"
