"""Tables (Markdown) and the chart of one or more value-copy runs."""

from __future__ import annotations

from pathlib import Path

__all__ = ["markdown", "chart", "variant_name"]


def variant_name(meta: dict) -> str:
    t = meta["temperature"]
    v = (f"{meta['whitespace']} ws, {meta['key_order']} key order, "
         + ("greedy" if not t else f"T={t} x{meta['samples']} seeds"))
    if "parts" in meta:  # a merged run: say which parts had boundary healing
        healed = [f"{Path(p['dir']).name}:{p['label']}" for p in meta["parts"] if p["lead_in"]]
        return v + (f"; boundary healing in {', '.join(healed)}" if healed else "; no boundary healing")
    return v + ("; boundary healing" if meta.get("lead_in") else "; no boundary healing")


def _pct(c: dict) -> str:
    return "–" if c["rate"] is None else f"{100 * c['rate']:.1f}% [{100 * c['lo']:.0f}–{100 * c['hi']:.0f}]"


def markdown(results: list[dict]) -> str:
    L = ["| model | variant | label | n calls | per-field exact | per-call exact | valid | truncated |",
         "|---|---|---|---|---|---|---|---|"]
    for res in results:
        v = variant_name(res["meta"])
        for model, per in res["cells"].items():
            for lab, cell in per.items():
                a = cell["all"]
                L.append(f"| {model} | {v} | {lab} | {a['n']} | {_pct(a['field_micro'])} | {_pct(a['fields'])} | "
                         f"{_pct(a['valid'])} | {_pct(a['truncated'])} |")
    L += ["", "Paired, constrained − free on the same prompts (per-call exact; 95% bootstrap CI over tasks; "
          "b/c = right only constrained / only free; exact McNemar p):", "",
          "| model | variant | label | n | per-call diff [CI] | b / c | McNemar p | per-field diff [CI] |",
          "|---|---|---|---|---|---|---|---|"]
    for res in results:
        v = variant_name(res["meta"])
        for model, per in res.get("paired", {}).items():
            for lab, p in per.items():
                L.append(f"| {model} | {v} | {lab} | {p['n']} | {100 * p['diff']:+.1f} [{100 * p['lo']:+.1f}, "
                         f"{100 * p['hi']:+.1f}] | {p['only_constrained']} / {p['only_free']} | {p['mcnemar_p']:.3g} "
                         f"| {100 * p['field_diff']:+.1f} [{100 * p['field_lo']:+.1f}, {100 * p['field_hi']:+.1f}] |")
    for res in results:
        v = variant_name(res["meta"])
        tools = res["meta"]["tools"]
        L += ["", f"Per-field exact by tool ({v}):", "", "| model | label | " + " | ".join(tools) + " |",
              "|---|---|" + "---|" * len(tools)]
        for model, per in res["cells"].items():
            for lab, cell in per.items():
                bf = cell["by_family"]
                L.append(f"| {model} | {lab} | " + " | ".join(
                    f"{100 * bf[t]['field_micro']['rate']:.0f}%" if t in bf else "–" for t in tools) + " |")
    return "\n".join(L) + "\n"


def chart(res: dict, path: Path) -> None:
    """Per-field and per-call exact match by label, one panel per model (Wilson 95% CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    models = list(res["cells"])
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models):
        per = res["cells"][model]
        labs = list(per)
        x = np.arange(len(labs))
        for j, (key, name) in enumerate((("field_micro", "per-field exact"), ("fields", "per-call exact"))):
            r = np.array([per[lab]["all"][key]["rate"] or 0 for lab in labs]) * 100
            lo = np.clip(r - np.array([per[lab]["all"][key]["lo"] for lab in labs]) * 100, 0, None)
            hi = np.clip(np.array([per[lab]["all"][key]["hi"] for lab in labs]) * 100 - r, 0, None)
            ax.bar(x + (j - 0.5) * 0.4, r, 0.4, yerr=[lo, hi], capsize=2, label=name)
        ax.set_xticks(x, labs, rotation=30, ha="right")
        ax.set_ylim(0, 105)
        ax.set_ylabel("% exact (Wilson 95% CI)")
        ax.set_title(f"value copy, {model}: {res['meta']['n_tasks']} tasks, one shot, greedy", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
