/* guarded-decoding native core: vocabulary trie walk and mask kernels.
 *
 * Plain C99, no Python.h.  All buffers are owned by the caller.  No process-global mutable
 * state: every function is re-entrant (checked by native/tests/check_no_globals.sh).
 * Masks are bitsets of uint32 words: bit (i % 32) of word (i / 32) set  <=>  token i allowed.
 * Kernels that apply a mask write `fill` (normally -INFINITY) into every disallowed logit
 * and leave allowed logits untouched.
 */
#ifndef GD_NATIVE_H
#define GD_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gd_impl { GD_IMPL_SCALAR = 0, GD_IMPL_SSE2 = 1, GD_IMPL_AVX2 = 2, GD_IMPL_NEON = 3, GD_IMPL_AVX512 = 4,
               GD_IMPL_COUNT = 5 };

/* ---- kernel selection --------------------------------------------------------------------
 * The core holds no mutable state: the caller chooses an implementation and passes its
 * kernel table to every dispatched call.  Tables are static const data; a pointer returned
 * by gd_kernels_for stays valid for the life of the process. */
typedef struct gd_kernels gd_kernels;

/* The kernel table of `impl`, or NULL if `impl` is unknown or cannot run on this CPU. */
const gd_kernels *gd_kernels_for(int impl);
/* The implementation of a kernel table. */
int gd_kernels_impl(const gd_kernels *k);
/* 1 if `impl` can run on this CPU (CPUID / OS support; pure, no caching). */
int gd_impl_supported(int impl);
/* Best implementation this CPU supports.  The environment variable GD_NATIVE_IMPL
 * (scalar|sse2|avx2|avx512|neon) overrides it when it names a supported one (tests). */
int gd_best_impl(void);
/* "scalar", "sse2", ... ; "unknown" outside [0, GD_IMPL_COUNT). */
const char *gd_impl_name(int impl);
/* Inverse of gd_impl_name; -1 if `name` names no implementation. */
int gd_impl_from_name(const char *name);

/* dst[i] = a[i] & b[i]  /  a[i] | b[i]   (dst may alias a or b) */
void gd_mask_and(const gd_kernels *k, uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t nwords);
void gd_mask_or(const gd_kernels *k, uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t nwords);
/* Number of set bits among the first n bits. */
size_t gd_mask_count(const uint32_t *mask, size_t n);
/* A 64-bit hash of nwords words (for interning masks; not cryptographic), and equality. */
uint64_t gd_mask_hash(const uint32_t *mask, size_t nwords);
int gd_mask_equal(const uint32_t *a, const uint32_t *b, size_t nwords);
/* mask (nwords words) = the bits of ids[0..n_ids) (ids at or past nwords * 32 are left out). */
void gd_mask_from_ids(uint32_t *mask, size_t nwords, const uint32_t *ids, size_t n_ids);
/* The ids of the bits set among the first n bits, ascending, into ids (at most cap); the count. */
size_t gd_mask_to_ids(const uint32_t *mask, size_t n, int64_t *ids, size_t cap);
/* mark[next_state[i]] = 1 for every bit i set among the first n (next_state: n entries; an
 * entry outside 0..n_states-1 is skipped); the number of set bits.  The distinct states a
 * trie walk's allowed tokens lead to, without collecting the tokens. */
size_t gd_mask_mark_next(const uint32_t *mask, size_t n, const int32_t *next_state, uint8_t *mark,
                         size_t n_states);
/* For interning a mask of n bits (whole words: (n + 31) / 32): *hash = gd_mask_hash of them,
 * returns the number of set bits among the first n, and when that is at most cap also writes
 * their ids, ascending, as uint32 into ids (else the first cap entries of ids are scratch). */
size_t gd_mask_digest(const uint32_t *mask, size_t n, uint64_t *hash, uint32_t *ids, size_t cap);

/* logits[i] = fill for every i < n whose bit is clear.  Contiguous float32. */
void gd_apply_mask_f32(const gd_kernels *k, float *logits, size_t n, const uint32_t *mask, float fill);
/* Same on a strided float32 view: element i lives at (char*)base + i*stride_bytes.
 * llama-cpp-python's `scores` is such a view with stride 12 (llama_token_data). */
void gd_apply_mask_strided_f32(const gd_kernels *k, void *base, size_t n, ptrdiff_t stride_bytes,
                               const uint32_t *mask, float fill);

/* ---- vocabulary trie ------------------------------------------------------------------- */
typedef struct gd_trie gd_trie;

/* Build from n_tokens byte strings: token t is blob[offsets[t] .. offsets[t+1]).
 * Empty strings (control/unused tokens) are left out.  Re-entrant (no global state; the
 * binding may release the GIL).  Returns NULL on allocation failure. */
gd_trie *gd_trie_build(const uint8_t *blob, const uint64_t *offsets, uint32_t n_tokens);
void gd_trie_free(gd_trie *trie);
size_t gd_trie_nodes(const gd_trie *trie);
size_t gd_trie_bytes(const gd_trie *trie);

/* For automaton state `state` with transition table `table` (int32[n_states * ncols], -1 = none)
 * indexed by byte class (`classes[byte]` < ncols),
 * set in `mask` (nwords words, zeroed by this call) the bit of every token whose whole byte
 * string can be consumed from `state`.  Returns the number of allowed tokens.
 * If `next_state` is non-NULL it receives, for every allowed token, the state after it
 * (entries of disallowed tokens are left untouched). */
size_t gd_trie_walk(const gd_trie *trie, const uint8_t *classes, const int32_t *table, size_t ncols,
                    int32_t state, uint32_t *mask, size_t nwords, int32_t *next_state);
/* Same with an int16 table (automata of fewer than 32,767 states: half the memory). */
size_t gd_trie_walk16(const gd_trie *trie, const uint8_t *classes, const int16_t *table, size_t ncols,
                      int32_t state, uint32_t *mask, size_t nwords, int32_t *next_state);
/* Options of the extended walk (NULL: none; every pointer caller-owned).
 * - sink >= 0: the caller guarantees that every byte class leads from `sink` to `sink`, so
 *   once the walk reaches it every token of the subtree is allowed (and ends in `sink`).
 * - plain-loop bulk (off when loop_memo is NULL): node_plain[i] from gd_trie_plain_flags for
 *   a plain-text profile; row_off/pair_cls/pair_next: that profile's character pairs for this
 *   table (see gd_plain_step); loop_memo[n_states], zero-initialised and kept by the caller
 *   between walks of the same table: 1 if every plain character leads from the state back to
 *   itself, 2 if not.  When the walk reaches such a state s at node i and every token below i
 *   continues with complete plain characters (bit 0 of node_plain[i]), the whole subtree is
 *   allowed and ends in s.  A lazy walk (gd_trie_walk_lazy) keeps the memo in the automaton
 *   instead, in slot memo_slot (0..7; -1: bulk off), and ignores loop_memo. */
typedef struct {
    int32_t sink;
    const uint8_t *node_plain;
    const int32_t *row_off;
    const uint8_t *pair_cls;
    const int16_t *pair_next;
    uint8_t *loop_memo;
    int32_t memo_slot;
} gd_walk_opts;
size_t gd_trie_walk_ex(const gd_trie *trie, const uint8_t *classes, const int32_t *table, size_t ncols,
                       int32_t state, uint32_t *mask, size_t nwords, int32_t *next_state, const gd_walk_opts *opts);
size_t gd_trie_walk_ex16(const gd_trie *trie, const uint8_t *classes, const int16_t *table, size_t ncols,
                         int32_t state, uint32_t *mask, size_t nwords, int32_t *next_state, const gd_walk_opts *opts);
/* out[i] (n_nodes bytes), bit p: every token below node i continues after it with complete
 * plain characters when read by `char_dfa` (int16[n_char_states * 256], -1 = not plain,
 * state 0 = between characters) from character state p.  -1 if n_char_states is not 1..8. */
int gd_trie_plain_flags(const gd_trie *trie, const int16_t *char_dfa, size_t n_char_states, uint8_t *out);

/* ---- plain-text chains (src/textloop.c; see decoding/backends/textloop.py) ----------
 * A plain-text profile's character DFA is given per character state p as the distinct pairs
 * j in [row_off[p], row_off[p+1]): (pair_cls[j], the grammar DFA's byte class of a byte the
 * character state allows; pair_next[j], the character state after it, 0 = character done).
 * gd_plain_step: the grammar state every plain character leads to from `state` (a uniform
 * step), GD_PLAIN_NONE if no plain character is allowed, GD_PLAIN_MIXED otherwise (some
 * characters lead elsewhere or die part-way; also when the product has more than 1024 pairs).
 * gd_plain_chain: the number of uniform steps from `state` before a state that allows no
 * plain character; GD_PLAIN_UNBOUNDED if the chain revisits a state, GD_PLAIN_MIXED if a step
 * is mixed, GD_PLAIN_NOMEM; a chain of at least `max_len` uniform steps gives max_len (its
 * mask is that of any longer one when max_len is at least the longest plain token).  `table` as for the trie
 * walk (n_states * ncols, -1 = none, every entry < n_states). */
#define GD_PLAIN_NONE (-1)
#define GD_PLAIN_MIXED (-2)
#define GD_PLAIN_UNBOUNDED (-3)
#define GD_PLAIN_NOMEM (-4)
int32_t gd_plain_step(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next,
                      const int32_t *table, size_t ncols, int32_t state);
int32_t gd_plain_step16(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next,
                        const int16_t *table, size_t ncols, int32_t state);
int64_t gd_plain_chain(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next,
                       const int32_t *table, size_t ncols, size_t n_states, int32_t state, uint32_t max_len);
int64_t gd_plain_chain16(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next,
                         const int16_t *table, size_t ncols, size_t n_states, int32_t state, uint32_t max_len);
/* gd_unit_walk: per walker i, the units started while walking len[i] bytes of data from off[i]
 * through a unit's U* automaton from state q0: byte b in state q counts one when
 * starts[q * 256 + b] != 0, then goes to step[q * 256 + b] (-1: the walk dies, after counting
 * that byte); into count[i].  step and starts: n_states * 256.  Returns 0, or -1 (nothing
 * written) when q0 or an entry of step is not a state or a walker's bytes pass n_data. */
int gd_unit_walk(const int32_t *step, const uint8_t *starts, size_t n_states, int32_t q0, const uint8_t *data,
                 size_t n_data, const int64_t *off, const int64_t *len, size_t n, int64_t *count);
/* gd_char_pairs: the pairs above for a profile's character DFA (int16[n_char * 256], -1 = not
 * plain) and a grammar's byte classes (byte_class[256]): into row_off[n_char + 1] and pair
 * arrays of capacity n_char * 256, sorted by (character state, class, next).  Returns the
 * number of pairs, or -1 if n_char > 256, a class > 255 or a next state > 255. */
int32_t gd_char_pairs(const int16_t *char_dfa, size_t n_char, const uint16_t *byte_class, int32_t *row_off,
                      uint8_t *pair_cls, int16_t *pair_next);

/* ---- mask index (src/mask_index.c) ---------------------------------------------------------
 * The interning index of sparse masks: each is stored as the ascending ids of its set bits (or,
 * inverted, of its clear bits), under the caller's mask id.  Not thread-safe (the caller holds
 * its lock); no global state. */
typedef struct gd_mask_index gd_mask_index;
gd_mask_index *gd_mask_index_new(void); /* NULL when out of memory */
void gd_mask_index_free(gd_mask_index *ix);
/* The id of the mask with these (hash, count ascending ids, inverted); when absent, it is added
 * as new_mid when new_mid >= 0 (returned), else -1.  -2: out of memory; -3: new_mid is taken. */
int32_t gd_mask_index_intern(gd_mask_index *ix, uint64_t hash, const uint32_t *ids, size_t count, int inverted,
                             int32_t new_mid);
/* The stored ids of mask mid (0), or -1 if mid is not in the index. */
int gd_mask_index_get(const gd_mask_index *ix, int32_t mid, const uint32_t **ids, size_t *count, int *inverted);
/* mask ((n + 31) / 32 words) = mask mid over n tokens (bits from n on clear); -1 if absent. */
int gd_mask_index_expand(const gd_mask_index *ix, int32_t mid, uint32_t *mask, size_t n);
/* Bytes of the stored ids. */
size_t gd_mask_index_bytes(const gd_mask_index *ix);

/* ---- state masks (src/state_mask.c) -----------------------------------------------------
 * The whole token mask of one state of an explicit DFA in one call, as
 * decoding/backends/textloop.py `walk_tokens` and DFAGrammar._compute make it: for each
 * plain-text profile in order, if the state's bytes `probes` go where "a" goes and its plain
 * chain (gd_plain_chain, max_len = max(1, max_chars)) is k >= 0 or unbounded, the walk of the
 * profile's trie of the other tokens (of their rests, rest_trie, when every plain character
 * leads the state back to itself) plus the plain tokens of at most k characters (upto[k]
 * when given, else plain_mask minus the tokens by_chars_ids[j] with by_chars_n[j] > k:
 * plain ids sorted by characters); otherwise the walk of the whole trie.  An unbounded chain
 * makes its profile the `bulk` one: walks use its whole-subtree shortcut (gd_walk_opts:
 * node_plain of the trie walked, the pairs, loop_memo).  Then the special tokens' bits
 * (special_ids[k] set iff column n_classes + k of the state's row has a transition) and,
 * in accepting states, eog_mask ORed in.  Every pointer is caller-owned but a profile's pairs
 * (gd_char_pairs of its char_dfa and the table's classes: loop[p]), made when first needed and
 * freed by gd_state_masker_release; the pairs, `bulk` and the loop memos are the only fields a
 * call writes (callers serialise calls on one masker; the profiles are only read).
 * Returns 0, -1 for a state out of range, -2 when out of memory. */
#define GD_MASKER_PROFILES 4
#define GD_MASKER_UPTO 9
typedef struct { /* one plain-text profile of one vocabulary (shared by every masker of it) */
    const gd_trie *other_trie;
    const uint8_t *other_node_plain, *node_plain;
    const int16_t *char_dfa; /* int16[n_char * 256], entries -1 .. n_char - 1 */
    size_t n_char;
    const uint8_t *probes;
    size_t n_probes;
    uint32_t max_chars;
    const uint32_t *plain_mask;
    const uint32_t *upto[GD_MASKER_UPTO]; /* NULL where not given */
    const uint32_t *by_chars_ids;
    const int32_t *by_chars_n;
    size_t n_plain;
    /* NULL, or the trie of the other tokens' rests (each from its first character that is not a
     * complete plain one): walked instead of other_trie from a state every plain character
     * leads back to (gd_plain_step(state) == state), where a token is allowed iff its rest is */
    const gd_trie *rest_trie;
} gd_masker_profile;
typedef struct {       /* a profile's part of one masker */
    int32_t *row_off;  /* the pairs (gd_char_pairs) for the masker's table: made by the first call */
    uint8_t *pair_cls; /* that needs them, freed by gd_state_masker_release */
    int16_t *pair_next;
    uint8_t *loop_memo; /* [n_states], zero-initialised, caller-owned */
} gd_masker_loop;
typedef struct {
    const gd_trie *trie;
    const uint8_t *classes; /* [256] */
    const void *table;      /* int32 or (table16) int16 [n_states * ncols], byte classes first */
    int table16;
    size_t ncols, n_states, n_classes, nwords;
    int32_t sink;
    const uint32_t *special_ids;
    size_t n_special;
    const uint8_t *accepting;  /* [n_states] */
    const uint32_t *eog_mask;  /* NULL: none */
    int32_t n_profiles, bulk;
    const gd_masker_profile *prof; /* [n_profiles] */
    gd_masker_loop loop[GD_MASKER_PROFILES];
} gd_state_masker;
int gd_state_mask(const gd_kernels *kern, gd_state_masker *sm, int32_t state, uint32_t *mask);
void gd_state_masker_release(gd_state_masker *sm);
/* The same mask as gd_state_mask, of a state of a lazy automaton (gd_lazy, below): rows are
 * made as the composition reads them, the plain-loop memo lives in the automaton (slot = the
 * profile's index), and no rest-trie shortcut is taken (the composition of
 * decoding/backends/dfa/lazy.py `LazyDFAGrammar._walk`, which stays the reference).
 * classes: byte -> class of the automaton; loop[p].loop_memo is unused.  Returns 0, -1 (state
 * out of range), -2 (no memory) or -3 (a row could not be made: see gd_lazy_stats.err). */
struct gd_lazy;
typedef struct {
    const gd_trie *trie;
    const uint8_t *classes; /* [256] */
    struct gd_lazy *L;
    size_t n_classes, nwords;
    const uint32_t *special_ids;
    size_t n_special;
    const uint32_t *eog_mask; /* NULL: none */
    int32_t n_profiles, bulk;
    const gd_masker_profile *prof; /* [n_profiles], slot p of the automaton's memo each */
    gd_masker_loop loop[GD_MASKER_PROFILES];
} gd_lazy_masker;
int gd_lazy_state_mask(const gd_kernels *kern, gd_lazy_masker *lm, int32_t state, uint32_t *mask);
void gd_lazy_masker_release(gd_lazy_masker *lm);
/* The state after the bytes data[0..n) from `state` over the masker's table; -1 if one has no
 * transition (or `state` is out of range). */
int32_t gd_state_run(const gd_state_masker *sm, int32_t state, const uint8_t *data, size_t n);
/* The ids of the clear bits among the first n, ascending, into ids; their count, or cap + 1
 * when there are more than cap. */
size_t gd_mask_clear_ids(const uint32_t *mask, size_t n, uint32_t *ids, size_t cap);

/* ---- grammar automata: subset construction and minimisation (src/dfa_build.c) -----------
 * Both are re-entrant (the binding releases the GIL) and free everything they allocate on
 * every path.  `budget_s` is a cooperative time budget in seconds, read against the
 * monotonic clock every few tens of thousands of work units (NaN or >= 1e18: none;
 * <= 0: already spent).  Results follow decoding/backends/automaton.py exactly. */
enum { GD_DFA_OK = 0, GD_DFA_NOMEM = -1, GD_DFA_LIMIT = -2, GD_DFA_TIMEOUT = -3, GD_DFA_INVALID = -4,
       GD_DFA_BYTES = -5, GD_DFA_EMPTY = -6 };

/* A DFA table owned by the core: trans is int32[n_states * nsym] (-1 = no transition),
 * accepting uint8[n_states].  Release with gd_dfa_table_free. */
typedef struct {
    int32_t *trans;
    uint8_t *accepting;
    int32_t n_states;
    int32_t nsym;
} gd_dfa_table;

/* Subset construction of an NFA of n_nfa states in CSR form: the epsilon targets of state s
 * are eps_tgt[eps_off[s] .. eps_off[s+1]), its moves the (symbol, target) pairs
 * mv[2j], mv[2j+1] for j in [mv_off[s], mv_off[s+1]) (symbol < nsym).  A DFA state is the
 * sorted set of NFA states of an epsilon closure that have a move or are `end`; it accepts
 * iff it holds `end`.  States are numbered in BFS order from the closure of `start`
 * (state 0), a state's symbols in increasing order.  Returns GD_DFA_OK and fills `out`;
 * GD_DFA_LIMIT when more than max_states states would be made, GD_DFA_BYTES when the
 * construction would hold more than max_bytes bytes (0: no bound; see gd_subset_bytes),
 * GD_DFA_TIMEOUT when the budget is spent, GD_DFA_NOMEM, or GD_DFA_INVALID for
 * out-of-range arrays (`out` is then empty). */
int gd_nfa_determinize(int32_t n_nfa, const int32_t *eps_off, const int32_t *eps_tgt, const int32_t *mv_off,
                       const int32_t *mv, int32_t start, int32_t end, int32_t nsym, int32_t max_states,
                       size_t max_bytes, double budget_s, gd_dfa_table *out);
/* The bytes a subset construction holds with n_states DFA states of nsym symbols, n_sets
 * NFA-state sets (the states' closures and the move-target cache) of n_items entries in
 * all: the transition table (4 bytes a cell) plus the sets (4 bytes an entry, 28 a set). */
size_t gd_subset_bytes(size_t n_states, size_t nsym, size_t n_sets, size_t n_items);
void gd_dfa_table_free(gd_dfa_table *t);

/* The same subset construction from flat edge lists, as the Python NFA builder emits them
 * (decoding/backends/automaton.py, _NFA): n_eps epsilon edges eps_src[i] -> eps_tgt[i];
 * n_edges byte-range edges e_src[i] --[e_lo[i], e_hi[i]]--> e_tgt[i]; n_spec special moves
 * sp_src[i] --special sp_sym[i] (< n_specials)--> sp_tgt[i]; any order.  Writes the byte
 * classes (byte_class[256]: a class starts at 0 and at every lo and hi + 1) and their
 * number, and determinises over nsym = n_classes + n_specials symbols (a special k is
 * symbol n_classes + k) exactly as gd_nfa_determinize.  Same return codes. */
int gd_nfa_determinize_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                           const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                           const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                           const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, int32_t max_states,
                           size_t max_bytes, double budget_s, uint16_t *byte_class, int32_t *n_classes,
                           gd_dfa_table *out);

/* ---- lazy determinisation (src/dfa_build.c) ---------------------------------------------
 * The subset construction above, one row at a time, when a row is first read.  Built from
 * the same edge lists as gd_nfa_determinize_coo; the NFA is first trimmed to the states that
 * can reach `end` over usable symbols (a byte class holding a byte with byte_ok[b], NULL: all;
 * every special), so every DFA state made is live: it can reach acceptance over usable
 * symbols (the eager DFA's prune, done on the NFA).  States are numbered in the order they
 * are made (0: the start).  Not thread-safe: the caller serialises calls on one object.
 * gd_lazy_new_coo: NULL with *rc a GD_DFA_* code (GD_DFA_EMPTY: the start cannot reach the
 * end).  gd_lazy_step: the state after symbol `sym` (-1: none), or GD_LAZY_FAIL when the row
 * could not be made (more than max_states states or max_bytes bytes, no memory; the code is
 * kept in gd_lazy_stats.err).  gd_lazy_row: the row (nsym entries, valid until the next
 * call) or NULL.  gd_lazy_min_moves: fewest usable moves from the state to acceptance. */
#define GD_LAZY_FAIL (-2)
typedef struct gd_lazy gd_lazy;
typedef struct {
    int32_t n_states, n_expanded, n_classes, nsym, err;
    size_t bytes;
    uint16_t byte_class[256];
} gd_lazy_stats;
gd_lazy *gd_lazy_new_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                         const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                         const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                         const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, const uint8_t *byte_ok,
                         int32_t max_states, size_t max_bytes, int *rc);
void gd_lazy_free(gd_lazy *L);
int32_t gd_lazy_step(gd_lazy *L, int32_t s, int32_t sym);
const int32_t *gd_lazy_row(gd_lazy *L, int32_t s);
int gd_lazy_accepting(const gd_lazy *L, int32_t s);
int32_t gd_lazy_min_moves(const gd_lazy *L, int32_t s);
void gd_lazy_info(const gd_lazy *L, gd_lazy_stats *out);
size_t gd_lazy_n_states(const gd_lazy *L);
int32_t gd_lazy_nsym(const gd_lazy *L);
int32_t gd_lazy_n_classes(const gd_lazy *L);
const uint16_t *gd_lazy_byte_class(const gd_lazy *L); /* [256] */
/* The rows made so far, for a caller's inlined step (gd_trie_walk_lazy): row s is
 * trans[s * nsym ..] when s < n_done and done[s]; any other call on L may move them (read
 * them again after it). */
typedef struct {
    const int32_t *trans;
    const uint8_t *done;
    size_t n_done, nsym;
} gd_lazy_rows;
void gd_lazy_rows_get(const gd_lazy *L, gd_lazy_rows *out);
/* The plain-loop memo of a lazy automaton (see gd_walk_opts), per slot 0..7: 0 = unknown. */
uint8_t gd_lazy_memo_get(const gd_lazy *L, int32_t slot, int32_t s);
void gd_lazy_memo_set(gd_lazy *L, int32_t slot, int32_t s, uint8_t v);
/* gd_trie_walk_ex over a lazy automaton (classes: byte -> class); SIZE_MAX when a row could
 * not be made (see gd_lazy_stats.err; the mask is then incomplete). */
size_t gd_trie_walk_lazy(const gd_trie *trie, const uint8_t *classes, gd_lazy *L, int32_t state, uint32_t *mask,
                         size_t nwords, int32_t *next_state, const gd_walk_opts *opts);
/* gd_plain_step / gd_plain_chain over a lazy automaton (rows made as the chain reads them;
 * a row that cannot be made counts as mixed). */
int32_t gd_plain_step_lazy(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next, gd_lazy *L,
                           int32_t state);
int64_t gd_plain_chain_lazy(const int32_t *row_off, const uint8_t *pair_cls, const int16_t *pair_next, gd_lazy *L,
                            int32_t state, uint32_t max_len);

/* Breadth-first distances over the DFA trans (int32[n * nsym], -1 = no transition) from the
 * states sources[0..n_sources): dist[s] (int32[n]) is the fewest transitions from a source
 * to s (with `reverse`: from s to a source), -1 if none.  Only columns c with col_ok[c] and
 * states s with node_ok[s] are used (NULL: all; a source outside node_ok is not entered).
 * Returns the number of states reached, or GD_DFA_NOMEM / GD_DFA_INVALID. */
int gd_dfa_bfs(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *col_ok, const uint8_t *node_ok,
               int reverse, const int32_t *sources, size_t n_sources, int32_t *dist);

/* Trimming, as decoding/backends/automaton.py `_prune_py`: a state is live if it reaches an
 * accepting state over the columns with col_ok[c] (NULL: all), kept if live and reached
 * from state 0 over live states (any column).  Kept states are renumbered in their old
 * order into out_trans (int32[n * nsym] room; -1 for a transition to a dropped state) and
 * out_accepting (uint8[n] room).  Returns the number kept, 0 if state 0 is not live, or
 * GD_DFA_NOMEM / GD_DFA_INVALID.  It is gd_dfa_prune_map then gd_dfa_prune_apply: the first
 * writes the new number of each state (newnum, int32[n]: -1 if dropped) and returns the
 * number kept (or 0 / an error, as above), the second writes the kept table (when the
 * number kept is n the result is the input and a caller may skip it). */
int gd_dfa_prune(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, const uint8_t *col_ok,
                 int32_t *out_trans, uint8_t *out_accepting);
int gd_dfa_prune_map(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, const uint8_t *col_ok,
                     int32_t *newnum);
void gd_dfa_prune_apply(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting,
                        const int32_t *newnum, int32_t *out_trans, uint8_t *out_accepting);

/* Minimisation of the DFA trans (int32[n * nsym], -1 = no transition; a missing transition
 * is its own class, distinct from every state) with accepting (uint8[n]): the coarsest
 * partition separating accepting states and, on each symbol, states whose targets are in
 * different blocks.  Writes block[s] (blocks numbered by their first state, so block[0] = 0)
 * and returns the number of blocks, or GD_DFA_TIMEOUT / GD_DFA_NOMEM / GD_DFA_INVALID.
 * States with identical rows (up to merges) are merged first, in time linear in the table
 * (a subset construction's duplicated parts: Snowplow sp_333, 245,213 states -> 128,317),
 * then Valmari's partition refinement runs on what is left: 1.32 -> 1.0 s there. */
int gd_dfa_minimize(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, double budget_s,
                    int32_t *block);
/* gd_dfa_minimize that also writes *all_live: 1 when every state can reach an accepting state
 * (a subset construction's table, whose states are all reachable, is then trimmed), found on
 * the way (no pass over the table). */
int gd_dfa_minimize_live(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, double budget_s,
                         int32_t *block, int *all_live);

/* The quotient of the DFA trans (int32[n * nsym]) by block (int32[n], numbered by their first
 * state, as gd_dfa_minimize writes it; nblocks blocks): the row of block b is the row of its
 * first state with every target t replaced by block[t], into out_trans (int32[nblocks *
 * nsym]) and out_accepting (uint8[nblocks]).  Returns nblocks or GD_DFA_INVALID. */
int gd_dfa_quotient(const int32_t *trans, int32_t n, int32_t nsym, const uint8_t *accepting, const int32_t *block,
                    int32_t nblocks, int32_t *out_trans, uint8_t *out_accepting);

/* gd_nfa_minimal_coo's result: with live, the minimal DFA (gd_dfa_minimize_live then
 * gd_dfa_quotient of the subset construction's table): n_states rows of nsym cells, int16
 * when n_states < 32767 (elem_bytes 2) else int32 (elem_bytes 4), and acceptance (0/1);
 * without live (some state of the subset construction cannot reach acceptance) the subset
 * construction's own table (int32, elem_bytes 4), as gd_nfa_determinize_coo gives it, to be
 * trimmed before it is minimised.  Release with gd_min_table_free. */
typedef struct {
    void *trans;
    uint8_t *accepting;
    int32_t n_states, nsym, elem_bytes, live;
} gd_min_table;

void gd_min_table_free(gd_min_table *t);

/* The subset construction of the edge lists (exactly gd_nfa_determinize_coo: byte classes,
 * numbering, limits) and, when every state reaches acceptance, its minimisation, made from
 * the construction's sparse rows: no table of the subset construction is made, read or
 * copied.  The deadline is one budget for both steps.  GD_DFA_OK (out filled), or a
 * GD_DFA_* code of the subset construction (*phase = 0) or of the minimisation (*phase = 1). */
int gd_nfa_minimal_coo(int32_t n_nfa, int32_t start, int32_t end, size_t n_eps, const int32_t *eps_src,
                       const int32_t *eps_tgt, size_t n_edges, const int32_t *e_src, const uint8_t *e_lo,
                       const uint8_t *e_hi, const int32_t *e_tgt, size_t n_spec, const int32_t *sp_src,
                       const int32_t *sp_sym, const int32_t *sp_tgt, int32_t n_specials, int32_t max_states,
                       size_t max_bytes, double budget_s, uint16_t *byte_class, int32_t *n_classes,
                       gd_min_table *out, int *phase);

/* Product of two DFAs over a shared alphabet of ncls classes: class c reads column ca[c] of
 * a (int32[na * nsa]) and cb[c] of b (int32[nb * nsb]; nb = 0: b is the empty language).
 * States are pairs (x, y) numbered in BFS order from (0, b_start) (b_start -1: b dead), a
 * state's classes in increasing order; a move where a has none is -1, and one where b has
 * none is -1 too unless keep_b_dead (then y = -1, dead, from there on).  A pair accepts iff
 * a accepts x and b accepts y (diff: and b does not accept y).  As decoding/backends/
 * automaton.py `_product` (same numbering).  Returns GD_DFA_OK and fills `out` (nsym =
 * ncls), GD_DFA_LIMIT past max_states states, GD_DFA_TIMEOUT, GD_DFA_NOMEM or
 * GD_DFA_INVALID. */
int gd_dfa_product(const int32_t *ta, int32_t na, int32_t nsa, const uint8_t *acc_a, const int32_t *tb, int32_t nb,
                   int32_t nsb, const uint8_t *acc_b, const int32_t *ca, const int32_t *cb, int32_t ncls,
                   int32_t b_start, int keep_b_dead, int diff, int32_t max_states, double budget_s,
                   gd_dfa_table *out);

/* The minimal acyclic DFA of the n_words byte strings blob[offsets[i] .. offsets[i+1])
 * (offsets[0] = 0), which must be strictly increasing in bytewise order (a prefix before
 * its extensions): `n_states` states numbered in BFS order from the start (state 0), the
 * edges of state s lab/tgt[off[s] .. off[s+1]) by increasing label, final[s] whether s
 * accepts.  Returns GD_DFA_OK and fills `out` (free with gd_literal_dfa_free), GD_DFA_NOMEM,
 * or GD_DFA_INVALID for unsorted words or a total length of 2^29 bytes or more (`out` is
 * then empty).  Linear in the total length. */
typedef struct {
    int32_t n_states;
    int32_t *off;
    uint8_t *lab;
    int32_t *tgt;
    uint8_t *final;
} gd_literal_dfa;
int gd_literal_dfa_build(const uint8_t *blob, const int64_t *offsets, int32_t n_words, gd_literal_dfa *out);
void gd_literal_dfa_free(gd_literal_dfa *d);

/* ---- Thompson NFA of a grammar IR (src/nfa_build.c) ---------------------------------------
 * The IR serialised by decoding/backends/automaton.py (`_nfa_program`): node i is the int32
 * record at code[i]: [GD_NK_LIT, offset into lit, length], [GD_NK_SET, n, lo0, hi0, ...],
 * [GD_NK_SEQ, n, child...], [GD_NK_SEPLOOP, x, n, sep...] (a Seq item: `x (sep x)*`, one
 * copy of x), [GD_NK_CHOICE, n, child...], [GD_NK_REPEAT, item, min, max (-1: none)],
 * [GD_NK_REF, rule], [GD_NK_SPECIAL, k], [GD_NK_LEAF, leaf], [GD_NK_NONE] (the empty
 * language), [GD_NK_FALLBACK, arg] (left to the Python builder).  Rule r's body is node
 * rule_body[r].  Leaf i (a Dfa node or an Inter/Diff automaton): leaf_n[i] states, the edges
 * leaf_src/lo/hi/tgt[leaf_eoff[i] .. leaf_eoff[i+1]) and the accepting states
 * leaf_acc[leaf_aoff[i] .. leaf_aoff[i+1]), numbered from 0.  base_len: rules already on the
 * caller's inlining stack (for max_nesting); max_frames: the Python builder's recursion
 * budget; budget_s as for the subset construction. */
enum { GD_NK_LIT = 0, GD_NK_SET = 1, GD_NK_SEQ = 2, GD_NK_CHOICE = 3, GD_NK_REPEAT = 4, GD_NK_REF = 5,
       GD_NK_SPECIAL = 6, GD_NK_LEAF = 7, GD_NK_NONE = 8, GD_NK_FALLBACK = 9, GD_NK_SEPLOOP = 10 };
enum { GD_NFA_STATES = -10, GD_NFA_NESTING = -11, GD_NFA_FALLBACK = -12 };
/* An automaton embedded where a rule is referenced (gd_nfa_build_rule_dfas): n states
 * (0 the entry), byte-range edges src/lo/hi/tgt[0 .. n_edges), accepting states acc[0 .. n_acc). */
typedef struct {
    int32_t n;
    size_t n_edges, n_acc;
    const int32_t *src, *tgt, *acc;
    const uint8_t *lo, *hi;
} gd_leaf_view;
/* Asked at a reference to `rule` (before the recursion bound and the nesting check): 1 and
 * *out filled to embed that automaton instead of inlining the rule, 0 to inline it, or a
 * negative GD_DFA_* code to fail the build.  frames_left: what is left of max_frames. */
typedef int (*gd_rule_leaf_fn)(void *ud, int32_t rule, int32_t frames_left, gd_leaf_view *out);
typedef struct {
    const int32_t *code;
    size_t n_code;
    const uint8_t *lit;
    size_t n_lit;
    const int32_t *rule_body;
    int32_t n_rules;
    int32_t n_leaves;
    const int32_t *leaf_n;
    const int64_t *leaf_eoff, *leaf_aoff;
    const int32_t *leaf_src, *leaf_tgt, *leaf_acc;
    const uint8_t *leaf_lo, *leaf_hi;
    int32_t max_depth, max_nesting, base_len, max_states, max_frames;
    double budget_s;
    gd_rule_leaf_fn rule_leaf; /* NULL: every rule inlined */
    void *rule_leaf_ud;
} gd_nfa_program;
/* The NFA: n states (the caller's n0 first), end state (-1: the empty language) and the
 * edges added, in `_NFA`'s order; err_* describe a failure. */
typedef struct {
    int32_t n, end;
    int32_t *eps_src, *eps_tgt;
    size_t n_eps;
    int32_t *e_src, *e_tgt;
    uint8_t *e_lo, *e_hi;
    size_t n_edges;
    int32_t *sp_src, *sp_k, *sp_tgt;
    size_t n_spec;
    int32_t err_rule, err_rule2, err_arg;
} gd_nfa_out;
/* Builds node `root` from state s (< n0, the states already made) as `_NFA.build` would.
 * Returns GD_DFA_OK and fills `out` (free with gd_nfa_out_free), or: GD_NFA_STATES (past
 * max_states; err_rule: the innermost rule being inlined, -1 the caller's), GD_NFA_NESTING
 * (err_rule: the rule referenced, err_rule2: the innermost), GD_DFA_TIMEOUT (err_rule),
 * GD_NFA_FALLBACK (err_arg: the FALLBACK node's arg, or -1 past max_frames), GD_DFA_NOMEM,
 * GD_DFA_INVALID; `out` then holds no edges. */
int gd_nfa_build(const gd_nfa_program *p, int32_t root, int32_t n0, int32_t s, gd_nfa_out *out);
void gd_nfa_out_free(gd_nfa_out *o);
/* gd_nfa_build where each rule r with want[r] (n_rules entries) is built on its own first,
 * bottom-up (src/dfa_build.c; decoding/backends/automaton.py `_rule_leaves` is the Python
 * twin): its body's NFA (the wanted rules it references embedded the same way), the subset
 * construction (at most max_subset states and max_bytes bytes, 0: no bound), the
 * minimisation and the trim, then embedded at every reference as its minimal DFA's byte
 * columns (one edge per state and byte class with a transition, by state then class; when a
 * class of the rule's NFA has no transition left, one more state, unreachable, with an edge
 * over each class keeps the cuts of the byte classes).  A rule whose own build fails (a
 * limit, the frames, a special, the empty language, more than max_dfa minimal states) is
 * inlined; the budget (GD_DFA_TIMEOUT) and memory fail the whole build.  The wanted rules
 * must reach no recursive rule (their language must not depend on where they are built). */
int gd_nfa_build_rule_dfas(const gd_nfa_program *p, const uint8_t *want, int32_t max_subset, int32_t max_dfa,
                           size_t max_bytes, int32_t root, int32_t n0, int32_t s, gd_nfa_out *out);


/* ---- pushdown configurations (src/pushdown.c; decoding/backends/pushdown/index.py) ------
 * The rules' automata of a pushdown grammar, every array caller-owned: rule r has
 * state_off[r + 1] - state_off[r] states; its byte moves are trans[trans_off[r] + s * n_cls[r]
 * + byte_class[r * 256 + b]] (-1: none; only byte-class columns); its state s is global state
 * g = state_off[r] + s, accepting[g], and its calls (callee rule, target state) are
 * (call_x[j], call_t[j]) for j in [call_off[g], call_off[g + 1]).  The vocabulary: token t is
 * blob[offsets[t] .. offsets[t + 1]). */
typedef struct {
    int32_t n_rules, max_depth;
    const int64_t *trans_off;
    const int32_t *trans, *n_cls, *state_off;
    const uint8_t *byte_class, *accepting;
    const int32_t *call_off, *call_x, *call_t;
    const int32_t *spec_off, *spec_t; /* special-token moves of global state g: targets spec_t[spec_off[g] ..
                                       * spec_off[g + 1]) (states of its rule); NULL: none (liveness only) */
    const uint8_t *blob;
    const uint64_t *offsets;
    uint32_t n_tokens;
} gd_pd;


/* live[g] (one per state of all rules) = whether state g can be completed without calling the
 * rules r with forbidden[r] (n_rules entries): by byte moves, special-token moves and calls of
 * other rules whose start is live (the least fixpoint; decoding/backends/pushdown/index.py
 * `_Tables.live` is the reference).  Returns 0, or -2 when out of memory. */
int gd_pd_live(const gd_pd *pd, const uint8_t *forbidden, uint8_t *live);
/* A pushdown grammar's native configurations for one vocabulary (decoding/backends/pushdown/
 * index.py): gd_pd_masker_new(pd, exit_id, exit_set, n_sets, trie, profiles, n_profiles, nwords)
 * where exit_id[g] (one per state of all rules) is the index of state g's exit set (the bytes
 * that may enter a call or return; -1: none) among exit_set[n_sets * 32] (bit b of byte b / 8),
 * the trie and the plain-text profiles as for a state masker; every array caller-owned and
 * kept.  NULL when out of memory.  It keeps, made on first use, the liveness of each set of
 * saturated rules (gd_pd_live) and each rule's tables per set; calls on one masker must be
 * serialised.  A saturated set is given as n_rules bytes, 1 for a saturated rule (NULL: none). */
typedef struct gd_pd_masker gd_pd_masker;
gd_pd_masker *gd_pd_masker_new(const gd_pd *pd, const int32_t *exit_id, const uint8_t *exit_set, int32_t n_sets,
                               const gd_trie *trie, const gd_masker_profile *prof, int32_t n_profiles, size_t nwords);
void gd_pd_masker_free(gd_pd_masker *pm);
/* live (one per state of all rules) = the liveness of saturated set `sat` (gd_pd_live, kept).
 * 0, or -2 when out of memory. */
int gd_pd_masker_live(gd_pd_masker *pm, const uint8_t *sat, uint8_t *live);
/* The bytes the masker's tables, loop memos, liveness arrays and reverse edges take. */
size_t gd_pd_masker_bytes(const gd_pd_masker *pm);
/* For the top frame (rule r, state s) of a stack whose saturated set is `sat`: loc (nwords words)
 * = the tokens the frame consumes by its own byte moves through live states, cand = the other
 * tokens that the rule's automaton consumes when every exit byte of a state reached after the
 * first byte leads to a sink that takes everything: the tokens that may enter a call or return
 * after a byte of the frame (to check with gd_pd_check; the calls and returns before the first
 * byte are the other stacks of the configuration's closure).  Special token ids are cleared
 * from both.  Returns 1 if cand is not empty, 0 if
 * it is, -1 for r or s out of range, -2 when out of memory. */
int gd_pd_frame_mask(const gd_kernels *kern, gd_pd_masker *pm, int32_t r, int32_t s, const uint8_t *sat,
                     const uint32_t *special_ids, size_t n_special, uint32_t *loc, uint32_t *cand);
/* The exact check of candidate tokens from one configuration, as the reference's
 * CompiledPushdown._run: a token is allowed iff some stack consumes all its bytes, a byte
 * moving the top frame after any pushes of calls (a rule nested max_depth times above the
 * bottom frame is not pushed again) and pops of accepting frames, every state reached live for
 * its frame's saturated set.  `stacks` (n_items int32): each stack as its number of frames then
 * (rule, state) per frame, bottom first.  Sets the bit of every allowed id of ids[0..n_ids) in
 * mask (nwords words; other bits untouched) and writes into undecided (n_ids capacity, count in
 * *n_undecided) the ids that die after a closure of more than 1024 stacks or 4096 frames: the
 * caller checks those.  Ids are checked in the order of their bytes, steps of shared prefixes
 * once.  Returns 0, -1 for out-of-range input, -2 when out of memory. */
int gd_pd_check(gd_pd_masker *pm, const int32_t *stacks, size_t n_items, const uint32_t *ids, size_t n_ids,
                uint32_t *mask, size_t nwords, uint32_t *undecided, size_t *n_undecided);
/* The configuration after the bytes data[0..n) from `stacks` (as for gd_pd_check), the
 * reference's CompiledPushdown._run: into out (cap int32), its stacks in the same form, in no
 * particular order, *n_out items (0: a byte had no move).  Returns 0; 1 when a closure on the
 * way is past the bounds, 2 when out is too small (the caller steps the bytes itself); -1 for
 * out-of-range input, -2 when out of memory. */
int gd_pd_run(gd_pd_masker *pm, const int32_t *stacks, size_t n_items, const uint8_t *data, size_t n, int32_t *out,
              size_t cap, size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
