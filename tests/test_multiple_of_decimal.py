"""Exact decimal ``multipleOf`` (issue 15): the grammar (``logic.multiple_of``) and the
project's validator (``decoding.frontends.json_validator``) both follow the specification
(2020-12 validation 6.2.1: the decimal value divided by the divisor is an integer), where the
``jsonschema`` library divides floats and rejects ``0.07`` for ``multipleOf: 0.01``."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from fractions import Fraction

import jsonschema
import numpy as np
import pytest

from decoding.backends.select import compile_grammar
from decoding.errors import SchemaError
from decoding.frontends.json_validator import exact_value, is_multiple, validator, validator_class
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.jsonschema.logic import MAX_MULTIPLE_STATES, multiple_of
from decoding.ir import Dfa
from decoding.testing import random_walk
from decoding.vocab import Vocab

VOCAB = Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"</s>"], eog_ids=[256])
OPTIONS = dict(extra_properties="allow", untyped="any", format_mode="annotate")


def _grammar(schema, **options):
    return compile_grammar(compile_schema(schema, **options).grammar, VOCAB)


CASES = [
    ({"type": "number", "multipleOf": 0.01},
     ["0", "7", "0.07", "0.14", "0.28", "19.99", "-0.5", "100.1", "-3", "1234567890123.45", "123456789012345678901"],
     ["0.001", "0.075", "1e2", "7.0", "0.070", "-0", "12345678901234.56", "0.", ".5"]),
    ({"type": "number", "multipleOf": 0.05}, ["0.05", "0.1", "1.15", "3", "-0.95"], ["0.01", "0.07", "0.125", "1.11"]),
    ({"type": "number", "multipleOf": 0.3}, ["0", "0.3", "0.6", "0.9", "1.2", "3", "-0.3", "30.3"],
     ["0.1", "1", "0.31", "0.03", "2"]),
    ({"type": "number", "multipleOf": 2.5}, ["0", "2.5", "5", "7.5", "-10", "102.5"], ["1", "2", "2.25", "0.5", "2.50"]),
    ({"type": "integer", "multipleOf": 1e-8}, ["0", "1", "-7", "12391239123"], ["0.5", "1.0", "0.00000001"]),
    ({"type": "number", "multipleOf": 1e-8}, ["0.00000001", "0.12345678", "3"], ["0.000000001", "0.123456789"]),
    ({"type": "number", "multipleOf": 0.0001}, ["0.0075", "1.0001", "3", "-0.0001"], ["0.00751", "0.00001"]),
    ({"type": "integer", "multipleOf": 0.3}, ["0", "3", "6", "-9"], ["1", "0.3", "4"]),
    ({"type": "integer", "multipleOf": 2.5}, ["0", "5", "-10"], ["2", "2.5", "7"]),
    # exact binary fractions and integers, as before
    ({"type": "number", "multipleOf": 1.5}, ["0", "3", "4.5", "-1.5"], ["1", "2.25", "0.5"]),
    ({"type": "number", "multipleOf": 0.25}, ["0.25", "0.5", "1.75", "2"], ["0.1", "0.125"]),
    ({"type": "integer", "multipleOf": 3}, ["0", "3", "-9", "300000000000000000000000000003"], ["1", "3.0"]),
    # bounds and multipleOf together
    ({"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.01}, ["0", "0.01", "0.99", "1"],
     ["-0.01", "1.01", "0.001"]),
    # the exact language (complemented): not a multiple of 0.01
    ({"type": "number", "not": {"multipleOf": 0.01}}, ["0.001", "0.075", "0.071"], ["0.07", "7", "19.99"]),
]


@pytest.mark.parametrize("schema,yes,no", CASES, ids=[json.dumps(c[0]) for c in CASES])
def test_multiple_of_spellings(schema, yes, no):
    cg = _grammar(schema, **OPTIONS)
    v = validator(schema)
    for t in yes:
        assert cg.accepts(t.encode()), t
        assert v.is_valid(json.loads(t)), t
    for t in no:
        assert not cg.accepts(t.encode()), t


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"price": {"type": "number", "minimum": 0, "multipleOf": 0.01},
                                      "qty": {"type": "integer", "multipleOf": 0.5}},
     "required": ["price", "qty"]},
    {"type": "array", "items": {"type": "number", "multipleOf": 0.05}, "minItems": 1, "maxItems": 4},
    {"type": "number", "multipleOf": 0.3, "maximum": 1000},
    {"type": "number", "multipleOf": 1e-8},
    {"type": "number", "multipleOf": 0.0001},
])
def test_random_walks_are_decimal_multiples(schema):
    cg = _grammar(schema)  # the generation default
    v = validator(schema)
    rng = np.random.default_rng(15)
    fractions = 0
    for _ in range(200):
        w = random_walk(cg, rng, max_steps=2000)
        assert w.finished
        doc = json.loads(w.text)
        err = next(iter(v.iter_errors(doc)), None)
        assert err is None, (w.text, err.message)
        fractions += b"." in w.text
    assert fractions > 0  # decimals are generated, not only integers


def test_too_large_a_modulus_is_a_located_error():
    schema = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.123456789}}}
    with pytest.raises(SchemaError) as ei:
        compile_schema(schema)
    assert ei.value.pointer == "/properties/x" and ei.value.keyword == "multipleOf"
    assert "MAX_MULTIPLE_STATES" in str(ei.value)
    with pytest.raises(ValueError):
        multiple_of(12.34, False)  # p = 1234 with a digit count: over the bound
    assert isinstance(multiple_of(12.34, True), Dfa)  # integers: multiples of 617


def test_state_bound_is_kept():
    for m in (0.01, 0.05, 0.3, 2.5, 0.125, 1e-8, 1e-20, 7, 9973):
        d = multiple_of(m, False)
        assert isinstance(d, Dfa) and len(d.edges) <= MAX_MULTIPLE_STATES


def test_generated_decimals_round_trip_through_doubles():
    """At most 15 significant digits in a decimal: the double it parses to prints back as the
    same decimal, so a validator reading floats checks the written value."""
    cg = _grammar({"type": "number", "multipleOf": 0.01, "minimum": 1e12})
    assert cg.accepts(b"1234567890123.45") and not cg.accepts(b"12345678901234.56")
    assert cg.accepts(b"12345678901234567890")  # integers: json reads them exactly
    for t in ("1234567890123.45", "0.07", "999999999999.99"):
        assert Decimal(repr(float(t))) == Decimal(t)


# --- the validator --------------------------------------------------------------------

def test_validator_agrees_with_fractions_and_plain_jsonschema_does_not():
    """Every two-decimal value in [-20, 20] and a random sample of others: the validator
    is exact rational arithmetic on the written decimals.  ``jsonschema`` divides doubles:
    ``0.07 / 0.01 == 7.000000000000001``, so it rejects 0.07 (and 13.6% of the two-decimal
    values); the JSON Schema spec and its test suite (``multipleOf: 0.0001`` accepts
    ``0.0075``) mean the decimal values."""
    rng = random.Random(15)
    divisors = [0.01, 0.05, 0.3, 2.5, 1e-8, 0.0001, 1.5, 0.25, 3, 7, 0.07]
    values = [n / 100 for n in range(-2000, 2001)] + [rng.randint(-10**6, 10**6) / 10**rng.randint(0, 6)
                                                       for _ in range(3000)] + list(range(-50, 50))
    for d in divisors:
        v = validator({"multipleOf": d})
        for x in values:
            exact = (Fraction(Decimal(repr(x)) if isinstance(x, float) else x)
                     / Fraction(Decimal(repr(d)) if isinstance(d, float) else d)).denominator == 1
            assert v.is_valid(x) == exact == is_multiple(x, d), (x, d)
    plain = jsonschema.Draft202012Validator({"multipleOf": 0.01})
    assert not plain.is_valid(0.07) and validator({"multipleOf": 0.01}).is_valid(0.07)
    two_decimals = [n / 100 for n in range(1, 10001)]
    rejected = sum(not plain.is_valid(x) for x in two_decimals)
    assert 0.10 < rejected / len(two_decimals) < 0.17  # the float division's error rate


def test_validator_keeps_jsonschema_otherwise():
    v = validator({"multipleOf": 0.01})
    plain = jsonschema.Draft202012Validator({"multipleOf": 0.01})
    assert [e.message for e in v.iter_errors(0.071)] == [e.message for e in plain.iter_errors(0.071)] == [
        "0.071 is not a multiple of 0.01"]
    assert v.is_valid("0.071") and v.is_valid(None) and v.is_valid(True)  # not numbers
    # the suite's overflow cases: 1e308 / 0.123456789 is not an integer; 1e308 / 0.5 is
    assert not validator({"type": "integer", "multipleOf": 0.123456789}).is_valid(1e308)
    assert validator({"type": "integer", "multipleOf": 0.5}).is_valid(1e308)
    assert validator({"type": "integer", "multipleOf": 1e-8}).is_valid(12391239123)
    assert validator({"multipleOf": 3}).is_valid(10**40 * 3) and not validator({"multipleOf": 3}).is_valid(10**40)
    # other keywords, the format checker and the registry are the library's
    fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
    s = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}, "p": {"multipleOf": 0.01}}}
    assert not validator(s, format_checker=fc).is_valid({"d": "tomorrow"})
    assert validator(s, format_checker=fc).is_valid({"d": "2024-01-01", "p": 0.07})


def test_validator_dialects():
    s7 = {"$schema": "http://json-schema.org/draft-07/schema#",
          "properties": {"p": {"multipleOf": 0.01}, "next": {"$ref": "#"}}}
    v = validator(s7)
    assert type(v).__name__ == "DecimalDraft7Validator" and type(v).META_SCHEMA == jsonschema.Draft7Validator.META_SCHEMA
    assert v.is_valid({"p": 0.07}) and v.is_valid({"next": {"next": {"p": 0.07}}})
    assert not v.is_valid({"next": {"p": 0.071}})
    assert not jsonschema.Draft7Validator(s7).is_valid({"next": {"p": 0.07}})  # the plain class
    s3 = {"$schema": "http://json-schema.org/draft-03/schema#", "divisibleBy": 0.01}
    assert validator(s3).is_valid(0.07) and not validator(s3).is_valid(0.071)
    assert validator_class(cls=jsonschema.Draft4Validator) is validator_class(cls=jsonschema.Draft4Validator)
    assert exact_value(0.01) == Fraction(1, 100) and exact_value(7) == 7
