/* Plain-text chains of a byte DFA (the native side of decoding/backends/textloop.py).
 *
 * A plain-text profile is a small character DFA over bytes (state 0 = between characters,
 * a character is complete when it returns to 0).  Given for each of its states the distinct
 * (byte class of the grammar DFA, next character state) pairs, a step from grammar state s
 * explores the product (character state, grammar state) from (0, s):
 *   - every plain character must lead to one and the same grammar state s' (a uniform step),
 *   - no plain byte may be dead part-way (else the step is mixed),
 *   - if no plain character is allowed at all from s, the chain ends there.
 * The chain length of s is the number of uniform steps before a state that allows no plain
 * character; a chain that revisits a state is unbounded.
 */
#include "gd_native.h"

#include <stdlib.h>
#include <string.h>

#define GD_PLAIN_SEEN_MAX 1024 /* product pairs explored by one step; beyond it: mixed */

/* The states a chain has visited: a bitmap that grows (a lazy automaton makes states while
 * the chain runs). */
typedef struct {
    uint32_t *w;
    size_t n;
} gd_bits;

static int bits_has(const gd_bits *b, int32_t s) {
    return (size_t)(s >> 5) < b->n && ((b->w[s >> 5] >> (s & 31)) & 1u);
}

static int bits_add(gd_bits *b, int32_t s) {
    size_t need = (size_t)(s >> 5) + 1;
    if (need > b->n) {
        size_t nn = 2 * need;
        uint32_t *w = realloc(b->w, nn * sizeof(uint32_t));
        if (!w) return -1;
        memset(w + b->n, 0, (nn - b->n) * sizeof(uint32_t));
        b->w = w;
        b->n = nn;
    }
    b->w[s >> 5] |= 1u << (s & 31);
    return 0;
}

/* TP: the automaton parameters; ROW(d): row d of it (NULL: could not be made: mixed);
 * TA/NS: those parameters as passed on, and the number of states. */
#define GD_DEFINE_PLAIN(STEP, CHAIN, T, TP, ROW, TA, NSP, NS)                                      \
    int32_t STEP(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next,       \
                 TP, int32_t state) {                                                              \
        int32_t seen_p[GD_PLAIN_SEEN_MAX], seen_d[GD_PLAIN_SEEN_MAX];                              \
        int32_t n_seen = 1, target = -1, k, j;                                                     \
        seen_p[0] = 0;                                                                             \
        seen_d[0] = state;                                                                         \
        /* the explored pairs double as the work list: pairs [k, n_seen) are pending */            \
        for (k = 0; k < n_seen; k++) {                                                             \
            int32_t p = seen_p[k], d = seen_d[k];                                                  \
            const T *row = ROW(d);                                                                 \
            if (!row) return GD_PLAIN_MIXED;                                                       \
            int32_t lo = row_off[p], hi = row_off[p + 1], dead = 0;                                \
            for (j = lo; j < hi; j++)                                                              \
                if (row[pair_cls[j]] < 0) dead++;                                                  \
            if (dead) return (k == 0 && dead == hi - lo) ? GD_PLAIN_NONE : GD_PLAIN_MIXED;         \
            for (j = lo; j < hi; j++) {                                                            \
                int32_t dn = (int32_t)row[pair_cls[j]], pn = pair_next[j], m;                      \
                if (pn == 0) {                                                                     \
                    if (target >= 0 && target != dn) return GD_PLAIN_MIXED;                       \
                    target = dn;                                                                   \
                    continue;                                                                      \
                }                                                                                  \
                for (m = 0; m < n_seen; m++)                                                       \
                    if (seen_p[m] == pn && seen_d[m] == dn) break;                                 \
                if (m < n_seen) continue;                                                          \
                if (n_seen == GD_PLAIN_SEEN_MAX) return GD_PLAIN_MIXED;                            \
                seen_p[n_seen] = pn;                                                               \
                seen_d[n_seen] = dn;                                                               \
                n_seen++;                                                                          \
            }                                                                                      \
        }                                                                                          \
        return target; /* -1 (GD_PLAIN_NONE) when no character completes */                       \
    }                                                                                              \
                                                                                                   \
    int64_t CHAIN(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next,      \
                  TP, NSP int32_t state, uint32_t max_len) {                                       \
        gd_bits visited = {calloc(((NS) + 31) / 32 + 1, sizeof(uint32_t)), ((NS) + 31) / 32 + 1};   \
        int64_t len = 0;                                                                           \
        int32_t s = state;                                                                         \
        if (!visited.w) return GD_PLAIN_NOMEM;                                                     \
        for (;;) {                                                                                 \
            int32_t nxt;                                                                           \
            if (bits_has(&visited, s)) { len = GD_PLAIN_UNBOUNDED; break; }                        \
            nxt = STEP(row_off, pair_cls, pair_next, TA, s);                                       \
            if (nxt == GD_PLAIN_MIXED) { len = GD_PLAIN_MIXED; break; }                            \
            if (nxt == GD_PLAIN_NONE) break;                                                       \
            if (bits_add(&visited, s) < 0) { len = GD_PLAIN_NOMEM; break; }                        \
            len++;                                                                                 \
            s = nxt;                                                                               \
            if (len >= (int64_t)max_len) break; /* long enough: every length >= it masks alike */ \
        }                                                                                          \
        free(visited.w);                                                                           \
        return len;                                                                                \
    }

#define GD_TP32 const int32_t *table, size_t ncols
#define GD_TP16 const int16_t *table, size_t ncols
#define GD_TABLE_ROW(d) (table + (size_t)(d) * ncols)
#define GD_TA table, ncols
#define GD_NSP size_t n_states_,
GD_DEFINE_PLAIN(gd_plain_step, gd_plain_chain, int32_t, GD_TP32, GD_TABLE_ROW, GD_TA, GD_NSP, n_states_)
GD_DEFINE_PLAIN(gd_plain_step16, gd_plain_chain16, int16_t, GD_TP16, GD_TABLE_ROW, GD_TA, GD_NSP, n_states_)
/* a lazy automaton (the visited bitmap grows with the states the chain makes) */
#define GD_TPL gd_lazy *L
#define GD_LAZY_ROW(d) gd_lazy_row(L, (d))
#define GD_LA L
#define GD_NSL
GD_DEFINE_PLAIN(gd_plain_step_lazy, gd_plain_chain_lazy, int32_t, GD_TPL, GD_LAZY_ROW, GD_LA, GD_NSL,
                gd_lazy_n_states(L))

/* Character pairs of a profile for one grammar's byte classes (the input of gd_plain_step):
 * one bitmap of (class, next) per character state, read out in (class, next) order, so the
 * pairs are sorted exactly as the Python reference (decoding/backends/textloop.py,
 * char_pairs_py) sorts them. */
int32_t gd_char_pairs(const int16_t *char_dfa, size_t n_char, const uint16_t *byte_class, int32_t *row_off,
                      uint8_t *pair_cls, int16_t *pair_next) {
    uint64_t seen[256 * 4]; /* class c, next q: bit (q & 63) of word c * 4 + (q >> 6) */
    int32_t n = 0;
    size_t p;
    int b, c, w;
    if (n_char > 256) return -1;
    for (b = 0; b < 256; b++)
        if (byte_class[b] > 255) return -1;
    memset(seen, 0, sizeof seen);
    for (p = 0; p < n_char; p++) {
        const int16_t *row = char_dfa + p * 256;
        int cmax = -1;
        row_off[p] = n;
        for (b = 0; b < 256; b++) {
            int q = row[b];
            if (q < 0) continue;
            if (q > 255) return -1;
            c = byte_class[b];
            seen[c * 4 + (q >> 6)] |= (uint64_t)1 << (q & 63);
            if (c > cmax) cmax = c;
        }
        for (c = 0; c <= cmax; c++)
            for (w = 0; w < 4; w++) {
                uint64_t bits = seen[c * 4 + w];
                seen[c * 4 + w] = 0; /* (cleared as read: the next state starts from zero) */
                while (bits) {
                    int q = w * 64 + __builtin_ctzll(bits);
                    bits &= bits - 1;
                    pair_cls[n] = (uint8_t)c;
                    pair_next[n] = (int16_t)q;
                    n++;
                }
            }
    }
    row_off[n_char] = n;
    return n;
}
