"""The compiler facade: one pipeline for every source kind, always keyed, cached by key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import assert_same_masks_in_lockstep
from decoding import CompiledGrammar, Compiler, compile_json_schema
import decoding.compiler as compiler_mod
from decoding.artifacts.cache import GrammarCache
from decoding.artifacts.format import load_artifact, read_artifact, write_artifact
from decoding.errors import ArtifactError, DTDError, GrammarError
from decoding.frontends import sources
from decoding.frontends.sources import build_grammar
from decoding.vocab import Vocab

# every single byte, a few multi-byte tokens, one end-of-generation token
VOCAB = Vocab.from_bytes([bytes([i]) for i in range(256)] + [b'{"', b'":', b"<a>", b"</a>", b"ab", b""],
                         eog_ids=[261])

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 99},
                                           "s": {"enum": ["ab", "cd"]}},
          "required": ["n", "s"], "additionalProperties": False}
SCHEMA_SPELLINGS = {
    "dict": SCHEMA,
    "indented text": json.dumps(SCHEMA, indent=4),
    "compact text": json.dumps(SCHEMA, separators=(",", ":")),
    "keywords reordered": {"additionalProperties": False, "required": ["n", "s"], "type": "object",
                           "properties": {"n": {"maximum": 99, "type": "integer"}, "s": {"enum": ["ab", "cd"]}}},
}
DTD = '<!ELEMENT a (b, c?)>\n<!ELEMENT b (#PCDATA)>\n<!ELEMENT c EMPTY>\n<!ATTLIST c x (y|z) "y">\n'
GBNF = 'root ::= "x" digits\ndigits ::= [0-9] [0-9]?\n'


def compiled_with(kind: str, compiler: Compiler) -> CompiledGrammar:
    if kind == "json-schema":
        return compiler.compile_json_schema(SCHEMA)
    if kind == "dtd":
        return compiler.compile_dtd(DTD, root="a")
    if kind == "gbnf":
        return compiler.compile_gbnf(GBNF)
    g, _ = build_grammar(GBNF, "gbnf")
    return compiler.compile_ir(g)


# ----------------------------------------------------------------------------- keys

@pytest.mark.parametrize("spelling", list(SCHEMA_SPELLINGS))
def test_same_key_for_key_order_and_whitespace(spelling):
    c = Compiler(VOCAB, cache=False)
    ref = c.compile_json_schema(SCHEMA)
    cg = c.compile_json_schema(SCHEMA_SPELLINGS[spelling])
    assert cg.grammar_key == ref.grammar_key and cg is not ref  # compiled again: no cache
    assert cg.accepts(b'{"n":42,"s":"ab"}') and not cg.accepts(b'{"n":100,"s":"ab"}')


def test_key_depends_on_language_and_tokenizer():
    c = Compiler(VOCAB, cache=False)
    a = c.compile_json_schema(SCHEMA)
    assert c.compile_json_schema(SCHEMA, whitespace="flexible").grammar_key != a.grammar_key
    other = Vocab.from_bytes(list(VOCAB.token_bytes) + [b"zz"], eog_ids=[261])
    assert Compiler(other, cache=False).compile_json_schema(SCHEMA).grammar_key != a.grammar_key


def test_dtd_from_text_and_from_path_with_root_and_base_dir(tmp_path):
    (tmp_path / "ents").mkdir()
    (tmp_path / "ents" / "b.ent").write_text("<!ELEMENT b (#PCDATA)>\n")
    text = '<!ENTITY % b SYSTEM "b.ent">\n<!ELEMENT a (b, c?)>\n%b;\n<!ELEMENT c EMPTY>\n<!ATTLIST c x (y|z) "y">\n'
    (tmp_path / "ents" / "t.dtd").write_text(text)
    c = Compiler(VOCAB, cache=False)
    plain = c.compile_dtd(DTD, root="a")
    from_text = c.compile_dtd(text, root="a", base_dir=tmp_path / "ents")
    from_path = c.compile_dtd(tmp_path / "ents" / "t.dtd", root="a")
    from_str_path = c.compile_dtd(str(tmp_path / "ents" / "t.dtd"), root="a")
    assert plain.grammar_key == from_text.grammar_key == from_path.grammar_key == from_str_path.grammar_key
    assert from_path.accepts(b"<a><b>hi</b><c/></a>") and not from_path.accepts(b"<a><c/></a>")
    assert from_path.meta["root"] == "a" and from_path.meta["frontend"] == "dtd"
    with pytest.raises(DTDError, match="base_dir"):
        c.compile_dtd(text, root="a")  # the external entity needs a base directory
    with pytest.raises(GrammarError, match="no such file"):
        c.compile_dtd(str(tmp_path / "missing.dtd"), root="a")
    with pytest.raises(TypeError):
        c.compile_dtd(DTD)  # root is required  # type: ignore[call-arg]


def test_gbnf_and_ir_share_the_key_of_the_same_grammar():
    c = Compiler(VOCAB, cache=False)
    a = c.compile_gbnf(GBNF)
    b = c.compile_gbnf('# comment\nroot   ::=  "x"   digits\n\ndigits ::= [0-9]  [0-9]?  # tail\n')
    g, _ = build_grammar(GBNF, "gbnf")
    ir = c.compile_ir(g)
    assert a.grammar_key == b.grammar_key == ir.grammar_key
    assert ir.meta["frontend"] == "ir" and a.meta["frontend"] == "gbnf"
    assert a.accepts(b"x7") and a.accepts(b"x42") and not a.accepts(b"x")


@pytest.mark.parametrize("kind", ["json-schema", "dtd", "gbnf"])
def test_compile_file_by_extension(tmp_path, kind):
    ext, text = {"json-schema": (".json", json.dumps(SCHEMA)), "dtd": (".dtd", DTD), "gbnf": (".gbnf", GBNF)}[kind]
    p = tmp_path / f"g{ext}"
    p.write_text(text)
    c = Compiler(VOCAB, cache=False)
    opts = {"root": "a"} if kind == "dtd" else {}
    assert c.compile_file(p, **opts).grammar_key == compiled_with(kind, c).grammar_key


def test_module_level_compile_json_schema_is_the_compiler():
    assert compile_json_schema(SCHEMA, VOCAB).grammar_key == Compiler(VOCAB).compile_json_schema(SCHEMA).grammar_key


# ----------------------------------------------------------------------------- results

@pytest.mark.parametrize("backend", ["dfa", "pushdown"])
@pytest.mark.parametrize("kind", ["json-schema", "dtd", "gbnf", "ir"])
def test_results_are_keyed_plain_and_writable(tmp_path, kind, backend):
    cg = compiled_with(kind, Compiler(VOCAB, cache=False, backend=backend))
    assert isinstance(cg, CompiledGrammar) and cg.backend == backend
    assert cg.grammar_key and len(cg.grammar_key) == 40
    meta = json.loads(json.dumps(cg.meta))  # plain data
    assert meta["grammar_digest"] and "options" in meta and "max_depth" in meta
    p = tmp_path / "g.gdc"
    try:
        write_artifact(cg, p, name="g", kind=kind)
    except ArtifactError:
        assert backend != "dfa"  # the DFA back-end is always writable
        return
    assert read_artifact(p).header["grammar_key"] == cg.grammar_key
    got = load_artifact(p, VOCAB, expect_key=cg.grammar_key)
    sc = sg = 0
    for _ in range(6):  # the same masks along one path
        assert np.array_equal(got.mask(sg), cg.mask(sc))
        t = int(cg.allowed_ids(sc)[0])
        sc, sg = cg.next_state(sc, t), got.next_state(sg, t)
        if sc < 0:
            break


def test_eager_and_compile_options_reach_the_back_end():
    c = Compiler(VOCAB, cache=False, max_states=5)
    with pytest.raises(GrammarError):
        c.compile_json_schema(SCHEMA, backend="dfa")  # far more than 5 states
    cg = c.compile_json_schema(SCHEMA)  # auto: the same DFA made lazily (max_states bounds the eager one)
    assert cg.backend == "lazy"
    assert Compiler(VOCAB, cache=False).compile_gbnf(GBNF, eager=True).stats()["distinct_masks"] > 0


# ----------------------------------------------------------------------------- cache

def test_memory_hit_alias_hit_and_no_front_end_on_repeat(monkeypatch):
    calls = []
    real = sources.build_grammar

    def counting(*a, **k):
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr("decoding.compiler.build_grammar", counting)
    real_fast = compiler_mod.fast_program

    def counting_fast(*a, **k):  # (the fast path's front-end: a program instead of the pipeline's)
        prog = real_fast(*a, **k)
        if prog is not None:
            calls.append("json-schema fast")
        return prog

    monkeypatch.setattr("decoding.compiler.fast_program", counting_fast)
    cache = GrammarCache(False)
    c = Compiler(VOCAB, cache=cache)
    first = c.compile_json_schema(json.dumps(SCHEMA))
    assert len(calls) == 1 and cache.stats["compiles"] == 1
    assert c.compile_json_schema(json.dumps(SCHEMA)) is first  # same request: front-end skipped
    assert len(calls) == 1 and cache.stats["memory_hits"] == 1
    assert Compiler(VOCAB, cache=cache).compile_json_schema(SCHEMA_SPELLINGS["keywords reordered"]) is first
    assert len(calls) == 2 and cache.stats == {"memory_hits": 2, "disk_hits": 0, "compiles": 1, "disk_errors": 0}


def test_default_cache_is_private_memory_and_false_is_none():
    c = Compiler(VOCAB)
    assert c.compile_gbnf(GBNF) is c.compile_gbnf(GBNF)
    assert c.cache is not None and c.cache.directory is None
    n = Compiler(VOCAB, cache=False)
    assert n.cache is None and n.compile_gbnf(GBNF) is not n.compile_gbnf(GBNF)


@pytest.mark.parametrize("kind", ["json-schema", "dtd", "gbnf", "ir"])
def test_disk_hit_in_a_new_process(tmp_path, kind):
    first = compiled_with(kind, Compiler(VOCAB, cache=tmp_path))
    assert (tmp_path / f"{first.grammar_key}.gdc").is_file()
    again = GrammarCache(tmp_path)  # a new process: empty memory, same directory
    cg = compiled_with(kind, Compiler(VOCAB, cache=again))
    assert again.stats["disk_hits"] == 1 and again.stats["compiles"] == 0
    assert cg.grammar_key == first.grammar_key
    # (a lazy grammar's artifact holds its automaton made explicit and minimal: numbered apart)
    assert cg.backend == "dfa" and first.backend in ("dfa", "lazy")
    assert_same_masks_in_lockstep(first, cg)


def test_a_lazy_grammar_stays_in_memory_only(tmp_path):
    """The disk cache writes no artifact for a lazy grammar (that would make its whole
    automaton and every mask inside the compile); a memory hit still returns it."""
    cache = GrammarCache(tmp_path)
    c = Compiler(VOCAB, cache=cache, backend="lazy")
    first = c.compile_json_schema(SCHEMA)
    assert first.backend == "lazy" and not list(tmp_path.iterdir())
    assert c.compile_json_schema(SCHEMA) is first and cache.stats["memory_hits"] == 1
    assert Compiler(VOCAB, cache=cache, backend="dfa").compile_json_schema(SCHEMA).backend == "dfa"
    assert len(list(tmp_path.iterdir())) == 1  # (the DFA grammar's artifact)


def test_cached_entry_of_another_backend_is_not_returned():
    cache = GrammarCache(False)
    dfa = Compiler(VOCAB, cache=cache, backend="dfa").compile_gbnf(GBNF)
    assert Compiler(VOCAB, cache=cache).compile_gbnf(GBNF) is dfa  # auto takes any back-end
    pd = Compiler(VOCAB, cache=cache, backend="pushdown").compile_gbnf(GBNF)
    assert pd.backend == "pushdown" and pd.grammar_key == dfa.grammar_key
    assert cache.stats["compiles"] == 2


def test_true_uses_the_process_wide_cache(monkeypatch, tmp_path):
    from decoding.artifacts import cache as cache_mod

    monkeypatch.setenv("GUARDED_DECODING_CACHE", str(tmp_path))
    monkeypatch.setattr(cache_mod, "_default", [])
    c = Compiler(VOCAB, cache=True)
    assert c.cache is cache_mod.default_cache() and c.cache.directory == tmp_path


# ----------------------------------------------------------------------------- options

@pytest.mark.parametrize("call", ["json", "dtd", "gbnf", "ir", "defaults", "prepared"])
def test_unknown_option_is_a_grammar_error_naming_it(call):
    c = Compiler(VOCAB, cache=False)
    with pytest.raises(GrammarError, match="unknown .*'colour'"):
        if call == "json":
            c.compile_json_schema(SCHEMA, colour="red")
        elif call == "dtd":
            c.compile_dtd(DTD, root="a", colour="red")
        elif call == "gbnf":
            c.compile_gbnf(GBNF, colour="red")
        elif call == "ir":
            c.compile_ir(build_grammar(GBNF, "gbnf")[0], colour="red")
        elif call == "defaults":
            Compiler(VOCAB, colour="red")
        else:
            c.compile_prepared(c.prepare_source(GBNF, "gbnf"), colour="red")


def test_front_end_defaults_apply_where_the_front_end_has_them():
    c = Compiler(VOCAB, cache=False, whitespace="flexible")
    flexible = c.compile_json_schema(SCHEMA)
    assert flexible.accepts(b'{ "n": 1, "s": "ab" }')
    assert flexible.grammar_key == Compiler(VOCAB, cache=False).compile_json_schema(
        SCHEMA, whitespace="flexible").grammar_key
    assert c.compile_gbnf(GBNF).grammar_key  # GBNF has no whitespace option: not applied
    assert c.compile_json_schema(SCHEMA, whitespace="compact").accepts(b'{"n":1,"s":"ab"}')


@pytest.mark.parametrize("max_states, from_disk", [(None, False), (10_000, True)])
def test_disk_cache_loads_what_the_callers_own_state_limit_let_through(tmp_path, monkeypatch, max_states, from_disk):
    """An artifact above the default load limit (Limits.max_dfa_states) but within the
    compiler's own ``max_states`` comes back from disk instead of being recompiled."""
    from dataclasses import replace
    from decoding.artifacts import cache as cache_mod
    cg = Compiler(VOCAB, cache=GrammarCache(tmp_path)).compile_json_schema(SCHEMA, backend="dfa")
    n = cg.stats()["states"]
    monkeypatch.setattr(cache_mod, "DEFAULT_LIMITS", replace(cache_mod.DEFAULT_LIMITS, max_dfa_states=n - 1))
    fresh = GrammarCache(tmp_path)
    got = fresh.lookup(cg.grammar_key, VOCAB, backend="dfa", max_states=max_states)
    assert (got is not None) == from_disk
    assert fresh.stats["disk_hits" if from_disk else "disk_errors"] == 1


def test_compiler_builds_the_shared_schema_nodes_so_no_compile_pays_for_them():
    """``Compiler()`` builds the JSON Schema front-end's per-process shared nodes (any string,
    the numbers) and the back-end's records of them: in a fresh process, compiling schemas
    that use them registers no new shared node, and a format's string is still made (and
    registered) by the first schema that uses it."""
    import subprocess
    import sys
    from pathlib import Path

    schemas = [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "object"},
               {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}}]
    code = f"""
import json
from decoding import Compiler
from decoding.ir.nodes import plain_nodes
from decoding.vocab import Vocab
from decoding.backends import automaton
vocab = Vocab.from_bytes([bytes([i]) for i in range(256)], eog_ids=[0])
assert len(plain_nodes()) == 0
c = Compiler(vocab, cache=False)
warmed = len(plain_nodes())
program = automaton._PLAIN_PROGRAM[0][0]
for s in json.loads({json.dumps(json.dumps(schemas))}):
    c.compile_json_schema(s)
after = len(plain_nodes())
c.compile_json_schema({{"type": "string", "format": "date"}})
print(warmed, program, after, len(plain_nodes()))
"""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    warmed, program, after, with_date = map(int, out.stdout.split()[-4:])
    assert warmed > 0 and program == warmed == after
    assert with_date > after


# ----------------------------------------------------------------------------- the source text

@pytest.mark.parametrize("cached, kind, expected_calls", [
    (True, "json-schema", 1),   # the alias and the stored source share one normalized text
    (True, "gbnf", 1),
    (False, "json-schema", 0),  # nothing stores it: not made
    (False, "gbnf", 1),         # (its Unicode check is the text's own)
])
def test_normalized_text_made_at_most_once(monkeypatch, tmp_path, cached, kind, expected_calls):
    import decoding.compiler as compiler_module
    calls = []
    real = compiler_module.normalized_text
    monkeypatch.setattr(compiler_module, "normalized_text", lambda *a: calls.append(a) or real(*a))
    c = Compiler(VOCAB, cache=GrammarCache(tmp_path) if cached else False)
    cg = compiled_with(kind, c)
    assert len(calls) == expected_calls and cg.grammar_key
    if cached:  # the same source again: an alias hit, found by that text
        assert compiled_with(kind, c) is cg


def test_lone_surrogate_schema_is_refused_without_a_cache():
    bad = '{"type": "string", "const": "\\ud800"}'
    with pytest.raises(GrammarError, match="surrogate"):
        Compiler(VOCAB, cache=False).compile_json_schema(json.loads(bad))


# ----------------------------------------------------------------------------- one-time costs
FIRST_COMPILES = """
import json, sys
from decoding import Compiler
from decoding.vocab import Vocab
vocab = Vocab.from_bytes([bytes([i]) for i in range(256)] + [b'{"', b'":', b"ab", b""], eog_ids=[259])
c = Compiler(vocab, cache=False)
out = {}
for i, (backend, schema) in enumerate(json.loads(sys.argv[1])):
    before = set(sys.modules)
    cg = c.compile_json_schema(schema, backend=backend)
    out[f"{i} {backend} -> {cg.stats()['backend']}"] = sorted(set(sys.modules) - before)
print(json.dumps(out))
"""


def test_first_compiles_import_nothing():
    """What a compile needs once per process (imports included) is paid by ``Compiler()``,
    not by the first compile of each back-end (numpy 2.4's ``np.unique`` imported numpy.ma
    in the first counted compile: ~11 ms).  In a fresh interpreter: this one has imported
    everything already."""
    import subprocess
    import sys
    cases = [("auto", {"type": "string", "maxLength": 131072}),
             ("auto", {"type": "object", "properties": {"a": {"type": "string", "format": "date-time"},
                                                         "b": {"type": "string", "pattern": "^[a-z]+$"}}}),
             ("auto", {"oneOf": [{"type": "integer", "minimum": 3}, {"type": "string", "minLength": 2}]}),
             ("lazy", {"type": "array", "items": {"type": "number"}}),
             ("pushdown", {"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}},
                           "$ref": "#/$defs/n"})]
    p = subprocess.run([sys.executable, "-c", FIRST_COMPILES, json.dumps(cases)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    imported = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(imported) == len(cases) and "0 auto -> counted" in imported, imported
    assert all(not mods for mods in imported.values()), imported
