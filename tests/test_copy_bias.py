"""The copy bias (``GrammarLogitsProcessor(copy_from=...)``): where it applies (value starts),
which tokens get the bonus (copy starts of the request), and that the mask is unchanged.

Driven without a model, as llama-cpp-python drives a processor: ``input_ids`` grow by the
chosen token, ``scores`` are written in place, the argmax is the greedy choice."""

from __future__ import annotations

import numpy as np
import pytest

from decoding import GrammarLogitsProcessor, compile_json_schema
from decoding.errors import UsageError
from decoding.runtime.copy_bias import CopyBias, value_start, word_starts
from decoding.vocab import Vocab
from tests.conftest import get_vocab


@pytest.mark.parametrize("tail", [
    b'{"city": "', b'{"city":"', b'{"a": {"b":\n  "', b'["', b'{"xs": [ "', b"<city>",
    b'<soap:Body><command>', b'<a x="1">', b"<r>\n<city>",
])
def test_value_start_accepted(tail):
    assert value_start(tail)


@pytest.mark.parametrize("tail", [
    b'{"', b'{"a": 1, "', b'{"city": "Bei', b'"', b"</city>", b"<br/>", b'{"city": "x"', b"", b"<",
    b'{"a": "b", "',
])
def test_value_start_rejected(tail):
    assert not value_start(tail)


@pytest.mark.parametrize("text, words", [
    ("Find wireless headphones", ["Find", "wireless", "headphones"]),
    ("帮我订2025-03-12Beijing飞Paris", ["帮", "我", "订", "2025", "-", "03", "-", "12", "Beijing", "飞", "Paris"]),
    ("id U9C123456.", ["id", "U", "9", "C", "123456", "."]),
    ("(数码) 500", ["(", "数", "码", ")", "500"]),
])
def test_word_starts(text, words):
    data = text.encode()
    starts = word_starts(text)
    assert [data[i:j].decode().strip() for i, j in zip(starts, starts[1:] + [len(data)])] == words


HAND = Vocab.from_bytes([b"", b"wire", b"less", b"wireless", b" head", b"running", b"\xe5",
                         b"\x8c\x97", "北".encode(), "北京".encode(), b"(", b"5", b"500", b"Find", b"ind",
                         b'"', b"{", b"}", b":", b" ", b",", b"x", b"q", b"r", b"u", b"n", b"i", b"g",
                         b"e", b"s", b"h", b"o", b"a", b"d", b"p", b"l", b"w", b"f", b"c", b"t", b"y", b"m",
                         b"\xe4", b"\xba", b"\xac", b"\x8c", b"\x97"],
                        eog_ids=[0])


def _tok(vocab: Vocab, b: bytes) -> int:
    return vocab.token_bytes.index(b)


@pytest.mark.parametrize("token, biased", [
    (b"wire", True), (b"wireless", True), (b"Find", True), ("北".encode(), True), ("北京".encode(), True),
    (b"5", True), (b"500", True),
    (b"less", False),      # inside a word
    (b"ind", False),       # inside a word
    (b"running", False),   # not in the request
    (b"\xe5", False), (b"\x8c\x97", False),  # incomplete UTF-8
    (b"(", False),         # no letter or digit
    (b" head", False),     # the request has "headphones" after a space, but " head" starts at the space
])
def test_copy_starts_of_a_request(token, biased):
    cb = CopyBias(HAND, "Find wireless headphones (北京) under 500 yuan.")
    assert (_tok(HAND, token) in set(cb.ids.tolist())) is biased


def test_specials_never_biased():
    v = Vocab.from_bytes([b"", b"Find", b"ab"], eog_ids=[0], special={"<|x|>": 0})
    assert CopyBias(v, "Find ab").ids.tolist() == [1, 2]


@pytest.mark.parametrize("source, bonus", [(b"bytes", 2.0), ("ok", -1.0), ("ok", float("nan"))])
def test_bad_arguments_are_usage_errors(source, bonus):
    with pytest.raises(UsageError):
        CopyBias(HAND, source, bonus)


SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 20}}, "required": ["q"],
          "additionalProperties": False}


def _first_value_token(proc, vocab, prefer: dict[bytes, float]) -> bytes:
    """Feed ``{"q":"`` token by token, then the greedy choice at the value start under
    logits that are 0 except ``prefer``."""
    ids = [1]
    for b in (b"{", b'"', b"q", b'"', b":", b'"'):
        proc(np.array(ids, dtype=np.intc), np.zeros(vocab.n_tokens, dtype=np.float32))
        proc.raise_if_failed()
        ids.append(_tok(vocab, b))
    scores = np.zeros(vocab.n_tokens, dtype=np.float32)
    for b, v in prefer.items():
        scores[_tok(vocab, b)] = v
    proc(np.array(ids, dtype=np.intc), scores)
    proc.raise_if_failed()
    return vocab.token_bytes[int(np.argmax(scores))]


@pytest.mark.parametrize("copy_from, expected", [
    (None, b"running"),
    ("Find wireless headphones", b"wireless"),
    ("Find 北京", "北京".encode()),
    ("Find running shoes or wireless headphones", b"running"),  # both copies: the model's choice
])
def test_bonus_turns_the_value_start_towards_the_request(copy_from, expected):
    cg = compile_json_schema(SCHEMA, HAND)
    prefer = {b"running": 6.5, b"wireless": 6.0, "北京".encode(): 5.8, b"x": 6.4, b'"': 6.3}
    assert _first_value_token(GrammarLogitsProcessor(cg, copy_from=copy_from), HAND, prefer) == expected


def test_bonus_only_at_the_value_start_and_never_unmasks():
    """Step by step, the same mask with and without the bias; the scores differ only at the
    value start, and there only by the bonus on the copy starts."""
    cg = compile_json_schema(SCHEMA, HAND)
    proc = GrammarLogitsProcessor(cg, copy_from="Find wireless headphones")
    plain = GrammarLogitsProcessor(cg)
    copies = set(proc.copy.ids.tolist())
    w = _tok(HAND, b"wireless")
    ids = [1]
    seen_start = False
    for b in (b"{", b'"', b"q", b'"', b":", b'"', b"x", b'"', b"}"):
        s_copy = np.zeros(HAND.n_tokens, dtype=np.float32)
        s_plain = np.zeros(HAND.n_tokens, dtype=np.float32)
        proc(np.array(ids, dtype=np.intc), s_copy)
        plain(np.array(ids, dtype=np.intc), s_plain)
        proc.raise_if_failed()
        plain.raise_if_failed()
        assert np.array_equal(np.isfinite(s_copy), np.isfinite(s_plain))  # the same mask
        if HAND.decode(ids[1:]).endswith(b':"'):
            seen_start = True
            assert np.isfinite(s_plain[w]) and s_copy[w] == s_plain[w] + 2.0
            for t in range(HAND.n_tokens):
                if np.isfinite(s_plain[t]):
                    assert s_copy[t] == s_plain[t] + (2.0 if t in copies else 0.0), HAND.token_bytes[t]
            assert s_copy[0] == -np.inf  # the string is open: the end token stays forbidden
        else:
            assert np.array_equal(s_copy, s_plain)
        ids.append(_tok(HAND, b))
    assert seen_start


@pytest.mark.parametrize("vocab_name", ["llama-bpe", "gpt-2", "llama-spm"])
def test_real_tokenizers_copy_starts_are_spans_at_word_starts(vocab_name):
    vocab = get_vocab(vocab_name)
    request = "Find wireless headphones (数码) under 500 yuan, city 北京市, id U9C123456."
    cb = CopyBias(vocab, request)
    data = request.encode()
    starts = set(word_starts(request))
    assert len(cb.ids) >= 10
    for t in cb.ids.tolist():
        b = vocab.token_bytes[t]
        assert any(data.startswith(b, s) for s in starts), b
    spelled = {vocab.token_bytes[t] for t in cb.ids.tolist()}
    assert any(b.startswith(b"w") for b in spelled) and b"(" not in spelled
    assert not any(b.startswith(b"ireless") for b in spelled)
