/* Thompson NFA of a grammar IR, from its flat serialisation (gd_nfa_build; the Python builder
 * and reference is decoding/backends/automaton.py, `_NFA.build`, and its serialiser
 * `_nfa_program`).  The same construction, state numbering, edge order and limits:
 *
 *  - a Ref whose rule is already expanded max_depth times on the current path is the empty
 *    language; inlining a rule with more than max_nesting rules on the stack fails
 *    (GD_NFA_NESTING); a state past max_states fails (GD_NFA_STATES) before it is made;
 *  - the time budget is read when the state count crosses a multiple of 4096 (as
 *    `_Deadline.check` in `_NFA.new` / `_NFA.alloc`): GD_DFA_TIMEOUT;
 *  - a separated loop `x (sep x)*` is built with one copy of x (`_NFA.build_sep_loop`);
 *  - Dfa leaves and the automata of Inter/Diff nodes (computed by the caller) are embedded
 *    as `_NFA.embed` does: their states, an epsilon edge into state 0, one from each
 *    accepting state to a fresh end state.
 *
 * Fragment replay of the Python builder is an optimisation with identical output: every use
 * is simply built here.  The recursion of the builder is bounded by max_frames (counted as
 * the Python builder's frames); past it GD_NFA_FALLBACK asks the caller to build in Python,
 * which reports "nested too deeply" exactly as it does.  A K_FALLBACK node (something the
 * serialiser leaves to Python: an unknown node, a failed Inter/Diff) does the same.
 *
 * Re-entrant: no global state; everything allocated is freed or handed to `out`.
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#endif

#include "gd_native.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAIL (-2) /* an error is set in the context */
#define NONE (-1) /* the empty language */

static double nfa_now(void) {
    struct timespec ts;
#if defined(_WIN32)
    timespec_get(&ts, TIME_UTC);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a suffix of a sequence (its items i.. of the record at `node`) built into state t */
struct sfx {
    uint64_t h;
    int32_t t, node, i, entry, r;
};

typedef struct {
    const gd_nfa_program *p;
    gd_nfa_out *o;
    size_t cap_eps, cap_e, cap_sp;
    int32_t *depth;  /* [n_rules] expansions of each rule on the current path */
    int32_t *stack;  /* [max_nesting + 2] rules being inlined (beyond the caller's base) */
    int32_t n_stack;
    int32_t *scratch; /* the ends of bounded repeats, LIFO */
    size_t n_scratch, cap_scratch;
    int32_t frames;
    /* rule-DFA builds (p->rule_leaf): rule automata embedded in a choice's tail positions,
     * (rule, target state) -> the copy's first state, shared by the same rule's later
     * references there (see build_into) */
    int32_t *tails;
    size_t n_tails, cap_tails;
    struct sfx *sfx; /* the same for the suffixes of sequences (suffix_find) */
    size_t n_sfx, cap_sfx;
    int has_deadline;
    double at;
    int rc;
} ctx;

static int32_t top_rule(const ctx *c) { return c->n_stack ? c->stack[c->n_stack - 1] : -1; }

static int32_t fail(ctx *c, int rc) {
    c->rc = rc;
    if (rc != GD_NFA_NESTING) c->o->err_rule = top_rule(c);
    return FAIL;
}

static int grow(void **a, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    void *x = realloc(*a, n * item);
    if (!x) return -1;
    *a = x;
    *cap = n;
    return 0;
}

static int reserve_eps(ctx *c, size_t k) {
    gd_nfa_out *o = c->o;
    size_t need = o->n_eps + k, cap = c->cap_eps;
    if (need <= cap) return 0;
    if (grow((void **)&o->eps_src, &cap, need, 4)) return -1;
    cap = c->cap_eps;
    if (grow((void **)&o->eps_tgt, &cap, need, 4)) return -1;
    c->cap_eps = cap;
    return 0;
}

static int reserve_edges(ctx *c, size_t k) {
    gd_nfa_out *o = c->o;
    size_t need = o->n_edges + k, cap;
    if (need <= c->cap_e) return 0;
    cap = c->cap_e;
    if (grow((void **)&o->e_src, &cap, need, 4)) return -1;
    cap = c->cap_e;
    if (grow((void **)&o->e_tgt, &cap, need, 4)) return -1;
    cap = c->cap_e;
    if (grow((void **)&o->e_lo, &cap, need, 1)) return -1;
    cap = c->cap_e;
    if (grow((void **)&o->e_hi, &cap, need, 1)) return -1;
    c->cap_e = cap;
    return 0;
}

static int reserve_spec(ctx *c, size_t k) {
    gd_nfa_out *o = c->o;
    size_t need = o->n_spec + k, cap;
    if (need <= c->cap_sp) return 0;
    cap = c->cap_sp;
    if (grow((void **)&o->sp_src, &cap, need, 4)) return -1;
    cap = c->cap_sp;
    if (grow((void **)&o->sp_k, &cap, need, 4)) return -1;
    cap = c->cap_sp;
    if (grow((void **)&o->sp_tgt, &cap, need, 4)) return -1;
    c->cap_sp = cap;
    return 0;
}

static int eps(ctx *c, int32_t s, int32_t t) {
    if (reserve_eps(c, 1)) return -1;
    gd_nfa_out *o = c->o;
    o->eps_src[o->n_eps] = s;
    o->eps_tgt[o->n_eps++] = t;
    return 0;
}

/* k new consecutive states (k >= 1); the first, or FAIL.  As `_NFA.alloc` (and `_NFA.new`
 * for k = 1): the limit first, then the deadline when a multiple of 4096 is crossed. */
static int32_t alloc(ctx *c, int32_t k) {
    int64_t n0 = c->o->n, n = n0 + k;
    if (n > c->p->max_states) return fail(c, GD_NFA_STATES);
    c->o->n = (int32_t)n;
    if ((n >> 12) != (n0 >> 12) && c->has_deadline && nfa_now() > c->at) return fail(c, GD_DFA_TIMEOUT);
    return (int32_t)n0;
}

static int32_t build(ctx *c, int32_t node, int32_t s);
static int32_t build_into(ctx *c, int32_t node, int32_t s, int32_t t);

/* The length of the record x (room: entries from x to the end of the code), or -1 if it
 * does not fit or is malformed. */
static int64_t rec_len(const int32_t *x, size_t room) {
    int64_t k;
    switch (x[0]) {
    case GD_NK_NONE: k = 1; break;
    case GD_NK_REF: case GD_NK_SPECIAL: case GD_NK_LEAF: case GD_NK_FALLBACK: k = 2; break;
    case GD_NK_LIT: k = 3; break;
    case GD_NK_REPEAT: k = 4; break;
    case GD_NK_SET: case GD_NK_SEQ: case GD_NK_CHOICE: case GD_NK_SEPLOOP: {
        if (room < (x[0] == GD_NK_SEPLOOP ? 3u : 2u)) return -1;
        int32_t n = x[x[0] == GD_NK_SEPLOOP ? 2 : 1];
        if (n < 0) return -1;
        k = (x[0] == GD_NK_SEPLOOP ? 3 : 2) + (int64_t)n * (x[0] == GD_NK_SET ? 2 : 1);
        break;
    }
    default: return -1;
    }
    return (uint64_t)k <= room ? k : -1;
}

static int32_t nomem(ctx *c) { return fail(c, GD_DFA_NOMEM); }

/* The automaton v added from s (`_NFA.embed`): its states, an epsilon edge into its state
 * 0, one from each accepting state to a fresh end state; the end state. */
static int32_t embed_view(ctx *c, const gd_leaf_view *v, int32_t s) {
    if (v->n < 1) return fail(c, GD_DFA_INVALID);
    int32_t base = alloc(c, v->n);
    if (base == FAIL) return FAIL;
    int32_t end = alloc(c, 1);
    if (end == FAIL) return FAIL;
    if (eps(c, s, base)) return nomem(c);
    if (reserve_edges(c, v->n_edges)) return nomem(c);
    gd_nfa_out *o = c->o;
    for (size_t i = 0; i < v->n_edges; i++) {
        size_t j = o->n_edges++;
        o->e_src[j] = v->src[i] + base;
        o->e_lo[j] = v->lo[i];
        o->e_hi[j] = v->hi[i];
        o->e_tgt[j] = v->tgt[i] + base;
    }
    if (reserve_eps(c, v->n_acc)) return nomem(c);
    for (size_t i = 0; i < v->n_acc; i++) {
        o->eps_src[o->n_eps] = v->acc[i] + base;
        o->eps_tgt[o->n_eps++] = end;
    }
    return end;
}

static int32_t embed(ctx *c, int32_t leaf, int32_t s) {
    const gd_nfa_program *p = c->p;
    if (leaf < 0 || leaf >= p->n_leaves) return fail(c, GD_DFA_INVALID);
    int64_t e0 = p->leaf_eoff[leaf], a0 = p->leaf_aoff[leaf];
    gd_leaf_view v = {p->leaf_n[leaf], (size_t)(p->leaf_eoff[leaf + 1] - e0), (size_t)(p->leaf_aoff[leaf + 1] - a0),
                      p->leaf_src + e0, p->leaf_tgt + e0, p->leaf_acc + a0, p->leaf_lo + e0, p->leaf_hi + e0};
    return embed_view(c, &v, s);
}

/* one more Python frame (`_NFA.build`, `_replayed`, `build_sep_loop`) */
#define ENTER(c)                                                                                        \
    do {                                                                                                \
        if (++(c)->frames > (c)->p->max_frames) return fail((c), GD_NFA_FALLBACK);                      \
    } while (0)

static int32_t build_sep_loop(ctx *c, int32_t x, const int32_t *sep, int32_t nsep, int32_t s) {
    int32_t a = alloc(c, 1);
    if (a == FAIL) return FAIL;
    if (eps(c, s, a)) return nomem(c);
    int32_t e = build(c, x, a);
    if (e < 0) return e;
    int32_t e2 = e;
    for (int32_t i = 0; i < nsep; i++) {
        e2 = build(c, sep[i], e2);
        if (e2 == FAIL) return FAIL;
        if (e2 == NONE) return e; /* the separator is empty-language: just one x */
    }
    if (eps(c, e2, a)) return nomem(c);
    return e;
}

static int32_t build_node(ctx *c, int32_t node, int32_t s) {
    const gd_nfa_program *p = c->p;
    const int32_t *code = p->code;
    if (node < 0 || (size_t)node >= p->n_code) return fail(c, GD_DFA_INVALID);
    const int32_t *x = code + node;
    gd_nfa_out *o = c->o;
    if (rec_len(x, p->n_code - (size_t)node) < 0) return fail(c, GD_DFA_INVALID);
    switch (x[0]) {
    case GD_NK_LIT: {
        int32_t off = x[1], k = x[2];
        if (k == 0) return s;
        if (off < 0 || k < 0 || (size_t)off + (size_t)k > p->n_lit) return fail(c, GD_DFA_INVALID);
        int32_t n0 = alloc(c, k);
        if (n0 == FAIL) return FAIL;
        if (reserve_edges(c, (size_t)k)) return nomem(c);
        const uint8_t *d = p->lit + off;
        size_t j = o->n_edges;
        for (int32_t i = 0; i < k; i++, j++) {
            o->e_src[j] = i ? n0 + i - 1 : s;
            o->e_lo[j] = o->e_hi[j] = d[i];
            o->e_tgt[j] = n0 + i;
        }
        o->n_edges = j;
        return n0 + k - 1;
    }
    case GD_NK_SET: {
        int32_t nr = x[1];
        if (nr == 0) return NONE;
        int32_t t = alloc(c, 1);
        if (t == FAIL) return FAIL;
        if (reserve_edges(c, (size_t)nr)) return nomem(c);
        for (int32_t i = 0; i < nr; i++)
            if (x[2 + 2 * i] < 0 || x[2 + 2 * i] > x[3 + 2 * i] || x[3 + 2 * i] > 255) return fail(c, GD_DFA_INVALID);
        for (int32_t i = 0; i < nr; i++) {
            size_t j = o->n_edges++;
            o->e_src[j] = s;
            o->e_lo[j] = (uint8_t)x[2 + 2 * i];
            o->e_hi[j] = (uint8_t)x[3 + 2 * i];
            o->e_tgt[j] = t;
        }
        return t;
    }
    case GD_NK_SEQ: {
        int32_t n = x[1];
        for (int32_t i = 0; i < n; i++) {
            int32_t e = build(c, x[2 + i], s);
            if (e < 0) return e;
            s = e;
        }
        return s;
    }
    case GD_NK_SEPLOOP: /* a Seq item: this build() frame stands for `build_sep_loop`'s */
        return build_sep_loop(c, x[1], x + 3, x[2], s);
    case GD_NK_CHOICE: {
        if (p->rule_leaf) { /* its end made first: every branch is built into it */
            int32_t end = alloc(c, 1);
            if (end == FAIL) return FAIL;
            int32_t r = build_into(c, node, s, end);
            return r == 0 ? end : r;
        }
        int32_t n = x[1], end = NONE;
        for (int32_t i = 0; i < n; i++) {
            int32_t a = alloc(c, 1);
            if (a == FAIL) return FAIL;
            if (eps(c, s, a)) return nomem(c);
            int32_t e = build(c, x[2 + i], a);
            if (e == FAIL) return FAIL;
            if (e == NONE) continue;
            if (end == NONE) {
                end = alloc(c, 1);
                if (end == FAIL) return FAIL;
            }
            if (eps(c, e, end)) return nomem(c);
        }
        return end;
    }
    case GD_NK_REPEAT: {
        int32_t item = x[1], lo = x[2], hi = x[3]; /* hi -1: unbounded */
        int32_t r;
        ENTER(c); /* `_replayed` */
        for (int32_t i = 0; i < lo; i++) {
            int32_t e = build(c, item, s);
            if (e < 0) {
                c->frames--;
                return e;
            }
            s = e;
        }
        if (hi < 0) {
            int32_t a = alloc(c, 1);
            if (a == FAIL) return FAIL;
            if (eps(c, s, a)) return nomem(c);
            int32_t e = build(c, item, a);
            if (e == FAIL) return FAIL;
            if (e != NONE && eps(c, e, a)) return nomem(c);
            c->frames--;
            return a;
        }
        size_t base = c->n_scratch;
        if (grow((void **)&c->scratch, &c->cap_scratch, base + 1, 4)) return nomem(c);
        c->scratch[c->n_scratch++] = s;
        for (int32_t i = 0; i < hi - lo; i++) {
            int32_t e = build(c, item, s);
            if (e == FAIL) return FAIL;
            if (e == NONE) break;
            if (grow((void **)&c->scratch, &c->cap_scratch, c->n_scratch + 1, 4)) return nomem(c);
            c->scratch[c->n_scratch++] = e;
            s = e;
        }
        size_t k = c->n_scratch - base;
        if (k == 1) {
            r = c->scratch[base];
        } else {
            r = alloc(c, 1);
            if (r == FAIL) return FAIL;
            if (reserve_eps(c, k)) return nomem(c);
            for (size_t i = 0; i < k; i++) {
                o->eps_src[o->n_eps] = c->scratch[base + i];
                o->eps_tgt[o->n_eps++] = r;
            }
        }
        c->n_scratch = base;
        c->frames--;
        return r;
    }
    case GD_NK_REF: {
        int32_t rule = x[1];
        if (rule < 0 || rule >= p->n_rules) return fail(c, GD_DFA_INVALID);
        if (p->rule_leaf) { /* the rule's own automaton (gd_nfa_build_rule_dfas) */
            gd_leaf_view v;
            int k = p->rule_leaf(p->rule_leaf_ud, rule, p->max_frames - c->frames, &v);
            if (k < 0) return fail(c, k);
            if (k > 0) return embed_view(c, &v, s);
        }
        int32_t d = c->depth[rule];
        if (d >= p->max_depth) return NONE; /* recursion bound reached: empty language here */
        if (p->base_len + c->n_stack > p->max_nesting) {
            c->o->err_rule = rule;
            c->o->err_rule2 = top_rule(c);
            return fail(c, GD_NFA_NESTING);
        }
        ENTER(c); /* `_replayed` */
        c->depth[rule] = d + 1;
        c->stack[c->n_stack++] = rule;
        int32_t e = build(c, p->rule_body[rule], s);
        if (e == FAIL) return FAIL;
        c->n_stack--;
        c->depth[rule] = d;
        c->frames--;
        return e;
    }
    case GD_NK_SPECIAL: {
        int32_t t = alloc(c, 1);
        if (t == FAIL) return FAIL;
        if (reserve_spec(c, 1)) return nomem(c);
        size_t j = o->n_spec++;
        o->sp_src[j] = s;
        o->sp_k[j] = x[1];
        o->sp_tgt[j] = t;
        return t;
    }
    case GD_NK_LEAF:
        return embed(c, x[1], s);
    case GD_NK_NONE:
        return NONE;
    case GD_NK_FALLBACK:
        o->err_arg = x[1];
        return fail(c, GD_NFA_FALLBACK);
    default:
        return fail(c, GD_DFA_INVALID);
    }
}

static int32_t build(ctx *c, int32_t node, int32_t s) {
    ENTER(c);
    int32_t e = build_node(c, node, s);
    c->frames--;
    return e;
}

/* The memo of build_into: (key, t) -> (entry state, result), open addressing (keys of
 * 0 are free slots: a key is a node's offset + 1, or -(rule + 1) for a rule automaton). */
static int32_t *tail_find(ctx *c, int64_t key, int32_t t) {
    if (!c->cap_tails) return NULL;
    uint64_t h = ((uint64_t)key * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)t * 0xBF58476D1CE4E5B9ull);
    size_t mask = c->cap_tails - 1;
    for (size_t i = (size_t)(h >> 20) & mask;; i = (i + 1) & mask) {
        int32_t *e = c->tails + 4 * i;
        if (e[0] == 0 && e[1] == 0) return e; /* free */
        if (((int64_t)e[0]) == key && e[1] == t) return e;
    }
}

/* Remembers (key, t) -> (entry, r).  0, or -1 without memory. */
static int tail_put(ctx *c, int64_t key, int32_t t, int32_t entry, int32_t r) {
    if (2 * (c->n_tails + 1) > c->cap_tails) {
        size_t cap = c->cap_tails ? 2 * c->cap_tails : 64;
        int32_t *old = c->tails;
        size_t ocap = c->cap_tails;
        c->tails = calloc(cap, 4 * sizeof(int32_t));
        if (!c->tails) {
            c->tails = old;
            return -1;
        }
        c->cap_tails = cap;
        for (size_t i = 0; i < ocap; i++) {
            int32_t *e = old + 4 * i;
            if (e[0] == 0 && e[1] == 0) continue;
            int32_t *d = tail_find(c, e[0], e[1]);
            memcpy(d, e, 4 * sizeof(int32_t));
        }
        free(old);
    }
    int32_t *e = tail_find(c, key, t);
    e[0] = (int32_t)key;
    e[1] = t;
    e[2] = entry;
    e[3] = r;
    c->n_tails++;
    return 0;
}

/* Hash of the items i.. of the sequence record x (their offsets). */
static uint64_t suffix_hash(const int32_t *x, int32_t i) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)(x[1] - i);
    for (int32_t j = i; j < x[1]; j++) {
        h ^= (uint64_t)(uint32_t)x[2 + j];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return h | 1; /* 0 marks a free slot */
}

/* The slot of the suffix (items i.. of sequence record `node`, hash h) into t: found, or the
 * free slot where it goes. */
static struct sfx *suffix_find(ctx *c, int32_t node, int32_t i, uint64_t h, int32_t t) {
    if (!c->cap_sfx) return NULL;
    const int32_t *code = c->p->code, *x = code + node;
    size_t mask = c->cap_sfx - 1;
    for (size_t k = (size_t)((h ^ ((uint64_t)(uint32_t)t * 0x94D049BB133111EBull)) >> 17) & mask;;
         k = (k + 1) & mask) {
        struct sfx *e = c->sfx + k;
        if (!e->h) return e;
        if (e->h != h || e->t != t) continue;
        const int32_t *y = code + e->node;
        if (y[1] - e->i != x[1] - i) continue;
        if (!memcmp(y + 2 + e->i, x + 2 + i, sizeof(int32_t) * (size_t)(x[1] - i))) return e;
    }
}

static int suffix_put(ctx *c, int32_t node, int32_t i, uint64_t h, int32_t t, int32_t entry, int32_t r) {
    if (2 * (c->n_sfx + 1) > c->cap_sfx) {
        size_t cap = c->cap_sfx ? 2 * c->cap_sfx : 64, ocap = c->cap_sfx;
        struct sfx *old = c->sfx;
        c->sfx = calloc(cap, sizeof(struct sfx));
        if (!c->sfx) {
            c->sfx = old;
            return -1;
        }
        c->cap_sfx = cap;
        for (size_t k = 0; k < ocap; k++)
            if (old[k].h) *suffix_find(c, old[k].node, old[k].i, old[k].h, old[k].t) = old[k];
        free(old);
    }
    struct sfx *e = suffix_find(c, node, i, h, t);
    e->h = h;
    e->t = t;
    e->node = node;
    e->i = i;
    e->entry = entry;
    e->r = r;
    c->n_sfx++;
    return 0;
}

/* Whether an item of this kind is worth an entry state of its own when a sequence ends in a
 * tail position (a literal or a byte set is cheaper built again than shared). */
static int shareable(const int32_t *x) { return x[0] != GD_NK_LIT && x[0] != GD_NK_SET && x[0] != GD_NK_NONE; }

/* Rule-DFA builds only (p->rule_leaf; gd_nfa_build_rule_dfas): `node` from s into the given
 * state t (0, NONE for the empty language, or FAIL).  A choice's branches are built into its
 * end, the last item of a sequence and the item of an optional (`x{0,1}`) into the state the
 * sequence or the optional ends at.  A choice or a reference reached that way is built once
 * per (node, t) -- a rule once per (rule, t) -- from a fresh entry state (a rule automaton's
 * first state), and a later occurrence in a tail position with the same end t is an epsilon
 * edge into that entry: the same language (both continue at t, through the same automaton:
 * the occurrences are in one choice, so in the same rule context), with one copy where an
 * object's property value had two (as the first property present, and after a comma), which
 * the subset construction copied and the minimisation merged again.  Anything else is built
 * by build, then an epsilon edge from its end to t. */
static int32_t build_into(ctx *c, int32_t node, int32_t s, int32_t t) {
    const gd_nfa_program *p = c->p;
    if (node < 0 || (size_t)node >= p->n_code) return fail(c, GD_DFA_INVALID);
    const int32_t *x = p->code + node;
    if (rec_len(x, p->n_code - (size_t)node) < 0) return fail(c, GD_DFA_INVALID);
    int64_t key = 0;
    gd_leaf_view v;
    int leaf = 0;
    if (x[0] == GD_NK_CHOICE) {
        key = (int64_t)node + 1;
    } else if (x[0] == GD_NK_REF) {
        if (x[1] < 0 || x[1] >= p->n_rules) return fail(c, GD_DFA_INVALID);
        key = -(int64_t)x[1] - 1;
    }
    if (key) {
        int32_t *hit = tail_find(c, key, t);
        if (hit && (hit[0] || hit[1])) {
            if (eps(c, s, hit[2])) return nomem(c);
            return hit[3];
        }
    }
    ENTER(c);
    int32_t r = NONE, entry = s;
    if (x[0] == GD_NK_REF) {
        int k = p->rule_leaf(p->rule_leaf_ud, x[1], p->max_frames - c->frames, &v);
        if (k < 0) return fail(c, k);
        leaf = k > 0;
    }
    if (key && !leaf) {
        entry = alloc(c, 1);
        if (entry == FAIL) return FAIL;
        if (eps(c, s, entry)) return nomem(c);
    }
    switch (x[0]) {
    case GD_NK_CHOICE: /* every branch from the entry (a fragment never adds an edge into the
                        * state it is built from, so the branches need no entry of their own) */
        for (int32_t i = 0; i < x[1]; i++) {
            int32_t e = build_into(c, x[2 + i], entry, t);
            if (e == FAIL) return FAIL;
            if (e == 0) r = 0;
        }
        break;
    case GD_NK_SEQ: {
        /* the longest suffix (from a shareable item) already built into t: the items before
         * it, then an epsilon edge into it; else every item, with an entry state before each
         * shareable one (its suffix remembered once the sequence is built) */
        int32_t n = x[1], hit = n;
        const int32_t *code = p->code;
        uint64_t hs[64];
        int32_t at[64], ent[64], na = 0, hit_entry = -1, hit_r = NONE;
        for (int32_t i = 1; i < n && na < 1; i++) { /* (the first shareable item after the head) */
            int32_t y = x[2 + i];
            if (y < 0 || (size_t)y >= p->n_code) return fail(c, GD_DFA_INVALID);
            if (!shareable(code + y)) continue;
            uint64_t h = suffix_hash(x, i);
            struct sfx *e = suffix_find(c, node, i, h, t);
            if (e && e->h) { /* (copied: the items built before it may move the table) */
                hit = i;
                hit_entry = e->entry;
                hit_r = e->r;
                break;
            }
            hs[na] = h;
            at[na++] = i;
        }
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++) {
            if (i == hit) {
                if (eps(c, s, hit_entry)) return nomem(c);
                r = hit_r;
                break;
            }
            int32_t e;
            if (k < na && at[k] == i) { /* an entry state for the suffix from i */
                e = alloc(c, 1);
                if (e == FAIL) return FAIL;
                if (eps(c, s, e)) return nomem(c);
                s = e;
                ent[k++] = e;
            }
            if (i + 1 < n) {
                e = build(c, x[2 + i], s);
                if (e < 0) {
                    c->frames--;
                    return e;
                }
                s = e;
            } else {
                r = build_into(c, x[2 + i], s, t);
                if (r == FAIL) return FAIL;
            }
        }
        if (n == 0) {
            if (eps(c, s, t)) return nomem(c);
            r = 0;
        }
        if (r == 0)
            for (int32_t j = 0; j < k; j++)
                if (suffix_put(c, node, at[j], hs[j], t, ent[j], r)) return nomem(c);
        break;
    }
    case GD_NK_REPEAT:
        if (x[2] == 0 && x[3] == 1) {
            if (eps(c, s, t)) return nomem(c);
            if (build_into(c, x[1], s, t) == FAIL) return FAIL;
            r = 0;
            break;
        }
        goto plain;
    case GD_NK_REF:
        if (!leaf) goto plain;
        if (v.n < 1) return fail(c, GD_DFA_INVALID);
        entry = alloc(c, v.n);
        if (entry == FAIL) return FAIL;
        if (eps(c, s, entry)) return nomem(c);
        if (reserve_edges(c, v.n_edges) || reserve_eps(c, v.n_acc)) return nomem(c);
        {
            gd_nfa_out *o = c->o;
            for (size_t i = 0; i < v.n_edges; i++) {
                size_t j = o->n_edges++;
                o->e_src[j] = v.src[i] + entry;
                o->e_lo[j] = v.lo[i];
                o->e_hi[j] = v.hi[i];
                o->e_tgt[j] = v.tgt[i] + entry;
            }
            for (size_t i = 0; i < v.n_acc; i++) {
                o->eps_src[o->n_eps] = v.acc[i] + entry;
                o->eps_tgt[o->n_eps++] = t;
            }
        }
        r = 0;
        break;
    default:
    plain: {
        int32_t e = build_node(c, node, entry);
        if (e == FAIL) return FAIL;
        if (e != NONE) {
            if (eps(c, e, t)) return nomem(c);
            r = 0;
        }
    }
    }
    if (key && tail_put(c, key, t, entry, r)) return nomem(c);
    c->frames--;
    return r;
}

int gd_nfa_build(const gd_nfa_program *p, int32_t root, int32_t n0, int32_t s, gd_nfa_out *out) {
    memset(out, 0, sizeof *out);
    out->end = NONE;
    out->err_rule = out->err_rule2 = out->err_arg = -1;
    out->n = n0;
    if (n0 < 0 || s < 0 || s >= n0 || p->n_rules < 0 || p->max_nesting < 0 || p->n_leaves < 0)
        return GD_DFA_INVALID;
    for (int32_t i = 0; i < p->n_leaves; i++) { /* leaves: edges and accepting states in range */
        int32_t k = p->leaf_n[i];
        if (k < 1 || p->leaf_eoff[i] > p->leaf_eoff[i + 1] || p->leaf_aoff[i] > p->leaf_aoff[i + 1] ||
            p->leaf_eoff[i] < 0 || p->leaf_aoff[i] < 0)
            return GD_DFA_INVALID;
        for (int64_t j = p->leaf_eoff[i]; j < p->leaf_eoff[i + 1]; j++)
            if (p->leaf_src[j] < 0 || p->leaf_src[j] >= k || p->leaf_tgt[j] < 0 || p->leaf_tgt[j] >= k ||
                p->leaf_lo[j] > p->leaf_hi[j])
                return GD_DFA_INVALID;
        for (int64_t j = p->leaf_aoff[i]; j < p->leaf_aoff[i + 1]; j++)
            if (p->leaf_acc[j] < 0 || p->leaf_acc[j] >= k) return GD_DFA_INVALID;
    }
    for (int32_t r = 0; r < p->n_rules; r++)
        if (p->rule_body[r] < 0 || (size_t)p->rule_body[r] >= p->n_code) return GD_DFA_INVALID;
    ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.o = out;
    c.depth = calloc((size_t)p->n_rules + 1, 4);
    /* at most min(max_nesting, max_frames) + 1 rules are pushed: a push follows the nesting
     * check and costs frames */
    int32_t cap = p->max_nesting < p->max_frames ? p->max_nesting : (p->max_frames > 0 ? p->max_frames : 0);
    c.stack = malloc(((size_t)cap + 2) * 4);
    if (!c.depth || !c.stack) {
        free(c.depth);
        free(c.stack);
        return GD_DFA_NOMEM;
    }
    double b = p->budget_s;
    c.has_deadline = b == b && b < 1e18;
    c.at = c.has_deadline ? nfa_now() + b : 0.0;
    int32_t e = build(&c, root, s);
    free(c.depth);
    free(c.stack);
    free(c.scratch);
    free(c.tails);
    free(c.sfx);
    if (e == FAIL) {
        int rc = c.rc;
        int32_t r1 = out->err_rule, r2 = out->err_rule2, a = out->err_arg, n = out->n;
        gd_nfa_out_free(out);
        out->err_rule = r1;
        out->err_rule2 = r2;
        out->err_arg = a;
        out->n = n;
        return rc;
    }
    out->end = e;
    return GD_DFA_OK;
}

void gd_nfa_out_free(gd_nfa_out *o) {
    free(o->eps_src);
    free(o->eps_tgt);
    free(o->e_src);
    free(o->e_lo);
    free(o->e_hi);
    free(o->e_tgt);
    free(o->sp_src);
    free(o->sp_k);
    free(o->sp_tgt);
    memset(o, 0, sizeof *o);
    o->end = NONE;
    o->err_rule = o->err_rule2 = o->err_arg = -1;
}
