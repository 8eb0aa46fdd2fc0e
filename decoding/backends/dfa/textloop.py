"""Shortcut for "free text" states (string bodies, XML text): exact masks without walking
the whole vocabulary.

A *profile* is a set of plain characters: every Unicode scalar value except some ASCII
bytes (for JSON strings: control characters, ``"`` and ``\\``; for XML text: control
characters other than tab/LF/CR, ``<``, ``&`` and ``>``).  For each vocabulary and profile
we precompute the bitmask of *plain tokens* (whose bytes are one or more complete plain
characters) and a trie of all the other tokens.

Invariant (checked per state by :func:`plain_step`): if every plain character leads from
``s`` to one and the same state ``s'`` (a *uniform* step), and the chain of uniform steps
from ``s`` allows ``k`` plain characters (``k`` infinite when the chain cycles, as in an
unbounded string body), then exactly the plain tokens of at most ``k`` characters are
allowed, so ``mask(s) = plain_upto(k) | walk(other_trie, s)``.  Bounded strings
(``maxLength``) are chains of length ``k``; other states get the full trie walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from decoding import _native
from decoding.vocab import Vocab

__all__ = ["PROFILES", "Profile", "plain_tables", "plain_step", "UNBOUNDED"]

UNBOUNDED = 1 << 30

_JSON_EXCLUDED = frozenset(range(0x20)) | {0x22, 0x5C}
_XML_EXCLUDED = frozenset(set(range(0x20)) - {0x09, 0x0A, 0x0D}) | {0x3C, 0x26, 0x3E}
PROFILES: dict[str, frozenset[int]] = {"json-string": _JSON_EXCLUDED, "xml-text": _XML_EXCLUDED}


# UTF-8 character automaton: 0 = between characters (accepting), 1/2/3 = continuation bytes
# still needed; 4 = after E0 (A0-BF), 5 = after ED (80-9F), 6 = after F0 (90-BF), 7 = after F4.
def _char_dfa(excluded: frozenset[int]) -> np.ndarray:
    t = np.full((8, 256), -1, dtype=np.int16)
    for b in range(0x80):
        if b not in excluded:
            t[0, b] = 0
    t[0, 0xC2:0xE0] = 1
    t[0, 0xE0] = 4
    t[0, 0xE1:0xED] = 2
    t[0, 0xED] = 5
    t[0, 0xEE:0xF0] = 2
    t[0, 0xF0] = 6
    t[0, 0xF1:0xF4] = 3
    t[0, 0xF4] = 7
    t[1, 0x80:0xC0] = 0
    t[2, 0x80:0xC0] = 1
    t[3, 0x80:0xC0] = 2
    t[4, 0xA0:0xC0] = 1
    t[5, 0x80:0xA0] = 1
    t[6, 0x90:0xC0] = 2
    t[7, 0x80:0x90] = 2
    return t


@dataclass(frozen=True)
class Profile:
    name: str
    char_dfa: np.ndarray  # int16[8, 256]
    plain_mask: np.ndarray  # uint32[n_words]
    other_trie: Any  # native trie of the non-plain tokens
    n_plain: int
    n_chars: np.ndarray  # int32[n_tokens]: characters in each plain token, 0 for the others
    _upto: dict

    def plain_upto(self, k: int) -> np.ndarray:
        """Mask of the plain tokens of at most ``k`` characters (cached per k)."""
        if k >= int(self.n_chars.max(initial=0)):
            return self.plain_mask
        m = self._upto.get(k)
        if m is None:
            sel = (self.n_chars > 0) & (self.n_chars <= k)
            pad = np.zeros(self.plain_mask.shape[0] * 32 - len(sel), bool)
            m = np.packbits(np.concatenate([sel, pad]), bitorder="little").view(np.uint32).copy()
            m.setflags(write=False)
            self._upto[k] = m
        return m


def _is_plain(b: bytes, t: np.ndarray) -> bool:
    s = 0
    for x in b:
        s = t[s, x]
        if s < 0:
            return False
    return s == 0 and len(b) > 0


def plain_tables(vocab: Vocab, name: str) -> Profile:
    """The plain-token mask and the trie of the other tokens (cached on ``vocab``)."""
    cache = vocab._native_cache
    for item in cache:
        if isinstance(item, Profile) and item.name == name:
            return item
    t = _char_dfa(PROFILES[name])
    tl = t.tolist()
    plain = np.zeros(vocab.n_tokens, dtype=bool)
    n_chars = np.zeros(vocab.n_tokens, dtype=np.int32)
    for i, b in enumerate(vocab.token_bytes):
        if b:
            s, n = 0, 0
            for x in b:
                s = tl[s][x]
                if s < 0:
                    break
                n += s == 0
            if s == 0:
                plain[i] = True
                n_chars[i] = n
    mask = np.packbits(np.concatenate([plain, np.zeros(vocab.n_words * 32 - vocab.n_tokens, bool)]),
                       bitorder="little").view(np.uint32).copy()
    blob, off = vocab.blob()
    lens = np.diff(off)
    lens[plain] = 0  # plain tokens are left out of the other trie
    off2 = np.zeros_like(off)
    np.cumsum(lens, out=off2[1:])
    keep = ~plain
    starts = off[:-1][keep]
    blob2 = b"".join(blob[int(a):int(a) + int(n)] for a, n in zip(starts, lens[keep]))
    mask.setflags(write=False)
    prof = Profile(name, t, mask, _native.trie_build(blob2, off2), int(plain.sum()), n_chars, {})
    cache.append(prof)
    return prof


def plain_step(char_dfa: np.ndarray, byte_class: np.ndarray, trans: np.ndarray, state: int) -> int | None:
    """The state every plain character leads to from ``state``; -1 if no plain character is
    allowed at all; None if plain characters lead to different states or only some die."""
    bc = byte_class.astype(np.intp)
    seen = {(0, state)}
    todo = [(0, state)]
    target = None
    while todo:
        p, d = todo.pop()
        prow = char_dfa[p]
        ok = np.nonzero(prow >= 0)[0]
        dn = trans[d, bc[ok]]
        dead = dn < 0
        if dead.any():
            if p == 0 and d == state and dead.all():
                return -1
            return None
        pn = prow[ok]
        back = pn == 0
        ends = np.unique(dn[back])
        if len(ends) > 1 or (len(ends) == 1 and target is not None and int(ends[0]) != target):
            return None
        if len(ends) == 1:
            target = int(ends[0])
        for pp, dd in set(zip(pn[~back].tolist(), dn[~back].tolist())):
            if (pp, dd) not in seen:
                seen.add((pp, dd))
                todo.append((pp, dd))
    return target
