"""JSON-Schema-Test-Suite draft7 core files (evals/conformance/fixtures/draft7) and the
draft-07 rules the draft7 run needed: ``$ref`` overrides its sibling keywords (``$id`` too),
and canonical key order under schema-valued ``dependencies``."""

from __future__ import annotations

import json

import pytest

from decoding.backends.select import compile_grammar
from decoding.frontends.jsonschema import canonicalize, compile_schema
from decoding.vocab import Vocab
from evals.conformance import run

D7 = "http://json-schema.org/draft-07/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"
SPEC = {"extra_properties": "allow", "format_mode": "annotate", "untyped": "any"}


def _vocab() -> Vocab:
    return Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"</s>"], eog_ids=[256])


def _accepts(schema: dict, data: object) -> bool:
    g = compile_schema(schema, **SPEC)
    return compile_grammar(g.grammar, _vocab()).accepts(canonicalize(schema, data).encode())


# ----------------------------------------------------------------------------- the fixture

def test_fixture_holds_the_draft7_core_files():
    d = run.SUITES["draft7"][0]
    files = sorted(p.stem for p in d.glob("*.json"))
    assert len(files) == 37
    for name in ("definitions", "dependencies", "additionalItems", "ref", "refRemote", "items"):
        assert name in files
    assert "optional" not in files and not (d / "optional").exists()
    assert "MIT" in (d / "LICENSE").read_text() or "Permission is hereby granted" in (d / "LICENSE").read_text()
    assert "44401e0c046704b476ec9d2e2fccdaee618f259d" in (d / "README.md").read_text()
    groups = 0
    for p in d.glob("*.json"):
        for grp in json.loads(p.read_text()):
            assert set(grp) >= {"description", "schema", "tests"}
            assert all(isinstance(t["valid"], bool) and "data" in t for t in grp["tests"])
            # the suite's draft7 files name no dialect: the runner adds draft-07's
            assert not (isinstance(grp["schema"], dict) and "$schema" in grp["schema"])
            groups += 1
    assert groups == 257


def test_with_dialect_adds_draft7_only_where_absent():
    assert run.with_dialect({"type": "integer"}, D7) == {"$schema": D7, "type": "integer"}
    assert run.with_dialect({"$schema": D2020}, D7) == {"$schema": D2020}
    assert run.with_dialect(True, D7) is True
    assert run.with_dialect({"type": "integer"}, None) == {"type": "integer"}


def test_draft7_registry_reads_remotes_without_schema_as_draft7():
    reg = run.suite_registry(D7)
    if not run.remotes():
        pytest.skip("../shared has no remotes/")
    # "$id": "#foo" is a location-independent identifier in draft-07 only
    uri = "http://localhost:1234/draft7/locationIndependentIdentifier.json"
    res = reg.resolver().lookup(uri + "#foo")
    assert res.contents == {"$id": "#foo", "type": "integer"}
    assert run.suite_registry(None) == (run.remotes() or None)  # 2020-12: as before


def test_draft7_run_of_one_file_accepts_no_invalid_instance(monkeypatch, tmp_path):
    if not run.VOCAB_PATH.exists():
        pytest.skip("no llama-bpe vocabulary in ../shared")
    src = run.SUITES["draft7"][0] / "ref.json"
    (tmp_path / "ref.json").write_text(src.read_text())
    monkeypatch.setitem(run.SUITES, "draft7", (tmp_path, tmp_path / "base.json", D7))
    res = run.run_suite(10.0, "draft7")
    assert res["suite"] == "draft7"
    f = res["files"]["ref"]
    assert f["groups"] == 35 and f["invalid_accepted"] == 0
    assert res["schemas"]["ref#5"]["valid_accepted"] == 2  # "ref overrides any sibling keywords"


# ----------------------------------------------------------------------------- front-end fixes

REF_SIBLINGS = {"definitions": {"reffed": {"type": "array"}},
                "properties": {"foo": {"$ref": "#/definitions/reffed", "maxItems": 2}}}


@pytest.mark.parametrize("dialect, data, valid", [
    (D7, {"foo": []}, True),
    (D7, {"foo": [1, 2, 3]}, True),   # maxItems next to $ref is ignored in draft-07
    (D7, {"foo": "string"}, False),
    (D2020, {"foo": [1, 2, 3]}, False),  # ... and applies in 2020-12
    (D2020, {"foo": [1, 2]}, True),
])
def test_ref_overrides_siblings_in_draft7(dialect, data, valid):
    schema = {"$schema": dialect, **REF_SIBLINGS}
    assert _accepts(schema, data) is valid


# draft-07's "$ref prevents a sibling $id from changing the base uri"
REF_ID = {"$id": "http://localhost:1234/sibling_id/base/",
          "definitions": {"foo": {"$id": "http://localhost:1234/sibling_id/foo.json", "type": "string"},
                          "base_foo": {"$comment": "foo.json", "$id": "foo.json", "type": "number"}},
          "allOf": [{"$comment": "$ref resolves to base_foo", "$id": "http://localhost:1234/sibling_id/",
                     "$ref": "foo.json"}]}


@pytest.mark.parametrize("data, valid", [(5, True), ("a", False)])
def test_ref_ignores_sibling_id_in_draft7(data, valid):
    assert _accepts({"$schema": D7, **REF_ID}, data) is valid


DEPS = {"dependencies": {"bar": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}}}}}
DEPS_ESC = {"dependencies": {"foo\nbar": ["foo\rbar"], "foo'bar": {"required": ["foo\"bar"]},
                             "foo\"bar": ["foo'bar"]}}


@pytest.mark.parametrize("schema, data, text, valid", [
    (DEPS, {"bar": 2, "foo": 1}, '{"foo":1,"bar":2}', True),
    (DEPS, {"foo": "quux", "bar": 2}, '{"foo":"quux","bar":2}', False),
    (DEPS_ESC, {"foo\"bar": 2, "foo'bar": 1}, '{"foo\'bar":1,"foo\\"bar":2}', True),
    (DEPS_ESC, {"foo'bar": 1}, '{"foo\'bar":1}', False),
])
def test_canonical_order_under_schema_dependencies(schema, data, text, valid):
    schema = {"$schema": D7, **schema}
    assert canonicalize(schema, data) == text
    assert _accepts(schema, data) is valid
