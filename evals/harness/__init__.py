"""Eval harness: closure, well-formedness, validity, field accuracy and speed of small local
models with and without the constraint.  Run ``python -m evals.harness run [--quick]``."""

from evals.harness.run import aggregate, run

__all__ = ["run", "aggregate"]
