/* Minimal acyclic DFA of a finite set of byte strings (Daciuk, Mihov, Watson & Watson 2000,
 * the incremental construction from sorted input): one pass over the words, each state
 * frozen (registered or merged with an equivalent one) as soon as no later word can extend
 * it.  Linear in the total length; no global state. */
#include <stdlib.h>
#include <string.h>

#include "gd_native.h"

typedef struct { /* a state on the path of the last word: its edges so far */
    uint8_t *lab;
    int32_t *tgt; /* the last target is pending (the next path state) until it is frozen */
    int32_t n, cap;
    uint8_t final;
} open_state;

typedef struct { /* the frozen states: edges e_lab/e_tgt[off[s] .. off[s] + cnt[s]) */
    int32_t *off, *cnt;
    uint8_t *final;
    uint8_t *e_lab;
    int32_t *e_tgt;
    int32_t n, n_edges;
    int32_t *reg; /* open addressing: frozen state ids, -1 empty */
    uint64_t mask;
} frozen_set;

static uint64_t sig_hash(const uint8_t *lab, const int32_t *tgt, int32_t n, uint8_t final) {
    uint64_t h = 1469598103934665603ULL ^ final;
    for (int32_t i = 0; i < n; i++) {
        h = (h ^ lab[i]) * 1099511628211ULL;
        h = (h ^ (uint64_t)(uint32_t)tgt[i]) * 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static int same(const frozen_set *f, int32_t s, const open_state *o) {
    if (f->final[s] != o->final || f->cnt[s] != o->n) return 0;
    const int32_t k = f->off[s];
    return !memcmp(f->e_lab + k, o->lab, (size_t)o->n) && !memcmp(f->e_tgt + k, o->tgt, (size_t)o->n * 4);
}

/* The frozen id of `o` (all its targets frozen): an equivalent registered state, or a new one. */
static int32_t freeze(frozen_set *f, const open_state *o) {
    uint64_t i = sig_hash(o->lab, o->tgt, o->n, o->final) & f->mask;
    for (; f->reg[i] >= 0; i = (i + 1) & f->mask)
        if (same(f, f->reg[i], o)) return f->reg[i];
    const int32_t s = f->n++;
    f->off[s] = f->n_edges;
    f->cnt[s] = o->n;
    f->final[s] = o->final;
    memcpy(f->e_lab + f->n_edges, o->lab, (size_t)o->n);
    memcpy(f->e_tgt + f->n_edges, o->tgt, (size_t)o->n * 4);
    f->n_edges += o->n;
    f->reg[i] = s;
    return s;
}

static int push_edge(open_state *o, uint8_t lab) {
    if (o->n == o->cap) {
        int32_t cap = o->cap ? 2 * o->cap : 4;
        uint8_t *l = realloc(o->lab, (size_t)cap);
        if (!l) return -1;
        o->lab = l;
        int32_t *t = realloc(o->tgt, (size_t)cap * 4);
        if (!t) return -1;
        o->tgt = t;
        o->cap = cap;
    }
    o->lab[o->n] = lab;
    o->tgt[o->n] = -1;
    o->n++;
    return 0;
}

/* Freeze the path states deeper than `depth` (deepest first), linking each to its parent. */
static void close_path(frozen_set *f, open_state *path, size_t from, size_t depth) {
    for (size_t d = from; d > depth; d--) path[d - 1].tgt[path[d - 1].n - 1] = freeze(f, &path[d]);
}

/* BFS renumbering from `root` into `out` (edges by increasing label). */
static int renumber(const frozen_set *f, int32_t root, gd_literal_dfa *out) {
    const int32_t n = f->n;
    int32_t *order = malloc((size_t)n * 4), *id = malloc((size_t)n * 4);
    out->off = malloc(((size_t)n + 1) * 4);
    out->lab = malloc((size_t)f->n_edges + 1);
    out->tgt = malloc(((size_t)f->n_edges + 1) * 4);
    out->final = malloc((size_t)n);
    if (!order || !id || !out->off || !out->lab || !out->tgt || !out->final) {
        free(order);
        free(id);
        gd_literal_dfa_free(out);
        return GD_DFA_NOMEM;
    }
    for (int32_t s = 0; s < n; s++) id[s] = -1;
    int32_t head = 0, tail = 0, e = 0;
    id[root] = tail;
    order[tail++] = root;
    while (head < tail) {
        const int32_t s = order[head];
        out->off[head] = e;
        out->final[head] = f->final[s];
        for (int32_t j = f->off[s]; j < f->off[s] + f->cnt[s]; j++, e++) {
            const int32_t t = f->e_tgt[j];
            if (id[t] < 0) {
                id[t] = tail;
                order[tail++] = t;
            }
            out->lab[e] = f->e_lab[j];
            out->tgt[e] = id[t];
        }
        head++;
    }
    out->off[tail] = e;
    out->n_states = tail;
    free(order);
    free(id);
    return GD_DFA_OK;
}

static void free_work(frozen_set *f, open_state *path, size_t depth) {
    free(f->off);
    free(f->cnt);
    free(f->final);
    free(f->e_lab);
    free(f->e_tgt);
    free(f->reg);
    if (path)
        for (size_t d = 0; d <= depth; d++) {
            free(path[d].lab);
            free(path[d].tgt);
        }
    free(path);
}

void gd_literal_dfa_free(gd_literal_dfa *d) {
    free(d->off);
    free(d->lab);
    free(d->tgt);
    free(d->final);
    memset(d, 0, sizeof *d);
}

int gd_literal_dfa_build(const uint8_t *blob, const int64_t *offsets, int32_t n_words, gd_literal_dfa *out) {
    memset(out, 0, sizeof *out);
    if (n_words < 0 || offsets[0] != 0) return GD_DFA_INVALID;
    size_t maxlen = 0;
    for (int32_t i = 0; i < n_words; i++) {
        if (offsets[i + 1] < offsets[i]) return GD_DFA_INVALID;
        const size_t len = (size_t)(offsets[i + 1] - offsets[i]);
        if (len > maxlen) maxlen = len;
        if (i > 0) { /* strictly increasing: shorter prefixes first */
            const size_t plen = (size_t)(offsets[i] - offsets[i - 1]);
            const int c = memcmp(blob + offsets[i - 1], blob + offsets[i], plen < len ? plen : len);
            if (c > 0 || (c == 0 && plen >= len)) return GD_DFA_INVALID;
        }
    }
    const int64_t total = offsets[n_words];
    if (total >= INT32_MAX / 4) return GD_DFA_INVALID;
    const size_t cap_states = (size_t)total + 1;
    uint64_t slots = 2;
    while (slots < 2 * cap_states) slots <<= 1;
    frozen_set f = {0};
    f.off = malloc(cap_states * 4);
    f.cnt = malloc(cap_states * 4);
    f.final = malloc(cap_states);
    f.e_lab = malloc(cap_states);
    f.e_tgt = malloc(cap_states * 4);
    f.reg = malloc(slots * 4);
    f.mask = slots - 1;
    open_state *path = calloc(maxlen + 1, sizeof *path);
    if (!f.off || !f.cnt || !f.final || !f.e_lab || !f.e_tgt || !f.reg || !path) {
        free_work(&f, path, maxlen);
        return GD_DFA_NOMEM;
    }
    memset(f.reg, 0xff, slots * 4);
    size_t prev_len = 0;
    for (int32_t i = 0; i < n_words; i++) {
        const uint8_t *w = blob + offsets[i];
        const size_t len = (size_t)(offsets[i + 1] - offsets[i]);
        size_t l = 0;
        if (i > 0) {
            const uint8_t *p = blob + offsets[i - 1];
            while (l < prev_len && l < len && p[l] == w[l]) l++;
            close_path(&f, path, prev_len, l);
        }
        for (size_t d = l; d < len; d++) {
            if (push_edge(&path[d], w[d]) < 0) {
                free_work(&f, path, maxlen);
                return GD_DFA_NOMEM;
            }
            path[d + 1].n = 0;
            path[d + 1].final = 0;
        }
        path[len].final = 1;
        prev_len = len;
    }
    close_path(&f, path, prev_len, 0);
    const int32_t root = freeze(&f, &path[0]);
    const int rc = renumber(&f, root, out);
    free_work(&f, path, maxlen);
    return rc;
}
