"""Switches read from the environment at each use (tests set them at run time), cheaply.

``flag(name)`` is ``os.environ.get(name, "") == "1"``: ``os.environ.get`` encodes the name
and decodes the value on every call (about 2 µs on the 2-core CI machine), and a schema
compile reads these switches a dozen times.  Here the name's encoded form is made once and
looked up in the mapping ``os.environ`` keeps up to date (``os.environ._data``: every
change through ``os.environ``, ``monkeypatch.setenv`` included, goes there); where that
mapping is not available the plain ``os.environ`` is read.

Invariant: ``flag(name) == (os.environ.get(name, "") == "1")`` at every call.
"""

from __future__ import annotations

import os

__all__ = ["flag"]

_DATA = getattr(os.environ, "_data", None)
_ENCODE = getattr(os.environ, "encodekey", None)
_ONE = os.environ.encodevalue("1") if hasattr(os.environ, "encodevalue") else None  # type: ignore[attr-defined]
_KEYS: dict[str, object] = {}


def flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to ``"1"``."""
    if _DATA is None or _ENCODE is None or _ONE is None:
        return os.environ.get(name, "") == "1"
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = _ENCODE(name)
    return _DATA.get(key) == _ONE
