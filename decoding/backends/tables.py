"""Per-vocabulary tables the back-ends share: the native token trie and the plain-text
profiles.  They are a pure function of the :class:`~decoding.vocab.Vocab`, built once on
first use and held in a weak-key map (:func:`vocab_tables`), so nothing is attached to
the vocabulary and they are freed with it.

A *plain-text profile* is a set of plain characters: every Unicode scalar value except some
ASCII bytes (for JSON strings: control characters, ``"`` and ``\\``; for XML text: control
characters other than tab/LF/CR, ``<``, ``&`` and ``>``).  For each profile we keep the
bitmask of *plain tokens* (whose bytes are one or more complete plain characters, with the
number of characters of each) and a trie of all the other tokens.  How a back-end uses them
is its own business (see :mod:`decoding.backends.textloop`).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decoding import _native
from decoding.vocab import Vocab
from decoding.weakmemo import WeakMemo

__all__ = ["PROFILES", "PROBES", "PlainProfile", "VocabTables", "vocab_tables", "prepare", "char_dfa"]

_JSON_EXCLUDED = frozenset(range(0x20)) | {0x22, 0x5C}
_XML_EXCLUDED = frozenset(set(range(0x20)) - {0x09, 0x0A, 0x0D}) | {0x3C, 0x26, 0x3E}
#: profile name -> ASCII bytes that are not plain characters
PROFILES: dict[str, frozenset[int]] = {"json-string": _JSON_EXCLUDED, "xml-text": _XML_EXCLUDED}
#: profile name -> its single-byte plain characters among " < 0 space: a uniform step sends
#: each of them where it sends "a" (the cheap test before a state's plain chain is read)
PROBES: dict[str, tuple[int, ...]] = {name: tuple(b for b in b'"<0 ' if b not in ex)
                                      for name, ex in PROFILES.items()}


def char_dfa(excluded: frozenset[int]) -> np.ndarray:
    """int16[8, 256] UTF-8 character automaton over the plain characters: 0 = between
    characters (accepting), 1/2/3 = continuation bytes still needed; 4 = after E0 (A0-BF),
    5 = after ED (80-9F), 6 = after F0 (90-BF), 7 = after F4; -1 = not plain."""
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


@dataclass(frozen=True, eq=False)
class PlainProfile:
    """The plain tokens of one profile for one vocabulary (all arrays read-only)."""

    name: str
    char_dfa: np.ndarray  # int16[8, 256], see char_dfa()
    plain_mask: np.ndarray  # uint32[n_words]: the plain tokens
    other_trie: Any  # native trie of the tokens that are not plain
    n_plain: int
    n_chars: np.ndarray  # int32[n_tokens]: characters in each plain token, 0 for the others
    node_plain: np.ndarray  # uint8 per node of the whole trie (``_native.trie_plain_flags``)
    other_node_plain: np.ndarray  # the same for the trie of the other tokens
    #: native trie of each other token's *rest*: its bytes from the first character that is not
    #: a complete plain one (a token is its plain head then its rest); from a state that every
    #: plain character leads back to, a token is allowed iff its rest is, so its walk replaces
    #: that of the other tokens (many share a rest: ``abc"``, ``x"``, ``"``)
    rest_trie: Any = None
    #: bool[256]: the bytes some plain token starts with
    first_bytes: np.ndarray | None = None
    _upto: dict = field(default_factory=dict, repr=False)
    _by_chars: tuple = field(default=(), repr=False)  # (plain ids sorted by characters, their counts)
    _max_chars: int = field(default=0, repr=False)
    _counts: Any = field(default=None, repr=False)  # the distinct character counts (char_counts)
    _masker_args: tuple = field(default=(), repr=False)

    #: masks of at most this many characters are made with the profile (most tokens are that
    #: short, so those masks are the costly ones); longer bounds clear the few longer tokens
    EAGER_UPTO = 8

    def __post_init__(self) -> None:
        ids = np.nonzero(self.n_chars > 0)[0]
        order = np.argsort(self.n_chars[ids], kind="stable")
        srt, nc = ids[order].astype(np.uint32), self.n_chars[ids][order]
        for a in (srt, nc):
            a.setflags(write=False)
        object.__setattr__(self, "_by_chars", (srt, nc))
        object.__setattr__(self, "_max_chars", int(nc[-1]) if len(nc) else 0)
        counts = np.unique(nc)  # (sorted: cheap)
        counts.setflags(write=False)
        object.__setattr__(self, "_counts", counts)
        for k in range(1, min(self.EAGER_UPTO, self._max_chars - 1) + 1):
            self.plain_upto(k)

    @property
    def char_counts(self) -> np.ndarray:
        """The distinct character counts of the plain tokens (sorted, read-only)."""
        return self._counts

    @property
    def max_chars(self) -> int:
        """Characters of the longest plain token (a chain this long masks like any longer one)."""
        return self._max_chars

    @property
    def masker_args(self) -> tuple:
        """The profile's part of a ``_native.state_masker`` profile, made once: (other_trie,
        other_node_plain, node_plain, char_dfa, probes, max_chars, plain_mask, the
        ``plain_upto(k)`` made with the profile for k in 0..EAGER_UPTO (else None), the plain ids
        sorted by characters, their characters, rest_trie)."""
        if not self._masker_args:
            upto = tuple(self._upto.get(k) for k in range(self.EAGER_UPTO + 1))
            object.__setattr__(self, "_masker_args", (
                self.other_trie, self.other_node_plain, self.node_plain, np.ascontiguousarray(self.char_dfa).reshape(-1),
                bytes(PROBES[self.name]), self._max_chars, self.plain_mask, upto) + self._by_chars
                + (self.rest_trie,))
        return self._masker_args

    def plain_upto(self, k: int) -> np.ndarray:
        """Mask of the plain tokens of at most ``k`` characters (cached per k): the ids of the
        tokens it has or, when fewer, of the plain tokens it lacks (set natively)."""
        if k >= self._max_chars:
            return self.plain_mask
        m = self._upto.get(k)
        if m is None:
            srt, nc = self._by_chars
            cut = int(np.searchsorted(nc, k, side="right"))
            m = np.empty(self.plain_mask.shape[0], dtype=np.uint32)
            if cut <= len(srt) - cut:
                _native.mask_from_ids(m, srt[:cut])
            else:
                _native.mask_from_ids(m, srt[cut:])
                np.bitwise_and(self.plain_mask, np.invert(m, out=m), out=m)
            m.setflags(write=False)
            self._upto[k] = m
        return m


def _node_plain(trie: Any, t: np.ndarray) -> np.ndarray:
    out = np.zeros(_native.trie_info(trie)[0], dtype=np.uint8)
    _native.trie_plain_flags(trie, np.ascontiguousarray(t).reshape(-1), out)
    out.setflags(write=False)
    return out


def _build_profile(vocab: Vocab, name: str, trie: Any) -> PlainProfile:
    t = char_dfa(PROFILES[name])
    tl = t.tolist()
    plain = np.zeros(vocab.n_tokens, dtype=bool)
    n_chars = np.zeros(vocab.n_tokens, dtype=np.int32)
    rest: list[bytes] = [b""] * vocab.n_tokens  # the other tokens' bytes from their first non-plain character
    for i, b in enumerate(vocab.token_bytes):
        if b:
            s, n, head = 0, 0, 0
            for j, x in enumerate(b):
                s = tl[s][x]
                if s < 0:
                    break
                if s == 0:
                    n += 1
                    head = j + 1
            if s == 0:
                plain[i] = True
                n_chars[i] = n
            else:
                rest[i] = b[head:]
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
    first = np.zeros(256, dtype=bool)
    first[np.frombuffer(blob, dtype=np.uint8)[off[:-1][plain].astype(np.int64)]] = True
    for a in (t, mask, n_chars, first):
        a.setflags(write=False)
    other = _native.trie_build(blob2, off2)
    off3 = np.zeros_like(off)
    np.cumsum(np.fromiter(map(len, rest), dtype=off.dtype, count=len(rest)), out=off3[1:])
    rest_trie = _native.trie_build(b"".join(rest), off3)
    return PlainProfile(name, t, mask, other, int(plain.sum()), n_chars, _node_plain(trie, t), _node_plain(other, t),
                        rest_trie=rest_trie, first_bytes=first)


class VocabTables:
    """The shared per-vocabulary tables of one :class:`~decoding.vocab.Vocab`, each built
    on first use (thread-safe; built at most once)."""

    __slots__ = ("_vocab", "_trie", "_profiles", "_eog_mask", "_maskers", "_lock", "__weakref__")

    def __init__(self, vocab: Vocab) -> None:
        self._vocab = weakref.ref(vocab)
        self._trie: Any = None
        self._profiles: dict[str, PlainProfile] = {}
        self._eog_mask: np.ndarray | None = None
        self._maskers: dict[tuple[str, ...], Any] = {}
        self._lock = threading.Lock()

    def _v(self) -> Vocab:
        v = self._vocab()
        assert v is not None  # the tables are only reachable through a live vocabulary
        return v

    @property
    def trie(self) -> Any:
        """The native trie of all token byte strings."""
        if self._trie is None:
            with self._lock:
                if self._trie is None:
                    blob, off = self._v().blob()
                    self._trie = _native.trie_build(blob, off)
        return self._trie

    @property
    def eog_mask(self) -> np.ndarray:
        """Read-only uint32 mask of the end-of-generation tokens (every compiled grammar ORs
        it into the masks of its accepting states)."""
        if self._eog_mask is None:
            m = np.zeros(self._v().n_words, dtype=np.uint32)
            _native.mask_from_ids(m, np.array(sorted(self._v().eog_ids), dtype=np.uint32))
            m.setflags(write=False)
            self._eog_mask = m
        return self._eog_mask

    def masker_profiles(self, names: tuple[str, ...]) -> Any:
        """The native profiles (``_native.masker_profiles``) a DFA's state masker tries, in the
        order of ``names`` (made once per vocabulary and order)."""
        hit = self._maskers.get(names)
        if hit is None:
            args = tuple(self.profile(n).masker_args for n in names)
            hit = self._maskers.setdefault(names, _native.masker_profiles(self.trie, self._v().n_tokens, args))
        return hit

    def profile(self, name: str) -> PlainProfile:
        """The plain-text profile ``name`` (one of :data:`PROFILES`)."""
        hit = self._profiles.get(name)
        if hit is None:
            trie = self.trie  # (built first: it takes the lock too)
            with self._lock:
                hit = self._profiles.get(name)
                if hit is None:
                    hit = self._profiles[name] = _build_profile(self._v(), name, trie)
        return hit


#: the :class:`VocabTables` of a vocabulary (one per vocabulary object, freed with it)
vocab_tables: "WeakMemo[Vocab, VocabTables]" = WeakMemo(VocabTables)


def prepare(vocab: Vocab) -> VocabTables:
    """Build every per-vocabulary table now (the trie, each plain-text profile and their
    native form for state maskers) instead of on the first compile or mask that needs it;
    returns them."""
    t = vocab_tables(vocab)
    _ = t.trie
    for name in PROFILES:
        t.profile(name)
    t.masker_profiles(tuple(PROFILES))
    return t
