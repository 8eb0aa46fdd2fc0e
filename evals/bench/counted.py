"""Large bounds (issue 14): compile time, first mask and per-token mask + advance of the
counted back-end (decoding.backends.counted), side by side with the explicit (unrolled) DFA
on the same schema with a bound it can still build (``backend="dfa"``).

    PYTHONPATH=. .venv/bin/python -m evals.bench.counted [--vocab llama-bpe] [--repeat 5]

Per-vocabulary tables (the trie, the plain-text profiles) are built once before timing, as
any process that compiled one grammar has them.  Compile = JSON Schema -> IR -> compiled
grammar (``decoding.compile_json_schema``, ``backend="auto"``), best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from decoding import compile_json_schema
from decoding.runtime.matcher import Matcher
from decoding.testing import random_walk
from decoding.vocab import Vocab

from evals.bench.pushdown import SHARED

CASES = [
    ("maxLength 131072", {"type": "string", "maxLength": 131072}, {"type": "string", "maxLength": 1000}),
    ("maxItems 100000", {"type": "array", "maxItems": 100000, "items": {"type": "integer"}},
     {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}),
    ("minLength 5000", {"type": "string", "minLength": 5000}, {"type": "string", "minLength": 1000}),
    ("enum of 5,000", {"enum": [f"item_{i:05d}_value" for i in range(5000)]}, None),
]


def _compile(schema: dict, vocab: Vocab, repeat: int, **kw) -> tuple[float, object]:
    best, cg = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        cg = compile_json_schema(schema, vocab, **kw)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3, cg


def _per_token_us(cg, seed: int = 0, walks: int = 3, steps: int = 60) -> float:
    rng = np.random.default_rng(seed)
    toks = [random_walk(cg, rng, max_steps=steps).tokens for _ in range(walks)]
    n, t0 = 0, time.perf_counter()
    for seq in toks:
        m = Matcher(cg)
        for t in seq:
            m.mask()
            m.advance(t)
            n += 1
    return (time.perf_counter() - t0) / max(n, 1) * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="llama-bpe")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    vocab = Vocab.from_gguf(SHARED / "vocab" / f"ggml-vocab-{args.vocab}.gguf")
    warm = compile_json_schema({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3000}}}, vocab)
    Matcher(warm).mask()  # per-vocabulary tables
    print(f"vocabulary {args.vocab} ({vocab.n_tokens} tokens), best of {args.repeat}\n")
    print("| schema | back-end | compile ms | first mask ms | mask+advance µs/token | "
          "explicit DFA (backend=\"dfa\"): bound, compile ms |")
    print("|---|---|---|---|---|---|")
    for name, schema, small in CASES:
        ms, cg = _compile(schema, vocab, args.repeat)
        t0 = time.perf_counter()
        Matcher(cg).mask()
        first = (time.perf_counter() - t0) * 1e3
        per = _per_token_us(cg)
        ref = "–"
        if small is not None:
            sms, scg = _compile(small, vocab, max(1, args.repeat // 2), backend="dfa")
            bound = {k: v for k, v in small.items() if k in ("maxLength", "maxItems", "minLength")}
            ref = f"{bound}, {sms:.1f}"
        print(f"| {name} | {cg.backend} | {ms:.1f} | {first:.2f} | {per:.0f} | {ref} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
