"""Score the guard on the damaged-output corpus and benchmark it on a 2 KB document.

    PYTHONPATH=. .venv/bin/python evals/guard/run.py [--corpus evals/guard/corpus.jsonl]

Without --corpus the corpus is generated in memory (make_corpus.generate, seed 0).
Prints one table of rates and the p50/p99 latency of extract+validate+repair.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_corpus  # noqa: E402

from decoding.dtd import parse_dtd  # noqa: E402
from decoding.guard import extract_json, extract_xml, guard_json, guard_xml  # noqa: E402


def _oracle_xml(doc: str, dtd_name: str, cache: dict) -> bool:
    from lxml import etree
    if dtd_name not in cache:
        cache[dtd_name] = etree.DTD(str(make_corpus.SHARED / "dtd" / dtd_name))
    return make_corpus._lxml_valid(doc, cache[dtd_name])


def _oracle_json(text: str, schema: dict) -> bool:
    import jsonschema
    try:
        value = json.loads(text)
    except ValueError:
        return False
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema).is_valid(value)


def classify(cases: list[dict]) -> dict:
    """Run the guard on every case; return counters (see the printed table)."""
    dtds: dict = {}
    lx: dict = {}
    c = {k: 0 for k in ("n", "extract_ok", "invalid", "flagged", "valid", "false_pos",
                        "rep_true", "rep_true_ok", "rep_false", "rep_false_refused",
                        "rep_cond", "rep_cond_ok", "bad_repair", "valid_changed",
                        "restored_exact")}
    failures: list[str] = []
    for case in cases:
        c["n"] += 1
        text = case["text"]
        it = case["intended"]
        if case["kind"] == "xml":
            if case["dtd"] not in dtds:
                dtds[case["dtd"]] = parse_dtd((make_corpus.SHARED / "dtd" / case["dtd"]).read_text())
            dtd = dtds[case["dtd"]]
            fr = extract_xml(text, root=case["root"])
            got = fr and {"prolog_start": fr.prolog_start, "start": fr.start, "end": fr.end}
            res = guard_xml(text, dtd, root=case["root"], repair=True)
            plain = guard_xml(text, dtd, root=case["root"])
            oracle = ((lambda d: _oracle_xml(d, case["dtd"], lx)) if case.get("oracle")
                      else (lambda d: guard_xml(d, dtd, root=case["root"]).ok))
            intended_doc = text[it["prolog_start"]:it["end"]]
        else:
            fr = extract_json(text)
            got = fr and {"start": fr.start, "end": fr.end}
            res = guard_json(text, case["schema"], repair=True)
            plain = guard_json(text, case["schema"])
            oracle = lambda d: _oracle_json(d, case["schema"])  # noqa: E731
            intended_doc = text[it["start"]:it["end"]]
        if got == it:
            c["extract_ok"] += 1
        else:
            failures.append(f"extract {case['id']} {case['mutation']}: got {got} want {it}")
        if case["valid"]:
            c["valid"] += 1
            if not plain.ok:
                c["false_pos"] += 1
                failures.append(f"false positive {case['id']}: {plain.errors[:1]}")
            if res.text != intended_doc:
                c["valid_changed"] += 1
                failures.append(f"valid doc changed {case['id']}")
        else:
            c["invalid"] += 1
            if not plain.ok:
                c["flagged"] += 1
            else:
                failures.append(f"not flagged {case['id']} {case['mutation']}")
        if res.ok:
            if not oracle(res.text):
                c["bad_repair"] += 1
                failures.append(f"repair output invalid per oracle {case['id']}")
            if res.text == case["original"]:
                c["restored_exact"] += 1
        rep = case["repairable"]
        if rep is True:
            c["rep_true"] += 1
            c["rep_true_ok"] += res.ok
            if not res.ok:
                failures.append(f"not repaired {case['id']} {case['mutation']}: "
                                f"{res.repair.refused if res.repair else res.errors[:1]}")
        elif rep is False:
            c["rep_false"] += 1
            c["rep_false_refused"] += not res.ok
        else:
            c["rep_cond"] += 1
            c["rep_cond_ok"] += res.ok
    c["failures"] = failures
    return c


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:6.2f}% ({a}/{b})" if b else "   n/a"


def bench(n: int = 2000) -> list[tuple[str, float, float, int]]:
    """p50/p99 microseconds of guard_*(repair=True) on ~2 KB outputs."""
    rows = []
    base = make_corpus.SHARED / "dtd"
    plist_dtd = parse_dtd((base / "PropertyList-1.0.dtd").read_text())
    docs = sorted((base / "instances" / "apple-plist").iterdir(), key=lambda f: abs(f.stat().st_size - 2048))
    doc = docs[0].read_text().strip()
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string", "format": "date"},
                                         "n": {"type": "integer"}}, "required": ["city", "date"]}}},
              "required": ["items"]}
    jdoc = json.dumps({"items": [{"city": "北京市", "date": "2024-06-15", "n": i} for i in range(40)]},
                      ensure_ascii=False)
    while len(jdoc.encode()) > 2048:
        d = json.loads(jdoc)
        d["items"].pop()
        jdoc = json.dumps(d, ensure_ascii=False)
    cases = [
        ("xml valid + prose", len(doc.encode()), lambda: guard_xml("Here is the XML:\n" + doc + "\nDone.",
                                                                    plist_dtd, root="plist", repair=True)),
        ("xml truncated (repair)", len(doc.encode()) // 2 * 2,
         lambda: guard_xml(doc[: len(doc) - 40], plist_dtd, root="plist", repair=True)),
        ("xml stray & (repair)", len(doc.encode()),
         lambda: guard_xml(doc.replace("</string>", " & </string>", 1), plist_dtd, root="plist", repair=True)),
        ("json valid + prose", len(jdoc.encode()), lambda: guard_json("Result: " + jdoc + " ok", schema, repair=True)),
        ("json truncated (repair)", len(jdoc.encode()),
         lambda: guard_json(jdoc[:-30], schema, repair=True)),
    ]
    for name, size, fn in cases:
        for _ in range(50):
            fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort()
        rows.append((name, statistics.median(ts), ts[int(0.99 * len(ts)) - 1], size))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus")
    ap.add_argument("--bench-n", type=int, default=2000)
    ap.add_argument("--show-failures", type=int, default=10)
    args = ap.parse_args()
    if args.corpus:
        cases = [json.loads(line) for line in open(args.corpus, encoding="utf-8")]
    else:
        cases = make_corpus.generate(0)
    t0 = time.perf_counter()
    c = classify(cases)
    dt = time.perf_counter() - t0
    print(f"guard corpus: {c['n']} cases ({sum(x['kind'] == 'xml' for x in cases)} XML, "
          f"{sum(x['kind'] == 'json' for x in cases)} JSON), classified in {dt:.1f} s")
    print(f"| metric | result | target |\n|---|---|---|")
    print(f"| extraction finds the intended fragment | {_pct(c['extract_ok'], c['n'])} | >= 99% |")
    print(f"| validation flags invalid cases | {_pct(c['flagged'], c['invalid'])} | 100% |")
    print(f"| validation false positives on valid cases | {_pct(c['false_pos'], c['valid'])} | 0 |")
    print(f"| repair -> valid, README-repairable cases | {_pct(c['rep_true_ok'], c['rep_true'])} | 100% |")
    print(f"| valid document changed by repair | {c['valid_changed']} of {c['valid']} | 0 |")
    print(f"| repaired output invalid per oracle | {c['bad_repair']} | 0 |")
    print(f"| refused, README-unrepairable cases | {_pct(c['rep_false_refused'], c['rep_false'])} | (info) |")
    print(f"| repaired, truncations (conditional) | {_pct(c['rep_cond_ok'], c['rep_cond'])} | (info) |")
    print(f"| repair restored the original exactly | {c['restored_exact']} | (info) |")
    for f in c["failures"][: args.show_failures]:
        print("  !", f)
    print("\n| 2 KB benchmark (extract+validate+repair) | bytes | p50 us | p99 us |\n|---|---|---|---|")
    for name, p50, p99, size in bench(args.bench_n):
        print(f"| {name} | {size} | {p50:.0f} | {p99:.0f} |")


if __name__ == "__main__":
    main()
