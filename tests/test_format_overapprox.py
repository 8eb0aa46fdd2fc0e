"""Over-approximated languages (``Logic.over``) where a ``format`` must be avoided: the
other branches of an overlapping ``oneOf``, the inside of a ``not``, the ``else`` side of
an ``if`` whose exact language cannot be built.

- ``FORMAT_SUPERSETS``: every string ``jsonschema``'s checker accepts matches the format's
  superset (mutation fuzz around valid values; a superset that misses one fails here);
- soundness: random schemas mixing formats with oneOf/not/if (hypothesis), in the
  asserting format mode, accept only valid canonical instances and walk only to valid ones;
- accepted/rejected lists for the shapes found in JSONSchemaBench (Snowplow's
  ``oneOf [uuid, pattern]``).
"""

from __future__ import annotations

import json
import random
import re

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoding.backends.select import compile_grammar
from decoding.errors import DecodingError, LimitError, SchemaError
from decoding.frontends.jsonschema import canonicalize, compile_schema
from decoding.frontends.jsonschema.formats import FORMAT_SUPERSETS
from decoding.testing import budgeted_walks
from decoding.vocab import Vocab

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
VOCAB = Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"</s>"], eog_ids=[256])
OPTIONS = dict(extra_properties="allow", untyped="any", format_mode="assert")

VALID = {
    "date-time": ["2020-01-01T10:00:00Z", "1999-12-31t23:59:59.5+08:00", "2020-02-29T00:00:00z"],
    "date": ["2020-01-01", "2024-02-29"],
    "time": ["10:00:00Z", "23:59:59.123-05:30"],
    "uuid": ["0f8fad5b-d9cb-469f-a165-70867728950e", "0F8FAD5B-D9CB-469F-A165-70867728950E"],
    "email": ["a@b.co", "x@y"],
    "idn-email": ["a@b"],
    "uri": ["https://example.com/a?b#c", "urn:isbn:0451450523", "HTTP://x"],
    "ipv4": ["1.2.3.4", "255.255.255.0"],
    "ipv6": ["::1", "2001:db8::ff00:42:8329", "::ffff:1.2.3.4"],
    "duration": ["P3D", "PT1H30M", "-P1Y", "P2W"],
}
NOISE = list("0123456789-:TtZz.+PpYMDWHS@abcfABF/x%{}[] _\n") + ["é", "٣", "ß", "ｔ"]


def test_every_superset_has_valid_examples() -> None:
    assert set(VALID) == set(FORMAT_SUPERSETS)
    for name, xs in VALID.items():
        for x in xs:
            assert CHECKER.conforms(x, name), (name, x)


@pytest.mark.parametrize("name", sorted(FORMAT_SUPERSETS))
def test_superset_holds_every_string_the_checker_accepts(name: str) -> None:
    rx = re.compile(FORMAT_SUPERSETS[name])
    rng = random.Random(name)
    checked = 0
    for _ in range(6000):
        s = list(rng.choice(VALID[name]))
        for _ in range(rng.randint(0, 3)):  # substitute, insert or delete a character
            op, pos = rng.random(), rng.randrange(len(s) + 1)
            if op < 0.4 and s:
                s[min(pos, len(s) - 1)] = rng.choice(NOISE)
            elif op < 0.75:
                s.insert(pos, rng.choice(NOISE))
            elif s:
                del s[min(pos, len(s) - 1)]
        x = "".join(s)
        if CHECKER.conforms(x, name):
            checked += 1
            assert rx.fullmatch(x), f"{name}: the checker accepts {x!r}, the superset does not"
    assert checked > 50  # the fuzz reached valid strings


def _compile(schema):
    return compile_grammar(compile_schema(schema, **OPTIONS).grammar, VOCAB, backend="dfa", max_states=50_000)


@pytest.mark.parametrize("schema,yes,no", [
    # Snowplow sp_209: the branches overlap for checker-valid strings only the superset sees
    ({"type": "string", "oneOf": [{"format": "uuid"}, {"pattern": "^\\$[A-Z0-9-_]+"}]},
     ["0f8fad5b-d9cb-469f-a165-70867728950e", "$ABC", "$A-b"], ["abc", "$abc", ""]),
    ({"oneOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 3}]},
     ["2020-01-01T10:00:00Z", "ab", ""], ["abcd", 5]),
    ({"type": "string", "not": {"format": "date-time"}}, ["hello", "2020-13", ""], ["2020-01-01T10:00:00Z"]),
    ({"type": "string", "if": {"format": "date"}, "then": {"maxLength": 10}, "else": {"minLength": 3}},
     ["2020-01-01", "abc"], ["ab", ""]),
    # keywords with no exact language inside a `not`: dropped from what is avoided
    ({"not": {"type": "array", "uniqueItems": True}}, [1, "a", None], [[1, 2], []]),
    ({"not": {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}}, [1, "x"], [{}, {"c": 1}]),
])
def test_examples(schema, yes, no) -> None:
    cg = _compile(schema)
    v = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)
    for x in yes:
        assert v.is_valid(x), x
        assert cg.accepts(canonicalize(schema, x).encode()), x
    for x in no:
        assert not cg.accepts(canonicalize(schema, x).encode()), x


FORMAT_LEAVES = [{"format": f} for f in sorted(FORMAT_SUPERSETS)] + [
    {"type": "string", "format": "uri-reference"}, {"format": "regex"}, {"type": "string", "maxLength": 2},
    {"pattern": "^[0-9]"}, {"pattern": "-"}, {"type": "integer"}, {"enum": ["a", "2020-01-01", 1]},
    {"type": "string", "format": "email", "minLength": 4},
]
leaf = st.sampled_from(FORMAT_LEAVES)
SCHEMAS = st.one_of(
    st.lists(leaf, min_size=2, max_size=3).map(lambda xs: {"oneOf": xs}),
    st.lists(leaf, min_size=2, max_size=3).map(lambda xs: {"type": "string", "oneOf": xs}),
    st.builds(lambda a, b: {**b, "not": a}, leaf, leaf),
    st.builds(lambda a, b, c: {"if": a, "then": b, "else": c}, leaf, leaf, leaf),
)
INSTANCES = [x for xs in VALID.values() for x in xs] + ["", "a", "ab", "abc@d", "1", "-", "9x", 1, None, [1]]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAS)
def test_sound_with_formats_asserted(schema) -> None:
    try:
        cg = _compile(schema)
    except (SchemaError, LimitError):
        return  # refused, loudly
    except DecodingError as e:  # empty: no instance may be valid among ours... not claimed
        assert "accepts no string" in str(e), e
        return
    v = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)
    for x in INSTANCES:
        if cg.accepts(canonicalize(schema, x).encode()):
            assert v.is_valid(x), f"invalid accepted: {json.dumps(schema)} {x!r}"
    rng = np.random.default_rng(len(json.dumps(schema)))
    for w in budgeted_walks(cg, rng, 4, 64):  # none if 64 tokens cannot complete it
        assert v.is_valid(json.loads(w.text)), f"walk {w.text!r} invalid for {json.dumps(schema)}"


def test_a_format_the_installed_checker_skips_is_every_string(monkeypatch) -> None:
    """Without a checker for ``date-time`` (its package is a test extra), every string is a
    valid date-time, so an overlapping branch must avoid every string: "ab" matches both
    branches then and is rejected; with the checker it is valid and accepted."""
    from decoding.frontends.jsonschema import compile as C
    schema = {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "string", "maxLength": 3}]}
    assert _compile(schema).accepts(b'"ab"')
    bare = jsonschema.FormatChecker(formats=())
    monkeypatch.setattr(C._Compiler, "format_checker", lambda self: bare)
    cg = _compile(schema)
    assert not cg.accepts(b'"ab"') and cg.accepts(b'"2020-01-01T10:00:00Z"')
    assert not jsonschema.Draft202012Validator(schema, format_checker=bare).is_valid("ab")
