"""Eval harness: task generation, metrics, and the --quick run on the real SmolLM2 model.

The quick run must finish in under 3 minutes and the constrained modes must reach
closure = well-formed = valid = 100% on every task family.
"""

from __future__ import annotations

import json

import pytest

from decoding.backends.automaton import compile_dfa
from evals.harness.families import FAMILY
from evals.harness.metrics import check_output, json_closure, wilson, xml_closure
from evals.harness.tasks import FAMILIES, example_task, generate_tasks


def test_tasks_are_seeded_and_enough():
    a, b = generate_tasks(0), generate_tasks(0)
    assert a == b and len(a) >= 200
    assert generate_tasks(1) != a
    assert {t.family for t in a} == set(FAMILIES)
    assert len({t.id for t in a}) == len(a)
    chinese = [t for t in a if any("\u4e00" <= ch <= "\u9fff" for v in t.expected.values() for ch in v)]
    assert len(chinese) >= 20
    assert {t.expected["tool"] for t in a if t.family == "tool_routing"} == {
        "get_weather", "search_product", "send_email", "set_alarm", "book_flight"}


@pytest.mark.parametrize("family", FAMILIES)
def test_example_answer_is_in_grammar_and_scores_full(family):
    fam = FAMILY[family]
    ex = example_task(family)
    doc = fam.render(ex.expected)
    assert compile_dfa(fam.grammar()).accepts(doc.encode("utf-8"))
    c = check_output(fam, f"Sure! {doc}\nDone.", ex.expected)
    assert (c.closure, c.well_formed, c.valid, c.fields_ok) == (True, True, True, True)
    wrong = dict(ex.expected, **{next(iter(ex.expected)): "nope"})
    assert not check_output(fam, doc, wrong).fields_ok


@pytest.mark.parametrize("text,ok", [
    ("<a><b>x</b></a>", True), ("pre <a/> post", True), ("<a><!-- <b> --></a>", True),
    ("<a><b></a></b>", False), ("<a><b>x</b>", False), ("no xml", False), ("<a x='1'><b/></a", False),
])
def test_xml_closure(text, ok):
    assert xml_closure(text) is ok


@pytest.mark.parametrize("text,ok", [
    ('{"a": "}"}', True), ('x [1, {"b": []}] y', True), ('{"a": [1, 2}', False), ('{"a": "}', False), ("{", False),
])
def test_json_closure(text, ok):
    assert json_closure(text) is ok


def test_wilson():
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and 0.69 < lo < 0.73
    lo, hi = wilson(5, 10)
    assert lo < 0.5 < hi and abs((lo + hi) / 2 - 0.5) < 1e-9


def test_quick_run_constrained_is_always_valid(tmp_path):
    from evals.harness.__main__ import main

    # (no wall-clock assertion: speed is the benchmarks' business, and CI machines are shared)
    assert main(["run", "--quick", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    for name in ("results.md", "rates.png", "speed.png", "records.jsonl"):
        assert (tmp_path / name).stat().st_size > 0
    cells = res["cells"]["smollm2"]
    assert set(cells) == {"free", "automaton", "fastforward", "gbnf"}
    for mode in ("automaton", "fastforward", "gbnf"):
        assert set(cells[mode]["by_family"]) == set(FAMILIES)
        for fam, cell in cells[mode]["by_family"].items():
            for key in ("closure", "well_formed", "valid"):
                assert cell[key]["k"] == cell[key]["n"] >= 1, (mode, fam, key, cell[key])
            assert cell["truncated"]["k"] == 0, (mode, fam)
        assert res["speed_ratio_vs_free"]["smollm2"][mode] > 0
    assert res["meta"]["mode_status"]["free"] == "ran"
