"""JSON Schema front-end speed (issue 14): ``compile_schema(schema)`` alone (metaschema check,
$ref resolution, merging, canonical IR, size estimates) on JSONSchemaBench, with its own
defaults (the generation default, evals/conformance/run.py GENERATION_OPTIONS).

    PYTHONPATH=. .venv/bin/python -m evals.bench.frontend --split Kubernetes --limit 100
        [--baseline COMMIT] [--repeat 3] [--e2e] [--profile N] [--check]

Per schema the time is the best of ``--repeat`` runs; p50/p90 are over the schemas.
``--baseline COMMIT`` loads that commit's ``decoding/frontends/jsonschema`` package into this
same process (as ``decoding.frontends.jsonschema_base``, sharing every other module) and
times it interleaved with the working tree's, schema by schema and run by run (alternating
which goes first), so that machine noise hits both alike: the ratios are the figures that
matter.  ``--e2e`` also times ``decoding.backends.select.compile_grammar(g.grammar, vocab,
backend="auto")`` with the llama-bpe vocabulary and prints the front-end's share of the whole.
``--no-estimates`` adds the variant ``noest``: the working tree's front-end with its size
estimates switched off (``bounded``, ``hoist`` and ``_check_rules`` made no-ops; an
experiment, not a mode: no limit is checked and large subtrees are not hoisted, so its IR
differs), timed interleaved with ``new``: ``noest/new`` is what the estimates cost.
``--profile N`` prints cProfile's top N functions (cumulative and own time) of the working
tree's front-end over the sample instead of timing; ``--check`` (with ``--baseline``) compares
every schema's outcome (canonical IR text, or exception type, pointer, keyword and message).  The sample is every ``k``-th file of the
split (sorted by name) so that ``--limit`` spreads over the split.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpora" / "jsonschemabench"
VOCAB = ROOT.parent / "shared" / "corpora" / "vocab" / "ggml-vocab-llama-bpe.gguf"
SPLITS = ("Glaiveai2K", "Github_easy", "Kubernetes", "Snowplow")
PACKAGE = "decoding/frontends/jsonschema"
BASE_NAME = "decoding.frontends.jsonschema_base"


def sample(split: str, limit: int | None) -> list[tuple[str, Any]]:
    """(file name, schema) for ``limit`` files spread evenly over the split (all if None)."""
    files = sorted((CORPUS / split).glob("*.json"))
    if limit and limit < len(files):
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    return [(f.name, json.loads(f.read_text())["schema"]) for f in files]


def load_baseline(commit: str) -> Callable:
    """``compile_schema`` of ``commit``'s front-end package (or of the package directory
    ``commit`` names), loaded under :data:`BASE_NAME` (its own imports of the package
    renamed; everything else is this tree's)."""
    if Path(commit).is_dir():
        sources = {p.name: p.read_text() for p in Path(commit).glob("*.py")}
    else:
        names = subprocess.run(["git", "ls-tree", "--name-only", f"{commit}:{PACKAGE}"], cwd=ROOT,
                               check=True, capture_output=True, text=True).stdout.split()
        sources = {name: subprocess.run(["git", "show", f"{commit}:{PACKAGE}/{name}"], cwd=ROOT, check=True,
                                        capture_output=True, text=True).stdout
                   for name in names if name.endswith(".py")}
    tmp = Path(tempfile.mkdtemp(prefix="fe_base_")) / "jsonschema_base"
    tmp.mkdir()
    for name, src in sources.items():
        (tmp / name).write_text(src.replace("decoding.frontends.jsonschema", BASE_NAME))
    spec = importlib.util.spec_from_file_location(BASE_NAME, tmp / "__init__.py",
                                                  submodule_search_locations=[str(tmp)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[BASE_NAME] = module
    spec.loader.exec_module(module)
    return module.compile_schema


def timed(fn: Callable, schema: Any) -> tuple[float, Any]:
    """(seconds, result or the exception raised) of ``fn(schema)``."""
    t0 = time.perf_counter()
    try:
        out = fn(schema)
    except Exception as e:  # failing schemas are timed too (they fail the same way)
        out = e
    return time.perf_counter() - t0, out


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def ms(x: float) -> str:
    return f"{x * 1e3:7.2f} ms"


def bench(split: str, items: list[tuple[str, Any]], fns: dict[str, Callable], repeat: int,
          vocab: Any = None) -> None:
    """Print p50/p90 per variant (and ratios to ``base`` when present; the e2e share with a vocab)."""
    from decoding.backends.select import compile_grammar

    best: dict[str, list[float]] = {k: [] for k in fns}
    pairs: list[tuple[float, float]] = []  # (front-end, back-end) of the schemas that compile
    order = list(fns)
    for name, schema in items:
        t = {k: float("inf") for k in fns}
        result = None
        for r in range(repeat):
            for k in (order if r % 2 == 0 else order[::-1]):
                dt, out = timed(fns[k], schema)
                t[k] = min(t[k], dt)
                if k == "new":
                    result = out
        for k in fns:
            best[k].append(t[k])
        if vocab is not None and not isinstance(result, Exception):
            dt, _ = timed(lambda g: compile_grammar(g.grammar, vocab, backend="auto"), result)
            pairs.append((t["new"], dt))
    print(f"{split}: {len(items)} schemas, best of {repeat}")
    for k in fns:
        print(f"  {k:5s} front-end p50 {ms(pct(best[k], .5))}  p90 {ms(pct(best[k], .9))}  "
              f"mean {ms(statistics.fmean(best[k]))}")
    if "base" in fns:
        ratios = [n / b for n, b in zip(best["new"], best["base"])]
        print(f"  new/base: p50 {pct(best['new'], .5) / pct(best['base'], .5):.3f}  "
              f"p90 {pct(best['new'], .9) / pct(best['base'], .9):.3f}  "
              f"total {sum(best['new']) / sum(best['base']):.3f}  median per-schema {statistics.median(ratios):.3f}")
    if "noest" in fns:
        ratios = [n / b for n, b in zip(best["noest"], best["new"])]
        print(f"  noest/new: p50 {pct(best['noest'], .5) / pct(best['new'], .5):.3f}  "
              f"total {sum(best['noest']) / sum(best['new']):.3f}  median per-schema {statistics.median(ratios):.3f}"
              "  (1 - this: the share of the front-end's time its size estimates take)")
    if pairs:
        back = [b for _, b in pairs]
        share = [f / (f + b) for f, b in pairs]
        print(f"  back-end (compile_grammar auto, one run) p50 {ms(pct(back, .5))}  p90 {ms(pct(back, .9))}  "
              f"({len(pairs)} compiled)")
        print(f"  front-end share of end-to-end: median {statistics.median(share):.1%}  "
              f"of the summed time {sum(f for f, _ in pairs) / sum(f + b for f, b in pairs):.1%}")


def outcome(fn: Callable, schema: Any) -> tuple:
    """What compiling ``schema`` gives: the IR's canonical text with what was dropped and
    ignored, or the exception's type, pointer, keyword, limit and message."""
    from decoding.ir.key import canonical_ir_text

    _, out = timed(fn, schema)
    if isinstance(out, Exception):
        return ("error", type(out).__name__, getattr(out, "pointer", None), getattr(out, "keyword", None),
                getattr(out, "limit", None), str(out))
    return ("ok", canonical_ir_text(out.grammar), out.dropped, out.ignored)


def check(split: str, items: list[tuple[str, Any]], fns: dict[str, Callable]) -> int:
    """Print and count the schemas whose outcome differs between ``new`` and ``base``."""
    bad = 0
    for name, schema in items:
        a, b = outcome(fns["new"], schema), outcome(fns["base"], schema)
        if a != b:
            bad += 1
            print(f"  DIFFERS {split}/{name}: new {str(a)[:200]} / base {str(b)[:200]}")
    print(f"{split}: {len(items)} schemas, {bad} outcomes differ from the baseline")
    return bad


def profile(items: list[tuple[str, Any]], fn: Callable, top: int) -> None:
    """cProfile of ``fn`` over the sample: top functions by cumulative and by own time."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _, schema in items:
        timed(fn, schema)
    prof.disable()
    stats = pstats.Stats(prof).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def without_estimates(fn: Callable) -> Callable:
    """``fn`` (the working tree's ``compile_schema``) run with the front-end's size estimates
    switched off: ``_Compiler.bounded`` and ``_Compiler.hoist`` return their node,
    ``_check_rules`` checks nothing (restored after each call)."""
    import decoding.frontends.jsonschema.compile as cm

    def run(schema: Any) -> Any:
        saved = (cm._Compiler.bounded, cm._Compiler.hoist, cm._check_rules)
        cm._Compiler.bounded = lambda self, node, ptr, kw: node  # type: ignore[method-assign]
        cm._Compiler.hoist = lambda self, node, ptr: node  # type: ignore[method-assign]
        cm._check_rules = lambda g, c: None
        try:
            return fn(schema)
        finally:
            cm._Compiler.bounded, cm._Compiler.hoist, cm._check_rules = saved  # type: ignore[method-assign]
    return run


def warm_up(fns: dict[str, Callable]) -> None:
    """Pay the once-per-process costs before timing: imports, metaschema validators and the
    Unicode tables of the regex shorthands (``\\w``, ``\\d``, ``\\s``: about 2 s)."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[\\w\\d\\s]+$"},
                                               "b": {"type": "string", "format": "date-time"}}}
    for fn in fns.values():
        timed(fn, schema)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", action="append", choices=SPLITS, help="repeatable; default: all four")
    ap.add_argument("--limit", type=int, default=100, help="schemas per split (0: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="a commit (or a copy of the package directory) whose "
                    "front-end to time alongside")
    ap.add_argument("--e2e", action="store_true", help="also time the back-end (llama-bpe vocab)")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--no-estimates", action="store_true", help="also time the front-end without its size "
                    "estimates (variant noest): what they cost")
    ap.add_argument("--check", action="store_true", help="compare the IR / error of every schema "
                    "with the baseline's instead of timing (exit status 1 if any differs)")
    a = ap.parse_args(argv)
    from decoding.frontends.jsonschema import compile_schema

    fns: dict[str, Callable] = {"new": compile_schema}
    if a.baseline:
        fns["base"] = load_baseline(a.baseline)
    if a.no_estimates:
        fns["noest"] = without_estimates(compile_schema)
    vocab = None
    if a.e2e:
        from decoding.vocab import load_vocab
        vocab = load_vocab(str(VOCAB))
    splits = a.split or list(SPLITS)
    warm_up(fns)
    if a.profile:
        profile([x for s in splits for x in sample(s, a.limit or None)], compile_schema, a.profile)
        return
    if a.check:
        if not a.baseline:
            ap.error("--check needs --baseline")
        sys.exit(1 if sum(check(s, sample(s, a.limit or None), fns) for s in splits) else 0)
    for split in splits:
        items = sample(split, a.limit or None)
        for _, schema in items[:5]:  # warm-up: imports, metaschema validators, per-vocab tables
            for fn in fns.values():
                timed(fn, schema)
        bench(split, items, fns, a.repeat, vocab)


if __name__ == "__main__":
    main()
