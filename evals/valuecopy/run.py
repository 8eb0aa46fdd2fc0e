"""Run the value-copy benchmark: models x labels (mode[+Nshot]) x tasks, one variant per run.

A variant fixes the decoding policy the issue's hypotheses vary: ``whitespace``
(natural/compact), ``key_order`` (schema/reversed: the schema's properties, hence the
grammar's key order, reversed), ``temperature`` with ``samples`` seeds (greedy when 0).
Every label of a run gets the same prompt per (task, shots): the constraint is the only
difference between ``free`` and a constrained mode of the same shots.

Writes ``records.jsonl``, ``results.json`` (cells as in the harness + paired statistics)
and ``results.md`` to the output directory.
"""

from __future__ import annotations

import json
import time
from datetime import date
from pathlib import Path

from tqdm import tqdm

from evals.harness.metrics import check_output
from evals.harness.modes import Runner
from evals.harness.run import aggregate, label
from evals.valuecopy.tasks import FAMILY, TOOL_NAMES, TOOLS, example, family, generate

__all__ = ["run", "variant_families", "merge"]


def variant_families(key_order: str) -> dict:
    """The tools as harness families, with the schema's key order as asked."""
    if key_order == "schema":
        return FAMILY
    if key_order != "reversed":
        raise ValueError(f"key_order must be 'schema' or 'reversed', not {key_order!r}")
    out = {}
    for n, (_, s) in TOOLS.items():
        r = dict(s, properties=dict(reversed(list(s["properties"].items()))))
        out[n] = family(n, r, tag=":reversed")
    return out


def run(*, models: list[str], modes: list[str], shots: tuple[int, ...], n: int, seed: int = 0,
        whitespace: str = "natural", key_order: str = "schema", temperature: float = 0.0, samples: int = 1,
        max_tokens: int = 64, out_dir: Path | None = None, command: str = "", lead_in: bool = True) -> dict:
    from decoding.models import load_model

    t0 = time.perf_counter()
    fams = variant_families(key_order)
    tasks = generate(seed, n)
    seeds = list(range(samples)) if temperature > 0 else [0]
    records: list[dict] = []
    bar = tqdm(total=len(models) * len(tasks) * len(modes) * len(shots) * len(seeds), desc="valuecopy",
               unit="gen", dynamic_ncols=True)
    for model in models:
        llm = load_model(model)
        runner = Runner(llm, model, examples=example)
        runner.lead_in = lead_in
        for k in shots:
            for task in tasks:
                fam = fams[task.family]
                for s in seeds:
                    for mode in modes:
                        cap = max_tokens
                        if mode in ("automaton", "copy", "fastforward", "gbnf"):
                            bound = runner.length_bound(fam)
                            cap = max(cap, bound + 1) if bound is not None else cap
                        o = runner.run(fam, task, mode, cap, shots=k, whitespace=whitespace,
                                       temperature=temperature, seed=s)
                        c = check_output(fam, o.text, task.expected)
                        records.append({
                            "model": model, "mode": mode, "shots": k, "label": label(mode, k),
                            "family": task.family, "task": f"{task.id}#{s}", "text": o.text,
                            "expected": task.expected, "finish_reason": o.finish_reason,
                            "n_tokens": o.n_tokens, "max_tokens": cap, "truncated": o.finish_reason == "length",
                            "closure": c.closure, "well_formed": c.well_formed, "valid": c.valid,
                            "fields": c.fields_ok, "fields_correct": c.fields_correct,
                            "fields_total": c.fields_total, "errors": list(c.errors), "prep_s": o.prep_s,
                            "prompt_s": o.prompt_s, "prompt_tokens": o.prompt_tokens, "decode_s": o.decode_s,
                            "ttft_s": o.ttft_s, "mask_s": o.mask_s, "mask_calls": o.mask_calls})
                        bar.update(1)
        del runner, llm
    bar.close()
    labels = [label(m, k) for k in shots for m in modes]
    agg = aggregate(records, models, labels, families=TOOL_NAMES)
    res = {"meta": {"date": date.today().isoformat(), "command": command, "n_tasks": len(tasks), "seed": seed,
                    "models": models, "modes": modes, "shots": list(shots), "whitespace": whitespace,
                    "key_order": key_order, "temperature": temperature, "samples": len(seeds),
                    "max_tokens": max_tokens, "lead_in": lead_in, "elapsed_s": time.perf_counter() - t0,
                    "tools": list(TOOL_NAMES)}, **agg}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "results.json").write_text(json.dumps(res, ensure_ascii=False, indent=1), encoding="utf-8")
        with open(out_dir / "records.jsonl", "w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        from evals.valuecopy.report import markdown
        (out_dir / "results.md").write_text(markdown([res]), encoding="utf-8")
    res["records"] = records
    return res


def merge(parts: list[tuple[str, str]], out_dir: Path, command: str) -> dict:
    """A run made of ``(run directory, label)`` parts (the same tasks; the meta of the last
    part, ``lead_in`` etc. listed per part in ``meta.parts``)."""
    records, metas = [], []
    for d, lab in parts:
        meta = json.loads((Path(d) / "results.json").read_text(encoding="utf-8"))["meta"]
        metas.append({"dir": str(d), "label": lab, "command": meta["command"], "lead_in": meta.get("lead_in", False)})
        with open(Path(d) / "records.jsonl", encoding="utf-8") as fh:
            records += [r for r in map(json.loads, fh) if r["label"] == lab]
    if not records:
        raise ValueError(f"merge: no records for {parts}")
    models = list(dict.fromkeys(r["model"] for r in records))
    labels = [lab for _, lab in parts]
    res = {"meta": dict(meta, command=command, parts=metas, elapsed_s=0.0), **aggregate(records, models, labels,
                                                                                        families=TOOL_NAMES)}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(res, ensure_ascii=False, indent=1), encoding="utf-8")
    with open(out_dir / "records.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    from evals.valuecopy.report import markdown
    (out_dir / "results.md").write_text(markdown([res]), encoding="utf-8")
    return res
