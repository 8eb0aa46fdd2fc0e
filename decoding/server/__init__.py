"""An OpenAI-compatible HTTP server whose structured outputs are guaranteed by the grammar
engine (``python -m decoding serve``; see docs/server.md).

Needs the ``server`` extra (fastapi, uvicorn, prometheus-client); importing this package
does not import them: :func:`create_app` and :func:`serve` load them on first use."""

from __future__ import annotations

from typing import Any

from decoding.server.config import ServerConfig

__all__ = ["ServerConfig", "create_app", "serve"]


def create_app(config: ServerConfig | None = None, *, llm: Any = None) -> Any:
    """The FastAPI app (see :func:`decoding.server.app.create_app`)."""
    from decoding.server.app import create_app as _create

    return _create(config, llm=llm)


def serve(config: ServerConfig) -> None:
    """Run the server under uvicorn (see :mod:`decoding.server.run`)."""
    from decoding.server.run import serve as _serve

    _serve(config)
