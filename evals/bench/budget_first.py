"""The first budget query of a freshly compiled grammar (a benchmark, not a test).

    PYTHONPATH=. .venv/bin/python -m evals.bench.budget_first [--split Snowplow --limit 60]
        [--baseline COMMIT]

Generation with ``max_tokens`` (``budget=True``, the default of ``generate``, the processor
and the vLLM adapter) asks ``completion_cost(0)`` when its matcher is made: a grammar compiled
at run time (not loaded from an artifact, which stores its budget table) then computes the
fewest tokens to the end from every reachable state, one walk of the vocabulary per state.
That is latency before the first token.  This compiles each schema of the split
(maskbench's selection, back-end "auto"), then times that first call; prints p50, p90 and
max over the schemas with the three slowest.  ``--baseline COMMIT`` times that commit's
tree too, in a worktree with its own native build, the two alternating schema by schema
(run from the repository root).  ``BUDGET_FIRST_ROWS=1`` also prints every schema's row
(file, back-end, states, ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from decoding.backends.tables import prepare
from decoding.compiler import Compiler
from decoding.vocab import Vocab
vocab = Vocab.from_gguf(sys.argv[2])
prepare(vocab)
comp = Compiler(vocab, cache=False)
for line in sys.stdin:
    path = line.strip()
    schema = json.loads(open(path, encoding="utf-8").read())["schema"]
    try:
        cg = comp.compile_json_schema(schema)
    except Exception as e:  # noqa: BLE001 - not compiled: not timed
        print(json.dumps(None), flush=True)
        continue
    t = time.perf_counter()
    cg.completion_cost(0)
    dt = time.perf_counter() - t
    print(json.dumps([dt * 1e3, cg.stats()["backend"], cg.stats().get("states")]), flush=True)
"""


def _child(tree: Path, vocab: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(tree), str(vocab)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tree)


def _ask(p: subprocess.Popen, path: Path) -> list | None:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(f"{path}\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def _report(name: str, rows: list[tuple[float, str, int, str]]) -> None:
    xs = sorted(r[0] for r in rows)
    if not xs:
        print(f"  {name}: nothing compiled")
        return
    slow = ", ".join(f"{f} ({b}, {n} states) {t:.0f} ms" for t, b, n, f in sorted(rows)[-3:][::-1])
    print(f"  {name:5} p50 {statistics.median(xs):8.1f} ms  p90 {xs[int(0.9 * (len(xs) - 1))]:8.1f} ms  "
          f"max {xs[-1]:8.1f} ms  slowest: {slow}")
    if os.environ.get("BUDGET_FIRST_ROWS"):  # every schema (investigation)
        for t, b, n, f in sorted(rows, key=lambda r: r[3]):
            print(f"    {f} {b} {n} {t:.1f}")


def main(argv: list[str] | None = None) -> int:
    from evals.bench.maskbench import SHARED, VOCABS, select_schemas

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", action="append")
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--vocab", default="llama-bpe", choices=sorted(VOCABS))
    ap.add_argument("--baseline")
    a = ap.parse_args(argv)
    vocab = SHARED / "vocab" / VOCABS[a.vocab]
    trees = {"new": ROOT}
    wt = None
    if a.baseline:
        wt = Path(tempfile.mkdtemp(prefix="budget_base_"))
        subprocess.run(["git", "worktree", "add", "--detach", str(wt), a.baseline], cwd=ROOT, check=True,
                       capture_output=True)
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=wt, check=True,
                       capture_output=True)
        trees["base"] = wt
    try:
        kids = {k: _child(t, vocab) for k, t in trees.items()}
        for split in a.split or ["Glaiveai2K", "Github_easy", "Kubernetes", "Snowplow"]:
            rows: dict[str, list] = {k: [] for k in trees}
            for path in select_schemas(SHARED / "jsonschemabench" / split, a.limit):
                for k, p in kids.items():
                    r = _ask(p, path)
                    if r is not None:
                        rows[k].append((r[0], r[1], r[2], path.name))
            print(f"{split}: {a.limit} schemas, first completion_cost(0) after compiling ({a.vocab})")
            for k in trees:
                _report(k, rows[k])
        for p in kids.values():
            p.stdin.close()  # type: ignore[union-attr]
            p.wait()
    finally:
        if wt is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT, capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
