"""Conformance runner for the JSON Schema front-end (see run.py)."""
