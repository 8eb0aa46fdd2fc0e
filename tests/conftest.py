"""Shared fixtures: paths to ../shared, real vocabularies and the packaged models.

The tests use no network: every corpus is read from ../shared and every model from an
installed package.  ``_no_network`` makes that a rule: an IP connection from the test
process to anything but the loopback fails the test that tried it.
"""

from __future__ import annotations

import gc
import json
import ipaddress
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPORA = SHARED / "corpora"
VOCAB_DIR = CORPORA / "vocab"

#: hand-written JSON Schemas of the compile fast-path tests (each test module picks by name)
HAND_SCHEMAS = {
    "string": {"type": "string"},
    "long_string": {"type": "string", "minLength": 300, "maxLength": 5000},
    "numbers": {"type": "object", "properties": {"i": {"type": "integer", "minimum": 3, "maximum": 1234},
                                                 "n": {"type": "number"}, "k": {"type": "integer"}},
                "required": ["i"]},
    "big_array": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 2, "maxItems": 1000},
    "free": {"type": "object", "additionalProperties": True, "properties": {"a": {}}},
    "extras": {"type": "object", "properties": {"a": {"type": "string"}},
               "additionalProperties": {"type": "integer"}},
    "same_definitions": {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}, "b": {"$ref": "#/$defs/y"},
                                                          "c": {"$ref": "#/$defs/x"}},
                         "$defs": {"x": {"type": "object", "properties": {"s": {"type": "string"}}},
                                   "y": {"type": "object", "properties": {"s": {"type": "string"}}}}},
    "recursive": {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"},
    "no_exit_cycle": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "object", "properties": {
        "x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}, "type": "object",
        "properties": {"r": {"$ref": "#/$defs/a"}}, "required": ["r"]},
    "self": {"$ref": "#"},
    "enum_big": {"enum": [f"value_{i}" for i in range(300)]},
    "pattern": {"type": "string", "pattern": "^[a-z]{2,40}[0-9]*$", "maxLength": 20},
    "unsat": {"type": "integer", "minimum": 5, "maximum": 1},
    "bad_pattern": {"type": "string", "pattern": "(?<=a)b"},
    "counted_strings": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2000},
                                                         "b": {"type": "array", "maxItems": 400,
                                                               "items": {"type": "integer"}}}},
    "mutual": {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}, "s": {"type": "string"}}},
                         "b": {"type": "array", "items": {"$ref": "#/$defs/a"}, "maxItems": 3}},
               "$ref": "#/$defs/a"},
    "not": {"type": "string", "not": {"enum": ["a", "b"]}},
}


def bench_schemas(per_split: int, offset: int = 0,
                  splits: tuple[str, ...] = ("Glaiveai2K", "Github_easy", "Kubernetes", "Snowplow")) -> dict[str, object]:
    """``per_split`` JSONSchemaBench schemas per split, evenly spaced over the sorted files
    from ``offset``; keys ``split/stem``."""
    out: dict[str, object] = {}
    for split in splits:
        files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
        for f in files[offset::max(1, len(files) // per_split)][:per_split]:
            out[f"{split}/{f.stem}"] = json.loads(f.read_text(encoding="utf-8"))["schema"]
    return out


def frontend_outcome(schema: object, *, digest: bool = False, **kw) -> tuple:
    """What the JSON Schema front-end gives for ``schema`` (options ``kw``), for comparing two
    ways of compiling: the IR's canonical text (and, with ``digest``, its grammar digest) with
    what was dropped and ignored, or the error's type, pointer, keyword, limit and message."""
    from decoding.frontends.jsonschema import compile_schema
    from decoding.ir.key import canonical_ir_text, grammar_digest

    try:
        g = compile_schema(schema, **kw)
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        return ("error", type(e).__name__, getattr(e, "pointer", None), getattr(e, "keyword", None),
                getattr(e, "limit", None), str(e))
    text = canonical_ir_text(g.grammar)
    return ("ok", text, grammar_digest(g.grammar), g.dropped, g.ignored) if digest else \
        ("ok", text, g.dropped, g.ignored)


#: HAND_SCHEMAS and a JSONSchemaBench sample that have one explicit DFA (unsat / bad_pattern /
#: self / no_exit_cycle have no grammar; the counted-size, long-string, big-array and Snowplow
#: ones exceed the explicit DFA's limits)
_NO_DFA = {"hand/unsat", "hand/bad_pattern", "hand/self", "hand/no_exit_cycle", "hand/counted_strings",
           "hand/long_string", "hand/big_array", "Snowplow/sp_0_Normalized"}
DFA_SCHEMAS = {name: v for name, v in {**{f"hand/{k}": v for k, v in HAND_SCHEMAS.items()}, **bench_schemas(6)}.items()
               if name not in _NO_DFA}


def assert_same_dfa(a, b, *, read_only: bool = False) -> None:
    """Two DFAs are the same: table (and its dtype), acceptance (and its dtype), byte
    classes, specials; with ``read_only`` every array of ``a`` is read-only too."""
    assert a.trans.dtype == b.trans.dtype
    assert np.array_equal(a.trans, b.trans)
    assert np.array_equal(a.accepting, b.accepting)
    assert a.accepting.dtype == b.accepting.dtype
    assert np.array_equal(a.byte_class, b.byte_class)
    assert (a.specials, a.n_classes) == (b.specials, b.n_classes)
    if read_only:
        for x in (a.trans, a.accepting, a.byte_class):
            assert not x.flags.writeable


def assert_same_masks_in_lockstep(a, b, *, max_pairs: int = 5000) -> None:
    """Two compiled grammars of one vocabulary give the same masks and the same verdicts on
    every token, from their starts on, whatever their state numbering: a breadth-first walk
    over the pairs of states the allowed tokens lead to (at most ``max_pairs`` pairs)."""
    todo, seen = [(0, 0)], set()
    while todo and len(seen) < max_pairs:
        pair = todo.pop()
        if pair in seen:
            continue
        seen.add(pair)
        sa, sb = pair
        assert np.array_equal(a.mask(sa), b.mask(sb)), pair
        for t in a.allowed_ids(sa).tolist():
            na, nb = a.next_state(sa, t), b.next_state(sb, t)
            assert (na >= 0) == (nb >= 0), (pair, t)
            if na >= 0:
                todo.append((na, nb))


_vocabs: dict = {}
_models: dict = {}


def vocab_path(name: str) -> Path:
    return VOCAB_DIR / f"ggml-vocab-{name}.gguf"


def get_vocab(name: str):
    """A real vocabulary: a shared vocab-only GGUF name (llama-bpe, gemma-4, ...) or a
    packaged model (smollm2, gemma3)."""
    from decoding.models import MODELS
    from decoding.vocab import Vocab

    if name not in _vocabs:
        if name in MODELS:
            _vocabs[name] = Vocab.from_llama(get_model(name), name=name)
        else:
            _vocabs[name] = Vocab.from_gguf(vocab_path(name))
    return _vocabs[name]


def compiled_corpus(split: str, step: int, vocab_name: str = "llama-bpe"):
    """(schema, compiled grammar) for every ``step``-th schema of a shared JSONSchemaBench
    split that compiles with the default ``Compiler`` (the others skipped: not the caller's
    subject)."""
    from decoding.compiler import Compiler

    comp = Compiler(get_vocab(vocab_name), cache=False)
    for f in sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))[::step]:
        schema = json.loads(f.read_text(encoding="utf-8"))["schema"]
        try:
            cg = comp.compile_json_schema(schema)
        except Exception:  # noqa: BLE001 - schemas the pipeline refuses
            continue
        yield schema, cg


def get_model(name: str = "smollm2"):
    from decoding.models import load_model

    if name not in _models:
        _models[name] = load_model(name, n_ctx=1024)
    return _models[name]


def _loopback(address) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pytest_configure(config):
    """Refuse IP connections to other hosts for the whole run (collection included)."""
    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            raise OSError(f"tests must not use the network (connect to {address!r}); "
                          f"read the corpus from ../shared instead")
        return real_connect(self, address)

    socket.socket.connect = connect
    socket.socket.connect_ex = lambda self, address: connect(self, address) or 0


@pytest.fixture(scope="session")
def smollm2():
    return get_model("smollm2")


@pytest.fixture(scope="session", autouse=True)
def _close_llama_objects():
    """Free llama.cpp objects before interpreter shutdown (avoids noise from late __del__)."""
    yield
    live = list(_models.values()) + [v._llama for v in _vocabs.values() if v._llama is not None]
    llama_cpp = sys.modules.get("llama_cpp")
    if llama_cpp is not None:   # also those made by tests directly (vocab-only loads, as_vocab)
        gc.collect()
        live += [o for o in gc.get_objects() if issubclass(type(o), llama_cpp.Llama)]
    for llm in live:
        try:
            llm.close()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass
