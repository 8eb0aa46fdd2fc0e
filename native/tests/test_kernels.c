/* C test driver for the native core: every kernel implementation supported on this CPU is
 * checked against a bit-by-bit reference, plus the trie walk on a tiny vocabulary.
 * Runs natively and under qemu-aarch64 (NEON path).  Exit code 0 = all passed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gd_native.h"

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static uint32_t rng_state = 12345u;
static uint32_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 17; rng_state ^= rng_state << 5; return rng_state; }

static int bit(const uint32_t *m, size_t i) { return (m[i >> 5] >> (i & 31)) & 1u; }

static void test_impl(int impl) {
    const gd_kernels *k = gd_kernels_for(impl);
    CHECK((k != NULL) == (gd_impl_supported(impl) != 0), "%s: table iff supported", gd_impl_name(impl));
    if (!k) return;
    CHECK(gd_kernels_impl(k) == impl, "%s: table reports impl %d", gd_impl_name(impl), gd_kernels_impl(k));
    const size_t sizes[] = {1, 31, 32, 33, 100, 4096, 49152, 262144 + 7};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si], nw = (n + 31) / 32;
        uint32_t *m = malloc(nw * 4), *a = malloc(nw * 4), *d = malloc(nw * 4);
        for (size_t w = 0; w < nw; w++) {
            uint32_t r = rnd();
            m[w] = (r % 4 == 0) ? 0xFFFFFFFFu : (r % 4 == 1) ? 0u : rnd();
            a[w] = rnd();
        }
        gd_mask_and(k, d, m, a, nw);
        for (size_t w = 0; w < nw; w++) CHECK(d[w] == (m[w] & a[w]), "%s and word %zu", gd_impl_name(impl), w);
        gd_mask_or(k, d, m, a, nw);
        for (size_t w = 0; w < nw; w++) CHECK(d[w] == (m[w] | a[w]), "%s or word %zu", gd_impl_name(impl), w);
        size_t cnt = 0;
        for (size_t i = 0; i < n; i++) cnt += bit(m, i);
        CHECK(gd_mask_count(m, n) == cnt, "%s count n=%zu", gd_impl_name(impl), n);

        float *l = malloc(n * 4);
        for (size_t i = 0; i < n; i++) l[i] = (float)i * 0.5f;
        gd_apply_mask_f32(k, l, n, m, -INFINITY);
        for (size_t i = 0; i < n; i++)
            CHECK(bit(m, i) ? l[i] == (float)i * 0.5f : isinf(l[i]) && l[i] < 0, "%s apply n=%zu i=%zu", gd_impl_name(impl), n, i);
        free(l);

        /* strided view over llama_token_data {int32 id; float logit; float p;} */
        struct { int32_t id; float logit; float p; } *td = malloc(n * 12);
        for (size_t i = 0; i < n; i++) { td[i].id = (int32_t)i; td[i].logit = (float)i; td[i].p = 7.0f; }
        gd_apply_mask_strided_f32(k, &td[0].logit, n, 12, m, -INFINITY);
        for (size_t i = 0; i < n; i++) {
            CHECK(td[i].id == (int32_t)i && td[i].p == 7.0f, "%s strided clobbered n=%zu i=%zu", gd_impl_name(impl), n, i);
            CHECK(bit(m, i) ? td[i].logit == (float)i : isinf(td[i].logit), "%s strided n=%zu i=%zu", gd_impl_name(impl), n, i);
        }
        free(td);

        /* stride 4 through the strided entry point takes the contiguous kernel */
        float *c = malloc(n * 4);
        for (size_t i = 0; i < n; i++) c[i] = 1.0f;
        gd_apply_mask_strided_f32(k, c, n, 4, m, -INFINITY);
        for (size_t i = 0; i < n; i++)
            CHECK(bit(m, i) ? c[i] == 1.0f : isinf(c[i]), "%s stride-4 n=%zu i=%zu", gd_impl_name(impl), n, i);
        free(c);
        free(m); free(a); free(d);
    }
    printf("ok   kernels %s\n", gd_impl_name(impl));
}

static void test_trie(void) {
    /* vocabulary: 0:"a" 1:"ab" 2:"b" 3:"" (control) 4:"abc" 5:"ab" (duplicate bytes) 6:"c" */
    const char *toks[] = {"a", "ab", "b", "", "abc", "ab", "c"};
    uint32_t n = 7;
    uint64_t off[8];
    char blob[64];
    uint64_t p = 0;
    for (uint32_t i = 0; i < n; i++) { off[i] = p; memcpy(blob + p, toks[i], strlen(toks[i])); p += strlen(toks[i]); }
    off[n] = p;
    gd_trie *t = gd_trie_build((const uint8_t *)blob, off, n);
    CHECK(t != NULL, "trie build");
    /* DFA for the language "ab" "c"?: 0 -a-> 1 -b-> 2 -c-> 3 */
    uint8_t classes[256];
    for (int i = 0; i < 256; i++) classes[i] = (uint8_t)i;
    int32_t table[4 * 256];
    for (int i = 0; i < 4 * 256; i++) table[i] = -1;
    table[0 * 256 + 'a'] = 1;
    table[1 * 256 + 'b'] = 2;
    table[2 * 256 + 'c'] = 3;
    uint32_t mask[1];
    int32_t next[32];
    size_t k = gd_trie_walk(t, classes, table, 256, 0, mask, 1, next);
    /* from 0: "a"(0) "ab"(1) "abc"(4) "ab"(5) */
    CHECK(k == 4 && mask[0] == ((1u << 0) | (1u << 1) | (1u << 4) | (1u << 5)), "walk from 0: k=%zu mask=%x", k, mask[0]);
    CHECK(next[0] == 1 && next[1] == 2 && next[4] == 3 && next[5] == 2, "next states");
    k = gd_trie_walk(t, classes, table, 256, 1, mask, 1, NULL);
    CHECK(k == 1 && mask[0] == (1u << 2), "walk from 1: k=%zu mask=%x", k, mask[0]);
    k = gd_trie_walk(t, classes, table, 256, 3, mask, 1, NULL);
    CHECK(k == 0 && mask[0] == 0, "walk from 3");
    CHECK(gd_trie_nodes(t) == 5, "nodes=%zu", gd_trie_nodes(t));
    int16_t table16[4 * 256];
    for (int i = 0; i < 4 * 256; i++) table16[i] = (int16_t)table[i];
    uint32_t mask16[1];
    int32_t next16[32];
    k = gd_trie_walk16(t, classes, table16, 256, 0, mask16, 1, next16);
    CHECK(k == 4 && mask16[0] == ((1u << 0) | (1u << 1) | (1u << 4) | (1u << 5)), "walk16 from 0");
    CHECK(next16[0] == 1 && next16[1] == 2 && next16[4] == 3 && next16[5] == 2, "walk16 next states");
    gd_trie_free(t);
    printf("ok   trie walk\n");
}

static void test_selection(void) {
    int best = gd_best_impl();
    CHECK(best >= 0 && best < GD_IMPL_COUNT && gd_impl_supported(best), "best impl %d supported", best);
    CHECK(gd_impl_supported(GD_IMPL_SCALAR) && gd_kernels_for(GD_IMPL_SCALAR) != NULL, "scalar always runs");
    CHECK(gd_kernels_for(-1) == NULL && gd_kernels_for(GD_IMPL_COUNT) == NULL, "unknown impl has no table");
    CHECK(gd_kernels_for(GD_IMPL_SCALAR) == gd_kernels_for(GD_IMPL_SCALAR), "tables are static");
    for (int i = 0; i < GD_IMPL_COUNT; i++)
        CHECK(gd_impl_from_name(gd_impl_name(i)) == i, "name round trip %d", i);
    CHECK(gd_impl_from_name("sve9") == -1 && strcmp(gd_impl_name(GD_IMPL_COUNT), "unknown") == 0, "unknown names");
    /* two tables used alternately give the same results: no hidden selection state */
    const gd_kernels *s = gd_kernels_for(GD_IMPL_SCALAR), *b = gd_kernels_for(best);
    uint32_t m[4] = {0x0F0F0F0Fu, 0xFFFFFFFFu, 0u, 0x80000001u};
    float x[128], y[128];
    for (int i = 0; i < 128; i++) x[i] = y[i] = (float)i;
    gd_apply_mask_f32(b, x, 128, m, -1.0f);
    gd_apply_mask_f32(s, y, 128, m, -1.0f);
    CHECK(memcmp(x, y, sizeof x) == 0, "best and scalar agree");
    printf("ok   selection (best: %s)\n", gd_impl_name(best));
}

/* Hash and equality used for interning: equal words hash equally, one flipped bit anywhere
 * changes equality (and, for this fixed data, the hash). */
static void test_hash_equal(void) {
    uint32_t a[4001], b[4001];
    for (size_t w = 0; w < 4001; w++) a[w] = b[w] = rnd();
    CHECK(gd_mask_hash(a, 4001) == gd_mask_hash(b, 4001), "hash of equal words");
    CHECK(gd_mask_equal(a, b, 4001), "equal words");
    for (size_t w = 0; w < 4001; w += 997) {
        b[w] ^= 1u << (w & 31);
        CHECK(!gd_mask_equal(a, b, 4001), "flipped bit in word %zu", w);
        CHECK(gd_mask_hash(a, 4001) != gd_mask_hash(b, 4001), "hash of a flipped bit in word %zu", w);
        b[w] = a[w];
    }
    CHECK(gd_mask_hash(a, 4000) != gd_mask_hash(a, 4001), "hash depends on the length");
    const uint32_t ids[] = {0, 31, 32, 33, 64, 127999, 128031, 999999};
    gd_mask_from_ids(b, 4001, ids, 8);
    size_t set = 0;
    for (size_t i = 0; i < 4001 * 32; i++) set += bit(b, i);
    CHECK(set == 7, "from_ids: %zu bits set, want 7 (one id is past the mask)", set);
    for (size_t k = 0; k < 7; k++) CHECK(bit(b, ids[k]), "from_ids: id %u", ids[k]);
    int64_t back[8];
    size_t nb = gd_mask_to_ids(b, 4001 * 32, back, 8);
    CHECK(nb == 7, "to_ids: %zu ids, want 7", nb);
    for (size_t k = 0; k < nb; k++) CHECK(back[k] == (int64_t)ids[k], "to_ids[%zu] = %lld", k, (long long)back[k]);
    CHECK(gd_mask_to_ids(b, 128000, back, 8) == 6, "to_ids below n=128000");
    CHECK(gd_mask_to_ids(b, 4001 * 32, back, 3) == 3, "to_ids stops at cap");
    /* mark_next: the states of the set bits, entries outside the mark skipped */
    static int32_t nxt[4001 * 32];
    for (size_t i = 0; i < 4001 * 32; i++) nxt[i] = (int32_t)(i % 5) - 1; /* -1, 0, 1, 2, 3 */
    nxt[127999] = 9; /* past the mark */
    uint8_t mark[5] = {0, 0, 0, 0, 0};
    CHECK(gd_mask_mark_next(b, 4001 * 32, nxt, mark, 4) == 7, "mark_next counts the set bits");
    /* ids 0, 31, 32, 33, 64, 127999, 128031 -> states -1, 0, 1, 2, 3, 9 (skipped), 0 */
    CHECK(mark[0] && mark[1] && mark[2] && mark[3] && !mark[4], "mark_next marks %d%d%d%d%d", mark[0], mark[1],
          mark[2], mark[3], mark[4]);
    memset(mark, 0, sizeof mark);
    CHECK(gd_mask_mark_next(b, 33, nxt, mark, 5) == 3, "mark_next below n=33");
    CHECK(mark[0] && mark[1] && !mark[2] && !mark[3], "mark_next below n=33 marks");
}

/* gd_mask_digest = gd_mask_hash + gd_mask_count + the ids while they fit, for sparse and
 * dense masks, partial last words, and caps below, at and above the count. */
static void test_digest(void) {
    static uint32_t m[4001];
    static const size_t ns[] = {1, 31, 32, 33, 255, 256, 257, 4000 * 32 - 5, 4000 * 32, 4001 * 32 - 5, 4001 * 32};
    for (int density = 0; density < 3; density++) {
        for (size_t w = 0; w < 4001; w++) {
            uint32_t x = rnd();
            m[w] = density == 0 ? (x % 61 == 0 ? 1u << (x & 31) : 0) : density == 1 ? (x & rnd() & rnd()) : x;
        }
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            size_t n = ns[i], nw = (n + 31) / 32, want = gd_mask_count(m, n);
            static int64_t ref[4001 * 32];
            static uint32_t got[4001 * 32];
            gd_mask_to_ids(m, n, ref, want);
            size_t caps[] = {0, want > 0 ? want - 1 : 0, want, want + 1, 1024};
            for (int c = 0; c < 5; c++) {
                uint64_t h = 0;
                for (size_t k = 0; k < want + 1 && k < 4001 * 32; k++) got[k] = 0xDEADBEEFu;
                size_t cnt = gd_mask_digest(m, n, &h, got, caps[c]);
                CHECK(cnt == want, "digest count n=%zu cap=%zu: %zu, want %zu", n, caps[c], cnt, want);
                CHECK(h == gd_mask_hash(m, nw), "digest hash n=%zu", n);
                if (want <= caps[c])
                    for (size_t k = 0; k < want; k++)
                        CHECK(got[k] == (uint32_t)ref[k], "digest id %zu n=%zu: %u, want %lld", k, n, got[k],
                              (long long)ref[k]);
            }
        }
    }
}

/* gd_state_mask on a tiny vocabulary, for one kernel table: a JSON-like string "[a-z]*" with
 * the letters as the plain profile (unbounded chain: the plain tokens plus the walk of the
 * others), a bounded body of two letters (the plain tokens of at most 2 characters, from
 * upto[2] or by clearing the longer ones), a full walk, a special and end-of-generation. */
static gd_trie *build(const char *const *toks, uint32_t n, const uint8_t *skip) {
    uint64_t off[16];
    char blob[64];
    uint64_t p = 0;
    for (uint32_t i = 0; i < n; i++) {
        off[i] = p;
        size_t l = skip && skip[i] ? 0 : strlen(toks[i]);
        memcpy(blob + p, toks[i], l);
        p += l;
    }
    off[n] = p;
    return gd_trie_build((const uint8_t *)blob, off, n);
}

static void test_state_mask(int impl) {
    const gd_kernels *kern = gd_kernels_for(impl);
    if (!kern) return;
    /* 0:"a" 1:"ab" 2:"\"" 3:"a\"" 4:"b" 5: special 6:"abc" 7: end of generation */
    const char *const toks[] = {"a", "ab", "\"", "a\"", "b", "", "abc", ""};
    const uint8_t plain[8] = {1, 1, 0, 0, 1, 0, 1, 0};
    gd_trie *all = build(toks, 8, NULL), *other = build(toks, 8, plain);
    int16_t cd[256];
    uint16_t bc16[256];
    uint8_t classes[256];
    for (int b = 0; b < 256; b++) {
        cd[b] = (b >= 'a' && b <= 'z') ? 0 : -1;
        classes[b] = b == '"' ? 1 : (b >= 'a' && b <= 'z') ? 2 : 0;
        bc16[b] = classes[b];
    }
    int32_t row_off[2];
    uint8_t pair_cls[256];
    int16_t pair_next[256];
    CHECK(gd_char_pairs(cd, 1, bc16, row_off, pair_cls, pair_next) == 1, "char pairs");
    CHECK(gd_char_pairs(cd, 1, bc16, row_off, pair_cls, pair_next) == 1 && row_off[1] == 1 && pair_cls[0] == 2 &&
          pair_next[0] == 0, "char pairs again (no state left over)");
    uint8_t np_all[16], np_other[16], memo[5] = {0};
    CHECK(gd_trie_plain_flags(all, cd, 1, np_all) == 0 && gd_trie_plain_flags(other, cd, 1, np_other) == 0, "flags");
    /* states: 0 -"-> 1; 1 -[a-z]-> 1 (unbounded) ; 1 -"-> 2 (accepting; special col 3 -> 2);
     * 3 -[a-z]-> 4 -[a-z]-> 2 ... bounded: 3 and 4 also -"-> 2 */
    int32_t table[5 * 4];
    for (int i = 0; i < 20; i++) table[i] = -1;
    table[0 * 4 + 1] = 1;
    table[1 * 4 + 2] = 1;
    table[1 * 4 + 1] = 2;
    table[2 * 4 + 3] = 2;
    table[3 * 4 + 2] = 4;
    table[3 * 4 + 1] = 2;
    table[4 * 4 + 2] = 0; /* (0 has no letter: the chain from 3 is 2 letters long) */
    table[4 * 4 + 1] = 2;
    uint8_t accepting[5] = {0, 0, 1, 0, 0};
    uint32_t plain_mask[1] = {(1u << 0) | (1u << 1) | (1u << 4) | (1u << 6)}, upto2[1] = {(1u << 0) | (1u << 1) | (1u << 4)};
    uint32_t eog[1] = {1u << 7}, special[1] = {5}, ids[4] = {0, 4, 1, 6};
    int32_t nchars[4] = {1, 1, 2, 3};
    gd_state_masker sm = {0};
    sm.trie = all;
    sm.classes = classes;
    sm.table = table;
    sm.ncols = 4;
    sm.n_states = 5;
    sm.n_classes = 3;
    sm.nwords = 1;
    sm.sink = -1;
    sm.special_ids = special;
    sm.n_special = 1;
    sm.accepting = accepting;
    sm.eog_mask = eog;
    sm.n_profiles = 1;
    gd_masker_profile prof = {0}, *p = &prof;
    sm.prof = p;
    sm.loop[0].loop_memo = memo;
    p->other_trie = other;
    p->other_node_plain = np_other;
    p->node_plain = np_all;
    p->char_dfa = cd;
    p->n_char = 1;
    p->probes = (const uint8_t *)"bz";
    p->n_probes = 2;
    p->max_chars = 3;
    p->plain_mask = plain_mask;
    p->by_chars_ids = ids;
    p->by_chars_n = nchars;
    p->n_plain = 4;
    uint32_t m[1];
    const uint32_t want[5] = {1u << 2, 0x5Fu, (1u << 5) | (1u << 7), (1u << 0) | (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4),
                              (1u << 0) | (1u << 2) | (1u << 3) | (1u << 4)};
    for (int pass = 0; pass < 2; pass++) { /* without, then with upto[2] */
        p->upto[2] = pass ? upto2 : NULL;
        for (int32_t s = 0; s < 5; s++) {
            m[0] = 0xFFFFFFFFu;
            CHECK(gd_state_mask(kern, &sm, s, m) == 0 && m[0] == want[s], "%s state mask %d pass %d: %x, want %x",
                  gd_impl_name(impl), s, pass, m[0], want[s]);
        }
    }
    CHECK(sm.bulk == 0 && gd_state_mask(kern, &sm, 5, m) == -1, "state out of range");
    CHECK(gd_state_run(&sm, 0, (const uint8_t *)"\"ab\"", 4) == 2 && gd_state_run(&sm, 0, (const uint8_t *)"a", 1) == -1 &&
          gd_state_run(&sm, 9, (const uint8_t *)"", 0) == -1, "state run");
    uint32_t clear[4];
    uint32_t full[2] = {0xFFFFFFFFu, ~((1u << 3) | (1u << 9))};
    CHECK(gd_mask_clear_ids(full, 42, clear, 4) == 2 && clear[0] == 35 && clear[1] == 41, "clear ids");
    CHECK(gd_mask_clear_ids(full, 41, clear, 4) == 1 && gd_mask_clear_ids(full, 64, clear, 1) == 2, "clear ids: n and cap");
    CHECK(sm.loop[0].row_off && sm.loop[0].row_off[1] == 1, "the pairs were made once needed");
    gd_state_masker_release(&sm);
    CHECK(!sm.loop[0].row_off && !sm.loop[0].pair_cls && !sm.loop[0].pair_next, "released");
    gd_trie_free(all);
    gd_trie_free(other);
    printf("ok   state mask %s\n", gd_impl_name(impl));
}

/* gd_mask_index: a sparse mask is found again by (hash, ids, inverted) and by nothing less (same
 * hash with other ids, or the same ids inverted, are other masks); find-only misses; a taken id
 * is refused; get and expand give back what was stored, over many entries (the slots grow). */
static void test_mask_index(void) {
    gd_mask_index *ix = gd_mask_index_new();
    CHECK(ix != NULL, "index");
    const uint32_t a[] = {3, 5, 40}, b[] = {3, 5, 41};
    CHECK(gd_mask_index_intern(ix, 7, a, 3, 0, 0) == 0, "add a");
    CHECK(gd_mask_index_intern(ix, 7, a, 3, 0, 1) == 0, "find a");
    CHECK(gd_mask_index_intern(ix, 7, b, 3, 0, 1) == 1, "same hash, other ids: new");
    CHECK(gd_mask_index_intern(ix, 7, a, 3, 1, 2) == 2, "same ids inverted: new");
    CHECK(gd_mask_index_intern(ix, 7, a, 2, 0, -1) == -1, "a prefix is another mask; find-only misses");
    CHECK(gd_mask_index_intern(ix, 8, a, 3, 0, -1) == -1, "other hash: absent");
    CHECK(gd_mask_index_intern(ix, 9, a, 0, 0, 2) == -3, "a taken id is refused");
    CHECK(gd_mask_index_intern(ix, 9, a, 0, 0, 4) == 4, "empty mask at id 4 (ids need not be consecutive)");
    const uint32_t *got;
    size_t count;
    int inv;
    CHECK(gd_mask_index_get(ix, 3, &got, &count, &inv) == -1, "id 3 is not in the index");
    CHECK(gd_mask_index_get(ix, 1, &got, &count, &inv) == 0 && count == 3 && !inv && got[2] == 41, "get b");
    uint32_t m[2];
    CHECK(gd_mask_index_expand(ix, 2, m, 50) == 0, "expand");
    CHECK(m[0] == ~((1u << 3) | (1u << 5)) && m[1] == (((1u << 18) - 1u) & ~(1u << 8)), "expand inverted: %x %x",
          m[0], m[1]);
    CHECK(gd_mask_index_expand(ix, 0, m, 50) == 0 && m[0] == ((1u << 3) | (1u << 5)) && m[1] == (1u << 8), "expand a");
    for (uint32_t k = 0; k < 3000; k++) { /* all distinct; hashes collide in pairs */
        uint32_t ids[2] = {k, k + 7};
        CHECK(gd_mask_index_intern(ix, k / 2, ids, 2, 0, (int32_t)(10 + k)) == (int32_t)(10 + k), "add %u", k);
    }
    for (uint32_t k = 0; k < 3000; k++) {
        uint32_t ids[2] = {k, k + 7};
        CHECK(gd_mask_index_intern(ix, k / 2, ids, 2, 0, -1) == (int32_t)(10 + k), "find %u", k);
    }
    CHECK(gd_mask_index_bytes(ix) == 4 * (3 + 3 + 3 + 0 + 2 * 3000), "bytes %zu", gd_mask_index_bytes(ix));
    gd_mask_index_free(ix);
    printf("ok   mask index\n");
}

/* pushdown: v ::= "1" | "[" v "]" (state 0 start, 1 accepting, 2 after "[", 3 after the call) */
static void test_pd_check(void) {
    static const char *tok[8] = {"1", "[", "]", "[1", "1]", "]]", "[[", "[1]]"};
    uint8_t blob[16];
    uint64_t off[9];
    size_t p = 0;
    for (int t = 0; t < 8; t++) {
        off[t] = p;
        for (const char *c = tok[t]; *c; c++) blob[p++] = (uint8_t)*c;
    }
    off[8] = p;
    uint8_t bc[256];
    for (int b = 0; b < 256; b++) bc[b] = b == '1' ? 1 : b == '[' ? 2 : b == ']' ? 3 : 0;
    int32_t trans[16] = {-1, 1, 2, -1, /* 1 */ -1, -1, -1, -1, /* 2 */ -1, -1, -1, -1, /* 3 */ -1, -1, -1, 1};
    int64_t trans_off[1] = {0};
    int32_t n_cls[1] = {4}, state_off[2] = {0, 4}, call_off[5] = {0, 0, 0, 1, 1}, call_x[1] = {0}, call_t[1] = {3};
    uint8_t acc[4] = {0, 1, 0, 0};
    gd_pd pd = {1, 3, trans_off, trans, n_cls, state_off, bc, acc, call_off, call_x, call_t, NULL, NULL, blob, off, 8};
    uint8_t forbid[1] = {0}, live[4];
    CHECK(gd_pd_live(&pd, forbid, live) == 0 && live[0] && live[1] && live[2] && live[3], "pd live: all");
    forbid[0] = 1; /* no call of v: "[" leads nowhere live */
    CHECK(gd_pd_live(&pd, forbid, live) == 0 && live[0] && live[1] && !live[2] && live[3], "pd live: v forbidden %d%d%d%d",
          live[0], live[1], live[2], live[3]);
    /* exit sets {"1", "["} (state 2: the call's FIRST) and {"]"} (state 1: accepting, FOLLOW of v) */
    gd_trie *trie = gd_trie_build(blob, off, 8);
    CHECK(trie != NULL, "pd trie");
    if (!trie) return;
    uint8_t sets[64] = {0};
    sets['1' / 8] |= 1u << ('1' % 8);
    sets['[' / 8] |= 1u << ('[' % 8);
    sets[32 + ']' / 8] |= 1u << (']' % 8);
    int32_t exit_id[4] = {-1, 1, 0, -1};
    gd_pd_masker *pm = gd_pd_masker_new(&pd, exit_id, sets, 2, trie, NULL, 0, 1);
    CHECK(pm != NULL, "pd masker");
    if (!pm) {
        gd_trie_free(trie);
        return;
    }
    uint32_t ids[8] = {7, 6, 5, 4, 3, 2, 1, 0}, und[8], mask[1];
    size_t nu = 99;
    int32_t start[3] = {1, 0, 0}; /* one stack: the bottom frame (v, 0) */
    mask[0] = 0;
    CHECK(gd_pd_check(pm, start, 3, ids, 8, mask, 1, und, &nu) == 0 && nu == 0, "pd start: rc, nu=%zu", nu);
    /* "1", "[", "[1", "[[" and "[1]]"? no: after "[1]" the bottom frame is accepting, "]" has no move */
    CHECK(mask[0] == ((1u << 0) | (1u << 1) | (1u << 3) | (1u << 6)), "pd start mask %x", mask[0]);
    int32_t open[3] = {1, 0, 2}; /* after "[" */
    mask[0] = 0;
    CHECK(gd_pd_check(pm, open, 3, ids, 8, mask, 1, und, &nu) == 0 && nu == 0, "pd open: nu=%zu", nu);
    CHECK(mask[0] == ((1u << 0) | (1u << 1) | (1u << 3) | (1u << 4) | (1u << 6) | (1u << 7)), "pd open mask %x", mask[0]);
    int32_t inner[5] = {2, 0, 3, 0, 1}; /* after "[1": the callee accepting, may return */
    mask[0] = 0;
    CHECK(gd_pd_check(pm, inner, 5, ids, 8, mask, 1, und, &nu) == 0 && nu == 0, "pd inner: nu=%zu", nu);
    CHECK(mask[0] == (1u << 2), "pd inner mask %x", mask[0]);
    int32_t bad[3] = {1, 0, 4};
    CHECK(gd_pd_check(pm, bad, 3, ids, 8, mask, 1, und, &nu) == -1, "pd state out of range");
    int32_t got[16];
    size_t ng = 0;
    CHECK(gd_pd_run(pm, start, 3, (const uint8_t *)"[1", 2, got, 16, &ng) == 0 && ng == 5 && got[0] == 2 &&
          got[1] == 0 && got[2] == 3 && got[3] == 0 && got[4] == 1, "pd run \"[1\": n=%zu", ng);
    CHECK(gd_pd_run(pm, start, 3, (const uint8_t *)"[1]", 3, got, 16, &ng) == 0 && ng == 3 && got[0] == 1 && got[2] == 1,
          "pd run \"[1]\": n=%zu", ng);
    CHECK(gd_pd_run(pm, start, 3, (const uint8_t *)"]", 1, got, 16, &ng) == 0 && ng == 0, "pd run \"]\" rejected");
    CHECK(gd_pd_run(pm, start, 3, (const uint8_t *)"[1", 2, got, 4, &ng) == 2, "pd run: out too small");
    /* the frames' walks */
    uint32_t loc[1], cand[1], special[1] = {5};
    const gd_kernels *k = gd_kernels_for(GD_IMPL_SCALAR);
    /* state 2 has only the call: its exit set ("1", "[") is not used at the first byte (the
     * closure's pushed stack stands for it) */
    CHECK(gd_pd_frame_mask(k, pm, 0, 2, NULL, NULL, 0, loc, cand) == 0 && loc[0] == 0 && cand[0] == 0,
          "pd frame (v, 2): loc %x cand %x", loc[0], cand[0]);
    CHECK(gd_pd_frame_mask(k, pm, 0, 3, NULL, NULL, 0, loc, cand) == 1 && loc[0] == (1u << 2) && cand[0] == (1u << 5),
          "pd frame (v, 3): loc %x cand %x", loc[0], cand[0]);
    CHECK(gd_pd_frame_mask(k, pm, 0, 3, NULL, special, 1, loc, cand) == 0 && loc[0] == (1u << 2) && cand[0] == 0,
          "pd frame (v, 3), token 5 special: loc %x cand %x", loc[0], cand[0]);
    CHECK(gd_pd_frame_mask(k, pm, 0, 4, NULL, NULL, 0, loc, cand) == -1, "pd frame out of range");
    uint8_t sat[1] = {1};
    CHECK(gd_pd_masker_live(pm, sat, live) == 0 && live[0] && live[1] && !live[2] && live[3], "pd masker live {v}");
    /* saturated {v}: state 0's "[" leads to the dead state 2, so only "1" is its own; "1]" returns
     * (state 1's exit set) */
    CHECK(gd_pd_frame_mask(k, pm, 0, 0, sat, NULL, 0, loc, cand) == 1 && loc[0] == 1u && cand[0] == (1u << 4),
          "pd frame (v, 0) saturated: loc %x cand %x", loc[0], cand[0]);
    gd_pd_masker_free(pm);
    /* max_depth 1: every push of v saturates it; after "[" v's start is live ("1"), "[[" is not */
    pd.max_depth = 1;
    pm = gd_pd_masker_new(&pd, exit_id, sets, 2, trie, NULL, 0, 1);
    CHECK(pm != NULL, "pd masker 2");
    if (pm) {
        mask[0] = 0;
        CHECK(gd_pd_check(pm, start, 3, ids, 8, mask, 1, und, &nu) == 0 && nu == 0 && mask[0] == ((1u << 0) | (1u << 1) | (1u << 3)),
              "pd saturating: nu=%zu mask %x", nu, mask[0]);
        gd_pd_masker_free(pm);
    }
    gd_trie_free(trie);
}

/* A profile's rest trie (each other token from its first non-plain character): walked instead
 * of the other tokens' trie only from a state every plain character leads back to.  State 0
 * loops on letters; 1 and 3 alternate on letters (unbounded, but "a\"" from 1 ends at 3 where
 * '"' is dead, while its rest '"' is allowed from 1).  Masks with and without the rest trie. */
static void test_rest_trie(int impl) {
    const gd_kernels *kern = gd_kernels_for(impl);
    if (!kern) return;
    /* 0:"a" 1:"ab" 2:"\"" 3:"a\"" 4:"b" 5:"abc" 6:"\"a" */
    const char *const toks[] = {"a", "ab", "\"", "a\"", "b", "abc", "\"a"};
    const char *const rests[] = {"", "", "\"", "\"", "", "", "\"a"};
    const uint8_t plain[7] = {1, 1, 0, 0, 1, 1, 0};
    gd_trie *all = build(toks, 7, NULL), *other = build(toks, 7, plain), *rest = build(rests, 7, NULL);
    int16_t cd[256];
    uint8_t classes[256];
    for (int b = 0; b < 256; b++) {
        cd[b] = (b >= 'a' && b <= 'z') ? 0 : -1;
        classes[b] = b == '"' ? 1 : (b >= 'a' && b <= 'z') ? 2 : 0;
    }
    uint8_t np_all[16], np_other[16], memo[4] = {0};
    CHECK(gd_trie_plain_flags(all, cd, 1, np_all) == 0 && gd_trie_plain_flags(other, cd, 1, np_other) == 0, "flags");
    int32_t table[4 * 3];
    for (int i = 0; i < 12; i++) table[i] = -1;
    table[0 * 3 + 2] = 0;
    table[0 * 3 + 1] = 2;
    table[1 * 3 + 2] = 3;
    table[1 * 3 + 1] = 2;
    table[3 * 3 + 2] = 1;
    uint8_t accepting[4] = {0, 0, 1, 0};
    uint32_t plain_mask[1] = {(1u << 0) | (1u << 1) | (1u << 4) | (1u << 5)}, ids[4] = {0, 4, 1, 5};
    int32_t nchars[4] = {1, 1, 2, 3};
    const uint32_t want[4] = {0x3Fu, 0x37u, 0u, 0x3Bu};
    for (int with_rest = 0; with_rest < 2; with_rest++) {
        gd_state_masker sm = {0};
        sm.trie = all;
        sm.classes = classes;
        sm.table = table;
        sm.ncols = 3;
        sm.n_states = 4;
        sm.n_classes = 3;
        sm.nwords = 1;
        sm.sink = -1;
        sm.accepting = accepting;
        sm.n_profiles = 1;
        gd_masker_profile prof = {0}, *p = &prof;
        sm.prof = p;
        memset(memo, 0, sizeof memo);
        sm.loop[0].loop_memo = memo;
        p->other_trie = other;
        p->other_node_plain = np_other;
        p->node_plain = np_all;
        p->char_dfa = cd;
        p->n_char = 1;
        p->probes = (const uint8_t *)"bz";
        p->n_probes = 2;
        p->max_chars = 3;
        p->plain_mask = plain_mask;
        p->by_chars_ids = ids;
        p->by_chars_n = nchars;
        p->n_plain = 4;
        p->rest_trie = with_rest ? rest : NULL;
        for (int32_t st = 0; st < 4; st++) {
            uint32_t m[1] = {0xFFFFFFFFu};
            CHECK(gd_state_mask(kern, &sm, st, m) == 0 && m[0] == want[st], "%s rest trie %d state %d: %x, want %x",
                  gd_impl_name(impl), with_rest, st, m[0], want[st]);
        }
        gd_state_masker_release(&sm);
    }
    gd_trie_free(all);
    gd_trie_free(other);
    gd_trie_free(rest);
    printf("ok   rest trie %s\n", gd_impl_name(impl));
}

/* gd_nfa_minimal_coo against gd_nfa_determinize_coo, gd_dfa_minimize_live and gd_dfa_quotient
 * on random NFAs: the same byte classes, the same minimal table (int16 cells) when every
 * state of the subset construction is live, else the subset construction's own table; the
 * same limit with phase 0. */
static void test_minimal_coo(void) {
    int n_live = 0, n_dead = 0;
    for (int iter = 0; iter < 400; iter++) {
        int32_t n = 2 + (int32_t)(rnd() % 24), n_specials = (int32_t)(rnd() % 3);
        size_t ne = (size_t)(rnd() % (size_t)(2 * n)), nm = 1 + (size_t)(rnd() % (size_t)(3 * n)),
               ns = n_specials ? (size_t)(rnd() % 4) : 0;
        int32_t eps_src[64], eps_tgt[64], e_src[96], e_tgt[96], sp_src[4], sp_sym[4], sp_tgt[4];
        uint8_t e_lo[96], e_hi[96];
        for (size_t i = 0; i < ne; i++) {
            eps_src[i] = (int32_t)(rnd() % (uint32_t)n);
            eps_tgt[i] = (int32_t)(rnd() % (uint32_t)n);
        }
        for (size_t i = 0; i < nm; i++) {
            e_src[i] = (int32_t)(rnd() % (uint32_t)n);
            e_tgt[i] = (int32_t)(rnd() % (uint32_t)n);
            uint8_t a = (uint8_t)("abcxyz{}"[rnd() % 8]), b = (uint8_t)("abcxyz{}"[rnd() % 8]);
            e_lo[i] = a < b ? a : b;
            e_hi[i] = a < b ? b : a;
        }
        for (size_t i = 0; i < ns; i++) {
            sp_src[i] = (int32_t)(rnd() % (uint32_t)n);
            sp_tgt[i] = (int32_t)(rnd() % (uint32_t)n);
            sp_sym[i] = (int32_t)(rnd() % (uint32_t)n_specials);
        }
        int32_t end = n - 1, max_states = iter % 10 == 9 ? 3 : 1 << 20;
        uint16_t bc1[256], bc2[256];
        int32_t nc1 = 0, nc2 = 0;
        gd_dfa_table d;
        gd_min_table m;
        int phase = -1;
        int rc1 = gd_nfa_determinize_coo(n, 0, end, ne, eps_src, eps_tgt, nm, e_src, e_lo, e_hi, e_tgt, ns, sp_src,
                                         sp_sym, sp_tgt, n_specials, max_states, 0, 1e30, bc1, &nc1, &d);
        int rc2 = gd_nfa_minimal_coo(n, 0, end, ne, eps_src, eps_tgt, nm, e_src, e_lo, e_hi, e_tgt, ns, sp_src, sp_sym,
                                     sp_tgt, n_specials, max_states, 0, 1e30, bc2, &nc2, &m, &phase);
        CHECK(rc1 == rc2, "minimal_coo %d: rc %d vs %d", iter, rc2, rc1);
        if (rc1 != GD_DFA_OK || rc2 != GD_DFA_OK) {
            CHECK(rc2 == GD_DFA_OK || phase == 0, "minimal_coo %d: phase %d", iter, phase);
            if (rc1 == GD_DFA_OK) gd_dfa_table_free(&d);
            if (rc2 == GD_DFA_OK) gd_min_table_free(&m);
            continue;
        }
        CHECK(nc1 == nc2 && !memcmp(bc1, bc2, sizeof bc1), "minimal_coo %d: byte classes", iter);
        int32_t *block = malloc(sizeof(int32_t) * (size_t)d.n_states);
        int live = -1;
        int nb = gd_dfa_minimize_live(d.trans, d.n_states, d.nsym, d.accepting, 1e30, block, &live);
        CHECK(nb > 0 && live == m.live && m.nsym == d.nsym, "minimal_coo %d: live %d vs %d", iter, m.live, live);
        if (live) {
            n_live++;
            int32_t *qt = malloc(sizeof(int32_t) * (size_t)nb * (size_t)d.nsym);
            uint8_t *qa = malloc((size_t)nb);
            gd_dfa_quotient(d.trans, d.n_states, d.nsym, d.accepting, block, nb, qt, qa);
            CHECK(m.n_states == nb && m.elem_bytes == 2, "minimal_coo %d: %d states vs %d", iter, m.n_states, nb);
            for (size_t i = 0; m.n_states == nb && i < (size_t)nb * (size_t)d.nsym; i++)
                if (((int16_t *)m.trans)[i] != qt[i]) {
                    CHECK(0, "minimal_coo %d: cell %zu", iter, i);
                    break;
                }
            CHECK(m.n_states != nb || !memcmp(qa, m.accepting, (size_t)nb), "minimal_coo %d: acceptance", iter);
            free(qt);
            free(qa);
        } else {
            n_dead++;
            CHECK(m.n_states == d.n_states && m.elem_bytes == 4 &&
                      !memcmp(m.trans, d.trans, sizeof(int32_t) * (size_t)d.n_states * (size_t)d.nsym) &&
                      !memcmp(m.accepting, d.accepting, (size_t)d.n_states),
                  "minimal_coo %d: the subset table", iter);
        }
        free(block);
        gd_dfa_table_free(&d);
        gd_min_table_free(&m);
    }
    CHECK(n_live > 20 && n_dead > 20, "minimal_coo: %d live, %d with a dead state", n_live, n_dead);
    printf("ok   minimal_coo (%d live, %d dead)\n", n_live, n_dead);
}

/* gd_unit_walk on a two-state unit: 'a'..'z' one byte each, '\\' then any byte (an escape);
 * '"' kills the walk (counted if it starts a unit: it does not). */
static void test_unit_walk(void) {
    static int32_t step[2 * 256];
    static uint8_t starts[2 * 256];
    for (int i = 0; i < 2 * 256; i++) step[i] = -1;
    for (int b = 'a'; b <= 'z'; b++) { step[b] = 0; starts[b] = 1; }
    step['\\'] = 1;
    starts['\\'] = 1;
    for (int b = 0; b < 256; b++) step[256 + b] = 0; /* (the escaped byte completes the unit) */
    const uint8_t data[] = "ab\\\"c\"zz"; /* a b \ " c " z z, then the NUL */
    const int64_t off[] = {0, 0, 2, 5, 6, 0};
    const int64_t len[] = {9, 2, 4, 1, 3, 0};
    int64_t count[6] = {-1, -1, -1, -1, -1, -1};
    int rc = gd_unit_walk(step, starts, 2, 0, data, 9, off, len, 6, count);
    CHECK(rc == 0 && count[0] == 4 && count[1] == 2 && count[2] == 2 && count[3] == 0 && count[4] == 2 &&
              count[5] == 0, "unit_walk counts %lld %lld %lld %lld %lld %lld", (long long)count[0],
          (long long)count[1], (long long)count[2], (long long)count[3], (long long)count[4], (long long)count[5]);
    int64_t c1 = -1;
    const int64_t off1 = 1, len1 = 1; /* from state 1 (inside an escape): 'b' completes it, no start */
    CHECK(gd_unit_walk(step, starts, 2, 1, data, 9, &off1, &len1, 1, &c1) == 0 && c1 == 0, "unit_walk from 1: %lld",
          (long long)c1);
    const int64_t off2 = 5, len2 = 5;
    CHECK(gd_unit_walk(step, starts, 2, 0, data, 9, &off2, &len2, 1, &c1) == -1, "unit_walk: bytes past the data");
    CHECK(gd_unit_walk(step, starts, 2, 2, data, 9, &off1, &len1, 1, &c1) == -1, "unit_walk: q0 not a state");
    step[7] = 5;
    CHECK(gd_unit_walk(step, starts, 2, 0, data, 9, &off1, &len1, 1, &c1) == -1, "unit_walk: a step past the states");
    printf("ok   unit_walk\n");
}

int main(void) {
    test_selection();
    test_hash_equal();
    test_digest();
    test_mask_index();
    for (int impl = GD_IMPL_SCALAR; impl < GD_IMPL_COUNT; impl++) test_impl(impl);
    test_trie();
    for (int impl = GD_IMPL_SCALAR; impl < GD_IMPL_COUNT; impl++) test_state_mask(impl);
    test_pd_check();
    test_minimal_coo();
    test_unit_walk();
    for (int impl = GD_IMPL_SCALAR; impl < GD_IMPL_COUNT; impl++) test_rest_trie(impl);
    if (failures) { printf("%d failed\n", failures); return 1; }
    printf("all native tests passed\n");
    return 0;
}
