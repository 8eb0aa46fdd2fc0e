"""Budget-aware closing: with max_tokens = minimum + 0..5, outputs always finish complete
and valid (500 random walks and 50 SmolLM2 generations)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from conftest import get_vocab
from decoding import GrammarError, compile_json_schema, generate
from decoding.runtime.budget import BudgetMatcher
from decoding.backends.select import compile_grammar
from decoding.ir import Grammar, lit, plus, byteset, seq
from decoding.testing import random_walk
from decoding.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "grammars" / "get_weather.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def test_completion_cost_on_a_tiny_vocabulary():
    v = Vocab.from_bytes([b"", b"{", b"}", b"a", b"aa", b"{a"], eog_ids=[0])
    cg = compile_grammar(Grammar.single(seq(lit("{"), plus(byteset([(ord("a"), ord("a"))])), lit("}"))), v)
    assert cg.completion_cost(0) == 2  # "{a" then "}"
    m = BudgetMatcher(cg, 2)
    assert sorted(m.allowed_ids().tolist()) == [5]  # only "{a" leaves room to close
    assert m.advance(5)
    assert m.allowed_ids().tolist() == [2]  # must close now
    with pytest.raises(GrammarError, match="too small"):
        BudgetMatcher(cg, 1)


@pytest.mark.parametrize("vocab_name", ["smollm2", "llama-bpe"])
def test_500_walks_at_tight_budgets(vocab_name):
    cg = compile_json_schema(SCHEMA, get_vocab(vocab_name))
    base = cg.completion_cost(0)
    rng = np.random.default_rng(5)
    for extra in range(6):
        for _ in range(84):  # 6 x 84 = 504 walks
            w = random_walk(cg, rng, budget=base + extra)
            assert w.finished and len(w.tokens) <= base + extra
            VALIDATOR.validate(json.loads(w.text))


@pytest.mark.model
def test_50_generations_at_tight_budgets(smollm2):
    cg = compile_json_schema(SCHEMA, smollm2)
    base = cg.completion_cost(0)
    for i in range(50):
        g = generate(smollm2, cg, messages=[{"role": "user", "content": f"Weather in 北京市 on 2025-0{1 + i % 9}-1{i % 10}? "
                                                                           "Describe it at length."}],
                     max_tokens=base + i % 6, temperature=0.9, seed=i)
        assert g.complete, g
        VALIDATOR.validate(json.loads(g.text))
