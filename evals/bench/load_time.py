"""Load-time benchmark of the shipped grammars (grammars/manifest.json) for SmolLM2's tokenizer.

For each grammar: time to a ready matcher (``Matcher(cg).mask()`` returns the first mask)
  - cold: front-end + key + automaton + the first mask (``Compiler(vocab, cache=False)``:
    compile at request time, lazy index);
  - artifact: read + verify (sha256) + load an on-disk artifact (``load_artifact``);
  - disk cache: ``Compiler(vocab, cache=GrammarCache(dir)).compile_file(source)`` in a fresh
    cache over a warm directory (front-end + canonical key + artifact load);
  - memory: ``Compiler.compile_file`` hit in the in-process LRU;
plus the full build time (all masks), the artifact size and the resident memory of a loaded
grammar (tracemalloc: after load, and after every state's mask was used once), against the
dense in-memory index a runtime compile holds.  Times are p50 over repeats.

    PYTHONPATH=. .venv/bin/python evals/bench/load_time.py [--write-doc docs/artifacts.md]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from decoding.artifacts.format import load_artifact, read_artifact, write_artifact  # noqa: E402
from decoding.artifacts.cache import GrammarCache  # noqa: E402
from decoding.compiler import Compiler  # noqa: E402
from decoding.runtime.matcher import Matcher  # noqa: E402
from decoding.models import model_path  # noqa: E402
from decoding.frontends.sources import load_manifest, read_source  # noqa: E402
from decoding.vocab import Vocab  # noqa: E402

MB = 1 << 20


def p50(fn, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


@contextlib.contextmanager
def quiet():
    sys.stderr.flush()
    fd, saved = 2, os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), fd)
    try:
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def resident(path: Path, vocab: Vocab) -> tuple[int, int]:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    cg = load_artifact(path, vocab)
    Matcher(cg).mask()
    after_load = tracemalloc.get_traced_memory()[0] - base
    cg.precompute()  # every state's mask (the artifact's back-end, the DFA, has them all)
    after_all = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return after_load, after_all


def bench(entry: dict, vocab: Vocab, workdir: Path, repeats: int) -> dict:
    path, kind, opts, name = entry["path"], entry["kind"], entry["options"], entry["name"]
    text = read_source(path)
    base = os.path.dirname(os.path.abspath(path))

    t0 = time.perf_counter()
    full = Compiler(vocab, cache=False, eager=True).compile_file(path, kind, **opts)
    build_s = time.perf_counter() - t0
    art = workdir / f"{name}.gdc"
    size = write_artifact(full, art, name=name, kind=kind, options=opts)
    st = full.stats()
    dense_bytes = st["mask_bytes"] + st.get("table_bytes", 0)  # masks + the DFA's transition table

    def cold():
        cg = Compiler(vocab, cache=False).compile_source(text, kind, name=str(path), base_dir=base, **opts)
        Matcher(cg).mask()

    t0 = time.perf_counter()
    cold()
    first_cold = time.perf_counter() - t0
    cold_ms = first_cold * 1e3 if first_cold > 2.0 else p50(cold, 3)

    def from_artifact():
        Matcher(load_artifact(art, vocab)).mask()

    artifact_ms = p50(from_artifact, repeats)

    cdir = workdir / "cache"
    Compiler(vocab, cache=GrammarCache(cdir)).compile_file(path, kind, **opts)

    def from_disk_cache():
        Matcher(Compiler(vocab, cache=GrammarCache(cdir)).compile_file(path, kind, **opts)).mask()

    disk_ms = p50(from_disk_cache, max(20, repeats // 4))
    mem = Compiler(vocab, cache=GrammarCache(False))
    mem.compile_file(path, kind, **opts)

    def from_memory():
        Matcher(mem.compile_file(path, kind, **opts)).mask()

    memory_ms = p50(from_memory, repeats * 5)
    r_load, r_all = resident(art, vocab)
    h = read_artifact(art).header
    return {"name": name, "states": st["states"], "masks": h["index"]["n_masks"], "build_s": build_s,
            "cold_ms": cold_ms, "artifact_ms": artifact_ms, "disk_cache_ms": disk_ms, "memory_ms": memory_ms,
            "artifact_bytes": size, "resident_load": r_load, "resident_all": r_all, "dense_runtime": dense_bytes}


def table(rows: list[dict]) -> str:
    head = ("| grammar | states | masks | build (all masks) | cold → ready | artifact → ready | disk cache → ready "
            "| in-process cache | artifact size | resident after load | resident, all states used | runtime compile holds |")
    out = [head, "|" + "---|" * 12]
    for r in rows:
        out.append(f"| {r['name']} | {r['states']} | {r['masks']} | {r['build_s']:.2f} s | {r['cold_ms']:.1f} ms "
                   f"| **{r['artifact_ms']:.2f} ms** | {r['disk_cache_ms']:.2f} ms | {r['memory_ms'] * 1e3:.0f} µs "
                   f"| {r['artifact_bytes'] / 1024:.0f} KB | {r['resident_load'] / MB:.2f} MB "
                   f"| **{r['resident_all'] / MB:.2f} MB** | {r['dense_runtime'] / MB:.2f} MB |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default=str(ROOT / "grammars" / "manifest.json"))
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--only", nargs="*", help="grammar names")
    ap.add_argument("--json", help="also write the rows as JSON here")
    ap.add_argument("--write-doc", help="write the markdown report (docs/artifacts.md)")
    args = ap.parse_args()
    with quiet():
        vocab = Vocab.from_gguf(model_path("smollm2"))
    vocab.fingerprint  # noqa: B018
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for e in load_manifest(args.manifest):
            if args.only and e["name"] not in args.only:
                continue
            rows.append(bench(e, vocab, Path(tmp), args.repeats))
            print(f"{e['name']}: done", file=sys.stderr, flush=True)
    t = table(rows)
    env = (f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}, "
           f"tokenizer {vocab.name} ({vocab.n_tokens} tokens), {args.repeats} repeats (p50)")
    print(t)
    print(env)
    worst_load = max(r["artifact_ms"] for r in rows)
    worst_mem = max(r["resident_all"] for r in rows)
    print(f"targets: artifact load p50 <= 2 ms: worst {worst_load:.2f} ms; "
          f"memory <= 1 MB per grammar: worst {worst_mem / MB:.2f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.write_doc:
        Path(args.write_doc).write_text(DOC.format(table=t, env=env, worst_load=worst_load,
                                                   worst_mem=worst_mem / MB))
    return 0


DOC = """# Precompiled grammar artifacts

Grammars shipped with a product are compiled at build time and loaded in about a
millisecond at run time.

```sh
make grammars   # = python -m decoding compile --manifest grammars/manifest.json --model smollm2 -o build/grammars
python -m decoding demo                      # loads build/grammars/*.gdc, prints load times, generates
python -m decoding inspect build/grammars/get_weather.gdc
python -m decoding generate --grammar build/grammars/get_weather.gdc --prompt "Weather in 北京市 on 2025-06-01?"
```

`compile` skips artifacts that are up to date (same canonical key) unless `--force`.
At run time, `decoding.Compiler(tokenizer, cache=True).compile_file(source, **options)` looks a
grammar up in an in-process LRU, then in the cache directory (`GUARDED_DECODING_CACHE`, else
`$XDG_CACHE_HOME/guarded-decoding`, else `~/.cache/guarded-decoding`), and compiles (and
stores) it only on a miss; `decoding.artifacts.format.load_artifact(path, vocab)` loads one file.

## Format (version 1, pinned by `tests/test_artifact.py`)

A 24-byte prelude (magic `\\x89GDA\\r\\n\\x1a\\n`, format version, header length, body
length), a JSON header (canonical grammar key and IR digest, tokenizer fingerprint, name,
kind, front-end options, depth bound, sizes, source text, section table), 64-byte aligned
sections, and a sha256 of everything before it. Sections: the DFA (`byte_class`,
`accepting`, transitions dense or CSR), the token index (`state_mask`: state → mask id;
distinct masks stored dense or as the sorted ids of the allowed or of the disallowed tokens,
whichever is smallest) and the budget tables (`min_tokens`, `worst_successor`), so nothing
is walked at run time. The file is read in one go and checked (size, magic, version,
checksum, then every bound and value range) before anything is used; the tokenizer
fingerprint must match the model's. Dense sections are zero-copy views of the buffer;
sparse masks expand on first use into a bounded LRU (32 masks).

The key is the sha256 of the canonical IR (sorted-key JSON of `decoding.ir.to_data`) plus
the tokenizer fingerprint and the format version: JSON whitespace and keyword order, DTD
whitespace, comments and parameter entities, GBNF whitespace and comments do not change it.
The order of a schema's `properties` does: it is the order the fields are generated in.

## Numbers

`PYTHONPATH=. .venv/bin/python evals/bench/load_time.py --write-doc docs/artifacts.md`

{table}

{env}. "→ ready": until `Matcher(cg).mask()` returns the first mask. "cold": front-end + key +
automaton + first mask (lazy index); "build": all masks, as `compile` does. "disk cache":
`Compiler.compile_file(source)` with an empty LRU over a warm directory (includes the front-end
and the key). Resident memory is measured with tracemalloc (file buffer, expanded DFA
tables, expanded sparse masks); "runtime compile holds" is the dense masks plus
transition table of the same grammar compiled in process.

Targets: artifact load p50 ≤ 2 ms (worst here {worst_load:.2f} ms); memory ≤ 1 MB per
shipped grammar for the 49,152-token vocabulary (worst here {worst_mem:.2f} MB).

Where a grammar exceeds 1 MB (here `plist`: about 10k states × 81 byte classes), the excess
is the automaton's dense int32 transition table (states × columns × 4 bytes) that the
matcher walks in memory; it is stored as CSR in the artifact and expanded on load. The
token-index part stays under 0.5 MB for every shipped grammar. Meeting the target for such
grammars needs a compact transition table in the core (int16 targets, or row-compressed
rows) or a smaller depth bound for the plist profile.
"""

if __name__ == "__main__":
    sys.exit(main())
