"""Keyword table: this project and its peers on the JSON-Schema-Test-Suite's keyword files.

    python -m evals.conformance.peers [--engines ours,llguidance,xgrammar,outlines-core,llama.cpp]
                                      [--timeout S] [--docs]

For every draft2020-12 suite file named after a keyword (``FILE_KEYWORDS``: ``ref`` and
``refRemote`` count for ``$ref``, ``dynamicRef`` for ``$dynamicRef``/``$dynamicAnchor``,
``if-then-else`` for ``if``/``then``/``else`` ...) each engine compiles every group's schema and
checks every test instance.  Per keyword (summed over its files): groups compiled / groups,
valid instances accepted / valid instances in compiled groups, invalid instances accepted /
invalid instances in compiled groups.

How acceptance is decided:

- ours: ``evals.conformance.run.check_schema`` (spec-faithful options ``run.COMPILE_OPTIONS``,
  the suite's ``remotes/`` as registry): byte-level ``accepts`` of the canonical text;
- llguidance, xgrammar, outlines-core: the adapters of MaskBench (``evals.bench.engines``),
  configured for compact JSON; the instance is spelled canonically
  (``decoding.frontends.jsonschema.canonicalize``) and as compact ``json.dumps``, each form
  tokenized by llama.cpp's tokenizer for the llama-bpe vocabulary and walked through a
  fresh matcher, then EOS (end) must be allowed; accepted = some form accepted, as MaskBench;
- llama.cpp: ``llama_cpp.llama_grammar.json_schema_to_gbnf`` (llama.cpp's converter, as
  ``LlamaGrammar.from_json_schema``), parsed by llama.cpp's grammar sampler
  (``decoding.backends.gbnf.check.LlamaGrammarEngine``) and fed the same token forms, EOS
  allowed at the end.  Its grammar allows whitespace; the compact forms are in its language.

Peers get the schema as is (no registry: they cannot see the suite's remote documents).
A peer that is not installed gets "not installed" in its column.  Writes
evals/results/keywords/keywords.json and .md; ``--docs`` also rewrites the table in
docs/json-schema.md (between the ``keyword-table`` markers).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from evals.conformance import run

OUT_DIR = run.ROOT / "evals" / "results" / "keywords"
DOCS = run.ROOT / "docs" / "json-schema.md"
BEGIN, END = "<!-- keyword-table:begin -->", "<!-- keyword-table:end -->"
COMMAND = "PYTHONPATH=. python -m evals.conformance.peers --docs"
ENGINE_NAMES = ("ours", "llguidance", "xgrammar", "outlines-core", "llama.cpp")

#: every keyword of draft 2020-12 (core, applicator, unevaluated, validation, meta-data,
#: format-annotation and content vocabularies), in the specification's order
KEYWORDS = (
    "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
    "prefixItems", "items", "contains", "additionalProperties", "properties", "patternProperties",
    "dependentSchemas", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
    "unevaluatedItems", "unevaluatedProperties",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired",
    "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
    "format",
    "contentEncoding", "contentMediaType", "contentSchema",
)

#: suite files that are not named after keywords
NOT_KEYWORD_FILES = frozenset({"boolean_schema", "infinite-loop-detection"})
#: files whose name is not a keyword, or names more than one
_SPECIAL = {
    "ref": ("$ref",), "refRemote": ("$ref",), "anchor": ("$anchor",), "id": ("$id",),
    "defs": ("$defs",), "vocabulary": ("$vocabulary",), "dynamicRef": ("$dynamicRef", "$dynamicAnchor"),
    "if-then-else": ("if", "then", "else"),
    "content": ("contentEncoding", "contentMediaType", "contentSchema"),
}


def file_keywords(stem: str) -> tuple[str, ...]:
    """The keywords a suite file (by stem) tests: () for files not named after keywords."""
    if stem in NOT_KEYWORD_FILES:
        return ()
    if stem in _SPECIAL:
        return _SPECIAL[stem]
    return (stem,) if stem in KEYWORDS else ()


def keyword_files(stems: list[str]) -> dict[str, list[str]]:
    """keyword -> the suite files (stems) that test it, for every keyword of KEYWORDS."""
    out: dict[str, list[str]] = {k: [] for k in KEYWORDS}
    for s in sorted(stems):
        for k in file_keywords(s):
            out[k].append(s)
    return out


def _forms(schema: Any, data: Any) -> list[bytes]:
    from decoding.frontends.jsonschema import canonicalize
    out = []
    try:
        out.append(canonicalize(schema, data).encode("utf-8"))
    except Exception:  # noqa: BLE001 - the compact form still runs
        pass
    compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if compact not in out:
        out.append(compact)
    return out


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


class _Llama:
    """llama.cpp's JSON-Schema -> GBNF converter behind the adapter interface."""

    name = "llama.cpp"

    def setup(self, vocab: Any) -> None:
        try:
            from llama_cpp.llama_grammar import json_schema_to_gbnf
        except ImportError as e:
            from evals.bench.engines import Unavailable
            raise Unavailable(f"not installed ({e})") from None
        from decoding.backends.gbnf.check import LlamaGrammarEngine, load_vocab_model
        self.conv, self.Eng = json_schema_to_gbnf, LlamaGrammarEngine
        self.llm = load_vocab_model(run.VOCAB_PATH)

    def compile(self, schema: Any) -> Any:
        return self.Eng(self.conv(json.dumps(schema)), llm=self.llm)

    def accepts(self, h: Any, tokens: list[int], text: bytes) -> bool:
        return bool(h.accepts_tokens(tokens))

    def version(self) -> str:
        from evals.bench.engines import _version
        return "llama-cpp-python " + _version("llama_cpp_python")


def _make(name: str) -> Any:
    if name == "llama.cpp":
        return _Llama()
    from evals.bench.engines import make_engine
    return make_engine(name)


def run_peer(name: str, groups: list[tuple[str, int, dict]], vocab: Any, timeout: float) -> dict:
    """{"status": ..., "groups": {file#i: record}} for one peer engine."""
    from evals.bench.engines import Unavailable
    eng = _make(name)
    try:
        eng.setup(vocab)
    except Unavailable as e:
        return {"status": "not installed" if "not installed" in str(e) or "import failed" in str(e)
                else f"unavailable: {e}"}
    except Exception as e:  # noqa: BLE001 - a peer that cannot start is reported, not a crash
        return {"status": f"unavailable: {type(e).__name__}: {e}"[:200]}
    out: dict[str, dict] = {}
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for stem, gi, grp in groups:
            rec: dict[str, Any] = {}
            t0 = time.perf_counter()
            try:
                signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    h = eng.compile(grp["schema"])
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except _Timeout:
                h, rec = None, {"status": "timeout"}
            except Exception as e:  # noqa: BLE001 - a refusal, counted with its reason
                h, rec = None, {"status": "error", "reason": f"{type(e).__name__}: {str(e)[:160]}"}
            if h is not None and time.perf_counter() - t0 > timeout:  # native code ran past the clock
                h, rec = None, {"status": "timeout"}
            if h is not None:
                rec = {"status": "compiled", "valid": 0, "valid_accepted": 0, "invalid": 0, "invalid_accepted": 0}
                for t in grp["tests"]:
                    ok = False
                    for b in _forms(grp["schema"], t["data"]):
                        try:
                            ok = bool(eng.accepts(h, vocab.tokenize(b), b))
                        except Exception:  # noqa: BLE001 - an engine error on an instance: rejected
                            ok = False
                        if ok:
                            break
                    k = "valid" if t["valid"] else "invalid"
                    rec[k] += 1
                    rec[k + "_accepted"] += ok
            out[f"{stem}#{gi}"] = rec
    finally:
        signal.signal(signal.SIGALRM, old)
    return {"status": "ok", "version": eng.version(), "groups": out}


def run_ours(groups: list[tuple[str, int, dict]], timeout: float) -> dict:
    out = {}
    for stem, gi, grp in groups:
        r = run.check_schema(grp["schema"], grp["tests"], timeout)
        out[f"{stem}#{gi}"] = {k: r[k] for k in ("status", "valid", "valid_accepted", "invalid",
                                                  "invalid_accepted") if k in r}
        if "reason" in r:
            out[f"{stem}#{gi}"]["reason"] = r["reason"]
    return {"status": "ok", "version": "this checkout (spec-faithful options of evals.conformance.run)",
            "groups": out}


def aggregate(groups: dict[str, dict], files: list[str]) -> dict:
    """Sum the group records of ``files``: groups, compiled, valid/invalid (accepted) in
    compiled groups."""
    agg = dict(groups=0, compiled=0, valid=0, valid_accepted=0, invalid=0, invalid_accepted=0)
    for key, r in groups.items():
        if key.split("#", 1)[0] in files:
            agg["groups"] += 1
            if r.get("status") == "compiled":
                agg["compiled"] += 1
                for k in ("valid", "valid_accepted", "invalid", "invalid_accepted"):
                    agg[k] += r[k]
    return agg


def cell(agg: dict | None, status: str = "ok") -> str:
    """One table cell: ``compiled c/g; valid va/v; invalid ia/i`` (or why there is none)."""
    if status != "ok":
        return status
    if agg is None or not agg["groups"]:
        return "no suite file"
    s = f"{agg['compiled']}/{agg['groups']}"
    if agg["compiled"]:
        s += f"; valid {agg['valid_accepted']}/{agg['valid']}; invalid {agg['invalid_accepted']}/{agg['invalid']}"
    if agg["invalid_accepted"]:
        s = "**" + s + "**"
    return s


def render(res: dict) -> str:
    engines = res["engines"]
    lines = [
        f"Measured by `{COMMAND}` (JSON-Schema-Test-Suite draft2020-12, the keyword files; "
        "cell: groups compiled / groups; valid instances accepted / valid, and invalid instances "
        "accepted / invalid, both over compiled groups; **bold**: some invalid instance accepted).",
        "",
        "Versions: " + "; ".join(f"{n}: {e.get('version') or e['status']}" for n, e in engines.items()) + ".",
        "",
        "| keyword | suite files | " + " | ".join(engines) + " |",
        "|---|---|" + "---|" * len(engines),
    ]
    for kw in KEYWORDS:
        files = res["keyword_files"][kw]
        cells = [cell(e["keywords"].get(kw) if e["status"] == "ok" else None, e["status"])
                 for e in engines.values()]
        lines.append(f"| `{kw}` | {', '.join(files) or '-'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_docs(table: str) -> None:
    text = DOCS.read_text()
    block = f"{BEGIN}\n{table}{END}"
    if BEGIN in text and END in text:
        a, rest = text.split(BEGIN, 1)
        text = a + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n### Keyword table: this project and its peers\n\n" + block + "\n"
    DOCS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default=",".join(ENGINE_NAMES))
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per schema compile")
    ap.add_argument("--docs", action="store_true", help="rewrite the table in docs/json-schema.md")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    for n in names:
        if n not in ENGINE_NAMES:
            ap.error(f"unknown engine {n!r}; choose from {', '.join(ENGINE_NAMES)}")
    stems = [p.stem for p in sorted(run.SUITE_DIR.glob("*.json"))]
    kf = keyword_files(stems)
    used = sorted({s for fs in kf.values() for s in fs})
    groups = [(s, i, g) for s in used
              for i, g in enumerate(json.loads((run.SUITE_DIR / f"{s}.json").read_text()))]
    vocab = run.vocab()
    engines: dict[str, dict] = {}
    for n in names:
        t0 = time.perf_counter()
        e = run_ours(groups, args.timeout) if n == "ours" else run_peer(n, groups, vocab, args.timeout)
        if e["status"] == "ok":
            e["keywords"] = {kw: aggregate(e["groups"], fs) for kw, fs in kf.items() if fs}
        engines[n] = e
        print(f"{n}: {e['status']} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    res = {"suite": "draft2020-12", "files": used, "keyword_files": kf, "engines": engines}
    table = render(res)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "keywords.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    (OUT_DIR / "keywords.md").write_text("# Keyword table\n\n" + table)
    if args.docs:
        write_docs(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
