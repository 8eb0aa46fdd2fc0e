"""Large bounds (issue 14): compile time, first mask and per-token mask + advance of the
counted back-end (decoding.backends.counted), side by side with the explicit (unrolled) DFA
on the same schema with a bound it can still build (``backend="dfa"``).

    PYTHONPATH=. .venv/bin/python -m evals.bench.counted [--vocab llama-bpe] [--repeat 5]
    PYTHONPATH=. .venv/bin/python -m evals.bench.counted --split Snowplow [--limit 60]

With ``--split``: a breakdown of the schemas of a shared split (maskbench's evenly spaced
selection) that ``backend="auto"`` compiles counted: compile ms (best of ``--repeat``), the
estimate of the grammar unrolled and counted (NFA states), the subset construction's and the
minimal automaton's states, and the loops counted (``r`` units of room or need, the explicit
units ``T`` after the middle) with how many times each occurs; a grammar over lazy automata
(``stats()["lazy"]``, decoding.backends.counted_lazy) has no subset construction or explicit
automaton ("lazy") and lists its loops' rooms.

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

SPLITS = SHARED / "jsonschemabench"

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


def breakdown(vocab: Vocab, split: str, limit: int | None, repeat: int) -> None:
    """The ``--split`` table (see the module docstring)."""
    import json
    from collections import Counter

    from decoding import Compiler
    from decoding.backends import automaton, counted
    from decoding.frontends.jsonschema import compile_schema
    from decoding.ir.size import check_size
    from decoding.limits import DEFAULT_LIMITS
    from evals.bench.maskbench import select_schemas

    sizes: list[tuple[int, int]] = []
    minimize = automaton._minimize

    def spy(dfa, deadline=None, live=None):  # (subset states, minimal states) of each minimisation
        out = minimize(dfa, deadline, live)
        sizes.append((dfa.n_states, out.n_states))
        return out

    comp = Compiler(vocab, cache=False)
    print(f"split {split}, vocabulary {vocab.name} (K = {counted.window(vocab)}, TAIL = {counted.tail_for(vocab)}), "
          f"best of {repeat}\n")
    print("| schema | compile ms | estimate unrolled | estimate counted | subset states | states | "
          "loops: r (T) x states entering it |")
    print("|---|---|---|---|---|---|---|")
    for f in select_schemas(SPLITS / split, limit):
        schema = json.loads(f.read_text())["schema"]
        best, cg = float("inf"), None
        for _ in range(repeat):
            t0 = time.perf_counter()
            try:
                cg = comp.compile_json_schema(schema)
            except Exception:  # noqa: BLE001 - not counted: not in this table
                cg = None
                break
            best = min(best, time.perf_counter() - t0)
        if cg is None or cg.backend != "counted":
            continue
        g = compile_schema(schema).grammar
        try:
            unrolled = str(check_size(g, DEFAULT_LIMITS).states)
        except Exception as e:  # noqa: BLE001 - past the limits: say so
            unrolled = type(e).__name__
        g2, loops, products = counted.rewrite_products(g, counted.window(vocab), tail=counted.tail_for(vocab))
        est = check_size(g2, DEFAULT_LIMITS).states + sum(p.n_states for p in products.values())
        sizes.clear()
        automaton._minimize = spy
        try:
            comp.compile_json_schema(schema)
        finally:
            automaton._minimize = minimize
        sub = max(sizes)[0] if sizes else 0
        if cg.stats().get("lazy"):  # (over lazy automata: no explicit automaton, no minimisation)
            rooms = Counter(cg.room)
            desc = ", ".join(f"{r} x {n}" for r, n in sorted(rooms.items()))
            print(f"| {f.name} | {best * 1e3:.1f} | {unrolled} | {est} | lazy | lazy | {desc} |")
            continue
        d = cg.dfa  # (rebuilt with its marker columns)
        col = {t: j for j, t in enumerate(d.specials)}
        occ: Counter = Counter()  # (units, tail, need) -> states the loop is entered from
        for lp in cg.loops:
            occ[(lp.x + lp.tail, lp.tail, lp.need)] += int((d.trans[:, d.n_classes + col[lp.en]] >= 0).sum()) \
                if lp.en in col else 0
        desc = ", ".join(f"{'need ' if need else ''}{r} ({t}) x {n}" for (r, t, need), n in sorted(occ.items()))
        print(f"| {f.name} | {best * 1e3:.1f} | {unrolled} | {est} | {sub} | {cg.stats()['states']} | {desc} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default="llama-bpe")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--split", help="a breakdown of the counted schemas of this shared split instead")
    ap.add_argument("--limit", type=int, default=60, help="with --split: schemas evenly spaced (-1: all)")
    args = ap.parse_args(argv)
    vocab = Vocab.from_gguf(SHARED / "vocab" / f"ggml-vocab-{args.vocab}.gguf")
    if args.split:
        breakdown(vocab, args.split, None if args.limit < 0 else args.limit, args.repeat)
        return 0
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
