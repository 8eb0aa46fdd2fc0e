"""Hypothesis property tests for the five doors (issue 19): hostile input gets a located
``DecodingError`` or succeeds; the guard always returns a result.

Each property runs one generated input through :func:`evals.fuzz.targets.run_input` (the
classifier of the fuzz campaign, in-process here) and asserts its outcome is ``ok`` or
``located``: never a crash (an exception outside ``DecodingError``), an unlocated
``DecodingError``, or an accepted input whose outputs the oracle rejects (schema:
``jsonschema``; DTD: libxml2; GBNF: llama.cpp's parser).  Inputs are small so that the
whole file stays well under two minutes; the long campaign is ``python -m evals.fuzz``.

Strategies generate wrong-typed keyword values (schemas), random declarations and
content models with token noise (DTD), random rules with token noise (GBNF), header edits
with the checksum recomputed (artifacts), and text with surrogates, brackets, unclosed
tags and XML declarations (guard).  Nothing is left out: every finding these properties
made while the doors were being fixed (issue 19) is fixed.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evals.fuzz.generators import (GBNF_TOKENS, DTD_TOKENS, GUARD_TOKENS, SCHEMA_KEYWORDS, artifact_seeds,
                                   edit_artifact_header)
from evals.fuzz.targets import GUARD_DTDS, GUARD_SCHEMAS, run_input

#: derandomized (the same examples on every run, so CI is reproducible); ~10-30 s in total
SETTINGS = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _check(door: str, payload: dict) -> None:
    out = run_input(door, payload)
    assert out.kind in ("ok", "located"), (
        f"{door}: {out.kind} ({out.signature}) in phase {out.phase}: {out.message[:500]}\n"
        f"input: {json.dumps(payload, ensure_ascii=True)[:1500]}")


# ----------------------------------------------------------------------------- JSON Schema

_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 40), st.sampled_from([1.5, -0.5, 0.1, 1e20, 10 ** 40, 2 ** 63]),
    st.sampled_from(["string", "integer", "number", "object", "array", "boolean", "null", "strin", "", "a",
                     "^a+$", "[", "#", "#/$defs/a", "date-time", "email", "x{99999999999}"]),
)


def _schema_of(children):
    return st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS + ["a", "$defs"]),
                           st.one_of(children, st.lists(children, max_size=3),
                                     st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=2)),
                           max_size=4)


_schemas = st.recursive(st.one_of(_leaf, st.dictionaries(st.sampled_from(SCHEMA_KEYWORDS), _leaf, max_size=3)),
                        _schema_of, max_leaves=12)


@SETTINGS
@given(schema=_schemas)
def test_schema_door(schema):
    _check("schema", {"schema": schema})


# ----------------------------------------------------------------------------- DTD

_names = st.sampled_from(["r", "a", "b", "c"])


def _model_of(children):
    return st.one_of(
        st.tuples(st.lists(children, min_size=1, max_size=3), st.sampled_from([",", "|"]),
                  st.sampled_from(["", "?", "*", "+"])).map(lambda t: f"({t[1].join(t[0])}){t[2]}"),
    )


_particles = st.recursive(st.tuples(_names, st.sampled_from(["", "?", "*", "+"])).map("".join),
                          _model_of, max_leaves=6)
_content = st.one_of(st.sampled_from(["EMPTY", "ANY", "(#PCDATA)", "(#PCDATA|a|b)*"]),
                     _particles.map(lambda p: p if p.startswith("(") else f"({p})"))
_att_type = st.sampled_from(["CDATA", "ID", "IDREF", "IDREFS", "NMTOKEN", "NMTOKENS", "ENTITY", "ENTITIES",
                             "(x|y)", "NOTATION (n)"])
_att_default = st.sampled_from(["#REQUIRED", "#IMPLIED", '"x"', '#FIXED "y"', '"&e;"', '"&#38;"'])
_decl = st.one_of(
    st.tuples(_names, _content).map(lambda t: f"<!ELEMENT {t[0]} {t[1]}>"),
    st.tuples(_names, st.sampled_from(["k", "m"]), _att_type, _att_default)
    .map(lambda t: f"<!ATTLIST {t[0]} {t[1]} {t[2]} {t[3]}>"),
    st.sampled_from(['<!ENTITY e "text">', '<!ENTITY e "&f;&f;">', '<!ENTITY f "ab">', '<!ENTITY % p "(a)">',
                     "<!NOTATION n SYSTEM 'n'>", "<!-- c -->", "<?pi x?>"]),
)
_noise = st.lists(st.tuples(st.integers(0, 10 ** 6), st.sampled_from(DTD_TOKENS)), max_size=2)


def _insert(text: str, noise: list[tuple[int, str]]) -> str:
    for pos, tok in noise:
        i = pos % (len(text) + 1)
        text = text[:i] + tok + text[i:]
    return text


@SETTINGS
@given(decls=st.lists(_decl, min_size=1, max_size=7), root=_names, noise=_noise)
def test_dtd_door(decls, root, noise):
    _check("dtd", {"dtd": _insert("\n".join(decls) + "\n", noise), "root": root})


# ----------------------------------------------------------------------------- GBNF

_rule_names = st.sampled_from(["root", "a", "b", "item"])
_atom = st.one_of(
    st.sampled_from(['"x"', '"ab"', '"\\n"', '"\\x41"', '""', "[a-c]", "[^a]", "[\\u00e9-\\u00ff]", "."]),
    _rule_names,
)


def _expr_of(children):
    return st.one_of(
        st.tuples(st.lists(children, min_size=1, max_size=3), st.sampled_from([" ", " | "]),
                  st.sampled_from(["", "?", "*", "+", "{2}", "{0,3}", "{1,}"]))
        .map(lambda t: f"({t[1].join(t[0])}){t[2]}"),
    )


_exprs = st.recursive(_atom, _expr_of, max_leaves=6)
_rules = st.lists(st.tuples(_rule_names, _exprs).map(lambda t: f"{t[0]} ::= {t[1]}"), min_size=1, max_size=5)


@SETTINGS
@given(rules=_rules, noise=st.lists(st.tuples(st.integers(0, 10 ** 6), st.sampled_from(GBNF_TOKENS)), max_size=2))
def test_gbnf_door(rules, noise):
    _check("gbnf", {"gbnf": _insert("\n".join(rules) + "\n", noise), "llama": True})


# ----------------------------------------------------------------------------- artifacts

@SETTINGS
@given(which=st.integers(0, 3), rnd=st.randoms(use_true_random=False), edits=st.integers(1, 3))
def test_artifact_header_door(which, rnd, edits):
    name, data = artifact_seeds()[which]
    blob, _ = edit_artifact_header(data, rnd, edits)
    _check("artifact", {"b64": blob})


# ----------------------------------------------------------------------------- guard

_guard_piece = st.one_of(
    st.sampled_from(GUARD_TOKENS),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=8),
    st.tuples(st.sampled_from(["[", "{\"a\":", "<array>", "<a>", "<a></b>", "<request>"]), st.integers(1, 40))
    .map(lambda t: t[0] * t[1]),
    st.sampled_from(['{"location": "Paris", "unit": "celsius"}', "<request><user_id>1</user_id></request>",
                     "<plist version=\"1.0\"><dict><key>a</key><string>b</string></dict></plist>"]),
)


@SETTINGS
@given(pieces=st.lists(_guard_piece, max_size=6), grammar=st.sampled_from(list(GUARD_DTDS) + list(GUARD_SCHEMAS)),
       fn=st.sampled_from(["guard", "extract", "validate"]), repair=st.booleans(), root=st.booleans())
def test_guard_door(pieces, grammar, fn, repair, root):
    _check("guard", {"text": "".join(pieces), "grammar": grammar, "fn": fn, "repair": repair, "root": root})
