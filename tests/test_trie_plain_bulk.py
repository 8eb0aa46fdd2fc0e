"""Whole plain-text subtrees in trie walks (``_native.trie_plain_flags`` and the ``plain``
option of ``_native.trie_walk``): the per-node flags equal a Python reference, and masks
with the shortcut equal whole-trie walks without it, state by state, on schemas whose
property names are free (a state that is not a plain chain but leads into string bodies).
XML text is covered by tests/test_index.py::test_plain_text_shortcut_on_xml_text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import get_vocab
from decoding import _native
from decoding.backends.tables import PROFILES, char_dfa, vocab_tables
from decoding.vocab import Vocab

TOKENS = [b"a", b"ab", b"abc", b'a"', b'"', b'"a', b'"ab', b"\\", b"\\n", b"\xe4", b"\xe4\xb8", b"\xe4\xb8\xad",
          b"\xe4\xb8\xadx", b"x\xe4", b"<", b"<a", b"a<b", b"b", b"bc", b"\n", b"a\n", b"\xf0\x9f\x98\x80"]


def _reference(tokens: list[bytes], cd: np.ndarray, prefix: bytes) -> int:
    """Bit p: every token starting with ``prefix`` continues after it with complete plain
    characters when read from character state p."""
    bits = 0
    for p in range(cd.shape[0]):
        ok = True
        for t in tokens:
            if not t.startswith(prefix):
                continue
            s = p
            for b in t[len(prefix):]:
                s = int(cd[s, b])
                if s < 0:
                    break
            ok &= s == 0
        bits |= ok << p
    return bits


def _nodes(tokens: list[bytes]) -> list[bytes]:
    """Trie nodes in pre-order (the native layout): every distinct non-empty prefix, sorted."""
    return sorted({t[:k] for t in tokens for k in range(1, len(t) + 1)})


@pytest.mark.parametrize("name", list(PROFILES))
def test_node_flags_equal_the_reference(name):
    v = Vocab.from_bytes(TOKENS)
    trie = vocab_tables(v).trie
    cd = char_dfa(PROFILES[name])
    out = np.zeros(_native.trie_info(trie)[0], dtype=np.uint8)
    _native.trie_plain_flags(trie, cd.reshape(-1), out)
    nodes = _nodes(TOKENS)
    assert len(nodes) == len(out)
    for i, prefix in enumerate(nodes):
        assert out[i] == _reference(TOKENS, cd, prefix), (prefix, out[i])


def test_bad_flag_arguments_are_errors():
    v = Vocab.from_bytes(TOKENS)
    trie = vocab_tables(v).trie
    cd = char_dfa(PROFILES["json-string"])
    with pytest.raises(ValueError, match="one byte per trie node"):
        _native.trie_plain_flags(trie, cd.reshape(-1), np.zeros(3, dtype=np.uint8))
    with pytest.raises(ValueError, match="out of range"):
        _native.trie_plain_flags(trie, (cd + 9).reshape(-1).astype(np.int16),
                                 np.zeros(_native.trie_info(trie)[0], dtype=np.uint8))


SCHEMAS = [
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"category": {"type": "string"}, "count": {"type": "integer"}},
     "additionalProperties": True},
    {"type": "object", "properties": {"msg": {"type": "object", "additionalProperties": {"type": "array"}}}},
    {"type": "array", "items": {"type": "string", "maxLength": 5000}},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False},
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("vocab_name", ["gpt-2", "llama-bpe", "gemma-4"])
def test_masks_with_whole_plain_subtrees_equal_whole_trie_walks(schema, vocab_name):
    from decoding import compile_json_schema

    v = get_vocab(vocab_name)
    # (the explicit DFA's masks, or a counted grammar's: its inner DFA grammar's)
    backend = "counted" if "maxLength" in json.dumps(schema) else "dfa"
    fast, full = (getattr(cg, "inner", cg) for cg in (compile_json_schema(schema, v, backend=backend),
                                                      compile_json_schema(schema, v, backend=backend)))
    full._loop_profiles = ()  # no shortcut of any kind: whole-trie walks
    for s in range(min(fast.dfa.n_states, 300)):
        assert np.array_equal(fast.mask(s), full.mask(s)), f"state {s}"
    assert fast._loops is not None and any((m == 1).any() for m in fast._loops.memo.values())
