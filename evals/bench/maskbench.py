"""Mask benchmark against peer engines, MaskBench method (a benchmark, not a test).

    python -m evals.bench.maskbench --vocab llama-bpe --split Glaiveai2K [--limit N]
        [--engines ours,llguidance,xgrammar,outlines-core] [--timeout S] [--budget S]

One process; engines run one after another on the same schemas, the same vocabulary and
the same token ids.  For every schema of the split (``--limit N``: N schemas evenly spaced
over the sorted file names) each engine

1. compiles it (timed: schema -> a matcher ready for the first mask; ours goes through
   ``Compiler(vocab, cache=False).compile_json_schema`` with back-end "auto", uses only the
   back-end contract, and records ``stats()["backend"]`` per schema; it is lazy, so its
   first-visit masks are paid in mask time instead);
2. walks the tokens of every valid instance: at each token the mask for the current state
   is computed and the token consumed (timed together: "mask"), and the mask is written
   into a float32 logits buffer ("apply"); after the last token one more mask is computed
   and the instance counts as accepted when the vocabulary's EOS token is allowed there;
3. checks every invalid instance (untimed, fresh matcher): accepted = a false accept.

Text forms: the instance is spelled (a) canonically, ``decoding.frontends.jsonschema.canonicalize`` -
compact, keys in schema order, numbers and strings as our grammar generates them - and
(b) as compact ``json.dumps`` in instance key order.  Every engine is configured for
compact JSON (no optional whitespace) and gets the first form it accepts (checked
untimed); when it accepts none, the canonical form is walked up to the rejected token.
All forms are tokenized once by llama.cpp's own tokenizer for the vocabulary.

Compile timeout: ``--timeout`` seconds; ours is interrupted (SIGALRM), peers run native
code that cannot be interrupted, so a slower compile is counted as a timeout afterwards.
``--budget`` seconds per engine: schemas not started within it are reported as skipped.
``--interleave``: afterwards, a second pass times compiles and walks again with the engines
interleaved schema by schema (:func:`run_interleaved`; the order rotated per schema), so that
the ratios do not depend on which engine ran while the shared machine was slower.
Writes evals/results/maskbench/<vocab>-<split>.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from decoding.vocab import Vocab

from evals.bench.engines import ENGINES, Engine, Samples, Unavailable, make_engine

__all__ = ["main", "run", "run_interleaved", "select_schemas", "stats_us", "render_markdown"]

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / ".." / "shared" / "corpora"
VOCABS = {"llama-bpe": "ggml-vocab-llama-bpe.gguf", "qwen35": "ggml-vocab-qwen35.gguf",
          "gemma-4": "ggml-vocab-gemma-4.gguf"}
RESULTS = ROOT / "evals" / "results" / "maskbench"


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def stats_us(ns: Any) -> dict:
    """mean/p50/p99/max (µs) and count of a list of nanosecond samples."""
    a = np.asarray(ns, dtype=np.float64) / 1000.0
    if a.size == 0:
        return {"n": 0, "mean": None, "p50": None, "p99": None, "max": None}
    return {"n": int(a.size), "mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max())}


def stats_ms(s: list[float]) -> dict:
    a = np.asarray(s, dtype=np.float64)
    if a.size == 0:
        return {"n": 0, "p50": None, "p99": None, "mean": None, "max": None}
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "mean": float(a.mean()), "max": float(a.max())}


def select_schemas(split_dir: Path, limit: int | None) -> list[Path]:
    """Sorted schema files; with ``limit``, that many evenly spaced over the sorted list."""
    files = sorted(split_dir.glob("*.json"))
    if not files:
        raise SystemExit(f"{split_dir}: no schema files")
    if limit is None or limit >= len(files):
        return files
    step = len(files) / limit
    return [files[int(i * step)] for i in range(limit)]


def _forms(schema: Any, data: Any) -> list[tuple[str, str]]:
    from decoding.frontends.jsonschema import canonicalize

    out: list[tuple[str, str]] = []
    try:
        out.append(("canonical", canonicalize(schema, data)))
    except Exception:  # noqa: BLE001 - counted: the compact form still runs
        pass
    compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if not any(t == compact for _, t in out):
        out.append(("compact", compact))
    return out


def prepare(files: list[Path], vocab: Vocab) -> list[dict]:
    """Load the schemas and tokenize every instance form once (shared by all engines)."""
    cases = []
    for p in files:
        d = json.loads(p.read_text())
        tests = []
        for t in d.get("tests", []):
            forms = []
            for kind, text in _forms(d["schema"], t["data"]):
                b = text.encode("utf-8")
                forms.append((kind, b, vocab.tokenize(b)))
            tests.append((bool(t["valid"]), forms))
        cases.append({"file": p.name, "schema": d["schema"], "tests": tests})
    return cases


def _note(r: dict, key: str, e: Exception) -> None:
    """Keep the reason of an error raised while checking or walking an instance."""
    r.setdefault(key, []).append(f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")


def _compile_timed(eng: Engine, schema: Any, timeout: float) -> tuple[Any, float, str | None]:
    """(handle or None, milliseconds, None or why it failed) of one timed compile: interrupted
    after ``timeout`` seconds where it can be (SIGALRM, installed by the caller), counted as a
    timeout afterwards where it cannot (native code)."""
    gc.collect()
    t0 = time.perf_counter()
    h, err = None, None
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            h = eng.compile(schema)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        err = "timeout"
    except Exception as e:  # noqa: BLE001 - every failure is counted by reason
        err = f"{type(e).__name__}: {str(e).splitlines()[0][:90] if str(e) else ''}"
    ms = (time.perf_counter() - t0) * 1000
    if err is None and ms > timeout * 1000:
        err = "timeout"
    return (None if err else h), ms, err


def _walk_kept(eng: Engine, h: Any, toks: list[int], logits: np.ndarray, eos: int,
               rec: Samples) -> tuple[bool, Exception | None]:
    """(accepted, the exception raised or None) of one timed walk; a walk that raises has its
    partial samples dropped from ``rec``."""
    lens = [len(x) for x in (rec.mask, rec.adv, rec.apply, rec.first)]
    try:
        return bool(eng.walk(h, toks, logits, eos, rec)), None
    except Exception as e:  # noqa: BLE001 - counted as a rejection by the caller
        for x, n in zip((rec.mask, rec.adv, rec.apply, rec.first), lens):
            del x[n:]
        return False, e


def run_engine(eng: Engine, vocab: Vocab, eos: int, cases: list[dict], timeout: float,
               budget: float | None, log: Any) -> dict:
    """Run one engine over all cases; returns its summary plus per-schema records."""
    gc.collect()
    rss0 = _rss()
    t = time.perf_counter()
    try:
        eng.setup(vocab)
    except Unavailable as e:
        return {"status": f"unavailable: {e}"}
    except Exception as e:  # noqa: BLE001 - a peer that fails to set up is reported, not dropped
        return {"status": f"unavailable: setup failed ({type(e).__name__}: {e})"}
    setup_s = time.perf_counter() - t
    rss1 = _rss()
    logits = np.zeros(vocab.n_tokens, dtype=np.float32)
    rec = Samples()
    compile_ms: list[float] = []
    per_schema: list[dict] = []
    handles: list[Any] = []
    errors: dict[str, int] = {}
    forms_used: dict[str, int] = {}
    valid_total = valid_ok = invalid_total = invalid_acc = skipped = 0
    native = 0
    native_known = True
    start = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i, case in enumerate(cases):
            nvalid = sum(1 for v, _ in case["tests"] if v)
            valid_total += nvalid
            if budget is not None and time.perf_counter() - start > budget:
                skipped += 1
                per_schema.append({"file": case["file"], "status": "skipped (budget)"})
                continue
            h, ms, err = _compile_timed(eng, case["schema"], timeout)
            if err is not None:
                key = " ".join(err.split())[:80]
                errors[key] = errors.get(key, 0) + 1
                per_schema.append({"file": case["file"], "status": "error", "error": err})
                continue
            compile_ms.append(ms)
            handles.append(h)
            nb = eng.native_bytes(h)
            r = {"file": case["file"], "status": "ok", "compile_ms": round(ms, 3), "valid": [], "invalid_accepted": 0}
            be = eng.backend(h)
            if be is not None:
                r["backend"] = be
            n0 = len(rec.mask)
            for valid, forms in case["tests"]:
                if not forms:
                    continue
                chosen = None
                for kind, b, toks in forms:
                    try:
                        acc = eng.accepts(h, toks, b)
                    except Exception as e:  # noqa: BLE001 - counted as a rejection, reason kept
                        acc = False
                        _note(r, "check_errors", e)
                    if acc:
                        chosen = (kind, b, toks)
                        break
                if not valid:
                    invalid_total += 1
                    if chosen is not None:
                        invalid_acc += 1
                        r["invalid_accepted"] += 1
                    continue
                kind, b, toks = chosen if chosen is not None else forms[0]
                r.setdefault("walked", []).append(next(j for j, f in enumerate(forms) if f[0] == kind))
                ok, exc = _walk_kept(eng, h, toks, logits, eos, rec)
                if exc is not None:  # counted as a rejection, reason kept
                    _note(r, "walk_errors", exc)
                ok = ok and chosen is not None
                valid_ok += ok
                forms_used[kind if ok else "rejected"] = forms_used.get(kind if ok else "rejected", 0) + 1
                r["valid"].append(bool(ok))
            eng.done_checking(h)
            seg = np.asarray(rec.mask[n0:], dtype=np.int64) + np.asarray(rec.adv[n0:], dtype=np.int64)
            r["steps"] = int(seg.size)
            r["mask_us_mean"] = round(float(seg.mean()) / 1000, 3) if seg.size else None
            r["_samples"] = seg
            nb = eng.native_bytes(h) if nb is not None else None  # after the walk: lazy memos grew
            if nb is None:
                native_known = False
            else:
                native += nb
            per_schema.append(r)
            if (i + 1) % 25 == 0:
                print(f"  {eng.name}: {i + 1}/{len(cases)} schemas, {time.perf_counter() - start:.0f}s",
                      file=log, flush=True)
    finally:
        signal.signal(signal.SIGALRM, old)
    rss2 = _rss()
    wall = time.perf_counter() - start
    by_backend = _by_backend(per_schema)
    total = np.asarray(rec.mask, dtype=np.int64) + np.asarray(rec.adv, dtype=np.int64)
    out = {
        "status": "ok",
        "version": eng.version(),
        "config": eng.describe(),
        "apply_impl": eng.apply_name,
        "setup_s": round(setup_s, 3),
        "wall_s": round(wall, 1),
        "schemas": len(cases),
        "schemas_compiled": len(compile_ms),
        "schemas_skipped_budget": skipped,
        "compile_errors": dict(sorted(errors.items(), key=lambda kv: -kv[1])),
        "compile_ms": stats_ms(compile_ms),
        "mask_us": stats_us(total),
        "mask_only_us": stats_us(rec.mask),
        "advance_us": stats_us(rec.adv),
        "apply_us": stats_us(rec.apply),
        "valid_total": valid_total,
        "valid_accepted": valid_ok,
        "invalid_total": invalid_total,
        "invalid_accepted": invalid_acc,
        "forms_used": forms_used,
        "memory": {"setup_rss_mb": round((rss1 - rss0) / 2**20, 1),
                   "grammars_rss_mb": round((rss2 - rss1) / 2**20, 1),
                   "setup_native_mb": None if eng.setup_bytes() is None else round(eng.setup_bytes() / 2**20, 1),
                   "grammars_native_mb": round(native / 2**20, 2) if native_known else None},
        "per_schema": per_schema,
    }
    if by_backend:
        out["backends"] = by_backend
    if rec.first and any(rec.first):
        first = np.asarray(rec.first, dtype=bool)
        out["mask_first_visit_us"] = stats_us(total[first])
        out["mask_memoized_us"] = stats_us(total[~first])
        out["mask_only_first_visit_us"] = stats_us(np.asarray(rec.mask)[first])
        out["mask_only_memoized_us"] = stats_us(np.asarray(rec.mask)[~first])
    del handles
    gc.collect()
    return out


def run_interleaved(engs: list[tuple[str, Engine]], vocab: Vocab, eos: int, cases: list[dict],
                    walked: dict[str, dict[str, list[int]]], timeout: float) -> dict:
    """Compile and mask timing with the engines interleaved schema by schema (``--interleave``):
    for each schema every engine (set up already) compiles it afresh and walks its valid
    instances in the forms the sequential run walked (``walked``: engine -> file -> the form
    index of each valid instance), the engines' order rotated by one per schema, so that a
    machine whose speed drifts over minutes weighs on every engine alike.  Only schemas the
    engine compiled in the sequential run are walked.  Per engine: compile and mask (+
    advance) stats over its schemas, and over the schemas every engine compiled here
    (``common``); nothing else (acceptance and memory are the sequential run's)."""
    logits = np.zeros(vocab.n_tokens, dtype=np.float32)
    comp: dict[str, dict[str, float]] = {n: {} for n, _ in engs}
    samples: dict[str, dict[str, np.ndarray]] = {n: {} for n, _ in engs}
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i, case in enumerate(cases):
            k = i % len(engs)
            for name, eng in engs[k:] + engs[:k]:
                h, ms, err = _compile_timed(eng, case["schema"], timeout)
                forms = walked.get(name, {}).get(case["file"])
                if err is not None or forms is None:  # (the sequential run reports why)
                    continue
                comp[name][case["file"]] = ms
                rec = Samples()
                valid = [fs for v, fs in case["tests"] if v and fs]
                for fs, j in zip(valid, forms):
                    _walk_kept(eng, h, fs[j][2], logits, eos, rec)  # (errors: the sequential run's)
                eng.done_checking(h)
                samples[name][case["file"]] = np.asarray(rec.mask, dtype=np.int64) + np.asarray(rec.adv, dtype=np.int64)
                del h
    finally:
        signal.signal(signal.SIGALRM, old)
    common = set.intersection(*(set(c) for c in comp.values())) if comp else set()
    out: dict = {"order": "rotated by one engine per schema", "schemas_common": len(common), "engines": {}}
    for name, _ in engs:
        own = sorted(comp[name])
        cat = [samples[name][f] for f in own]
        com = [samples[name][f] for f in sorted(common)]
        out["engines"][name] = {
            "schemas": len(own),
            "compile_ms": stats_ms([comp[name][f] for f in own]),
            "mask_us": stats_us(np.concatenate(cat) if cat else np.zeros(0)),
            "common_compile_ms": stats_ms([comp[name][f] for f in sorted(common)]),
            "common_mask_us": stats_us(np.concatenate(com) if com else np.zeros(0)),
        }
    e = out["engines"]
    if "ours" in e and len(e) > 1:
        ratios = {}
        for label, key, stat in (("compile_p50", "compile_ms", "p50"), ("mask_mean", "mask_us", "mean"),
                                 ("mask_p99", "mask_us", "p99"), ("common_compile_p50", "common_compile_ms", "p50"),
                                 ("common_mask_mean", "common_mask_us", "mean")):
            vals = {n: v[key][stat] for n, v in e.items() if n != "ours" and v[key][stat] is not None}
            if vals and e["ours"][key][stat] is not None:
                best = min(vals, key=vals.get)
                ratios[label] = {"ours": e["ours"][key][stat], "best_peer": best, "best": vals[best],
                                 "ratio": e["ours"][key][stat] / vals[best]}
        out["ratios"] = ratios
    return out


def _by_backend(per_schema: list[dict]) -> dict:
    """Per back-end that compiled schemas (ours): schemas, compile and mask stats, acceptance."""
    groups: dict[str, list[dict]] = {}
    for r in per_schema:
        if r.get("status") == "ok" and "backend" in r:
            groups.setdefault(r["backend"], []).append(r)
    out = {}
    for be in sorted(groups):
        rs = groups[be]
        samples = np.concatenate([r["_samples"] for r in rs])
        out[be] = {"schemas": len(rs), "compile_ms": stats_ms([r["compile_ms"] for r in rs]),
                   "mask_us": stats_us(samples), "valid_accepted": sum(sum(r["valid"]) for r in rs),
                   "valid_total": sum(len(r["valid"]) for r in rs),
                   "invalid_accepted": sum(r["invalid_accepted"] for r in rs)}
    return out


def _backends_cell(e: dict) -> str:
    b = e.get("backends")
    return ", ".join(f"{k} {v['schemas']}" for k, v in b.items()) if b else "-"


def _intersection(engines: dict[str, dict]) -> dict:
    """Compile and mask stats over the schemas every available engine compiled."""
    ok = {k: v for k, v in engines.items() if v.get("status") == "ok"}
    if len(ok) < 2:
        return {}
    files = None
    for v in ok.values():
        s = {r["file"] for r in v["per_schema"] if r.get("status") == "ok" and all(r["valid"])}
        files = s if files is None else files & s
    out = {"schemas": len(files or ())}
    for k, v in ok.items():
        rs = [r for r in v["per_schema"] if r.get("file") in files]
        samples = np.concatenate([r["_samples"] for r in rs]) if rs else np.zeros(0)
        out[k] = {"compile_ms": stats_ms([r["compile_ms"] for r in rs]), "mask_us": stats_us(samples)}
    return out


def _ratios(engines: dict[str, dict], inter: dict) -> dict:
    peers = {k: v for k, v in engines.items() if k != "ours" and v.get("status") == "ok"}
    if engines.get("ours", {}).get("status") != "ok" or not peers:
        return {}
    o = engines["ours"]
    res = {}
    for label, get in (("mask_mean", lambda e: e["mask_us"]["mean"]), ("mask_p99", lambda e: e["mask_us"]["p99"]),
                       ("compile_p50", lambda e: e["compile_ms"]["p50"])):
        vals = {k: get(v) for k, v in peers.items() if get(v) is not None}
        if not vals or get(o) is None:
            continue
        best = min(vals, key=vals.get)
        res[label] = {"ours": get(o), "best_peer": best, "best": vals[best], "ratio": get(o) / vals[best]}
    if inter and "ours" in inter:
        for label, get in (("common_mask_mean", lambda e: e["mask_us"]["mean"]),
                           ("common_mask_p99", lambda e: e["mask_us"]["p99"]),
                           ("common_compile_p50", lambda e: e["compile_ms"]["p50"])):
            vals = {k: get(v) for k, v in inter.items() if k not in ("ours", "schemas") and get(v) is not None}
            if vals and get(inter["ours"]) is not None:
                best = min(vals, key=vals.get)
                res[label] = {"ours": get(inter["ours"]), "best_peer": best, "best": vals[best],
                              "ratio": get(inter["ours"]) / vals[best]}
    return res


def _f(x: Any, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def render_markdown(res: dict) -> str:
    L = [f"### MaskBench: {res['split']}, vocabulary {res['vocab']} ({res['n_tokens']} tokens), "
         f"{res['n_schemas']} schemas", "",
         f"`{res['command']}`", "",
         "| engine | compiled | back-ends | compile p50 ms | compile p99 ms | mask mean µs | mask p50 µs "
         "| mask p99 µs | mask max µs | apply mean µs | valid accepted | invalid accepted "
         "| memory MB (RSS; native) | setup s |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in res["engines"].items():
        if e.get("status") != "ok":
            L.append(f"| {name} | {e['status']} |" + " |" * 12)
            continue
        c, m, mem = e["compile_ms"], e["mask_us"], e["memory"]
        skip = f" (+{e['schemas_skipped_budget']} skipped)" if e["schemas_skipped_budget"] else ""
        nat = _f(mem["grammars_native_mb"], 1) if mem["grammars_native_mb"] is not None else "n/a"
        L.append(f"| {name} | {e['schemas_compiled']}/{e['schemas']}{skip} | {_backends_cell(e)} "
                 f"| {_f(c['p50'], 2)} | {_f(c['p99'], 1)} "
                 f"| {_f(m['mean'], 2)} | {_f(m['p50'], 2)} | {_f(m['p99'], 1)} | {_f(m['max'], 0)} "
                 f"| {_f(e['apply_us']['mean'], 1)} | {e['valid_accepted']}/{e['valid_total']} "
                 f"| {e['invalid_accepted']}/{e['invalid_total']} | {_f(mem['grammars_rss_mb'], 1)}; {nat} "
                 f"| {_f(e['setup_s'], 2)} |")
    o = res["engines"].get("ours", {})
    if o.get("status") == "ok" and o.get("backends"):
        L += ["", "Ours by the back-end that compiled the schema (`stats()['backend']`; \"auto\" picks):", "",
              "| back-end | schemas | compile p50 ms | compile p99 ms | mask mean µs | mask p99 µs "
              "| valid accepted | invalid accepted |", "|---|---|---|---|---|---|---|---|"]
        for be, b in o["backends"].items():
            L.append(f"| {be} | {b['schemas']} | {_f(b['compile_ms']['p50'], 2)} | {_f(b['compile_ms']['p99'], 1)} "
                     f"| {_f(b['mask_us']['mean'], 2)} | {_f(b['mask_us']['p99'], 1)} "
                     f"| {b['valid_accepted']}/{b['valid_total']} | {b['invalid_accepted']} |")
    if o.get("status") == "ok" and "mask_first_visit_us" in o:
        fv, mm = o["mask_first_visit_us"], o["mask_memoized_us"]
        L += ["", "Ours, mask time (mask + advance) split by the first request for a state's mask on "
              "its compiled grammar (a lazy back-end computes it then: native trie walk) and later, "
              "memoized requests:", "",
              "| visit | steps | mean µs | p50 µs | p99 µs | max µs |", "|---|---|---|---|---|---|",
              f"| first visit | {fv['n']} | {_f(fv['mean'], 1)} | {_f(fv['p50'], 1)} | {_f(fv['p99'], 1)} | {_f(fv['max'], 0)} |",
              f"| memoized | {mm['n']} | {_f(mm['mean'], 2)} | {_f(mm['p50'], 2)} | {_f(mm['p99'], 2)} | {_f(mm['max'], 0)} |"]
    inter = res.get("common", {})
    if inter:
        L += ["", f"On the {inter['schemas']} schemas that every engine compiled and accepted all valid "
              "instances of:", "", "| engine | compile p50 ms | compile p99 ms | mask mean µs | mask p99 µs |",
              "|---|---|---|---|---|"]
        for k, v in inter.items():
            if k == "schemas":
                continue
            L.append(f"| {k} | {_f(v['compile_ms']['p50'], 2)} | {_f(v['compile_ms']['p99'], 1)} "
                     f"| {_f(v['mask_us']['mean'], 2)} | {_f(v['mask_us']['p99'], 1)} |")
    if res.get("ratios"):
        L += ["", "Ratios ours / best peer (< 1 means ours is better):", "",
              "| metric | ours | best peer | ratio |", "|---|---|---|---|"]
        for k, v in res["ratios"].items():
            L.append(f"| {k} | {_f(v['ours'], 2)} | {v['best_peer']} {_f(v['best'], 2)} | {_f(v['ratio'], 2)} |")
    il = res.get("interleaved")
    if il:
        L += ["", f"Interleaved pass (`--interleave`): every engine compiles each schema afresh and walks its "
              f"valid instances, the engines' order {il['order']}; common = the {il['schemas_common']} "
              "schemas every engine compiled in this pass:", "",
              "| engine | schemas | compile p50 ms | compile p99 ms | mask mean µs | mask p99 µs "
              "| common compile p50 ms | common mask mean µs |", "|---|---|---|---|---|---|---|---|"]
        for n, v in il["engines"].items():
            L.append(f"| {n} | {v['schemas']} | {_f(v['compile_ms']['p50'], 2)} | {_f(v['compile_ms']['p99'], 1)} "
                     f"| {_f(v['mask_us']['mean'], 2)} | {_f(v['mask_us']['p99'], 1)} "
                     f"| {_f(v['common_compile_ms']['p50'], 2)} | {_f(v['common_mask_us']['mean'], 2)} |")
        if il.get("ratios"):
            L += ["", "| interleaved metric | ours | best peer | ratio |", "|---|---|---|---|"]
            for k, v in il["ratios"].items():
                L.append(f"| {k} | {_f(v['ours'], 2)} | {v['best_peer']} {_f(v['best'], 2)} | {_f(v['ratio'], 2)} |")
    raised = [(n, r["file"], k, m) for n, e in res["engines"].items() if e.get("status") == "ok"
              for r in e["per_schema"] for k in ("check_errors", "walk_errors") for m in r.get(k, ())]
    if raised:
        L += ["", "Errors raised while checking or walking an instance (the instance counts as rejected):", ""]
        L += [f"- {n}, {f} ({k.split('_')[0]}): {m}" for n, f, k, m in raised[:20]]
        if len(raised) > 20:
            L.append(f"- ... {len(raised) - 20} more in the JSON")
    errs = [(n, e["compile_errors"]) for n, e in res["engines"].items() if e.get("status") == "ok" and e["compile_errors"]]
    if errs:
        L += ["", "Compile failures:", ""]
        for n, es in errs:
            L.append(f"- {n}: " + "; ".join(f"{k} ×{c}" for k, c in list(es.items())[:5]))
    L += ["", f"Machine: {res['machine']['cpu']}, {res['machine']['cpus']} CPUs, load average "
          f"{res['machine']['load_start']} at start, {res['machine']['load_end']} at end. "
          "Mask = compute the mask for the current state + consume the token; apply = write it into a "
          "float32 logits array. Memory: RSS growth while the engine's compiled grammars were alive; native = "
          "engine-reported bytes (ours: `stats()` `mask_bytes` plus the back-end's documented byte counts; "
          "xgrammar: memory_size_bytes)."]
    return "\n".join(L) + "\n"


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def run(vocab_name: str, split: str, limit: int | None, engines: list[str], timeout: float,
        budget: float | None, xgr_threads: int, log: Any = sys.stderr, interleave: bool = False) -> dict:
    path = Path(vocab_name) if vocab_name.endswith(".gguf") else SHARED / "vocab" / VOCABS[vocab_name]
    vocab = Vocab.from_gguf(path)
    import llama_cpp

    eos = int(llama_cpp.llama_vocab_eos(vocab._llama._model.vocab))
    files = select_schemas(SHARED / "jsonschemabench" / split, limit)
    t = time.perf_counter()
    cases = prepare(files, vocab)
    print(f"{len(cases)} schemas of {split}, vocabulary {path.name} ({vocab.n_tokens} tokens), "
          f"prepared in {time.perf_counter() - t:.1f}s", file=log, flush=True)
    res: dict = {"vocab": vocab_name, "split": split, "n_schemas": len(cases), "limit": limit,
                 "n_tokens": vocab.n_tokens, "eos": eos, "engines": {},
                 "machine": {"cpu": _cpu(), "cpus": os.cpu_count(),
                             "load_start": " ".join(f"{x:.1f}" for x in os.getloadavg())}}
    for name in engines:
        kw = {"threads": xgr_threads} if name == "xgrammar" else {}
        print(f"{name}: running", file=log, flush=True)
        r = run_engine(make_engine(name, **kw), vocab, eos, cases, timeout, budget, log)
        if r.get("status") == "ok":
            print(f"{name}: {r['schemas_compiled']}/{r['schemas']} compiled, mask mean "
                  f"{_f(r['mask_us']['mean'], 2)} µs, {r['wall_s']}s", file=log, flush=True)
        else:
            print(f"{name}: {r['status']}", file=log, flush=True)
        res["engines"][name] = r
    if interleave:
        engs = []
        for name in engines:
            if res["engines"][name].get("status") != "ok":
                continue
            eng = make_engine(name, **({"threads": xgr_threads} if name == "xgrammar" else {}))
            eng.setup(vocab)
            engs.append((name, eng))
        walked = {n: {r["file"]: r.get("walked", []) for r in res["engines"][n]["per_schema"]
                      if r.get("status") == "ok"} for n, _ in engs}
        print("interleaved pass: running", file=log, flush=True)
        res["interleaved"] = run_interleaved(engs, vocab, eos, cases, walked, timeout)
        del engs
        gc.collect()
    res["machine"]["load_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    res["common"] = _intersection(res["engines"])
    res["ratios"] = _ratios(res["engines"], res["common"])
    for e in res["engines"].values():
        for r in e.get("per_schema", ()):
            r.pop("_samples", None)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", default="llama-bpe", help=f"one of {', '.join(VOCABS)} or a .gguf path")
    ap.add_argument("--split", default="Glaiveai2K")
    ap.add_argument("--limit", type=int, default=None, help="N schemas evenly spaced over the split")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per compile (default 30)")
    ap.add_argument("--budget", type=float, default=None, help="seconds per engine; later schemas are skipped")
    ap.add_argument("--xgr-threads", type=int, default=1, help="xgrammar compiler threads (default 1)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--interleave", action="store_true",
                    help="after the sequential runs, time compiles and walks again with the engines "
                         "interleaved schema by schema (ratios robust to a machine whose speed drifts)")
    args = ap.parse_args(argv)
    names = [e.strip() for e in args.engines.split(",") if e.strip()]
    for n in names:
        if n not in ENGINES:
            ap.error(f"unknown engine {n!r}; choose from {', '.join(ENGINES)}")
    if not args.vocab.endswith(".gguf") and args.vocab not in VOCABS:
        ap.error(f"unknown vocabulary {args.vocab!r}; choose from {', '.join(VOCABS)} or give a .gguf path")
    res = run(args.vocab, args.split, args.limit, names, args.timeout, args.budget, args.xgr_threads,
              interleave=args.interleave)
    res["command"] = "python -m evals.bench.maskbench " + " ".join(argv if argv is not None else sys.argv[1:])
    md = render_markdown(res)
    print(md)
    if not args.no_write:
        args.out.mkdir(parents=True, exist_ok=True)
        stem = f"{Path(args.vocab).stem if args.vocab.endswith('.gguf') else args.vocab}-{args.split}"
        (args.out / f"{stem}.json").write_text(json.dumps(res, indent=1) + "\n")
        (args.out / f"{stem}.md").write_text(md)
        print(f"wrote {args.out / stem}.json and .md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
