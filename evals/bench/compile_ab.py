"""End-to-end compile time A/B (issue 14): ``Compiler(vocab, cache=False).compile_json_schema(schema)``
as :mod:`evals.bench.maskbench` times it (schema -> compiled grammar ready for the first mask,
back-end "auto"), the working tree against a baseline commit, in ONE process, interleaved.

    PYTHONPATH=. .venv/bin/python -m evals.bench.compile_ab --baseline COMMIT
        [--split Glaiveai2K --limit 150] [--repeat 3] [--paths decoding/compiler.py ...] [--check]

The baseline is a copy of this working tree's ``decoding`` package (its native module included)
in which the files under ``--paths`` (default: the compile pipeline outside the back-ends:
``decoding/compiler.py``, ``decoding/ir``, ``decoding/frontends``, ``decoding/backends/select.py``)
are those of ``COMMIT``, imported as ``decoding_base`` (its imports of ``decoding`` renamed).
So what differs between the two is only those files; the rest (back-ends, native code, being
edited by others) is the same in both.  Schemas are :func:`evals.bench.maskbench.select_schemas`
of the split (evenly spaced); per schema the time is the best of ``--repeat`` runs, alternating
which variant goes first.  Prints p50/p90/p99 per variant and the ratios new/base.
``--check`` compares every schema's outcome instead (exception type and message, or the
back-end, ``grammar_key``, ``meta`` and the states' count); exit status 1 if any differs.
``--check --frontend`` compares the front-end's alone (``compile_schema``: the canonical IR
text with what was dropped and ignored, or the exception's type, pointer, keyword, limit and
message), fast enough for whole splits (``--limit -1``: every schema).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "corpora"
VOCAB = SHARED / "vocab" / "ggml-vocab-llama-bpe.gguf"
DEFAULT_PATHS = ("decoding/compiler.py", "decoding/ir", "decoding/frontends", "decoding/backends/select.py")
BASE = "decoding_base"


def _rename(src: str) -> str:
    """``src`` with its imports of (and dotted names in) ``decoding`` renamed to :data:`BASE`."""
    return re.sub(r"(?<![\w.])decoding(?=[. ])", BASE, src)


def load_baseline(commit: str, paths: tuple[str, ...]) -> Any:
    """The ``decoding`` package of this working tree with ``paths`` at ``commit``, as :data:`BASE`."""
    tmp = Path(tempfile.mkdtemp(prefix="compile_ab_"))
    pkg = tmp / BASE
    shutil.copytree(ROOT / "decoding", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for p in paths:
        rel = Path(p).relative_to("decoding")
        target = pkg / rel
        listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, "--", p], cwd=ROOT,
                                check=True, capture_output=True, text=True).stdout.split()
        if target.is_dir():  # files of the working tree that the commit does not have go
            for f in target.rglob("*.py"):
                if str(Path("decoding") / f.relative_to(pkg)) not in listed:
                    f.unlink()
        elif target.exists() and p not in listed:
            target.unlink()
        for name in listed:
            out = pkg / Path(name).relative_to("decoding")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(subprocess.run(["git", "show", f"{commit}:{name}"], cwd=ROOT, check=True,
                                           capture_output=True).stdout)
    for f in pkg.rglob("*.py"):
        f.write_text(_rename(f.read_text()))
    sys.path.insert(0, str(tmp))
    return importlib.import_module(BASE)


def schemas(split: str, limit: int) -> list[tuple[str, Any]]:
    from evals.bench.maskbench import select_schemas

    files = select_schemas(SHARED / "jsonschemabench" / split, limit)
    return [(f.name, json.loads(f.read_text())["schema"]) for f in files]


def timed(fn: Callable, schema: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    try:
        out = fn(schema)
    except Exception as e:  # failing schemas are timed too
        out = e
    return time.perf_counter() - t0, out


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def outcome(out: Any) -> tuple:
    if isinstance(out, Exception):
        return ("error", type(out).__name__, getattr(out, "pointer", None), getattr(out, "limit", None), str(out))
    st = out.stats()
    return ("ok", out.backend, out.grammar_key, json.dumps(out.meta, sort_keys=True), st.get("states"))


def frontend_outcome(compile_schema: Callable, canonical_ir_text: Callable, schema: Any) -> tuple:
    _, out = timed(compile_schema, schema)
    if isinstance(out, Exception):
        return ("error", type(out).__name__, getattr(out, "pointer", None), getattr(out, "keyword", None),
                getattr(out, "limit", None), str(out))
    return ("ok", canonical_ir_text(out.grammar), out.dropped, out.ignored)


def check_frontend(a: argparse.Namespace) -> int:
    """Count (and print) the schemas whose front-end outcome differs."""
    from decoding.frontends.jsonschema import compile_schema as new_cs
    from decoding.ir.key import canonical_ir_text as new_text
    base_cs = importlib.import_module(BASE + ".frontends.jsonschema").compile_schema
    base_text = importlib.import_module(BASE + ".ir.key").canonical_ir_text
    bad = 0
    for split in a.split or ["Glaiveai2K", "Kubernetes"]:
        limit = a.limit or (150 if split == "Glaiveai2K" else 60)
        items = schemas(split, None if limit < 0 else limit)
        n = 0
        for name, s in items:
            x, y = frontend_outcome(new_cs, new_text, s), frontend_outcome(base_cs, base_text, s)
            if x != y:
                n += 1
                print(f"  DIFFERS {split}/{name}: new {str(x)[:300]} / base {str(y)[:300]}")
        print(f"{split}: {len(items)} schemas (front-end), {n} outcomes differ", flush=True)
        bad += n
    return bad


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--split", action="append", help="repeatable; default Glaiveai2K and Kubernetes")
    ap.add_argument("--limit", type=int, default=0, help="schemas per split (default 150 Glaiveai2K, 60 others)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--paths", nargs="*", default=list(DEFAULT_PATHS))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--frontend", action="store_true", help="with --check: the front-end's outcome only")
    a = ap.parse_args(argv)
    base = load_baseline(a.baseline, tuple(a.paths))
    import decoding.compiler as new_compiler
    import decoding.vocab as new_vocab
    base_compiler = importlib.import_module(BASE + ".compiler")
    base_vocab = importlib.import_module(BASE + ".vocab")
    del base
    if a.check and a.frontend:
        sys.exit(1 if check_frontend(a) else 0)
    fns = {"new": new_compiler.Compiler(new_vocab.Vocab.from_gguf(str(VOCAB)), cache=False).compile_json_schema,
           "base": base_compiler.Compiler(base_vocab.Vocab.from_gguf(str(VOCAB)), cache=False).compile_json_schema}
    warm = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^[\\w\\d\\s]+$"},
                                             "b": {"type": "string", "format": "date-time"}}}
    for fn in fns.values():
        timed(fn, warm)
    bad = 0
    for split in a.split or ["Glaiveai2K", "Kubernetes"]:
        items = schemas(split, a.limit or (150 if split == "Glaiveai2K" else 60))
        if a.check:
            n = 0
            for name, s in items:
                x, y = outcome(timed(fns["new"], s)[1]), outcome(timed(fns["base"], s)[1])
                if x != y:
                    n += 1
                    print(f"  DIFFERS {split}/{name}: new {str(x)[:300]} / base {str(y)[:300]}")
            print(f"{split}: {len(items)} schemas, {n} outcomes differ")
            bad += n
            continue
        for _, s in items[:5]:
            for fn in fns.values():
                timed(fn, s)
        best: dict[str, list[float]] = {k: [] for k in fns}
        order = list(fns)
        for _, s in items:
            t = {k: float("inf") for k in fns}
            for r in range(a.repeat):
                for k in (order if r % 2 == 0 else order[::-1]):
                    gc.collect()
                    dt, _ = timed(fns[k], s)
                    t[k] = min(t[k], dt)
            for k in fns:
                best[k].append(t[k])
        print(f"{split}: {len(items)} schemas, best of {a.repeat}, interleaved")
        for k in fns:
            print(f"  {k:5s} p50 {pct(best[k], .5) * 1e3:8.2f} ms  p90 {pct(best[k], .9) * 1e3:8.2f} ms  "
                  f"p99 {pct(best[k], .99) * 1e3:8.2f} ms  total {sum(best[k]):7.3f} s")
        r = {q: pct(best["new"], q) / pct(best["base"], q) for q in (.5, .9, .99)}
        per = sorted(n / b for n, b in zip(best["new"], best["base"]))
        print(f"  new/base: p50 {r[.5]:.3f}  p90 {r[.9]:.3f}  p99 {r[.99]:.3f}  "
              f"total {sum(best['new']) / sum(best['base']):.3f}  median per-schema {per[len(per) // 2]:.3f}")
    if a.check:
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
