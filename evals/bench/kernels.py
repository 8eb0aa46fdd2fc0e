"""Benchmark (not a test): per-token mask compute and mask apply, against a numpy baseline.

    python -m evals.bench.kernels [--instances N]

1. Mask compute, llama-bpe (128k) vocabulary: walk the tokens of valid instances of the
   shipped get_weather / search_product schemas and of JSONSchemaBench Glaiveai2K schemas;
   time CompiledGrammar.mask(state) per token (the back-end contract; whichever back-end
   "auto" picks), first visit (native trie walk) and memoized.
2. Apply: write a mask into llama-cpp-python's strided `scores` view (llama_token_data,
   stride 12 bytes) at 49,152 and 262,144 tokens, native kernel vs numpy `np.where`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from decoding import Compiler, _native
from decoding.vocab import Vocab

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "corpora"


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q)) if len(xs) else float("nan")


def bench_compute(vocab: Vocab, n_instances: int) -> dict:
    from decoding.frontends.jsonschema import canonicalize

    cases = []
    for name in ("get_weather", "search_product"):
        schema = json.loads((ROOT / "grammars" / f"{name}.json").read_text())
        docs = [{"city": "北京市", "date": "2025-06-15"}] if name == "get_weather" else \
            [{"query": "蓝牙耳机", "category": "数码", "max_price": 300}, {"query": "wool coat"}]
        cases.append((schema, docs))
    for p in sorted((SHARED / "jsonschemabench" / "Glaiveai2K").glob("*.json"))[: n_instances]:
        d = json.loads(p.read_text())
        cases.append((d["schema"], [t["data"] for t in d["tests"] if t["valid"]]))
    first, memo, compiled = [], [], 0
    compiler = Compiler(vocab, cache=False)
    for schema, docs in cases:
        try:
            cg = compiler.compile_json_schema(schema)
        except Exception:  # noqa: BLE001 - unsupported schemas are counted by the conformance runner
            continue
        compiled += 1
        for doc in docs:
            try:
                text = canonicalize(schema, doc)
            except Exception:  # noqa: BLE001
                continue
            ids = vocab.tokenize(text)
            for rnd in (first, memo):
                state = 0
                for t in ids:
                    t0 = time.perf_counter_ns()
                    cg.mask(state)
                    rnd.append((time.perf_counter_ns() - t0) / 1000)
                    state = cg.next_state(state, t)
                    if state < 0:
                        break
    return {"schemas": compiled, "tokens": len(memo),
            "first_visit_us": {"p50": pct(first, 50), "p99": pct(first, 99)},
            "memoized_us": {"p50": pct(memo, 50), "p99": pct(memo, 99), "mean": float(np.mean(memo))}}


def bench_apply(n: int, density: float, reps: int = 200) -> dict:
    rng = np.random.default_rng(0)
    bits = rng.random(n) < density
    mask = np.packbits(np.concatenate([bits, np.zeros((-n) % 32, bool)]), bitorder="little").view(np.uint32)
    rec = np.zeros(n, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
    scores = rec["logit"]
    allowed = bits.copy()
    t_nat, t_np = [], []
    for _ in range(reps):
        scores[:] = 1.0
        t0 = time.perf_counter_ns()
        _native.apply_mask(scores, mask)
        t_nat.append((time.perf_counter_ns() - t0) / 1000)
        scores[:] = 1.0
        t0 = time.perf_counter_ns()
        scores[:] = np.where(allowed, scores, -np.inf)
        t_np.append((time.perf_counter_ns() - t0) / 1000)
    return {"n": n, "density": density, "native_p50_us": pct(t_nat, 50), "native_p99_us": pct(t_nat, 99),
            "numpy_p50_us": pct(t_np, 50), "speedup": pct(t_np, 50) / pct(t_nat, 50)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=60, help="Glaiveai2K schemas to walk")
    args = ap.parse_args()
    print(f"kernel implementation: {_native.impl()}")
    vocab = Vocab.from_gguf(SHARED / "vocab" / "ggml-vocab-llama-bpe.gguf")
    c = bench_compute(vocab, args.instances)
    print(f"\nmask compute, llama-bpe 128k, {c['schemas']} schemas, {c['tokens']} tokens")
    print("| visit | p50 µs | p99 µs |\n|---|---|---|")
    print(f"| first (trie walk) | {c['first_visit_us']['p50']:.2f} | {c['first_visit_us']['p99']:.1f} |")
    print(f"| memoized | {c['memoized_us']['p50']:.2f} | {c['memoized_us']['p99']:.2f} |")
    print("\napply mask to the strided scores view (stride 12 B)")
    print("| vocab | allowed | native p50 µs | native p99 µs | numpy np.where p50 µs | speed-up |\n|---|---|---|---|---|---|")
    for n in (49152, 262144):
        for dens in (0.001, 0.5, 0.999):
            r = bench_apply(n, dens)
            print(f"| {n} | {dens:.1%} | {r['native_p50_us']:.1f} | {r['native_p99_us']:.1f} | "
                  f"{r['numpy_p50_us']:.1f} | {r['speedup']:.1f}x |")


if __name__ == "__main__":
    main()
