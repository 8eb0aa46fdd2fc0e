"""The guarantee, as a property: uniform random walks under the mask always end in a
document that validates, and the mask is never empty before acceptance.

10,000 walks for each of 5 tool-call schemas x 3 real vocabularies (GD_WALKS overrides
the count).  Strings in these schemas have a maxLength: a uniform walk over a 128k
vocabulary would otherwise almost never draw the closing quote."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from conftest import get_vocab
from decoding import compile_json_schema
from decoding.frontends.json_validator import validator_class
from decoding.testing import random_walk

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = [ROOT / "grammars" / "get_weather.json", ROOT / "grammars" / "search_product.json",
           ROOT / "tests" / "walk_schemas" / "book_flight.json", ROOT / "tests" / "walk_schemas" / "send_email.json",
           ROOT / "tests" / "walk_schemas" / "set_alarm.json"]
N_WALKS = int(os.environ.get("GD_WALKS", "10000"))


@pytest.mark.parametrize("vocab_name", ["llama-bpe", "gemma-4", "phi-3"])
@pytest.mark.parametrize("schema_path", SCHEMAS, ids=lambda p: p.stem)
def test_random_walks_validate(schema_path, vocab_name):
    schema = json.loads(schema_path.read_text())
    cg = compile_json_schema(schema, get_vocab(vocab_name))
    # the decimal multipleOf the grammars generate (json_validator); otherwise jsonschema's
    validator = validator_class(cls=jsonschema.Draft202012Validator)(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    # a seed of the case's name that every process shares (str hashes are salted per process,
    # so a failing walk could not be replayed)
    rng = np.random.default_rng(zlib.crc32(f"{schema_path.stem}/{vocab_name}".encode()))
    for i in range(N_WALKS):
        # raises if the mask is ever empty before acceptance; numbers have unbounded fraction
        # digits, so a uniform walk occasionally runs long: allow it to
        w = random_walk(cg, rng, max_steps=200_000)
        assert w.finished, f"walk {i} did not finish"
        doc = json.loads(w.text.decode("utf-8"))
        err = next(iter(validator.iter_errors(doc)), None)
        assert err is None, f"walk {i} produced an invalid document {w.text!r}: {err.message}"
