"""What the server tests (``tests/test_server*.py``) share: a free port, and an app of
``decoding.server`` served by uvicorn in a thread of the test process.

``serving(**config)`` starts one such server on 127.0.0.1 over the packaged SmolLM2, the one
``Llama`` of the session (``tests/conftest.get_model``: loaded once, shared by every module), and
stops it on exit.  The modules that run one in-process keep their own app, because their
configs must differ: ``test_server.py`` needs an API key, the test hooks and a queue of 4 (its
503 test fills the queue), ``test_server_schemathesis.py`` needs no key (the generated requests
carry none) and ``max_tokens_limit=8`` (the generated requests that generate stay short).  A
second app on the loaded model starts in milliseconds (the tokenizer index is memoized per
model); what is worth sharing, the model, is shared.  One app serves at a time (module-scoped
fixtures), so that no two engine threads ever drive the one ``Llama``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any, Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(log_level: str = "warning", **config: Any) -> Iterator[tuple[Any, str]]:
    """An app of ``ServerConfig(**config)`` (its port: a free one) on SmolLM2, served in a thread
    on 127.0.0.1; yields ``(app, "http://127.0.0.1:<port>")``."""
    import uvicorn

    from decoding.server import ServerConfig, create_app
    from tests.conftest import get_model

    port = free_port()
    app = create_app(ServerConfig(port=port, **config), llm=get_model("smollm2"))
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    deadline = time.time() + 30
    while not srv.started:
        assert th.is_alive() and time.time() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        th.join(10)
