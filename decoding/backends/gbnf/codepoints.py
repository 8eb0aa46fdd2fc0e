"""Code-point view of a byte DFA, for emitting GBNF (llama.cpp reads grammars over code points).

:func:`codepoint_dfa` keeps only the well-formed UTF-8 strings of the DFA: the only ones
llama.cpp's grammar engine can produce.  Ranges are sorted, disjoint, inclusive code-point
pairs; surrogates and overlong encodings never appear.
"""

from __future__ import annotations

from decoding.backends.automaton import DFA
from decoding.ir import normalize_ranges
from decoding.text.utf8 import UTF8_SEQUENCES, payload_ranges

__all__ = ["codepoint_dfa"]


def _class_spans(dfa: DFA, lo: int, hi: int) -> list[tuple[int, int]]:
    """Split bytes lo..hi into maximal runs of one byte class."""
    bc = dfa.byte_class
    out = []
    start = lo
    for b in range(lo + 1, hi + 2):
        if b > hi or bc[b] != bc[start]:
            out.append((start, b - 1))
            start = b
    return out


def codepoint_dfa(dfa: DFA) -> list[dict[int, list[tuple[int, int]]]]:
    """For each state of the byte DFA (specials ignored): ``{target: code-point ranges}``
    over well-formed UTF-8 characters.  Strings that are not well-formed UTF-8 are
    dropped.  States reachable only inside a character are absent from the keys."""
    out: list[dict[int, list[tuple[int, int]]]] = []
    for s in range(dfa.n_states):
        moves: dict[int, list[tuple[int, int]]] = {}
        for shape in UTF8_SEQUENCES:
            # frontier: (state, per-position concrete byte ranges so far)
            frontier: list[tuple[int, list[tuple[int, int]]]] = [(s, [])]
            for lo, hi in shape:
                nxt = []
                for st, path in frontier:
                    for a, b in _class_spans(dfa, lo, hi):
                        t = dfa.step(st, a)
                        if t >= 0:
                            nxt.append((t, path + [(a, b)]))
                frontier = nxt
                if not frontier:
                    break
            for t, path in frontier:
                cps = payload_ranges([[r] for r in path])
                assert cps is not None, path
                moves.setdefault(t, []).extend(cps)
        out.append({t: list(normalize_ranges(r)) for t, r in moves.items()})
    return out
