"""One table of distinct token masks, shared by every back-end.

A back-end computes a uint32 bitmask per state; :class:`MaskTable` stores each distinct
mask once and hands out small integer mask ids.

Invariants
- Interning is by a 64-bit hash (native ``mask_hash``) plus full equality: two ids never name equal masks (for masks
  added through :meth:`MaskTable.intern`), and a mask, once stored, is read-only and
  never changes, so ids and arrays may be shared between threads and requests.  Sparse masks
  (below) are found and stored by a native index (``_native.mask_index``: hash plus a
  comparison of their ids, the ids in one arena), dense ones by a dict of hashes.
- At most ``max_masks`` distinct masks are stored; one more raises
  :class:`~decoding.errors.LimitError` (a memory bound, not a correctness one).
- Storage is adaptive: a mask of at most :data:`SPARSE_MAX` allowed tokens (a property name,
  a closing run: most masks of a JSON schema) is kept as its sorted token ids, 4 bytes each,
  and one of at most :data:`SPARSE_MAX` *forbidden* tokens (a string body: every token but
  the few holding a quote or a control character) as the ids of those, instead of
  ``n_words`` words (16 KB at 128k tokens); ``table[mid]`` expands it, and the most recently
  read expansions of all tables are kept (one process-wide LRU of at most
  :data:`EXPANDED_CACHE` masks and :data:`EXPANDED_BYTES` bytes: 64 masks at 128k tokens,
  32 at 262k), so a generation cycling through its states reads them at the cost of a dense
  mask.
- :meth:`MaskTable.ids` is the sorted, read-only array of the set bits of mask ``mid``
  (computed once per mask).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from decoding import _native
from decoding.errors import LimitError

__all__ = ["MaskTable", "mask_ids", "DEFAULT_MAX_MASKS"]

DEFAULT_MAX_MASKS = 65_536
#: masks with at most this many allowed tokens are stored as their ids
SPARSE_MAX = 1024
#: expanded sparse masks kept, all tables together (least recently read dropped first), by
#: count and by bytes
EXPANDED_CACHE = 256
EXPANDED_BYTES = 1 << 20


def mask_ids(m: np.ndarray, n_tokens: int, count: int | None = None) -> np.ndarray:
    """Sorted ids (read-only, int64) of the bits set in the uint32 bitmask ``m`` below
    ``n_tokens`` (native: popcount unless ``count`` gives it, then one pass over the set bits)."""
    m = np.ascontiguousarray(m, dtype=np.uint32)
    n = min(int(n_tokens), len(m) * 32)
    ids = np.empty(_native.mask_count(m, n) if count is None else count, dtype=np.int64)
    _native.mask_to_ids(m, n, ids)
    ids.setflags(write=False)
    return ids


class _Expanded:
    """The process-wide LRU of expanded sparse masks, keyed by (table serial, mask id).  Reads
    take no lock: each OrderedDict call is atomic under the GIL (keys are tuples of ints), and a
    key evicted between the read and its move to the end is left evicted; puts hold the lock
    that keeps the byte count."""

    def __init__(self) -> None:
        self._lru: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int]) -> np.ndarray | None:
        hit = self._lru.get(key)
        if hit is not None:
            try:
                self._lru.move_to_end(key)
            except KeyError:  # evicted meanwhile by another thread's put
                pass
        return hit

    def put(self, key: tuple[int, int], m: np.ndarray) -> None:
        with self._lock:
            old = self._lru.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._lru[key] = m
            self._bytes += m.nbytes
            while len(self._lru) > 1 and (len(self._lru) > EXPANDED_CACHE or self._bytes > EXPANDED_BYTES):
                self._bytes -= self._lru.popitem(last=False)[1].nbytes


_EXPANDED = _Expanded()
_SERIAL = itertools.count()


class MaskTable:
    """Distinct masks of one compiled grammar, indexed by mask id.

    ``stored``: masks computed elsewhere (an artifact's lazily expanded sequence of
    read-only arrays); they are used as they are and are not indexed for interning.
    """

    __slots__ = ("n_tokens", "n_words", "max_masks", "where", "_masks", "_by_hash", "_ids", "_ix",
                 "_lock", "_serial", "_nbytes")

    def __init__(self, n_tokens: int, *, max_masks: int = DEFAULT_MAX_MASKS,
                 stored: Sequence[np.ndarray] | None = None, where: str = "token index") -> None:
        self.n_tokens = int(n_tokens)
        self.n_words = (self.n_tokens + 31) // 32
        self.max_masks = int(max_masks)
        self.where = where
        # a dense read-only uint32 mask, or (sparse) None with its ids in the native index ``_ix``
        self._masks: Any = stored if stored is not None else []
        self._by_hash: dict[int, list[int]] = {}  # (dense masks only)
        self._ids: dict[int, np.ndarray] = {}
        self._ix = _native.mask_index()  # sparse masks: the ids of their set bits, or (inverted) clear ones
        self._serial = next(_SERIAL)  # this table's part of the expansion LRU's keys
        self._nbytes = 0 if stored is None else len(stored) * self.n_words * 4
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._masks)

    def __getitem__(self, mid: int) -> np.ndarray:
        m = self._masks[mid]
        if m is not None:
            return m
        hit = _EXPANDED.get((self._serial, mid))
        if hit is None:
            hit = self._expand(mid)
            _EXPANDED.put((self._serial, mid), hit)
        return hit

    def _expand(self, mid: int) -> np.ndarray:
        m = np.empty(self.n_words, dtype=np.uint32)
        _native.mask_index_expand(self._ix, mid, m, self.n_tokens)
        m.setflags(write=False)
        return m

    def _invert(self, m: np.ndarray) -> None:
        """Flip the first ``n_tokens`` bits of ``m`` in place (the bits past them stay clear)."""
        np.invert(m, out=m)
        if self.n_tokens & 31:
            m[-1] &= np.uint32((1 << (self.n_tokens & 31)) - 1)

    @property
    def nbytes(self) -> int:
        """Bytes the distinct masks take as stored (dense: ``n_words`` words; sparse: 4 per
        allowed token)."""
        return self._nbytes

    def intern(self, m: np.ndarray) -> int:
        """The id of ``m`` (a uint32 array of ``n_words`` words, which the table may keep
        and make read-only: do not modify it afterwards).  One native call gives the hash, the
        count and, for a sparse mask, its ids (a second one the forbidden ids of a nearly full
        mask); sparse candidates are compared by their ids."""
        buf = np.empty(SPARSE_MAX, dtype=np.uint32)
        key, count = _native.mask_digest(m, self.n_tokens, buf)
        inverted = count > SPARSE_MAX and self.n_tokens - count <= SPARSE_MAX
        if inverted:  # the ids of the forbidden tokens instead
            inv = m.copy()
            self._invert(inv)
            _, count = _native.mask_digest(inv, self.n_tokens, buf)
        return self.intern_digest(m, key, count, inverted, buf)

    def intern_digest(self, m: np.ndarray, key: int, count: int, inverted: bool, buf: np.ndarray) -> int:
        """:meth:`intern` of ``m`` whose digest is given: ``key`` its ``mask_digest`` hash; with
        ``inverted`` False, ``count`` its set bits and, when at most :data:`SPARSE_MAX`, their
        ids in ``buf``; with ``inverted``, ``count`` (at most :data:`SPARSE_MAX`) clear bits and
        their ids in ``buf`` (``_native.state_mask`` gives all of these)."""
        with self._lock:
            if count <= SPARSE_MAX:
                new = len(self._masks)
                mid = _native.mask_index_intern(self._ix, key, buf, count, inverted,
                                                new if new < self.max_masks else -1)
                if mid < 0:
                    self._full()
                if mid == new:
                    self._add_sparse(mid, count)
                return mid
            return self._intern_dense(m, key)

    def intern_state(self, masker: Any, state: int, m: np.ndarray, buf: np.ndarray) -> int:
        """The id of the mask of ``state`` made by the native state masker ``masker``
        (``_native.state_masker``) into ``m`` (``n_words`` words; read-only afterwards, and kept
        by the table), ``buf`` a uint32 scratch of :data:`SPARSE_MAX` ids: one native call makes
        the mask, its digest and, for a sparse mask, finds or adds it in the index."""
        with self._lock:
            new = len(self._masks)
            mid, key, count, inverted = _native.state_mask_intern(masker, state, m, buf, self._ix,
                                                                  new if new < self.max_masks else -1)
            m.setflags(write=False)
            if count > SPARSE_MAX:
                return self._intern_dense(m, key)
            if mid < 0:
                self._full()
            if mid == new:
                self._add_sparse(mid, count)
            return mid

    def _full(self) -> None:
        raise LimitError(f"{self.where}: more than max_masks={self.max_masks} distinct token masks")

    def _add_sparse(self, mid: int, count: int) -> None:
        """Record sparse mask ``mid`` of ``count`` ids (just added to the index); the lock is held.
        Its dense form stays the caller's and is not put in the expansion LRU: that put cost more
        on first visits than the expansions it saved on the reads after them (Glaiveai2K walks)."""
        if not isinstance(self._masks, list):
            self._masks = list(self._masks)
        self._masks.append(None)
        self._nbytes += 4 * count

    def _intern_dense(self, m: np.ndarray, key: int) -> int:
        """The id of the dense mask ``m`` (hash ``key``); the lock is held."""
        for i in self._by_hash.get(key, ()):
            if _native.mask_equal(self._masks[i], m):
                return i
        if len(self._masks) >= self.max_masks:
            self._full()
        if not isinstance(self._masks, list):
            self._masks = list(self._masks)
        mid = len(self._masks)
        m.setflags(write=False)
        self._masks.append(m)
        self._nbytes += m.nbytes
        self._by_hash.setdefault(key, []).append(mid)
        return mid

    def ids(self, mid: int) -> np.ndarray:
        """Sorted, read-only ids (int64) of the tokens set in mask ``mid`` (cached)."""
        hit = self._ids.get(mid)
        if hit is None:
            m = self._masks[mid]
            if m is None:
                buf = np.empty(SPARSE_MAX, dtype=np.uint32)
                count, inverted = _native.mask_index_ids(self._ix, mid, buf)
                if inverted:
                    hit = mask_ids(self[mid], self.n_tokens)
                else:
                    hit = buf[:count].astype(np.int64)
                    hit.setflags(write=False)
            else:
                hit = mask_ids(m, self.n_tokens)
            self._ids[mid] = hit
        return hit
