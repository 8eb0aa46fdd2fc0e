"""The processor's canonical spelling of forced runs (``canonical_forced``): where the grammar
forces the next bytes, the only token left is the first of the tokenizer's own spelling.

Driven without a model: random logits (a fixed seed), argmax after the processor, the chosen
token appended to ``input_ids``, as llama-cpp-python does.  With the policy off, the same
random logits pick other splits of the same bytes, so each test can fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from decoding import GrammarLogitsProcessor, compile_json_schema
from decoding.backends.select import compile_grammar
from decoding.ir import Grammar, choice, lit, seq
from decoding.vocab import Vocab
from tests.conftest import get_vocab

TINY = Vocab.from_bytes([b""] + [bytes([c]) for c in b"<>/abcdefghijklmnopqrstuvwxyz"]
                        + [b"<a", b"ab", b"abc", b"</", b"cd", b"></", b"xy"], eog_ids=[0])


def _drive(cg, vocab: Vocab, canonical: bool, seed: int, max_steps: int = 400,
           forced: list | None = None) -> tuple[list[int], bool]:
    """Token ids chosen until end of generation, and whether the text is accepted; ``forced``
    collects, per chosen token, the forced bytes of the state it was chosen in."""
    proc = GrammarLogitsProcessor(cg, canonical_forced=canonical)
    rng = np.random.default_rng(seed)
    ids = [1]  # a one-token "prompt"
    out: list[int] = []
    for _ in range(max_steps):
        scores = rng.standard_normal(vocab.n_tokens).astype(np.float32)
        proc(np.array(ids, dtype=np.intc), scores)
        proc.raise_if_failed()
        tok = int(np.argmax(scores))
        assert np.isfinite(scores[tok])
        if tok in vocab.eog_ids:
            break
        if forced is not None:
            forced.append(proc.matcher.forced_bytes())
        ids.append(tok)
        out.append(tok)
    text = b"".join(vocab.token_bytes[t] for t in out)
    return out, cg.accepts(text)


@pytest.mark.parametrize("literal, spelled", [
    (b"<abcd></abcd>", [b"<a", b"b", b"cd", b"></", b"abc", b"d", b">"]),
    (b"xyxyab", [b"xy", b"xy", b"ab"]),
])
def test_tiny_vocabulary_forced_literal_is_spelled_by_longest_match(literal, spelled):
    cg = compile_grammar(Grammar.single(lit(literal)), TINY)
    ids, ok = _drive(cg, TINY, True, seed=0)
    assert ok and [TINY.token_bytes[t] for t in ids] == spelled
    others = {tuple(_drive(cg, TINY, False, seed=s)[0]) for s in range(8)}
    assert any(list(o) != ids for o in others)  # without the policy, random logits split it otherwise


def test_choice_points_stay_free():
    """Only forced runs are narrowed: at a choice the random logits decide (both branches seen)."""
    cg = compile_grammar(Grammar.single(seq(lit(b"<a>"), choice(lit(b"xy"), lit(b"cd")), lit(b"</a>"))), TINY)
    texts = set()
    for s in range(12):
        ids, ok = _drive(cg, TINY, True, seed=s)
        assert ok
        texts.add(b"".join(TINY.token_bytes[t] for t in ids))
    assert texts == {b"<a>xy</a>", b"<a>cd</a>"}


SCHEMA = {"type": "object", "properties": {"temperature_celsius": {"type": "integer", "minimum": -60, "maximum": 60},
                                            "observation_station": {"enum": ["Beijing Capital"]}},
          "required": ["temperature_celsius", "observation_station"], "additionalProperties": False}


@pytest.mark.parametrize("vocab_name", ["llama-bpe", "gpt-2", "llama-spm"])
def test_real_tokenizer_forced_runs_use_its_own_spelling(vocab_name):
    """Every token chosen while a run was forced is the tokenizer's first token of that run;
    the property names come out in fewer tokens than random splits give."""
    vocab = get_vocab(vocab_name)
    cg = compile_json_schema(SCHEMA, vocab)
    for seed in range(3):
        runs: list[bytes] = []
        ids, ok = _drive(cg, vocab, True, seed, forced=runs)
        assert ok
        text = b"".join(vocab.token_bytes[t] for t in ids)
        assert b'"temperature_celsius":' in text and b'"Beijing Capital"' in text
        n_forced = 0
        for tok, run in zip(ids, runs):
            if run:
                assert tok == vocab.tokenize(run)[0], (run, vocab.token_bytes[tok])
                n_forced += 1
        assert n_forced >= 4
        free, ok_free = _drive(cg, vocab, False, seed)
        assert ok_free and len(ids) < len(free)


def test_budget_cut_falls_back_to_the_full_mask():
    """Longest match spells ``abcde`` as abc|d|e (3 tokens); with a budget of 2 the budget
    forbids ``abc``, so the budget's mask decides (ab|cde): never an empty mask, never cut."""
    vocab = Vocab.from_bytes([b""] + [bytes([c]) for c in b"abcde"] + [b"ab", b"abc", b"cde"], eog_ids=[0])
    cg = compile_grammar(Grammar.single(lit(b"abcde")), vocab)
    assert [vocab.token_bytes[t] for t in vocab.greedy(b"abcde")] == [b"abc", b"d", b"e"]
    for budget, spelled in [(2, [b"ab", b"cde"]), (3, [b"abc", b"d", b"e"])]:
        proc = GrammarLogitsProcessor(cg, max_tokens=budget, canonical_forced=True)
        rng = np.random.default_rng(0)
        ids, out = [1], []
        for _ in range(budget + 1):
            scores = rng.standard_normal(vocab.n_tokens).astype(np.float32)
            proc(np.array(ids, dtype=np.intc), scores)
            proc.raise_if_failed()
            tok = int(np.argmax(scores))
            assert np.isfinite(scores[tok])
            if tok in vocab.eog_ids:
                break
            ids.append(tok)
            out.append(tok)
        assert [vocab.token_bytes[t] for t in out] == spelled, budget
