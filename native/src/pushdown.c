/* Pushdown configurations natively (see gd_native.h, "pushdown"): the exact check of the
 * tokens that may enter a call or return, the top frames' mask walks and the liveness of the
 * saturated sets.  decoding/backends/pushdown/index.py (CompiledPushdown._step / _closure,
 * _tables, _Tables.live) stays the reference and checks what this leaves undecided.
 *
 * A configuration is a set of stacks; a stack is its length then (rule, state) per frame,
 * bottom first.  The recursion counts of a frame are the rules of the frames above the
 * bottom one up to it, so they are not stored: a rule is saturated at a frame when it is
 * counted max_depth times there, and the frame's state must then be live for that set of
 * saturated rules (gd_pd_live, made once per set).  A closure that grows past PD_MAX_STACKS
 * stacks or PD_MAX_FRAMES frames is partial: the configurations after it are subsets of the
 * exact ones.  A token that a subset consumes is allowed (a set's stacks are stepped
 * independently, so one stack that consumes it is a witness); one that dies after a partial
 * closure is undecided, left to the caller. */
#include <stdlib.h>
#include <string.h>

#include "gd_native.h"

/* stacks in one configuration (past it: undecided; the reference bounds this at 4096 and
 * raises LimitError past that) and frames in one stack */
#define PD_MAX_STACKS 1024
#define PD_MAX_FRAMES 4096

typedef struct {
    int32_t *v;    /* stacks: len, then (rule, state) pairs */
    size_t n, cap; /* int32 items used / allocated */
    size_t *at;    /* offset of each stack in v */
    uint64_t *h;   /* hash of each stack */
    int32_t ns, scap;
} pd_cfg;

static void cfg_free(pd_cfg *c) {
    free(c->v);
    free(c->at);
    free(c->h);
    memset(c, 0, sizeof *c);
}

static uint64_t stack_hash(const int32_t *st) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i <= 2 * st[0]; i++) {
        h ^= (uint32_t)st[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* room for one more stack of `frames` frames: 0, or -2 when out of memory */
static int cfg_reserve(pd_cfg *c, int32_t frames) {
    size_t need = c->n + 1 + 2 * (size_t)frames;
    if (need > c->cap) {
        size_t cap = c->cap ? c->cap : 64;
        while (cap < need) cap *= 2;
        int32_t *v = realloc(c->v, cap * sizeof *v);
        if (!v) return -2;
        c->v = v;
        c->cap = cap;
    }
    if (c->ns == c->scap) {
        int32_t scap = c->scap ? 2 * c->scap : 8;
        size_t *at = realloc(c->at, (size_t)scap * sizeof *at);
        if (!at) return -2;
        c->at = at;
        uint64_t *h = realloc(c->h, (size_t)scap * sizeof *h);
        if (!h) return -2;
        c->h = h;
        c->scap = scap;
    }
    return 0;
}

/* the stack being built at the end of v (not yet counted in ns): keep it unless an equal
 * one is there already.  1 added, 0 a duplicate. */
static int cfg_commit(pd_cfg *c) {
    const int32_t *st = c->v + c->n;
    size_t len = 1 + 2 * (size_t)st[0];
    uint64_t h = stack_hash(st);
    for (int32_t i = 0; i < c->ns; i++)
        if (c->h[i] == h && !memcmp(c->v + c->at[i], st, len * sizeof *st)) return 0;
    c->at[c->ns] = c->n;
    c->h[c->ns] = h;
    c->ns++;
    c->n += len;
    return 1;
}

static void cfg_clear(pd_cfg *c) {
    c->n = 0;
    c->ns = 0;
}

static int32_t cell(const gd_pd *pd, int32_t r, int32_t s, int b) {
    int32_t c = pd->byte_class[(size_t)r * 256 + (size_t)b];
    return pd->trans[pd->trans_off[r] + (int64_t)s * pd->n_cls[r] + c];
}

/* ---- liveness (gd_pd_live) ----------------------------------------------------------------
 * The reverse edges of the rules (made once per masker; per call of gd_pd_live): each state's
 * distinct predecessors by a byte or special-token move, the calls by their return state, the
 * call sites by their callee. */
typedef struct {
    int32_t *off, *src;   /* predecessors of global state g: src[off[g] .. off[g + 1]) */
    int32_t *coff, *csrc; /* calls j returning to g: csrc[coff[g] .. coff[g + 1]) */
    int32_t *xoff, *xsrc; /* calls j of rule x: xsrc[xoff[x] .. xoff[x + 1]) */
    int32_t *call_src, *call_rule; /* call j: its global state, its rule */
} pd_rev;

static void rev_free(pd_rev *v) {
    free(v->off);
    free(v->src);
    free(v->coff);
    free(v->csrc);
    free(v->xoff);
    free(v->xsrc);
    free(v->call_src);
    free(v->call_rule);
    memset(v, 0, sizeof *v);
}

/* the predecessors of every state by its own moves, each once (mark[t] == g: already one) */
static size_t rev_moves(const gd_pd *pd, int32_t *mark, int32_t *off, int32_t *src) {
    int32_t R = pd->n_rules;
    size_t k = 0;
    for (int32_t r = 0; r < R; r++) {
        int32_t n = pd->state_off[r + 1] - pd->state_off[r], nc = pd->n_cls[r], base = pd->state_off[r];
        const int32_t *tr = pd->trans + pd->trans_off[r];
        for (int32_t s = 0; s < n; s++) {
            int32_t g = base + s;
            for (int32_t c = 0; c < nc; c++) {
                int32_t t = tr[(size_t)s * (size_t)nc + (size_t)c];
                if (t >= 0 && mark[base + t] != g) {
                    mark[base + t] = g;
                    if (src) src[off[base + t]++] = g;
                    else off[base + t + 1]++;
                    k++;
                }
            }
            if (pd->spec_off)
                for (int32_t j = pd->spec_off[g]; j < pd->spec_off[g + 1]; j++) {
                    int32_t t = pd->spec_t[j];
                    if (mark[base + t] != g) {
                        mark[base + t] = g;
                        if (src) src[off[base + t]++] = g;
                        else off[base + t + 1]++;
                        k++;
                    }
                }
        }
    }
    return k;
}

static int rev_build(const gd_pd *pd, pd_rev *v) {
    int32_t R = pd->n_rules, total = pd->state_off[R];
    size_t ncalls = (size_t)pd->call_off[total];
    memset(v, 0, sizeof *v);
    int32_t *mark = malloc(((size_t)total + 1) * sizeof *mark), *fill = NULL;
    v->off = calloc((size_t)total + 1, sizeof *v->off);
    v->coff = calloc((size_t)total + 1, sizeof *v->coff);
    v->xoff = calloc((size_t)R + 1, sizeof *v->xoff);
    v->csrc = malloc((ncalls + 1) * sizeof *v->csrc);
    v->xsrc = malloc((ncalls + 1) * sizeof *v->xsrc);
    v->call_src = malloc((ncalls + 1) * sizeof *v->call_src);
    v->call_rule = malloc((ncalls + 1) * sizeof *v->call_rule);
    fill = malloc(((size_t)total + (size_t)R + 1) * sizeof *fill);
    if (!mark || !v->off || !v->coff || !v->xoff || !v->csrc || !v->xsrc || !v->call_src || !v->call_rule || !fill)
        goto nomem;
    for (int32_t g = 0; g < total; g++) mark[g] = -1;
    size_t nedges = rev_moves(pd, mark, v->off, NULL);
    for (int32_t g = 0; g < total; g++) v->off[g + 1] += v->off[g];
    v->src = malloc((nedges + 1) * sizeof *v->src);
    if (!v->src) goto nomem;
    memcpy(fill, v->off, (size_t)total * sizeof *fill);
    for (int32_t g = 0; g < total; g++) mark[g] = -1;
    rev_moves(pd, mark, fill, v->src);
    for (int32_t r = 0; r < R; r++)
        for (int32_t g = pd->state_off[r]; g < pd->state_off[r + 1]; g++)
            for (int32_t j = pd->call_off[g]; j < pd->call_off[g + 1]; j++) {
                v->coff[pd->state_off[r] + pd->call_t[j] + 1]++;
                v->xoff[pd->call_x[j] + 1]++;
                v->call_src[j] = g;
                v->call_rule[j] = r;
            }
    for (int32_t g = 0; g < total; g++) v->coff[g + 1] += v->coff[g];
    for (int32_t x = 0; x < R; x++) v->xoff[x + 1] += v->xoff[x];
    memcpy(fill, v->coff, (size_t)total * sizeof *fill);
    memcpy(fill + total, v->xoff, (size_t)R * sizeof *fill);
    for (size_t j = 0; j < ncalls; j++) {
        int32_t r = v->call_rule[j];
        v->csrc[fill[pd->state_off[r] + pd->call_t[j]]++] = (int32_t)j;
        v->xsrc[fill[total + pd->call_x[j]]++] = (int32_t)j;
    }
    free(mark);
    free(fill);
    return 0;
nomem:
    free(mark);
    free(fill);
    rev_free(v);
    return -2;
}

/* the least fixpoint from the accepting states over the reverse edges */
static int live_run(const gd_pd *pd, const pd_rev *v, const uint8_t *forbidden, uint8_t *live) {
    int32_t R = pd->n_rules, total = pd->state_off[R];
    int32_t *queue = malloc(((size_t)total + 1) * sizeof *queue), *rule_of = malloc(((size_t)total + 1) * sizeof *rule_of);
    if (!queue || !rule_of) {
        free(queue);
        free(rule_of);
        return -2;
    }
    for (int32_t r = 0; r < R; r++)
        for (int32_t g = pd->state_off[r]; g < pd->state_off[r + 1]; g++) rule_of[g] = r;
    size_t qh = 0, qt = 0;
    for (int32_t g = 0; g < total; g++) {
        live[g] = pd->accepting[g] ? 1 : 0;
        if (live[g]) queue[qt++] = g;
    }
    while (qh < qt) {
        int32_t g = queue[qh++], r = rule_of[g];
        for (int32_t k = v->off[g]; k < v->off[g + 1]; k++)
            if (!live[v->src[k]]) {
                live[v->src[k]] = 1;
                queue[qt++] = v->src[k];
            }
        /* a call that returns to g, of an allowed callee whose start is live */
        for (int32_t k = v->coff[g]; k < v->coff[g + 1]; k++) {
            int32_t j = v->csrc[k], x = pd->call_x[j], s = v->call_src[j];
            if (!forbidden[x] && live[pd->state_off[x]] && !live[s]) {
                live[s] = 1;
                queue[qt++] = s;
            }
        }
        /* g is rule r's start: the calls of r whose return state is live */
        if (g == pd->state_off[r] && !forbidden[r])
            for (int32_t k = v->xoff[r]; k < v->xoff[r + 1]; k++) {
                int32_t j = v->xsrc[k], s = v->call_src[j], q = v->call_rule[j];
                if (live[pd->state_off[q] + pd->call_t[j]] && !live[s]) {
                    live[s] = 1;
                    queue[qt++] = s;
                }
            }
    }
    free(queue);
    free(rule_of);
    return 0;
}

int gd_pd_live(const gd_pd *pd, const uint8_t *forbidden, uint8_t *live) {
    pd_rev v;
    if (rev_build(pd, &v)) return -2;
    int rc = live_run(pd, &v, forbidden, live);
    rev_free(&v);
    return rc;
}

/* ---- a rule's mask walks and the saturated sets (gd_pd_masker) ----------------------------
 * Per set of saturated rules (set 0: none), made on first use: the set's liveness, then per rule,
 * on its first use there, the byte classes refined by the rule's exit sets (bytes in one column
 * have the same move and are in the same exit sets), the local table (the rule's own byte moves
 * into live states from live states, one more row for the sink, which has none) and the over
 * table (the same, with every exit byte of a state and every byte of the sink row going to the
 * sink, then n start rows: state s's own moves, no exit), each behind a state masker:
 * decoding/backends/pushdown/index.py `_tables` and `_walk`, whose tables differ only in the
 * numbering of the columns. */
typedef struct {
    uint8_t col[256];
    void *loc, *over;
    uint8_t *acc; /* n + 1 zeros: no end-of-generation bits here */
    uint8_t *memo[2][GD_MASKER_PROFILES];
    gd_state_masker m[2]; /* local, over */
    int made;
} pd_rule_masker;

typedef struct {
    uint8_t *sat;          /* [n_rules]: 1 for a saturated rule */
    uint8_t *live;         /* [total states]; NULL for set 0 (everything live) */
    pd_rule_masker *rules; /* [n_rules] */
} pd_set;

struct gd_pd_masker {
    const gd_pd *pd;
    const int32_t *exit_id;  /* [total states]: index of the state's exit set, -1: none */
    const uint8_t *exit_set; /* [n_sets * 32]: bit b of byte b / 8 */
    int32_t n_sets;
    gd_state_masker proto; /* trie, profiles, nwords */
    pd_set *sets;
    int32_t n_sat, cap_sat;
    int32_t *count; /* [n_rules] scratch of the checks, zero between uses */
    uint8_t *sat;   /* [n_rules] scratch */
    pd_rev rev;     /* made by the first saturated set */
    int rev_made;
};

/* the index of the saturated set `sat` (n_rules bytes), made with its liveness if new; -2 when
 * out of memory */
static int32_t set_index(gd_pd_masker *pm, const uint8_t *sat) {
    int32_t R = pm->pd->n_rules;
    int any = 0;
    for (int32_t r = 0; r < R && !any; r++) any = sat[r] != 0;
    if (!any) return 0;
    for (int32_t i = 1; i < pm->n_sat; i++)
        if (!memcmp(pm->sets[i].sat, sat, (size_t)R)) return i;
    if (pm->n_sat == pm->cap_sat) {
        int32_t cap = 2 * pm->cap_sat;
        pd_set *ns = realloc(pm->sets, (size_t)cap * sizeof *ns);
        if (!ns) return -2;
        pm->sets = ns;
        pm->cap_sat = cap;
    }
    if (!pm->rev_made) {
        if (rev_build(pm->pd, &pm->rev)) return -2;
        pm->rev_made = 1;
    }
    pd_set *st = &pm->sets[pm->n_sat];
    memset(st, 0, sizeof *st);
    st->sat = malloc((size_t)R);
    st->live = malloc((size_t)pm->pd->state_off[R] + 1);
    st->rules = calloc((size_t)R, sizeof *st->rules);
    if (!st->sat || !st->live || !st->rules || live_run(pm->pd, &pm->rev, sat, st->live)) {
        free(st->sat);
        free(st->live);
        free(st->rules);
        return -2;
    }
    memcpy(st->sat, sat, (size_t)R);
    return pm->n_sat++;
}

/* The liveness of the top frame of stack st after counting rule x once more (x < 0: none):
 * *live = NULL when no rule is saturated there.  0, or -2 when out of memory. */
static int frame_live(gd_pd_masker *pm, const int32_t *st, int32_t x, const uint8_t **live) {
    const gd_pd *pd = pm->pd;
    int32_t len = st[0], md = pd->max_depth, *cnt = pm->count;
    int any = 0;
    *live = NULL;
    if (len - 1 + (x >= 0) < md) return 0; /* too few frames to count a rule max_depth times */
    for (int32_t f = 1; f < len; f++) any |= ++cnt[st[1 + 2 * f]] >= md;
    if (x >= 0) any |= ++cnt[x] >= md;
    int rc = 0;
    if (any) {
        for (int32_t f = 1; f < len; f++) pm->sat[st[1 + 2 * f]] = cnt[st[1 + 2 * f]] >= md;
        if (x >= 0) pm->sat[x] = cnt[x] >= md;
        int32_t i = set_index(pm, pm->sat);
        if (i < 0) rc = -2;
        else *live = pm->sets[i].live;
        for (int32_t f = 1; f < len; f++) pm->sat[st[1 + 2 * f]] = 0;
        if (x >= 0) pm->sat[x] = 0;
    }
    for (int32_t f = 1; f < len; f++) cnt[st[1 + 2 * f]] = 0;
    if (x >= 0) cnt[x] = 0;
    return rc;
}

/* out = the closure of `in` (pushes of calls, pops of accepting frames).  0; 1 when it is
 * partial (stacks or frames past the bounds left out); -2 out of memory */
static int closure(gd_pd_masker *pm, const pd_cfg *in, pd_cfg *out) {
    const gd_pd *pd = pm->pd;
    int partial = 0;
    cfg_clear(out);
    for (int32_t i = 0; i < in->ns; i++) {
        const int32_t *st = in->v + in->at[i];
        if (cfg_reserve(out, st[0])) return -2;
        memcpy(out->v + out->n, st, (1 + 2 * (size_t)st[0]) * sizeof *st);
        cfg_commit(out);
    }
    for (int32_t i = 0; i < out->ns; i++) {
        int32_t len = out->v[out->at[i]];
        int32_t r = out->v[out->at[i] + 2 * len - 1], s = out->v[out->at[i] + 2 * len];
        int32_t g = pd->state_off[r] + s;
        const uint8_t *live = NULL;
        if (pd->call_off[g] < pd->call_off[g + 1] && frame_live(pm, out->v + out->at[i], -1, &live)) return -2;
        for (int32_t j = pd->call_off[g]; j < pd->call_off[g + 1]; j++) {
            int32_t x = pd->call_x[j], tt = pd->call_t[j], old = 0;
            const int32_t *st = out->v + out->at[i];
            for (int32_t f = 1; f < len; f++) old += st[1 + 2 * f] == x;
            if (old >= pd->max_depth) continue; /* nested max_depth times: no push */
            if (live && !live[pd->state_off[r] + tt]) continue;
            const uint8_t *live2 = live;
            if (old + 1 >= pd->max_depth && frame_live(pm, st, x, &live2)) return -2;
            if (live2 && !live2[pd->state_off[x]]) continue;
            if (len + 1 > PD_MAX_FRAMES || out->ns >= PD_MAX_STACKS) {
                partial = 1;
                continue;
            }
            if (cfg_reserve(out, len + 1)) return -2;
            st = out->v + out->at[i]; /* v may have moved */
            int32_t *nw = out->v + out->n;
            memcpy(nw, st, (1 + 2 * (size_t)len) * sizeof *st);
            nw[0] = len + 1;
            nw[2 * len] = tt;
            nw[2 * len + 1] = x;
            nw[2 * len + 2] = 0;
            cfg_commit(out);
        }
        if (pd->accepting[g] && len > 1 && out->ns >= PD_MAX_STACKS) partial = 1;
        else if (pd->accepting[g] && len > 1) {
            if (cfg_reserve(out, len - 1)) return -2;
            const int32_t *st = out->v + out->at[i];
            int32_t *nw = out->v + out->n;
            memcpy(nw, st, (1 + 2 * (size_t)(len - 1)) * sizeof *st);
            nw[0] = len - 1;
            cfg_commit(out);
        }
    }
    return partial;
}

/* out = the byte move of every stack of `clo` (its top frame's rule automaton, into a state
 * live for the frame's saturated set) */
static int step(gd_pd_masker *pm, const pd_cfg *clo, int b, pd_cfg *out) {
    const gd_pd *pd = pm->pd;
    cfg_clear(out);
    for (int32_t i = 0; i < clo->ns; i++) {
        const int32_t *st = clo->v + clo->at[i];
        int32_t len = st[0], r = st[2 * len - 1];
        int32_t t = cell(pd, r, st[2 * len], b);
        if (t < 0) continue;
        const uint8_t *live;
        if (frame_live(pm, st, -1, &live)) return -2;
        if (live && !live[pd->state_off[r] + t]) continue;
        if (cfg_reserve(out, len)) return -2;
        st = clo->v + clo->at[i];
        int32_t *nw = out->v + out->n;
        memcpy(nw, st, (1 + 2 * (size_t)len) * sizeof *st);
        nw[2 * len] = t;
        cfg_commit(out);
    }
    return 0;
}

static int tok_less(const gd_pd *pd, uint32_t a, uint32_t b) {
    const uint8_t *pa = pd->blob + pd->offsets[a], *pb = pd->blob + pd->offsets[b];
    size_t na = (size_t)(pd->offsets[a + 1] - pd->offsets[a]), nb = (size_t)(pd->offsets[b + 1] - pd->offsets[b]);
    int c = memcmp(pa, pb, na < nb ? na : nb);
    return c < 0 || (c == 0 && na < nb);
}

/* Appends the stacks given as items (per stack: its length, then (rule, state) per frame) to
 * c, each checked first: 0, -1 for an item list that is not such stacks (c may hold the
 * stacks before the bad one), -2 on allocation failure. */
static int cfg_load(const gd_pd *pd, const int32_t *stacks, size_t n_items, pd_cfg *c) {
    for (size_t p = 0; p < n_items;) {
        int32_t len = stacks[p];
        if (len < 1 || p + 1 + 2 * (size_t)len > n_items) return -1;
        for (int32_t f = 0; f < len; f++) {
            int32_t r = stacks[p + 1 + 2 * f], s = stacks[p + 2 + 2 * f];
            if (r < 0 || r >= pd->n_rules || s < 0 || s >= pd->state_off[r + 1] - pd->state_off[r]) return -1;
        }
        if (cfg_reserve(c, len)) return -2;
        memcpy(c->v + c->n, stacks + p, (1 + 2 * (size_t)len) * sizeof *stacks);
        cfg_commit(c);
        p += 1 + 2 * (size_t)len;
    }
    return 0;
}

/* ids sorted by their bytes (a stable bottom-up merge sort; tmp: n items) */
static void sort_ids(const gd_pd *pd, uint32_t *ids, uint32_t *tmp, size_t n) {
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = tok_less(pd, ids[j], ids[i]) ? ids[j++] : ids[i++];
            while (i < mid) tmp[k++] = ids[i++];
            while (j < hi) tmp[k++] = ids[j++];
        }
        memcpy(ids, tmp, n * sizeof *ids);
    }
}

int gd_pd_check(gd_pd_masker *pm, const int32_t *stacks, size_t n_items, const uint32_t *ids, size_t n_ids,
                uint32_t *mask, size_t nwords, uint32_t *undecided, size_t *n_undecided) {
    const gd_pd *pd = pm->pd;
    *n_undecided = 0;
    if (n_ids == 0) return 0;
    size_t maxlen = 0;
    for (size_t k = 0; k < n_ids; k++) {
        if (ids[k] >= pd->n_tokens) return -1;
        size_t n = (size_t)(pd->offsets[ids[k] + 1] - pd->offsets[ids[k]]);
        if (n > maxlen) maxlen = n;
    }
    int rc = -2;
    uint32_t *order = malloc(2 * n_ids * sizeof *order);
    /* level i: the configuration after i bytes of the current token (cfg) and its closure */
    pd_cfg *cfg = calloc(maxlen + 1, sizeof *cfg), *clo = calloc(maxlen + 1, sizeof *clo);
    /* clo_done[i]: 0 not made, 1 made, 2 made partial; inc[i]: cfg[i] may be a strict subset */
    int8_t *clo_done = calloc(maxlen + 1, 1), *inc = calloc(maxlen + 1, 1);
    if (!order || !cfg || !clo || !clo_done || !inc) goto out;
    memcpy(order, ids, n_ids * sizeof *order);
    sort_ids(pd, order, order + n_ids, n_ids);
    rc = cfg_load(pd, stacks, n_items, &cfg[0]); /* level 0: the given stacks */
    if (rc) goto out;
    rc = -2;
    size_t have = 0; /* levels 0..have hold the previous token's prefix */
    const uint8_t *prev = NULL;
    size_t prev_n = 0;
    for (size_t k = 0; k < n_ids; k++) {
        uint32_t t = order[k];
        const uint8_t *d = pd->blob + pd->offsets[t];
        size_t n = (size_t)(pd->offsets[t + 1] - pd->offsets[t]), i = 0;
        size_t lim = prev_n < n ? prev_n : n;
        if (lim > have) lim = have;
        while (i < lim && prev[i] == d[i]) i++;
        have = i;
        prev = d;
        prev_n = n;
        for (; i < n && cfg[i].ns > 0; i++) {
            if (!clo_done[i]) {
                int c = closure(pm, &cfg[i], &clo[i]);
                if (c < 0) goto out;
                clo_done[i] = (int8_t)(1 + c);
            }
            if (step(pm, &clo[i], d[i], &cfg[i + 1])) goto out;
            clo_done[i + 1] = 0;
            inc[i + 1] = inc[i] || clo_done[i] == 2;
            have = i + 1;
        }
        /* i: the bytes stepped; cfg[i] empty or i == n */
        if (cfg[i].ns > 0) {
            if ((size_t)(t >> 5) < nwords) mask[t >> 5] |= 1u << (t & 31);
        } else if (inc[i]) {
            undecided[(*n_undecided)++] = t;
        }
    }
    rc = 0;
out:
    if (cfg)
        for (size_t i = 0; i <= maxlen; i++) cfg_free(&cfg[i]);
    if (clo)
        for (size_t i = 0; i <= maxlen; i++) cfg_free(&clo[i]);
    free(cfg);
    free(clo);
    free(clo_done);
    free(inc);
    free(order);
    return rc;
}

gd_pd_masker *gd_pd_masker_new(const gd_pd *pd, const int32_t *exit_id, const uint8_t *exit_set, int32_t n_sets,
                               const gd_trie *trie, const gd_masker_profile *prof, int32_t n_profiles, size_t nwords) {
    if (n_profiles < 0 || n_profiles > GD_MASKER_PROFILES) return NULL;
    gd_pd_masker *pm = calloc(1, sizeof *pm);
    if (!pm) return NULL;
    pm->sets = calloc(4, sizeof *pm->sets);
    pm->count = calloc((size_t)pd->n_rules, sizeof *pm->count);
    pm->sat = calloc((size_t)pd->n_rules, 1);
    if (pm->sets) pm->sets[0].rules = calloc((size_t)pd->n_rules, sizeof *pm->sets[0].rules);
    if (!pm->sets || !pm->count || !pm->sat || !pm->sets[0].rules) {
        if (pm->sets) free(pm->sets[0].rules);
        free(pm->sets);
        free(pm->count);
        free(pm->sat);
        free(pm);
        return NULL;
    }
    pm->n_sat = 1;
    pm->cap_sat = 4;
    pm->pd = pd;
    /* the reverse edges for the saturated sets' liveness: made now, with the rest of the
     * masker's one-time work, rather than by the first mask that meets a saturated set */
    if (rev_build(pd, &pm->rev) == 0) pm->rev_made = 1;
    pm->exit_id = exit_id;
    pm->exit_set = exit_set;
    pm->n_sets = n_sets;
    pm->proto.trie = trie;
    pm->proto.prof = prof;
    pm->proto.n_profiles = n_profiles;
    pm->proto.nwords = nwords;
    return pm;
}

static void rule_masker_free(pd_rule_masker *rm) {
    for (int w = 0; w < 2; w++) {
        gd_state_masker_release(&rm->m[w]);
        for (int p = 0; p < GD_MASKER_PROFILES; p++) free(rm->memo[w][p]);
    }
    free(rm->loc);
    free(rm->over);
    free(rm->acc);
    memset(rm, 0, sizeof *rm);
}

void gd_pd_masker_free(gd_pd_masker *pm) {
    if (!pm) return;
    for (int32_t i = 0; i < pm->n_sat; i++) {
        for (int32_t r = 0; r < pm->pd->n_rules; r++) rule_masker_free(&pm->sets[i].rules[r]);
        free(pm->sets[i].rules);
        free(pm->sets[i].sat);
        free(pm->sets[i].live);
    }
    free(pm->sets);
    free(pm->count);
    free(pm->sat);
    if (pm->rev_made) rev_free(&pm->rev);
    free(pm);
}

static int exit_has(const gd_pd_masker *pm, int32_t e, int b) { return (pm->exit_set[(size_t)e * 32 + (size_t)(b >> 3)] >> (b & 7)) & 1; }

/* the tables and maskers of rule r in saturated set k: 0, or -2 when out of memory */
static int rule_make(gd_pd_masker *pm, int32_t k, int32_t r) {
    pd_rule_masker *rm = &pm->sets[k].rules[r];
    if (rm->made) return 0;
    const gd_pd *pd = pm->pd;
    const uint8_t *live = pm->sets[k].live ? pm->sets[k].live + pd->state_off[r] : NULL;
    int32_t n = pd->state_off[r + 1] - pd->state_off[r], nc = pd->n_cls[r];
    const int32_t *eid = pm->exit_id + pd->state_off[r];
    const uint8_t *bc = pd->byte_class + (size_t)r * 256;
    /* the rule's distinct exit sets */
    int32_t *sets = malloc(((size_t)n + 1) * sizeof *sets), ns = 0;
    uint64_t *memb = NULL;
    if (!sets) return -2;
    for (int32_t s = 0; s < n; s++) {
        int32_t e = eid[s], j = 0;
        if (e < 0) continue;
        while (j < ns && sets[j] != e) j++;
        if (j == ns) sets[ns++] = e;
    }
    /* each byte's membership in them (nw words), then the columns: the distinct (class, membership) */
    size_t nw = ((size_t)ns + 63) / 64;
    if (nw == 0) nw = 1;
    memb = calloc(256 * nw, sizeof *memb);
    if (!memb) { free(sets); return -2; }
    for (int32_t j = 0; j < ns; j++)
        for (int b = 0; b < 256; b++)
            if (exit_has(pm, sets[j], b)) memb[(size_t)b * nw + (size_t)(j / 64)] |= 1ull << (j % 64);
    int rep[256], ncols = 0;
    for (int b = 0; b < 256; b++) {
        int c = 0;
        while (c < ncols && !(bc[rep[c]] == bc[b] && !memcmp(memb + (size_t)rep[c] * nw, memb + (size_t)b * nw, nw * sizeof *memb)))
            c++;
        if (c == ncols) rep[ncols++] = b;
        rm->col[b] = (uint8_t)c;
    }
    free(memb);
    int t16 = 2 * n + 1 < 32767;
    size_t cells = ((size_t)n + 1) * (size_t)ncols, isz = t16 ? 2 : 4;
    rm->loc = malloc(cells * isz);
    rm->over = malloc((cells + (size_t)n * (size_t)ncols) * isz);
    rm->acc = calloc(2 * (size_t)n + 1, 1);
    if (!rm->loc || !rm->over || !rm->acc) goto nomem;
    const int32_t *tr = pd->trans + pd->trans_off[r];
    for (int32_t s = 0; s <= n; s++) {
        int32_t e = s < n ? eid[s] : -1;
        for (int c = 0; c < ncols; c++) {
            int32_t l = s < n ? tr[(size_t)s * (size_t)nc + bc[rep[c]]] : -1;
            if (l >= 0 && live && !(live[l] && live[s])) l = -1; /* moves into live states from live states */
            int32_t o = s == n || (e >= 0 && exit_has(pm, e, rep[c])) ? n : l;
            size_t i = (size_t)s * (size_t)ncols + (size_t)c;
            if (t16) {
                ((int16_t *)rm->loc)[i] = (int16_t)l;
                ((int16_t *)rm->over)[i] = (int16_t)o;
            } else {
                ((int32_t *)rm->loc)[i] = l;
                ((int32_t *)rm->over)[i] = o;
            }
        }
    }
    /* the over table's start rows n + 1 + s: state s's own moves, no exit (the closure's other
     * stacks stand for the calls and returns taken before the first byte) */
    memcpy((char *)rm->over + cells * isz, rm->loc, (size_t)n * (size_t)ncols * isz);
    for (int w = 0; w < 2; w++) {
        gd_state_masker *m = &rm->m[w];
        *m = pm->proto;
        m->classes = rm->col;
        m->table = w ? rm->over : rm->loc;
        m->table16 = t16;
        m->ncols = (size_t)ncols;
        m->n_classes = (size_t)ncols;
        m->n_states = w ? 2 * (size_t)n + 1 : (size_t)n + 1;
        m->sink = w ? n : -1;
        m->accepting = rm->acc;
        for (int32_t p = 0; p < m->n_profiles; p++) {
            if (!(rm->memo[w][p] = calloc(m->n_states, 1))) goto nomem;
            m->loop[p].loop_memo = rm->memo[w][p];
        }
    }
    free(sets);
    rm->made = 1;
    return 0;
nomem:
    free(sets);
    rule_masker_free(rm);
    return -2;
}

size_t gd_pd_masker_bytes(const gd_pd_masker *pm) {
    const gd_pd *pd = pm->pd;
    int32_t R = pd->n_rules, total = pd->state_off[R];
    size_t b = 0;
    if (pm->rev_made)
        b += 4 * ((size_t)pm->rev.off[total] + 2 * (size_t)total + (size_t)R + 4 * (size_t)pd->call_off[total] + 3);
    for (int32_t i = 0; i < pm->n_sat; i++) {
        const pd_set *st = &pm->sets[i];
        if (st->live) b += (size_t)R + (size_t)total + 1;
        for (int32_t r = 0; r < R; r++) {
            const pd_rule_masker *rm = &st->rules[r];
            if (!rm->made) continue;
            size_t n = (size_t)(pd->state_off[r + 1] - pd->state_off[r]), isz = rm->m[0].table16 ? 2 : 4;
            b += (4 * n + 2) * rm->m[0].ncols * isz; /* loc: n + 1 rows, over: 2n + 1 */
            b += (2 * n + 1) + (size_t)rm->m[0].n_profiles * (3 * n + 2); /* zeros, loop memos */
        }
    }
    return b;
}

int gd_pd_masker_live(gd_pd_masker *pm, const uint8_t *sat, uint8_t *live) {
    int32_t k = sat ? set_index(pm, sat) : 0, total = pm->pd->state_off[pm->pd->n_rules];
    if (k < 0) return -2;
    if (k == 0) memset(live, 1, (size_t)total);
    else memcpy(live, pm->sets[k].live, (size_t)total);
    return 0;
}

int gd_pd_frame_mask(const gd_kernels *kern, gd_pd_masker *pm, int32_t r, int32_t s, const uint8_t *sat,
                     const uint32_t *special_ids, size_t n_special, uint32_t *loc, uint32_t *cand) {
    const gd_pd *pd = pm->pd;
    if (r < 0 || r >= pd->n_rules || s < 0 || s >= pd->state_off[r + 1] - pd->state_off[r]) return -1;
    int32_t k = sat ? set_index(pm, sat) : 0;
    if (k < 0 || rule_make(pm, k, r)) return -2;
    pd_rule_masker *rm = &pm->sets[k].rules[r];
    int rc = gd_state_mask(kern, &rm->m[0], s, loc);
    if (!rc) rc = gd_state_mask(kern, &rm->m[1], pd->state_off[r + 1] - pd->state_off[r] + 1 + s, cand);
    if (rc) return rc == -1 ? -1 : -2;
    size_t nwords = pm->proto.nwords;
    for (size_t j = 0; j < n_special; j++) {
        uint32_t id = special_ids[j];
        if ((size_t)(id >> 5) >= nwords) continue;
        loc[id >> 5] &= ~(1u << (id & 31));
        cand[id >> 5] &= ~(1u << (id & 31));
    }
    int any = 0;
    for (size_t w = 0; w < nwords; w++) {
        cand[w] &= ~loc[w];
        any |= cand[w] != 0;
    }
    return any;
}

/* ---- one token's configuration (gd_pd_run) ------------------------------------------------ */
int gd_pd_run(gd_pd_masker *pm, const int32_t *stacks, size_t n_items, const uint8_t *data, size_t n, int32_t *out,
              size_t cap, size_t *n_out) {
    const gd_pd *pd = pm->pd;
    pd_cfg a, b, c;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    int rc = -2;
    *n_out = 0;
    rc = cfg_load(pd, stacks, n_items, &a);
    if (rc) goto done;
    rc = -2;
    pd_cfg *cur = &a, *nxt = &b;
    for (size_t i = 0; i < n && cur->ns > 0; i++) {
        int k = closure(pm, cur, &c);
        if (k < 0) goto done;
        if (k) { rc = 1; goto done; } /* partial: left to the caller */
        if (step(pm, &c, data[i], nxt)) goto done;
        pd_cfg *t = cur;
        cur = nxt;
        nxt = t;
    }
    if (cur->n > cap) { rc = 2; goto done; }
    size_t w = 0;
    for (int32_t i = 0; i < cur->ns; i++) {
        const int32_t *st = cur->v + cur->at[i];
        memcpy(out + w, st, (1 + 2 * (size_t)st[0]) * sizeof *st);
        w += 1 + 2 * (size_t)st[0];
    }
    *n_out = w;
    rc = 0;
done:
    cfg_free(&a);
    cfg_free(&b);
    cfg_free(&c);
    return rc;
}
