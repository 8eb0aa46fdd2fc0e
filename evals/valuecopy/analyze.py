"""Hypothesis checks on value-copy records (issue 18), from the runs' records.jsonl.

- :func:`boundary`: where the unconstrained model starts its answer: exactly at the
  grammar's first byte (``{``), after whitespace, in a code fence, or elsewhere.  If it
  always starts at ``{``, the prompt/answer boundary splits no token the mask forbids
  (token healing has nothing to heal).
- :func:`spelling`: each wrong field of a parsed answer, classified as a *spelling* of the
  right value (equal after case folding and removing spaces, ``-``, ``/``, ``.``, ``_``) or
  a different value.
- :func:`across`: paired comparison of two runs' labels on the same tasks (e.g. natural vs
  compact whitespace), with :func:`evals.harness.paired.compare`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from evals.harness.paired import compare

__all__ = ["load", "boundary", "spelling", "across"]


def load(d: str | Path) -> list[dict]:
    with open(Path(d) / "records.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def boundary(records: list[dict]) -> Counter:
    c: Counter = Counter()
    for r in records:
        t = r["text"]
        if t.startswith("{"):
            c["at {"] += 1
        elif t.lstrip().startswith("{"):
            c["whitespace then {"] += 1
        elif t.lstrip().startswith("```"):
            c["code fence"] += 1
        else:
            c["other"] += 1
    return c


def _norm(s: str) -> str:
    return re.sub(r"[\s\-/._]", "", s).casefold()


def spelling(records: list[dict], fields_of) -> Counter:
    """``fields_of(record)`` -> the decoded fields of the record's answer (None if unparsed)."""
    c: Counter = Counter()
    for r in records:
        got = fields_of(r)
        if got is None:
            c["unparsed call"] += 1
            continue
        for k, v in r["expected"].items():
            g = got.get(k)
            if g == v:
                c["right"] += 1
            elif g is None:
                c["missing"] += 1
            elif _norm(str(g)) == _norm(v):
                c["spelling"] += 1
            else:
                c["other value"] += 1
    return c


def across(a: list[dict], label_a: str, b: list[dict], label_b: str, model: str) -> dict:
    ra = [r for r in a if r["model"] == model and r["label"] == label_a]
    rb = [r for r in b if r["model"] == model and r["label"] == label_b]
    return compare(ra, rb)
