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
def nfa_determinize(eps_off: np.ndarray, eps_tgt: np.ndarray, mv_off: np.ndarray, mv: np.ndarray,
                    start: int, end: int, nsym: int, max_states: int, budget_s: float) -> tuple[bytes, bytes]:
    """Subset construction of an NFA in CSR int32 arrays (``mv``: (symbol, target) pairs);
    returns (int32 table bytes, uint8 accepting bytes), states in BFS order, symbols in
    increasing order.  OverflowError past ``max_states`` states, TimeoutError once
    ``budget_s`` seconds are spent (inf or nan: no budget), ValueError for arrays out of
    range, MemoryError.  Releases the GIL."""
def dfa_minimize(table: np.ndarray, nsym: int, accepting: np.ndarray, block: np.ndarray,
                 budget_s: float) -> int:
    """Minimisation of a flat int32 table (-1: no transition) with uint8 ``accepting``:
    writes each state's block into ``block`` (int32, blocks numbered by first state) and
    returns the number of blocks.  TimeoutError once ``budget_s`` is spent.  Releases the GIL."""
def impl() -> str:
    """Name of the kernel implementation in use: scalar, sse2, avx2, avx512 or neon."""
def impl_supported(name: str) -> bool:
    """Whether ``name`` runs on this CPU."""
def set_impl(name: str) -> None:
    """Use ``name``; ValueError (choice unchanged) if it does not run on this CPU."""
