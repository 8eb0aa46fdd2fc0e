"""Render a results dict as Markdown (results.md) and PNG charts (rates.png, speed.png)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_report", "markdown"]

_RATES = (("closure", "closure"), ("well_formed", "well-formed"), ("valid", "valid"),
          ("fields", "fields exact"), ("truncated", "truncated"))


def _pct(c: dict) -> str:
    if c["rate"] is None:
        return "–"
    return f"{100 * c['rate']:.0f}% [{100 * c['lo']:.0f}–{100 * c['hi']:.0f}]"


def _num(x, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def markdown(res: dict) -> str:
    meta = res["meta"]
    L = [f"# Eval results {meta['date']}", "",
         f"Command: `{meta['command']}`  ", f"Wall time: {meta['elapsed_s'] / 60:.1f} min "
         f"(tasks per model: {meta['n_tasks']}, i.e. {meta['per_family']} per family x {len(meta['families'])} "
         f"families, drawn from the {meta['n_generated_prompts']} generated prompts; "
         f"{meta['decoding']}; {meta['machine']})", "",
         "Rates are `rate [Wilson 95% CI]`. tok/s = completion tokens / decode time (prompt evaluation "
         "excluded); ratio = tok/s of the mode / tok/s of free mode in the same run. Mask = time inside our "
         "logits processor per token (the GBNF mode's mask runs inside llama.cpp and cannot be timed "
         "separately). TTFT = grammar compile (first request of a family only) + prompt evaluation + first "
         "token.", "", "## Modes", ""]
    for m, s in meta["mode_status"].items():
        L.append(f"- `{m}`: {s}")
    L += ["", "## All tasks", "",
          "| model | mode | n | " + " | ".join(h for _, h in _RATES) + " | field micro | tok/s | ratio vs free "
          "| mask µs/tok | TTFT mean s | TTFT max s |",
          "|---|---|---|" + "---|" * (len(_RATES) + 7)]
    for model, per in res["cells"].items():
        for mode, cell in per.items():
            a = cell["all"]
            ratio = res["speed_ratio_vs_free"].get(model, {}).get(mode)
            L.append(f"| {model} | {mode} | {a['n']} | " + " | ".join(_pct(a[k]) for k, _ in _RATES)
                     + f" | {_pct(a['field_micro'])} | {_num(a['tokens_per_s'], '.1f')} | "
                     f"{_num(ratio, '.2f') if not mode.startswith('free') else '1.00'} | {_num(a['mask_us_per_token'], '.0f')} | "
                     f"{_num(a['ttft_s_mean'], '.2f')} | {_num(a['ttft_s_max'], '.2f')} |")
    fams = meta["families"]
    for key, title in (("valid", "Valid rate by family"), ("fields", "Field accuracy (all fields exact) by family"),
                       ("closure", "Closure rate by family")):
        L += ["", f"## {title}", "", "| model | mode | " + " | ".join(fams) + " |", "|---|---|" + "---|" * len(fams)]
        for model, per in res["cells"].items():
            for mode, cell in per.items():
                bf = cell["by_family"]
                L.append(f"| {model} | {mode} | " + " | ".join(
                    f"{100 * bf[f][key]['rate']:.0f}%" if f in bf else "–" for f in fams) + " |")
    L += ["", "## Paired: each constrained mode vs free on the same prompts", "",
          "Same task, same prompt (tool definition + chat template, 0 or 1 worked example); the constraint "
          "is the only difference. diff = constrained − free all-fields-exact, 95% bootstrap CI over tasks; "
          "b/c = tasks right only constrained / only free; p = exact McNemar test.", "",
          "| model | mode | n | exact constrained | exact free | diff [95% CI] | b / c | McNemar p "
          "| field constrained | field free | field diff [95% CI] |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, per in (res.get("paired") or {}).items():
        for lab, p in per.items():
            L.append(f"| {model} | {lab} | {p['n']} | {100 * p['exact_constrained']:.0f}% | {100 * p['exact_free']:.0f}% "
                     f"| {100 * p['diff']:+.0f} [{100 * p['lo']:+.0f}, {100 * p['hi']:+.0f}] | "
                     f"{p['only_constrained']} / {p['only_free']} | {p['mcnemar_p']:.3f} | "
                     f"{100 * p['field_constrained']:.0f}% | {100 * p['field_free']:.0f}% | "
                     f"{100 * p['field_diff']:+.0f} [{100 * p['field_lo']:+.0f}, {100 * p['field_hi']:+.0f}] |")
    L += ["", "## Field accuracy under the constraint vs free, by family", ""]
    for model, per in res["cells"].items():
        for lab in per:
            mode, _, shot = lab.partition("+")
            free = per.get("free" + (f"+{shot}" if shot else ""))
            if free is None or mode not in ("automaton", "copy", "fastforward", "gbnf"):
                continue
            for f in fams:
                a, b = free["by_family"].get(f), per[lab]["by_family"].get(f)
                if a and b and b["fields"]["rate"] is not None and a["fields"]["rate"] is not None \
                        and b["fields"]["rate"] < a["fields"]["rate"]:
                    L.append(f"- {model} {lab} {f}: {100 * b['fields']['rate']:.0f}% vs free "
                             f"{100 * a['fields']['rate']:.0f}% (loss)")
    if L[-1] == "":
        L.append("- no family has lower field accuracy under the constraint than in free mode")
    L += ["", "Charts: `rates.png` (rates by mode and model), `speed.png` (tokens/s and TTFT by mode).", ""]
    return "\n".join(L)


def _charts(res: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    models = list(res["cells"])
    keys = [k for k, _ in _RATES]
    fig, axes = plt.subplots(1, len(models), figsize=(7 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        per = res["cells"][model]
        modes = list(per)
        x = np.arange(len(keys))
        w = 0.8 / max(len(modes), 1)
        for i, mode in enumerate(modes):
            a = per[mode]["all"]
            r = np.array([a[k]["rate"] or 0 for k in keys]) * 100
            lo = np.clip(r - np.array([a[k]["lo"] for k in keys]) * 100, 0, None)
            hi = np.clip(np.array([a[k]["hi"] for k in keys]) * 100 - r, 0, None)
            ax.bar(x + i * w - 0.4 + w / 2, r, w, yerr=[lo, hi], capsize=2, label=mode)
        ax.set_xticks(x, [h for _, h in _RATES])
        ax.set_ylim(0, 105)
        ax.set_ylabel("% of tasks (Wilson 95% CI)")
        ax.set_title(f"{model}: rates by mode")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "rates.png", dpi=90)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    modes = list(dict.fromkeys(m for per in res["cells"].values() for m in per))
    x = np.arange(len(modes))
    w = 0.8 / max(len(models), 1)
    for j, model in enumerate(models):
        per = res["cells"][model]
        tps = [per[m]["all"]["tokens_per_s"] or 0 if m in per else 0 for m in modes]
        tt = [per[m]["all"]["ttft_s_mean"] or 0 if m in per else 0 for m in modes]
        axes[0][0].bar(x + j * w - 0.4 + w / 2, tps, w, label=model)
        axes[0][1].bar(x + j * w - 0.4 + w / 2, tt, w, label=model)
    axes[0][0].set_title("decode tokens/s by mode (same run)")
    axes[0][1].set_title("mean time to first token (s), incl. grammar compile")
    for ax in axes[0]:
        ax.set_xticks(x, modes, rotation=30, ha="right")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "speed.png", dpi=90)
    plt.close(fig)


def write_report(res: dict, out: Path) -> None:
    (out / "results.md").write_text(markdown(res), encoding="utf-8")
    _charts(res, out)
