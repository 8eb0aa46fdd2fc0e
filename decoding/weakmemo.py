"""One derived object per key object, remembered without touching the key.

:class:`WeakMemo` maps an object (a vocabulary, a compiled grammar, a user's ``Llama``) to
something derived from it, built once on first use.  Invariants: nothing is attached to
the key object; the entry is freed with the key; ``factory`` runs at most once per key
(double-checked under a lock), so concurrent first uses share one result.
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable, Generic, TypeVar

__all__ = ["WeakMemo"]

K = TypeVar("K")
V = TypeVar("V")


class WeakMemo(Generic[K, V]):
    """``memo(key)``: the value derived from ``key`` by ``factory`` (built once, held weakly)."""

    def __init__(self, factory: Callable[[K], V]) -> None:
        self._factory = factory
        self._map: "weakref.WeakKeyDictionary[K, V]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, key: K) -> V:
        value = self._map.get(key)
        if value is None:
            with self._lock:
                value = self._map.get(key)
                if value is None:
                    value = self._map[key] = self._factory(key)
        return value
