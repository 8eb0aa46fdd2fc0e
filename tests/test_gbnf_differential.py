"""Differential tests: our automaton vs llama.cpp's grammar engine on emitted GBNF.

Both back-ends get the same bytes; llama.cpp gets them as the Llama-3 BPE token sequence
through its grammar sampler.  Verdicts must agree.  The only tolerated disagreement is
the documented depth bound: the automaton unrolls recursion to ``max_depth`` while GBNF
stays recursive, so llama.cpp may accept a deeper string the automaton rejects; such a
case must then be accepted by the automaton compiled with a larger depth.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.frontends.xml.dtd import parse_dtd
from decoding.errors import DecodingError
from decoding.backends.gbnf.check import LlamaGrammarEngine
from decoding.backends.gbnf.emit import to_gbnf
from decoding.frontends.gbnf.parse import parse_gbnf
from decoding.ir import Grammar
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.xml.grammar import dtd_grammar

from gbnf_util import SHARED, random_walks
from test_gbnf_emit import HAND_GRAMMARS

BENCH = SHARED / "corpora" / "jsonschemabench"
DTDS = SHARED / "corpora" / "dtd"


def _mutants(s: bytes, rng: random.Random, k: int = 3) -> list[bytes]:
    """Character-level edits of ``s`` (kept well-formed UTF-8)."""
    text = s.decode("utf-8")
    out = [s[:-1] if s else b"x", s + b"}", s + b" "]
    alphabet = '{}[]",:0a \\<>/=-é'
    for _ in range(k):
        if not text:
            break
        i = rng.randrange(len(text))
        op = rng.randrange(3)
        c = rng.choice(alphabet)
        t = text[:i] + (c + text[i + 1:] if op == 0 else c + text[i:] if op == 1 else text[i + 1:])
        out.append(t.encode())
    return [m for m in out if b"\x00" not in m]


class Diff:
    """Accumulates verdict comparisons of one grammar."""

    def __init__(self, g: Grammar) -> None:
        self.g = g
        self.dfa = compile_dfa(g)
        self.text = to_gbnf(g)
        self.eng = LlamaGrammarEngine(self.text)
        self._deeper = None
        self.agree = self.depth_cases = 0
        self.failures: list[tuple[bytes, bool, bool]] = []

    def compare(self, s: bytes) -> None:
        a, b = self.dfa.accepts(s), self.eng.accepts(s)
        if a == b:
            self.agree += 1
        elif b and not a and self._deeper_accepts(s):
            self.depth_cases += 1
        else:
            self.failures.append((s[:200], a, b))

    def _deeper_accepts(self, s: bytes) -> bool:
        if self._deeper is None:
            self._deeper = compile_dfa(replace(self.g, max_depth=self.g.max_depth + 3))
        return self._deeper.accepts(s)


@pytest.mark.parametrize("name", sorted(HAND_GRAMMARS))
def test_hand_grammars_walks_and_mutants(name):
    d = Diff(HAND_GRAMMARS[name])
    rng = random.Random(7)
    for s in random_walks(d.dfa, 40, seed=3):
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            continue
        d.compare(s)
        for m in _mutants(s, rng):
            d.compare(m)
    assert not d.failures, d.failures[:5]
    assert d.agree > 40


def _bench_files(split: str, n: int) -> list[Path]:
    return sorted((BENCH / split).glob("*.json"))[:n]


def _instance_bytes(data) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("split,n,min_converted", [("Glaiveai2K", 30, 25), ("Github_easy", 25, 18)])
def test_json_schema_corpus_instances(split, n, min_converted):
    converted = compared = 0
    failures = []
    for f in _bench_files(split, n):
        doc = json.loads(f.read_text())
        try:
            g = compile_schema(doc["schema"]).grammar
            d = Diff(g)
        except DecodingError:
            continue  # the schema front-end's own coverage is scored in evals/gbnf/coverage.py
        converted += 1
        for t in doc["tests"]:
            s = _instance_bytes(t["data"])
            if b"\x00" in s:
                continue
            d.compare(s)
            compared += 1
        failures += [(f.name,) + x for x in d.failures]
    assert not failures, failures[:5]
    assert converted >= min_converted and compared >= 2 * min_converted


def test_json_schema_walks_agree():
    """Generated (accepted) instances and their mutants on a few real schemas."""
    rng = random.Random(11)
    failures = []
    for f in _bench_files("Glaiveai2K", 8):
        d = Diff(compile_schema(json.loads(f.read_text())["schema"]).grammar)
        for s in random_walks(d.dfa, 10, seed=5, max_len=200):
            d.compare(s)
            for m in _mutants(s, rng, 2):
                d.compare(m)
        failures += [(f.name,) + x for x in d.failures]
    assert not failures, failures[:5]


def test_dtd_corpus_log4j():
    man = json.loads((DTDS / "instances" / "_manifest.json").read_text())
    info = man["log4j"]
    dtd = parse_dtd((DTDS / info["dtd"]).read_text(), source=info["dtd"], base_dir=DTDS)
    d = Diff(dtd_grammar(dtd, "log4j:configuration"))
    for p in sorted((DTDS / "instances" / "log4j").iterdir())[:12]:
        d.compare(p.read_bytes())
    rng = random.Random(5)
    for s in random_walks(d.dfa, 15, seed=9, max_len=300):
        d.compare(s)
        for m in _mutants(s, rng, 2):
            d.compare(m)
    assert not d.failures, d.failures[:5]
    assert d.agree >= 50


def test_recursive_dtd_depth_bound_is_the_only_disagreement():
    dtd = parse_dtd('<!ELEMENT list (item*)>\n<!ELEMENT item (#PCDATA|list)*>\n', source="t.dtd")
    g = dtd_grammar(dtd, "list", max_depth=2, xml_declaration="none")
    d = Diff(g)
    shallow = b"<list><item>a</item></list>"
    deep = b"<list><item><list><item><list><item>x</item></list></item></list></item></list>"
    for s in (shallow, deep, b"<list><item></list>", b"<list/>x"):
        d.compare(s)
    assert not d.failures, d.failures
    assert d.depth_cases >= 1  # ``deep`` nests past max_depth: llama.cpp accepts, we bound


def test_reparsed_gbnf_agrees_with_llama_on_its_own_text():
    """GBNF -> IR (our parser) vs the same text in llama.cpp, on json.gbnf-like input."""
    text = ('root ::= obj\nobj ::= "{" (pair ("," pair)*)? "}"\npair ::= str ":" val\n'
            'val ::= str | obj | [0-9]+\nstr ::= "\\"" [^"\\\\]* "\\""\n')
    g = parse_gbnf(text, max_depth=3)
    dfa, eng = compile_dfa(g), LlamaGrammarEngine(text)
    rng = random.Random(1)
    for s in random_walks(dfa, 30, seed=2):
        assert eng.accepts(s), s
        for m in _mutants(s, rng):
            a, b = dfa.accepts(m), eng.accepts(m)
            assert a == b or (b and not a), m
