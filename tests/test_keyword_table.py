"""evals/conformance/peers.py (the keyword table): the suite file -> keyword mapping, the
aggregation and the rendering; no peer needs to be installed."""

from __future__ import annotations

import pytest

from evals.conformance import peers, run


@pytest.mark.parametrize("stem, keywords", [
    ("ref", ("$ref",)),
    ("refRemote", ("$ref",)),
    ("dynamicRef", ("$dynamicRef", "$dynamicAnchor")),
    ("if-then-else", ("if", "then", "else")),
    ("unevaluatedProperties", ("unevaluatedProperties",)),
    ("maxContains", ("maxContains",)),
    ("defs", ("$defs",)),
    ("content", ("contentEncoding", "contentMediaType", "contentSchema")),
    ("boolean_schema", ()),
    ("infinite-loop-detection", ()),
    ("not-a-keyword", ()),
])
def test_file_keywords(stem, keywords):
    assert peers.file_keywords(stem) == keywords


def test_every_2020_12_keyword_is_a_row():
    assert len(peers.KEYWORDS) == len(set(peers.KEYWORDS)) == 57
    for kw in ("$dynamicRef", "prefixItems", "unevaluatedItems", "dependentRequired", "minContains",
               "contentSchema", "$vocabulary", "format", "deprecated"):
        assert kw in peers.KEYWORDS
    assert "definitions" not in peers.KEYWORDS and "dependencies" not in peers.KEYWORDS  # draft-07


def test_keyword_files_of_the_shared_suite():
    stems = [p.stem for p in run.SUITE_DIR.glob("*.json")]
    if not stems:
        pytest.skip("../shared has no draft2020-12 suite")
    kf = peers.keyword_files(stems)
    assert set(kf) == set(peers.KEYWORDS)
    assert kf["$ref"] == ["ref", "refRemote"]
    assert kf["if"] == kf["else"] == ["if-then-else"]
    assert kf["$schema"] == []  # no suite file: the cell says so
    # every suite file is a keyword file except the two that are not named after one
    used = {s for fs in kf.values() for s in fs}
    assert set(stems) - used == {"boolean_schema", "infinite-loop-detection"}


def test_aggregate_counts_only_compiled_groups_of_the_files():
    groups = {
        "ref#0": {"status": "compiled", "valid": 2, "valid_accepted": 2, "invalid": 1, "invalid_accepted": 0},
        "ref#1": {"status": "error", "reason": "x"},
        "refRemote#0": {"status": "compiled", "valid": 1, "valid_accepted": 0, "invalid": 3, "invalid_accepted": 1},
        "not#0": {"status": "compiled", "valid": 5, "valid_accepted": 5, "invalid": 5, "invalid_accepted": 5},
    }
    agg = peers.aggregate(groups, ["ref", "refRemote"])
    assert agg == dict(groups=3, compiled=2, valid=3, valid_accepted=2, invalid=4, invalid_accepted=1)
    assert peers.cell(agg) == "**2/3; valid 2/3; invalid 1/4**"
    assert peers.cell(peers.aggregate(groups, ["ref"])) == "1/2; valid 2/2; invalid 0/1"
    assert peers.cell(peers.aggregate(groups, ["multipleOf"])) == "no suite file"
    assert peers.cell(None, "not installed") == "not installed"


def test_missing_peer_is_reported_not_raised(monkeypatch):
    from evals.bench import engines

    class Missing(engines.Engine):
        name = "missing"

        def setup(self, vocab):
            raise engines.Unavailable("not installed (No module named 'missing')")

    monkeypatch.setattr(peers, "_make", lambda name: Missing())
    assert peers.run_peer("xgrammar", [], vocab=None, timeout=1.0) == {"status": "not installed"}


def test_render_has_a_row_per_keyword_and_writes_docs(tmp_path, monkeypatch):
    kf = {k: [] for k in peers.KEYWORDS}
    kf["const"] = ["const"]
    ok = {"status": "ok", "version": "1",
          "keywords": {"const": dict(groups=2, compiled=1, valid=1, valid_accepted=1, invalid=2, invalid_accepted=0)}}
    res = {"keyword_files": kf, "engines": {"ours": ok, "xgrammar": {"status": "not installed"}}}
    table = peers.render(res)
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(peers.KEYWORDS)
    assert "| `const` | const | 1/2; valid 1/1; invalid 0/2 | not installed |" in table
    doc = tmp_path / "doc.md"
    doc.write_text(f"# t\n\nbefore\n{peers.BEGIN}\nOLD TABLE\n{peers.END}\nafter\n")
    monkeypatch.setattr(peers, "DOCS", doc)
    peers.write_docs(table)
    text = doc.read_text()
    assert "OLD TABLE" not in text and "before" in text and "after" in text and table in text
