"""GBNF coverage on JSONSchemaBench: our emitted GBNF vs llama.cpp's json_schema_to_grammar.

For every schema of each split, both converters produce GBNF:
  ours   compile_schema(schema).grammar -> decoding.backends.gbnf.emit.to_gbnf
  llama  llama_cpp.llama_grammar.json_schema_to_gbnf (what LlamaGrammar.from_json_schema uses)
A schema counts as converted when the converter returns text *and* llama.cpp's parser
accepts it (decoding.backends.gbnf.check.check_gbnf).  Each test instance is then fed to
llama.cpp's grammar engine as Llama-3 BPE tokens of one serialization: the canonical form
(decoding.frontends.jsonschema.canonicalize: compact, keys in schema order), or compact json.dumps when
canonicalization fails.  Instances of schemas that did not convert count as rejected.

Run:  PYTHONPATH=. .venv/bin/python evals/gbnf/coverage.py --limit 40
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from decoding.errors import DecodingError  # noqa: E402
from decoding.backends.gbnf.check import LlamaGrammarEngine  # noqa: E402
from decoding.backends.gbnf.emit import to_gbnf  # noqa: E402
from decoding.frontends.jsonschema import canonicalize, compile_schema  # noqa: E402

BENCH = ROOT / ".." / "shared" / "corpora" / "jsonschemabench"
SPLITS = ["Glaiveai2K", "Github_trivial", "Github_easy", "Kubernetes", "Snowplow"]


def ours(schema) -> str:
    # with compile_schema's default size guard (LimitError counts as not converted)
    return to_gbnf(compile_schema(schema).grammar)


def llamas(schema) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf
    return json_schema_to_gbnf(json.dumps(schema))


def serialize(schema, data) -> bytes:
    try:
        return canonicalize(schema, data).encode()
    except Exception:  # noqa: BLE001 - invalid instances may not canonicalize
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout()


def score(split: str, limit: int | None, timeout: int) -> dict:
    files = sorted((BENCH / split).glob("*.json"))[:limit]
    row = {"split": split, "schemas": len(files), "valid": 0, "invalid": 0}
    for name in ("ours", "llama"):
        row[name] = {"converted": 0, "valid_acc": 0, "invalid_acc": 0, "errors": {}}
    for f in files:
        doc = json.loads(f.read_text())
        schema, tests = doc["schema"], doc["tests"]
        insts = [(serialize(schema, t["data"]), bool(t["valid"])) for t in tests]
        insts = [(s, v) for s, v in insts if b"\x00" not in s]
        row["valid"] += sum(v for _, v in insts)
        row["invalid"] += sum(not v for _, v in insts)
        for name, conv in (("ours", ours), ("llama", llamas)):
            r = row[name]
            signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(timeout)
            try:
                try:
                    eng = LlamaGrammarEngine(conv(schema))
                except _Timeout:
                    raise
                except (DecodingError, Exception) as e:  # noqa: BLE001 - llama's converter raises anything
                    k = type(e).__name__
                    r["errors"][k] = r["errors"].get(k, 0) + 1
                    continue
                r["converted"] += 1
                try:
                    for s, valid in insts:
                        if eng.accepts(s):
                            r["valid_acc" if valid else "invalid_acc"] += 1
                except _Timeout:
                    r["errors"]["instance-timeout"] = r["errors"].get("instance-timeout", 0) + 1
            except _Timeout:
                r["errors"]["conversion-timeout"] = r["errors"].get("conversion-timeout", 0) + 1
            finally:
                signal.alarm(0)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="schemas per split (default all)")
    ap.add_argument("--splits", nargs="*", default=SPLITS)
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    ap.add_argument("--timeout", type=int, default=20,
                    help="seconds per schema and converter (conversion + instances)")
    args = ap.parse_args(argv)
    rows = []
    t0 = time.time()
    for split in args.splits:
        rows.append(score(split, args.limit, args.timeout))
        print(f"{split} done ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)
    hdr = ("split", "schemas", "conv ours", "conv llama", "valid", "valid acc ours",
           "valid acc llama", "invalid", "invalid acc ours", "invalid acc llama")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        o, l = r["ours"], r["llama"]
        print(f"| {r['split']} | {r['schemas']} | {o['converted']} | {l['converted']} | {r['valid']} | "
              f"{o['valid_acc']} | {l['valid_acc']} | {r['invalid']} | {o['invalid_acc']} | "
              f"{l['invalid_acc']} |")
    for r in rows:
        for name in ("ours", "llama"):
            if r[name]["errors"]:
                print(f"{r['split']} {name} failures: {r[name]['errors']}")
    print(f"({time.time() - t0:.0f}s)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if any(r["ours"]["invalid_acc"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
