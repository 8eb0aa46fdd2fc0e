"""A time-boxed fuzz campaign per door: generate, run in a worker, count, shrink, write.

For each door: inputs from :data:`evals.fuzz.generators.GENERATORS` run for ``minutes``
in one reusable subprocess worker (:class:`evals.fuzz.worker.Worker`: 10 s and 5 GB per
input by default).  Every outcome is counted (``inputs, ok, located, crash, hang,
unlocated, invalid``; ``oracle_skipped`` counts inputs the oracle could not judge).  The
first input of every distinct signature (outcome kind + signature) of a bad outcome is
shrunk (:mod:`evals.fuzz.shrink`) and written to ``<out>/<door>/<kind>-<hash>.json``;
``<out>/summary.json`` holds the counts and signatures, ``<out>/findings.md`` one line per
signature with its minimal reproducer.  Replay one with ``python -m evals.fuzz --replay FILE``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from evals.fuzz.generators import GENERATORS
from evals.fuzz.shrink import Budget, shrink_json, shrink_text
from evals.fuzz.worker import DEFAULT_MEMORY, DEFAULT_TIMEOUT, Worker

__all__ = ["COLUMNS", "BAD", "run_door", "shrink_payload", "format_table", "write_findings", "replay"]

COLUMNS = ("inputs", "ok", "located", "crash", "hang", "unlocated", "invalid")
BAD = ("crash", "hang", "unlocated", "invalid")
_TEXT_FIELD = {"dtd": "dtd", "gbnf": "gbnf", "guard": "text"}


def shrink_payload(door: str, payload: dict, kind: str, signature: str, worker: Worker,
                   budget: Budget) -> dict:
    """The smallest payload found that still gives ``kind``/``signature``."""
    def same(p: dict) -> bool:
        r = worker.run(door, p)
        return r["kind"] == kind and r["signature"] == signature

    if door == "schema":
        return {"schema": shrink_json(payload["schema"], lambda s: same({"schema": s}), budget)}
    field = _TEXT_FIELD.get(door)
    if field is None:           # artifacts: bytes under a checksum; the description says what changed
        return payload
    text = shrink_text(payload[field], lambda t: same({**payload, field: t}), budget)
    return {**payload, field: text}


def _short(payload: dict, door: str, limit: int = 300) -> str:
    if door == "schema":
        s = json.dumps(payload["schema"], ensure_ascii=True)
    elif door == "artifact":
        return "(artifact bytes; see the reproducer file)"
    else:
        s = json.dumps(payload, ensure_ascii=True)
    return s if len(s) <= limit else s[:limit] + f"... ({len(s)} chars)"


def run_door(door: str, minutes: float, *, seed: int = 0, out: Path, timeout: float = DEFAULT_TIMEOUT,
             memory: int = DEFAULT_MEMORY, shrink_seconds: float = 90.0, verbose: bool = True) -> dict:
    """Run one door's campaign; returns ``{"door", "counts", "signatures", "seconds"}``."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))  # deep inputs are data here (parent only)
    gen = GENERATORS[door]
    rng = random.Random(f"{seed}:{door}")
    worker = Worker(timeout=timeout, memory=memory)
    counts: Counter = Counter({c: 0 for c in COLUMNS})
    sigs: dict[tuple[str, str], dict[str, Any]] = {}
    slowest: list[tuple[float, str, str]] = []
    t0 = time.monotonic()
    end = t0 + minutes * 60
    i = 0
    while time.monotonic() < end:
        payload, desc = gen(rng)
        res = worker.run(door, payload, seed=i)
        i += 1
        slowest.append((res.get("seconds", 0.0), res["kind"], desc[:120]))
        if len(slowest) > 40:
            slowest = sorted(slowest, reverse=True)[:10]
        counts["inputs"] += 1
        counts[res["kind"]] += 1
        if res.get("oracle_skipped"):
            counts["oracle_skipped"] += 1
        if res["kind"] in BAD:
            key = (res["kind"], res["signature"])
            if key not in sigs:
                sigs[key] = {"kind": res["kind"], "signature": res["signature"], "message": res["message"],
                             "description": desc, "payload": payload, "count": 0, "seconds": res.get("seconds")}
                if verbose:
                    print(f"  [{door}] new {res['kind']}: {res['signature']}  ({desc[:80]})", flush=True)
            sigs[key]["count"] += 1
    seconds = time.monotonic() - t0
    # shrink and write reproducers
    d = out / door
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.json"):       # reproducers of an earlier run of this door
        old.unlink()
    shrink_end = time.monotonic() + shrink_seconds
    for n, ((kind, sig), info) in enumerate(sorted(sigs.items())):
        left = shrink_end - time.monotonic()
        per = min(30.0, left / max(1, len(sigs) - n))
        before = len(json.dumps(info["payload"]))
        if per > 1 and kind != "hang":
            info["payload"] = shrink_payload(door, info["payload"], kind, sig, worker, Budget(300, per))
        elif per > 12 and kind == "hang":
            info["payload"] = shrink_payload(door, info["payload"], kind, sig, worker,
                                             Budget(max(1, int(per // (timeout + 1))), per))
        info["shrunk_from_chars"] = before
        name = f"{kind}-{hashlib.sha256(sig.encode()).hexdigest()[:10]}.json"
        info["reproducer"] = f"{door}/{name}"           # relative to the out directory
        (d / name).write_text(json.dumps({"door": door, **info}, ensure_ascii=True, indent=1) + "\n",
                                            encoding="utf-8")
    worker.close()
    return {"door": door, "counts": dict(counts), "seconds": round(seconds, 1), "restarts": worker.restarts,
            "slowest": sorted(slowest, reverse=True)[:10],
            "signatures": [{k: v for k, v in info.items() if k != "payload"} | {"short": _short(info["payload"], door)}
                           for info in sigs.values()]}


def format_table(results: list[dict]) -> str:
    """A Markdown table of counts per door (distinct signatures of bad outcomes in brackets)."""
    head = "| door | " + " | ".join(COLUMNS) + " | oracle skipped | minutes |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 3)]
    for r in results:
        c = r["counts"]
        nsig = Counter(s["kind"] for s in r["signatures"])
        cells = []
        for col in COLUMNS:
            v = f"{c.get(col, 0):,}"
            if col in BAD and nsig.get(col):
                v += f" ({nsig[col]} sig)"
            cells.append(v)
        lines.append(f"| {r['door']} | " + " | ".join(cells) + f" | {c.get('oracle_skipped', 0):,} | "
                     f"{r['seconds'] / 60:.1f} |")
    return "\n".join(lines)


def write_findings(results: list[dict], path: Path) -> None:
    """One Markdown line per distinct bad signature, with its minimal reproducer."""
    lines = []
    for r in results:
        for s in sorted(r["signatures"], key=lambda s: (s["kind"], s["signature"])):
            lines.append(f"- [{r['door']}] {s['kind']} x{s['count']}: `{s['signature']}` -- {s['message'][:160]!r}"
                         f" -- repro: `{s['short']}` ({s['reproducer']})")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def replay(path: str | Path, *, timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY) -> dict:
    """Run one reproducer file again (in a worker) and return its outcome."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    w = Worker(timeout=timeout, memory=memory)
    try:
        return w.run(data["door"], data["payload"])
    finally:
        w.close()
