"""Load benchmark of ``python -m decoding serve``: concurrent ``openai`` clients, constrained
load against the same load with no constraint, side by side in one run.

Client: a bounded asyncio client (``openai.AsyncOpenAI``, one task per simulated client,
each sending its requests one after the other), not locust: locust is not installed here
(it would pull gevent), and the check that matters is per answer (each answer validated
against its own grammar), which is plain Python in the client.

The two loads alternate in ``blocks`` (each client sends its next ``per_client / blocks``
constrained requests, then the same requests unconstrained, ...) so that a change of the
machine's background load during the run hits both alike.

Reported per load: requests sent / answered (200) / lost (an exception or a non-200 status),
ok / invalid / cross (:func:`evals.server_load.workload.check`), latency p50 / p99 (client
side, whole request), throughput (completion tokens per second of wall time, all clients
together) and the median per-request tok/s; then constrained / unconstrained ratios."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.server_load.workload import KINDS, ROOT, Job, check, jobs

__all__ = ["run", "main", "Outcome"]


@dataclass
class Outcome:
    job: Job
    constrained: bool
    status: str            # ok / invalid / cross / lost
    latency_s: float
    completion_tokens: int
    detail: str = ""


@dataclass
class Load:
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def start_server(model: str, port: int, queue_size: int, log: Path) -> subprocess.Popen:
    """``python -m decoding serve`` on 127.0.0.1 (the grammars/ directory as --dtd-dir)."""
    cmd = [sys.executable, "-m", "decoding", "serve", "--model", model, "--host", "127.0.0.1", "--port", str(port),
           "--dtd-dir", str(ROOT / "grammars"), "--queue-size", str(queue_size)]
    fh = open(log, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        if time.time() > deadline:
            stop_server(proc)
            raise RuntimeError(f"the server did not answer /health within 180 s; see {log}")
        time.sleep(0.3)


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
    except ProcessLookupError:
        pass


async def _one(client: Any, job: Job, constrained: bool, model: str) -> Outcome:
    body = job.body(constrained, model)
    extra = {k: body.pop(k) for k in ("dtd", "root", "dtd_options") if k in body}
    t0 = time.perf_counter()
    try:
        r = await client.chat.completions.create(**body, extra_body=extra or None)
    except Exception as e:  # noqa: BLE001 - a lost request, recorded with its cause
        return Outcome(job, constrained, "lost", time.perf_counter() - t0, 0, f"{type(e).__name__}: {e}"[:300])
    dt = time.perf_counter() - t0
    text = r.choices[0].message.content if r.choices else None
    n = r.usage.completion_tokens if r.usage else 0
    if text is None:
        return Outcome(job, constrained, "lost", dt, n, "no content")
    status = check(job.kind, text) if constrained else "ok"
    return Outcome(job, constrained, status, dt, n, "" if status == "ok" else text[:300])


async def _drive(base: str, model: str, plan: list[list[Job]], blocks: int, timeout: float) -> dict[bool, Load]:
    import openai

    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=timeout)
    loads = {True: Load(), False: Load()}
    per = len(plan[0])
    size = -(-per // blocks)
    try:
        for b in range(blocks):
            for constrained in (True, False):
                async def client_task(row: list[Job]) -> list[Outcome]:
                    return [await _one(client, j, constrained, model) for j in row[b * size:(b + 1) * size]]

                t0 = time.perf_counter()
                got = await asyncio.gather(*(client_task(row) for row in plan))
                loads[constrained].wall_s += time.perf_counter() - t0
                for outs in got:
                    loads[constrained].outcomes.extend(outs)
                print(f"block {b + 1}/{blocks} {'constrained' if constrained else 'unconstrained'}: "
                      f"{sum(len(o) for o in got)} requests in {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        await client.close()
    return loads


def _summary(load: Load) -> dict[str, Any]:
    outs = load.outcomes
    answered = [o for o in outs if o.status != "lost"]
    lat = [o.latency_s for o in answered]
    toks = sum(o.completion_tokens for o in answered)
    per_req = [o.completion_tokens / o.latency_s for o in answered if o.latency_s > 0]
    by_kind = {k: {"n": sum(1 for o in outs if o.job.kind == k),
                   "ok": sum(1 for o in outs if o.job.kind == k and o.status == "ok"),
                   "mean_completion_tokens": round(statistics.mean(
                       [o.completion_tokens for o in answered if o.job.kind == k] or [0]), 1)} for k in KINDS}
    return {"requests": len(outs), "answered": len(answered),
            "lost": sum(1 for o in outs if o.status == "lost"),
            "invalid": sum(1 for o in outs if o.status == "invalid"),
            "cross": sum(1 for o in outs if o.status == "cross"),
            "ok": sum(1 for o in outs if o.status == "ok"),
            "latency_p50_s": round(_pct(lat, 0.5), 3), "latency_p99_s": round(_pct(lat, 0.99), 3),
            "completion_tokens": toks, "wall_s": round(load.wall_s, 1),
            "throughput_tok_s": round(toks / load.wall_s, 2) if load.wall_s else 0.0,
            "per_request_tok_s_p50": round(_pct(per_req, 0.5), 2),
            "by_kind": by_kind,
            "failures": [{"client": o.job.client, "index": o.job.index, "kind": o.job.kind, "status": o.status,
                          "detail": o.detail} for o in outs if o.status != "ok"][:50]}


def _metrics(base: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for name in ("decoding_grammar_cache_hits_total", "decoding_grammar_cache_misses_total",
                 "decoding_mask_us_per_token_sum", "decoding_mask_us_per_token_count"):
        m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def _commit() -> str:
    """The checked-out commit (``+dirty`` when decoding/ or evals/ have uncommitted changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "decoding", "evals/server_load"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def run(*, model: str = "smollm2", clients: int = 8, per_client: int = 50, blocks: int = 5, max_tokens: int = 32,
        dtd_max_tokens: int = 40, base_url: str | None = None, out: Path | None = None,
        timeout: float = 600.0) -> dict[str, Any]:
    """Run both loads; write ``out/server_load.json`` and ``.md`` when ``out`` is given."""
    plan = jobs(clients, per_client, max_tokens, dtd_max_tokens)
    proc = None
    if base_url is None:
        port = _free_port()
        import tempfile

        log = Path(tempfile.gettempdir()) / f"server_load_{port}.log"  # the server's output, if it fails
        proc = start_server(model, port, max(16, 2 * clients), log)
        base_url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.perf_counter()
        loads = asyncio.run(_drive(base_url, model, plan, max(1, min(blocks, per_client)), timeout))
        total = time.perf_counter() - t0
        metrics = _metrics(base_url)
    finally:
        if proc is not None:
            stop_server(proc)
    con, free = _summary(loads[True]), _summary(loads[False])

    def ratio(a: float, b: float) -> float:
        return round(a / b, 3) if b else float("nan")

    result = {
        "command": " ".join(["python -m evals.server_load", *sys.argv[1:]]),
        "config": {"model": model, "clients": clients, "requests_per_client": per_client, "blocks": blocks,
                   "max_tokens": max_tokens, "dtd_max_tokens": dtd_max_tokens, "kinds": list(KINDS),
                   "server": "python -m decoding serve (1 worker, 127.0.0.1)" if proc else base_url},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "constrained": con, "unconstrained": free,
        "ratios_constrained_over_unconstrained": {
            "latency_p50": ratio(con["latency_p50_s"], free["latency_p50_s"]),
            "latency_p99": ratio(con["latency_p99_s"], free["latency_p99_s"]),
            "throughput_tok_s": ratio(con["throughput_tok_s"], free["throughput_tok_s"]),
            "per_request_tok_s_p50": ratio(con["per_request_tok_s_p50"], free["per_request_tok_s_p50"])},
        "server_metrics": metrics, "total_s": round(total, 1), "commit": _commit(),
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "server_load.json").write_text(json.dumps(result, indent=1) + "\n")
        (out / "server_load.md").write_text(markdown(result))
    return result


def markdown(r: dict[str, Any]) -> str:
    c, f, q = r["constrained"], r["unconstrained"], r["ratios_constrained_over_unconstrained"]
    cfg = r["config"]
    rows = [("requests", c["requests"], f["requests"], ""), ("lost", c["lost"], f["lost"], ""),
            ("invalid (own grammar)", c["invalid"], "-", ""), ("constrained by another grammar", c["cross"], "-", ""),
            ("latency p50 (s)", c["latency_p50_s"], f["latency_p50_s"], q["latency_p50"]),
            ("latency p99 (s)", c["latency_p99_s"], f["latency_p99_s"], q["latency_p99"]),
            ("throughput (completion tok/s, all clients)", c["throughput_tok_s"], f["throughput_tok_s"],
             q["throughput_tok_s"]),
            ("per-request tok/s (p50)", c["per_request_tok_s_p50"], f["per_request_tok_s_p50"],
             q["per_request_tok_s_p50"]),
            ("completion tokens", c["completion_tokens"], f["completion_tokens"], ""),
            ("wall time (s)", c["wall_s"], f["wall_s"], "")]
    lines = [f"# Server load: {cfg['clients']} clients x {cfg['requests_per_client']} requests, {cfg['model']}",
             "", f"`{r['command']}` ({r['machine']['cpus']} CPUs; {r['total_s']} s in all; commit {r['commit']})", "",
             "| | constrained | unconstrained | ratio |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | {d} | {e} |" for a, b, d, e in rows]
    lines += ["", "Per kind (constrained): " + ", ".join(
        f"{k} {v['ok']}/{v['n']} ok, {v['mean_completion_tokens']} tok" for k, v in c["by_kind"].items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m evals.server_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=50, help="requests per client, per load")
    ap.add_argument("--blocks", type=int, default=5, help="alternations of the two loads")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--dtd-max-tokens", type=int, default=40)
    ap.add_argument("--base-url", default=None, help="an already running server (default: start one)")
    ap.add_argument("--out", type=Path, default=ROOT / "evals" / "results" / "server_load")
    a = ap.parse_args(argv)
    r = run(model=a.model, clients=a.clients, per_client=a.requests, blocks=a.blocks, max_tokens=a.max_tokens,
            dtd_max_tokens=a.dtd_max_tokens, base_url=a.base_url, out=a.out)
    print(markdown(r))
    c = r["constrained"]
    bad = c["lost"] + c["invalid"] + c["cross"] + r["unconstrained"]["lost"]
    return 1 if bad else 0
