"""MaskTable interning: equal masks share one id, different masks never do (also when
their hashes collide), the limit is a LimitError, stored masks are read-only."""

from __future__ import annotations

import numpy as np
import pytest

from decoding.backends import masks as masks_mod
from decoding.backends.masks import MaskTable, mask_ids
from decoding.errors import LimitError


def _mask(n_tokens: int, ids: list[int]) -> np.ndarray:
    bits = np.zeros((n_tokens + 31) // 32 * 32, dtype=bool)
    bits[np.asarray(list(ids), dtype=np.int64)] = True
    return np.packbits(bits, bitorder="little").view(np.uint32).copy()


@pytest.mark.parametrize("collide", [False, True])
def test_equal_masks_share_an_id_and_different_ones_never_do(collide, monkeypatch):
    if collide:  # every mask hashes alike: equality alone must tell them apart
        digest = masks_mod._native.mask_digest
        monkeypatch.setattr(masks_mod._native, "mask_digest", lambda m, n, ids: (7, digest(m, n, ids)[1]))
    n = 5000
    t = MaskTable(n)
    sets = [[], [0], [n - 1], [0, n - 1], [31, 32, 33], list(range(0, n, 5)),  # sparse (ids)
            list(range(0, n, 2)), list(range(1, n, 2)),  # dense
            list(range(n)), list(range(1, n)), list(range(n - 1)), list(range(0, n - 3))]  # forbidden ids
    ids = [t.intern(_mask(n, s)) for s in sets]
    assert len(set(ids)) == len(sets)
    assert [t.intern(_mask(n, s)) for s in sets] == ids
    for mid, s in zip(ids, sets):
        assert mask_ids(t[mid], n).tolist() == sorted(s)
        assert not t[mid].flags.writeable
    assert len(t) == len(sets)


def test_more_distinct_masks_than_the_limit_is_a_limit_error():
    t = MaskTable(64, max_masks=3)
    for i in range(3):
        t.intern(_mask(64, [i]))
    t.intern(_mask(64, [0]))  # already there: no new mask
    with pytest.raises(LimitError, match="max_masks=3"):
        t.intern(_mask(64, [5]))


def test_sparse_and_dense_storage_read_back_the_same_masks():
    """Masks of at most SPARSE_MAX tokens are kept as ids, those of at most SPARSE_MAX
    forbidden tokens as the forbidden ids, the others dense; reading any of
    them (also after the expansion cache has turned over) gives the mask that was interned."""
    n = 5000
    rng = np.random.default_rng(0)
    sets = [sorted(rng.choice(n, k, replace=False).tolist()) for k in
            [0, 1, 3, masks_mod.SPARSE_MAX, masks_mod.SPARSE_MAX + 1, 2500, n - masks_mod.SPARSE_MAX - 1,
             n - masks_mod.SPARSE_MAX, 4000, n - 1, n]]
    sets += [[i, i + 1] for i in range(0, 3 * masks_mod.EXPANDED_CACHE, 2)]
    t = MaskTable(n)
    ids = [t.intern(_mask(n, s)) for s in sets]
    assert len(set(ids)) == len(sets)
    for _ in range(2):
        for mid, s in zip(ids, sets):
            assert np.array_equal(t[mid], _mask(n, s))
            assert t.ids(mid).tolist() == s and t.ids(mid).dtype == np.int64
            assert not t[mid].flags.writeable
    sm = masks_mod.SPARSE_MAX
    dense = sum(1 for s in sets if sm < len(s) < n - sm)
    sparse_ids = sum(len(s) for s in sets if len(s) <= sm) + sum(n - len(s) for s in sets if len(s) >= n - sm)
    assert t.nbytes == dense * t.n_words * 4 + sparse_ids * 4  # uint32 ids (the int64 ones are a read cache)
    assert [t.intern(_mask(n, s)) for s in sets] == ids  # equal masks found again, sparse or dense


def test_the_expansion_cache_is_bounded_in_bytes():
    """Reading many sparse masks of a large vocabulary keeps at most EXPANDED_BYTES of
    expansions (at 262k tokens a mask is 32 KB: 32 of them), and reads stay exact."""
    n = 262_144
    t = MaskTable(n)
    sets = [[i, n - 1 - i] for i in range(100)] + [list(range(n - i)) for i in range(1, 40)]
    ids = [t.intern(_mask(n, s)) for s in sets]
    for mid, s in zip(ids, sets):
        assert np.array_equal(t[mid], _mask(n, s))
        assert masks_mod._EXPANDED._bytes <= masks_mod.EXPANDED_BYTES
    assert t.nbytes == 4 * sum(min(len(s), n - len(s)) for s in sets)
