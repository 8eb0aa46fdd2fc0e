"""Ours' compile time with warm and with cold caches (a benchmark, not a test).

    PYTHONPATH=. .venv/bin/python -m evals.bench.compile_cold [--split Glaiveai2K --limit 150]

:mod:`evals.bench.maskbench` calls ``gc.collect()`` before every timed compile.  A full
collection walks every tracked object of the process and leaves the CPU caches cold; a
Python compile pays for that more than a native one.  This times
``Compiler(vocab, cache=False).compile_json_schema`` (as maskbench does, back-end "auto") on
the split's schemas (maskbench's selection), each compile once, after each of:

- ``nothing``: warm caches;
- ``gc.collect()``: what maskbench does;
- ``gc.collect(0)``: the young generation only;
- ``sweep``: a 32 MB array read and written, no collection (cold caches alone).

The four passes over the schemas are interleaved per schema, so machine noise hits all alike.
Also prints the phases of one compile: front-end (``build_grammar``), digest
(``grammar_digest``) and back-end (``compile_grammar``), warm (medians) and, means over the
schemas, warm against cold (each phase run right after ``gc.collect()`` and the sweep).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import numpy as np

from decoding.backends.select import compile_grammar
from decoding.backends.tables import prepare as prepare_tables
from decoding.compiler import Compiler, build_grammar
from decoding.ir.key import grammar_digest
from decoding.vocab import Vocab
from evals.bench.maskbench import SHARED, VOCABS, select_schemas


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="Glaiveai2K")
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--vocab", default="llama-bpe", choices=sorted(VOCABS))
    a = ap.parse_args(argv)
    vocab = Vocab.from_gguf(SHARED / "vocab" / VOCABS[a.vocab])
    prepare_tables(vocab)
    comp = Compiler(vocab, cache=False)
    schemas = []
    for path in select_schemas(SHARED / "jsonschemabench" / a.split, a.limit):
        s = json.loads(path.read_text(encoding="utf-8"))["schema"]
        try:
            comp.compile_json_schema(s)  # (also warms each format once, as in a long-lived process)
            schemas.append(s)
        except Exception:  # noqa: BLE001 - schemas we do not compile are not timed
            pass
    buf = np.ones(4_000_000)  # 32 MB

    def sweep() -> None:
        buf.sum()
        buf[::8] += 1.0

    before = {"nothing": lambda: None, "gc.collect()": gc.collect, "gc.collect(0)": lambda: gc.collect(0),
              "sweep": sweep}
    times: dict[str, list[float]] = {k: [] for k in before}
    names = ("front-end", "digest", "back-end")
    phases: dict[str, dict[str, list[float]]] = {c: {k: [] for k in names} for c in ("warm", "cold")}
    opts = comp._frontend_options({}, "json-schema")
    for s in schemas:
        for name, fn in before.items():
            fn()
            t = time.perf_counter()
            comp.compile_json_schema(s)
            times[name].append((time.perf_counter() - t) * 1e3)
        for cond in ("warm", "cold"):  # (cold: the phases after gc.collect() and a sweep, as maskbench's peers leave them)
            if cond == "cold":
                gc.collect()
                sweep()
            t0 = time.perf_counter()
            g, _ = build_grammar(s, "json-schema", **opts)
            t1 = time.perf_counter()
            grammar_digest(g)
            t2 = time.perf_counter()
            compile_grammar(g, vocab, backend="auto")
            t3 = time.perf_counter()
            for k, v in zip(names, (t1 - t0, t2 - t1, t3 - t2)):
                phases[cond][k].append(v * 1e3)
    print(f"{a.split}, {len(schemas)} schemas compiled, vocabulary {a.vocab}; ours' compile, ms")
    print("| before each compile | p50 | p90 |\n|---|---|---|")
    for name, v in times.items():
        q = statistics.quantiles(v, n=10)
        print(f"| {name} | {statistics.median(v):.2f} | {q[8]:.2f} |")
    print("warm phases (medians, ms): " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in phases["warm"].items()))
    print("phases, mean ms warm -> cold (after gc.collect() and the sweep), and the ratio: " + ", ".join(
        f"{k} {statistics.fmean(phases['warm'][k]):.3f} -> {statistics.fmean(phases['cold'][k]):.3f} "
        f"({statistics.fmean(phases['cold'][k]) / max(statistics.fmean(phases['warm'][k]), 1e-9):.2f}x)"
        for k in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
