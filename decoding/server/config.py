"""Server settings: one frozen dataclass, passed to every worker process as JSON.

Invariants: every limit is a positive number; ``host`` defaults to the loopback address;
``api_key`` None means no authentication; ``dtd_dir`` None means a DTD in a request may
not reference any external entity (and may not be named by file)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields

from decoding.errors import UsageError

__all__ = ["ServerConfig", "CONFIG_ENV", "MAX_COPY_BIAS"]

#: largest copy bias (nats) a config or a request may ask for
MAX_COPY_BIAS = 10.0

#: environment variable through which ``serve`` hands the config to uvicorn worker processes
CONFIG_ENV = "DECODING_SERVER_CONFIG"


@dataclass(frozen=True)
class ServerConfig:
    model: str = "smollm2"           # a packaged model name or a .gguf path
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1                 # processes, each with its own model
    api_key: str | None = None
    n_ctx: int = 2048
    cache_dir: str | None = None     # on-disk artifact cache shared by workers (None: memory only)
    dtd_dir: str | None = None       # the only directory external DTD entities are read from
    max_body_bytes: int = 1 << 20    # request body limit (413 above)
    max_schema_bytes: int = 256 << 10  # grammar source limit: schema / DTD / GBNF text (422 above)
    max_schema_depth: int = 32       # nesting of a JSON schema (422 above)
    max_tokens_limit: int = 2048     # the largest max_tokens a request may ask for (400 above)
    default_max_tokens: int = 256
    queue_size: int = 16             # requests waiting or running per worker (503 above)
    retry_after_s: int = 1           # the Retry-After header of a 503
    test_hooks: bool = False         # fault injection: ``x_fail_after_tokens``, an X-Worker-Pid header
    max_parallel_tool_calls: int = 4  # calls per answer with parallel_tool_calls true (the OpenAI default)
    tool_call_start: str | None = None  # tool-call markers; None: from the model's chat template,
    tool_call_end: str | None = None    # else <tool_call> ... </tool_call> (decoding.server.toolmarkers)
    upstreams: tuple[str, ...] = ()  # llama-server URLs: forward there, load no model (decoding.server.upstream)
    copy_bias: float = 0.0           # default logit bonus (nats) for copying the request into a value; 0: off

    def __post_init__(self) -> None:
        object.__setattr__(self, "upstreams", tuple(self.upstreams))  # a JSON list after from_json
        for f in ("port", "workers", "n_ctx", "max_body_bytes", "max_schema_bytes", "max_schema_depth",
                  "max_tokens_limit", "default_max_tokens", "queue_size", "retry_after_s",
                  "max_parallel_tool_calls"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < (0 if f == "port" else 1):
                raise UsageError(f"ServerConfig.{f}: expected a positive integer, got {v!r}")
        if (self.tool_call_start is None) != (self.tool_call_end is None) or \
                self.tool_call_start == "" or self.tool_call_end == "":
            raise UsageError("ServerConfig.tool_call_start / tool_call_end: give both markers (non-empty) or neither")
        if isinstance(self.copy_bias, bool) or not isinstance(self.copy_bias, (int, float)) or \
                not 0 <= self.copy_bias <= MAX_COPY_BIAS:
            raise UsageError(f"ServerConfig.copy_bias: expected a number of nats in [0, {MAX_COPY_BIAS}], "
                             f"got {self.copy_bias!r}")
        if self.copy_bias and self.upstreams:
            raise UsageError("ServerConfig.copy_bias: not available with upstreams (llama-server applies "
                             "the grammar there, not this process's logits processor)")
        if self.dtd_dir is not None and not os.path.isdir(self.dtd_dir):
            raise UsageError(f"ServerConfig.dtd_dir: {self.dtd_dir!r} is not a directory")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "ServerConfig":
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
