"""End-to-end speed on SmolLM2-135M-Instruct, all modes in one run (not a test).

    python -m evals.bench.e2e [--prompts N] [--max-tokens M] [--lazy]

Modes, interleaved prompt by prompt so that machine noise hits all of them alike:
- free:        llama-cpp-python create_chat_completion, no constraint
- processor:   the same call with GrammarLogitsProcessor (plain logits-processor mode)
- noop-processor (--noop): the same call with a processor that changes nothing
- driver-free: decoding.runtime.fastforward.generate_fast without a grammar (same sampling loop)
- fast-fwd:    generate_fast with the grammar and forced-token fast-forward
Tokens/s is completion tokens over generation time (prompt evaluation excluded: from the
first streamed token for the llama-cpp-python modes, counted by the context's growth, not
by chunks; measured by the driver otherwise).
Ratios against `free` are the figures that matter; absolute numbers vary with load.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from llama_cpp import LogitsProcessorList

from decoding import Compiler, GrammarLogitsProcessor
from decoding.runtime.fastforward import generate_fast
from decoding.models import load_model

ROOT = Path(__file__).resolve().parents[2]


def tasks(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    cities = ["北京市", "上海市", "深圳市", "Paris", "Tokyo"]
    out = []
    for i in range(n):
        k = i % 3
        if k == 0:
            out.append(("get_weather", f"Weather in {rng.choice(cities)} on 2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}? "
                                       "Reply with the get_weather JSON arguments."))
        elif k == 1:
            out.append(("search_product", f"Find {rng.choice(['蓝牙耳机', 'wool coat', '咖啡豆'])} under {rng.randint(50, 900)} yuan. "
                                          "Reply with the search_product JSON arguments."))
        else:
            out.append(("user_query", f"Write the XML request to query user {rng.randint(1000, 99999)}: "
                                      "<request><user_id>…</user_id><action>query</action></request>"))
    return out


def grammars(llm, eager: bool = True) -> dict:
    """The three grammars; ``eager``: every mask computed now, as the build-time artifacts of
    the shipped grammars hold them (``make artifacts``); else lazily, on first visits during
    the timed generations."""
    from decoding.frontends.xml.grammar import grammar_from_spec

    compiler = Compiler(llm, eager=eager)
    gs = {name: compiler.compile_json_schema(json.loads((ROOT / "grammars" / f"{name}.json").read_text()))
          for name in ("get_weather", "search_product")}
    specs = json.loads((ROOT / "grammars" / "xml_grammars.json").read_text())
    spec = specs["user_query"] if isinstance(specs, dict) and "user_query" in specs else \
        next(s for s in specs if s.get("name") == "user_query")
    gs["user_query"] = compiler.compile_ir(grammar_from_spec(spec, ROOT / "grammars"))
    return gs


def run_llama(llm, prompt: str, max_tokens: int, seed: int, proc=None) -> tuple[int, float]:
    lp = LogitsProcessorList([proc]) if proc is not None else None
    stream = llm.create_chat_completion(messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                        temperature=0.7, seed=seed, stream=True, logits_processor=lp)
    n0, t_first = 0, None
    for chunk in stream:
        if t_first is None and chunk["choices"][0]["delta"].get("content"):
            t_first = time.perf_counter()
            n0 = llm.n_tokens  # tokens in the context when the first token was streamed
    t_end = time.perf_counter()
    if proc is not None:
        proc.raise_if_failed()
    # tokens evaluated after the first one: the context's growth, not the number of chunks
    # (llama-cpp-python holds back a chunk while it ends inside a UTF-8 character, e.g. the
    # CJK city names of the prompts, which made constrained outputs look ~5% slower)
    return (max(llm.n_tokens - n0, 0) if t_first else 0), (t_end - t_first) if t_first else 0.0


class _Noop:
    """A logits processor that changes nothing."""

    def __call__(self, input_ids, scores):  # type: ignore[no-untyped-def]
        return scores

    def raise_if_failed(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--noop", action="store_true",
                    help="also time a no-op logits processor (llama-cpp-python's own cost of having one)")
    ap.add_argument("--lazy", action="store_true",
                    help="compute masks on first visit during the timed runs (default: precomputed, as artifacts)")
    args = ap.parse_args()
    llm = load_model("smollm2", n_ctx=1024)
    gs = grammars(llm, eager=not args.lazy)
    if not args.lazy:
        for cg in gs.values():  # the budget tables too (artifacts store them)
            cg.completion_cost(0)
    modes = ("free",) + (("noop-processor",) if args.noop else ()) + ("processor", "driver-free", "fast-fwd")
    tot = {m: [0, 0.0] for m in modes}
    forced = 0
    for i, (name, prompt) in enumerate(tasks(args.prompts)):
        cg = gs[name]
        for mode in tot:
            if mode == "free":
                n, dt = run_llama(llm, prompt, args.max_tokens, i)
            elif mode == "noop-processor":
                n, dt = run_llama(llm, prompt, args.max_tokens, i, _Noop())
            elif mode == "processor":
                n, dt = run_llama(llm, prompt, args.max_tokens, i, GrammarLogitsProcessor(cg, max_tokens=args.max_tokens))
            else:
                g = generate_fast(llm, cg if mode == "fast-fwd" else None, messages=[{"role": "user", "content": prompt}],
                                  max_tokens=args.max_tokens, seed=i)
                n, dt = len(g.tokens), g.seconds
                if mode == "fast-fwd":
                    forced += g.n_forced
                    assert g.complete, g
            tot[mode][0] += n
            tot[mode][1] += dt
    base = tot["free"][0] / tot["free"][1]
    print(f"SmolLM2-135M-Instruct, {args.prompts} prompts (get_weather, search_product, user_query XML), "
          f"max_tokens={args.max_tokens}, n_threads={llm.context_params.n_threads}, masks "
          f"{'lazy (first visits timed)' if args.lazy else 'precomputed (as the build-time artifacts)'}")
    print("| mode | tokens | seconds | tokens/s | × free |\n|---|---|---|---|---|")
    for mode, (n, dt) in tot.items():
        tps = n / dt if dt else 0.0
        print(f"| {mode} | {n} | {dt:.2f} | {tps:.1f} | {tps / base:.2f} |")
    print(f"\nfast-forward appended {forced} of {tot['fast-fwd'][0]} constrained tokens without sampling")


if __name__ == "__main__":
    main()
