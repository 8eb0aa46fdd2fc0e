"""Type stubs of the C extension (native/binding.c).

The kernel implementation used by ``mask_and``, ``mask_or`` and ``apply_mask`` is held in
the module's state (chosen at import: the best this CPU runs, or ``GD_NATIVE_IMPL``);
``set_impl`` changes it, ``impl`` reports it.  The C core itself holds no mutable state.
"""

from typing import Any

import numpy as np

def mask_and(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> None: ...
def mask_or(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> None: ...
def mask_count(mask: np.ndarray, n: int) -> int: ...
def apply_mask(logits: np.ndarray, mask: np.ndarray, fill: float = ...) -> None: ...
def trie_build(blob: bytes, offsets: np.ndarray) -> Any: ...
def trie_info(trie: Any) -> tuple[int, int]: ...
def trie_walk(trie: Any, classes: np.ndarray, table: np.ndarray, ncols: int, state: int,
              mask: np.ndarray, next_state: np.ndarray | None = ...) -> int: ...
def impl() -> str:
    """Name of the kernel implementation in use: scalar, sse2, avx2, avx512 or neon."""
def impl_supported(name: str) -> bool:
    """Whether ``name`` runs on this CPU."""
def set_impl(name: str) -> None:
    """Use ``name``; ValueError (choice unchanged) if it does not run on this CPU."""
