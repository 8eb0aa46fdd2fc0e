"""CLI: ``python -m evals.valuecopy run [...]`` and ``python -m evals.valuecopy summary DIR...``."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from evals.valuecopy.tasks import DEFAULT_N

OUT = Path(__file__).resolve().parents[1] / "results" / "valuecopy"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.valuecopy")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one variant, write evals/results/valuecopy/<name>/")
    r.add_argument("--models", default="smollm2,gemma3")
    r.add_argument("--modes", default="free,automaton,fastforward", help="from free,automaton,copy,fastforward,gbnf")
    r.add_argument("--shots", default="0,1")
    r.add_argument("--n", type=int, default=DEFAULT_N, help=f"tasks (default {DEFAULT_N})")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--whitespace", default="natural", choices=("natural", "compact"))
    r.add_argument("--key-order", default="schema", choices=("schema", "reversed"))
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--samples", type=int, default=1, help="seeds per task when --temperature > 0")
    r.add_argument("--max-tokens", type=int, default=64)
    r.add_argument("--no-lead-in", action="store_true",
                   help="no boundary healing (the mask starts right after the prompt, as before issue 18)")
    r.add_argument("--name", required=True, help="output directory name under evals/results/valuecopy/")
    s = sub.add_parser("summary", help="one results.md (+ chart of the first) from several run directories")
    s.add_argument("dirs", nargs="+")
    s.add_argument("--out", default=str(OUT))
    m = sub.add_parser("merge", help="one run from labels of several runs of the same tasks (e.g. free from one "
                                     "run, a constrained mode from a later one)")
    m.add_argument("name", help="output directory name under evals/results/valuecopy/")
    m.add_argument("parts", nargs="+", help="DIR:LABEL, e.g. evals/results/valuecopy/gemma3-1shot:free+1shot")
    h = sub.add_parser("hypotheses", help="the issue-18 hypothesis table from the standard run directories")
    h.add_argument("--root", default=str(OUT))
    a = ap.parse_args(argv)
    if a.cmd == "merge":
        from evals.valuecopy.run import merge

        res = merge([tuple(x.rsplit(":", 1)) for x in a.parts], OUT / a.name,
                    "python -m evals.valuecopy " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:])))
        for model, per in res["paired"].items():
            for lab, p in per.items():
                print(f"paired {model} {lab}: call diff {p['diff']:+.3f} [{p['lo']:+.3f}, {p['hi']:+.3f}] "
                      f"p={p['mcnemar_p']:.3g}; field diff {p['field_diff']:+.3f}")
        return 0
    if a.cmd == "hypotheses":
        from evals.valuecopy.hypotheses import report

        text = report(Path(a.root))
        (Path(a.root) / "hypotheses.md").write_text(text, encoding="utf-8")
        print(text)
        return 0
    if a.cmd == "summary":
        from evals.valuecopy.report import chart, markdown

        results = [json.loads((Path(d) / "results.json").read_text(encoding="utf-8")) for d in a.dirs]
        out = Path(a.out)
        body = "".join(f"- `{r['meta']['command']}` ({r['meta']['elapsed_s'] / 60:.1f} min)\n" for r in results)
        (out / "results.md").write_text("# Value-copy benchmark\n\nCommands:\n\n" + body + "\n" + markdown(results),
                                        encoding="utf-8")
        chart(results[0], out / "valuecopy.png")
        print(f"wrote {out / 'results.md'} and {out / 'valuecopy.png'}")
        return 0
    from evals.valuecopy.run import run

    cmd = "python -m evals.valuecopy " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))
    res = run(models=a.models.split(","), modes=a.modes.split(","), shots=tuple(int(x) for x in a.shots.split(",")),
              n=a.n, seed=a.seed, whitespace=a.whitespace, key_order=a.key_order, temperature=a.temperature,
              samples=a.samples, max_tokens=a.max_tokens, out_dir=OUT / a.name, command=cmd,
              lead_in=not a.no_lead_in)
    for model, per in res["cells"].items():
        for lab, cell in per.items():
            c = cell["all"]
            print(f"{model:8s} {lab:16s} field={c['field_micro']['rate']:.3f} call={c['fields']['rate']:.3f} "
                  f"valid={c['valid']['rate']:.2f}")
    for model, per in res["paired"].items():
        for lab, p in per.items():
            print(f"paired {model} {lab}: call diff {p['diff']:+.3f} [{p['lo']:+.3f}, {p['hi']:+.3f}] "
                  f"p={p['mcnemar_p']:.3g}; field diff {p['field_diff']:+.3f} [{p['field_lo']:+.3f}, {p['field_hi']:+.3f}]")
    print(f"wrote {OUT / a.name} in {res['meta']['elapsed_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
