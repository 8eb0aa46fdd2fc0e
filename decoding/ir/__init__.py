"""The grammar IR: the waist every front-end targets and every back-end reads.

- :mod:`decoding.ir.nodes`: the node algebra (literal bytes, byte sets, sequence, choice,
  bounded repeat, rule reference, special token, intersection and difference of regular
  sub-languages) and :class:`Grammar`;
- :mod:`decoding.ir.key`: canonical digests and keys (equal grammars share one key);
- :mod:`decoding.ir.size`: size estimates used to pick a back-end.

Everything here is plain, immutable, serializable data; nothing touches a vocabulary.
"""

from decoding.ir.nodes import (
    Lit, ByteSet, Seq, Choice, Repeat, Ref, Special, Inter, Diff, Dfa, Node, inter, diff, check_regular,
    Grammar, EMPTY, NOTHING, lit, seq, choice, opt, star,
    plus, rep, byteset, char_class, any_char, normalize_ranges, complement_ranges, map_leaves,
    to_data, from_data, DEFAULT_MAX_DEPTH, MAX_CP, children, walk, nullable, reachable_rules, register_plain, plain_ids,
)

__all__ = ["Dfa", "Inter", "Diff", "inter", "diff", "check_regular", "Lit", "ByteSet", "Seq", "Choice", "Repeat", "Ref", "Special", "Node", "Grammar", "EMPTY", "NOTHING", "lit", "seq", "choice", "opt", "star", "plus", "rep", "byteset", "char_class", "any_char", "normalize_ranges", "complement_ranges", "map_leaves", "to_data", "from_data", "DEFAULT_MAX_DEPTH", "MAX_CP", "children", "walk", "nullable", "reachable_rules", "register_plain", "plain_ids"]
