"""Paired comparison of a constrained mode with ``free`` on the same prompts.

Two generations are paired when they share (model, task, shots): same prompt, the
constraint is the only difference.  Per pair of labels:

- McNemar's exact test on all-fields-exact: ``b`` = tasks right only under the
  constraint, ``c`` = right only without; two-sided p = P(Binomial(b + c, 1/2) as
  extreme as observed) (:func:`mcnemar_exact`).
- The paired difference of the all-fields-exact rate and of the per-field rate, with a
  95% percentile bootstrap over tasks (:func:`bootstrap_diff`, seeded: reproducible).

Invariants: p is in [0, 1] and is 1 when b == c; the bootstrap interval contains the
observed difference whenever the pairs are not all identical.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

__all__ = ["mcnemar_exact", "bootstrap_diff", "paired_table", "compare"]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def bootstrap_diff(x: np.ndarray, y: np.ndarray, *, n_boot: int = 4000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float, float]:
    """(mean(x - y), lo, hi): paired difference with a percentile bootstrap interval over
    the pairs (rows of ``x``/``y``)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"bootstrap_diff: x and y must be 1-d and of equal length, got {x.shape}, {y.shape}")
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan")
    d = x - y
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n_boot, len(d)))
    means = d[idx].mean(axis=1)
    a = (1 - level) / 2
    return float(d.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def compare(recs_c: list[dict], recs_u: list[dict]) -> dict:
    """Paired statistics of constrained records ``recs_c`` vs unconstrained ``recs_u``
    (matched by task id; unmatched records are left out)."""
    u = {r["task"]: r for r in recs_u}
    pairs = [(r, u[r["task"]]) for r in recs_c if r["task"] in u]
    xc = np.array([bool(a["fields"]) for a, _ in pairs], dtype=float)
    xu = np.array([bool(b["fields"]) for _, b in pairs], dtype=float)
    fc = np.array([a["fields_correct"] / max(a["fields_total"], 1) for a, _ in pairs])
    fu = np.array([b["fields_correct"] / max(b["fields_total"], 1) for _, b in pairs])
    b = int(((xc == 1) & (xu == 0)).sum())
    c = int(((xc == 0) & (xu == 1)).sum())
    d, lo, hi = bootstrap_diff(xc, xu)
    fd, flo, fhi = bootstrap_diff(fc, fu)
    n_f = sum(a["fields_total"] for a, _ in pairs)
    return {"n": len(pairs), "exact_constrained": float(xc.mean()) if len(pairs) else None,
            "exact_free": float(xu.mean()) if len(pairs) else None, "diff": d, "lo": lo, "hi": hi,
            "only_constrained": b, "only_free": c, "mcnemar_p": mcnemar_exact(b, c),
            "field_constrained": (sum(a["fields_correct"] for a, _ in pairs) / n_f) if n_f else None,
            "field_free": (sum(b_["fields_correct"] for _, b_ in pairs) / n_f) if n_f else None,
            "field_diff": fd, "field_lo": flo, "field_hi": fhi}


def paired_table(records: list[dict]) -> dict:
    """{model: {label: stats vs free of the same shots}} for every constrained label."""
    by: dict = defaultdict(list)
    for r in records:
        by[r["model"], r.get("label", r["mode"])].append(r)
    out: dict = {}
    for (model, lab), recs in by.items():
        mode, _, shot = lab.partition("+")
        if mode in ("free", "prompt"):
            continue
        free = by.get((model, "free" + (f"+{shot}" if shot else "")))
        if free:
            out.setdefault(model, {})[lab] = compare(recs, free)
    return out
