"""Fuzzing the five doors of guarded-decoding (issue 19): JSON Schema, DTD, GBNF, artifacts, guard.

    python -m evals.fuzz --door {schema,dtd,gbnf,artifact,guard,all} --minutes M [--seed S] [--out DIR]

Modules: :mod:`~evals.fuzz.generators` (inputs), :mod:`~evals.fuzz.targets` (run one input,
classify the outcome), :mod:`~evals.fuzz.worker` (subprocess with a timeout and a memory
cap, reused across inputs), :mod:`~evals.fuzz.shrink` (delta debugging),
:mod:`~evals.fuzz.campaign` (the time-boxed loop, reproducers, the table).
See docs/fuzz.md for the last campaign's table.
"""
