"""The guard's acceptance properties on a deterministic subset of the damaged corpus."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evals" / "guard"))

pytest.importorskip("lxml", reason="lxml is the independent XML/DTD oracle of the corpus")


@pytest.fixture(scope="module")
def counts():
    import make_corpus
    import run
    cases = make_corpus.generate(1, xml_per_folder=6, json_instances=25, truncations=3)
    assert len(cases) >= 200
    return run.classify(cases)


def test_extraction_finds_intended_fragment(counts):
    assert counts["extract_ok"] >= 0.99 * counts["n"], counts["failures"][:5]


def test_validation_flags_every_invalid_case(counts):
    assert counts["invalid"] > 0 and counts["flagged"] == counts["invalid"], counts["failures"][:5]
    assert counts["false_pos"] == 0


def test_repair_fixes_repairable_and_never_changes_valid(counts):
    assert counts["rep_true"] > 0 and counts["rep_true_ok"] == counts["rep_true"], counts["failures"][:5]
    assert counts["valid_changed"] == 0
    assert counts["bad_repair"] == 0
    assert counts["rep_false_refused"] == counts["rep_false"]
