"""The logits processor on the real default model (SmolLM2-135M-Instruct from PyPI)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from llama_cpp import LogitsProcessorList

from decoding import GrammarLogitsProcessor, ProcessorError, VocabError, compile_json_schema, generate
from decoding.ir import Grammar, byteset, plus
from decoding.backends.select import compile_grammar
from decoding.vocab import Vocab
from evals.weather50 import weather_prompts

ROOT = Path(__file__).resolve().parents[1]
WEATHER = json.loads((ROOT / "grammars" / "get_weather.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(WEATHER, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

pytestmark = pytest.mark.model

@pytest.fixture(scope="module")
def weather(smollm2):
    return compile_json_schema(WEATHER, smollm2)


def test_create_completion_and_reset_between_generations(smollm2, weather):
    proc = GrammarLogitsProcessor(weather)
    for seed in (1, 2):
        out = smollm2.create_completion("Weather in 北京市 on 2025-01-02 as JSON:", max_tokens=60, temperature=0.7,
                                        seed=seed, logits_processor=LogitsProcessorList([proc]))
        proc.raise_if_failed()
        doc = json.loads(out["choices"][0]["text"])
        VALIDATOR.validate(doc)
        assert out["choices"][0]["finish_reason"] == "stop"


def test_create_chat_completion(smollm2, weather):
    proc = GrammarLogitsProcessor(weather)
    out = smollm2.create_chat_completion(messages=[{"role": "user", "content": weather_prompts(1)[0]}], max_tokens=60,
                                         temperature=0.7, seed=3, logits_processor=LogitsProcessorList([proc]))
    proc.raise_if_failed()
    VALIDATOR.validate(json.loads(out["choices"][0]["message"]["content"]))


def test_error_inside_processor_is_surfaced(smollm2):
    # compiled for a 256-token vocabulary, used with a 49,152-token model: recorded, then re-raised
    tiny = Vocab.from_bytes([b""] + [bytes([i]) for i in range(1, 256)], eog_ids=[0])
    cg = compile_grammar(Grammar.single(plus(byteset([(48, 57)]))), tiny)
    with pytest.raises(ProcessorError, match="compiled for a 256-token vocabulary") as ei:
        generate(smollm2, cg, prompt="Count:", max_tokens=5)
    assert isinstance(ei.value.__cause__, VocabError)


def test_50_weather_calls_all_validate(smollm2, weather):
    """Acceptance: 50 prompts at temperature 0.7, all constrained outputs parse and validate."""
    ok = 0
    for i, p in enumerate(weather_prompts(50)):
        g = generate(smollm2, weather, messages=[{"role": "user", "content": p}], max_tokens=64,
                     temperature=0.7, seed=i)
        assert g.complete, g
        VALIDATOR.validate(json.loads(g.text))
        ok += 1
    assert ok == 50
