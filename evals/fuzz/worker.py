"""A subprocess that runs fuzz inputs one at a time, and the parent-side handle to it.

The worker (``python -m evals.fuzz.worker``) caps its address space (``RLIMIT_AS``), reads
one JSON request per line on stdin (``{"door", "payload", "seed"}``) and answers on its
original stdout with ``{"phase": ...}`` lines while it works and one ``{"result": ...}``
line at the end.  Everything else the package or native code prints goes to stderr, which
the parent points at a file; ``faulthandler`` writes the Python stack there on a fatal
signal and shortly before the parent's timeout, so hangs and native crashes get a frame.

:class:`Worker` (parent side) keeps one worker process for many inputs and starts a new one
after a crash or a timeout.  ``run`` returns the outcome dict; ``kind`` is ``hang`` when a
phase of the door or of the walks ran over ``timeout`` seconds, ``crash`` when the process
died (signal or MemoryError outside Python's reach); a timeout or death during the
``oracle`` phase is ``ok`` with ``oracle_skipped`` (the oracle, not the door, failed).
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["Worker", "DEFAULT_TIMEOUT", "DEFAULT_MEMORY"]

DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY = 5 * 1024 ** 3
ROOT = Path(__file__).resolve().parents[2]
_FRAME = re.compile(r'File "([^"]+)", line \d+ in (\S+)')


def _frame_signature(stderr_text: str) -> str:
    """``decoding/x.py:function`` of the innermost package frame in the last faulthandler dump."""
    k = max(stderr_text.rfind("most recent call first"), 0)
    frames = _FRAME.findall(stderr_text[k:])
    for path, fn in frames:                       # innermost first
        p = path.replace("\\", "/")
        if "/decoding/" in p and "/evals/" not in p:
            return f"decoding/{p.rsplit('/decoding/', 1)[1]}:{fn}"
    return f"{Path(frames[0][0]).name}:{frames[0][1]}" if frames else "?"


class Worker:
    """Parent-side handle: one reusable worker process, restarted after a crash or timeout."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY,
                 python: str = sys.executable) -> None:
        self.timeout = timeout
        self.memory = memory
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self._err = tempfile.NamedTemporaryFile(prefix="fuzz-worker-", suffix=".err", delete=False)
        self._buf = b""

    # -------------------------------------------------------------- process management
    def _start(self) -> None:
        self._err.seek(0)
        self._err.truncate()
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [self.python, "-m", "evals.fuzz.worker", str(self.memory), str(self.timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, cwd=str(ROOT), env=env)
        self._buf = b""

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
            except OSError:
                pass
            self.proc.wait()
            self.proc = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
            os.unlink(self._err.name)
        except Exception:  # noqa: BLE001
            pass

    def _stderr_tail(self) -> str:
        try:
            with open(self._err.name, "rb") as fh:
                fh.seek(max(0, os.path.getsize(self._err.name) - 20000))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _readline(self, deadline: float) -> bytes | None:
        """One protocol line, or None on timeout / EOF (process died)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:               # EOF: the worker died; reap it so poll() sees it
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    # -------------------------------------------------------------- one input
    def run(self, door: str, payload: dict, seed: int = 0) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        req = json.dumps({"door": door, "payload": payload, "seed": seed}, ensure_ascii=True) + "\n"
        t0 = time.monotonic()
        try:
            self.proc.stdin.write(req.encode("ascii"))
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died("door", t0)
        phase = "door"
        # worker start-up (imports) is not charged to the input: the first phase line resets
        deadline = time.monotonic() + self.timeout + 30.0
        while True:
            line = self._readline(deadline)
            if line is None:
                if self.proc.poll() is not None:
                    return self._died(phase, t0)
                return self._timed_out(phase, t0)
            msg = json.loads(line)
            if "phase" in msg:
                phase = msg["phase"]
                deadline = time.monotonic() + self.timeout
                continue
            res = msg["result"]
            res["seconds"] = round(time.monotonic() - t0, 3)
            return res

    def _restart_info(self) -> str:
        self.close()
        self.restarts += 1
        return self._stderr_tail()

    def _timed_out(self, phase: str, t0: float) -> dict:
        time.sleep(0.2)  # let the faulthandler dump land
        tail = self._restart_info()
        secs = round(time.monotonic() - t0, 3)
        if phase == "oracle":
            return {"kind": "ok", "signature": "", "message": "oracle timed out", "phase": phase,
                    "oracle_skipped": True, "seconds": secs}
        return {"kind": "hang", "signature": f"hang @ {_frame_signature(tail)}",
                "message": f"no answer within {self.timeout:g} s (phase {phase})", "phase": phase,
                "oracle_skipped": False, "seconds": secs}

    def _died(self, phase: str, t0: float) -> dict:
        rc = self.proc.returncode if self.proc is not None else None
        tail = self._restart_info()
        secs = round(time.monotonic() - t0, 3)
        why = f"signal {-rc}" if isinstance(rc, int) and rc < 0 else f"exit {rc}"
        if phase == "oracle":
            return {"kind": "ok", "signature": "", "message": f"oracle died ({why})", "phase": phase,
                    "oracle_skipped": True, "seconds": secs}
        return {"kind": "crash", "signature": f"worker died ({why}) @ {_frame_signature(tail)}",
                "message": tail[-1500:], "phase": phase, "oracle_skipped": False, "seconds": secs}


# ----------------------------------------------------------------------------- worker side

def _serve(memory: int, timeout: float) -> None:
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ValueError, OSError):  # pragma: no cover - platform without RLIMIT_AS
        pass
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="ascii")
    os.dup2(2, 1)                      # stray native writes to fd 1 go to the stderr file
    sys.stdout = sys.stderr
    faulthandler.enable(file=sys.stderr, all_threads=False)

    from evals.fuzz.targets import run_input

    def phase(name: str) -> None:
        faulthandler.cancel_dump_traceback_later()
        faulthandler.dump_traceback_later(max(timeout - 0.5, 0.5), exit=False, file=sys.stderr)
        proto.write(json.dumps({"phase": name}) + "\n")
        proto.flush()

    limit = sys.getrecursionlimit()
    for line in sys.stdin:
        sys.setrecursionlimit(20_000)     # a deeply nested input must reach the door, not fail here
        try:
            req = json.loads(line)
        finally:
            sys.setrecursionlimit(limit)
        try:
            out = run_input(req["door"], req["payload"], phase=phase, seed=int(req.get("seed", 0)))
            res = out.as_dict()
        except MemoryError:
            res = {"kind": "crash", "signature": "MemoryError @ ?", "message": "MemoryError",
                   "phase": "?", "oracle_skipped": False}
        faulthandler.cancel_dump_traceback_later()
        proto.write(json.dumps({"result": res}, ensure_ascii=True) + "\n")
        proto.flush()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), float(sys.argv[2]))
