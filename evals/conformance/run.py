"""JSON Schema conformance: JSON-Schema-Test-Suite (draft2020-12 core) and JSONSchemaBench.

    python -m evals.conformance.run [--update] [--suite-only | --bench-only] [--suite draft7]
                                    [--split NAME ...] [--limit N] [--timeout S]

Every instance is serialized into the canonical form the grammar generates (compact JSON,
object keys in schema order; see decoding.frontends.jsonschema.canonical) and tested with
the compiled grammar's byte-level ``accepts``.  Counts and per-schema statuses go to ratchet baselines under
evals/baselines/; ``--update`` rewrites them, otherwise the run is compared with them and
exits 1 on a regression (a schema that compiled no longer compiles, fewer valid
instances accepted for a schema, or any invalid instance accepted).
Compile time is schema -> IR -> ``compile_grammar`` for the llama-bpe vocabulary with
``backend="auto"``: the explicit byte DFA when it has at most MAX_STATES states, else the
pushdown back-end (decoding.backends.pushdown.index; same language, one small DFA per rule plus a stack).
``--mode generation`` measures what a user of the library gets: ``compile_grammar``'s own
``max_states`` default (``Limits.max_dfa_states``), not MAX_STATES, which is the spec-faithful
baseline's choice between the DFA and the pushdown back-end and limits the counted back-end too.
Token masks are lazy (computed on first visit) in both, so they are not included.
A schema refused on a size estimate (``LimitError.estimated``) is compiled again with
``Limits(refuse_on_estimates=False)``, as :class:`decoding.compiler.Compiler` does with
back-end "auto": then only the bounds met while building refuse it.

Mode: the runner measures the spec-faithful policy (``COMPILE_OPTIONS``:
``extra_properties="allow"``, i.e. undeclared properties are generated when
``additionalProperties`` is absent; ``format_mode="annotate"``, draft 2020-12's default;
``untyped="any"``, a schema without ``type`` accepts every kind its keywords do not
constrain; and free-form values nest up to ``free_depth`` = 16 levels; JSONSchemaBench runs
with ``format_mode="assert"`` since its invalid instances include format violations), not
the generation default (``"omit"``); the mode is printed and recorded in the baselines.
Schemas the compiler proves unsatisfiable (UnsatisfiableSchemaError) get the status
``unsatisfiable``; they are left out of the compiled-rate denominator only when
``jsonschema`` rejects every test instance of the schema (``jsonschema_rejects_all``).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from decoding.errors import DecodingError, LimitError, UnsatisfiableSchemaError
from decoding.backends.automaton import DEFAULT_MAX_STATES
from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import canonicalize, compile_schema
from decoding.limits import DEFAULT_LIMITS, past_estimates
from decoding.vocab import Vocab

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / ".." / "shared" / "corpora"
SUITE_DIR = SHARED / "json-schema-test-suite" / "draft2020-12"
#: the suite's remote documents, served by its harness at http://localhost:1234/ (read from
#: disk into the compiler's registry; nothing is fetched)
REMOTES_DIR = SHARED / "json-schema-test-suite" / "remotes"
REMOTES_BASE = "http://localhost:1234/"
BENCH_DIR = SHARED / "jsonschemabench"
SPLITS = ("Glaiveai2K", "Github_trivial", "Github_easy", "Kubernetes", "Snowplow")
BASE_DIR = ROOT / "evals" / "baselines"
SUITE_BASE = BASE_DIR / "json_schema_test_suite.json"
BENCH_BASE = BASE_DIR / "jsonschemabench.json"
GENERATION_BASE = BASE_DIR / "jsonschemabench_generation.json"
#: the suite's draft7 core files, copied from upstream (see its README)
DRAFT7_DIR = ROOT / "evals" / "conformance" / "fixtures" / "draft7"
DRAFT7_BASE = BASE_DIR / "json_schema_test_suite_draft7.json"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
#: ``--suite NAME``: (test files, baseline, ``$schema`` given to root schemas that lack one;
#: the suite's draft7 files carry none, and remote documents without one are read as it)
SUITES: dict[str, tuple[Path, Path, str | None]] = {
    "draft2020-12": (SUITE_DIR, SUITE_BASE, None),
    "draft7": (DRAFT7_DIR, DRAFT7_BASE, DRAFT7),
}
MAX_STATES = 50_000
FREE_DEPTH = 16
MAX_DEPTH = 16
VOCAB_PATH = SHARED / "vocab" / "ggml-vocab-llama-bpe.gguf"
_vocab: list[Vocab] = []
COMPILE_OPTIONS: dict[str, Any] = {"extra_properties": "allow", "free_depth": FREE_DEPTH, "max_depth": MAX_DEPTH,
                                   "format_mode": "annotate", "untyped": "any"}
#: JSONSchemaBench's invalid instances include format violations (its tests assert formats)
BENCH_OPTIONS: dict[str, Any] = {**COMPILE_OPTIONS, "format_mode": "assert"}
#: ``--mode generation``: the generation default (compile_schema's own defaults: undeclared
#: properties omitted, free values 2 levels, $ref recursion 3), formats asserted
GENERATION_OPTIONS: dict[str, Any] = {"format_mode": "assert"}
CANONICAL_NOTE = ("instances are serialized canonically (compact, keys in schema order) "
                  "before the compiled grammar's accepts")


_registry: list[dict] = []


def remotes() -> dict:
    """URI -> schema for every file under REMOTES_DIR (empty if the suite has none)."""
    if not _registry:
        docs = {}
        if REMOTES_DIR.is_dir():
            for path in sorted(REMOTES_DIR.rglob("*.json")):
                docs[REMOTES_BASE + path.relative_to(REMOTES_DIR).as_posix()] = json.loads(path.read_text())
        _registry.append(docs)
    return _registry[0]


def max_states_for(options: dict | None) -> int:
    """``compile_grammar``'s ``max_states``: its own default for the generation default
    (what a user of the library gets), MAX_STATES for the spec-faithful baselines."""
    return DEFAULT_MAX_STATES if options == GENERATION_OPTIONS else MAX_STATES


def with_dialect(schema: Any, dialect: str | None) -> Any:
    """``schema`` with ``$schema: dialect`` added when it is an object without one."""
    if dialect and isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": dialect, **schema}
    return schema


_registries: dict[str, Any] = {}


def suite_registry(dialect: str | None) -> Any:
    """The remote documents for a suite: the URI -> schema mapping of :func:`remotes` (read as
    2020-12 when without ``$schema``) or, for another ``dialect``, a ``referencing.Registry``
    reading those without ``$schema`` as that dialect."""
    if dialect is None:
        return remotes() or None
    if dialect not in _registries:
        import referencing
        import referencing.jsonschema as rj
        default = rj.specification_with(dialect)
        _registries[dialect] = referencing.Registry().with_resources(
            (uri, (rj.specification_with(doc["$schema"], default=default)
                   if isinstance(doc, dict) and isinstance(doc.get("$schema"), str) else default)
             .create_resource(doc)) for uri, doc in remotes().items())
    return _registries[dialect]


def vocab() -> Vocab:
    if not _vocab:
        _vocab.append(Vocab.from_gguf(VOCAB_PATH))
    return _vocab[0]


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def mode_note(options: dict | None = None) -> str:
    if options == GENERATION_OPTIONS:
        return ("mode: the generation default (compile_schema's defaults: extra_properties='omit', "
                "untyped='infer', free_depth=2, max_depth=3), format_mode='assert'")
    return ("mode: " + ", ".join(f"{k}={v!r}" for k, v in (options or COMPILE_OPTIONS).items()) +
            " (spec-faithful; the generation default is extra_properties='omit', "
            "format_mode='assert', untyped='infer')")


def _jsonschema_rejects_all(schema: Any, tests: list[dict], registry: Any = None) -> bool:
    import jsonschema
    import referencing
    import referencing.jsonschema as rj
    cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                              default=jsonschema.Draft202012Validator)
    reg = registry if isinstance(registry, referencing.Registry) else referencing.Registry().with_resources(
        (uri, rj.specification_with(doc.get("$schema", ""), default=rj.DRAFT202012).create_resource(doc)
         if isinstance(doc, dict) else rj.DRAFT202012.create_resource(doc)) for uri, doc in remotes().items())
    v = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=reg)
    return not any(v.is_valid(t["data"]) for t in tests)


def check_schema(schema: Any, tests: Iterable[dict], timeout: float, options: dict | None = None,
                 registry: Any = None) -> dict:
    """Compile ``schema`` (with ``options``, default COMPILE_OPTIONS; remote documents from
    ``registry``, default :func:`remotes`) and run its tests.  Returns a status record."""
    tests = list(tests)
    rec: dict[str, Any] = {"status": "compiled"}
    v = vocab()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    t0 = time.perf_counter()
    try:
        try:
            opts = dict(options or COMPILE_OPTIONS)
            reg = registry if registry is not None else remotes() or None
            try:
                g = compile_schema(schema, registry=reg, **opts)
                cg = compile_grammar(g.grammar, v, max_states=max_states_for(options), backend="auto")
            except LimitError as e:  # refused on an estimate: tried past it, as Compiler does
                if not e.estimated:
                    raise
                lim = past_estimates(opts.get("limits", DEFAULT_LIMITS))
                g = compile_schema(schema, registry=reg, **dict(opts, limits=lim))
                cg = compile_grammar(g.grammar, v, max_states=max_states_for(options), backend="auto",
                                     limits=lim)
        finally:  # the alarm may still fire in here: the outer handler catches it
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        return {"status": "timeout"}
    except LimitError as e:
        if getattr(e, "limit", None) == "max_compile_seconds" or "max_compile_seconds" in str(e):
            # the compile deadline is wall-clock time, like the runner's own timeout: machine load
            return {"status": "timeout", "reason": str(e)[:200]}
        return {"status": "limit", "reason": str(e)[:200]}
    except UnsatisfiableSchemaError as e:
        return {"status": "unsatisfiable", "reason": str(e)[:200], "tests": len(tests),
                "jsonschema_rejects_all": _jsonschema_rejects_all(schema, tests, registry)}
    except DecodingError as e:
        return {"status": "error", "reason": str(e)[:200]}
    except RecursionError:
        return {"status": "limit", "reason": "recursion"}
    rec["ms"] = round((time.perf_counter() - t0) * 1000, 3)
    if hasattr(cg, "pushdown"):
        rec["backend"] = "pushdown"
        rec["states"] = cg.pushdown.n_states
    else:  # (dfa, counted, or lazy: the states made so far)
        rec["backend"] = cg.backend
        rec["states"] = cg.dfa.n_states
    va = vt = ia = it = 0
    rejected: list[str] = []
    accepted_invalid: list[str] = []
    for i, t in enumerate(tests):
        try:
            text = canonicalize(schema, t["data"])
        except (TypeError, ValueError):
            text = json.dumps(t["data"])
        ok = cg.accepts(text.encode("utf-8"))
        if t["valid"]:
            vt += 1
            va += ok
            if not ok:
                rejected.append(f"{i}: {t.get('description', '')[:60]}: {text[:80]}")
        else:
            it += 1
            ia += ok
            if ok:
                accepted_invalid.append(f"{i}: {t.get('description', '')[:60]}: {text[:80]}")
    rec.update(valid=vt, valid_accepted=va, invalid=it, invalid_accepted=ia)
    if rejected:
        rec["valid_rejected"] = rejected
    if accepted_invalid:
        rec["invalid_accepted_list"] = accepted_invalid
    return rec


def run_suite(timeout: float, suite: str = "draft2020-12") -> dict:
    suite_dir, _, dialect = SUITES[suite]
    registry = suite_registry(dialect)
    files: dict[str, dict] = {}
    groups: dict[str, dict] = {}
    for path in sorted(suite_dir.glob("*.json")):
        data = json.loads(path.read_text())
        agg = dict(groups=0, compiled=0, unsatisfiable=0, valid=0, valid_accepted=0, invalid=0,
                   invalid_accepted=0)
        for gi, grp in enumerate(data):
            rec = check_schema(with_dialect(grp["schema"], dialect), grp["tests"], timeout, registry=registry)
            rec["description"] = grp["description"]
            groups[f"{path.stem}#{gi}"] = rec
            agg["groups"] += 1
            if rec["status"] == "unsatisfiable" and rec["jsonschema_rejects_all"]:
                agg["unsatisfiable"] += 1
            if rec["status"] == "compiled":
                agg["compiled"] += 1
                for k in ("valid", "valid_accepted", "invalid", "invalid_accepted"):
                    agg[k] += rec[k]
        files[path.stem] = agg
    out = {"note": CANONICAL_NOTE, "mode": dict(COMPILE_OPTIONS), "files": files, "schemas": groups}
    if suite != "draft2020-12":
        out["suite"] = suite
    return out


def bench_files(split: str, limit: int | None) -> list[Path]:
    files = sorted((BENCH_DIR / split).glob("*.json"))
    if limit is not None and limit < len(files):
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    return files


def run_bench(splits: Iterable[str], limit: int | None, timeout: float, options: dict | None = None) -> dict:
    options = BENCH_OPTIONS if options is None else options
    out_splits: dict[str, dict] = {}
    schemas: dict[str, dict] = {}
    for split in splits:
        times: list[float] = []
        agg: dict[str, Any] = dict(schemas=0, compiled=0, unsatisfiable=0, valid=0, valid_accepted=0,
                                   invalid=0, invalid_accepted=0, limit=limit)
        for path in bench_files(split, limit):
            data = json.loads(path.read_text())
            rec = check_schema(data["schema"], data["tests"], timeout, options)
            schemas[f"{split}/{path.name}"] = rec
            agg["schemas"] += 1
            if rec["status"] == "unsatisfiable" and rec["jsonschema_rejects_all"]:
                agg["unsatisfiable"] += 1
            if rec["status"] == "compiled":
                agg["compiled"] += 1
                times.append(rec["ms"])
                for k in ("valid", "valid_accepted", "invalid", "invalid_accepted"):
                    agg[k] += rec[k]
        if times:
            qs = statistics.quantiles(times, n=100) if len(times) > 1 else [times[0]] * 99
            agg["compile_ms_p50"] = round(statistics.median(times), 2)
            agg["compile_ms_p99"] = round(qs[98], 2)
        out_splits[split] = agg
    return {"note": CANONICAL_NOTE, "mode": dict(options), "limit": limit,
            "splits": out_splits, "schemas": schemas}


def regressions(new: dict, base: dict) -> list[str]:
    """Schemas that got worse than in ``base`` (only those present in both runs)."""
    out = []
    for key, old in base.get("schemas", {}).items():
        cur = new.get("schemas", {}).get(key)
        if cur is None:
            continue
        if old["status"] == "compiled" and cur["status"] != "compiled":
            if cur["status"] == "timeout":
                continue  # machine load; not a semantic regression
            out.append(f"{key}: no longer compiles ({cur.get('reason', cur['status'])})")
        elif cur["status"] == "compiled" and old["status"] == "compiled" and \
                cur["valid_accepted"] < old["valid_accepted"]:
            out.append(f"{key}: valid accepted {old['valid_accepted']} -> {cur['valid_accepted']}")
    for key, cur in new.get("schemas", {}).items():
        if cur.get("invalid_accepted"):
            out.append(f"{key}: {cur['invalid_accepted']} invalid instance(s) accepted")
    return out


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def print_suite(res: dict) -> None:
    print(f"JSON-Schema-Test-Suite {res.get('suite', 'draft2020-12')} ({res['note']}; {mode_note()})")
    print(f"{'file':28} {'groups':>7} {'compiled':>9} {'unsat':>6} {'valid acc':>12} {'invalid acc':>12}")
    tot = dict(groups=0, compiled=0, unsatisfiable=0, valid=0, valid_accepted=0, invalid=0,
               invalid_accepted=0)
    for f, a in res["files"].items():
        print(f"{f:28} {a['groups']:>7} {a['compiled']:>9} {a.get('unsatisfiable', 0):>6} "
              f"{a['valid_accepted']:>5}/{a['valid']:<6} {a['invalid_accepted']:>5}/{a['invalid']:<6}")
        for k in tot:
            tot[k] += a.get(k, 0)
    print(f"{'TOTAL':28} {tot['groups']:>7} {tot['compiled']:>9} {tot['unsatisfiable']:>6} "
          f"{tot['valid_accepted']:>5}/{tot['valid']:<6} {tot['invalid_accepted']:>5}/{tot['invalid']:<6}")


def print_bench(res: dict) -> None:
    print(f"JSONSchemaBench (limit={res['limit']}; {res['note']}; {mode_note(res['mode'])})")
    print("compiled % = compiled / (schemas - unsatisfiable); unsatisfiable = proved to have no "
          "valid instance, with jsonschema rejecting every test instance")
    print(f"{'split':16} {'schemas':>8} {'unsat':>6} {'compiled':>15} {'valid accepted':>22} {'invalid acc':>12} "
          f"{'p50 ms':>8} {'p99 ms':>8}")
    for s, a in res["splits"].items():
        den = a["schemas"] - a.get("unsatisfiable", 0)
        print(f"{s:16} {a['schemas']:>8} {a.get('unsatisfiable', 0):>6} {a['compiled']:>6} ({_pct(a['compiled'], den):>6}) "
              f"{a['valid_accepted']:>6}/{a['valid']:<6} ({_pct(a['valid_accepted'], a['valid']):>6}) "
              f"{a['invalid_accepted']:>5}/{a['invalid']:<6} {a.get('compile_ms_p50', '-'):>8} "
              f"{a.get('compile_ms_p99', '-'):>8}")


def failure_kind(rec: dict) -> str:
    """A short class for a schema that did not compile: status and reason minus the pointer."""
    reason = re.sub(r"^\S*: ", "", rec.get("reason", ""))
    m = re.match(r"keyword '([^']*)' ", reason)
    kw = f"[{m.group(1)}] " if m else ""
    reason = reason[m.end():] if m else reason
    reason = kw + re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", reason)
    return f"{rec['status']}: {reason[:90]}"


def print_bench_failures(res: dict) -> None:
    """Failure classes per split (most common first), then each failing schema."""
    by_split: dict[str, Counter] = {}
    for key, rec in res["schemas"].items():
        if rec["status"] != "compiled":
            by_split.setdefault(key.split("/", 1)[0], Counter())[failure_kind(rec)] += 1
    for split, cnt in by_split.items():
        print(f"failures in {split}:")
        for kind, n in cnt.most_common():
            print(f"  {n:4} {kind}")
    for key, rec in res["schemas"].items():
        if rec["status"] != "compiled":
            print(f"  not compiled {key}: {rec['status']} {rec.get('reason', '')}")
        for line in rec.get("valid_rejected", []):
            print(f"  rejected valid {key}: {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="rewrite the baselines")
    ap.add_argument("--suite-only", action="store_true")
    ap.add_argument("--bench-only", action="store_true")
    ap.add_argument("--suite", choices=tuple(SUITES), default="draft2020-12",
                    help="JSON-Schema-Test-Suite files: draft2020-12 (../shared) or the draft7 core files "
                         "(evals/conformance/fixtures/draft7, baseline json_schema_test_suite_draft7.json)")
    ap.add_argument("--split", action="append", choices=SPLITS)
    ap.add_argument("--limit", type=int, default=None, help="schemas per split (evenly spaced)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per schema compile")
    ap.add_argument("--failures", action="store_true", help="list schemas that did not compile (grouped by reason) and rejected valid instances")
    ap.add_argument("--mode", choices=("spec", "generation"), default="spec",
                    help="JSONSchemaBench compile options: spec-faithful (default, the ratchet baseline) or the "
                         "generation default (baseline jsonschemabench_generation.json); the suite is always spec")
    args = ap.parse_args(argv)
    bad: list[str] = []
    if not args.bench_only:
        res = run_suite(args.timeout, args.suite)
        suite_base = SUITES[args.suite][1]
        print_suite(res)
        if args.failures:
            for k, r in res["schemas"].items():
                for line in r.get("valid_rejected", []):
                    print(f"  rejected valid {k}: {line}")
        if args.update:
            suite_base.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
        elif suite_base.exists():
            base = json.loads(suite_base.read_text())
            if base.get("mode") != res["mode"]:
                bad.append(f"baseline mode {base.get('mode')} differs from {res['mode']}: rerun with --update")
            bad += regressions(res, base)
    if not args.suite_only:
        generation = args.mode == "generation"
        bench_base = GENERATION_BASE if generation else BENCH_BASE
        res = run_bench(args.split or SPLITS, args.limit, args.timeout,
                        GENERATION_OPTIONS if generation else BENCH_OPTIONS)
        print_bench(res)
        if args.failures:
            print_bench_failures(res)
        if args.update:
            if bench_base.exists() and (args.limit is not None or args.split):
                old = json.loads(bench_base.read_text())
                old["schemas"].update(res["schemas"])
                old["splits"].update(res["splits"])
                old["limit"] = res["limit"]
                old["mode"] = res["mode"]
                old["note"] = res["note"]
                res = old
            bench_base.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
        elif bench_base.exists():
            base = json.loads(bench_base.read_text())
            if base.get("mode") != res["mode"]:
                bad.append(f"baseline mode {base.get('mode')} differs from {res['mode']}: rerun with --update")
            bad += regressions(res, base)
    for b in bad:
        print("REGRESSION", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
