"""Value-copy benchmark tasks and the paired statistics of the eval harness (issue 18)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evals.harness.metrics import check_output
from evals.harness.paired import bootstrap_diff, compare, mcnemar_exact, paired_table
from evals.valuecopy.tasks import FAMILY, TOOL_NAMES, example, generate
from evals.valuecopy.run import variant_families


def test_tasks_are_deterministic_many_and_cover_all_tools():
    a, b = generate(0, 200), generate(0, 200)
    assert a == b and len(a) == 200 and len({t.id for t in a}) == 200
    assert {t.family for t in a} == set(TOOL_NAMES)
    assert generate(0, 40) == a[:40]  # a subset run is the first n of the full run
    assert generate(1, 50) != a[:50]
    zh = [t for t in a if any("\u4e00" <= ch <= "\u9fff" for ch in t.user)]
    assert 40 <= len(zh) <= 160


@pytest.mark.parametrize("task", generate(0, 200), ids=lambda t: t.id)
def test_expected_values_are_spans_and_the_answer_scores_full(task):
    fam = FAMILY[task.family]
    for v in task.expected.values():
        assert v in task.user, (v, task.user)
    for ws in ("natural", "compact"):
        doc = fam.render(task.expected, ws)
        c = check_output(fam, doc, task.expected)
        assert (c.valid, c.fields_ok) == (True, True), (doc, c.errors)


@pytest.mark.parametrize("tool", TOOL_NAMES)
def test_reversed_key_order_and_example(tool):
    rev = variant_families("reversed")[tool]
    assert list(rev.schema["properties"]) == list(reversed(FAMILY[tool].schema["properties"]))
    ex = example(tool)
    assert ex not in generate(0, 200)
    c = check_output(rev, rev.render(ex.expected), ex.expected)
    assert c.valid and c.fields_ok
    with pytest.raises(ValueError, match="key_order"):
        variant_families("sorted")


@pytest.mark.parametrize("b,c,p", [(0, 0, 1.0), (3, 3, 1.0), (0, 5, 0.0625), (5, 0, 0.0625),
                                   (1, 9, 0.021484375), (10, 2, 2 * sum(math.comb(12, i) for i in range(3)) / 4096)])
def test_mcnemar_exact(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p)


def test_bootstrap_interval_contains_the_difference_and_is_reproducible():
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 2, 80), rng.integers(0, 2, 80)
    d, lo, hi = bootstrap_diff(x, y)
    assert lo <= d <= hi and d == pytest.approx(x.mean() - y.mean())
    assert bootstrap_diff(x, y) == (d, lo, hi)
    assert bootstrap_diff(np.ones(10), np.ones(10)) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="equal length"):
        bootstrap_diff(np.ones(3), np.ones(4))


def _rec(task, label, ok):
    mode = label.split("+")[0]
    return {"model": "m", "mode": mode, "label": label, "task": task, "fields": ok,
            "fields_correct": 2 if ok else 1, "fields_total": 2}


def test_paired_table_pairs_same_shots_only():
    recs = [_rec(f"t{i}", "free", i < 2) for i in range(6)] + [_rec(f"t{i}", "automaton", i < 5) for i in range(6)]
    recs += [_rec(f"t{i}", "free+1shot", True) for i in range(6)] + [_rec(f"t{i}", "automaton+1shot", i != 0)
                                                                      for i in range(6)]
    t = paired_table(recs)["m"]
    assert set(t) == {"automaton", "automaton+1shot"}
    a = t["automaton"]
    assert (a["n"], a["only_constrained"], a["only_free"]) == (6, 3, 0)
    assert a["diff"] == pytest.approx(0.5) and a["mcnemar_p"] == pytest.approx(0.25)
    s = t["automaton+1shot"]
    assert (s["only_constrained"], s["only_free"]) == (0, 1) and s["diff"] == pytest.approx(-1 / 6)
    assert compare(recs[6:12], recs[:0])["n"] == 0


@pytest.mark.parametrize("prefix,ok", [("", True), ("\n", True), (" ", True), ("\n\n", False), ("\t", False),
                                       ("x", False)])
def test_lead_in_grammar_allows_one_newline_or_space_before_the_structure(prefix, ok):
    from decoding.backends.automaton import compile_dfa
    from evals.harness.modes import with_lead_in

    fam = FAMILY["get_order"]
    doc = prefix + fam.render({"user_id": "U12345678", "order_id": "ORD-20250101-0001"})
    assert compile_dfa(with_lead_in(fam.grammar())).accepts(doc.encode()) is ok
    assert not compile_dfa(fam.grammar()).accepts(("\n" + doc.lstrip()).encode())
