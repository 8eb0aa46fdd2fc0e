"""Give the C heap's free memory back to the operating system after a large compile.

A compile that builds big automata (subset construction, minimisation, large NFAs)
allocates and frees hundreds of megabytes of medium-sized blocks; glibc keeps them in its
arenas, so the process's resident memory stays at the compile's peak although the compiled
grammar is small.  :func:`release_free_memory` calls glibc's ``malloc_trim(0)``, which
returns free pages to the system and changes nothing else (0.2-15 ms, so it is only worth
calling after a compile that took at least :data:`TRIM_AFTER_SECONDS`).  Elsewhere (musl,
macOS) or with ``GD_NO_MALLOC_TRIM=1`` it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

from decoding.envflags import flag

__all__ = ["release_free_memory", "TRIM_AFTER_SECONDS"]

#: compiles that took at least this long are followed by :func:`release_free_memory`
TRIM_AFTER_SECONDS = 0.05

_lock = threading.Lock()
_trim: Any = None  # the libc function, False when there is none


def _load() -> Any:
    global _trim
    with _lock:
        if _trim is None:
            fn: Any = False
            try:
                name = ctypes.util.find_library("c")
                lib = ctypes.CDLL(name) if name else None
                fn = getattr(lib, "malloc_trim", False) if lib is not None else False
                if fn:
                    fn.argtypes = [ctypes.c_size_t]
                    fn.restype = ctypes.c_int
            except OSError:
                fn = False
            _trim = fn
    return _trim


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system; True if that was done."""
    if flag("GD_NO_MALLOC_TRIM"):
        return False
    fn = _load()
    if not fn:
        return False
    fn(0)
    return True
