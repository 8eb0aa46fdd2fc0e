"""decoding.integrations.outlines with outlines' own generator on SmolLM2 (issue 16)."""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

try:
    import outlines
    from outlines.types import CFG, Regex
except ImportError as e:  # a declared dependency: fail loudly, never skip
    raise ImportError("outlines>=1.3 is not importable: it is a declared dependency (the 'integrations' "
                      "extra; `make setup` installs it): .venv/bin/pip install 'outlines>=1.3'") from e
from pydantic import BaseModel, Field

from decoding import GBNFError, ProcessorError, UsageError
from decoding.integrations.outlines import DecodingLogitsProcessor, Generator, logits_processor

pytestmark = pytest.mark.model

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "tags"],
          "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", "b", "c"]}}}}


class City(BaseModel):
    name: str = Field(max_length=16)
    population: int = Field(ge=0)


@pytest.fixture(scope="module")
def model(smollm2):
    return outlines.from_llamacpp(smollm2)


def test_json_schema_dict_validates(model):
    gen = Generator(model, PERSON)
    for seed in range(5):
        text = gen("Describe a person as JSON.", max_tokens=48, temperature=1.0, seed=seed)
        jsonschema.validate(json.loads(text), PERSON)


def test_pydantic_model_and_plain_outlines_generator(model):
    # the extension point itself: outlines.Generator(model, processor=...)
    proc = logits_processor(model, City, max_tokens=40)
    gen = outlines.Generator(model, processor=proc)
    for seed in range(3):
        text = gen("A city as JSON.", max_tokens=40, temperature=1.0, seed=seed)
        proc.raise_if_failed()
        City.model_validate_json(text)


def test_regex_fullmatches(model):
    pattern = r"[A-Z]{2}-\d{3}(-[a-z]{1,4})?"
    gen = Generator(model, Regex(pattern))
    for seed in range(5):
        text = gen("A product code:", max_tokens=16, temperature=1.0, seed=seed)
        assert re.fullmatch(pattern, text), text
    streamed = "".join(gen.stream("A product code:", max_tokens=16, temperature=1.0, seed=7))
    assert re.fullmatch(pattern, streamed), streamed
    plain = outlines.from_llamacpp(model.model, chat_mode=False)  # create_completion path
    text = Generator(plain, Regex(pattern))("Product code: ", max_tokens=16, seed=3)
    assert re.fullmatch(pattern, text), text


def test_python_type_goes_through_outlines_regex(model):
    text = Generator(model, int)("How many legs has a spider? Digits only.", max_tokens=8, seed=0)
    assert re.fullmatch(r"[+-]?(0|[1-9][0-9]*)", text), text


def test_gbnf_cfg_parses(model):
    grammar = r'''root ::= "(" expr ")"
expr ::= num (("+" | "*") num){0,2}
num ::= [1-9] [0-9]?'''
    gen = Generator(model, CFG(grammar))
    shape = re.compile(r"\([1-9][0-9]?([+*][1-9][0-9]?){0,2}\)")
    for seed in range(3):
        text = gen("An arithmetic expression:", max_tokens=16, temperature=1.0, seed=seed)
        assert shape.fullmatch(text), text
        eval(text, {"__builtins__": {}})  # parses as the arithmetic it spells


def test_errors_surface(model, smollm2):
    with pytest.raises(GBNFError):  # a Lark grammar (outlines' llguidance dialect) is not GBNF
        Generator(model, CFG("?start: \"a\" | \"b\""))
    with pytest.raises(UsageError, match="LlamaCpp"):
        Generator(smollm2, PERSON)  # the raw Llama, not outlines.from_llamacpp(...)
    with pytest.raises(UsageError, match="whitespace_pattern"):
        Generator(model, outlines.types.JsonSchema(PERSON, whitespace_pattern=r"[ ]?"))
    # a failure inside the processor is recorded (llama-cpp-python would swallow it) and re-raised
    proc = logits_processor(model, PERSON)
    n = smollm2.n_vocab()
    proc(np.zeros((2, 3), dtype=np.intc), np.zeros((2, n), dtype=np.float32))
    with pytest.raises(ProcessorError, match="batch"):
        proc.raise_if_failed()
    assert isinstance(proc, DecodingLogitsProcessor)
