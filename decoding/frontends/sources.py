"""Grammar sources: one entry point from source text (JSON Schema, DTD, GBNF) to the IR.

``build_grammar(text, kind, **options)`` runs the right front-end and returns the grammar
plus plain-data metadata.  Options are checked by name; an unknown one is an error, never
ignored.  Kinds: ``json-schema`` (``.json``), ``dtd`` (``.dtd``, option ``root`` required),
``gbnf`` (``.gbnf``).  Front-ends stay pure: nothing here touches a vocabulary.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from pathlib import Path
from typing import Any

from decoding.errors import GrammarError, LimitError
from decoding.ir import Grammar
from decoding.limits import DEFAULT_LIMITS

__all__ = ["KINDS", "kind_of", "option_names", "build_grammar", "read_source", "normalized_text", "load_manifest"]

KINDS = ("json-schema", "dtd", "gbnf")
_EXT = {".json": "json-schema", ".dtd": "dtd", ".gbnf": "gbnf"}
_ALIASES = {"json": "json-schema", "schema": "json-schema", "jsonschema": "json-schema", "xml": "dtd"}


def kind_of(path: str | os.PathLike, kind: str | None = None) -> str:
    """The kind of a source: ``kind`` if given (aliases json/xml allowed), else by extension."""
    if kind:
        k = _ALIASES.get(kind, kind)
        if k not in KINDS:
            raise GrammarError(f"unknown grammar kind {kind!r}; choose one of {', '.join(KINDS)}")
        return k
    ext = Path(path).suffix.lower()
    if ext not in _EXT:
        raise GrammarError(f"{os.fspath(path)}: cannot tell the grammar kind from the extension {ext!r} "
                           "(use .json, .dtd or .gbnf, or give the kind)")
    return _EXT[ext]


def read_source(path: str | os.PathLike) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GrammarError(f"{os.fspath(path)}: no such file") from None
    except UnicodeDecodeError as e:
        raise GrammarError(f"{os.fspath(path)}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise GrammarError(f"{os.fspath(path)}: cannot read: {e.strerror or e}") from None


def normalized_text(text: str | dict | bool, kind: str) -> str:
    """Source text with insignificant JSON whitespace removed (key order kept: it is data
    the compiler may depend on); DTD and GBNF text as is.  Always encodable as UTF-8 (a
    lone surrogate is a GrammarError)."""
    out = _normalized(text, kind)
    try:
        out.encode("utf-8")
    except UnicodeEncodeError as e:
        raise GrammarError(f"a {kind} source is not Unicode text: lone surrogate at offset {e.start}") from None
    return out


def _normalized(text: str | dict | bool, kind: str) -> str:
    if kind == "json-schema":
        if not isinstance(text, str):
            try:
                return json.dumps(text, separators=(",", ":"), ensure_ascii=False)
            except RecursionError:
                raise LimitError("schema nested too deeply to serialize (limit max_nesting)",
                                 pointer="", limit="max_nesting") from None
        try:
            return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
        except (ValueError, RecursionError):  # not JSON (the front-end reports where): as is
            return text
    if not isinstance(text, str):
        raise GrammarError(f"a {kind} source must be text")
    return text


def _frontend(kind: str) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    """(front-end function, its parameters that are not options, extra option names)."""
    if kind == "json-schema":
        from decoding.frontends.jsonschema import compile_schema

        return compile_schema, (), ()
    if kind == "dtd":
        from decoding.frontends.xml.grammar import dtd_grammar

        return dtd_grammar, (), ("root",)
    from decoding.frontends.gbnf.parse import parse_gbnf

    return parse_gbnf, ("source",), ()


@functools.lru_cache(maxsize=None)
def option_names(kind: str) -> tuple[str, ...]:
    """The option names the front-end of ``kind`` accepts (sorted)."""
    fn, skip, extra = _frontend(kind_of("", kind))
    params = inspect.signature(fn).parameters
    return tuple(sorted({n for n, p in params.items() if p.kind == p.KEYWORD_ONLY and n not in skip} | set(extra)))


def _check_options(options: dict, kind: str) -> None:
    known = option_names(kind)
    for k in options:
        if k not in known:
            raise GrammarError(f"unknown option {k!r} for {kind} grammars; known: {', '.join(known)}")


def build_grammar(source: str | dict | bool, kind: str, *, name: str | None = None,
                  base_dir: str | os.PathLike | None = None, **options: Any) -> tuple[Grammar, dict]:
    """Run the front-end of ``kind`` on ``source`` (text, or a parsed schema).

    Returns ``(grammar, meta)``; ``meta`` is plain data (front-end name, what a lenient
    schema compile dropped).  Errors name ``name`` (a file) and the place inside it."""
    kind = kind_of("", kind)
    _check_options(options, kind)
    if kind == "json-schema":
        from decoding.frontends.jsonschema import compile_schema
        from decoding.frontends.jsonschema.check import load_schema_text

        limits = options.get("limits", DEFAULT_LIMITS)
        schema = load_schema_text(source, name=name, limits=limits) if isinstance(source, str) else source
        sg = compile_schema(schema, **options)
        return sg.grammar, {"frontend": kind, "dropped": list(sg.dropped), "ignored": list(sg.ignored)}
    if not isinstance(source, str):
        raise GrammarError(f"a {kind} source must be text")
    if kind == "dtd":
        from decoding.frontends.xml.dtd import parse_dtd
        from decoding.frontends.xml.grammar import dtd_grammar

        opts = dict(options)
        root = opts.pop("root", None)
        if not root:
            raise GrammarError(f"{name or '<dtd>'}: a DTD grammar needs a root element (option root / --root)")
        dtd = parse_dtd(source, source=name, base_dir=base_dir)
        return dtd_grammar(dtd, root, **opts), {"frontend": kind, "root": root}
    from decoding.frontends.gbnf.parse import parse_gbnf

    return parse_gbnf(source, source=name, **options), {"frontend": kind}


def load_manifest(path: str | os.PathLike) -> list[dict]:
    """Entries of a grammar manifest, each ``{"name", "path", "kind", "options"}``.

    Manifest format (``grammars/manifest.json``)::

        {"grammars": [{"name": "get_weather", "source": "get_weather.json"},
                      {"name": "user_query", "kind": "dtd", "spec": "xml_grammars.json"}]}

    ``source`` is relative to the manifest; ``options`` go to the front-end.  An entry with
    ``spec`` takes the DTD file (relative to the spec), ``root`` and options from that file's
    entry of the same name; its own ``options`` override them.
    """
    mpath = Path(path)
    where = os.fspath(path)
    try:
        data = json.loads(read_source(mpath))
    except json.JSONDecodeError as e:
        raise GrammarError(f"{where}:{e.lineno}:{e.colno}: manifest is not valid JSON: {e.msg}") from None
    except (ValueError, RecursionError) as e:  # an over-long integer, nesting too deep for json
        raise GrammarError(f"{where}: manifest is not usable JSON: {str(e)[:200]}") from None
    entries = data.get("grammars") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise GrammarError(f"{where}: manifest needs a \"grammars\" list")
    out: list[dict] = []
    seen: set[str] = set()
    for i, e in enumerate(entries):
        at = f"{where}: grammars[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise GrammarError(f"{at}: each entry needs a \"name\"")
        unknown = set(e) - {"name", "source", "kind", "options", "spec"}
        if unknown:
            raise GrammarError(f"{at}: unknown field(s) {', '.join(sorted(unknown))}")
        if e["name"] in seen:
            raise GrammarError(f"{at}: duplicate name {e['name']!r}")
        seen.add(e["name"])
        options = dict(e.get("options") or {})
        base = mpath.parent
        if "spec" in e:
            base = (mpath.parent / e["spec"]).parent  # the spec's DTD path is relative to the spec
            try:
                spec = json.loads(read_source(mpath.parent / e["spec"]))[e["name"]]
            except (KeyError, TypeError, ValueError, RecursionError):
                raise GrammarError(f"{at}: {e['spec']} has no valid entry {e['name']!r}") from None
            src = spec.get("dtd")
            options = {**{k: v for k, v in spec.items() if k != "dtd"}, **options}
        else:
            src = e.get("source")
        if not isinstance(src, str):
            raise GrammarError(f"{at}: entry needs a \"source\" file")
        p = base / src
        out.append({"name": e["name"], "path": p, "kind": kind_of(p, e.get("kind")), "options": options})
    return out
