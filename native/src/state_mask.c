/* A DFA state's whole token mask in one call (see gd_native.h, "state masks"): the choice
 * between a plain-text chain and a full trie walk, the walk, the plain tokens, the special and
 * end-of-generation bits.  The same steps as decoding/backends/textloop.py `walk_tokens` plus
 * decoding/backends/dfa/index.py `DFAGrammar._compute`, which stay the reference. */
#include <stdlib.h>
#include <string.h>

#include "gd_native.h"

static int32_t cell(const gd_state_masker *sm, int32_t s, size_t c) {
    size_t i = (size_t)s * sm->ncols + c;
    return sm->table16 ? (int32_t)((const int16_t *)sm->table)[i] : ((const int32_t *)sm->table)[i];
}

static size_t walk(const gd_state_masker *sm, const gd_trie *t, int32_t state, uint32_t *mask,
                   const gd_walk_opts *o) {
    if (sm->table16)
        return gd_trie_walk_ex16(t, sm->classes, sm->table, sm->ncols, state, mask, sm->nwords, NULL, o);
    return gd_trie_walk_ex(t, sm->classes, sm->table, sm->ncols, state, mask, sm->nwords, NULL, o);
}

/* profile p's pairs for the byte classes bc into l, made on first use: 0, or -2 when out of memory */
static int make_pairs(const gd_masker_profile *p, const uint16_t *bc, gd_masker_loop *l) {
    if (l->row_off) return 0;
    int32_t *ro = malloc((p->n_char + 1) * sizeof *ro);
    uint8_t *cls = malloc(p->n_char * 256);
    int16_t *nx = malloc(p->n_char * 256 * sizeof *nx);
    int32_t n = (ro && cls && nx) ? gd_char_pairs(p->char_dfa, p->n_char, bc, ro, cls, nx) : -1;
    if (n < 0) {
        free(ro);
        free(cls);
        free(nx);
        return -2;
    }
    l->row_off = ro;
    l->pair_cls = cls;
    l->pair_next = nx;
    return 0;
}

/* the profile's pairs for this table (see make_pairs) */
static int pairs(const gd_state_masker *sm, const gd_masker_profile *p, gd_masker_loop *l) {
    if (l->row_off) return 0;
    uint16_t bc[256];
    for (int b = 0; b < 256; b++) bc[b] = sm->classes[b];
    return make_pairs(p, bc, l);
}

/* free the pairs of loop[0..n) */
static void release_loops(gd_masker_loop *loop, int32_t n) {
    for (int32_t p = 0; p < n && p < GD_MASKER_PROFILES; p++) {
        gd_masker_loop *l = &loop[p];
        free(l->row_off);
        free(l->pair_cls);
        free(l->pair_next);
        l->row_off = NULL;
        l->pair_cls = NULL;
        l->pair_next = NULL;
    }
}

void gd_state_masker_release(gd_state_masker *sm) { release_loops(sm->loop, sm->n_profiles); }

static void bulk_opts(const gd_masker_loop *l, const uint8_t *node_plain, gd_walk_opts *o) {
    o->node_plain = node_plain;
    o->row_off = l->row_off;
    o->pair_cls = l->pair_cls;
    o->pair_next = l->pair_next;
    o->loop_memo = l->loop_memo;
}

/* mask |= the plain tokens of at most k characters (k >= max_chars: all of them) */
static void or_plain(const gd_kernels *kern, const gd_masker_profile *p, int64_t k, uint32_t *mask,
                     size_t nwords) {
    if (k <= 0) return;
    if (k >= (int64_t)p->max_chars) {
        gd_mask_or(kern, mask, mask, p->plain_mask, nwords);
        return;
    }
    if (k < GD_MASKER_UPTO && p->upto[k]) {
        gd_mask_or(kern, mask, mask, p->upto[k], nwords);
        return;
    }
    gd_mask_or(kern, mask, mask, p->plain_mask, nwords);
    size_t lo = 0, hi = p->n_plain; /* the first plain token (by characters) of more than k */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((int64_t)p->by_chars_n[mid] <= k) lo = mid + 1;
        else hi = mid;
    }
    for (size_t j = lo; j < p->n_plain; j++) {
        uint32_t id = p->by_chars_ids[j];
        if ((size_t)(id >> 5) < nwords) mask[id >> 5] &= ~(1u << (id & 31));
    }
}

int gd_state_mask(const gd_kernels *kern, gd_state_masker *sm, int32_t state, uint32_t *mask) {
    if (state < 0 || (size_t)state >= sm->n_states) return -1;
    gd_walk_opts o = {sm->sink, NULL, NULL, NULL, NULL, NULL, -1};
    int done = 0;
    int32_t a = cell(sm, state, sm->classes['a']);
    for (int32_t p = 0; a >= 0 && p < sm->n_profiles && !done; p++) {
        const gd_masker_profile *pr = &sm->prof[p];
        gd_masker_loop *l = &sm->loop[p];
        size_t i = 0;
        while (i < pr->n_probes && cell(sm, state, sm->classes[pr->probes[i]]) == a) i++;
        if (i < pr->n_probes) continue; /* not a uniform first step */
        if (pairs(sm, pr, l)) return -2;
        uint32_t max_len = pr->max_chars ? pr->max_chars : 1;
        int64_t k = sm->table16 ? gd_plain_chain16(l->row_off, l->pair_cls, l->pair_next, sm->table, sm->ncols,
                                                   sm->n_states, state, max_len)
                                : gd_plain_chain(l->row_off, l->pair_cls, l->pair_next, sm->table, sm->ncols,
                                                 sm->n_states, state, max_len);
        if (k == GD_PLAIN_NOMEM) return -2;
        if (k < 0 && k != GD_PLAIN_UNBOUNDED) continue;
        int self_loop = 0;
        if (k == GD_PLAIN_UNBOUNDED) {
            sm->bulk = p;
            k = INT64_MAX;
            /* every plain character leads back here: a token is allowed iff its rest is */
            self_loop = pr->rest_trie &&
                        (sm->table16 ? gd_plain_step16(l->row_off, l->pair_cls, l->pair_next, sm->table, sm->ncols, state)
                                     : gd_plain_step(l->row_off, l->pair_cls, l->pair_next, sm->table, sm->ncols, state)) ==
                            state;
        }
        if (self_loop) {
            gd_walk_opts r = {sm->sink, NULL, NULL, NULL, NULL, NULL, -1};
            walk(sm, pr->rest_trie, state, mask, &r);
        } else {
            if (sm->bulk == p) bulk_opts(l, pr->other_node_plain, &o);
            walk(sm, pr->other_trie, state, mask, &o);
        }
        or_plain(kern, pr, k, mask, sm->nwords);
        done = 1;
    }
    if (!done) {
        if (sm->n_profiles > 0) {
            if (pairs(sm, &sm->prof[sm->bulk], &sm->loop[sm->bulk])) return -2;
            bulk_opts(&sm->loop[sm->bulk], sm->prof[sm->bulk].node_plain, &o);
        }
        walk(sm, sm->trie, state, mask, &o);
    }
    for (size_t k = 0; k < sm->n_special; k++) {
        uint32_t id = sm->special_ids[k];
        if ((size_t)(id >> 5) >= sm->nwords) continue;
        mask[id >> 5] &= ~(1u << (id & 31));
        if (cell(sm, state, sm->n_classes + k) >= 0) mask[id >> 5] |= 1u << (id & 31);
    }
    if (sm->eog_mask && sm->accepting[state]) gd_mask_or(kern, mask, mask, sm->eog_mask, sm->nwords);
    return 0;
}

/* the pairs of profile p for the lazy automaton's byte classes (see make_pairs) */
static int lazy_pairs(gd_lazy_masker *lm, int32_t p) {
    return make_pairs(&lm->prof[p], gd_lazy_byte_class(lm->L), &lm->loop[p]);
}

void gd_lazy_masker_release(gd_lazy_masker *lm) { release_loops(lm->loop, lm->n_profiles); }

static void lazy_bulk_opts(const gd_lazy_masker *lm, int32_t p, const uint8_t *node_plain, gd_walk_opts *o) {
    o->node_plain = node_plain;
    o->row_off = lm->loop[p].row_off;
    o->pair_cls = lm->loop[p].pair_cls;
    o->pair_next = lm->loop[p].pair_next;
    o->memo_slot = p;
}

int gd_lazy_state_mask(const gd_kernels *kern, gd_lazy_masker *lm, int32_t state, uint32_t *mask) {
    gd_lazy *L = lm->L;
    if (state < 0 || (size_t)state >= gd_lazy_n_states(L)) return -1;
    const int32_t *row = gd_lazy_row(L, state);
    if (!row) return -3;
    int32_t a = row[lm->classes['a']];
    gd_walk_opts o = {-1, NULL, NULL, NULL, NULL, NULL, -1};
    int done = 0;
    for (int32_t p = 0; a >= 0 && p < lm->n_profiles && !done; p++) {
        const gd_masker_profile *pr = &lm->prof[p];
        row = gd_lazy_row(L, state); /* (valid until the next call on L) */
        if (!row) return -3;
        size_t i = 0;
        while (i < pr->n_probes && row[lm->classes[pr->probes[i]]] == a) i++;
        if (i < pr->n_probes) continue; /* not a uniform first step */
        if (lazy_pairs(lm, p)) return -2;
        const gd_masker_loop *l = &lm->loop[p];
        int64_t k = gd_plain_chain_lazy(l->row_off, l->pair_cls, l->pair_next, L, state,
                                        pr->max_chars ? pr->max_chars : 1);
        if (k == GD_PLAIN_NOMEM) return -2;
        if (k < 0 && k != GD_PLAIN_UNBOUNDED) continue;
        int self_loop = 0;
        if (k == GD_PLAIN_UNBOUNDED) {
            lm->bulk = p;
            k = INT64_MAX;
            /* every plain character leads back here: a token is allowed iff its rest is */
            if (pr->rest_trie) {
                /* (a row that cannot be made reads as mixed: no self-loop, the walk below fails) */
                self_loop = gd_plain_step_lazy(l->row_off, l->pair_cls, l->pair_next, L, state) == state;
            }
        }
        if (self_loop) {
            gd_walk_opts r = {-1, NULL, NULL, NULL, NULL, NULL, -1};
            if (gd_trie_walk_lazy(pr->rest_trie, lm->classes, L, state, mask, lm->nwords, NULL, &r) == SIZE_MAX)
                return -3;
        } else {
            if (lm->bulk == p) lazy_bulk_opts(lm, p, pr->other_node_plain, &o);
            if (gd_trie_walk_lazy(pr->other_trie, lm->classes, L, state, mask, lm->nwords, NULL, &o) == SIZE_MAX)
                return -3;
        }
        or_plain(kern, pr, k, mask, lm->nwords);
        done = 1;
    }
    if (!done) {
        if (lm->n_profiles > 0) {
            if (lazy_pairs(lm, lm->bulk)) return -2;
            lazy_bulk_opts(lm, lm->bulk, lm->prof[lm->bulk].node_plain, &o);
        }
        if (gd_trie_walk_lazy(lm->trie, lm->classes, L, state, mask, lm->nwords, NULL, &o) == SIZE_MAX) return -3;
    }
    for (size_t k = 0; k < lm->n_special; k++) {
        uint32_t id = lm->special_ids[k];
        if ((size_t)(id >> 5) >= lm->nwords) continue;
        mask[id >> 5] &= ~(1u << (id & 31));
        int32_t t = gd_lazy_step(L, state, (int32_t)(lm->n_classes + k));
        if (t == GD_LAZY_FAIL) return -3;
        if (t >= 0) mask[id >> 5] |= 1u << (id & 31);
    }
    if (lm->eog_mask && gd_lazy_accepting(L, state)) gd_mask_or(kern, mask, mask, lm->eog_mask, lm->nwords);
    return 0;
}

int32_t gd_state_run(const gd_state_masker *sm, int32_t state, const uint8_t *data, size_t n) {
    if (state < 0 || (size_t)state >= sm->n_states) return -1;
    for (size_t i = 0; i < n && state >= 0; i++) state = cell(sm, state, sm->classes[data[i]]);
    return state;
}

size_t gd_mask_clear_ids(const uint32_t *mask, size_t n, uint32_t *ids, size_t cap) {
    size_t nwords = (n + 31) / 32, count = 0;
    for (size_t w = 0; w < nwords; w++) {
        uint32_t x = ~mask[w];
        if (w == nwords - 1 && (n & 31)) x &= (1u << (n & 31)) - 1u;
        for (; x; x &= x - 1) {
            if (count == cap) return cap + 1;
            ids[count++] = (uint32_t)(w * 32 + (size_t)__builtin_ctz(x));
        }
    }
    return count;
}
