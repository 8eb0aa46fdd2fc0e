"""Run the harness: models x modes x tasks -> records -> aggregated cells -> report.

Every mode gets the same prompt (``Runner.messages``), once with no example and once
with one worked example (``shots``): a record's ``label`` is the mode, plus ``+1shot``
for the one-shot prompt.  Paired comparisons (``evals.harness.paired``) match each
constrained label with ``free`` of the same shots on the same tasks.

Order of work (it keeps prompt work equal between the modes that are compared): per
model, family and shots, for each task ``fastforward``, ``free``, ``automaton``, ``gbnf``
and the peers back to back, so the tokens/s ratios compare generations made within
seconds of each other.  A
peer runs only where it can (its package is installed, it can express the family); the
rest is reported in ``mode_status`` with the reason.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import Iterable

from tqdm import tqdm

from evals.harness.families import FAMILY
from evals.harness.metrics import check_output, wilson
from evals.harness.paired import paired_table
from evals.harness.modes import MAIN_MODES, MODES, PEER_MODES, Runner, family_status, peer_status
from evals.harness.tasks import FAMILIES, generate_tasks

__all__ = ["run", "aggregate", "RATE_KEYS", "label"]

RATE_KEYS = ("closure", "well_formed", "valid", "fields", "truncated")
CONSTRAINED = ("automaton", "copy", "fastforward", "gbnf", "llguidance", "outlines")


def label(mode: str, shots: int) -> str:
    """The cell name of a mode under a prompt with ``shots`` examples."""
    return mode if not shots else f"{mode}+{shots}shot"


def _rate(k: int, n: int) -> dict:
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": (k / n) if n else None, "lo": lo, "hi": hi}


def _cell(recs: list[dict]) -> dict:
    n = len(recs)
    toks = sum(r["n_tokens"] for r in recs)
    dec = sum(r["decode_s"] for r in recs)
    out = {key: _rate(sum(1 for r in recs if r[key]), n) for key in RATE_KEYS}
    fc, ft = sum(r["fields_correct"] for r in recs), sum(r["fields_total"] for r in recs)
    out["field_micro"] = _rate(fc, ft)
    out["tokens"] = toks
    out["tokens_per_s"] = toks / dec if dec > 0 else None
    masked = [r for r in recs if r["mask_s"] is not None]
    mt = sum(r["mask_calls"] for r in masked)
    out["mask_us_per_token"] = (1e6 * sum(r["mask_s"] for r in masked) / mt) if mt else None
    out["ttft_s_mean"] = statistics.fmean(r["ttft_s"] for r in recs) if recs else None
    out["ttft_s_max"] = max((r["ttft_s"] for r in recs), default=None)
    out["n"] = n
    return out


def aggregate(records: list[dict], models: Iterable[str], modes: Iterable[str],
              families: Iterable[str] = FAMILIES) -> dict:
    """Cells per model and label (``modes`` are labels: mode[+Nshot])."""
    cells: dict = {}
    for m in models:
        cells[m] = {}
        for mode in modes:
            recs = [r for r in records if r["model"] == m and r.get("label", r["mode"]) == mode]
            if not recs:
                continue
            cells[m][mode] = {"all": _cell(recs),
                              "by_family": {f: _cell([r for r in recs if r["family"] == f])
                                            for f in families if any(r["family"] == f for r in recs)}}
    ratios = {}
    for m, per in cells.items():
        ratios[m] = {}
        for lab in per:
            mode, _, shot = lab.partition("+")
            free = per.get(label("free", int(shot[:-4]) if shot else 0), {}).get("all", {}).get("tokens_per_s")
            if mode in CONSTRAINED:
                ratios[m][lab] = (per[lab]["all"]["tokens_per_s"] / free) if free else None
    return {"cells": cells, "speed_ratio_vs_free": ratios, "paired": paired_table(records)}


def run(*, models: list[str], modes: list[str], per_family: int | dict[str, int], seed: int = 0, quick: bool = False,
        free_max_tokens: int | None = None, out_dir: Path | None = None, command: str = "",
        shots: tuple[int, ...] = (0, 1)) -> dict:
    from decoding.models import load_model

    t_start = time.perf_counter()
    per = per_family if isinstance(per_family, dict) else {m: per_family for m in models}
    all_tasks = generate_tasks(seed)
    modes = [m for m in modes if m != "prompt"]  # "prompt" is now free+1shot (same prompt as every mode)
    run_modes = [m for m in modes if m in MAIN_MODES or (m in PEER_MODES and peer_status(m) == "ran")]
    status = {m: ("ran" if m in run_modes else peer_status(m)) for m in modes}
    for m in run_modes:
        skipped = {f: family_status(m, FAMILY[f]) for f in FAMILIES if family_status(m, FAMILY[f])}
        if skipped:
            ran = [f for f in FAMILIES if f not in skipped]
            status[m] = f"ran on {', '.join(ran)}; " + "; ".join(
                f"{why} ({', '.join(f for f in skipped if skipped[f] == why)})" for why in dict.fromkeys(skipped.values()))
    records: list[dict] = []
    compile_s: dict = {}
    bounds: dict = {}
    load_s: dict = {}
    peer_setup_s: dict = {}
    def tasks_for(model: str) -> list:
        return generate_tasks(seed, per[model])

    def runs(mode: str, fam_name: str) -> bool:
        return mode in run_modes and family_status(mode, FAMILY[fam_name]) is None

    total = len(shots) * sum(1 for m in models for x in tasks_for(m) for mode in run_modes if runs(mode, x.family))
    bar = tqdm(total=total, desc="eval", unit="gen", dynamic_ncols=True)
    for model in models:
        t = time.perf_counter()
        llm = load_model(model)
        load_s[model] = time.perf_counter() - t
        runner = Runner(llm, model)
        tasks = tasks_for(model)
        for fam_name in FAMILIES:
            fam = FAMILY[fam_name]
            ftasks = [x for x in tasks if x.family == fam_name]
            order = [(x, m, k) for k in shots for x in ftasks
                     for m in ("fastforward", "free", "automaton", "copy", "gbnf", "llguidance", "outlines")
                     if runs(m, fam_name)]
            for task, mode, k in order:
                bar.set_postfix_str(f"{model} {fam_name} {label(mode, k)}")
                cap = fam.max_tokens
                if free_max_tokens is not None and mode == "free":
                    cap = min(cap, free_max_tokens)
                if mode in CONSTRAINED:  # the mask bounds the length: every constrained mode gets the same cap
                    bound = runner.length_bound(fam)
                    cap = max(cap, bound + 1) if bound is not None else cap
                o = runner.run(fam, task, mode, cap, shots=k)
                c = check_output(fam, o.text, task.expected)
                records.append({
                    "model": model, "mode": mode, "shots": k, "label": label(mode, k),
                    "family": fam_name, "task": task.id, "text": o.text,
                    "expected": task.expected, "finish_reason": o.finish_reason, "n_tokens": o.n_tokens,
                    "max_tokens": cap, "truncated": o.finish_reason == "length",
                    "closure": c.closure, "well_formed": c.well_formed, "valid": c.valid,
                    "fields": c.fields_ok, "fields_correct": c.fields_correct, "fields_total": c.fields_total,
                    "errors": list(c.errors), "prep_s": o.prep_s, "prompt_s": o.prompt_s,
                    "prompt_tokens": o.prompt_tokens, "decode_s": o.decode_s, "ttft_s": o.ttft_s,
                    "mask_s": o.mask_s, "mask_calls": o.mask_calls})
                bar.update(1)
        compile_s[model] = runner.compile_s
        peer_setup_s[model] = runner.peer_setup_s
        bounds[model] = {f: runner._bound.get(f) for f in FAMILIES}
        del runner, llm
    bar.close()
    elapsed = time.perf_counter() - t_start
    labels = [label(m, k) for k in shots for m in run_modes]
    agg = aggregate(records, models, labels)
    result = {
        "meta": {"date": date.today().isoformat(), "command": command, "quick": quick, "seed": seed,
                 "per_family": per, "n_tasks": {m: len(tasks_for(m)) for m in models},
                 "n_generated_prompts": len(all_tasks), "families": list(FAMILIES),
                 "models": models, "modes": modes, "mode_status": status, "elapsed_s": elapsed,
                 "model_load_s": load_s, "grammar_compile_s": compile_s,
                 "peer_setup_s": peer_setup_s,
                 "constrained_max_tokens": bounds, "shots": list(shots),
                 "prompt": "decoding.runtime.prompting.tool_messages (tool definition + chat template), "
                           "the same for every mode; JSON in the 'natural' layout",
                 "max_tokens": {f: FAMILY[f].max_tokens for f in FAMILIES}, "free_max_tokens": free_max_tokens,
                 "decoding": "greedy (temperature 0), n_threads=1",
                 "machine": f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()}"},
        **agg,
    }
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "results.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
        with open(out_dir / "records.jsonl", "w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        from evals.harness.report import write_report
        write_report(result, out_dir)
    result["records"] = records
    return result
