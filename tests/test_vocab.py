"""Vocabulary bytes are exact: tokenize(s) concatenates back to s.encode() on real tokenizers."""

from __future__ import annotations

import random

import pytest

from conftest import get_vocab
from decoding.errors import VocabError
from decoding.vocab import Vocab

VOCABS = ["llama-bpe", "qwen35", "gemma-4", "phi-3", "llama-spm", "gpt-2", "smollm2", "gemma3"]

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    " \t\n",
    "<>/=\"'&;:{}[],.-_!?#",
    "北京市上海天气日期搜索产品数码服饰食品家居张三请求",
    "😀🚗🌧️✨🇨🇳",
    "éüßñçøå",
]


def random_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = ["<request><user_id>12345</user_id></request>", '{"city": "北京市", "date": "2024-06-15"}',
           "  leading spaces", "trailing  ", "\n\nnewlines", "<0x41>"]
    while len(out) < n:
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(k)))
    return out


STRINGS = random_strings(1000, 7)


@pytest.mark.parametrize("name", VOCABS)
def test_tokenize_round_trip_1000_strings(name):
    v = get_vocab(name)
    bad = []
    for s in STRINGS:
        ids = v.tokenize(s, fallback=False)
        if v.decode(ids) != s.encode("utf-8"):
            bad.append(s)
    assert not bad, f"{len(bad)} strings do not round-trip, e.g. {bad[:3]!r}"


@pytest.mark.parametrize("name", VOCABS)
def test_control_tokens_never_match_text_and_eog_recorded(name):
    v = get_vocab(name)
    assert v.eog_ids, "every real vocabulary has an end-of-generation token"
    for t in v.eog_ids:
        assert v.token_bytes[t] == b""
    for text, tid in v.special_ids.items():
        if v.attrs[tid] & 8:  # control
            assert v.token_bytes[tid] == b""
    assert len(v.fingerprint) == 32


def test_spm_byte_fallback_and_space_marker():
    v = get_vocab("llama-spm")
    by_bytes = {b: i for i, b in enumerate(v.token_bytes) if b}
    assert b"\xe5" in by_bytes  # <0xE5> byte-fallback token is the raw byte
    assert b" the" in by_bytes  # "▁the" is spelled with a space


def test_fingerprints_are_stable_and_distinct():
    a, b = get_vocab("llama-spm"), get_vocab("phi-3")
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == Vocab.from_llama(a._llama).fingerprint


def test_missing_gguf_is_a_clear_error(tmp_path):
    with pytest.raises(VocabError, match="no such GGUF"):
        Vocab.from_gguf(tmp_path / "nope.gguf")


def test_greedy_names_unspellable_byte():
    v = Vocab.from_bytes([b"", b"a"], eog_ids=[0])
    with pytest.raises(VocabError, match="0x62 at offset 1"):
        v.greedy(b"ab")


@pytest.mark.parametrize("name", ["llama-spm", "phi-3", "gemma-4"])
def test_spm_literal_space_marker_is_spelled_exactly(name):
    v = get_vocab(name)
    s = "▁literal sentencepiece marker"
    with pytest.raises(VocabError, match="round trip"):
        v.tokenize(s, fallback=False)  # SPM turns a literal ▁ into a space
    assert v.decode(v.tokenize(s)) == s.encode()
