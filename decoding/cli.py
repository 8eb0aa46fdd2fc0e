"""Command line: ``python -m decoding {compile,inspect,gbnf,generate,demo,serve}`` (also ``guarded-decoding``).

Every failure is one line on stderr, ``error: <place>: <reason>``, with exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from decoding.errors import DecodingError, GrammarError

__all__ = ["main"]

DEFAULT_BUILD_DIR = "build/grammars"
DEFAULT_MANIFEST = "grammars/manifest.json"


class _Fail(Exception):
    """A one-line CLI error (exit code 2)."""


# ----------------------------------------------------------------------------- helpers

@contextlib.contextmanager
def _quiet_native() -> Iterator[None]:
    """Silence llama.cpp's C-level stderr chatter while loading a model or vocabulary."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _located(where: str, e: Exception) -> str:
    msg = " ".join(str(e).split())
    return msg if where and msg.startswith(where) else f"{where}: {msg}" if where else msg


def _parse_options(pairs: list[str] | None, root: str | None) -> dict:
    out: dict[str, Any] = {}
    for p in pairs or ():
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise _Fail(f"--option {p!r}: expected KEY=VALUE")
        try:
            out[k.replace("-", "_")] = json.loads(v)
        except ValueError:
            out[k.replace("-", "_")] = v
    if root:
        out["root"] = root
    return out


def _vocab(args: argparse.Namespace) -> Any:
    from decoding.vocab import Vocab

    if getattr(args, "vocab", None):
        with _quiet_native():
            return Vocab.from_gguf(args.vocab)
    from decoding.models import model_path

    path = model_path(args.model or "smollm2")
    with _quiet_native():
        return Vocab.from_gguf(path)


def _kb(n: int) -> str:
    return f"{n / 1024:.0f} KB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MB"


# ----------------------------------------------------------------------------- compile

def _compile_one(entry: dict, compiler: Any, out_dir: Path, force: bool, bar: Any) -> str:
    from decoding.artifacts.format import ARTIFACT_SUFFIX, read_artifact, write_artifact
    from decoding.compiler import COMPILE_OPTIONS
    from decoding.frontends.sources import read_source

    path, kind, opts, name = entry["path"], entry["kind"], dict(entry["options"]), entry["name"]
    compile_opts = {k: opts.pop(k) for k in COMPILE_OPTIONS if k in opts}
    where = os.fspath(path)
    out = out_dir / f"{name}{ARTIFACT_SUFFIX}"
    bar.set_postfix_str(f"{name}: front-end")
    prepared = compiler.prepare_source(read_source(path), kind, name=where,
                                       base_dir=os.path.dirname(os.path.abspath(path)), **opts)
    key = prepared.key
    if not force and out.is_file():
        try:
            if read_artifact(out).header.get("grammar_key") == key:
                return f"{out}: up to date ({key[:12]})"
        except DecodingError:
            pass  # unreadable: rebuild it
    t0 = time.perf_counter()
    bar.set_postfix_str(f"{name}: automaton")
    cg = compiler.compile_prepared(prepared, **compile_opts)
    bar.set_postfix_str(f"{name}: token index")
    cg.precompute()
    bar.set_postfix_str(f"{name}: writing")
    size = write_artifact(cg, out, name=name, kind=kind, options=prepared.meta["options"], source=prepared.source)
    st = cg.stats()
    return (f"{out}: {st['states']} states, {st['distinct_masks']} distinct masks, {_kb(size)}, "
            f"{time.perf_counter() - t0:.1f} s")


def cmd_compile(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from decoding.frontends.sources import kind_of, load_manifest

    entries: list[dict] = []
    if args.manifest:
        entries += load_manifest(args.manifest)
    opts = _parse_options(args.option, args.root)
    for src in args.sources:
        p = Path(src)
        if p.name == "manifest.json" or p.suffix.lower() not in (".json", ".dtd", ".gbnf"):
            continue  # `compile grammars/*` skips the manifest and non-grammar files
        entries.append({"name": p.stem, "path": p, "kind": kind_of(p, args.kind), "options": dict(opts)})
    if not entries:
        raise _Fail("nothing to compile: give SOURCE files or --manifest")
    names = [e["name"] for e in entries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _Fail(f"two sources would write the same artifact name: {', '.join(dup)}")
    from decoding.compiler import Compiler

    vocab = _vocab(args)
    compiler = Compiler(vocab, cache=False, backend="dfa")  # an artifact holds one explicit DFA
    out_dir = Path(args.output)
    lines = []
    with tqdm(entries, desc="compile", unit="grammar", disable=None, file=sys.stderr) as bar:
        for e in bar:
            try:
                lines.append(_compile_one(e, compiler, out_dir, args.force, bar))
            except DecodingError as err:
                raise _Fail(_located(os.fspath(e["path"]), err)) from None
    for ln in lines:
        print(ln)
    print(f"{len(lines)} artifact(s) in {out_dir} for tokenizer {vocab.name} ({vocab.fingerprint})")
    return 0


# ----------------------------------------------------------------------------- inspect / gbnf

def cmd_inspect(args: argparse.Namespace) -> int:
    from decoding.artifacts.format import read_artifact

    data = read_artifact(args.artifact)
    h = data.header
    idx, d, v = h["index"], h["dfa"], h["vocab"]
    if args.json:
        print(json.dumps({k: h[k] for k in h if k not in ("sections", "source")} | {"bytes": data.size},
                         ensure_ascii=False, indent=1))
        return 0
    rows = [
        ("artifact", f"{data.path} ({data.size} bytes, format v{h['format_version']}, sha256 ok)"),
        ("name / kind", f"{h.get('name') or '-'} / {h.get('kind') or '-'}"),
        ("grammar key", h["grammar_key"]),
        ("grammar digest", h.get("grammar_digest") or "-"),
        ("tokenizer", f"{v.get('name') or '-'} ({v['n_tokens']} tokens), fingerprint {v['fingerprint']}"),
        ("states", f"{d['n_states']} ({d['n_classes']} byte classes, transitions stored {d['trans']})"),
        ("specials", ", ".join(f"{s}={t}" for s, t in zip(d["specials"], d["special_token_ids"])) or "none"),
        ("distinct masks", f"{idx['n_masks']} ({idx['n_dense']} dense, {idx['n_sparse']} sparse token lists)"),
        ("max depth", str(h.get("max_depth"))),
        ("options", json.dumps(h.get("options") or {}, ensure_ascii=False, sort_keys=True)),
    ]
    secs = h["sections"]
    rows.append(("sections", ", ".join(f"{k} {_kb(s['nbytes'])}" for k, s in secs.items() if s["nbytes"])))
    w = max(len(r[0]) for r in rows)
    for k, val in rows:
        print(f"{k:<{w}}  {val}")
    return 0


def _source_from_args(args: argparse.Namespace) -> tuple[Any, str, dict, str, str | None]:
    """(text, kind, options, place, base_dir) for a source file or an artifact's stored source."""
    from decoding.artifacts.format import ARTIFACT_SUFFIX, read_artifact
    from decoding.frontends.sources import kind_of, read_source

    p = Path(args.source)
    if p.suffix == ARTIFACT_SUFFIX:
        src = read_artifact(p).header.get("source") or {}
        if not src.get("text"):
            raise _Fail(f"{p}: artifact does not store its grammar source")
        return src["text"], src["kind"], dict(src.get("options") or {}), os.fspath(p), None
    opts = _parse_options(getattr(args, "option", None), getattr(args, "root", None))
    return read_source(p), kind_of(p, getattr(args, "kind", None)), opts, os.fspath(p), \
        os.path.dirname(os.path.abspath(p))


def cmd_gbnf(args: argparse.Namespace) -> int:
    from decoding.backends.gbnf.emit import to_gbnf
    from decoding.frontends.sources import build_grammar

    from decoding.compiler import COMPILE_OPTIONS

    text, kind, opts, where, base = _source_from_args(args)
    opts = {k: v for k, v in opts.items() if k not in COMPILE_OPTIONS}  # no back-end here
    try:
        g, _ = build_grammar(text, kind, name=where, base_dir=base, **opts)
        out = to_gbnf(g)
    except DecodingError as e:
        raise _Fail(_located(where, e)) from None
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


# ----------------------------------------------------------------------------- generate / demo

def _validity(text: str, header_source: dict) -> str:
    """"yes", or "no (first violation)", checked by the guard's validators (independent of
    the automaton)."""
    from decoding.guard import validate_json, validate_xml

    kind, src = header_source.get("kind"), header_source.get("text")
    if not src:
        return "unknown (no source)"
    if kind == "json-schema":
        _, bad = validate_json(text, json.loads(src))
    elif kind == "dtd":
        from decoding.frontends.xml.dtd import parse_dtd

        bad = validate_xml(text, parse_dtd(src), root=(header_source.get("options") or {}).get("root"))
    else:
        return "n/a (GBNF: see complete)"
    return "yes" if not bad else f"no ({bad[0].message})"


def _load_grammar(path: str, vocab: Any, args: argparse.Namespace) -> tuple[Any, float, dict]:
    """(compiled grammar, load ms, source info) from an artifact or a source file."""
    from decoding.artifacts.format import ARTIFACT_SUFFIX, load_artifact, read_artifact
    from decoding.runtime.matcher import Matcher

    p = Path(path)
    t0 = time.perf_counter()
    if p.suffix == ARTIFACT_SUFFIX:
        data = read_artifact(p)
        cg = load_artifact(data, vocab)
        Matcher(cg).mask()
        ms = (time.perf_counter() - t0) * 1e3
        return cg, ms, data.header.get("source") or {}
    from decoding.compiler import Compiler
    from decoding.frontends.sources import kind_of, normalized_text, read_source

    opts = _parse_options(args.option, args.root)
    kind = kind_of(p, args.kind)
    try:
        cg = Compiler(vocab, cache=True).compile_file(p, kind, **opts)
    except DecodingError as e:
        raise _Fail(_located(os.fspath(p), e)) from None
    Matcher(cg).mask()
    ms = (time.perf_counter() - t0) * 1e3
    return cg, ms, {"kind": kind, "text": normalized_text(read_source(p), kind), "options": opts}


def _load_model(name: str) -> tuple[Any, Any, float]:
    from decoding.models import load_model
    from decoding.vocab import as_vocab

    t0 = time.perf_counter()
    with _quiet_native():
        llm = load_model(name, n_ctx=2048, n_threads=1)
        vocab = as_vocab(llm)
    vocab.fingerprint  # noqa: B018 - computed once, outside the grammar load timing
    return llm, vocab, time.perf_counter() - t0


_SYSTEM = "You are a tool-calling assistant. Answer with the tool call only."


def _run(llm: Any, cg: Any, prompt: str, max_tokens: int, temperature: float, seed: int, chat: bool,
         copy_from: str | None = None) -> Any:
    from decoding.runtime.generate import generate

    if chat:
        msgs = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]
        return generate(llm, cg, messages=msgs, max_tokens=max_tokens, temperature=temperature, seed=seed,
                        copy_from=copy_from)
    return generate(llm, cg, prompt=prompt, max_tokens=max_tokens, temperature=temperature, seed=seed,
                    copy_from=copy_from)


def cmd_generate(args: argparse.Namespace) -> int:
    llm, vocab, _ = _load_model(args.model)
    cg, ms, src = _load_grammar(args.grammar, vocab, args)
    out = _run(llm, cg, args.prompt, args.max_tokens, args.temperature, args.seed, not args.raw,
               copy_from=args.prompt if args.copy_bias else None)
    print(out.text)
    print(f"complete: {'yes' if out.complete else 'no'}  valid: {_validity(out.text, src)}  "
          f"grammar load: {ms:.2f} ms  {out.n_tokens} tokens, {out.tokens_per_second:.1f} tok/s")
    return 0


# One worked example per demo tool (the request and the exact answer, as a tool's docs would
# give it).  None shares a value with the DEMO requests below: the demo is not special-cased.
DEMO_EXAMPLES = {
    "get_weather": ("What's the weather in Shanghai (上海市) on 2024-03-15?", {"city": "上海市", "date": "2024-03-15"}),
    "search_product": ("Find running shoes (服饰) under 300 yuan.",
                       {"query": "running shoes", "category": "服饰", "max_price": 300}),
    "user_query": ("Look up the account of user 98765.",
                   "<request><user_id>98765</user_id><action>query</action></request>"),
    "soap_execute_command": ("Call ExecuteCommand with command CancelOrder and id ORD778899.",
                             '<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
                             '<urn:ExecuteCommand xmlns:urn="http://tempuri.org/"><command>CancelOrder</command>'
                             '<id>ORD778899</id></urn:ExecuteCommand></soap:Body></soap:Envelope>'),
}

# The requests as a user types them (the tool travels in the prompt; the request does not name
# it), in the value-copy benchmark's style (evals/valuecopy/tasks.py).
DEMO = [
    ("get_weather", "What will the weather be in Beijing (北京市) on 2025-06-01?"),
    ("search_product", "Find wireless headphones (数码) under 500 yuan."),
    ("user_query", "Write the XML request for user 12345 who wants to query their account."),
    ("soap_execute_command", "Write the SOAP envelope that calls ExecuteCommand with command GetUserInfo "
                             "and id U9C123456."),
]


def cmd_demo(args: argparse.Namespace) -> int:
    from decoding.artifacts.format import ARTIFACT_SUFFIX, load_artifact, read_artifact
    from decoding.runtime.matcher import Matcher

    d = Path(args.artifacts)
    files = sorted(d.glob(f"*{ARTIFACT_SUFFIX}"))
    missing = [n for n, _ in DEMO if not (d / f"{n}{ARTIFACT_SUFFIX}").is_file()]
    if missing:
        raise _Fail(f"{d}: no artifact for {', '.join(missing)}; build them with: python -m decoding compile "
                    f"--manifest {DEFAULT_MANIFEST} --model {args.model} -o {d}")
    print(f"loading {args.model} (llama.cpp, CPU, 1 thread) ...", flush=True)
    llm, vocab, secs = _load_model(args.model)
    print(f"model + tokenizer ready in {secs:.1f} s ({vocab.n_tokens} tokens, fingerprint {vocab.fingerprint})")
    print(f"\nprecompiled grammars from {d}/ (read + verify + load to a ready matcher; no compilation):")
    print(f"  {'grammar':<22} {'first':>8} {'p50 of 20':>10} {'states':>7} {'masks':>6} {'size':>7}")
    loaded = {}

    def load(f: Path) -> tuple[Any, dict]:
        data = read_artifact(f)
        cg = load_artifact(data, vocab)
        Matcher(cg).mask()
        return cg, data.header | {"_size": data.size}

    for f in files:
        t0 = time.perf_counter()
        cg, h = load(f)
        first = (time.perf_counter() - t0) * 1e3
        ts = []
        for _ in range(20):
            t0 = time.perf_counter()
            load(f)
            ts.append((time.perf_counter() - t0) * 1e3)
        loaded[f.stem] = (cg, h.get("source") or {})
        print(f"  {f.stem:<22} {first:5.2f} ms {sorted(ts)[10]:7.2f} ms {h['dfa']['n_states']:>7} "
              f"{h['index']['n_masks']:>6} {_kb(h['_size']):>7}")
    from decoding.runtime.generate import generate
    from decoding.runtime.prompting import Example, dump_json, render_prompt, tool_from_source

    print("\nprompts: the tool definition (schema / DTD without comments) + one worked example, through the "
          "model's chat template; JSON in the 'natural' layout (', ' and ': ')"
          + ("" if args.no_copy_bias else "; copy bias on the request (decoding.runtime.copy_bias)"))
    for name, prompt in DEMO:
        cg, src = loaded[name]
        print(f"\n[{name}] {prompt}")
        ex_user, ex_answer = DEMO_EXAMPLES[name]
        if not isinstance(ex_answer, str):
            natural = (src.get("options") or {}).get("whitespace") == "natural"
            ex_answer = dump_json(ex_answer, "natural" if natural else "compact")
        tool = tool_from_source(name, src.get("kind", ""), src.get("text") or "")
        text = render_prompt(llm, tool, prompt, Example(ex_user, ex_answer), model_name=args.model)
        out = generate(llm, cg, prompt=text, max_tokens=args.max_tokens, temperature=args.temperature,
                       seed=args.seed, copy_from=None if args.no_copy_bias else prompt)
        print(f"  {out.text}")
        print(f"  valid: {_validity(out.text, src)}  complete: {'yes' if out.complete else 'no'}  "
              f"{out.n_tokens} tokens  {out.tokens_per_second:.1f} tok/s")
    return 0


# ----------------------------------------------------------------------------- main


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from decoding.server import ServerConfig, serve
        import fastapi  # noqa: F401  (the server extra)
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise _Fail(f"serve: {e.name} is not installed: pip install 'guarded-decoding[server]'") from e
    serve(ServerConfig(model=args.model, host=args.host, port=args.port, workers=args.workers,
                       api_key=args.api_key or None, dtd_dir=args.dtd_dir, cache_dir=args.cache_dir,
                       queue_size=args.queue_size, max_body_bytes=args.max_body_bytes,
                       max_tokens_limit=args.max_tokens_limit, n_ctx=args.n_ctx,
                       max_parallel_tool_calls=args.max_parallel_tool_calls,
                       tool_call_start=(args.tool_call_markers or (None, None))[0],
                       tool_call_end=(args.tool_call_markers or (None, None))[1],
                       upstreams=tuple(args.upstream or ()), copy_bias=args.copy_bias))
    return 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m decoding", description="guarded-decoding command line")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def source_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--kind", choices=["json-schema", "dtd", "gbnf", "json", "xml"],
                       help="grammar kind (default: from the extension)")
        p.add_argument("--root", help="root element (DTD sources)")
        p.add_argument("-O", "--option", action="append", metavar="KEY=VALUE",
                       help="front-end or compile option, e.g. -O whitespace=flexible -O max_depth=3 "
                            "-O max_states=50000 (repeatable)")

    p = sub.add_parser("compile", help="precompile grammars to artifacts for one tokenizer")
    p.add_argument("sources", nargs="*", metavar="SOURCE", help=".json (JSON Schema), .dtd, .gbnf")
    p.add_argument("--manifest", help="grammar manifest (e.g. grammars/manifest.json)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--vocab", metavar="GGUF", help="tokenizer from a GGUF file")
    g.add_argument("--model", default="smollm2", help="packaged model whose tokenizer to use (default smollm2)")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--force", action="store_true", help="rebuild artifacts that are up to date")
    source_opts(p)
    p.set_defaults(fn=cmd_compile)

    p = sub.add_parser("inspect", help="describe an artifact (verifies its checksum)")
    p.add_argument("artifact")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_inspect)

    p = sub.add_parser("gbnf", help="print the GBNF of a grammar source (or of an artifact's source)")
    p.add_argument("source")
    source_opts(p)
    p.set_defaults(fn=cmd_gbnf)

    p = sub.add_parser("generate", help="generate with the default model under a grammar")
    p.add_argument("--grammar", required=True, help="artifact (.gdc) or grammar source")
    p.add_argument("--prompt", required=True)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--raw", action="store_true", help="plain completion instead of the chat template")
    p.add_argument("--copy-bias", action="store_true",
                   help="logit bonus for starting a value with a copy of the prompt (decoding.runtime.copy_bias)")
    source_opts(p)
    p.set_defaults(fn=cmd_generate)

    p = sub.add_parser("demo", help="load the precompiled grammars and run constrained generations")
    p.add_argument("--artifacts", default=DEFAULT_BUILD_DIR)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-copy-bias", action="store_true",
                   help="no logit bonus for starting a value with a copy of the request (decoding.runtime.copy_bias)")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server with guaranteed structured output "
                                     "(needs the 'server' extra; see docs/server.md)")
    p.add_argument("--model", default="smollm2", help="packaged model name or a .gguf path (default smollm2)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="processes, each with its own model")
    p.add_argument("--api-key", default=os.environ.get("DECODING_API_KEY"),
                   help="require 'Authorization: Bearer KEY' on /v1/* (default: $DECODING_API_KEY, else none)")
    p.add_argument("--dtd-dir", help="the only directory DTD external entities and named DTDs are read from")
    p.add_argument("--cache-dir", help="on-disk compiled-grammar cache shared by the workers")
    p.add_argument("--queue-size", type=int, default=16, help="requests queued or running per worker (503 above)")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20)
    p.add_argument("--max-tokens-limit", type=int, default=2048)
    p.add_argument("--n-ctx", type=int, default=2048)
    p.add_argument("--max-parallel-tool-calls", type=int, default=4,
                   help="tool calls per answer when a request has parallel_tool_calls true (the OpenAI default)")
    p.add_argument("--upstream", action="append", metavar="URL",
                   help="forward to this llama-server (repeatable; no model is loaded here): docs/scale-out.md")
    p.add_argument("--copy-bias", type=float, nargs="?", const=2.0, default=0.0, metavar="NATS",
                   help="default logit bonus for starting a value with a copy of the request's last user "
                        "message (decoding.runtime.copy_bias; 2.0 when given without a value; a request's "
                        "'copy_bias' overrides it; default 0: off)")
    p.add_argument("--tool-call-markers", nargs=2, metavar=("START", "END"),
                   help="tool-call delimiters (default: from the model's chat template, else <tool_call> </tool_call>)")
    p.set_defaults(fn=cmd_serve)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except _Fail as e:
        msg = str(e)
    except DecodingError as e:
        where = getattr(args, "source", None) or getattr(args, "artifact", None) or getattr(args, "grammar", None) or ""
        msg = _located(os.fspath(where), e) if not isinstance(e, GrammarError) or where else _located("", e)
    except OSError as e:
        msg = f"{e.filename + ': ' if e.filename else ''}{e.strerror or e}"
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(f"error: {' '.join(msg.split())}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
