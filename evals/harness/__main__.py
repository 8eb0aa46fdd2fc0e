"""CLI: ``python -m evals.harness run [--quick] [--models smollm2,gemma3] [--modes ...]``."""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import date
from pathlib import Path

from evals.harness.modes import MAIN_MODES, MODES
from evals.harness.run import run

QUICK_MODES = ("free", "automaton", "fastforward", "gbnf")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.harness")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the evals and write evals/results/<date>/")
    r.add_argument("--quick", action="store_true",
                   help="CI subset: SmolLM2, 1 task per family, modes free/automaton/fastforward/gbnf, 0 shots, "
                        "free capped at 32 tokens")
    r.add_argument("--models", default=None, help="comma-separated: smollm2,gemma3 (default: both; quick: smollm2)")
    r.add_argument("--modes", default=None, help=f"comma-separated from {','.join(MODES)} (default: all)")
    r.add_argument("--per-family", default=None,
                   help="tasks per family: N, or per model 'smollm2=8,gemma3=3' (default smollm2=8,gemma3=3; "
                        "quick 1; 30 = all 210 prompts)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--shots", default=None,
                   help="comma-separated numbers of worked examples in the prompt, e.g. 0,1 (default 0,1; quick: 0)")
    r.add_argument("--out", default=None, help="output directory (default evals/results/<date>[-quick])")
    rp = sub.add_parser("report", help="re-render results.md and the charts from a results.json")
    rp.add_argument("dir", help="a results directory (holding results.json)")
    a = ap.parse_args(argv)
    if a.cmd == "report":
        import json

        from evals.harness.report import write_report
        d = Path(a.dir)
        write_report(json.loads((d / "results.json").read_text(encoding="utf-8")), d)
        print(f"wrote {d / 'results.md'}, {d / 'rates.png'}, {d / 'speed.png'}")
        return 0
    models = a.models.split(",") if a.models else (["smollm2"] if a.quick else ["smollm2", "gemma3"])
    modes = a.modes.split(",") if a.modes else list(QUICK_MODES if a.quick else MODES)
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    spec = a.per_family if a.per_family is not None else ("1" if a.quick else "smollm2=8,gemma3=3")
    try:
        if "=" in spec:
            given = {k: int(v) for k, v in (x.split("=") for x in spec.split(","))}
            per = {m: given.get(m, min(given.values())) for m in models}
        else:
            per = {m: int(spec) for m in models}
    except ValueError:
        ap.error(f"--per-family must be N or model=N,...; got {spec!r}")
    root = Path(__file__).resolve().parents[1] / "results"
    out = Path(a.out) if a.out else root / (date.today().isoformat() + ("-quick" if a.quick else ""))
    cmd = "python -m evals.harness " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))
    try:
        shots = tuple(int(x) for x in (a.shots or ("0" if a.quick else "0,1")).split(","))
    except ValueError:
        ap.error(f"--shots must be comma-separated integers; got {a.shots!r}")
    res = run(models=models, modes=modes, per_family=per, seed=a.seed, quick=a.quick,
              free_max_tokens=32 if a.quick else None, out_dir=out, command=cmd, shots=shots)
    print(f"wrote {out} in {res['meta']['elapsed_s'] / 60:.1f} min")
    for model, per_mode in res["cells"].items():
        for mode, cell in per_mode.items():
            c = cell["all"]
            print(f"{model:8s} {mode:10s} closure={c['closure']['rate']:.2f} wf={c['well_formed']['rate']:.2f} "
                  f"valid={c['valid']['rate']:.2f} fields={c['fields']['rate']:.2f} "
                  f"trunc={c['truncated']['rate']:.2f} tok/s={c['tokens_per_s'] or 0:.1f}")
    print("speed ratio vs free:", res["speed_ratio_vs_free"])
    for model, per_lab in res["paired"].items():
        for lab, p in per_lab.items():
            print(f"paired {model:8s} {lab:16s} n={p['n']} exact {p['exact_constrained']:.2f} vs free "
                  f"{p['exact_free']:.2f}: diff {p['diff']:+.2f} [{p['lo']:+.2f}, {p['hi']:+.2f}] "
                  f"McNemar p={p['mcnemar_p']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
