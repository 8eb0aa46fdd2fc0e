/* The interning index of sparse token masks (see gd_native.h, "mask index"): a mask stored as
 * the ascending ids of its set bits (or, inverted, of its clear bits) is found again by its
 * hash plus a comparison of those ids.  Open addressing over the entries, keyed by the hash;
 * the ids of every entry in one arena. */
#include <stdlib.h>
#include <string.h>

#include "gd_native.h"

typedef struct {
    uint64_t hash;
    uint64_t off; /* first id in the arena */
    uint32_t count;
    int32_t mid;
    uint8_t inverted;
} entry;

struct gd_mask_index {
    entry *e;
    size_t n, cap;
    uint32_t *slot; /* entry index + 1, 0 = empty; n_slot a power of two, at most half full */
    size_t n_slot;
    int32_t *by_mid; /* entry index of a mid, -1 if that mid is not in the index */
    size_t n_mid;
    uint32_t *arena;
    size_t arena_n, arena_cap;
};

gd_mask_index *gd_mask_index_new(void) { return calloc(1, sizeof(gd_mask_index)); }

void gd_mask_index_free(gd_mask_index *ix) {
    if (!ix) return;
    free(ix->e);
    free(ix->slot);
    free(ix->by_mid);
    free(ix->arena);
    free(ix);
}

size_t gd_mask_index_bytes(const gd_mask_index *ix) { return ix->arena_n * sizeof(uint32_t); }

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void place(uint32_t *slot, size_t n_slot, uint64_t hash, uint32_t v) {
    size_t i = (size_t)hash & (n_slot - 1);
    while (slot[i]) i = (i + 1) & (n_slot - 1);
    slot[i] = v;
}

static int rehash(gd_mask_index *ix, size_t n_slot) {
    uint32_t *s = calloc(n_slot, sizeof *s);
    if (!s) return -1;
    for (size_t k = 0; k < ix->n; k++) place(s, n_slot, ix->e[k].hash, (uint32_t)k + 1u);
    free(ix->slot);
    ix->slot = s;
    ix->n_slot = n_slot;
    return 0;
}

int32_t gd_mask_index_intern(gd_mask_index *ix, uint64_t hash, const uint32_t *ids, size_t count, int inverted,
                             int32_t new_mid) {
    if (ix->n_slot) {
        for (size_t i = (size_t)hash & (ix->n_slot - 1); ix->slot[i]; i = (i + 1) & (ix->n_slot - 1)) {
            const entry *e = &ix->e[ix->slot[i] - 1u];
            if (e->hash == hash && e->count == count && e->inverted == (inverted != 0) &&
                memcmp(ix->arena + e->off, ids, count * sizeof *ids) == 0)
                return e->mid;
        }
    }
    if (new_mid < 0) return -1;
    if (ix->n + 1 > UINT32_MAX - 1) return -2;
    size_t n_mid = (size_t)new_mid + 1;
    if (grow((void **)&ix->e, &ix->cap, ix->n + 1, sizeof *ix->e) ||
        grow((void **)&ix->arena, &ix->arena_cap, ix->arena_n + count, sizeof *ix->arena))
        return -2;
    if (n_mid > ix->n_mid) {
        size_t c = ix->n_mid;
        if (grow((void **)&ix->by_mid, &c, n_mid, sizeof *ix->by_mid)) return -2;
        for (size_t k = ix->n_mid; k < c; k++) ix->by_mid[k] = -1;
        ix->n_mid = c;
    }
    if (2 * (ix->n + 1) > ix->n_slot && rehash(ix, ix->n_slot ? 2 * ix->n_slot : 64)) return -2;
    if (ix->by_mid[new_mid] >= 0) return -3; /* that mid names another mask */
    entry *e = &ix->e[ix->n];
    e->hash = hash;
    e->off = ix->arena_n;
    e->count = (uint32_t)count;
    e->mid = new_mid;
    e->inverted = inverted != 0;
    if (count) memcpy(ix->arena + ix->arena_n, ids, count * sizeof *ids);
    ix->arena_n += count;
    ix->by_mid[new_mid] = (int32_t)ix->n;
    place(ix->slot, ix->n_slot, hash, (uint32_t)ix->n + 1u);
    ix->n++;
    return new_mid;
}

int gd_mask_index_get(const gd_mask_index *ix, int32_t mid, const uint32_t **ids, size_t *count, int *inverted) {
    if (mid < 0 || (size_t)mid >= ix->n_mid || ix->by_mid[mid] < 0) return -1;
    const entry *e = &ix->e[ix->by_mid[mid]];
    *ids = ix->arena + e->off;
    *count = e->count;
    *inverted = e->inverted;
    return 0;
}

int gd_mask_index_expand(const gd_mask_index *ix, int32_t mid, uint32_t *mask, size_t n) {
    const uint32_t *ids;
    size_t count, nwords = (n + 31) / 32;
    int inverted;
    if (gd_mask_index_get(ix, mid, &ids, &count, &inverted)) return -1;
    if (!inverted) {
        gd_mask_from_ids(mask, nwords, ids, count);
        return 0;
    }
    memset(mask, 0xFF, nwords * sizeof *mask);
    if (n & 31) mask[nwords - 1] = (1u << (n & 31)) - 1u;
    for (size_t k = 0; k < count; k++)
        if (ids[k] < n) mask[ids[k] >> 5] &= ~(1u << (ids[k] & 31));
    return 0;
}
