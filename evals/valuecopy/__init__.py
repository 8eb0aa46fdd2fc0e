"""Value-copy benchmark (issue 18): tool calls whose right arguments are spans of the
request or closed-set values; exact match per field and per call, with and without the
constraint, on the same prompts.  ``python -m evals.valuecopy run``."""
