"""The issue-18 hypothesis table, computed from the standard value-copy run directories.

Runs (names under ``evals/results/valuecopy/``; commands in docs/evals.md):
``<model>-1shot`` (the full runs: natural whitespace, schema key order, greedy, one shot),
``h-compact``, ``h-fastforward``, ``h-reversed``, ``h-sampling`` (SmolLM2, first 25 tasks,
one variable changed each), ``h-0shot-<model>``, and ``<model>-1shot[-leadin]-copy`` (the
copy bias, :mod:`decoding.runtime.copy_bias`).  Every comparison is paired on the
same tasks (:func:`evals.valuecopy.analyze.across`); a missing run is reported as missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from decoding.guard import extract_json

from evals.harness.families import _json_fields
from evals.valuecopy.analyze import across, boundary, load, spelling

__all__ = ["report", "COMPARISONS"]

# (hypothesis, run A, label A, run B, label B): diff = A - B on the tasks both ran
COMPARISONS = [
    ("whitespace: natural vs compact (constrained)", "smollm2-1shot", "automaton+1shot", "h-compact", "automaton+1shot"),
    ("whitespace: natural vs compact (free)", "smollm2-1shot", "free+1shot", "h-compact", "free+1shot"),
    ("key order: schema vs reversed (constrained)", "smollm2-1shot", "automaton+1shot", "h-reversed", "automaton+1shot"),
    ("fast-forward: model's own split (automaton) vs canonical (fastforward)", "smollm2-1shot", "automaton+1shot",
     "h-fastforward", "fastforward+1shot"),
    ("greedy vs sampling T=0.7 (constrained)", "smollm2-1shot", "automaton+1shot", "h-sampling", "automaton+1shot"),
    ("constraint at 0 shots: automaton vs free (smollm2)", "h-0shot-smollm2", "automaton", "h-0shot-smollm2", "free"),
    ("constraint at 0 shots: automaton vs free (gemma3)", "h-0shot-gemma3", "automaton", "h-0shot-gemma3", "free"),
    ("constraint at 1 shot: automaton vs free (smollm2)", "smollm2-1shot", "automaton+1shot", "smollm2-1shot", "free+1shot"),
    ("constraint at 1 shot: automaton vs free (gemma3)", "gemma3-1shot", "automaton+1shot", "gemma3-1shot", "free+1shot"),
    ("boundary healing: lead-in vs none (gemma3, constrained)", "gemma3-1shot-leadin", "automaton+1shot",
     "gemma3-1shot", "automaton+1shot"),
    ("constraint at 1 shot with boundary healing: automaton vs free (gemma3)", "gemma3-1shot-leadin",
     "automaton+1shot", "gemma3-1shot", "free+1shot"),
    ("copy bias: copy vs automaton (smollm2)", "smollm2-1shot-copy", "copy+1shot", "smollm2-1shot", "automaton+1shot"),
    ("copy bias: copy vs automaton (gemma3, boundary healing in both)", "gemma3-1shot-leadin-copy", "copy+1shot",
     "gemma3-1shot-leadin", "automaton+1shot"),
    ("copy bias: copy vs free (smollm2)", "smollm2-1shot-copy", "copy+1shot", "smollm2-1shot", "free+1shot"),
    ("copy bias: copy vs free (gemma3)", "gemma3-1shot-leadin-copy", "copy+1shot", "gemma3-1shot", "free+1shot"),
]


def _fields(r: dict) -> dict | None:
    frag = extract_json(r["text"])
    if frag is None or not frag.complete:
        return None
    try:
        v = json.loads(frag.text)
    except json.JSONDecodeError:
        return None
    return _json_fields(v) if isinstance(v, dict) else None


def report(root: Path) -> str:
    runs: dict[str, list[dict]] = {}
    for d in root.iterdir():
        if (d / "records.jsonl").is_file():
            runs[d.name] = load(d)
    merged = {n for n in runs if "parts" in json.loads((root / n / "results.json").read_text(encoding="utf-8"))["meta"]}
    L = ["| hypothesis | n | A: per-call / per-field | B: per-call / per-field | per-call diff A−B [95% CI] "
         "| McNemar p | per-field diff [95% CI] |", "|---|---|---|---|---|---|---|"]
    for name, ra, la, rb, lb in COMPARISONS:
        if ra not in runs or rb not in runs:
            L.append(f"| {name} | – | run {ra if ra not in runs else rb} missing | | | | |")
            continue
        model = "gemma3" if "gemma3" in ra else "smollm2"
        p = across(runs[ra], la, runs[rb], lb, model)
        if not p["n"]:
            L.append(f"| {name} | 0 | no paired tasks | | | | |")
            continue
        L.append(f"| {name} | {p['n']} | {100 * p['exact_constrained']:.0f}% / {100 * p['field_constrained']:.0f}% "
                 f"| {100 * p['exact_free']:.0f}% / {100 * p['field_free']:.0f}% | {100 * p['diff']:+.0f} "
                 f"[{100 * p['lo']:+.0f}, {100 * p['hi']:+.0f}] | {p['mcnemar_p']:.3g} | {100 * p['field_diff']:+.0f} "
                 f"[{100 * p['field_lo']:+.0f}, {100 * p['field_hi']:+.0f}] |")
    L += ["", "Where the unconstrained model starts its answer (token-healing check; the grammar starts at `{`):", "",
          "| run | label | at `{` | whitespace then `{` | code fence | other |", "|---|---|---|---|---|---|"]
    for rn in sorted(set(runs) - merged):
        for lab in sorted({r["label"] for r in runs[rn] if r["mode"] == "free"}):
            c = boundary([r for r in runs[rn] if r["label"] == lab])
            L.append(f"| {rn} | {lab} | {c['at {']} | {c['whitespace then {']} | {c['code fence']} | {c['other']} |")
    L += ["", "Wrong fields: a different spelling of the right value (case, spaces, `-/._`) or another value:", "",
          "| run | label | right | spelling | other value | missing | unparsed calls |", "|---|---|---|---|---|---|---|"]
    for rn in sorted(set(runs) - merged):
        for lab in sorted({r["label"] for r in runs[rn]}):
            c = spelling([r for r in runs[rn] if r["label"] == lab], _fields)
            L.append(f"| {rn} | {lab} | {c['right']} | {c['spelling']} | {c['other value']} | {c['missing']} "
                     f"| {c['unparsed call']} |")
    return "\n".join(L) + "\n"
