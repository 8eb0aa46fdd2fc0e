"""``python -m evals.fuzz --door {schema,dtd,gbnf,artifact,guard,all} --minutes M [--seed S] [--out DIR]``

Runs the campaign (see :mod:`evals.fuzz.campaign`) door after door, prints the table of
counts, and writes reproducers, ``summary.json``, ``findings.md`` and ``table.md`` under
``--out`` (default ``evals/results/fuzz/``).  ``--replay FILE`` re-runs one reproducer.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from evals.fuzz.campaign import format_table, replay, run_door, write_findings
from evals.fuzz.targets import DOORS
from evals.fuzz.worker import DEFAULT_MEMORY, DEFAULT_TIMEOUT

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.fuzz", description=__doc__.split("\n\n")[1])
    ap.add_argument("--door", choices=[*DOORS, "all"], default="all")
    ap.add_argument("--minutes", type=float, default=1.0, help="campaign time per door (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "evals" / "results" / "fuzz")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per input (default 10)")
    ap.add_argument("--memory-gb", type=float, default=DEFAULT_MEMORY / 1024 ** 3, help="address-space cap (5)")
    ap.add_argument("--shrink-seconds", type=float, default=90.0, help="shrinking time per door (default 90)")
    ap.add_argument("--replay", metavar="FILE", help="re-run one reproducer and print its outcome")
    a = ap.parse_args(argv)
    memory = int(a.memory_gb * 1024 ** 3)
    if a.replay:
        print(json.dumps(replay(a.replay, timeout=a.timeout, memory=memory), indent=1))
        return 0
    doors = list(DOORS) if a.door == "all" else [a.door]
    a.out.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary_path = a.out / "summary.json"
    try:        # doors run before (e.g. one door at a time) keep their rows
        previous = {r["door"]: r for r in json.loads(summary_path.read_text(encoding="utf-8"))["results"]}
    except (OSError, ValueError, KeyError):
        previous = {}
    cmd = "python -m evals.fuzz " + " ".join(argv if argv is not None else sys.argv[1:])
    results = []
    for door in doors:
        print(f"== {door}: {a.minutes:g} min", flush=True)
        r = run_door(door, a.minutes, seed=a.seed, out=a.out, timeout=a.timeout, memory=memory,
                     shrink_seconds=a.shrink_seconds)
        r.update(command=cmd, started=started, seed=a.seed)
        results.append(r)
        previous[door] = r
        print(format_table([r]), flush=True)
        rows = [previous[d] for d in DOORS if d in previous]
        summary_path.write_text(json.dumps({"results": rows}, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
        (a.out / "table.md").write_text(
            "\n".join(f"- {r['door']}: `{r['command']}` ({r['started']}, seed {r['seed']})" for r in rows)
            + f"\n\n{a.timeout:g} s and {a.memory_gb:g} GB per input\n\n{format_table(rows)}\n", encoding="utf-8")
        write_findings(rows, a.out / "findings.md")
    print()
    print(format_table(results))
    bad = sum(r["counts"].get(k, 0) for r in results for k in ("crash", "hang", "unlocated", "invalid"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
