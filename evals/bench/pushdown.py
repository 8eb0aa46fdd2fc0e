"""Pushdown back-end against the explicit DFA, side by side in one process.

    PYTHONPATH=. .venv/bin/python -m evals.bench.pushdown [--walks 200] [--vocab llama-bpe]

For grammars both back-ends can compile, the same token sequences (uniform random walks
under the DFA's mask) are replayed through a fresh DFA-backed and a fresh pushdown-backed
compiled grammar: per-token time of mask + advance on the first pass (cold: every state or
configuration is new, so masks are computed) and on a second pass (warm: memoized).  Then
the pushdown back-end alone on grammars too large for one DFA (free-form values 16 deep,
the whole hibernate-mapping DTD).  Prints compile times, per-token µs and ratios.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from decoding.frontends.xml.dtd import parse_dtd
from decoding.compiler import Compiler
from decoding.runtime.matcher import Matcher
from decoding.frontends.jsonschema import compile_schema
from decoding.testing import random_walk
from decoding.vocab import Vocab
from decoding.frontends.xml.grammar import dtd_grammar

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / ".." / "shared" / "corpora"
FREE = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "meta": {},
                                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 4},
                                                  "maxItems": 3}}, "required": ["name", "meta"]}
TOOL = {"type": "object", "properties": {
    "location": {"type": "string", "maxLength": 40}, "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "options": {"type": "object", "properties": {"hourly": {"type": "boolean"}, "lang": {"type": "string", "pattern": "^[a-z]{2}$"}}}},
    "required": ["location", "unit"]}


def replay(cg, walks: list[tuple[int, ...]]) -> float:
    """Seconds per token for mask + advance over ``walks``."""
    n = 0
    t0 = time.perf_counter()
    for toks in walks:
        m = Matcher(cg)
        for t in toks:
            m.mask()
            if not m.advance(t):
                raise AssertionError("token refused")
            n += 1
    return (time.perf_counter() - t0) / max(n, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--walks", type=int, default=200)
    ap.add_argument("--vocab", default="llama-bpe")
    a = ap.parse_args()
    v = Vocab.from_gguf(SHARED / "vocab" / f"ggml-vocab-{a.vocab}.gguf")
    from decoding.backends.tables import prepare
    prepare(v)  # the shared per-vocabulary tables: built once, outside the timings
    compiler = Compiler(v, cache=False)

    def compile_grammar(g, backend: str = "auto"):  # a fresh compiled grammar each call
        return compiler.compile_ir(g, backend=backend)

    both = {"tool schema": compile_schema(TOOL).grammar,
            "free-form values (depth 2)": compile_schema(FREE, free_depth=2).grammar}
    print(f"vocab {a.vocab} ({v.n_tokens} tokens), {a.walks} walks per grammar")
    print(f"{'grammar':30} {'backend':9} {'compile ms':>10} {'cold µs/tok':>12} {'warm µs/tok':>12}")
    for name, g in both.items():
        rng = np.random.default_rng(0)
        ref = compile_grammar(g, backend="dfa")
        walks = [random_walk(ref, rng, max_steps=400).tokens for _ in range(a.walks)]
        res = {}
        for backend in ("dfa", "pushdown"):
            t0 = time.perf_counter()
            cg = compile_grammar(g, backend=backend)
            c_ms = (time.perf_counter() - t0) * 1e3
            cold = replay(cg, walks) * 1e6
            warm = replay(cg, walks) * 1e6
            res[backend] = (cold, warm)
            print(f"{name:30} {backend:9} {c_ms:10.1f} {cold:12.1f} {warm:12.1f}")
        print(f"{'':30} {'ratio':9} {'':10} {res['pushdown'][0] / res['dfa'][0]:11.2f}x "
              f"{res['pushdown'][1] / res['dfa'][1]:11.2f}x  (pushdown / dfa)")
    d = parse_dtd((SHARED / "dtd" / "hibernate-mapping-3.0.dtd").read_text(encoding="utf-8"))
    only_pd = {"free-form values (depth 16)": compile_schema(FREE, free_depth=16).grammar,
               "hibernate-mapping (whole DTD)": dtd_grammar(d, "hibernate-mapping", max_depth=2)}
    for name, g in only_pd.items():
        t0 = time.perf_counter()
        cg = compile_grammar(g)
        c_ms = (time.perf_counter() - t0) * 1e3
        rng = np.random.default_rng(0)
        budget = cg.completion_cost(0) + 300
        walks = [random_walk(cg, rng, budget=budget, max_steps=budget + 1).tokens for _ in range(a.walks)]
        fresh = compile_grammar(g)
        cold = replay(fresh, walks) * 1e6
        warm = replay(fresh, walks) * 1e6
        st = fresh.stats()
        print(f"{name:30} {cg.stats()['backend']:9} {c_ms:10.1f} {cold:12.1f} {warm:12.1f}  "
              f"({st.get('configs', st['states'])} configurations, {st['distinct_masks']} masks)")


if __name__ == "__main__":
    main()
