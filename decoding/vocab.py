"""Vocabulary: the exact bytes of every token of a llama.cpp tokenizer.

Invariants
- ``token_bytes[i]`` is what token ``i`` contributes to the output text, as bytes:
  SPM ``▁`` is a space, byte-fallback ``<0xXX>`` is that byte, GPT-2 byte-level BPE is
  decoded.  Control, unknown and unused tokens have ``b""`` and never match text.
- ``special_ids`` maps the text of control / user-defined tokens to their id, for anchors.
- ``eog_ids`` are the end-of-generation ids (``llama_vocab_is_eog``); their ``token_bytes`` are
  ``b""``: an end-of-generation token never spells text, so a mask allows it only where the
  output may end.
- ``fingerprint`` is a stable hex digest of all of the above plus the vocabulary type; two
  tokenizers with the same fingerprint produce the same masks.
- A ``Vocab`` is immutable; tables derived from it are computed once (``cached_property``).
  Back-end tables (the native trie, plain-text profiles) are not stored on it: see
  :mod:`decoding.backends.tables`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import weakref
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from decoding.errors import VocabError
from decoding.weakmemo import WeakMemo

__all__ = ["Vocab", "load_vocab", "as_vocab"]

_ATTR_UNKNOWN, _ATTR_UNUSED, _ATTR_NORMAL, _ATTR_CONTROL, _ATTR_USER, _ATTR_BYTE = 1, 2, 4, 8, 16, 32


@dataclass(frozen=True, eq=False)
class Vocab:
    token_bytes: tuple[bytes, ...]
    attrs: np.ndarray  # int32[n]
    eog_ids: frozenset[int]
    special_ids: dict[str, int]
    vocab_type: int
    name: str = ""
    _llama: Any = field(default=None, repr=False, compare=False)

    @property
    def n_tokens(self) -> int:
        return len(self.token_bytes)

    @cached_property
    def max_token_bytes(self) -> int:
        """Length in bytes of the longest token (from the blob's offsets: one numpy pass)."""
        off = self.blob()[1]
        return int(np.diff(off).max()) if len(off) > 1 else 0

    @property
    def can_tokenize(self) -> bool:
        """Whether :meth:`tokenize` has llama.cpp's tokenizer (a Vocab read from a model)."""
        return self._llama is not None

    @property
    def n_words(self) -> int:
        """Number of uint32 words of a mask over this vocabulary."""
        return (self.n_tokens + 31) // 32

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        h.update(f"gd-vocab-v1 type={self.vocab_type} n={self.n_tokens}\n".encode())
        for b in self.token_bytes:
            h.update(len(b).to_bytes(4, "little"))
            h.update(b)
        h.update(np.ascontiguousarray(self.attrs, dtype=np.int32).tobytes())
        h.update(",".join(map(str, sorted(self.eog_ids))).encode())
        for t in sorted(self.special_ids):
            h.update(t.encode() + b"\x00" + str(self.special_ids[t]).encode())
        return h.hexdigest()[:32]

    @cached_property
    def _blob(self) -> tuple[bytes, np.ndarray]:
        lens = np.fromiter((len(b) for b in self.token_bytes), dtype=np.uint64, count=self.n_tokens)
        off = np.zeros(self.n_tokens + 1, dtype=np.uint64)
        np.cumsum(lens, out=off[1:])
        off.setflags(write=False)
        return b"".join(self.token_bytes), off

    def blob(self) -> tuple[bytes, np.ndarray]:
        """All token bytes concatenated, plus uint64 offsets (n_tokens + 1; read-only)."""
        return self._blob

    @cached_property
    def _single(self) -> np.ndarray:
        out = np.zeros(256, dtype=bool)
        for b in self.token_bytes:
            if len(b) == 1:
                out[b[0]] = True
        out.setflags(write=False)
        return out

    def single_byte_tokens(self) -> np.ndarray:
        """bool[256]: bytes that some token spells on its own (computed once, read-only)."""
        return self._single

    @cached_property
    def _longest(self) -> tuple[dict[bytes, int], int]:
        """(token bytes -> first id with those bytes, longest token length): for :meth:`greedy`."""
        d: dict[bytes, int] = {}
        for i, b in enumerate(self.token_bytes):
            if b and b not in d:
                d[b] = i
        return d, max((len(b) for b in d), default=1)

    def special_token(self, text: str) -> int | None:
        """Id of the single control / user-defined token whose text is ``text``, if any; for
        ``<[N]>`` (llama.cpp's GBNF reference to token id N), N when it is a token of this
        vocabulary other than an end-of-generation token (the grammar ends by completing,
        not by consuming one)."""
        i = self.special_ids.get(text)
        if i is None and text.startswith("<[") and text.endswith("]>") and text[2:-2].isdigit():
            n = int(text[2:-2])
            if n < self.n_tokens and n not in self.eog_ids:
                return n
        return i

    # ------------------------------------------------------------------ tokenization
    def tokenize(self, text: str | bytes, *, fallback: bool = True) -> list[int]:
        """Token ids whose bytes concatenate to exactly ``text`` (no BOS, no special parsing).

        SPM tokenizers that add a leading space are corrected: the spurious space is removed
        by re-spelling the first token's remaining bytes with existing tokens.  SPM also
        conflates a literal ``▁`` with a space; where llama.cpp's tokenization does not
        reproduce ``text`` byte for byte, ``fallback=True`` spells it greedily with
        existing tokens instead (``fallback=False`` raises VocabError).
        """
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if not data:
            return []
        llm = self._require_llama()
        ids = list(llm.tokenize(data, add_bos=False, special=False))
        got = b"".join(self.token_bytes[i] for i in ids)
        if got == data:
            return ids
        if got == b" " + data and ids:
            head = self.token_bytes[ids[0]][1:]
            return self.greedy(head) + ids[1:]
        if fallback:
            return self.greedy(data)
        raise VocabError(f"tokenizer round trip failed for {data[:40]!r}: got {got[:40]!r}")

    def greedy(self, data: bytes) -> list[int]:
        """Spell ``data`` with the longest matching tokens (always possible when every byte
        has a token); raises VocabError naming the first byte that cannot be spelled."""
        table = self._longest
        out: list[int] = []
        i = 0
        maxlen = table[1]
        while i < len(data):
            for L in range(min(maxlen, len(data) - i), 0, -1):
                tid = table[0].get(data[i:i + L])
                if tid is not None:
                    out.append(tid)
                    i += L
                    break
            else:
                raise VocabError(f"byte 0x{data[i]:02x} at offset {i} has no token in vocabulary {self.name}")
        return out

    def decode(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.token_bytes[i] for i in ids)

    def _require_llama(self) -> Any:
        if self._llama is None:
            raise VocabError("this Vocab was not loaded from llama.cpp, so it cannot tokenize")
        try:
            self._llama.tokenize  # noqa: B018 - a weak proxy (as_vocab) raises once the model is freed
        except ReferenceError:
            raise VocabError(f"vocabulary {self.name}: the llama_cpp.Llama it was read from has been "
                             "freed, so it cannot tokenize; keep the model alive while generating") from None
        return self._llama

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_llama(cls, llm: Any, name: str = "") -> "Vocab":
        """Read the vocabulary of a loaded ``llama_cpp.Llama`` (full model or ``vocab_only``)."""
        import llama_cpp

        try:
            vocab = llm._model.vocab
        except AttributeError as e:  # pragma: no cover - depends on llama-cpp-python version
            raise VocabError("unsupported llama-cpp-python version: Llama._model.vocab missing") from e
        n = int(llama_cpp.llama_vocab_n_tokens(vocab))
        buf = ctypes.create_string_buffer(512)
        toks: list[bytes] = []
        attrs = np.zeros(n, dtype=np.int32)
        eog: set[int] = set()
        special: dict[str, int] = {}
        for i in range(n):
            a = int(llama_cpp.llama_vocab_get_attr(vocab, i))
            attrs[i] = a
            if llama_cpp.llama_vocab_is_eog(vocab, i):
                eog.add(i)
            # an end-of-generation token never spells text, even one a GGUF marks as a
            # user-defined token: masks allow it only where the output may end
            if a & (_ATTR_CONTROL | _ATTR_UNKNOWN | _ATTR_UNUSED) or a == 0 or i in eog:
                if a & _ATTR_CONTROL:
                    txt = llama_cpp.llama_vocab_get_text(vocab, i)
                    if txt:
                        special.setdefault(txt.decode("utf-8", "replace"), i)
                toks.append(b"")
                continue
            k = llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, False)
            if k < 0:
                big = ctypes.create_string_buffer(-k)
                k = llama_cpp.llama_token_to_piece(vocab, i, big, len(big), 0, False)
                toks.append(big.raw[:k])
            else:
                toks.append(buf.raw[:k])
            if a & _ATTR_USER:
                txt = llama_cpp.llama_vocab_get_text(vocab, i)
                if txt:
                    special.setdefault(txt.decode("utf-8", "replace"), i)
        vt = int(llama_cpp.llama_vocab_type(vocab))
        return cls(tuple(toks), attrs, frozenset(eog), special, vt, name or str(getattr(llm, "model_path", "")), llm)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> "Vocab":
        """Load a tokenizer from a GGUF file (vocab-only load: no weights are read)."""
        return load_vocab(str(Path(path).resolve()))

    @classmethod
    def from_bytes(cls, tokens: Sequence[bytes], *, eog_ids: Iterable[int] = (),
                   special: dict[str, int] | None = None, name: str = "hand-built") -> "Vocab":
        """A hand-built vocabulary (tests).  ``special`` tokens must have ``b""`` bytes; an
        end-of-generation token's bytes (``b"</s>"``) are dropped: it never spells text."""
        eog = frozenset(eog_ids)
        toks = tuple(b"" if i in eog else bytes(t) for i, t in enumerate(tokens))
        attrs = np.array([_ATTR_CONTROL if not t else _ATTR_NORMAL for t in toks], dtype=np.int32)
        return cls(toks, attrs, eog, dict(special or {}), 0, name)


def _read_llama(llm: Any) -> "Vocab":
    # the remembered Vocab refers to the Llama weakly: a strong reference from the value
    # would keep the key (the model) alive for the life of the process
    return replace(Vocab.from_llama(llm), _llama=weakref.proxy(llm))


_of_llama: "WeakMemo[Any, Vocab]" = WeakMemo(_read_llama)


def as_vocab(tokenizer: Any) -> Vocab:
    """The :class:`Vocab` of ``tokenizer``: a ``Vocab`` (returned as is), a GGUF path, or a
    ``llama_cpp.Llama``.  The vocabulary of a ``Llama`` is read once and remembered in a
    weak-key map (nothing is set on the user's object; it is forgotten with the object);
    objects that cannot be weakly referenced are read again on each call."""
    if isinstance(tokenizer, Vocab):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        return Vocab.from_gguf(tokenizer)
    try:
        weakref.ref(tokenizer)
    except TypeError:  # not weakly referenceable: no caching
        return Vocab.from_llama(tokenizer)
    return _of_llama(tokenizer)


@lru_cache(maxsize=16)
def load_vocab(path: str) -> Vocab:
    if not Path(path).is_file():
        raise VocabError(f"{path}: no such GGUF file")
    try:
        import llama_cpp
    except ImportError as e:  # pragma: no cover
        raise VocabError("llama-cpp-python is required to read GGUF vocabularies") from e
    try:
        llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    except Exception as e:
        raise VocabError(f"{path}: llama.cpp could not load the vocabulary: {e}") from e
    return Vocab.from_llama(llm, name=Path(path).name)

