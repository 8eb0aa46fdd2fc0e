"""Artifacts, canonical grammar keys and the grammar cache."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest

from conftest import ROOT, get_vocab
from decoding.artifacts.format import (FORMAT_VERSION, MAGIC, artifact_bytes, load_artifact, read_artifact,
                               write_artifact)
from decoding.artifacts.cache import GrammarCache, default_cache_dir
from decoding.compiler import Compiler
from decoding.errors import ArtifactError, GrammarError
from decoding.ir.key import grammar_digest, grammar_key
from decoding.ir import Grammar, Special, lit, seq, star, byteset
from decoding.backends.select import compile_grammar
from decoding.frontends.sources import build_grammar
from decoding.vocab import Vocab

WEATHER = json.loads((ROOT / "grammars" / "get_weather.json").read_text())
USER_QUERY_DTD = (ROOT / "grammars" / "user_query.dtd").read_text()

_compiled: dict = {}


def compiled(name: str):
    """Small grammars compiled for the 50k-token GPT-2 vocabulary (shared by the tests)."""
    if name not in _compiled:
        v = get_vocab("gpt-2")
        if name == "weather":
            _compiled[name] = Compiler(v, cache=False, eager=True).compile_json_schema(WEATHER)
        elif name == "user_query":
            _compiled[name] = Compiler(v, cache=False, eager=True).compile_dtd(USER_QUERY_DTD, root="request")
        else:
            raise KeyError(name)
    return _compiled[name]


def blob(name: str) -> bytes:
    key = "blob:" + name
    if key not in _compiled:
        _compiled[key] = artifact_bytes(compiled(name), name=name, kind="test")
    return _compiled[key]


def reseal(buf: bytearray) -> bytes:
    """Recompute the checksum of an edited artifact (to reach the checks behind it)."""
    body = struct.unpack_from("<Q", buf, 16)[0]
    buf[body:] = hashlib.sha256(bytes(buf[:body])).digest()
    return bytes(buf)


# ----------------------------------------------------------------------------- format

def test_format_version_is_pinned():
    # Bump FORMAT_VERSION (and this test) whenever the layout or the meaning of a section
    # changes: old artifacts must then be rejected, not misread.
    assert FORMAT_VERSION == 1
    assert MAGIC == b"\x89GDA\r\n\x1a\n"
    b = blob("user_query")
    assert b[:8] == MAGIC and struct.unpack_from("<I", b, 8)[0] == FORMAT_VERSION
    assert read_artifact(b).header["format_version"] == FORMAT_VERSION


@pytest.mark.parametrize("name", ["weather", "user_query"])
def test_round_trip_identical_masks_transitions_and_budget(name):
    cg = compiled(name)
    v = cg.vocab
    got = load_artifact(blob(name), v, mask_cache=3)  # tiny LRU: exercises eviction
    assert got.grammar_key == cg.grammar_key and got.dfa.n_states == cg.dfa.n_states
    for s in range(cg.dfa.n_states):
        assert np.array_equal(got.mask(s), cg.mask(s)), s
        assert got.mask(s).dtype == np.uint32 and not got.mask(s).flags.writeable
    assert np.array_equal(got.dfa.trans, cg.dfa.trans)
    assert np.array_equal(got.dfa.accepting, cg.dfa.accepting)
    assert np.array_equal(got.dfa.byte_class, cg.dfa.byte_class)
    bt_got, bt = got.budget_table(), cg.budget_table()  # loaded from its section, not recomputed
    assert np.array_equal(bt_got.min_tokens, bt.min_tokens)
    assert np.array_equal(bt_got.worst_successor, bt.worst_successor)
    assert all(not k.startswith("_") for k in got.meta) and json.dumps(got.meta)  # plain data only
    assert got.completion_cost(0) == cg.completion_cost(0)
    rng = np.random.default_rng(0)
    for s in rng.integers(0, cg.dfa.n_states, 20):
        for t in rng.integers(0, v.n_tokens, 50):
            assert got.next_state(int(s), int(t)) == cg.next_state(int(s), int(t))


def test_round_trip_special_tokens_and_file(tmp_path):
    v = Vocab.from_bytes([b"a", b"b", b"ab", b"", b""], eog_ids=[4], special={"<tool>": 3, "</s>": 4})
    g = Grammar.single(seq(Special("<tool>"), star(byteset([(ord("a"), ord("b"))])), lit("b")))
    cg = compile_grammar(g, v, grammar_key=grammar_key(g, v.fingerprint, version=FORMAT_VERSION))
    p = tmp_path / "t.gdc"
    size = write_artifact(cg, p, name="t")
    assert p.stat().st_size == size
    got = load_artifact(p, v)
    assert got.special_token_ids == cg.special_token_ids == (3,)
    for s in range(cg.dfa.n_states):
        assert np.array_equal(got.mask(s), cg.mask(s))
    assert got.next_state(0, 3) == cg.next_state(0, 3) >= 0


@pytest.mark.parametrize("pos", [9, 20, 40, 300, -40, -1])
def test_corrupted_byte_is_rejected(pos):
    b = bytearray(blob("user_query"))
    b[pos] ^= 0x5A
    with pytest.raises(ArtifactError, match="checksum|format version|corrupt"):
        load_artifact(bytes(b), get_vocab("gpt-2"))


@pytest.mark.parametrize("cut", [0, 7, 23, 100, 0.5, -1])
def test_truncated_artifact_is_rejected(cut):
    b = blob("user_query")
    n = int(len(b) * cut) if isinstance(cut, float) else (len(b) + cut if cut < 0 else cut)
    with pytest.raises(ArtifactError, match="truncated"):
        read_artifact(b[:n])


def test_bad_magic_and_trailing_bytes_are_rejected():
    b = blob("user_query")
    with pytest.raises(ArtifactError, match="magic"):
        read_artifact(b"PK\x03\x04" + b[4:])
    with pytest.raises(ArtifactError, match="trailing"):
        read_artifact(b + b"\0")


def test_wrong_version_is_rejected(monkeypatch):
    b = bytearray(blob("user_query"))
    struct.pack_into("<I", b, 8, FORMAT_VERSION + 1)
    with pytest.raises(ArtifactError, match=f"format version {FORMAT_VERSION + 1}.*recompile"):
        read_artifact(reseal(b))
    import decoding.artifacts.format as art
    monkeypatch.setattr(art, "FORMAT_VERSION", FORMAT_VERSION + 7)
    newer = art.artifact_bytes(compiled("user_query"))
    monkeypatch.undo()
    with pytest.raises(ArtifactError, match="format version"):
        read_artifact(newer)


def test_other_tokenizer_is_rejected():
    with pytest.raises(ArtifactError, match="fingerprint"):
        load_artifact(blob("user_query"), get_vocab("llama-bpe"))
    v = get_vocab("gpt-2")
    toks = list(v.token_bytes)
    toks[1000] = toks[1000] + b"x"  # one token spelled differently: another tokenizer
    other = Vocab.from_bytes(toks, eog_ids=v.eog_ids, special=v.special_ids)
    with pytest.raises(ArtifactError, match="fingerprint"):
        load_artifact(blob("user_query"), other)


def test_other_grammar_key_is_rejected():
    with pytest.raises(ArtifactError, match="expected"):
        load_artifact(blob("user_query"), get_vocab("gpt-2"), expect_key="0" * 40)


@pytest.mark.parametrize("section,value,why", [
    ("state_mask", 10_000, "mask ids"),
    ("mask_ids", 65_000, "token id"),
    ("byte_class", 255, "byte classes"),
])
def test_checksummed_but_inconsistent_artifact_is_rejected(section, value, why):
    b = bytearray(blob("weather"))
    sec = read_artifact(bytes(b)).header["sections"][section]
    assert sec["nbytes"] > 0
    item = np.dtype(sec["dtype"])
    b[sec["offset"]:sec["offset"] + item.itemsize] = np.array([value], dtype=item).tobytes()
    with pytest.raises(ArtifactError, match=why):
        load_artifact(reseal(b), get_vocab("gpt-2"))


# ----------------------------------------------------------------------------- keys

def _reorder(x):
    """Reverse the keyword order of every schema object, except the members of
    ``properties`` (their order is the emitted field order, part of the language)."""
    if isinstance(x, dict):
        items = list(x.items())[::-1]
        return {k: ({pk: _reorder(pv) for pk, pv in v.items()} if k == "properties" else _reorder(v))
                for k, v in items}
    if isinstance(x, list):
        return [_reorder(i) for i in x]
    return x


def test_schema_keyword_order_and_whitespace_do_not_change_the_key():
    fp = get_vocab("gpt-2").fingerprint
    a, _ = build_grammar(json.dumps(WEATHER, indent=2), "json-schema")
    b, _ = build_grammar(json.dumps(_reorder(WEATHER), separators=(",", ":")), "json-schema")
    assert list(_reorder(WEATHER)) != list(WEATHER)
    assert grammar_key(a, fp, version=FORMAT_VERSION) == grammar_key(b, fp, version=FORMAT_VERSION)
    assert grammar_key(a, fp, version=FORMAT_VERSION) != grammar_key(a, "another-tokenizer", version=FORMAT_VERSION)


def test_property_order_is_part_of_the_language():
    s = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
         "required": ["a", "b"], "additionalProperties": False}
    t = dict(s, properties={"b": {"type": "boolean"}, "a": {"type": "integer"}})
    ga, _ = build_grammar(s, "json-schema")
    gb, _ = build_grammar(t, "json-schema")
    assert grammar_digest(ga) != grammar_digest(gb)


def test_dtd_whitespace_and_comments_do_not_change_the_key():
    noisy = "<!-- a comment -->\n\n" + USER_QUERY_DTD.replace("<!ELEMENT", "<!-- x -->\n<!ELEMENT   ")
    assert noisy != USER_QUERY_DTD
    a, _ = build_grammar(USER_QUERY_DTD, "dtd", root="request")
    b, _ = build_grammar(noisy, "dtd", root="request")
    assert grammar_digest(a) == grammar_digest(b)
    c, _ = build_grammar(USER_QUERY_DTD, "dtd", root="request", whitespace="flexible")
    assert grammar_digest(a) != grammar_digest(c)


def test_gbnf_whitespace_and_comments_do_not_change_the_key():
    a, _ = build_grammar('root ::= "a" b\nb ::= [0-9]+\n', "gbnf")
    b, _ = build_grammar('# digits\nroot   ::=   "a"   b   # tail\n\nb ::= [0-9] +\n', "gbnf")
    assert grammar_digest(a) == grammar_digest(b)


def test_unknown_option_is_an_error():
    with pytest.raises(GrammarError, match="unknown option 'rooot'"):
        build_grammar(USER_QUERY_DTD, "dtd", root="request", rooot="x")


# ----------------------------------------------------------------------------- cache

def test_key_reordering_hits_the_in_process_and_the_disk_cache(tmp_path):
    v = get_vocab("gpt-2")
    c1 = GrammarCache(tmp_path, capacity=4)
    first = Compiler(v, cache=c1).compile_source(json.dumps(WEATHER, indent=4), "json-schema")
    again = Compiler(v, cache=c1).compile_source(json.dumps(_reorder(WEATHER)), "json")
    assert again is first
    assert c1.stats == {"memory_hits": 1, "disk_hits": 0, "compiles": 1, "disk_errors": 0}
    files = list(tmp_path.glob("*.gdc"))
    assert [f.stem for f in files] == [first.grammar_key]

    c2 = GrammarCache(tmp_path)  # a new process: empty memory, same directory
    from_disk = Compiler(v, cache=c2).compile_json_schema(_reorder(WEATHER))
    assert c2.stats["disk_hits"] == 1 and c2.stats["compiles"] == 0
    assert from_disk.grammar_key == first.grammar_key
    for s in range(first.dfa.n_states):
        assert np.array_equal(from_disk.mask(s), first.mask(s))
    assert Compiler(v, cache=c2).compile_json_schema(WEATHER) is from_disk
    assert c2.stats["memory_hits"] == 1


def test_corrupt_cache_file_is_recompiled_not_used(tmp_path):
    v = get_vocab("gpt-2")
    good = Compiler(v, cache=GrammarCache(tmp_path)).compile_dtd(USER_QUERY_DTD, root="request")
    path = tmp_path / f"{good.grammar_key}.gdc"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    c = GrammarCache(tmp_path)
    cg = Compiler(v, cache=c).compile_dtd(USER_QUERY_DTD, root="request")
    assert c.stats["disk_errors"] == 1 and c.stats["compiles"] == 1
    for s in range(good.dfa.n_states):
        assert np.array_equal(cg.mask(s), good.mask(s))
    read_artifact(path)  # replaced by a good one


def test_lru_capacity_and_paths(tmp_path):
    v = get_vocab("gpt-2")
    c = GrammarCache(False, capacity=1)
    a = Compiler(v, cache=c).compile_gbnf('root ::= "x"')
    Compiler(v, cache=c).compile_gbnf('root ::= "y"')
    assert len(c) == 1 and c.get(a.grammar_key) is None and c.path_for(a.grammar_key) is None
    g = tmp_path / "g.gbnf"
    g.write_text('root ::= "z"\n')
    Compiler(v, cache=c).compile_file(g)
    assert c.stats["compiles"] == 3


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("GUARDED_DECODING_CACHE", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("GUARDED_DECODING_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "guarded-decoding"
