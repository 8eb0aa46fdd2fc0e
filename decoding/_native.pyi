"""Type stubs of the C extension (native/binding.c).

The kernel implementation used by ``mask_and``, ``mask_or`` and ``apply_mask`` is held in
the module's state (chosen at import: the best this CPU runs, or ``GD_NATIVE_IMPL``);
``set_impl`` changes it, ``impl`` reports it.  The C core itself holds no mutable state.
"""

from typing import Any

import numpy as np

def mask_and(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> None: ...
def mask_or(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> None: ...
def mask_count(mask: np.ndarray, n: int) -> int: ...
def mask_digest(mask: np.ndarray, n: int, ids: np.ndarray) -> tuple[int, int]: ...
def mask_hash(mask: np.ndarray) -> int: ...
def mask_index() -> Any:
    """An empty interning index of sparse masks (one per ``MaskTable``; not thread-safe: the
    table's lock serialises its use)."""
def mask_index_intern(index: Any, hash: int, ids: np.ndarray, count: int, inverted: bool, new_mid: int) -> int:
    """The id of the sparse mask given by its ``mask_digest`` hash and its first ``count`` ids
    (uint32: set bits, or clear bits when ``inverted``); when absent it is added as
    ``new_mid`` if ``new_mid >= 0``, else -1.  MemoryError; ValueError if ``new_mid`` is taken."""
def mask_index_expand(index: Any, mid: int, mask: np.ndarray, n: int) -> None:
    """``mask`` (uint32, ``(n + 31) // 32`` words) = mask ``mid`` over ``n`` tokens; KeyError if absent."""
def mask_index_ids(index: Any, mid: int, ids: np.ndarray) -> tuple[int, bool]:
    """(count, inverted): the stored ids of mask ``mid`` into ``ids`` (uint32); KeyError if absent."""
def mask_index_bytes(index: Any) -> int: ...
def state_mask(masker: Any, state: int, mask: np.ndarray, ids: np.ndarray) -> tuple[int, int, int]: ...
def state_mask_intern(masker: Any, state: int, mask: np.ndarray, ids: np.ndarray, index: Any,
                      new_mid: int) -> tuple[int, int, int, bool]:
    """``state_mask``, then the id of a sparse mask in ``index`` (as ``mask_index_intern``; -1 for a
    dense mask): (mid, hash, n, inverted).  Releases the GIL."""
def mask_equal(a: np.ndarray, b: np.ndarray) -> bool: ...
def mask_from_ids(mask: np.ndarray, ids: np.ndarray) -> None: ...
def mask_to_ids(mask: np.ndarray, n: int, ids: np.ndarray) -> int: ...
def mask_mark_next(mask: np.ndarray, n: int, next_state: np.ndarray, mark: np.ndarray) -> int: ...
def apply_mask(logits: np.ndarray, mask: np.ndarray, fill: float = ...) -> None: ...
def trie_build(blob: bytes, offsets: np.ndarray) -> Any: ...
def trie_info(trie: Any) -> tuple[int, int]: ...
def char_pairs(char_dfa: np.ndarray, byte_class: np.ndarray, row_off: np.ndarray, pair_cls: np.ndarray,
               pair_next: np.ndarray) -> int: ...
def plain_chain(row_off: np.ndarray, pair_cls: np.ndarray, pair_next: np.ndarray, table: np.ndarray,
                ncols: int, state: int, max_len: int) -> int: ...
def trie_walk(trie: Any, classes: np.ndarray, table: np.ndarray, ncols: int, state: int,
              mask: np.ndarray, next_state: np.ndarray | None = ...) -> int: ...
def nfa_determinize(eps_off: np.ndarray, eps_tgt: np.ndarray, mv_off: np.ndarray, mv: np.ndarray,
                    start: int, end: int, nsym: int, max_states: int, budget_s: float) -> tuple[bytes, bytes]:
    """Subset construction of an NFA in CSR int32 arrays (``mv``: (symbol, target) pairs);
    returns (int32 table bytes, uint8 accepting bytes), states in BFS order, symbols in
    increasing order.  OverflowError past ``max_states`` states, TimeoutError once
    ``budget_s`` seconds are spent (inf or nan: no budget), ValueError for arrays out of
    range, MemoryError.  Releases the GIL."""
def nfa_determinize_coo(n: int, start: int, end: int, eps_src: Any, eps_tgt: Any, e_src: Any, e_lo: Any,
                        e_hi: Any, e_tgt: Any, sp_src: Any, sp_sym: Any, sp_tgt: Any, n_specials: int,
                        max_states: int, budget_s: float) -> tuple[bytes, int, bytes, bytes]:
    """Subset construction of an NFA of ``n`` states given as flat edge lists (int32 buffers,
    ``e_lo``/``e_hi`` uint8; e.g. ``array('i')`` / ``array('B')``): epsilon edges
    ``eps_src[i] -> eps_tgt[i]``, byte-range edges ``e_src[i] --[e_lo[i], e_hi[i]]--> e_tgt[i]``,
    special moves ``sp_src[i] --sp_sym[i]--> sp_tgt[i]``.  Makes the byte classes and returns
    (uint16[256] byte-class bytes, number of classes, int32 table bytes, uint8 accepting
    bytes), as ``nfa_determinize`` over ``n_classes + n_specials`` symbols.  Same errors;
    ValueError for an edge out of range or edge lists of unequal lengths.  Releases the GIL."""
def dfa_bfs(table: np.ndarray, nsym: int, col_ok: np.ndarray | None, node_ok: np.ndarray | None, reverse: bool,
            sources: np.ndarray, dist: np.ndarray) -> int:
    """Breadth-first distances over a flat int32 table from ``sources`` (``reverse``: to them),
    using the columns with ``col_ok`` and the states with ``node_ok`` (uint8; None: all): writes
    ``dist`` (int32, -1 unreachable), returns the number of states reached.  Releases the GIL."""
def dfa_prune(table: np.ndarray, nsym: int, accepting: np.ndarray, col_ok: np.ndarray | None,
              out_table: np.ndarray, out_accepting: np.ndarray) -> int:
    """Trim a flat int32 table: keep the states that reach acceptance (over ``col_ok`` columns)
    and are reached from state 0 over such states, renumbered in order into ``out_table`` /
    ``out_accepting``; returns how many (0: state 0 is dead).  Releases the GIL."""
def dfa_minimize(table: np.ndarray, nsym: int, accepting: np.ndarray, block: np.ndarray,
                 budget_s: float) -> int:
    """Minimisation of a flat int32 table (-1: no transition) with uint8 ``accepting``:
    writes each state's block into ``block`` (int32, blocks numbered by first state) and
    returns the number of blocks.  TimeoutError once ``budget_s`` is spent.  Releases the GIL."""
def dfa_trim(table: np.ndarray, nsym: int, accepting: np.ndarray,
             col_ok: np.ndarray | None) -> tuple[int, bytes | None, bytes | None]:
    """``dfa_prune`` that makes its result: (states kept, int32 table bytes, uint8 accepting
    bytes); the tables are None when none or every state is kept.  Releases the GIL."""
def dfa_minimize_table(table: np.ndarray, nsym: int, accepting: np.ndarray,
                       budget_s: float, live: bool = False) -> tuple:
    """``dfa_minimize`` and the quotient: (blocks, int32 table bytes, uint8 accepting bytes)
    of the minimal DFA, the tables None when the DFA is already minimal; with ``live`` a
    fourth item, whether every state can reach acceptance (``gd_dfa_minimize_live``).
    TimeoutError once ``budget_s`` is spent.  Releases the GIL."""
def literal_dfa(blob: Any, offsets: np.ndarray) -> tuple[bytes, bytes, bytes, bytes]:
    """Minimal acyclic DFA of the words ``blob[offsets[i]:offsets[i+1]]`` (uint8 blob, int64
    offsets, ``offsets[0] == 0``; the words strictly increasing bytewise): (int32 ``off`` of
    ``n + 1`` entries, uint8 labels, int32 targets, uint8 final flags); the edges of state s
    are ``off[s]:off[s+1]`` by increasing label, states in BFS order from 0.  ValueError for
    unsorted words, MemoryError.  Releases the GIL."""
def nfa_build(code: Any, lit: Any, rule_body: Any, leaf_n: Any, leaf_eoff: Any, leaf_src: Any, leaf_lo: Any,
              leaf_hi: Any, leaf_tgt: Any, leaf_aoff: Any, leaf_acc: Any, root: int, n0: int, s: int, max_depth: int,
              max_nesting: int, base_len: int, max_states: int, max_frames: int, budget_s: float,
              want: Any = None, max_subset: int = 0, max_dfa: int = 0, max_bytes: int = 0) -> tuple:
    """Thompson NFA of a serialised IR (``gd_nfa_build``; see ``automaton._nfa_program``):
    ``(0, n, end, eps_src, eps_tgt, e_src, e_lo, e_hi, e_tgt, sp_src, sp_k, sp_tgt)`` (the
    edge arrays as int32 / uint8 bytes, end -1 for the empty language), or ``(rc, n,
    err_rule, err_rule2, err_arg)`` past a limit, the budget, or where the Python builder
    must take over.  ``want`` (uint8, one entry per rule of the program): the rules built
    first as their own minimal DFAs and embedded (``gd_nfa_build_rule_dfas``; subset
    construction at most ``max_subset`` states and ``max_bytes`` bytes, minimal DFA at most
    ``max_dfa`` states, else the rule is inlined).  ValueError for a malformed program,
    MemoryError.  Releases the GIL."""
def pd_new(max_depth: int, blob: np.ndarray, offsets: np.ndarray, trans_off: np.ndarray, trans: np.ndarray,
           n_cls: np.ndarray, state_off: np.ndarray, byte_class: np.ndarray, accepting: np.ndarray,
           call_off: np.ndarray, call_x: np.ndarray, call_t: np.ndarray, spec_off: np.ndarray,
           spec_t: np.ndarray) -> Any:
    """A pushdown grammar's rules for pd_check (see gd_pd in native/include/gd_native.h)."""
def pd_live(pd: Any, forbidden: np.ndarray, live: np.ndarray) -> None:
    """live[g]: state g completable without calling the forbidden rules (gd_pd_live)."""
def pd_check(pd_masker: Any, stacks: np.ndarray, ids: np.ndarray, mask: np.ndarray, undecided: np.ndarray) -> int:
    """Set the bits of the ids a configuration (stacks, int32) consumes; the undecided ids go
    into ``undecided``, their count is returned (gd_pd_check). Releases the GIL."""
def pd_masker(pd: Any, exit_id: np.ndarray, exit_set: np.ndarray, profiles: Any) -> Any:
    """A pushdown grammar's mask walks over its rules' exit sets (gd_pd_masker_new)."""
def pd_run(pd_masker: Any, stacks: np.ndarray, data: bytes, out: np.ndarray) -> tuple[int, int]:
    """The configuration after ``data`` (gd_pd_run): (0, n) with its stacks in ``out[:n]``, or
    (1 or 2, 0) when the caller must step the bytes itself. Releases the GIL."""
def pd_masker_bytes(pd_masker: Any) -> int:
    """Bytes of the masker's tables, loop memos, liveness arrays and reverse edges."""
def pd_masker_live(pd_masker: Any, sat: np.ndarray | None, live: np.ndarray) -> None:
    """live[g]: the liveness of saturated set ``sat`` (a byte per rule), kept by the masker."""
def pd_frame_mask(pd_masker: Any, rule: int, state: int, sat: np.ndarray | None, special_ids: np.ndarray,
                  loc: np.ndarray, cand: np.ndarray, ids: np.ndarray) -> tuple[bool, int, int, int]:
    """The tokens a top frame consumes itself (loc) and the others that may enter a call or
    return (cand; gd_pd_frame_mask): (cand not empty, then loc's digest as state_mask gives
    it: hash, count, inverted, with the ids in ``ids``). Releases the GIL."""
def impl() -> str:
    """Name of the kernel implementation in use: scalar, sse2, avx2, avx512 or neon."""
def impl_supported(name: str) -> bool:
    """Whether ``name`` runs on this CPU."""
def set_impl(name: str) -> None:
    """Use ``name``; ValueError (choice unchanged) if it does not run on this CPU."""
