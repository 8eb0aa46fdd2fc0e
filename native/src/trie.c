/* Vocabulary trie in pre-order layout, walked against a byte DFA.
 *
 * Nodes are stored in pre-order.  Node i has a byte, a depth (1 = child of the root), the
 * index `skip` of the first node after its subtree, and the range [tok[i], tok[i+1]) of
 * token ids that end exactly at it (tokens are stored in sorted order of their bytes, which
 * is also pre-order).  A walk keeps one automaton state per depth and jumps over the whole
 * subtree of a node as soon as the automaton has no transition for its byte.
 */
#include "gd_native.h"

#include <stdlib.h>
#include <string.h>

struct gd_trie {
    uint32_t n_nodes;
    uint32_t max_depth;
    uint8_t *byte;    /* [n_nodes] */
    uint16_t *depth;  /* [n_nodes] */
    uint32_t *skip;   /* [n_nodes] */
    uint32_t *tok;    /* [n_nodes + 1] start index into ids */
    uint32_t *ids;    /* [n_with_bytes] token ids in pre-order */
    uint32_t n_ids;
    uint32_t root[256]; /* the child of the root with byte b, or GD_NO_NODE */
};

#define GD_NO_NODE UINT32_MAX

/* Order of token ids by their bytes (ties: by id).  The comparison context is passed
 * explicitly, so building is re-entrant (no process-global state). */
typedef struct {
    const uint8_t *blob;
    const uint64_t *off;
} token_order;

static int cmp_tokens(const token_order *ctx, uint32_t a, uint32_t b) {
    uint64_t la = ctx->off[a + 1] - ctx->off[a], lb = ctx->off[b + 1] - ctx->off[b];
    uint64_t m = la < lb ? la : lb;
    int c = memcmp(ctx->blob + ctx->off[a], ctx->blob + ctx->off[b], (size_t)m);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return a < b ? -1 : (a > b);
}

/* Stable bottom-up merge sort of ids[0..n) using tmp[0..n) as scratch. */
static void sort_tokens(const token_order *ctx, uint32_t *ids, uint32_t *tmp, uint32_t n) {
    uint32_t *src = ids, *dst = tmp;
    for (uint64_t width = 1; width < n; width *= 2) {
        for (uint64_t lo = 0; lo < n; lo += 2 * width) {
            uint64_t mid = lo + width < n ? lo + width : n;
            uint64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = cmp_tokens(ctx, src[i], src[j]) <= 0 ? src[i++] : src[j++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        uint32_t *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != ids) memcpy(ids, src, sizeof(uint32_t) * n);
}

void gd_trie_free(gd_trie *t) {
    if (!t) return;
    free(t->byte);
    free(t->depth);
    free(t->skip);
    free(t->tok);
    free(t->ids);
    free(t);
}

gd_trie *gd_trie_build(const uint8_t *blob, const uint64_t *offsets, uint32_t n_tokens) {
    gd_trie *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    uint32_t *order = malloc(sizeof(uint32_t) * (n_tokens ? n_tokens : 1));
    uint64_t total = 0, maxlen = 0;
    uint32_t n = 0;
    if (!order) goto fail;
    for (uint32_t i = 0; i < n_tokens; i++) {
        uint64_t len = offsets[i + 1] - offsets[i];
        if (len == 0) continue;
        if (len > 65535) continue; /* cannot be represented in depth; such tokens never occur */
        order[n++] = i;
        total += len;
        if (len > maxlen) maxlen = len;
    }
    {
        token_order ctx = {blob, offsets};
        uint32_t *scratch = malloc(sizeof(uint32_t) * (n ? n : 1));
        if (!scratch) goto fail;
        sort_tokens(&ctx, order, scratch, n);
        free(scratch);
    }
    t->byte = malloc(total ? total : 1);
    t->depth = malloc(sizeof(uint16_t) * (total ? total : 1));
    t->skip = malloc(sizeof(uint32_t) * (total ? total : 1));
    t->tok = calloc(total + 2, sizeof(uint32_t));
    t->ids = malloc(sizeof(uint32_t) * (n ? n : 1));
    uint32_t *path = malloc(sizeof(uint32_t) * (maxlen + 1)); /* node index at each depth */
    uint32_t *endnode = malloc(sizeof(uint32_t) * (n ? n : 1));
    if (!t->byte || !t->depth || !t->skip || !t->tok || !t->ids || !path || !endnode) {
        free(path);
        free(endnode);
        goto fail;
    }

    uint32_t nodes = 0, plen = 0; /* current path length */
    const uint8_t *prev = NULL;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = order[k];
        const uint8_t *s = blob + offsets[id];
        uint32_t len = (uint32_t)(offsets[id + 1] - offsets[id]);
        uint32_t lcp = 0;
        if (prev) while (lcp < plen && lcp < len && prev[lcp] == s[lcp]) lcp++;
        /* close nodes deeper than lcp */
        while (plen > lcp) { t->skip[path[plen - 1]] = nodes; plen--; }
        for (uint32_t d = lcp; d < len; d++) {
            t->byte[nodes] = s[d];
            t->depth[nodes] = (uint16_t)(d + 1);
            path[d] = nodes++;
            plen = d + 1;
        }
        /* token k ends at node path[len-1]; tokens are appended in pre-order */
        t->ids[k] = id;
        endnode[k] = path[len - 1];
        prev = s;
    }
    while (plen > 0) { t->skip[path[plen - 1]] = nodes; plen--; }
    free(path);
    /* token ranges: end nodes are non-decreasing in sorted (= pre-order) token order */
    {
        uint32_t *cnt = calloc((size_t)nodes + 1, sizeof(uint32_t));
        if (!cnt) { free(endnode); goto fail; }
        for (uint32_t k = 0; k < n; k++) cnt[endnode[k]]++;
        uint32_t acc = 0;
        for (uint32_t i = 0; i < nodes; i++) { t->tok[i] = acc; acc += cnt[i]; }
        t->tok[nodes] = acc;
        free(cnt);
        free(endnode);
    }
    t->n_nodes = nodes;
    t->n_ids = n;
    for (int b = 0; b < 256; b++) t->root[b] = GD_NO_NODE;
    for (uint32_t i = 0; i < nodes; i = t->skip[i]) t->root[t->byte[i]] = i; /* the root's children */
    t->max_depth = (uint32_t)maxlen;
    free(order);
    return t;
fail:
    free(order);
    gd_trie_free(t);
    return NULL;
}

size_t gd_trie_nodes(const gd_trie *t) { return t->n_nodes; }

size_t gd_trie_bytes(const gd_trie *t) {
    return sizeof *t + (size_t)t->n_nodes * (1 + 2 + 4 + 4) + 4 + (size_t)t->n_ids * 4; /* (root: in *t) */
}

/* okset[i] bit p: every token of node i's subtree continues after node i with complete plain
 * characters when read by the character automaton from character state p (a token ending at
 * i: only for p = 0).  Bottom-up over the pre-order (children before parents). */
int gd_trie_plain_flags(const gd_trie *t, const int16_t *char_dfa, size_t n_char_states, uint8_t *out) {
    if (n_char_states == 0 || n_char_states > 8) return -1;
    for (uint32_t i = t->n_nodes; i-- > 0;) {
        uint8_t ok = (uint8_t)((1u << n_char_states) - 1u);
        if (t->tok[i + 1] > t->tok[i]) ok &= 1u; /* a token ends here: only between characters */
        for (uint32_t c = i + 1; c < t->skip[i] && ok; c = t->skip[c]) {
            uint8_t keep = 0;
            for (size_t p = 0; p < n_char_states; p++) {
                int q = char_dfa[p * 256 + t->byte[c]];
                if (((ok >> p) & 1u) && q >= 0 && ((out[c] >> q) & 1u)) keep |= (uint8_t)(1u << p);
            }
            ok = keep;
        }
        out[i] = ok;
    }
    return 0;
}

/* The walk, for int32 and int16 transition tables (same code, two element types).  A subtree
 * whose tokens are all allowed is added in one go: ids[tok[i] .. tok[skip[i]]) (tok has
 * n_nodes + 1 entries). */
#define GD_ADD_SUBTREE(i, s)                                                                       \
    do {                                                                                           \
        uint32_t end_ = tok[skip[i]];                                                              \
        for (uint32_t k = tok[i]; k < end_; k++) {                                                 \
            uint32_t id = ids[k];                                                                  \
            if ((size_t)(id >> 5) < nwords) {                                                      \
                mask[id >> 5] |= 1u << (id & 31);                                                  \
                if (next_state) next_state[id] = (s);                                              \
                allowed++;                                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* TP: the automaton parameters; AT(x, c): the state after class c from state x (-1: none,
 * below -1: could not be made, the walk stops and returns SIZE_MAX); PSTEP(s): the plain
 * step of the loop memo (see gd_plain_step); PLAIN_ON(o): the plain-loop bulk is on; MGET(s) /
 * MSET(s, v): read / write the loop memo of state s. */
#define GD_DEFINE_WALK(NAME, TP, AT, PSTEP, PLAIN_ON, MGET, MSET, INIT)                             \
    size_t NAME(const gd_trie *t, const uint8_t *classes, TP, int32_t state, uint32_t *mask,       \
                size_t nwords, int32_t *next_state, const gd_walk_opts *o) {                       \
        INIT                                                                                       \
        memset(mask, 0, nwords * sizeof(uint32_t));                                                \
        int32_t stack_small[256];                                                                  \
        int32_t *stack = t->max_depth < 255 ? stack_small                                          \
                                            : malloc(sizeof(int32_t) * (t->max_depth + 1));         \
        if (!stack) return 0;                                                                      \
        stack[0] = state;                                                                          \
        size_t allowed = 0;                                                                        \
        const int32_t sink = o ? o->sink : -1;                                                     \
        const uint8_t *plain = PLAIN_ON(o) ? o->node_plain : NULL;                                 \
        const uint8_t *byte = t->byte;                                                             \
        const uint16_t *depth = t->depth;                                                          \
        const uint32_t *skip = t->skip, *tok = t->tok, *ids = t->ids;                              \
        /* the root's children from their own table: one whose byte is dead from `state` is    \
         * skipped without reading the node arrays (scattered over the whole trie) */           \
        for (uint32_t b = 0; b < 256 && allowed != SIZE_MAX; b++) {                                \
          uint32_t i = t->root[b], n;                                                              \
          if (i == GD_NO_NODE || (int32_t)(AT(state, classes[b])) == -1) continue;                 \
          n = skip[i];                                                                             \
          while (i < n) {                                                                          \
            uint32_t d = depth[i];                                                                 \
            int32_t s = (int32_t)(AT(stack[d - 1], classes[byte[i]]));                             \
            if (s < 0) {                                                                           \
                if (s < -1) { allowed = SIZE_MAX; break; }                                         \
                i = skip[i];                                                                       \
                continue;                                                                          \
            }                                                                                      \
            if (s == sink) { GD_ADD_SUBTREE(i, s); i = skip[i]; continue; }                        \
            if (plain && (plain[i] & 1u) && skip[i] > i + 1) {                                     \
                uint8_t m = MGET(s);                                                               \
                if (!m) {                                                                          \
                    m = PSTEP(s) == s ? 1 : 2;                                                     \
                    MSET(s, m);                                                                    \
                }                                                                                  \
                if (m == 1) { GD_ADD_SUBTREE(i, s); i = skip[i]; continue; }                       \
            }                                                                                      \
            stack[d] = s;                                                                          \
            for (uint32_t k = tok[i]; k < tok[i + 1]; k++) {                                       \
                uint32_t id = ids[k];                                                              \
                if ((size_t)(id >> 5) < nwords) {                                                  \
                    mask[id >> 5] |= 1u << (id & 31);                                              \
                    if (next_state) next_state[id] = s;                                            \
                    allowed++;                                                                     \
                }                                                                                  \
            }                                                                                      \
            i++;                                                                                   \
          }                                                                                        \
        }                                                                                          \
        if (stack != stack_small) free(stack);                                                     \
        return allowed;                                                                            \
    }

#define GD_TP32 const int32_t *table, size_t ncols
#define GD_TP16 const int16_t *table, size_t ncols
#define GD_TABLE_AT(x, c) table[(size_t)(x) * ncols + (c)]
#define GD_STEP32(s) gd_plain_step(o->row_off, o->pair_cls, o->pair_next, table, ncols, (s))
#define GD_STEP16(s) gd_plain_step16(o->row_off, o->pair_cls, o->pair_next, table, ncols, (s))
#define GD_PLAIN_ON(o) ((o) && (o)->loop_memo)
#define GD_MGET(s) o->loop_memo[s]
#define GD_MSET(s, v) o->loop_memo[s] = (v)
GD_DEFINE_WALK(gd_trie_walk_ex, GD_TP32, GD_TABLE_AT, GD_STEP32, GD_PLAIN_ON, GD_MGET, GD_MSET, )
GD_DEFINE_WALK(gd_trie_walk_ex16, GD_TP16, GD_TABLE_AT, GD_STEP16, GD_PLAIN_ON, GD_MGET, GD_MSET, )
/* over a lazy automaton: rows are made as the walk reads them.  A made row is read inline
 * (rows: gd_lazy_rows); only a row not made yet goes through gd_lazy_step, after which (as
 * after the plain step, which may make rows) the rows are read again. */
static inline int32_t lazy_at(gd_lazy *L, gd_lazy_rows *r, int32_t s, int32_t c) {
    if (s >= 0 && (size_t)s < r->n_done && r->done[s]) return r->trans[(size_t)s * r->nsym + (size_t)c];
    int32_t t = gd_lazy_step(L, s, c);
    gd_lazy_rows_get(L, r);
    return t;
}

static inline int32_t lazy_pstep(gd_lazy *L, gd_lazy_rows *r, const gd_walk_opts *o, int32_t s) {
    int32_t t = gd_plain_step_lazy(o->row_off, o->pair_cls, o->pair_next, L, s);
    gd_lazy_rows_get(L, r);
    return t;
}

#define GD_TPL gd_lazy *L
#define GD_LAZY_AT(x, c) lazy_at(L, &rows_, (x), (c))
#define GD_STEPL(s) lazy_pstep(L, &rows_, o, (s))
#define GD_LAZY_INIT gd_lazy_rows rows_; gd_lazy_rows_get(L, &rows_);
/* the loop memo lives in the automaton (slot o->memo_slot: one per plain-text profile) */
#define GD_PLAIN_ON_L(o) ((o) && (o)->node_plain && (o)->memo_slot >= 0)
#define GD_MGET_L(s) gd_lazy_memo_get(L, o->memo_slot, (s))
#define GD_MSET_L(s, v) gd_lazy_memo_set(L, o->memo_slot, (s), (v))
GD_DEFINE_WALK(gd_trie_walk_lazy, GD_TPL, GD_LAZY_AT, GD_STEPL, GD_PLAIN_ON_L, GD_MGET_L, GD_MSET_L, GD_LAZY_INIT)

size_t gd_trie_walk(const gd_trie *t, const uint8_t *classes, const int32_t *table, size_t ncols, int32_t state,
                    uint32_t *mask, size_t nwords, int32_t *next_state) {
    return gd_trie_walk_ex(t, classes, table, ncols, state, mask, nwords, next_state, NULL);
}

size_t gd_trie_walk16(const gd_trie *t, const uint8_t *classes, const int16_t *table, size_t ncols, int32_t state,
                      uint32_t *mask, size_t nwords, int32_t *next_state) {
    return gd_trie_walk_ex16(t, classes, table, ncols, state, mask, nwords, next_state, NULL);
}
