"""``serve(config)``: run the app under uvicorn, in-process (one worker) or as ``workers``
processes, each loading its own model (the config travels in :data:`CONFIG_ENV`; metrics are
aggregated across workers through a temporary ``PROMETHEUS_MULTIPROC_DIR``)."""

from __future__ import annotations

import os
from typing import Any

from decoding.server.config import CONFIG_ENV, ServerConfig

__all__ = ["serve", "app_from_env"]


def app_from_env() -> Any:
    """The uvicorn factory of a worker process."""
    from decoding.server.app import create_app

    config = ServerConfig.from_json(os.environ[CONFIG_ENV])
    if config.upstreams:  # issue 17: forward to llama-server instances (no model here)
        from decoding.server.upstream import create_upstream_app

        return create_upstream_app(config)
    return create_app(config)


def serve(config: ServerConfig) -> None:
    import uvicorn

    os.environ[CONFIG_ENV] = config.to_json()
    if config.workers == 1:
        uvicorn.run(app_from_env(), host=config.host, port=config.port, log_level="info")
    else:
        import tempfile

        from decoding.server.metrics import MULTIPROC_ENV

        with tempfile.TemporaryDirectory(prefix="decoding-metrics-") as d:
            os.environ.setdefault(MULTIPROC_ENV, d)  # before any worker imports prometheus_client
            uvicorn.run("decoding.server.run:app_from_env", factory=True, host=config.host, port=config.port,
                        workers=config.workers, log_level="info")
