"""First-visit masks: the native state masker against the Python composition it replaced
(``DFAGrammar.native_masker = False``), in ONE process.

    PYTHONPATH=. .venv/bin/python -m evals.bench.masker_ab [--split Glaiveai2K --limit 150]

Each schema is compiled twice (one grammar per variant) and the canonical forms of its test
instances are walked on both, alternating which goes first, the way
:mod:`evals.bench.maskbench` walks (a 512 KB logits write before each step).  Times are the
thread's CPU time of ``Matcher.mask()`` (first visits of a state and memoized ones apart) and
of ``Matcher.advance()``, so other processes on the machine weigh little; the ratio native /
Python of the first-visit mean is the figure to read.
"""

from __future__ import annotations

import argparse
import gc
import time
import numpy as np

from decoding.backends.tables import prepare as prepare_tables
from decoding.compiler import Compiler
from decoding.runtime.matcher import Matcher
from decoding.vocab import Vocab
from evals.bench.maskbench import SHARED, VOCABS, prepare, select_schemas


def _walk(g, toks, logits: np.ndarray, first: list, memo: list, adv: list) -> None:
    m = Matcher(g)
    inner = getattr(g, "inner", g)  # (a counted grammar's masks are its inner DFA grammar's)
    for tok in list(toks) + [None]:
        fresh = not inner.has_mask(m.state)
        logits[:] = 1.0
        t = time.thread_time_ns()
        mk = m.mask()
        (first if fresh else memo).append(time.thread_time_ns() - t)
        if tok is None or not (int(mk[tok >> 5]) >> (tok & 31)) & 1:
            return
        t = time.thread_time_ns()
        m.advance(tok)
        adv.append(time.thread_time_ns() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="Glaiveai2K")
    ap.add_argument("--limit", type=int, default=150)
    ap.add_argument("--vocab", default="llama-bpe")
    a = ap.parse_args()
    vocab = Vocab.from_gguf(str(SHARED / "vocab" / VOCABS[a.vocab]))
    compiler = Compiler(vocab, cache=False)
    prepare_tables(vocab)
    cases = prepare(select_schemas(SHARED / "jsonschemabench" / a.split, a.limit), vocab)
    logits = np.zeros(vocab.n_tokens, dtype=np.float32)
    rec = {v: ([], [], []) for v in (True, False)}
    gc.disable()
    for i, case in enumerate(cases):
        try:
            gs = {v: compiler.compile_json_schema(case["schema"]) for v in (True, False)}
        except Exception:  # noqa: BLE001 - a schema that does not compile is not walked
            continue
        if not all(hasattr(getattr(g, "inner", g), "native_masker") for g in gs.values()):
            continue  # the DFA back-end's masks only (and the counted one's, through its inner DFA)
        getattr(gs[False], "inner", gs[False]).native_masker = False
        for _valid, forms in case["tests"]:
            for _kind, _b, toks in forms:
                for v in ((True, False) if i % 2 else (False, True)):
                    _walk(gs[v], toks, logits, *rec[v])
    gc.enable()
    print(f"{a.split} {a.limit}, vocabulary {a.vocab}: first-visit masks, native masker vs Python composition "
          "(thread CPU time, µs)")
    for v, name in ((True, "native"), (False, "python")):
        f, mm, ad = (np.asarray(x, dtype=np.float64) / 1e3 for x in rec[v])
        print(f"  {name:7s} first {len(f)} mean {f.mean():.1f} p50 {np.median(f):.1f} p99 {np.percentile(f, 99):.1f}"
              f" | memoized mean {mm.mean():.2f} | advance mean {ad.mean():.2f}")
    ratio = np.mean(rec[True][0]) / np.mean(rec[False][0])
    print(f"  first-visit mean native / python: {ratio:.3f}")


if __name__ == "__main__":
    main()
