"""Load benchmark of the OpenAI-compatible server: ``python -m evals.server_load`` (docs/server.md)."""

from evals.server_load.run import main, run

__all__ = ["main", "run"]
