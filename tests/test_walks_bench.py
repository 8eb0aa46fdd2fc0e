"""Random walks under the mask over 200 JSONSchemaBench schemas (40 per split, evenly
spaced): every finished output validates with jsonschema, and the mask is never empty
before acceptance (random_walk raises otherwise)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from conftest import CORPORA, get_vocab
from decoding import DecodingError, compile_json_schema
from decoding.testing import random_walk

SPLITS = ["Glaiveai2K", "Github_trivial", "Github_easy", "Kubernetes", "Snowplow"]
PER_SPLIT = 40
WALKS = 8
# Compile time limit per schema. A schema over it is skipped untested, so the limit is pure
# cost for the few that hit it (3 of the Snowplow sample take 14-110 s, one of Github_easy
# 15 s); every other sampled schema compiles in under 4 s on a loaded 2-core machine.
COMPILE_SECONDS = 6


@pytest.fixture(autouse=True)
def _long_ints():
    """Uniform walks write integers with thousands of digits: lift Python's int/str limit
    for these tests only (other tests check what happens at the default limit)."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    yield
    sys.set_int_max_str_digits(old)


def sample(split: str) -> list[Path]:
    files = sorted((CORPORA / "jsonschemabench" / split).glob("*.json"))
    idx = np.linspace(0, len(files) - 1, PER_SPLIT).round().astype(int)
    return [files[i] for i in sorted(set(idx.tolist()))]


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout


@pytest.mark.parametrize("split", SPLITS)
def test_walks_over_benchmark_schemas(split):
    vocab = get_vocab("llama-bpe")
    rng = np.random.default_rng(0)
    compiled = finished = 0
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for path in sample(split):
            schema = json.loads(path.read_text())["schema"]
            signal.alarm(COMPILE_SECONDS)
            try:
                cg = compile_json_schema(schema, vocab)
            except (DecodingError, _Timeout):
                continue  # unsupported or too large: a clear error, counted by the conformance runner
            finally:
                signal.alarm(0)
            compiled += 1
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
            for _ in range(WALKS):
                w = random_walk(cg, rng, max_steps=3000)
                if not w.finished:
                    continue  # long free-text walk: nothing to validate, but no dead end was met
                finished += 1
                doc = json.loads(w.text.decode("utf-8"))
                err = next(iter(validator.iter_errors(doc)), None)
                assert err is None, f"{path.name}: {w.text[:200]!r}: {err.message}"
    finally:
        signal.signal(signal.SIGALRM, old)
    assert compiled >= PER_SPLIT // 3, f"only {compiled} schemas of {split} compiled"
    assert finished > 0
