"""Prometheus metrics of one server process (one registry per app, so apps never share).

Names: ``decoding_requests_total{endpoint,status}``, ``decoding_compile_ms`` (histogram of
compiles that missed the cache), ``decoding_mask_us_per_token`` (histogram, one sample per
request), ``decoding_grammar_cache_hits_total``, ``decoding_grammar_cache_misses_total``,
``decoding_unprocessable_total`` (422s), ``decoding_queue_depth`` (requests waiting or running),
``decoding_generated_tokens_total``.

With ``--workers N`` the server sets ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's
multiprocess mode) before the workers start, so every worker's ``/metrics`` reports the sum
over all workers (the queue-depth gauge: the live sum)."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

__all__ = ["Metrics", "CONTENT_TYPE_LATEST", "MULTIPROC_ENV"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("decoding_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.compile_ms = Histogram("decoding_compile_ms", "grammar compile time (cache misses), ms",
                                    buckets=(1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000), registry=r)
        self.mask_us = Histogram("decoding_mask_us_per_token", "mask time per generated token, microseconds",
                                 buckets=(5, 10, 25, 50, 100, 250, 500, 1000, 5000), registry=r)
        self.cache_hits = Counter("decoding_grammar_cache_hits", "compiles answered by the grammar cache",
                                  registry=r)
        self.cache_misses = Counter("decoding_grammar_cache_misses", "grammars compiled", registry=r)
        self.unprocessable = Counter("decoding_unprocessable", "422 answers (grammar cannot be enforced)",
                                     registry=r)
        self.queue_depth = Gauge("decoding_queue_depth", "requests waiting or generating", registry=r,
                                 multiprocess_mode="livesum")
        self.tokens = Counter("decoding_generated_tokens", "completion tokens", registry=r)

        if os.environ.get(MULTIPROC_ENV):
            _forget_dead_workers(os.environ[MULTIPROC_ENV])

    def render(self) -> bytes:
        if os.environ.get(MULTIPROC_ENV):
            from prometheus_client import multiprocess

            reg = CollectorRegistry()
            multiprocess.MultiProcessCollector(reg)
            return generate_latest(reg)
        return generate_latest(self.registry)


def _forget_dead_workers(directory: str) -> None:
    """Drop the live gauges of worker processes that no longer exist (a killed worker's
    queue depth must not stay in the sum); called when a (replacement) worker starts."""
    import re

    from prometheus_client import multiprocess

    for name in os.listdir(directory):
        m = re.fullmatch(r"gauge_live\w*_(\d+)\.db", name)
        if m is None:
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, directory)
        except PermissionError:
            pass
