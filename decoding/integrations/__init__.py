"""Adapters that plug this engine into other libraries' generation APIs.

Each submodule imports its third-party library at import time (``decoding.integrations.outlines``
needs ``outlines>=1.3``, the ``integrations`` extra); this package itself imports nothing, so
``import decoding`` never pulls an integration's dependency.  Integrations sit on top of the
public API (compiler, runtime) and never import :mod:`decoding.cli` or :mod:`decoding.server`.
"""

__all__: list[str] = []
