/* Grammar automaton construction: subset construction of a Thompson NFA and minimisation of
 * the resulting DFA (the pure-Python reference is decoding/backends/automaton.py,
 * `_determinize_py` and `_minimize_py`; both produce the same state numbering).
 *
 * Determinisation: BFS from the closure of the start state; a DFA state is the sorted set
 * of the NFA states of its epsilon closure that have a move, or are the end state.  The
 * symbols of a state are visited in increasing order, so a new state is numbered by
 * (BFS order of the state that found it, symbol).  Two open-addressing hash maps of sorted
 * int32 sets: closure set -> DFA state, and move-target set (before closure) -> DFA state,
 * which spares recomputing the closure of a target set seen before.
 *
 * Minimisation: Valmari's partition refinement of blocks and cords (A. Valmari, "Fast brief
 * practical DFA minimization", IPL 112(6), 2012), O(m log n) in the m defined transitions,
 * read once from the table into sparse rows (about 5% of a JSON Schema grammar's cells are
 * set: the passes over the dense table were most of the time).
 * A missing transition (-1) is its own implicit class: two states are merged only if, on
 * every symbol, both have no transition or both go to merged states.  The initial partition
 * is by acceptance, the length of the shortest accepted word and the set of symbols with a
 * transition (equivalent states agree on all three, so it is coarser than the result; on
 * Snowplow's counted automata the refinement then marks ~10% fewer elements).  The result is the
 * coarsest such partition, unique, so numbering the blocks by their first state gives
 * exactly what the Python refinement gives.
 *
 * Edge lists (gd_nfa_determinize_coo): the NFA as the Python builder emits it, flat
 * (source, lo, hi, target) byte-range edges, (source, target) epsilon edges and (source,
 * special, target) moves; the byte classes (`_byte_classes`) and the CSR arrays are made
 * here, then the subset construction above runs.
 *
 * Reachability (gd_dfa_bfs): breadth-first distances over a DFA table, forwards or over the
 * reversed edges, restricted to some columns and states (`min_steps_to_accept`); trimming
 * (gd_dfa_prune, `_prune`): two such searches and a renumbering.
 *
 * Rule automata (gd_nfa_build_rule_dfas): a grammar's large acyclic rules determinised and
 * minimised on their own, bottom-up, and embedded where they are referenced (the callback of
 * the NFA builder, src/nfa_build.c), so no subset construction copies what the minimisation
 * merges again.
 *
 * Re-entrant: no global state; every allocation is freed on every path.  A cooperative
 * deadline is read from the monotonic clock every few tens of thousands of work units.
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#endif

#include "gd_native.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------- deadline */

typedef struct {
    int on;          /* 0: no deadline */
    double at;       /* monotonic seconds */
    size_t work;     /* work units since the last clock read */
} deadline;

#define CHECK_EVERY ((size_t)1 << 15)

static double mono_now(void) {
#if defined(_WIN32)
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void deadline_init(deadline *d, double budget_s) {
    /* NaN or >= 1e18 s: no deadline; <= 0: already expired (found by the first check) */
    d->on = budget_s == budget_s && budget_s < 1e18;
    d->at = d->on ? mono_now() + budget_s : 0.0;
    d->work = CHECK_EVERY; /* the first call of deadline_passed reads the clock */
}

/* Adds `units` of work; every CHECK_EVERY units reads the clock. 1 once the deadline passed. */
static int deadline_passed(deadline *d, size_t units) {
    if (!d->on) return 0;
    d->work += units;
    if (d->work < CHECK_EVERY) return 0;
    d->work = 0;
    return mono_now() > d->at;
}

/* ------------------------------------------------------------------------- int32 sets */

static uint64_t hash_set(const int32_t *x, size_t k) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)k;
    for (size_t i = 0; i < k; i++) {
        h ^= (uint64_t)(uint32_t)x[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 32;
    return h;
}

/* Sorted int32 sets stored back to back in one arena, found by hash (open addressing,
 * linear probing, power-of-two slots, load <= 1/2).  Entry i has a value val[i]. */
typedef struct {
    int32_t *data;
    size_t len, cap;
    size_t *off;      /* [n + 1] start of entry i in data */
    uint64_t *hash;   /* [n] */
    int32_t *val;     /* [n] */
    size_t n, cap_e;
    int32_t *slot;    /* [nslot] entry index or -1 */
    size_t nslot;
} set_map;

static int set_map_init(set_map *m) {
    memset(m, 0, sizeof *m);
    m->cap = 1024;
    m->cap_e = 256;
    m->nslot = 512;
    m->data = malloc(sizeof(int32_t) * m->cap);
    m->off = malloc(sizeof(size_t) * (m->cap_e + 1));
    m->hash = malloc(sizeof(uint64_t) * m->cap_e);
    m->val = malloc(sizeof(int32_t) * m->cap_e);
    m->slot = malloc(sizeof(int32_t) * m->nslot);
    if (!m->data || !m->off || !m->hash || !m->val || !m->slot) return -1;
    m->off[0] = 0;
    for (size_t i = 0; i < m->nslot; i++) m->slot[i] = -1;
    return 0;
}

static void set_map_free(set_map *m) {
    free(m->data);
    free(m->off);
    free(m->hash);
    free(m->val);
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static const int32_t *set_map_items(const set_map *m, size_t i, size_t *k) {
    *k = m->off[i + 1] - m->off[i];
    return m->data + m->off[i];
}

/* Value of the set x[0..k) (hash h), or -1 if absent. */
static int32_t set_map_get(const set_map *m, const int32_t *x, size_t k, uint64_t h) {
    size_t mask = m->nslot - 1;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
        int32_t e = m->slot[s];
        if (e < 0) return -1;
        if (m->hash[e] == h && m->off[e + 1] - m->off[e] == k &&
            (k == 0 || !memcmp(m->data + m->off[e], x, sizeof(int32_t) * k)))
            return m->val[e];
    }
}

static void *grow(void *p, size_t *cap, size_t need, size_t item) {
    size_t c = *cap;
    if (need <= c) return p;
    while (c < need) c = c ? 2 * c : 16;
    void *q = realloc(p, c * item);
    if (q) *cap = c;
    return q;
}

/* Adds the set x[0..k) (absent, hash h) with value v.  x must not point into m->data.
 * 0, or -1 on allocation failure (the map stays valid). */
static int set_map_put(set_map *m, const int32_t *x, size_t k, uint64_t h, int32_t v) {
    if (m->len + k > m->cap) {
        int32_t *d = grow(m->data, &m->cap, m->len + k, sizeof(int32_t));
        if (!d) return -1;
        m->data = d;
    }
    if (m->n + 1 > m->cap_e) {
        size_t ce = 2 * m->cap_e;
        uint64_t *hh = realloc(m->hash, sizeof(uint64_t) * ce);
        if (!hh) return -1;
        m->hash = hh;
        int32_t *vv = realloc(m->val, sizeof(int32_t) * ce);
        if (!vv) return -1;
        m->val = vv;
        size_t *oo = realloc(m->off, sizeof(size_t) * (ce + 1));
        if (!oo) return -1;
        m->off = oo;
        m->cap_e = ce;
    }
    if (2 * (m->n + 1) > m->nslot) {
        size_t ns = 2 * m->nslot;
        int32_t *sl = malloc(sizeof(int32_t) * ns);
        if (!sl) return -1;
        for (size_t i = 0; i < ns; i++) sl[i] = -1;
        for (size_t e = 0; e < m->n; e++) {
            size_t s = (size_t)m->hash[e] & (ns - 1);
            while (sl[s] >= 0) s = (s + 1) & (ns - 1);
            sl[s] = (int32_t)e;
        }
        free(m->slot);
        m->slot = sl;
        m->nslot = ns;
    }
    if (k) memcpy(m->data + m->len, x, sizeof(int32_t) * k);
    m->len += k;
    m->hash[m->n] = h;
    m->val[m->n] = v;
    m->off[m->n + 1] = m->len;
    size_t s = (size_t)h & (m->nslot - 1);
    while (m->slot[s] >= 0) s = (s + 1) & (m->nslot - 1);
    m->slot[s] = (int32_t)m->n;
    m->n++;
    return 0;
}

/* ------------------------------------------------------------------------- sorting */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts x[0..k) and drops duplicates; returns the new length. */
static size_t sort_unique(int32_t *x, size_t k) {
    if (k < 2) return k;
    if (k <= 24) {
        for (size_t i = 1; i < k; i++) {
            int32_t v = x[i];
            size_t j = i;
            while (j > 0 && x[j - 1] > v) {
                x[j] = x[j - 1];
                j--;
            }
            x[j] = v;
        }
    } else {
        qsort(x, k, sizeof(int32_t), cmp_i32);
    }
    size_t o = 1;
    for (size_t i = 1; i < k; i++)
        if (x[i] != x[o - 1]) x[o++] = x[i];
    return o;
}

/* ------------------------------------------------------------------------- determinisation */

/* A DFA's defined transitions as sparse rows (a subset construction's table is mostly -1:
 * about 5% of the cells of a JSON Schema grammar's are set): state s's are sym/tgt[off[s] ..
 * off[s+1]), by increasing symbol.  The minimisation reads these, not the table; the rule
 * automata (gd_nfa_build_rule_dfas) never make the table. */
typedef struct {
    int32_t *off, *sym, *tgt;
    size_t cap, off_cap; /* (while a subset construction appends to them) */
} sparse_rows;

static void sparse_free(sparse_rows *r) {
    free(r->off);
    free(r->sym);
    free(r->tgt);
    memset(r, 0, sizeof *r);
}

typedef struct {
    /* the NFA */
    int32_t n;
    const int32_t *eps_off, *eps_tgt, *mv_off;
    const int32_t *mv; /* moves as (first class, last class, target) triples: one per edge */
    int32_t end, nsym, max_states;
    size_t max_bytes; /* 0: no bound */
    /* scratch */
    uint32_t *seen;   /* [n] closure stamp */
    uint32_t stamp;
    int32_t *stack;   /* [n] */
    int32_t *clo;     /* [n] closure result */
    int32_t *cnt;     /* [nsym + 1], all 0 between expansions */
    int32_t *syms;    /* [2 nsym] a row's symbols and the ends of their targets */
    int32_t *tgt;     /* targets grouped by symbol */
    size_t tgt_cap;
    /* the result */
    set_map states;   /* closure set -> DFA state (entry i is state i) */
    set_map cache;    /* move-target set -> DFA state */
    int32_t *trans;
    size_t trans_rows;
    uint8_t *acc;
    size_t acc_cap;
    sparse_rows *rows; /* not NULL: the rows go here (sparse), no table is made */
    deadline dl;
} det;

static void det_free(det *d) {
    free(d->seen);
    free(d->stack);
    free(d->clo);
    free(d->cnt);
    free(d->syms);
    free(d->tgt);
    set_map_free(&d->states);
    set_map_free(&d->cache);
    free(d->trans);
    free(d->acc);
}

/* Closure of x[0..k) (NFA states), kept to states with a move or the end state, sorted,
 * into d->clo; returns its length. */
static size_t det_closure(det *d, const int32_t *x, size_t k) {
    if (++d->stamp == 0) { /* wrapped: clear the stamps */
        memset(d->seen, 0, sizeof(uint32_t) * (size_t)d->n);
        d->stamp = 1;
    }
    uint32_t st = d->stamp;
    size_t sp = 0, nc = 0, visited = 0;
    for (size_t i = 0; i < k; i++)
        if (d->seen[x[i]] != st) {
            d->seen[x[i]] = st;
            d->stack[sp++] = x[i];
        }
    while (sp) {
        int32_t s = d->stack[--sp];
        visited++;
        if (d->mv_off[s + 1] > d->mv_off[s] || s == d->end) d->clo[nc++] = s;
        for (int32_t j = d->eps_off[s]; j < d->eps_off[s + 1]; j++) {
            int32_t t = d->eps_tgt[j];
            if (d->seen[t] != st) {
                d->seen[t] = st;
                d->stack[sp++] = t;
            }
        }
    }
    d->dl.work += visited;
    return sort_unique(d->clo, nc);
}

/* DFA state of the closure in d->clo[0..k): found, or added (row of -1, acceptance).
 * Returns the state, or a negative GD_DFA_* code. */
static int32_t det_state(det *d, size_t k) {
    uint64_t h = hash_set(d->clo, k);
    int32_t j = set_map_get(&d->states, d->clo, k, h);
    if (j >= 0) return j;
    size_t ns = d->states.n;
    if (ns >= (size_t)d->max_states) return GD_DFA_LIMIT;
    if (d->max_bytes && gd_subset_bytes(ns + 1, (size_t)d->nsym, d->states.n + d->cache.n + 1,
                                        d->states.len + d->cache.len + k) > d->max_bytes)
        return GD_DFA_BYTES;
    if (!d->rows && ns + 1 > d->trans_rows) {
        size_t rows = d->trans_rows;
        int32_t *t = grow(d->trans, &rows, ns + 1, sizeof(int32_t) * (size_t)d->nsym);
        if (!t) return GD_DFA_NOMEM;
        d->trans = t;
        d->trans_rows = rows;
    }
    if (ns + 1 > d->acc_cap) {
        uint8_t *a = grow(d->acc, &d->acc_cap, ns + 1, 1);
        if (!a) return GD_DFA_NOMEM;
        d->acc = a;
    }
    if (set_map_put(&d->states, d->clo, k, h, (int32_t)ns) < 0) return GD_DFA_NOMEM;
    if (!d->rows) {
        int32_t *row = d->trans + ns * (size_t)d->nsym;
        for (int32_t c = 0; c < d->nsym; c++) row[c] = -1;
    }
    uint8_t a = 0;
    for (size_t i = 0; i < k; i++) a |= d->clo[i] == d->end;
    d->acc[ns] = a;
    return (int32_t)ns;
}

/* The row of DFA state i: its moves grouped by symbol, each target set's closure found or
 * added as a state (states are added at the end: i's row is complete when this returns
 * GD_DFA_OK; else a GD_DFA_* code). */
static int det_expand(det *d, size_t i) {
    size_t k;
    if (d->rows) { /* row i starts where row i - 1 ended */
        sparse_rows *r = d->rows;
        if (i + 2 > r->off_cap) {
            int32_t *a = grow(r->off, &r->off_cap, i + 2, sizeof(int32_t));
            if (!a) return GD_DFA_NOMEM;
            r->off = a;
        }
        if (i == 0) r->off[0] = 0;
        r->off[i + 1] = r->off[i];
    }
    const int32_t *mv_off = d->mv_off, *mv = d->mv;
    int32_t nsym = d->nsym;
    const int32_t *cur = set_map_items(&d->states, i, &k);
    /* count moves per symbol, then group their targets by symbol (counting sort), over the
     * symbols the state has moves on only (a few of a grammar's dozens of classes): syms[u]
     * the u-th of them in increasing order, ends[u] the end of its targets in d->tgt; cnt is
     * all zero between calls */
    int32_t *cnt = d->cnt, *syms = d->syms, *ends = d->syms + nsym;
    size_t total = 0, nu = 0;
    for (size_t a = 0; a < k; a++) {
        int32_t x = cur[a];
        for (int32_t j = mv_off[x]; j < mv_off[x + 1]; j++) {
            int32_t c1 = mv[3 * j + 1];
            for (int32_t c = mv[3 * j]; c <= c1; c++)
                if (!cnt[c]++) syms[nu++] = c;
            total += (size_t)(c1 - mv[3 * j]) + 1;
        }
    }
    int fail = deadline_passed(&d->dl, total + k + (size_t)nsym) ? GD_DFA_TIMEOUT : GD_DFA_OK;
    if (!fail && total > d->tgt_cap) {
        int32_t *t = grow(d->tgt, &d->tgt_cap, total, sizeof(int32_t));
        if (!t)
            fail = GD_DFA_NOMEM;
        else
            d->tgt = t;
    }
    if (fail) {
        for (size_t u = 0; u < nu; u++) cnt[syms[u]] = 0;
        return fail;
    }
    if (nu > 16) { /* many: in order by one pass over the symbols */
        nu = 0;
        for (int32_t c = 0; c < nsym; c++)
            if (cnt[c]) syms[nu++] = c;
    } else {
        sort_unique(syms, nu); /* (distinct: sorted only) */
    }
    int32_t start = 0;
    for (size_t u = 0; u < nu; u++) { /* cnt[c]: the start of symbol c; the scatter advances it */
        int32_t c = syms[u], m = cnt[c];
        cnt[c] = start;
        start += m;
    }
    for (size_t a = 0; a < k; a++) {
        int32_t x = cur[a];
        for (int32_t j = mv_off[x]; j < mv_off[x + 1]; j++) {
            int32_t t = mv[3 * j + 2], c1 = mv[3 * j + 1];
            for (int32_t c = mv[3 * j]; c <= c1; c++) d->tgt[cnt[c]++] = t;
        }
    }
    for (size_t u = 0; u < nu; u++) { /* cnt[c]: the end of symbol c's targets */
        ends[u] = cnt[syms[u]];
        cnt[syms[u]] = 0;
    }
    /* cur may move when states are added below: it is not used again */
    int32_t lo = 0;
    for (size_t u = 0; u < nu; u++) {
        int32_t c = syms[u], hi = ends[u];
        int32_t *ts = d->tgt + lo;
        size_t nt = sort_unique(ts, (size_t)(hi - lo));
        lo = hi;
        uint64_t h = hash_set(ts, nt);
        int32_t j = set_map_get(&d->cache, ts, nt, h);
        if (j < 0) {
            size_t kc = det_closure(d, ts, nt);
            if (deadline_passed(&d->dl, 0)) return GD_DFA_TIMEOUT;
            j = det_state(d, kc);
            if (j < 0) return j;
            if (set_map_put(&d->cache, ts, nt, h, j) < 0) return GD_DFA_NOMEM;
        }
        if (d->rows) { /* appended: the rows are made in order, a row's symbols increasing */
            sparse_rows *r = d->rows;
            size_t k0 = (size_t)r->off[i + 1];
            if (k0 + 1 > r->cap) {
                size_t cap = r->cap;
                int32_t *a = grow(r->sym, &cap, k0 + 1, sizeof(int32_t));
                if (!a) return GD_DFA_NOMEM;
                r->sym = a;
                cap = r->cap;
                a = grow(r->tgt, &cap, k0 + 1, sizeof(int32_t));
                if (!a) return GD_DFA_NOMEM;
                r->tgt = a;
                r->cap = cap;
            }
            if (k0 >= (size_t)INT32_MAX) return GD_DFA_NOMEM;
            r->sym[k0] = c;
            r->tgt[k0] = j;
            r->off[i + 1] = (int32_t)(k0 + 1);
        } else {
            d->trans[i * (size_t)nsym + (size_t)c] = j;
        }
    }
    return GD_DFA_OK;
}

static int nfa_valid(int32_t n, const int32_t *eps_off, const int32_t *eps_tgt, const int32_t *mv_off,
                     const int32_t *mv, int32_t start, int32_t end, int32_t nsym) {
    if (n <= 0 || start < 0 || start >= n || end < 0 || end >= n || nsym <= 0) return 0;
    if (eps_off[0] != 0 || mv_off[0] != 0) return 0;
    for (int32_t s = 0; s < n; s++)
        if (eps_off[s + 1] < eps_off[s] || mv_off[s + 1] < mv_off[s]) return 0;
    for (int32_t j = 0; j < eps_off[n]; j++)
        if (eps_tgt[j] < 0 || eps_tgt[j] >= n) return 0;
    for (int32_t j = 0; j < mv_off[n]; j++)
        if (mv[2 * j] < 0 || mv[2 * j] >= nsym || mv[2 * j + 1] < 0 || mv[2 * j + 1] >= n) return 0;
    return 1;
}

size_t gd_subset_bytes(size_t n_states, size_t nsym, size_t n_sets, size_t n_items) {
    /* a set: its entries, its offset and hash (8 + 8), its value (4), two hash slots (8) */
    return 4 * n_states * nsym + n_states + 4 * n_items + 28 * n_sets;
}

/* gd_nfa_determinize over moves as (first class, last class, target) triples (valid: made
 * by coo_csr or checked by gd_nfa_determinize); with rows (not NULL), the rows into *rows
 * (free with sparse_free) and out->trans left NULL. */
static int determinize(int32_t n_nfa, const int32_t *eps_off, const int32_t *eps_tgt, const int32_t *mv_off,
                       const int32_t *mv, int32_t start, int32_t end, int32_t nsym, int32_t max_states,
                       size_t max_bytes, double budget_s, gd_dfa_table *out, sparse_rows *rows) {
    memset(out, 0, sizeof *out);
    if (rows) memset(rows, 0, sizeof *rows);
    if (max_states < 1) max_states = 1; /* the start state is always made */
    det d;
    memset(&d, 0, sizeof d);
    d.n = n_nfa;
    d.eps_off = eps_off;
    d.eps_tgt = eps_tgt;
    d.mv_off = mv_off;
    d.mv = mv;
    d.end = end;
    d.nsym = nsym;
    d.max_states = max_states;
    d.max_bytes = max_bytes;
    d.rows = rows;
    deadline_init(&d.dl, budget_s);
    int rc = GD_DFA_NOMEM;
    d.seen = calloc((size_t)n_nfa, sizeof(uint32_t));
    d.stack = malloc(sizeof(int32_t) * (size_t)n_nfa);
    d.clo = malloc(sizeof(int32_t) * (size_t)n_nfa);
    d.cnt = calloc((size_t)nsym + 1, sizeof(int32_t));
    d.syms = malloc(sizeof(int32_t) * 2 * (size_t)nsym);
    d.tgt_cap = 64;
    d.tgt = malloc(sizeof(int32_t) * d.tgt_cap);
    if (!d.seen || !d.stack || !d.clo || !d.cnt || !d.syms || !d.tgt) goto done;
    if (set_map_init(&d.states) < 0 || set_map_init(&d.cache) < 0) goto done;

    if (deadline_passed(&d.dl, 0)) {
        rc = GD_DFA_TIMEOUT;
        goto done;
    }
    {
        size_t k = det_closure(&d, &start, 1);
        int32_t s0 = det_state(&d, k);
        if (s0 < 0) {
            rc = s0;
            goto done;
        }
    }
    for (size_t i = 0; i < d.states.n; i++) {
        rc = det_expand(&d, i);
        if (rc != GD_DFA_OK) goto done;
    }
    rc = GD_DFA_OK;
    out->n_states = (int32_t)d.states.n;
    out->nsym = nsym;
    out->trans = d.trans;
    out->accepting = d.acc;
    d.trans = NULL;
    d.acc = NULL;
done:
    det_free(&d);
    if (rc != GD_DFA_OK && rows) sparse_free(rows);
    return rc;
}

int gd_nfa_determinize(int32_t n_nfa, const int32_t *eps_off, const int32_t *eps_tgt, const int32_t *mv_off,
                       const int32_t *mv, int32_t start, int32_t end, int32_t nsym, int32_t max_states,
                       size_t max_bytes, double budget_s, gd_dfa_table *out) {
    memset(out, 0, sizeof *out);
    if (!nfa_valid(n_nfa, eps_off, eps_tgt, mv_off, mv, start, end, nsym)) return GD_DFA_INVALID;
    size_t m = (size_t)mv_off[n_nfa];
    int32_t *mv3 = malloc(sizeof(int32_t) * 3 * (m ? m : 1));
    if (!mv3) return GD_DFA_NOMEM;
    for (size_t j = 0; j < m; j++) { /* (symbol, target) -> (symbol, symbol, target) */
        mv3[3 * j] = mv3[3 * j + 1] = mv[2 * j];
        mv3[3 * j + 2] = mv[2 * j + 1];
    }
    int rc = determinize(n_nfa, eps_off, eps_tgt, mv_off, mv3, start, end, nsym, max_states, max_bytes, budget_s,
                         out, NULL);
    free(mv3);
    return rc;
}

void gd_dfa_table_free(gd_dfa_table *t) {
    if (!t) return;
    free(t->trans);
    free(t->accepting);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------- NFA edge lists */

/* An NFA in CSR form with its byte classes (made from edge lists by coo_csr): a state's moves
 * mv_off[s]..mv_off[s + 1] are (first class, last class, target) triples, one per edge (a
 * byte range is a run of classes; a special is one symbol past the classes). */
typedef struct {
    int32_t *eps_off, *eps_tgt, *mv_off, *mv;
    int32_t ncls, nsym;
} csr_nfa;

static void csr_free(csr_nfa *c) {
    free(c->eps_off);
    free(c->eps_tgt);
    free(c->mv_off);
    free(c->mv);
    memset(c, 0, sizeof *c);
}

/* Edge lists -> byte classes (byte_class[256]) and CSR arrays (see gd_nfa_determinize_coo). */
static int coo_csr(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                   const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                   const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                   const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, uint16_t *byte_class,
                   csr_nfa *out) {
    memset(out, 0, sizeof *out);
    if (n_nfa <= 0 || n_nfa == INT32_MAX || n_specials < 0 || start < 0 || start >= n_nfa || end < 0 ||
        end >= n_nfa)
        return GD_DFA_INVALID;
    for (size_t i = 0; i < n_eps; i++)
        if (eps_src[i] < 0 || eps_src[i] >= n_nfa || eps_tgt[i] < 0 || eps_tgt[i] >= n_nfa) return GD_DFA_INVALID;
    for (size_t i = 0; i < n_edges; i++)
        if (e_src[i] < 0 || e_src[i] >= n_nfa || e_tgt[i] < 0 || e_tgt[i] >= n_nfa || e_lo[i] > e_hi[i])
            return GD_DFA_INVALID;
    for (size_t i = 0; i < n_spec; i++)
        if (sp_src[i] < 0 || sp_src[i] >= n_nfa || sp_tgt[i] < 0 || sp_tgt[i] >= n_nfa || sp_sym[i] < 0 ||
            sp_sym[i] >= n_specials)
            return GD_DFA_INVALID;
    /* byte classes: a class starts at 0 and at every lo and hi + 1 (the cuts of _byte_classes) */
    uint8_t cut[257];
    memset(cut, 0, sizeof cut);
    cut[0] = 1;
    for (size_t i = 0; i < n_edges; i++) {
        cut[e_lo[i]] = 1;
        cut[(size_t)e_hi[i] + 1] = 1;
    }
    int32_t ncls = 0;
    for (int b = 0; b < 256; b++) {
        ncls += cut[b];
        byte_class[b] = (uint16_t)(ncls - 1);
    }
    if ((int64_t)ncls + n_specials > INT32_MAX) return GD_DFA_INVALID;
    int32_t nsym = ncls + n_specials;
    /* sizes: every edge is one move (its run of classes), every special edge one */
    size_t n_moves = n_spec + n_edges;
    if (n_eps > (size_t)INT32_MAX || n_moves > (size_t)INT32_MAX / 3) return GD_DFA_INVALID;
    size_t nn = (size_t)n_nfa;
    int32_t *eps_off = calloc(nn + 1, sizeof(int32_t));
    int32_t *mv_off = calloc(nn + 1, sizeof(int32_t));
    int32_t *pos = malloc(sizeof(int32_t) * nn);
    int32_t *et = malloc(sizeof(int32_t) * (n_eps ? n_eps : 1));
    int32_t *mv = malloc(sizeof(int32_t) * 3 * (n_moves ? n_moves : 1));
    if (!eps_off || !mv_off || !pos || !et || !mv) {
        free(eps_off);
        free(mv_off);
        free(pos);
        free(et);
        free(mv);
        return GD_DFA_NOMEM;
    }
    /* CSR by counting sort on the source state (the order within a state does not matter:
     * closures are sets, moves are grouped by symbol) */
    for (size_t i = 0; i < n_eps; i++) eps_off[eps_src[i] + 1]++;
    for (size_t i = 0; i < n_edges; i++) mv_off[e_src[i] + 1]++;
    for (size_t i = 0; i < n_spec; i++) mv_off[sp_src[i] + 1]++;
    for (size_t s = 0; s < nn; s++) {
        eps_off[s + 1] += eps_off[s];
        mv_off[s + 1] += mv_off[s];
    }
    memcpy(pos, eps_off, sizeof(int32_t) * nn);
    for (size_t i = 0; i < n_eps; i++) et[pos[eps_src[i]]++] = eps_tgt[i];
    memcpy(pos, mv_off, sizeof(int32_t) * nn);
    for (size_t i = 0; i < n_edges; i++) {
        size_t j = (size_t)pos[e_src[i]]++;
        mv[3 * j] = byte_class[e_lo[i]];
        mv[3 * j + 1] = byte_class[e_hi[i]];
        mv[3 * j + 2] = e_tgt[i];
    }
    for (size_t i = 0; i < n_spec; i++) {
        size_t j = (size_t)pos[sp_src[i]]++;
        mv[3 * j] = mv[3 * j + 1] = ncls + sp_sym[i];
        mv[3 * j + 2] = sp_tgt[i];
    }
    free(pos);
    out->eps_off = eps_off;
    out->eps_tgt = et;
    out->mv_off = mv_off;
    out->mv = mv;
    out->ncls = ncls;
    out->nsym = nsym;
    return GD_DFA_OK;
}

/* gd_nfa_determinize_coo; with rows (not NULL) as determinize. */
static int determinize_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                           const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                           const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                           const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, int32_t max_states,
                           size_t max_bytes, double budget_s, uint16_t *byte_class, int32_t *n_classes,
                           gd_dfa_table *out, sparse_rows *rows) {
    memset(out, 0, sizeof *out);
    if (rows) memset(rows, 0, sizeof *rows);
    *n_classes = 0;
    csr_nfa c;
    int rc = coo_csr(n_nfa, start, end, n_eps, eps_src, eps_tgt, n_edges, e_src, e_lo, e_hi, e_tgt, n_spec, sp_src,
                     sp_sym, sp_tgt, n_specials, byte_class, &c);
    if (rc != GD_DFA_OK) return rc;
    rc = determinize(n_nfa, c.eps_off, c.eps_tgt, c.mv_off, c.mv, start, end, c.nsym, max_states, max_bytes,
                     budget_s, out, rows);
    if (rc == GD_DFA_OK) {
        *n_classes = c.ncls;
        out->nsym = c.nsym;
    }
    csr_free(&c);
    return rc;
}

int gd_nfa_determinize_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                           const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                           const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                           const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, int32_t max_states,
                           size_t max_bytes, double budget_s, uint16_t *byte_class, int32_t *n_classes,
                           gd_dfa_table *out) {
    return determinize_coo(n_nfa, start, end, n_eps, eps_src, eps_tgt, n_edges, e_src, e_lo, e_hi, e_tgt, n_spec,
                           sp_src, sp_sym, sp_tgt, n_specials, max_states, max_bytes, budget_s, byte_class, n_classes,
                           out, NULL);
}

/* ------------------------------------------------------------------------- lazy determinisation */

struct gd_lazy {
    det d;           /* the subset construction, row i complete iff done[i] */
    csr_nfa nfa;     /* trimmed: every NFA state can reach the end over usable symbols */
    uint8_t *done;
    size_t done_cap;
    int32_t *min_moves; /* [n_nfa] fewest moves (usable symbols) from each NFA state to the end */
    int err;         /* the GD_DFA_* code of the first failed expansion (0: none) */
    size_t n_expanded;
    uint8_t *memo[8];   /* plain-loop memos (gd_walk_opts), grown on write */
    size_t memo_cap[8];
    uint16_t byte_class[256];
};

void gd_lazy_free(gd_lazy *L) {
    if (!L) return;
    det_free(&L->d);
    csr_free(&L->nfa);
    free(L->done);
    free(L->min_moves);
    for (int k = 0; k < 8; k++) free(L->memo[k]);
    free(L);
}

uint8_t gd_lazy_memo_get(const gd_lazy *L, int32_t slot, int32_t s) {
    if (slot < 0 || slot >= 8 || s < 0 || (size_t)s >= L->memo_cap[slot]) return 0;
    return L->memo[slot][s];
}

void gd_lazy_memo_set(gd_lazy *L, int32_t slot, int32_t s, uint8_t v) {
    if (slot < 0 || slot >= 8 || s < 0) return;
    if ((size_t)s >= L->memo_cap[slot]) {
        size_t old = L->memo_cap[slot];
        uint8_t *m = grow(L->memo[slot], &L->memo_cap[slot], (size_t)s + 1, 1);
        if (!m) return; /* not remembered: computed again next time */
        memset(m + old, 0, L->memo_cap[slot] - old);
        L->memo[slot] = m;
    }
    L->memo[slot][s] = v;
}

/* Backward breadth-first search from `end` over eps edges (weight 0) and moves on
 * usable symbols (weight 1: a move whose run of symbols holds one with ok_upto[c + 1] >
 * ok_upto[c], the usable symbols below c counted): dist[s] = fewest usable moves from s
 * to the end, -1 if none. */
static int nfa_dist_to_end(const csr_nfa *c, int32_t n, int32_t end, const int32_t *ok_upto, int32_t *dist) {
    size_t nn = (size_t)n;
    int32_t *ro = calloc(nn + 1, sizeof(int32_t)), *pos = malloc(sizeof(int32_t) * nn);
    size_t ne = (size_t)c->eps_off[n], nm = (size_t)c->mv_off[n];
    int32_t *rs = malloc(sizeof(int32_t) * (ne + nm + 1)); /* source of each reversed edge */
    uint8_t *rw = malloc(ne + nm + 1);                    /* its weight */
    int32_t *dq = malloc(sizeof(int32_t) * (nn + 1));
    if (!ro || !pos || !rs || !rw || !dq) {
        free(ro);
        free(pos);
        free(rs);
        free(rw);
        free(dq);
        return GD_DFA_NOMEM;
    }
    for (int32_t s = 0; s < n; s++) {
        for (int32_t j = c->eps_off[s]; j < c->eps_off[s + 1]; j++) ro[c->eps_tgt[j] + 1]++;
        for (int32_t j = c->mv_off[s]; j < c->mv_off[s + 1]; j++)
            if (ok_upto[c->mv[3 * j + 1] + 1] > ok_upto[c->mv[3 * j]]) ro[c->mv[3 * j + 2] + 1]++;
    }
    for (size_t s = 0; s < nn; s++) ro[s + 1] += ro[s];
    memcpy(pos, ro, sizeof(int32_t) * nn);
    for (int32_t s = 0; s < n; s++) {
        for (int32_t j = c->eps_off[s]; j < c->eps_off[s + 1]; j++) {
            int32_t k = pos[c->eps_tgt[j]]++;
            rs[k] = s;
            rw[k] = 0;
        }
        for (int32_t j = c->mv_off[s]; j < c->mv_off[s + 1]; j++)
            if (ok_upto[c->mv[3 * j + 1] + 1] > ok_upto[c->mv[3 * j]]) {
                int32_t k = pos[c->mv[3 * j + 2]]++;
                rs[k] = s;
                rw[k] = 1;
            }
    }
    for (size_t s = 0; s < nn; s++) dist[s] = -1;
    /* layer by layer: dq holds every state once, in the order its distance is fixed; a layer
     * first takes its eps predecessors (weight 0), then makes the next from its moves */
    size_t lo = 0, hi = 1;
    int32_t d = 0;
    dist[end] = 0;
    dq[0] = end;
    while (lo < hi) {
        for (size_t i = lo; i < hi; i++)
            for (int32_t k = ro[dq[i]]; k < ro[dq[i] + 1]; k++)
                if (rw[k] == 0 && dist[rs[k]] < 0) {
                    dist[rs[k]] = d;
                    dq[hi++] = rs[k];
                }
        size_t nlo = hi;
        for (size_t i = lo; i < nlo; i++)
            for (int32_t k = ro[dq[i]]; k < ro[dq[i] + 1]; k++)
                if (rw[k] == 1 && dist[rs[k]] < 0) {
                    dist[rs[k]] = d + 1;
                    dq[hi++] = rs[k];
                }
        lo = nlo;
        d++;
    }
    free(ro);
    free(pos);
    free(rs);
    free(rw);
    free(dq);
    return GD_DFA_OK;
}

gd_lazy *gd_lazy_new_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                         const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                         const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                         const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, const uint8_t *byte_ok,
                         int32_t max_states, size_t max_bytes, int *rc) {
    gd_lazy *L = calloc(1, sizeof *L);
    csr_nfa c;
    uint8_t *sym_ok = NULL;
    int32_t *ok_upto = NULL, *dist = NULL;
    *rc = GD_DFA_NOMEM;
    if (!L) return NULL;
    *rc = coo_csr(n_nfa, start, end, n_eps, eps_src, eps_tgt, n_edges, e_src, e_lo, e_hi, e_tgt, n_spec, sp_src,
                  sp_sym, sp_tgt, n_specials, L->byte_class, &c);
    if (*rc != GD_DFA_OK) {
        free(L);
        return NULL;
    }
    *rc = GD_DFA_NOMEM;
    sym_ok = calloc((size_t)c.nsym, 1);
    ok_upto = malloc(sizeof(int32_t) * ((size_t)c.nsym + 1));
    dist = malloc(sizeof(int32_t) * (size_t)n_nfa);
    if (!sym_ok || !ok_upto || !dist) goto fail;
    for (int b = 0; b < 256; b++)
        if (!byte_ok || byte_ok[b]) sym_ok[L->byte_class[b]] = 1;
    for (int32_t k = c.ncls; k < c.nsym; k++) sym_ok[k] = 1;
    ok_upto[0] = 0; /* the usable symbols below each (a move is usable iff its run holds one) */
    for (int32_t k = 0; k < c.nsym; k++) ok_upto[k + 1] = ok_upto[k] + sym_ok[k];
    if ((*rc = nfa_dist_to_end(&c, n_nfa, end, ok_upto, dist)) != GD_DFA_OK) goto fail;
    if (dist[start] < 0) {
        *rc = GD_DFA_EMPTY;
        goto fail;
    }
    /* trim in place: keep the edges between live states (a move on an unusable symbol too,
     * as the eager prune keeps such a transition between live DFA states) */
    {
        int32_t we = 0, wm = 0;
        for (int32_t s = 0; s < n_nfa; s++) {
            int32_t e0 = c.eps_off[s], e1 = c.eps_off[s + 1], m0 = c.mv_off[s], m1 = c.mv_off[s + 1];
            c.eps_off[s] = we;
            c.mv_off[s] = wm;
            if (dist[s] < 0) continue;
            for (int32_t j = e0; j < e1; j++)
                if (dist[c.eps_tgt[j]] >= 0) c.eps_tgt[we++] = c.eps_tgt[j];
            for (int32_t j = m0; j < m1; j++)
                if (dist[c.mv[3 * j + 2]] >= 0) {
                    memmove(c.mv + 3 * (size_t)wm, c.mv + 3 * (size_t)j, 3 * sizeof(int32_t));
                    wm++;
                }
        }
        c.eps_off[n_nfa] = we;
        c.mv_off[n_nfa] = wm;
    }
    free(sym_ok);
    free(ok_upto);
    sym_ok = NULL;
    ok_upto = NULL;
    L->nfa = c;
    L->min_moves = dist;
    dist = NULL;
    det *d = &L->d;
    d->n = n_nfa;
    d->eps_off = c.eps_off;
    d->eps_tgt = c.eps_tgt;
    d->mv_off = c.mv_off;
    d->mv = c.mv;
    d->end = end;
    d->nsym = c.nsym;
    d->max_states = max_states < 1 ? 1 : max_states;
    d->max_bytes = max_bytes;
    deadline_init(&d->dl, 1e300);
    d->seen = calloc((size_t)n_nfa, sizeof(uint32_t));
    d->stack = malloc(sizeof(int32_t) * (size_t)n_nfa);
    d->clo = malloc(sizeof(int32_t) * (size_t)n_nfa);
    d->cnt = calloc((size_t)c.nsym + 1, sizeof(int32_t));
    d->syms = malloc(sizeof(int32_t) * 2 * (size_t)c.nsym);
    d->tgt_cap = 64;
    d->tgt = malloc(sizeof(int32_t) * d->tgt_cap);
    if (!d->seen || !d->stack || !d->clo || !d->cnt || !d->syms || !d->tgt) goto fail_l;
    if (set_map_init(&d->states) < 0 || set_map_init(&d->cache) < 0) goto fail_l;
    {
        size_t k = det_closure(d, &start, 1);
        int32_t s0 = det_state(d, k);
        if (s0 < 0) {
            *rc = s0;
            goto fail_l;
        }
    }
    *rc = GD_DFA_OK;
    return L;
fail:
    csr_free(&c);
    free(sym_ok);
    free(ok_upto);
    free(dist);
    free(L);
    return NULL;
fail_l:
    if (*rc == GD_DFA_OK) *rc = GD_DFA_NOMEM;
    gd_lazy_free(L);
    return NULL;
}

static int lazy_expand(gd_lazy *L, int32_t s) {
    int rc = det_expand(&L->d, (size_t)s);
    if (rc != GD_DFA_OK) {
        if (!L->err) L->err = rc;
        return rc;
    }
    size_t n = L->d.states.n;
    if (n > L->done_cap) {
        size_t old = L->done_cap;
        uint8_t *dn = grow(L->done, &L->done_cap, n, 1);
        if (!dn) {
            if (!L->err) L->err = GD_DFA_NOMEM;
            return GD_DFA_NOMEM;
        }
        memset(dn + old, 0, L->done_cap - old);
        L->done = dn;
    }
    L->done[s] = 1;
    L->n_expanded++;
    return GD_DFA_OK;
}

int32_t gd_lazy_step(gd_lazy *L, int32_t s, int32_t sym) {
    if (s < 0 || (size_t)s >= L->d.states.n || sym < 0 || sym >= L->d.nsym) return GD_LAZY_FAIL;
    if (((size_t)s >= L->done_cap || !L->done[s]) && lazy_expand(L, s) != GD_DFA_OK) return GD_LAZY_FAIL;
    return L->d.trans[(size_t)s * (size_t)L->d.nsym + (size_t)sym];
}

const int32_t *gd_lazy_row(gd_lazy *L, int32_t s) {
    if (s < 0 || (size_t)s >= L->d.states.n) return NULL;
    if (((size_t)s >= L->done_cap || !L->done[s]) && lazy_expand(L, s) != GD_DFA_OK) return NULL;
    return L->d.trans + (size_t)s * (size_t)L->d.nsym;
}

void gd_lazy_rows_get(const gd_lazy *L, gd_lazy_rows *out) {
    out->trans = L->d.trans;
    out->done = L->done;
    out->n_done = L->done_cap < L->d.states.n ? L->done_cap : L->d.states.n;
    out->nsym = (size_t)L->d.nsym;
}

size_t gd_lazy_n_states(const gd_lazy *L) { return L->d.states.n; }

int32_t gd_lazy_nsym(const gd_lazy *L) { return L->d.nsym; }

const uint16_t *gd_lazy_byte_class(const gd_lazy *L) { return L->byte_class; }

int32_t gd_lazy_n_classes(const gd_lazy *L) { return L->nfa.ncls; }

int gd_lazy_accepting(const gd_lazy *L, int32_t s) {
    return s >= 0 && (size_t)s < L->d.states.n && L->d.acc[s];
}

int32_t gd_lazy_min_moves(const gd_lazy *L, int32_t s) {
    if (s < 0 || (size_t)s >= L->d.states.n) return -1;
    size_t k;
    const int32_t *x = set_map_items(&L->d.states, (size_t)s, &k);
    int32_t best = -1;
    for (size_t i = 0; i < k; i++) {
        int32_t v = L->min_moves[x[i]];
        if (v >= 0 && (best < 0 || v < best)) best = v;
    }
    return best;
}

void gd_lazy_info(const gd_lazy *L, gd_lazy_stats *out) {
    out->n_states = (int32_t)L->d.states.n;
    out->n_classes = L->nfa.ncls;
    out->nsym = L->d.nsym;
    out->n_expanded = (int32_t)L->n_expanded;
    out->err = L->err;
    out->bytes = sizeof *L + gd_subset_bytes(L->d.states.n, (size_t)L->d.nsym, L->d.states.n + L->d.cache.n,
                                             L->d.states.len + L->d.cache.len) +
                 L->done_cap + 4 * ((size_t)L->nfa.eps_off[L->d.n] + 3 * (size_t)L->nfa.mv_off[L->d.n]) +
                 4 * 3 * ((size_t)L->d.n + 1) + 4 * (size_t)L->d.n /* seen */ + 8 * (size_t)L->d.n;
    memcpy(out->byte_class, L->byte_class, sizeof L->byte_class);
}

/* ------------------------------------------------------------------------- reachability */

int gd_dfa_bfs(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *col_ok, const uint8_t *node_ok,
               int reverse, const int32_t *sources, size_t n_sources, int32_t *dist) {
    if (n < 0 || nsym <= 0) return GD_DFA_INVALID;
    size_t nn = (size_t)n, ns = (size_t)nsym, ncell = nn * ns;
    for (size_t i = 0; i < ncell; i++)
        if (trans[i] < -1 || trans[i] >= n) return GD_DFA_INVALID;
    for (size_t i = 0; i < n_sources; i++)
        if (sources[i] < 0 || sources[i] >= n) return GD_DFA_INVALID;
    int32_t *queue = malloc(sizeof(int32_t) * (nn ? nn : 1));
    int32_t *off = NULL, *pred = NULL;
    if (!queue) return GD_DFA_NOMEM;
    if (reverse) { /* predecessors of each state over the allowed columns (CSR, counting sort) */
        off = calloc(nn + 1, sizeof(int32_t));
        if (!off) {
            free(queue);
            return GD_DFA_NOMEM;
        }
        size_t m = 0;
        for (size_t s = 0; s < nn; s++)
            for (size_t c = 0; c < ns; c++) {
                int32_t t = trans[s * ns + c];
                if (t >= 0 && (!col_ok || col_ok[c])) {
                    off[t + 1]++;
                    m++;
                }
            }
        if (m > (size_t)INT32_MAX) {
            free(queue);
            free(off);
            return GD_DFA_INVALID;
        }
        pred = malloc(sizeof(int32_t) * (m ? m : 1));
        if (!pred) {
            free(queue);
            free(off);
            return GD_DFA_NOMEM;
        }
        for (size_t q = 0; q < nn; q++) off[q + 1] += off[q];
        /* fill from the back of each run: off[t] ends at the start of t's run */
        for (size_t s = 0; s < nn; s++)
            for (size_t c = 0; c < ns; c++) {
                int32_t t = trans[s * ns + c];
                if (t >= 0 && (!col_ok || col_ok[c])) pred[off[t]++] = (int32_t)s;
            }
        for (size_t q = nn; q > 0; q--) off[q] = off[q - 1];
        off[0] = 0;
    }
    for (size_t s = 0; s < nn; s++) dist[s] = -1;
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < n_sources; i++) {
        int32_t s = sources[i];
        if (dist[s] < 0 && (!node_ok || node_ok[s])) {
            dist[s] = 0;
            queue[tail++] = s;
        }
    }
    while (head < tail) {
        int32_t s = queue[head++], d = dist[s] + 1;
        if (reverse) {
            for (int32_t j = off[s]; j < off[s + 1]; j++) {
                int32_t p = pred[j];
                if (dist[p] < 0 && (!node_ok || node_ok[p])) {
                    dist[p] = d;
                    queue[tail++] = p;
                }
            }
        } else {
            const int32_t *row = trans + (size_t)s * ns;
            for (size_t c = 0; c < ns; c++) {
                int32_t t = row[c];
                if (t >= 0 && (!col_ok || col_ok[c]) && dist[t] < 0 && (!node_ok || node_ok[t])) {
                    dist[t] = d;
                    queue[tail++] = t;
                }
            }
        }
    }
    free(queue);
    free(off);
    free(pred);
    return (int)tail;
}

int gd_dfa_prune_map(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, const uint8_t *col_ok,
                     int32_t *newnum) {
    if (n <= 0 || nsym <= 0) return GD_DFA_INVALID;
    size_t nn = (size_t)n;
    int rc = GD_DFA_NOMEM;
    int32_t *live = malloc(sizeof(int32_t) * nn);
    int32_t *src = malloc(sizeof(int32_t) * nn);
    uint8_t *ok = malloc(nn);
    if (!live || !src || !ok) goto done;
    size_t na = 0;
    for (size_t s = 0; s < nn; s++)
        if (accepting[s]) src[na++] = (int32_t)s;
    rc = gd_dfa_bfs(trans, n, nsym, col_ok, NULL, 1, src, na, live);
    if (rc < 0) goto done;
    if (live[0] < 0) {
        rc = 0;
        goto done;
    }
    for (size_t s = 0; s < nn; s++) ok[s] = live[s] >= 0;
    src[0] = 0;
    rc = gd_dfa_bfs(trans, n, nsym, NULL, ok, 0, src, 1, newnum);
    if (rc < 0) goto done;
    /* new numbers in the old order */
    int32_t k = 0;
    for (size_t s = 0; s < nn; s++) newnum[s] = newnum[s] >= 0 ? k++ : -1;
    rc = k;
done:
    free(live);
    free(src);
    free(ok);
    return rc;
}

void gd_dfa_prune_apply(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting,
                        const int32_t *newnum, int32_t *out_trans, uint8_t *out_accepting) {
    size_t nn = (size_t)n, ns = (size_t)nsym;
    /* a kept state's live targets are kept (reached through it) */
    for (size_t s = 0; s < nn; s++) {
        int32_t i = newnum[s];
        if (i < 0) continue;
        const int32_t *row = trans + s * ns;
        int32_t *o = out_trans + (size_t)i * ns;
        for (size_t c = 0; c < ns; c++) o[c] = row[c] >= 0 ? newnum[row[c]] : -1;
        out_accepting[i] = accepting[s] ? 1 : 0;
    }
}

int gd_dfa_prune(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, const uint8_t *col_ok,
                 int32_t *out_trans, uint8_t *out_accepting) {
    if (n <= 0 || nsym <= 0) return GD_DFA_INVALID;
    int32_t *newnum = malloc(sizeof(int32_t) * (size_t)n);
    if (!newnum) return GD_DFA_NOMEM;
    int rc = gd_dfa_prune_map(trans, n, nsym, accepting, col_ok, newnum);
    if (rc > 0) gd_dfa_prune_apply(trans, n, nsym, accepting, newnum, out_trans, out_accepting);
    free(newnum);
    return rc;
}

/* ------------------------------------------------------------------------- minimisation */

/* A refinable partition of 0..n-1 (Valmari): elements of set s are E[F..P) (st[s]), el[e].L
 * is the place of e in E, el[e].S its set; marking moves an element to the front of its
 * set.  An element's place and set, and a set's bounds, sit together (one cache line per
 * mark where they were four arrays).  X (not NULL): a value per place, moved with the
 * elements (the cords' tails, read in order by the refinement). */
typedef struct {
    int32_t L, S;
} part_el;

typedef struct {
    int32_t F, P, M, pad;
} part_set;

typedef struct {
    size_t z;                  /* number of sets */
    int32_t *E, *W, *X;
    part_el *el;
    part_set *st;
    size_t w;                  /* touched sets in W */
} partition;

static int part_init(partition *p, size_t n, int with_x) {
    size_t m = n ? n : 1;
    p->E = malloc(sizeof(int32_t) * m);
    p->W = malloc(sizeof(int32_t) * m);
    p->X = with_x ? malloc(sizeof(int32_t) * m) : NULL;
    p->el = malloc(sizeof(part_el) * m);
    p->st = malloc(sizeof(part_set) * m);
    p->w = 0;
    if (!p->E || !p->W || !p->el || !p->st || (with_x && !p->X)) return -1;
    for (size_t i = 0; i < n; i++) {
        p->E[i] = p->el[i].L = (int32_t)i;
        p->el[i].S = 0;
    }
    p->z = n ? 1 : 0;
    p->st[0].F = 0;
    p->st[0].P = (int32_t)n;
    p->st[0].M = 0;
    return 0;
}

static void part_free(partition *p) {
    free(p->E);
    free(p->W);
    free(p->X);
    free(p->el);
    free(p->st);
}

static inline void part_mark(partition *p, int32_t e) {
    part_el *pe = p->el + e;
    int32_t s = pe->S, i = pe->L;
    part_set *ps = p->st + s;
    int32_t j = ps->F + ps->M;
    if (i < j) return; /* already marked */
    int32_t o = p->E[j];
    p->E[i] = o;
    p->el[o].L = i;
    p->E[j] = e;
    pe->L = j;
    if (p->X) {
        int32_t x = p->X[i];
        p->X[i] = p->X[j];
        p->X[j] = x;
    }
    if (!ps->M++) p->W[p->w++] = s;
}

/* Splits every touched set into its marked and unmarked parts; the smaller part becomes a
 * new set (the larger keeps the old id). */
static void part_split(partition *p) {
    while (p->w) {
        int32_t s = p->W[--p->w];
        part_set *ps = p->st + s;
        int32_t j = ps->F + ps->M;
        if (j == ps->P) {
            ps->M = 0;
            continue;
        }
        int32_t z = (int32_t)p->z;
        part_set *pz = p->st + z;
        if (ps->M <= ps->P - j) {
            pz->F = ps->F;
            pz->P = ps->F = j;
        } else {
            pz->P = ps->P;
            pz->F = ps->P = j;
        }
        for (int32_t i = pz->F; i < pz->P; i++) p->el[p->E[i]].S = z;
        ps->M = pz->M = 0;
        p->z++;
    }
}

static int32_t uf_find(int32_t *f, int32_t x) {
    while (f[x] != x) {
        f[x] = f[f[x]];
        x = f[x];
    }
    return x;
}


/* One pass over the table to count (and check) its entries, one to copy them.  GD_DFA_OK,
 * GD_DFA_INVALID (a target out of range, or more than INT32_MAX transitions), GD_DFA_NOMEM. */
static int sparse_of(const int32_t *trans, int32_t n, int32_t nsym, sparse_rows *r, size_t *m_out) {
    size_t nn = (size_t)n, ns = (size_t)nsym, m = 0;
    memset(r, 0, sizeof *r);
    r->off = malloc(sizeof(int32_t) * (nn + 1));
    if (!r->off) return GD_DFA_NOMEM;
    r->off[0] = 0;
    for (size_t s = 0; s < nn; s++) {
        const int32_t *row = trans + s * ns;
        for (size_t c = 0; c < ns; c++) {
            int32_t x = row[c];
            if (x < -1 || x >= n) return GD_DFA_INVALID;
            m += x >= 0;
        }
        if (m > (size_t)INT32_MAX) return GD_DFA_INVALID;
        r->off[s + 1] = (int32_t)m;
    }
    r->sym = malloc(sizeof(int32_t) * (m ? m : 1));
    r->tgt = malloc(sizeof(int32_t) * (m ? m : 1));
    if (!r->sym || !r->tgt) return GD_DFA_NOMEM;
    size_t j = 0;
    for (size_t s = 0; s < nn; s++) {
        const int32_t *row = trans + s * ns;
        for (size_t c = 0; c < ns; c++)
            if (row[c] >= 0) {
                r->sym[j] = (int32_t)c;
                r->tgt[j++] = row[c];
            }
    }
    *m_out = m;
    return GD_DFA_OK;
}

/* Hash of state s's row with every target replaced by its representative, and acceptance. */
static uint64_t row_hash(const sparse_rows *r, const uint8_t *accepting, int32_t *f, int32_t s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(accepting[s] != 0);
    for (int32_t j = r->off[s]; j < r->off[s + 1]; j++) {
        h ^= (uint64_t)(uint32_t)uf_find(f, r->tgt[j]) + ((uint64_t)(uint32_t)r->sym[j] << 32);
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
    }
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 32);
}

static int rows_equal(const sparse_rows *r, const uint8_t *accepting, int32_t *f, int32_t a, int32_t b) {
    if ((accepting[a] != 0) != (accepting[b] != 0)) return 0;
    int32_t ja = r->off[a], jb = r->off[b], k = r->off[a + 1] - ja;
    if (k != r->off[b + 1] - jb) return 0;
    for (int32_t i = 0; i < k; i++)
        if (r->sym[ja + i] != r->sym[jb + i] || uf_find(f, r->tgt[ja + i]) != uf_find(f, r->tgt[jb + i])) return 0;
    return 1;
}

/* Merges states whose rows (targets up to merging) and acceptance are identical, until none
 * are: f[s] (union-find) ends at a representative equivalent to s.  A worklist re-examines
 * the predecessors of each merged state, so duplicated acyclic parts of a subset
 * construction (the same sub-automaton reached two ways, Snowplow's optional properties)
 * merge bottom-up in time linear in the transitions; what is left is for the partition
 * refinement.  GD_DFA_OK, GD_DFA_NOMEM or GD_DFA_TIMEOUT. */
static int premerge(const sparse_rows *r, int32_t n, const uint8_t *accepting, size_t m, int32_t *f,
                    deadline *dl) {
    size_t nn = (size_t)n;
    int rc = GD_DFA_NOMEM;
    int32_t *off = calloc(nn + 1, sizeof(int32_t)), *pred = malloc(sizeof(int32_t) * (m ? m : 1));
    int32_t *stack = malloc(sizeof(int32_t) * nn);
    uint8_t *inq = malloc(nn);
    size_t cap = 1024;
    while (cap < 2 * nn) cap *= 2;
    uint64_t *th = malloc(sizeof(uint64_t) * cap);
    int32_t *ts = malloc(sizeof(int32_t) * cap);
    size_t used = 0;
    if (!off || !pred || !stack || !inq || !th || !ts) goto done;
    for (size_t i = 0; i < cap; i++) ts[i] = -1;
    for (size_t j = 0; j < m; j++) off[r->tgt[j] + 1]++;
    for (size_t q = 0; q < nn; q++) off[q + 1] += off[q];
    {
        int32_t *pos = malloc(sizeof(int32_t) * nn);
        if (!pos) goto done;
        memcpy(pos, off, sizeof(int32_t) * nn);
        for (size_t s = 0; s < nn; s++)
            for (int32_t j = r->off[s]; j < r->off[s + 1]; j++) pred[pos[r->tgt[j]]++] = (int32_t)s;
        free(pos);
    }
    size_t sp = 0;
    for (size_t s = nn; s > 0; s--) { /* popped in increasing order: state 0 first */
        f[s - 1] = (int32_t)(s - 1);
        stack[sp++] = (int32_t)(s - 1);
        inq[s - 1] = 1;
    }
    /* a row is read once per state and once per merge of one of its targets (at most n + m
     * reads); at most 17 n of them, so a dense table whose merges push many predecessors
     * costs at most 17 passes over the table (the merges made stand; the refinement does
     * the rest) */
    size_t budget = nn + (m < 16 * nn ? m : 16 * nn), work = 0;
    while (sp && work++ < budget) {
        int32_t s = stack[--sp];
        inq[s] = 0;
        if (deadline_passed(dl, (size_t)(r->off[s + 1] - r->off[s]) + 1)) {
            rc = GD_DFA_TIMEOUT;
            goto done;
        }
        if (f[s] != s) continue;
        uint64_t h = row_hash(r, accepting, f, s);
        size_t mask = cap - 1, slot = (size_t)h & mask;
        int32_t x0 = -1;
        for (; ts[slot] >= 0; slot = (slot + 1) & mask) {
            int32_t x = ts[slot];
            if (th[slot] == h && x != s && f[x] == x && rows_equal(r, accepting, f, x, s)) {
                x0 = x;
                break;
            }
        }
        if (x0 < 0) { /* a new row: remember it (stale entries stay, never matched wrongly) */
            if (2 * (used + 1) > cap) {
                size_t cap2 = 2 * cap;
                uint64_t *th2 = malloc(sizeof(uint64_t) * cap2);
                int32_t *ts2 = malloc(sizeof(int32_t) * cap2);
                if (!th2 || !ts2) {
                    free(th2);
                    free(ts2);
                    goto done;
                }
                for (size_t i = 0; i < cap2; i++) ts2[i] = -1;
                for (size_t i = 0; i < cap; i++)
                    if (ts[i] >= 0) {
                        size_t j = (size_t)th[i] & (cap2 - 1);
                        while (ts2[j] >= 0) j = (j + 1) & (cap2 - 1);
                        ts2[j] = ts[i];
                        th2[j] = th[i];
                    }
                free(th);
                free(ts);
                th = th2;
                ts = ts2;
                cap = cap2;
                mask = cap - 1;
                slot = (size_t)h & mask;
                while (ts[slot] >= 0) slot = (slot + 1) & mask;
            }
            ts[slot] = s;
            th[slot] = h;
            used++;
            continue;
        }
        /* s merges into x0 (the smaller index represents the class) */
        int32_t lo = x0 < s ? x0 : s, hi = x0 < s ? s : x0;
        f[hi] = lo;
        if (hi == x0) { /* x0's table entry now stands for a merged state: s takes its place */
            ts[slot] = lo;
        }
        for (int32_t j = off[hi]; j < off[hi + 1]; j++) {
            int32_t p = pred[j];
            if (f[p] == p && !inq[p]) {
                inq[p] = 1;
                stack[sp++] = p;
            }
        }
    }
    rc = GD_DFA_OK;
done:
    free(off);
    free(pred);
    free(stack);
    free(inq);
    free(th);
    free(ts);
    return rc;
}

/* The initial blocks of minimize_rows (see there) in B (from part_init: one set), block 0
 * the largest; *all_live (when not NULL): whether every class reaches an accepting one.
 * dist and queue: nn entries of scratch.  0, or -1 (no memory). */
static int initial_blocks(partition *B, const sparse_rows *R, const int32_t *reps, size_t nn,
                          const uint8_t *accepting, const int32_t *T, const int32_t *Fh, int32_t *dist,
                          int32_t *queue, int *all_live) {
    size_t head = 0, tail = 0;
    for (size_t q = 0; q < nn; q++) {
        dist[q] = -1;
        if (accepting[reps[q]]) {
            dist[q] = 0;
            queue[tail++] = (int32_t)q;
        }
    }
    while (head < tail) {
        int32_t q = queue[head++];
        for (int32_t j = Fh[q]; j < Fh[q + 1]; j++) {
            int32_t p = T[j];
            if (dist[p] < 0) {
                dist[p] = dist[q] + 1;
                queue[tail++] = p;
            }
        }
    }
    if (all_live) *all_live = tail == nn;
    if (nn < 2) return 0;
    /* the key of each class (a hash: classes with equal keys share it; two keys sharing a
     * hash only make a coarser start), then the blocks by key, numbered in order of their
     * first class, their sizes in P */
    size_t cap = 1024;
    while (cap < 2 * nn) cap *= 2;
    uint64_t *kh = malloc(sizeof(uint64_t) * cap);
    int32_t *ks = malloc(sizeof(int32_t) * cap);
    if (!kh || !ks) {
        free(kh);
        free(ks);
        return -1;
    }
    for (size_t i = 0; i < cap; i++) ks[i] = -1;
    int32_t nb = 0, *blk = queue; /* (the queue is done with) */
    for (size_t q = 0; q < nn; q++) {
        int32_t s = reps[q];
        uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(accepting[s] != 0) << 40) ^ (uint64_t)(uint32_t)dist[q];
        for (int32_t j = R->off[s]; j < R->off[s + 1]; j++) {
            h ^= (uint64_t)(uint32_t)R->sym[j] + 0x632BE59BD9B4E019ull;
            h *= 0xBF58476D1CE4E5B9ull;
            h ^= h >> 31;
        }
        h ^= h >> 29;
        h *= 0x94D049BB133111EBull;
        h ^= h >> 32;
        size_t slot = (size_t)h & (cap - 1);
        while (ks[slot] >= 0 && kh[slot] != h) slot = (slot + 1) & (cap - 1);
        if (ks[slot] < 0) {
            ks[slot] = nb;
            kh[slot] = h;
            B->st[nb++].P = 0;
        }
        blk[q] = ks[slot];
        B->st[blk[q]].P++;
    }
    free(kh);
    free(ks);
    /* block 0 (never a splitter) the largest: swap its number with the largest's */
    int32_t big = 0;
    for (int32_t b = 1; b < nb; b++)
        if (B->st[b].P > B->st[big].P) big = b;
    if (big) {
        int32_t x = B->st[0].P;
        B->st[0].P = B->st[big].P;
        B->st[big].P = x;
        for (size_t q = 0; q < nn; q++) blk[q] = blk[q] == 0 ? big : blk[q] == big ? 0 : blk[q];
    }
    int32_t at = 0;
    for (int32_t b = 0; b < nb; b++) {
        B->st[b].F = at;
        at += B->st[b].P;
        B->st[b].P = B->st[b].F; /* (the fill position, then the end) */
        B->st[b].M = 0;
    }
    for (size_t q = 0; q < nn; q++) {
        int32_t b = blk[q], i = B->st[b].P++;
        B->E[i] = (int32_t)q;
        B->el[q].L = i;
        B->el[q].S = b;
    }
    B->z = (size_t)nb;
    return 0;
}

/* gd_dfa_minimize of the DFA given as its sparse rows R (m0 transitions); with all_live (not
 * NULL): whether every state can reach an accepting state (then the DFA is trimmed, its
 * states being reachable), found on the classes left after the merging over their incoming
 * transitions. */
static int minimize_rows(const sparse_rows *Rp, size_t m0, int32_t n, int32_t nsym, const uint8_t *accepting,
                         double budget_s, int32_t *block, int *all_live) {
    if (n <= 0 || nsym <= 0) return n == 0 && nsym > 0 ? 0 : GD_DFA_INVALID;
    size_t n0 = (size_t)n;
    const sparse_rows R = *Rp;
    deadline dl;
    deadline_init(&dl, budget_s);
    int rc = GD_DFA_NOMEM;
    partition B, C;
    memset(&B, 0, sizeof B);
    memset(&C, 0, sizeof C);
    int32_t *T = NULL, *Y = NULL, *Fh = NULL, *lab = NULL;
    /* first merge the states with identical rows (premerge); the partition refinement then
     * works on the classes: qid[s] is the class of state s, reps[q] the first state of class q */
    int32_t *f = malloc(sizeof(int32_t) * n0), *qid = malloc(sizeof(int32_t) * n0);
    int32_t *reps = malloc(sizeof(int32_t) * n0);
    if (!f || !qid || !reps) goto done;
    if (deadline_passed(&dl, 0)) {
        rc = GD_DFA_TIMEOUT;
        goto done;
    }
    rc = premerge(&R, n, accepting, m0, f, &dl);
    if (rc != GD_DFA_OK) goto done;
    rc = GD_DFA_NOMEM;
    size_t nn = 0, m = 0;
    for (size_t s = 0; s < n0; s++)
        if (uf_find(f, (int32_t)s) == (int32_t)s) {
            qid[s] = (int32_t)nn;
            reps[nn++] = (int32_t)s;
        }
    for (size_t s = 0; s < n0; s++) qid[s] = qid[uf_find(f, (int32_t)s)];
    for (size_t q = 0; q < nn; q++) m += (size_t)(R.off[reps[q] + 1] - R.off[reps[q]]);
    T = malloc(sizeof(int32_t) * (m ? m : 1));      /* tail of transition t */
    Y = malloc(sizeof(int32_t) * (m ? m : 1));      /* symbol of transition t */
    Fh = calloc(nn + 1, sizeof(int32_t));           /* transitions Fh[q]..Fh[q+1]: into q */
    lab = calloc((size_t)nsym + 1, sizeof(int32_t)); /* start of each symbol's cord */
    if (!T || !Y || !Fh || !lab) goto done;
    if (part_init(&B, nn, 0) < 0 || part_init(&C, m, 1) < 0) goto done;
    /* transitions (of the classes) numbered by head, then by tail (counting sort): a
     * block's incoming transitions are runs of numbers */
    for (size_t q = 0; q < nn; q++)
        for (int32_t j = R.off[reps[q]]; j < R.off[reps[q] + 1]; j++) {
            Fh[qid[R.tgt[j]] + 1]++;
            lab[R.sym[j] + 1]++;
        }
    for (size_t q = 0; q < nn; q++) Fh[q + 1] += Fh[q];
    for (int32_t c = 0; c < nsym; c++) lab[c + 1] += lab[c];
    {
        int32_t *pos = malloc(sizeof(int32_t) * (nn > (size_t)nsym ? nn : (size_t)nsym));
        if (!pos) goto done;
        memcpy(pos, Fh, sizeof(int32_t) * nn);
        for (size_t q = 0; q < nn; q++)
            for (int32_t j = R.off[reps[q]]; j < R.off[reps[q] + 1]; j++) {
                int32_t e = pos[qid[R.tgt[j]]]++;
                T[e] = (int32_t)q;
                Y[e] = R.sym[j];
            }
        /* initial cords: one per symbol that has transitions, its transitions in order;
         * C.X[i] the tail of the transition at place i */
        memcpy(pos, lab, sizeof(int32_t) * (size_t)nsym);
        for (size_t t = 0; t < m; t++) {
            int32_t i = pos[Y[t]]++;
            C.E[i] = (int32_t)t;
            C.el[t].L = i;
            C.X[i] = T[t];
        }
        free(pos);
    }
    if (m) {
        C.z = 0;
        for (int32_t c = 0; c < nsym; c++) {
            if (lab[c + 1] == lab[c]) continue;
            int32_t z = (int32_t)C.z++;
            C.st[z].F = lab[c];
            C.st[z].P = lab[c + 1];
            C.st[z].M = 0;
            for (int32_t i = lab[c]; i < lab[c + 1]; i++) C.el[C.E[i]].S = z;
        }
    }
    /* initial blocks (the Valmari refinement's start, coarser than the result): classes
     * by acceptance, the length of their shortest accepted word (-1: none; a breadth-first
     * search backwards from the accepting classes over the incoming transitions) and the
     * set of symbols they have transitions on; equivalent classes agree on all three, so
     * the refinement ends in the same (unique, coarsest) partition and spends fewer
     * passes getting there */
    {
        int32_t *dist = malloc(sizeof(int32_t) * (nn ? nn : 1));
        int32_t *queue = malloc(sizeof(int32_t) * (nn ? nn : 1));
        if (!dist || !queue || initial_blocks(&B, &R, reps, nn, accepting, T, Fh, dist, queue, all_live) < 0) {
            free(dist);
            free(queue);
            goto done;
        }
        free(dist);
        free(queue);
    }
    /* refine: each cord splits blocks by its tails, each new block splits cords by the
     * transitions into it; block 0 need never split cords */
    {
        size_t b = 1, c = 0;
        while (c < C.z) {
            int32_t c0 = C.st[c].F, c1 = C.st[c].P;
            for (int32_t i = c0; i < c1; i++) part_mark(&B, C.X[i]);
            part_split(&B);
            if (deadline_passed(&dl, (size_t)(c1 - c0) + 1)) {
                rc = GD_DFA_TIMEOUT;
                goto done;
            }
            c++;
            while (b < B.z) {
                size_t work = 1;
                for (int32_t i = B.st[b].F; i < B.st[b].P; i++) {
                    int32_t q = B.E[i];
                    for (int32_t t = Fh[q]; t < Fh[q + 1]; t++) part_mark(&C, t);
                    work += (size_t)(Fh[q + 1] - Fh[q]) + 1;
                }
                part_split(&C);
                if (deadline_passed(&dl, work)) {
                    rc = GD_DFA_TIMEOUT;
                    goto done;
                }
                b++;
            }
        }
    }
    /* blocks numbered by their first state (of the DFA given, through its class) */
    {
        int32_t *id = Fh; /* reuse: B.z <= nn entries */
        for (size_t i = 0; i < B.z; i++) id[i] = -1;
        int32_t nb = 0;
        for (size_t s = 0; s < n0; s++) {
            int32_t x = B.el[qid[s]].S;
            if (id[x] < 0) id[x] = nb++;
            block[s] = id[x];
        }
        rc = nb;
    }
done:
    free(f);
    free(qid);
    free(reps);
    free(T);
    free(Y);
    free(Fh);
    free(lab);
    part_free(&B);
    part_free(&C);
    return rc;
}

/* minimize_rows of a table (read once into sparse rows). */
static int minimize(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, double budget_s,
                    int32_t *block, int *all_live) {
    if (n <= 0 || nsym <= 0) return n == 0 && nsym > 0 ? 0 : GD_DFA_INVALID;
    size_t m0 = 0;
    sparse_rows R;
    int rc = sparse_of(trans, n, nsym, &R, &m0);
    if (rc == GD_DFA_OK) rc = minimize_rows(&R, m0, n, nsym, accepting, budget_s, block, all_live);
    sparse_free(&R);
    return rc;
}

int gd_dfa_minimize(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, double budget_s,
                    int32_t *block) {
    return minimize(trans, n, nsym, accepting, budget_s, block, NULL);
}

int gd_dfa_minimize_live(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, double budget_s,
                         int32_t *block, int *all_live) {
    *all_live = 0;
    return minimize(trans, n, nsym, accepting, budget_s, block, all_live);
}

void gd_min_table_free(gd_min_table *t) {
    if (!t) return;
    free(t->trans);
    free(t->accepting);
    memset(t, 0, sizeof *t);
}

/* The quotient of the sparse rows R (n states) by block (nb blocks numbered by their first
 * state): gd_dfa_quotient's table, in int16 when nb < 32767, into out. */
static int quotient_rows(const sparse_rows *R, int32_t n, int32_t nsym, const uint8_t *accepting,
                         const int32_t *block, int32_t nb, gd_min_table *out) {
    size_t ns = (size_t)nsym, cells = (size_t)nb * ns;
    int narrow = nb < 32767;
    out->elem_bytes = narrow ? 2 : 4;
    out->trans = malloc((cells ? cells : 1) * (size_t)out->elem_bytes);
    out->accepting = malloc(nb ? (size_t)nb : 1);
    if (!out->trans || !out->accepting) return GD_DFA_NOMEM;
    if (narrow)
        memset(out->trans, 0xff, cells * 2); /* -1 */
    else
        for (size_t i = 0; i < cells; i++) ((int32_t *)out->trans)[i] = -1;
    int32_t next = 0;
    for (int32_t s = 0; s < n; s++) {
        int32_t b = block[s];
        if (b < next) continue;
        next++;
        size_t o = (size_t)b * ns;
        if (narrow) {
            int16_t *row = (int16_t *)out->trans + o;
            for (int32_t j = R->off[s]; j < R->off[s + 1]; j++) row[R->sym[j]] = (int16_t)block[R->tgt[j]];
        } else {
            int32_t *row = (int32_t *)out->trans + o;
            for (int32_t j = R->off[s]; j < R->off[s + 1]; j++) row[R->sym[j]] = block[R->tgt[j]];
        }
        out->accepting[b] = accepting[s] ? 1 : 0;
    }
    out->n_states = nb;
    out->live = 1;
    return next == nb ? GD_DFA_OK : GD_DFA_INVALID;
}

int gd_nfa_minimal_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                       const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                       const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                       const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, int32_t max_states,
                       size_t max_bytes, double budget_s, uint16_t *byte_class, int32_t *n_classes,
                       gd_min_table *out, int *phase) {
    memset(out, 0, sizeof *out);
    *phase = 0;
    deadline dl;
    deadline_init(&dl, budget_s);
    gd_dfa_table d;
    sparse_rows R;
    int32_t *block = NULL;
    int rc = determinize_coo(n_nfa, start, end, n_eps, eps_src, eps_tgt, n_edges, e_src, e_lo, e_hi, e_tgt, n_spec,
                             sp_src, sp_sym, sp_tgt, n_specials, max_states, max_bytes, budget_s, byte_class,
                             n_classes, &d, &R);
    if (rc != GD_DFA_OK) return rc;
    *phase = 1;
    int32_t n = d.n_states, nsym = d.nsym;
    out->nsym = nsym;
    block = malloc(sizeof(int32_t) * (size_t)n);
    if (!block) {
        rc = GD_DFA_NOMEM;
        goto done;
    }
    int live = 1;
    /* (what is left of the one budget) */
    int nb = minimize_rows(&R, (size_t)R.off[n], n, nsym, d.accepting, dl.on ? dl.at - mono_now() : budget_s,
                           block, &live);
    if (nb < 0) {
        rc = nb;
        goto done;
    }
    if (live) {
        rc = quotient_rows(&R, n, nsym, d.accepting, block, nb, out);
        goto done;
    }
    /* some state cannot reach acceptance: the subset construction's table, to be trimmed */
    {
        size_t cells = (size_t)n * (size_t)nsym;
        int32_t *t = malloc(sizeof(int32_t) * (cells ? cells : 1));
        if (!t) {
            rc = GD_DFA_NOMEM;
            goto done;
        }
        for (size_t i = 0; i < cells; i++) t[i] = -1;
        for (int32_t s = 0; s < n; s++)
            for (int32_t j = R.off[s]; j < R.off[s + 1]; j++) t[(size_t)s * (size_t)nsym + (size_t)R.sym[j]] = R.tgt[j];
        out->trans = t;
        out->accepting = d.accepting;
        d.accepting = NULL;
        out->n_states = n;
        out->elem_bytes = 4;
        out->live = 0;
        rc = GD_DFA_OK;
    }
done:
    free(block);
    sparse_free(&R);
    gd_dfa_table_free(&d);
    if (rc != GD_DFA_OK) gd_min_table_free(out);
    else *phase = 0;
    return rc;
}

int gd_dfa_quotient(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, const int32_t *block,
                    int32_t nblocks, int32_t *out_trans, uint8_t *out_accepting) {
    if (n <= 0 || nsym <= 0 || nblocks <= 0 || nblocks > n) return GD_DFA_INVALID;
    size_t nn = (size_t)n, ns = (size_t)nsym;
    /* the first state of each block represents it; blocks must be numbered by first state */
    int32_t next = 0;
    for (size_t s = 0; s < nn; s++) {
        int32_t b = block[s];
        if (b < 0 || b > next || b >= nblocks) return GD_DFA_INVALID;
        if (b < next) continue;
        next++;
        const int32_t *row = trans + s * ns;
        int32_t *o = out_trans + (size_t)b * ns;
        for (size_t c = 0; c < ns; c++) {
            int32_t t = row[c];
            if (t < -1 || t >= n) return GD_DFA_INVALID;
            o[c] = t >= 0 ? block[t] : -1;
        }
        out_accepting[b] = accepting[s] ? 1 : 0;
    }
    return next == nblocks ? nblocks : GD_DFA_INVALID;
}

/* ------------------------------------------------------------------------- product */

static uint64_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

/* Doubles the pair map (keys/vals, capacity *cap, a power of two). 0, or -1 on allocation failure. */
static int rehash_pairs(uint64_t **keys, int32_t **vals, size_t *cap) {
    size_t nc = *cap * 2;
    uint64_t *nk = calloc(nc, sizeof *nk);
    int32_t *nv = malloc(nc * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < *cap; i++) {
        if (!(*keys)[i]) continue;
        size_t at = pair_hash((*keys)[i]) & (nc - 1);
        while (nk[at]) at = (at + 1) & (nc - 1);
        nk[at] = (*keys)[i];
        nv[at] = (*vals)[i];
    }
    free(*keys);
    free(*vals);
    *keys = nk;
    *vals = nv;
    *cap = nc;
    return 0;
}

int gd_dfa_product(const int32_t *ta, int32_t na, int32_t nsa, const uint8_t *acc_a, const int32_t *tb, int32_t nb,
                   int32_t nsb, const uint8_t *acc_b, const int32_t *ca, const int32_t *cb, int32_t ncls,
                   int32_t b_start, int keep_b_dead, int diff, int32_t max_states, double budget_s,
                   gd_dfa_table *out) {
    memset(out, 0, sizeof *out);
    if (na <= 0 || nsa <= 0 || nb < 0 || (nb > 0 && nsb <= 0) || ncls <= 0 || max_states <= 0 || b_start >= nb ||
        b_start < -1)
        return GD_DFA_INVALID;
    for (int32_t c = 0; c < ncls; c++)
        if (ca[c] < 0 || ca[c] >= nsa || (nb > 0 && (cb[c] < 0 || cb[c] >= nsb))) return GD_DFA_INVALID;
    deadline dl;
    deadline_init(&dl, budget_s);
    size_t mcap = 1024; /* open addressing: keys (x << 32 | y + 1) + 1, 0 = empty */
    uint64_t *keys = calloc(mcap, sizeof *keys);
    int32_t *vals = malloc(mcap * sizeof *vals);
    int32_t *ox = NULL, *oy = NULL, *trans = NULL;
    uint8_t *acc = NULL;
    size_t ocap = 0, ocap2 = 0, tcap = 0, acap = 0, n = 0, used = 0;
    int rc = GD_DFA_NOMEM;
    if (!keys || !vals) goto done;
#define PUT_PAIR(X, Y, J)                                                                     \
    do {                                                                                      \
        uint64_t key_ = (((uint64_t)(uint32_t)(X) << 32) | (uint32_t)((Y) + 1)) + 1;          \
        size_t at_ = pair_hash(key_) & (mcap - 1);                                            \
        while (keys[at_] && keys[at_] != key_) at_ = (at_ + 1) & (mcap - 1);                  \
        if (keys[at_]) {                                                                      \
            (J) = vals[at_];                                                                  \
        } else {                                                                              \
            if (n >= (size_t)max_states) { rc = GD_DFA_LIMIT; goto done; }                    \
            int32_t *nx_ = grow(ox, &ocap, n + 1, sizeof *ox);                                \
            if (!nx_) goto done;                                                              \
            ox = nx_;                                                                         \
            int32_t *ny_ = grow(oy, &ocap2, n + 1, sizeof *oy);                               \
            if (!ny_) goto done;                                                              \
            oy = ny_;                                                                         \
            ox[n] = (X);                                                                      \
            oy[n] = (Y);                                                                      \
            keys[at_] = key_;                                                                 \
            vals[at_] = (int32_t)n;                                                           \
            (J) = (int32_t)n++;                                                               \
            if (++used * 2 > mcap && rehash_pairs(&keys, &vals, &mcap) < 0) goto done;       \
        }                                                                                     \
    } while (0)
    int32_t j0;
    PUT_PAIR(0, b_start, j0);
    (void)j0;
    for (size_t i = 0; i < n; i++) {
        if (deadline_passed(&dl, (size_t)ncls)) { rc = GD_DFA_TIMEOUT; goto done; }
        int32_t *nt = grow(trans, &tcap, (i + 1) * (size_t)ncls, sizeof *trans);
        if (!nt) goto done;
        trans = nt;
        uint8_t *na_ = grow(acc, &acap, i + 1, 1);
        if (!na_) goto done;
        acc = na_;
        const int32_t x = ox[i], y = oy[i];
        const int32_t *rx = ta + (size_t)x * (size_t)nsa;
        const int32_t *ry = y >= 0 ? tb + (size_t)y * (size_t)nsb : NULL;
        for (int32_t c = 0; c < ncls; c++) {
            int32_t to = -1;
            const int32_t nx = rx[ca[c]];
            if (nx >= na) { rc = GD_DFA_INVALID; goto done; }
            if (nx >= 0) {
                const int32_t ny = ry ? ry[cb[c]] : -1;
                if (ny >= nb) { rc = GD_DFA_INVALID; goto done; }
                if (ny >= 0 || keep_b_dead) PUT_PAIR(nx, ny, to);
            }
            trans[i * (size_t)ncls + (size_t)c] = to;
        }
        const int in_b = y >= 0 && acc_b[y];
        acc[i] = (uint8_t)(acc_a[x] && (diff ? !in_b : in_b));
    }
#undef PUT_PAIR
    out->trans = trans;
    out->accepting = acc;
    out->n_states = (int32_t)n;
    out->nsym = ncls;
    trans = NULL;
    acc = NULL;
    rc = GD_DFA_OK;
done:
    free(keys);
    free(vals);
    free(ox);
    free(oy);
    free(trans);
    free(acc);
    return rc;
}

/* ------------------------------------------------------------------------- rule automata */

/* gd_nfa_build_rule_dfas: a wanted rule's automaton is made the first time a reference to it
 * is built (through the program's rule_leaf callback), from a build of its body alone (state
 * 0 the entry, the wanted rules it references embedded the same way: bottom-up, since the
 * wanted rules are acyclic), then kept for every later reference. */
typedef struct {
    int state; /* 0: not tried yet; 1: built (v); 2: inlined */
    gd_leaf_view v;
    int32_t *ints;  /* src, tgt, acc back to back */
    uint8_t *bytes; /* lo, hi */
} rule_dfa;

typedef struct {
    gd_nfa_program p; /* the caller's, with the callback */
    const uint8_t *want;
    rule_dfa *r;
    int32_t max_subset, max_dfa;
    size_t max_bytes;
    int has_deadline;
    double at;
} rule_dfas;

static double rd_budget(const rule_dfas *x) { return x->has_deadline ? x->at - mono_now() : 1e300; }

/* The byte columns of the trimmed minimal DFA t (n states, ncls byte classes bc, no specials) as
 * r->v (as automaton.py `_Leaf.of_rule_dfa`).  GD_DFA_OK or GD_DFA_NOMEM. */
static int rd_leaf(const int32_t *t, int32_t n, int32_t ncls, const uint8_t *acc, const uint16_t *bc, rule_dfa *r) {
    int32_t clo[256], chi[256];
    for (int b = 0; b < 256; b++) {
        if (b == 0 || bc[b] != bc[b - 1]) clo[bc[b]] = b;
        chi[bc[b]] = b;
    }
    size_t ne = 0, na = 0, nn = (size_t)n, nc = (size_t)ncls;
    uint8_t cut[257];
    memset(cut, 0, sizeof cut);
    for (size_t s = 0; s < nn; s++) {
        na += acc[s] != 0;
        for (size_t c = 0; c < nc; c++)
            if (t[s * nc + c] >= 0) {
                ne++;
                cut[clo[c]] = 1;
                cut[chi[c] + 1] = 1;
            }
    }
    int carrier = 0;
    for (size_t c = 0; c < nc; c++) carrier |= !cut[clo[c]];
    size_t ne2 = ne + (carrier ? nc : 0);
    r->ints = malloc(sizeof(int32_t) * (2 * ne2 + na + 1));
    r->bytes = malloc(2 * ne2 + 1);
    if (!r->ints || !r->bytes) return GD_DFA_NOMEM;
    int32_t *src = r->ints, *tgt = src + ne2, *ac = tgt + ne2;
    uint8_t *lo = r->bytes, *hi = lo + ne2;
    size_t j = 0, k = 0;
    for (size_t s = 0; s < nn; s++) {
        if (acc[s]) ac[k++] = (int32_t)s;
        for (size_t c = 0; c < nc; c++) {
            int32_t x = t[s * nc + c];
            if (x < 0) continue;
            src[j] = (int32_t)s;
            lo[j] = (uint8_t)clo[c];
            hi[j] = (uint8_t)chi[c];
            tgt[j++] = x;
        }
    }
    if (carrier) /* state n, unreachable: an edge over each class keeps every cut */
        for (size_t c = 0; c < nc; c++) {
            src[j] = n;
            lo[j] = (uint8_t)clo[c];
            hi[j] = (uint8_t)chi[c];
            tgt[j++] = n;
        }
    gd_leaf_view v = {n + carrier, ne2, na, src, tgt, ac, lo, hi};
    r->v = v;
    return GD_DFA_OK;
}

/* d's arrays replaced by t and a (owned by d from now on): n states, d's symbols. */
static void rd_replace(gd_dfa_table *d, int32_t *t, uint8_t *a, int32_t n) {
    int32_t nsym = d->nsym;
    gd_dfa_table_free(d);
    d->trans = t;
    d->accepting = a;
    d->n_states = n;
    d->nsym = nsym;
}

/* The minimal DFA of the table d, in place (d becomes its quotient, or stays as it is when
 * already minimal).  With live (not NULL): whether every state of d can reach acceptance.
 * GD_DFA_OK, or a GD_DFA_* code. */
static int rd_minimize(gd_dfa_table *d, double budget, int *live) {
    int32_t n = d->n_states, nsym = d->nsym;
    int32_t *block = malloc(sizeof(int32_t) * (size_t)n);
    if (!block) return GD_DFA_NOMEM;
    int all = 1;
    int nb = minimize(d->trans, n, nsym, d->accepting, budget, block, live ? &all : NULL);
    if (live) *live = all;
    if (nb < 0 || nb == n || (live && !all)) {
        free(block);
        return nb < 0 ? nb : GD_DFA_OK;
    }
    int32_t *t = malloc(sizeof(int32_t) * (size_t)nb * (size_t)nsym);
    uint8_t *a = malloc((size_t)nb);
    int rc = GD_DFA_NOMEM;
    if (t && a) rc = gd_dfa_quotient(d->trans, n, nsym, d->accepting, block, nb, t, a);
    free(block);
    if (rc < 0) {
        free(t);
        free(a);
        return rc;
    }
    rd_replace(d, t, a, nb);
    return GD_DFA_OK;
}

/* Trims the table d in place (gd_dfa_prune).  The states kept (0: the empty language), or a
 * GD_DFA_* code. */
static int rd_trim(gd_dfa_table *d) {
    size_t n = (size_t)d->n_states, ns = (size_t)d->nsym;
    int32_t *t = malloc(sizeof(int32_t) * n * ns);
    uint8_t *a = malloc(n);
    int k = GD_DFA_NOMEM;
    if (t && a) k = gd_dfa_prune(d->trans, d->n_states, d->nsym, d->accepting, NULL, t, a);
    if (k <= 0) {
        free(t);
        free(a);
        return k;
    }
    rd_replace(d, t, a, k);
    return k;
}

/* rd_leaf of the minimal DFA given as the blocks (block[s] of n states, nb blocks numbered by
 * their first state) of the DFA with sparse rows R and acceptance acc: block b is the row of
 * its first state, targets mapped to their blocks (the quotient, never made as a table). */
static int rd_leaf_rows(const sparse_rows *R, int32_t n, const int32_t *block, int32_t nb, const uint8_t *acc,
                        const uint16_t *bc, int32_t ncls, rule_dfa *r) {
    int32_t clo[256], chi[256];
    for (int b = 0; b < 256; b++) {
        if (b == 0 || bc[b] != bc[b - 1]) clo[bc[b]] = b;
        chi[bc[b]] = b;
    }
    int32_t *rep = malloc(sizeof(int32_t) * (size_t)(nb ? nb : 1));
    if (!rep) return GD_DFA_NOMEM;
    int32_t next = 0;
    for (int32_t s = 0; s < n && next < nb; s++)
        if (block[s] == next) rep[next++] = s;
    size_t ne = 0, na = 0, nc = (size_t)ncls;
    uint8_t cut[257];
    memset(cut, 0, sizeof cut);
    for (int32_t b = 0; b < nb; b++) {
        int32_t s = rep[b];
        na += acc[s] != 0;
        for (int32_t j = R->off[s]; j < R->off[s + 1]; j++) {
            cut[clo[R->sym[j]]] = 1;
            cut[chi[R->sym[j]] + 1] = 1;
        }
        ne += (size_t)(R->off[s + 1] - R->off[s]);
    }
    int carrier = 0;
    for (size_t c = 0; c < nc; c++) carrier |= !cut[clo[c]];
    size_t ne2 = ne + (carrier ? nc : 0);
    r->ints = malloc(sizeof(int32_t) * (2 * ne2 + na + 1));
    r->bytes = malloc(2 * ne2 + 1);
    if (!r->ints || !r->bytes) {
        free(rep);
        return GD_DFA_NOMEM;
    }
    int32_t *src = r->ints, *tgt = src + ne2, *ac = tgt + ne2;
    uint8_t *lo = r->bytes, *hi = lo + ne2;
    size_t j = 0, k = 0;
    for (int32_t b = 0; b < nb; b++) {
        int32_t s = rep[b];
        if (acc[s]) ac[k++] = b;
        for (int32_t i = R->off[s]; i < R->off[s + 1]; i++) {
            src[j] = b;
            lo[j] = (uint8_t)clo[R->sym[i]];
            hi[j] = (uint8_t)chi[R->sym[i]];
            tgt[j++] = block[R->tgt[i]];
        }
    }
    if (carrier) /* state nb, unreachable: an edge over each class keeps every cut */
        for (size_t c = 0; c < nc; c++) {
            src[j] = nb;
            lo[j] = (uint8_t)clo[c];
            hi[j] = (uint8_t)chi[c];
            tgt[j++] = nb;
        }
    free(rep);
    gd_leaf_view v = {nb + carrier, ne2, na, src, tgt, ac, lo, hi};
    r->v = v;
    return GD_DFA_OK;
}

/* Builds rule `rule`'s automaton into r (r->state 1), or leaves it inlined (r->state 2).
 * GD_DFA_OK, or GD_DFA_TIMEOUT / GD_DFA_NOMEM (the whole build fails).  The subset
 * construction makes sparse rows (no table), minimised as they are; only when a state
 * cannot reach acceptance (rare: automaton.py `_trimmed_minimal` then trims first) is the
 * table made, trimmed and minimised. */
static int rd_build(rule_dfas *x, int32_t rule, int32_t frames_left, rule_dfa *r) {
    gd_nfa_program q = x->p;
    q.base_len = 1;
    q.max_frames = frames_left;
    q.budget_s = rd_budget(x);
    gd_nfa_out o;
    int rc = gd_nfa_build(&q, q.rule_body[rule], 1, 0, &o);
    if (rc == GD_DFA_TIMEOUT || rc == GD_DFA_NOMEM) return rc;
    if (rc != GD_DFA_OK) return GD_DFA_OK; /* a limit, the frames, a fallback: inlined */
    if (o.end < 0 || o.n_spec) {
        gd_nfa_out_free(&o);
        return GD_DFA_OK;
    }
    uint16_t bc[256];
    int32_t ncls = 0, *block = NULL;
    gd_dfa_table d;
    sparse_rows R;
    rc = determinize_coo(o.n, 0, o.end, o.n_eps, o.eps_src, o.eps_tgt, o.n_edges, o.e_src, o.e_lo, o.e_hi, o.e_tgt,
                         0, NULL, NULL, NULL, 0, x->max_subset, x->max_bytes, rd_budget(x), bc, &ncls, &d, &R);
    gd_nfa_out_free(&o);
    if (rc == GD_DFA_TIMEOUT || rc == GD_DFA_NOMEM) return rc;
    if (rc != GD_DFA_OK) return GD_DFA_OK;
    int32_t n = d.n_states, nsym = d.nsym;
    block = malloc(sizeof(int32_t) * (size_t)n);
    if (!block) {
        rc = GD_DFA_NOMEM;
        goto done;
    }
    int live = 1;
    int nb = minimize_rows(&R, (size_t)R.off[n], n, nsym, d.accepting, rd_budget(x), block, &live);
    if (nb < 0) {
        rc = nb;
        goto done;
    }
    if (live) {
        rc = nb > x->max_dfa ? GD_DFA_OK : rd_leaf_rows(&R, n, block, nb, d.accepting, bc, ncls, r);
        if (rc == GD_DFA_OK && nb <= x->max_dfa) r->state = 1;
        goto done;
    }
    /* the table, trimmed, then minimised */
    d.trans = malloc(sizeof(int32_t) * (size_t)n * (size_t)nsym);
    if (!d.trans) {
        rc = GD_DFA_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < (size_t)n * (size_t)nsym; i++) d.trans[i] = -1;
    for (int32_t s0 = 0; s0 < n; s0++)
        for (int32_t j = R.off[s0]; j < R.off[s0 + 1]; j++) d.trans[(size_t)s0 * (size_t)nsym + R.sym[j]] = R.tgt[j];
    {
        int k = rd_trim(&d);
        if (k <= 0) { /* the empty language (or no memory): inlined */
            rc = k == GD_DFA_NOMEM ? k : GD_DFA_OK;
            goto done;
        }
    }
    rc = rd_minimize(&d, rd_budget(x), NULL);
    if (rc != GD_DFA_OK) goto done;
    if (d.n_states <= x->max_dfa) {
        rc = rd_leaf(d.trans, d.n_states, ncls, d.accepting, bc, r);
        if (rc == GD_DFA_OK) r->state = 1;
    }
done:
    free(block);
    sparse_free(&R);
    gd_dfa_table_free(&d);
    if (rc == GD_DFA_TIMEOUT || rc == GD_DFA_NOMEM) return rc;
    return GD_DFA_OK; /* anything else: inlined */
}

static int rd_callback(void *ud, int32_t rule, int32_t frames_left, gd_leaf_view *out) {
    rule_dfas *x = ud;
    if (rule < 0 || rule >= x->p.n_rules || !x->want[rule]) return 0;
    rule_dfa *r = &x->r[rule];
    if (r->state == 0) {
        r->state = 2; /* inlined unless built (never asked again while building: acyclic) */
        int rc = rd_build(x, rule, frames_left, r);
        if (rc != GD_DFA_OK) {
            r->state = 0;
            return rc;
        }
    }
    if (r->state != 1) return 0;
    *out = r->v;
    return 1;
}

int gd_nfa_build_rule_dfas(const gd_nfa_program *p, const uint8_t *want, int32_t max_subset, int32_t max_dfa,
                           size_t max_bytes, int32_t root, int32_t n0, int32_t s, gd_nfa_out *out) {
    if (p->n_rules < 0) return GD_DFA_INVALID;
    rule_dfas x;
    memset(&x, 0, sizeof x);
    x.p = *p;
    x.p.rule_leaf = rd_callback;
    x.p.rule_leaf_ud = &x;
    x.want = want;
    x.max_subset = max_subset < 1 ? 1 : max_subset;
    x.max_dfa = max_dfa;
    x.max_bytes = max_bytes;
    double b = p->budget_s;
    x.has_deadline = b == b && b < 1e18;
    x.at = x.has_deadline ? mono_now() + b : 0.0;
    x.r = calloc((size_t)p->n_rules + 1, sizeof(rule_dfa));
    if (!x.r) return GD_DFA_NOMEM;
    int rc = gd_nfa_build(&x.p, root, n0, s, out);
    for (int32_t i = 0; i < p->n_rules; i++) {
        free(x.r[i].ints);
        free(x.r[i].bytes);
    }
    free(x.r);
    return rc;
}
