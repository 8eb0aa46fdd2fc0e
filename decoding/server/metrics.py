"""Prometheus metrics of one server process (one registry per app, so apps never share).

Names: ``decoding_requests_total{endpoint,status}``, ``decoding_compile_ms`` (histogram of
compiles that missed the cache), ``decoding_mask_us_per_token`` (histogram, one sample per
request), ``decoding_grammar_cache_hits_total``, ``decoding_grammar_cache_misses_total``,
``decoding_unprocessable_total`` (422s), ``decoding_queue_depth`` (requests waiting or running),
``decoding_generated_tokens_total``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

__all__ = ["Metrics", "CONTENT_TYPE_LATEST"]


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
        self.queue_depth = Gauge("decoding_queue_depth", "requests waiting or generating", registry=r)
        self.tokens = Counter("decoding_generated_tokens", "completion tokens", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
