"""Where fast-forward's time goes (not a test): ``generate_fast`` on SmolLM2 with and without
a grammar, ``Llama.eval`` wrapped to count calls, tokens and seconds.

    PYTHONPATH=. python -m evals.bench.ff_cost [--prompts N]

Per mode: generation seconds and tokens, eval calls and tokens during generation (prompt
evals excluded), and mask seconds.  From these, what one token costs when evaluated inside
a batch (a sampled token plus its forced run) against a single decode: if batched tokens cost
nearly as much as single decodes, fast-forward saves only the sampling steps it skips.
"""

from __future__ import annotations

import argparse
import time

from decoding.models import load_model
from decoding.runtime import fastforward as ff
from evals.bench.e2e import grammars, tasks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=15)
    args = ap.parse_args()
    llm = load_model()
    gs = grammars(llm)
    calls: list[tuple[int, float]] = []
    orig = type(llm).eval

    def timed_eval(self, toks):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        orig(self, toks)
        calls.append((len(toks), time.perf_counter() - t))

    type(llm).eval = timed_eval
    single = None
    print(f"n_threads={llm.context_params.n_threads}, n_threads_batch={llm.context_params.n_threads_batch}")
    for mode in ("driver-free", "fast-fwd"):
        gen_s = mask_s = 0.0
        n_tok = n_calls = n_eval_tok = 0
        eval_s = 0.0
        for i, (name, prompt) in enumerate(tasks(args.prompts)):
            calls.clear()
            g = ff.generate_fast(llm, gs[name] if mode == "fast-fwd" else None,
                                 messages=[{"role": "user", "content": prompt}], max_tokens=64, seed=i)
            gen = calls[1:]  # (the first call is the prompt)
            gen_s += g.seconds
            mask_s += g.mask_seconds
            n_tok += g.n_tokens
            n_calls += len(gen)
            n_eval_tok += sum(n for n, _ in gen)
            eval_s += sum(s for _, s in gen)
        per_call = eval_s / max(n_calls, 1)
        print(f"{mode}: {n_tok} tokens in {gen_s:.2f} s ({n_tok / gen_s:.1f} tok/s); {n_calls} evals of "
              f"{n_eval_tok} tokens, {eval_s:.2f} s ({per_call * 1e3:.2f} ms per eval); masks {mask_s:.3f} s")
        if mode == "driver-free":
            single = per_call
        elif single is not None and n_eval_tok > n_calls:
            extra = (eval_s - n_calls * single) / (n_eval_tok - n_calls)
            print(f"  a token inside a batch costs {extra * 1e3:.2f} ms, a single decode {single * 1e3:.2f} ms "
                  f"({extra / single:.2f}x)")


if __name__ == "__main__":
    main()
