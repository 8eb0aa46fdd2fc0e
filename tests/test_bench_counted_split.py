"""``python -m evals.bench.counted --split`` runs: its spy on the DFA minimisation follows
``automaton._minimize``'s signature (it broke when ``live`` was added), and the table lists
the counted schemas with their states."""

from __future__ import annotations

from evals.bench import counted


def test_split_breakdown_runs(capsys):
    assert counted.main(["--split", "Snowplow", "--limit", "4", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| sp_")]
    assert rows, out
    assert all(line.count("|") >= 8 for line in rows)
