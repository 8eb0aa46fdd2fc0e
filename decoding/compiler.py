"""The compiler facade: the one way from a grammar source to a compiled grammar.

``Compiler(tokenizer, cache=..., backend=..., **defaults)`` compiles JSON Schemas, DTDs,
GBNF text and IR grammars for one tokenizer, through one pipeline::

    source --front-end--> IR --digest--> grammar key --> cache lookup (memory, disk)
           --back-end selection (compile_grammar)--> cache store

A JSON Schema of the fast path's subset (:mod:`decoding.frontends.jsonschema.fast`) skips the
IR: its NFA program is written directly, keyed by its digest (``fast:...``), and compiled by
the DFA back-end's native builder; the same language and masks as the pipeline's.

Invariants
- every result carries a non-empty ``grammar_key`` (canonical IR + tokenizer fingerprint +
  artifact format version) and plain-data ``meta`` (front-end, its options, the grammar
  digest, the depth bound), so any result can be written as an artifact;
- equal grammars (same IR, whatever the source formatting) get the same key and share one
  cache entry (a fast-path grammar is keyed by its program instead: the same schema always
  takes the same path, so it too has one entry);
- options are checked by name: an unknown one is a :class:`~decoding.errors.GrammarError`
  naming it, never ignored.

``tokenizer`` may be a :class:`~decoding.vocab.Vocab`, a ``llama_cpp.Llama`` or a GGUF path.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decoding.artifacts.cache import GrammarCache, default_cache
from decoding.artifacts.format import FORMAT_VERSION
from decoding.backends.contract import CompiledGrammar
from decoding.backends import select as _select
from decoding.backends.select import compile_grammar
from decoding.backends.automaton import plain_program_offsets, regular_leaf
from decoding.backends.dfa.lazy import program_grammar
from decoding.heap import TRIM_AFTER_SECONDS, release_free_memory
from decoding.errors import GBNFError, GrammarError, LimitError, SchemaError
from decoding.frontends.sources import (KINDS, build_grammar, kind_of, normalized_text, option_names,
                                        read_source)
from decoding.frontends.jsonschema.check import load_schema_text
from decoding.backends.counted import COUNTED_AT_MOST, counted_program, room_tail
from decoding.backends.counted_lazy import lazy_counted_program
from decoding.frontends.jsonschema.fast import counted_unit, fast_program
from decoding.frontends.jsonschema.fast import prepare as prepare_fast
from decoding.ir import DEFAULT_MAX_DEPTH, Grammar
from decoding.ir.key import grammar_digest, grammar_key, source_key
from decoding.vocab import Vocab, as_vocab
from decoding.weakmemo import WeakMemo
from decoding.limits import Limits, past_estimates, with_compile_seconds

__all__ = ["Compiler", "Prepared", "COMPILE_OPTIONS", "compile_json_schema", "as_vocab"]

#: options of the compile step itself (every other option goes to the front-end):
#: ``backend`` ("auto", "dfa", "pushdown", "counted"), ``eager`` (do the mask work now),
#: ``max_states`` (the DFA size limit; "auto" falls back to pushdown above it) and
#: ``max_masks`` (the limit on distinct masks); see :func:`decoding.backends.select.compile_grammar`
COMPILE_OPTIONS = ("backend", "eager", "max_states", "max_masks")
#: JSON Schemas of a common subset are compiled without the IR (:meth:`Compiler._compile_fast`:
#: the same language, less work): False always runs the whole pipeline
FAST_SCHEMAS = True
#: the most NFA states the fast path builds; a larger one is left to the pipeline (whose
#: ``auto`` counts large repetitions above ``COUNT_ABOVE`` estimated states)
FAST_MAX_NFA = _select.COUNT_ABOVE
#: ``count_above`` for the DFA back-end: its long strings are never counted
_NEVER = 1 << 62
#: the most NFA states of a fast-path program with counted loops (the counted back-end's own
#: bound on its estimate: beyond, auto compiles the schema another way)
COUNTED_MAX_NFA = COUNTED_AT_MOST
#: the fast path compiles a program whose counted loops are all long (room for at least the
#: longest token's bytes) over lazy automata (:mod:`decoding.backends.counted_lazy`), with
#: ``backend="auto"``, not ``eager``, no ``pattern`` and no union (False: always the eager
#: counted back-end)
LAZY_COUNTED = True
#: the front-end options the fast path reads (any other is left to the front-end to check)
_FAST_OPTIONS = frozenset(option_names("json-schema"))


@dataclass(frozen=True)
class Prepared:
    """A grammar ready for the back-end: its IR, key and plain-data meta.

    ``source`` (``name``, ``kind``, normalized ``text``, ``options``) is what an artifact
    stores to re-derive the grammar (``None`` for IR input)."""

    grammar: Grammar
    key: str
    meta: dict
    kind: str
    source: dict | None = None
    #: wall-clock seconds the front-end took: the back-end gets what is left of
    #: ``max_compile_seconds``, so one compile never runs past the deadline in total
    seconds: float = 0.0


def _plain(options: dict) -> dict:
    """``options`` as JSON data for ``meta`` (a value that is not JSON, such as an IR node in
    ``text_patterns``, is kept as its ``repr``; the key never depends on it: the IR does)."""
    if not options:
        return {}
    return json.loads(json.dumps(options, ensure_ascii=False, default=repr))


class Compiler:
    """Compiles grammars for one tokenizer.

    ``cache``: ``None`` (default) keeps compiled grammars in a private in-memory LRU;
    ``False`` caches nothing; ``True`` uses the process-wide cache (default directory on
    disk); a :class:`~decoding.artifacts.cache.GrammarCache` or a directory path uses that.

    ``backend`` and ``defaults`` apply to every call unless the call overrides them.
    ``defaults`` are compile options (:data:`COMPILE_OPTIONS`) or front-end options (for
    example ``whitespace="flexible"``, ``max_depth=4``); a front-end default applies to the
    grammar kinds whose front-end has that option.

    With back-end ``"auto"``, a source refused on a size estimate (``LimitError.estimated``)
    is compiled again past it (:meth:`_past_estimates`; ``Limits.refuse_on_estimates``,
    ``Limits.past_estimates_seconds``).  Building one makes the per-vocabulary tables its
    compiles share (:func:`_warm_counted`, once per vocabulary).
    """

    def __init__(self, tokenizer: Any, *, cache: GrammarCache | str | os.PathLike | bool | None = None,
                 backend: str = "auto", **defaults: Any) -> None:
        self.vocab: Vocab = as_vocab(tokenizer)
        if cache is None:
            cache = GrammarCache(False)
        elif cache is True:
            cache = default_cache()
        elif isinstance(cache, (str, os.PathLike)):
            cache = GrammarCache(cache)
        self.cache: GrammarCache | None = None if cache is False else cache  # (an empty cache is falsy)
        known = set(COMPILE_OPTIONS).union(*(option_names(k) for k in KINDS))
        for k in defaults:
            if k not in known:
                raise GrammarError(f"Compiler: unknown option {k!r}; known: {', '.join(sorted(known))}")
        self._compile_defaults: dict[str, Any] = {"backend": backend, "eager": False}
        self._compile_defaults.update({k: v for k, v in defaults.items() if k in COMPILE_OPTIONS})
        self._frontend_defaults = {k: v for k, v in defaults.items() if k not in COMPILE_OPTIONS}
        # one-time costs paid here rather than by the first compile: the vocabulary's
        # fingerprint (part of every key; hashing 262k tokens takes ~0.25 s), its single-byte
        # tokens (the DFA prune; ~60 ms), the metaschema validator's import (~0.2 s) and the
        # JSON Schema front-end's shared nodes (any string, numbers, the formats; ~35 ms once
        # per process), and numpy.ma, which numpy 2.4's np.unique imports on its first call
        # (the counted back-end calls it: ~11 ms in the first counted compile otherwise)
        _ = self.vocab.fingerprint
        self.vocab.single_byte_tokens()
        import jsonschema  # noqa: F401
        import numpy.ma  # noqa: F401

        from decoding.backends.automaton import compile_dfa
        from decoding.frontends.jsonschema.compile import warm
        # (its byte DFA: the NFA program's records of the shared nodes and their leaves, their
        # minimal DFAs, are made once per process, here; no token mask is involved)
        compile_dfa(warm())
        _COUNTED_WARM(self.vocab)

    # ------------------------------------------------------------------ one call per source kind
    def compile_json_schema(self, schema: dict | bool | str, **options: Any) -> CompiledGrammar:
        """A JSON Schema (dict, bool or JSON text).  Options: compile options and those of
        :func:`decoding.frontends.jsonschema.compile_schema` (whitespace, max_depth, lenient, ...)."""
        return self.compile_source(schema, "json-schema", **options)

    def compile_dtd(self, dtd: str | os.PathLike, *, root: str, base_dir: str | os.PathLike | None = None,
                    **options: Any) -> CompiledGrammar:
        """A DTD with root element ``root``: DTD text, or the path of a DTD file (a
        ``PathLike``, or a ``str`` without ``<``).  ``base_dir`` resolves relative external
        entities (default for a file: its directory).  Options: compile options and those of
        :func:`decoding.frontends.xml.grammar.dtd_grammar`."""
        if isinstance(dtd, os.PathLike) or (isinstance(dtd, str) and "<" not in dtd):
            return self.compile_file(dtd, "dtd", base_dir=base_dir, root=root, **options)
        return self.compile_source(dtd, "dtd", base_dir=base_dir, root=root, **options)

    def compile_gbnf(self, text: str, **options: Any) -> CompiledGrammar:
        """GBNF text.  Options: compile options and those of
        :func:`decoding.frontends.gbnf.parse.parse_gbnf` (root rule, max_depth, ...)."""
        return self.compile_source(text, "gbnf", **options)

    def compile_ir(self, grammar: Grammar, **options: Any) -> CompiledGrammar:
        """An IR grammar (already built).  Options: compile options only."""
        opts = self._compile_options(options)
        if options:
            raise GrammarError(f"unknown option {next(iter(options))!r} for ir grammars; "
                               f"known: {', '.join(COMPILE_OPTIONS)}")
        return self.compile_prepared(self.prepare_ir(grammar), **opts)

    def compile_file(self, path: str | os.PathLike, kind: str | None = None, *,
                     base_dir: str | os.PathLike | None = None, **options: Any) -> CompiledGrammar:
        """A grammar source file; ``kind`` defaults to the one of its extension (.json, .dtd,
        .gbnf).  Errors name the file."""
        kind = kind_of(path, kind)
        base = base_dir if base_dir is not None else os.path.dirname(os.path.abspath(path))
        return self.compile_source(read_source(path), kind, name=os.fspath(path), base_dir=base, **options)

    def compile_source(self, source: str | dict | bool, kind: str, *, name: str | None = None,
                       base_dir: str | os.PathLike | None = None, **options: Any) -> CompiledGrammar:
        """Source text (or a parsed JSON Schema) of ``kind`` (``json-schema``, ``dtd``,
        ``gbnf``; aliases json/xml).  ``name`` names the source in errors."""
        kind = kind_of("", kind)
        opts = self._compile_options(options)
        text: str | None = None
        alias = None
        if self.cache is not None:  # (only a cache reads the alias and the normalized text)
            text = self._text(source, kind)
            alias = self._alias(text, kind, options, base_dir)
        if alias is not None and self.cache is not None:
            hit = self.cache.get_alias(alias, backend=opts["backend"])
            if hit is not None:
                return hit.precompute() if opts["eager"] else hit
        if self.cache is None and kind == "json-schema":
            text = ""  # nothing stores the source; the front-end checks it is Unicode text itself
        if kind == "json-schema" and opts["backend"] in ("auto", "dfa") and FAST_SCHEMAS:
            cg = self._compile_fast(source, name, options, opts, text, alias)
            if cg is not None:
                return cg
        t0 = time.perf_counter()
        try:
            p = self._prepare_source(source, kind, name, base_dir, options, text)
            if alias is not None and self.cache is not None:
                self.cache.alias(alias, p.key)
            return self._compile_prepared(p, dict(opts), None)
        except LimitError as e:
            if not (e.estimated and opts["backend"] == "auto"):
                raise
            first = e
        return self._past_estimates(first, source, kind, name, base_dir, options, text, opts, t0)

    def _compile_fast(self, schema: Any, name: str | None, options: dict, opts: dict, text: str | None,
                      alias: str | None) -> CompiledGrammar | None:
        """A schema of the fast path's subset (:mod:`decoding.frontends.jsonschema.fast`)
        compiled with no IR: its program, the same native NFA builder, subset construction and
        minimisation as the DFA back-end, the same compiled grammar (with long strings counted:
        the counted back-end's, checked by its ``_assemble``); the same language as the
        pipeline's.  None where the pipeline must run: outside the subset, other options, or a
        DFA the back-end selection would not build (past the limits: it decides, and reports)."""
        fe = self._frontend_options(options, "json-schema")
        if not _FAST_OPTIONS.issuperset(fe):
            return None  # (unknown options: the front-end names them)
        if isinstance(schema, str):
            try:
                schema = load_schema_text(schema, name=name, limits=fe.get("limits", _select.DEFAULT_LIMITS))
            except (GrammarError, LimitError):
                return None  # (the front-end raises it again, as it reports it)
        if type(schema) is not dict:
            return None
        prepare_fast()
        # long strings counted where auto would count them (the DFA back-end asked for: never)
        count_above = _select.COUNT_ABOVE if opts["backend"] == "auto" else _NEVER
        prog = fast_program(schema, plain_program_offsets, tail=room_tail(self.vocab), count_above=count_above,
                            leaf_of=regular_leaf, **fe)
        if prog is None:
            return None
        key = grammar_key(prog.digest, self.vocab.fingerprint, version=FORMAT_VERSION)
        backend, eager, max_states = opts["backend"], opts["eager"], opts.get("max_states")
        cache = self.cache
        if cache is not None:
            hit = cache.lookup(key, self.vocab, backend=backend, max_states=max_states)
            if hit is not None:
                if alias is not None:
                    cache.alias(alias, key)
                return hit.precompute() if eager else hit
        t0 = time.perf_counter()
        lim = fe.get("limits") or _select.DEFAULT_LIMITS  # (the back-ends' defaults, as the pipeline's)
        if prog.patterns:  # (a regex's nested repetition is what the pipeline's estimates refuse: then it
            # compiles past them in past_estimates_seconds; so long here at most, then the pipeline says why)
            lim = with_compile_seconds(lim, min(lim.max_compile_seconds, lim.past_estimates_seconds))
        plain = _plain(fe)
        meta = {"frontend": "json-schema", "dropped": [], "ignored": list(prog.ignored), "grammar_digest": prog.digest,
                "max_depth": fe.get("max_depth", DEFAULT_MAX_DEPTH), "options": plain}
        kw = {} if opts.get("max_masks") is None else {"max_masks": opts["max_masks"]}
        cg: Any
        # lazy automata only with auto ("dfa": always explicit), unless a pattern is written (a
        # nested repetition, ``(a{0,100}){0,100}``, makes subsets past the memory bound on first
        # visits, where the eager build is refused at once) or every mask is wanted now
        # (``eager``: the minimal DFA has the fewest states)
        lazy = backend == "auto" and not prog.patterns and not eager
        try:
            if prog.loops:  # long strings: the counted back-end's automaton, as auto picks for large ones
                cg = None
                if LAZY_COUNTED and lazy and not prog.unions:
                    # (over lazy automata: every loop long, no union where two strings may start)
                    cg = lazy_counted_program(prog.code, prog.lits, prog.root, prog.loops, prog.tail, counted_unit(),
                                              self.vocab, limits=lim, max_nfa=COUNTED_MAX_NFA, grammar_key=key,
                                              meta=meta, leaves=prog.leaves, leaf_at=prog.leaf_at, lows=prog.lows, **kw)
                if cg is None:
                    cg = counted_program(prog.code, prog.lits, prog.root, prog.loops, prog.tail, counted_unit(),
                                         self.vocab, limits=lim, max_nfa=COUNTED_MAX_NFA, max_states=max_states,
                                         grammar_key=key, meta=dict(meta, backend="counted"), leaves=prog.leaves,
                                         leaf_at=prog.leaf_at, **kw)
                if cg is not None and eager:
                    cg = cg.precompute()
            else:  # lazily above LAZY_NFA_ABOVE NFA states
                lazy_above = _select.LAZY_NFA_ABOVE if lazy else None
                cg = program_grammar(prog.code, prog.lits, prog.root, self.vocab, lazy_above=lazy_above, limits=lim,
                                     max_nfa=FAST_MAX_NFA, max_states=max_states, leaves=prog.leaves,
                                     leaf_at=prog.leaf_at, grammar_key=key, meta=meta, eager=eager, **kw)
        except (LimitError, GrammarError):
            return None  # (the pipeline compiles it another way, or says why it cannot)
        if cg is None:
            return None
        if time.perf_counter() - t0 >= TRIM_AFTER_SECONDS:
            release_free_memory()
        if cache is not None:
            if alias is not None:
                cache.alias(alias, key)
            src = {"name": name or "", "kind": "json-schema", "text": text if text is not None else
                   normalized_text(schema, "json-schema"), "options": plain}
            cache.store(cg, name=Path(name).stem if name else "", kind="json-schema", options=plain, source=src)
        return cg

    def _past_estimates(self, first: LimitError, source: Any, kind: str, name: str | None, base_dir: Any,
                        options: dict, text: str | None, opts: dict, t0: float) -> CompiledGrammar:
        """Compile a source that ``auto`` refused on an estimate (``first``) again with
        ``refuse_on_estimates=False`` (:class:`~decoding.limits.Limits`), in what is left of
        ``max_compile_seconds`` (at most ``past_estimates_seconds``): the estimates are upper
        bounds, and only the bounds met while
        building (NFA states made, DFA states, subset bytes, the deadline) refuse it then.
        Raises a LimitError naming the bound it met and the estimate refused first."""
        fe_limits = "limits" in option_names(kind)
        lim0 = (options.get("limits") or self._frontend_defaults.get("limits")) if fe_limits else None
        lim0 = lim0 or _select.DEFAULT_LIMITS
        lim = past_estimates(lim0, lim0.max_compile_seconds - (time.perf_counter() - t0))
        if lim.max_compile_seconds <= 0:
            raise first
        try:
            p = self._prepare_source(source, kind, name, base_dir, dict(options, limits=lim) if fe_limits else options,
                                     text)
            return self._compile_prepared(p, dict(opts), lim)
        except LimitError as e:
            raise LimitError(f"{e} (tried past the estimate that refused it first, for at most "
                             f"past_estimates_seconds={lim0.past_estimates_seconds:g}: {first})",
                             pointer=e.pointer if e.pointer is not None else first.pointer, limit=e.limit,
                             value=e.value) from e

    # ------------------------------------------------------------------ the pipeline
    def prepare_source(self, source: str | dict | bool, kind: str, *, name: str | None = None,
                       base_dir: str | os.PathLike | None = None, **options: Any) -> Prepared:
        """Front-end, digest, key and meta of a source (nothing is compiled or cached).
        ``options`` are front-end options only (defaults added)."""
        return self._prepare_source(source, kind, name, base_dir, options, None)

    def _prepare_source(self, source: str | dict | bool, kind: str, name: str | None,
                        base_dir: str | os.PathLike | None, options: dict, text: str | None) -> Prepared:
        """:meth:`prepare_source`; ``text``: the source's normalized text when the caller has
        made it already, ``""`` when nothing will read it (a compiler without a cache stores
        no source), None: make it here."""
        kind = kind_of("", kind)
        options = self._frontend_options(options, kind)
        t0 = time.perf_counter()
        g, meta = build_grammar(source, kind, name=name, base_dir=base_dir, **options)
        if kind == "gbnf":
            _check_token_refs(g, source, self.vocab, name)
        plain = _plain(options)
        if text is None:
            text = normalized_text(source, kind)
        src = {"name": name or "", "kind": kind, "text": text, "options": plain}
        return self._prepared(g, meta, kind, plain, src, t0)

    @staticmethod
    def _text(source: Any, kind: str) -> str | None:
        """The normalized text of a source, or None where it cannot be made (the front-end
        then reports why)."""
        try:
            return normalized_text(source, kind)
        except (TypeError, ValueError, GrammarError):
            return None

    def prepare_ir(self, grammar: Grammar) -> Prepared:
        """Digest, key and meta of an IR grammar."""
        if not isinstance(grammar, Grammar):
            raise GrammarError(f"compile_ir needs a decoding.ir.Grammar, not {type(grammar).__name__}")
        return self._prepared(grammar, {"frontend": "ir"}, "ir", {}, None)

    def _prepared(self, g: Grammar, meta: dict, kind: str, options: dict, source: dict | None,
                  t0: float | None = None) -> Prepared:
        """``t0``: when the front-end started (``seconds`` counts from it, the digest included)."""
        digest = grammar_digest(g)
        key = grammar_key(digest, self.vocab.fingerprint, version=FORMAT_VERSION)
        meta = dict(meta, grammar_digest=digest, max_depth=g.max_depth, options=options)
        return Prepared(g, key, meta, kind, source, 0.0 if t0 is None else time.perf_counter() - t0)

    def compile_prepared(self, prepared: Prepared, **options: Any) -> CompiledGrammar:
        """The compiled grammar of ``prepared``: from the cache, else compiled by the back-end
        selection with the compile ``options`` (defaults: the compiler's) and stored in the
        cache."""
        return self._compile_prepared(prepared, options, None)

    def _compile_prepared(self, prepared: Prepared, options: dict, limits: Limits | None) -> CompiledGrammar:
        """:meth:`compile_prepared`; ``limits``: the back-end's (None: the defaults)."""
        opts = self._compile_options(options)
        if options:
            raise GrammarError(f"unknown compile option {next(iter(options))!r}; known: {', '.join(COMPILE_OPTIONS)}")
        backend, eager = opts.pop("backend"), opts.pop("eager")
        cache = self.cache
        if cache is not None:
            cg = cache.lookup(prepared.key, self.vocab, backend=backend, max_states=opts.get("max_states"))
            if cg is not None:
                return cg.precompute() if eager else cg
        t0 = time.perf_counter()
        try:
            lim = _select.DEFAULT_LIMITS if limits is None else limits
            if limits is not None:
                opts["limits"] = lim
            if prepared.seconds > 0:  # the front-end's time counts against the compile deadline
                # (floor 1 ms so the back-end gets a first step; never above the limit itself)
                opts["limits"] = with_compile_seconds(lim, max(lim.max_compile_seconds - prepared.seconds,
                                                               min(1e-3, lim.max_compile_seconds)))
            cg = compile_grammar(prepared.grammar, self.vocab, eager=eager, grammar_key=prepared.key,
                                 meta=dict(prepared.meta), backend=backend, **opts)
        except LimitError as e:
            if e.pointer is None and prepared.kind == "json-schema":
                raise _schema_located(e, prepared) from e
            if prepared.kind == "dtd" and prepared.meta.get("root") and "element '" not in str(e):
                src = (prepared.source or {}).get("name") or "<dtd>"
                raise LimitError(f"{e} ({src}: while compiling root element '{prepared.meta['root']}')",
                                 limit=e.limit, value=e.value, estimated=e.estimated) from e
            raise
        except GrammarError as e:
            if prepared.kind == "json-schema" and getattr(e, "pointer", None) is None:
                # the back-end found the generated language empty (the front-end's own
                # unsatisfiability proofs are located already): the whole schema is the place
                raise SchemaError("", None, f"no instance in the subset this compiler generates ({e})") from e
            raise
        finally:
            if time.perf_counter() - t0 + prepared.seconds >= TRIM_AFTER_SECONDS:
                release_free_memory()  # a large compile's freed blocks back to the system (decoding.heap)
        if cache is not None:
            src = prepared.source or {}
            cache.store(cg, name=Path(src["name"]).stem if src.get("name") else "", kind=prepared.kind,
                        options=prepared.meta["options"], **({"source": src} if src else {}))
        return cg

    # ------------------------------------------------------------------ options
    def _compile_options(self, options: dict) -> dict:
        """Pop the compile options out of ``options`` (defaults filled in)."""
        out = dict(self._compile_defaults)
        for k in COMPILE_OPTIONS:
            if k in options:
                out[k] = options.pop(k)
        return out

    def _frontend_options(self, options: dict, kind: str) -> dict:
        names = option_names(kind)
        return {**{k: v for k, v in self._frontend_defaults.items() if k in names}, **options}

    def _alias(self, text: str | None, kind: str, options: dict, base_dir: Any) -> str | None:
        """The request alias of a source compile (``text``: its normalized text, see
        :meth:`_text`), or None where it cannot be formed."""
        if text is None:
            return None
        try:
            opts = json.dumps(self._frontend_options(options, kind), sort_keys=True)
        except (TypeError, ValueError, GrammarError):
            return None
        base = os.path.abspath(base_dir) if base_dir is not None else None
        return source_key(text, kind, {"options": opts, "base_dir": base}, self.vocab.fingerprint,
                          version=FORMAT_VERSION)


_RULE = re.compile(r"rule '[a-z]+[0-9]+:(#|/[^']*)'")


def _schema_located(e: LimitError, prepared: Prepared) -> LimitError:
    """``e`` (a back-end LimitError of a JSON Schema grammar, no pointer) located in the
    schema: the pointer of the schema rule it names (JSON Schema rule names end in
    ``:<pointer>``) when that resolves in the schema, else ``""`` (the whole schema)."""
    ptr = ""
    m = _RULE.search(str(e))
    if m and m.group(1) != "#":
        try:
            doc: Any = json.loads((prepared.source or {}).get("text", ""))
            for part in m.group(1).split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                doc = doc[int(part)] if isinstance(doc, list) else doc[part]
            ptr = m.group(1)
        except (ValueError, KeyError, IndexError, TypeError):
            ptr = ""
    limit = e.limit or next((n for n in ("max_compile_seconds", "max_states", "max_masks") if n in str(e)), None)
    return LimitError(f"{e} (JSON Schema at {ptr or '/'})", pointer=ptr, limit=limit, value=e.value,
                      estimated=e.estimated)


#: the string that :func:`_warm_counted` compiles counted: ``maxLength`` a few units above the
#: vocabulary's counted tail (a medium loop: :mod:`decoding.backends.counted`)
WARM_STRING_ABOVE_TAIL = 8


def _warm_counted(vocab: Vocab) -> bool:
    """The counted back-end's walk of the long tokens through a JSON string character (the
    unit of nearly every counted loop: a string's ``maxLength``), from the unit's start and
    after an opening quote, which every medium string loop reads on its first compile
    (~7-20 ms on llama-bpe, paid by whichever schema came first).  Compiles
    ``{"type":"string","maxLength":tail+8}`` with the counted back-end; nothing is cached or
    kept but the walk.  A vocabulary whose tokens are too short for a counted loop (a test's)
    has nothing to warm.  Run once per vocabulary and process (:data:`_COUNTED_WARM`)."""
    from decoding.backends import counted
    from decoding.frontends import sources

    schema = {"type": "string", "maxLength": counted.tail_for(vocab) + WARM_STRING_ABOVE_TAIL}
    g, _ = sources.build_grammar(schema, "json-schema")
    try:  # (the walk is made by the compile: its loop is a medium one)
        compile_grammar(g, vocab, backend="counted")
    except (GrammarError, LimitError):
        pass  # a vocabulary too small to count: none of its grammars is counted either
    return True


#: :func:`_warm_counted`, once per vocabulary (its value: True once done)
_COUNTED_WARM: "WeakMemo[Vocab, bool]" = WeakMemo(_warm_counted)


def compile_json_schema(schema: dict | bool | str, tokenizer: Any, **options: Any) -> CompiledGrammar:
    """``Compiler(tokenizer).compile_json_schema(schema, **options)``."""
    return Compiler(tokenizer).compile_json_schema(schema, **options)


def _check_token_refs(g: Grammar, text: Any, vocab: Vocab, name: str | None) -> None:
    """A GBNF token reference (``<[id]>``, ``<text>``) must name one token of ``vocab``, as
    llama.cpp requires; GBNFError at its first occurrence otherwise (never the literal-text
    fallback that anchors get)."""
    for t in g.specials():
        if vocab.special_token(t) is not None:
            continue
        pos = text.find(t) if isinstance(text, str) else -1
        line = text.count("\n", 0, pos) + 1 if pos >= 0 else None
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1 if pos >= 0 else None
        n = int(t[2:-2]) if t.startswith("<[") and t[2:-2].isdigit() else None
        if n is not None and n < vocab.n_tokens:
            why = ("names an end-of-generation token: here a grammar ends by completing, not "
                   "by consuming one")
        elif n is not None:
            why = f"is no token id of vocabulary {vocab.name!r} ({vocab.n_tokens} tokens; llama.cpp rejects it too)"
        else:
            why = (f"is not one control or user-defined token of vocabulary {vocab.name!r} "
                   "(llama.cpp rejects it too)")
        raise GBNFError(f"token reference {t} {why}", line, col, name)
