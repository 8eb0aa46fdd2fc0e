"""llama.cpp's own verdict on GBNF text: does it parse, and does it accept a string?

llama-cpp-python's ``LlamaGrammar`` only stores the text; a grammar llama.cpp cannot
parse becomes a NULL sampler, i.e. silently no constraint.  :func:`check_gbnf` calls
``llama_sampler_init_grammar`` directly and raises :class:`GBNFError` (with llama.cpp's
reason, line and column) when it returns NULL.

:class:`LlamaGrammarEngine` drives llama.cpp's grammar sampler token by token: each
token must survive ``llama_sampler_apply`` (its logit is not set to -inf) before it is
``llama_sampler_accept``-ed, and at the end the EOS token must be allowed.  A token the
sampler rejects is never accepted (llama.cpp would throw across the C API).

This module calls native code; front-ends never import it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from decoding.errors import GBNFError, UsageError, VocabError

__all__ = ["DEFAULT_VOCAB", "load_vocab_model", "check_gbnf", "LlamaGrammarEngine",
           "llama_accepts"]

DEFAULT_VOCAB = (Path(__file__).resolve().parents[3] / ".." / "shared" / "corpora" / "vocab"
                 / "ggml-vocab-llama-bpe.gguf")


@functools.lru_cache(maxsize=8)
def _load(path: str):
    import llama_cpp
    if not Path(path).is_file():
        raise VocabError(f"{path}: vocabulary GGUF not found")
    with _captured_stderr():
        return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


def load_vocab_model(path: str | os.PathLike | None = None):
    """A cached vocab-only ``llama_cpp.Llama`` (default: the Llama-3 BPE vocabulary)."""
    return _load(str(Path(path or DEFAULT_VOCAB).resolve()))


def _vocab_ptr(llm):
    try:
        return llm._model.vocab
    except AttributeError as e:  # pragma: no cover - depends on llama-cpp-python internals
        raise VocabError("cannot reach the llama_vocab of this Llama object "
                         "(llama-cpp-python >= 0.3.36 expected)") from e


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """Capture what native code writes to file descriptor 2 and llama.cpp's log."""
    import llama_cpp
    from llama_cpp import _logger
    out: list[str] = []
    logs: list[str] = []

    @llama_cpp.llama_log_callback
    def cb(level, text, user_data):  # noqa: ARG001
        logs.append(text.decode("utf-8", "replace"))

    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        llama_cpp.llama_log_set(cb, ctypes.c_void_p(0))
        try:
            yield out
        finally:
            llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode("utf-8", "replace"))
            out.extend(logs)


def _locate(text: str, captured: str) -> tuple[str, int | None, int | None]:
    """llama.cpp's reason and the 1-based line/column it points at, if any."""
    marker = "error parsing grammar: "
    i = captured.find(marker)
    j = captured.rfind("\n\n" + text) if i >= 0 else -1
    if j < i + len(marker):
        for line in captured.splitlines():
            if "grammar" in line and ("unsupported" in line or "undefined" in line
                                      or "does not contain" in line):
                return line.strip(), None, None
        return (captured.strip().splitlines() or ["llama.cpp rejected the grammar"])[-1], None, None
    what = captured[i + len(marker):j]
    # messages look like "expecting X at <rest of the source>"
    for k in (k.start() for k in re.finditer(" at ", what + " ")):
        rest = what[k + 4:]
        if text.endswith(rest):
            off = len(text) - len(rest)
            line = text.count("\n", 0, off) + 1
            col = off - (text.rfind("\n", 0, off) + 1) + 1
            return what[:k], line, col
    return what, None, None


def check_gbnf(text: str, *, llm=None, root: str = "root") -> None:
    """Raise :class:`GBNFError` unless llama.cpp's parser accepts ``text``.

    ``llm``: a ``llama_cpp.Llama`` (vocab-only is enough) whose vocabulary resolves
    token references; default :func:`load_vocab_model`.
    """
    import llama_cpp
    llama_cpp.llama_sampler_free(_init_sampler(text, llm or load_vocab_model(), root))


def _init_sampler(text: str, llm, root: str):
    """A new grammar sampler for ``text``, or GBNFError with llama.cpp's reason."""
    import llama_cpp
    with _captured_stderr() as cap:
        smpl = llama_cpp.llama_sampler_init_grammar(_vocab_ptr(llm), text.encode("utf-8"),
                                                    root.encode("utf-8"))
    if smpl:
        return smpl
    reason, line, col = _locate(text, "".join(cap))
    raise GBNFError(f"llama.cpp rejects the grammar: {reason}", line, col)


class LlamaGrammarEngine:
    """llama.cpp's grammar sampler as a token-level acceptor.

    Raises :class:`GBNFError` at construction if llama.cpp cannot parse ``text``.
    """

    def __init__(self, text: str, *, llm=None, root: str = "root") -> None:
        import llama_cpp
        self._lib = llama_cpp
        self.llm = llm or load_vocab_model()
        self.text, self.root = text, root
        self._smpl = None
        self._smpl = _init_sampler(text, self.llm, root)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._arr = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, llama_cpp.llama_token_data_p), size=1, selected=-1,
            sorted=False)

    def reset(self) -> None:
        """Back to the start of the grammar (``llama_sampler_reset``)."""
        self._lib.llama_sampler_reset(self._smpl)

    def __del__(self) -> None:
        if getattr(self, "_smpl", None):
            self._lib.llama_sampler_free(self._smpl)
            self._smpl = None

    def allows(self, token: int) -> bool:
        """Would the sampler keep ``token`` now?  (Does not advance.)"""
        self._one[0].id = int(token)
        self._one[0].logit = 0.0
        self._one[0].p = 0.0
        self._arr.size = 1
        self._arr.selected = -1
        self._arr.data = ctypes.cast(self._one, self._lib.llama_token_data_p)
        self._lib.llama_sampler_apply(self._smpl, ctypes.byref(self._arr))
        return not math.isinf(self._one[0].logit)

    def accept(self, token: int) -> None:
        """Advance by ``token``; it must be allowed (checked)."""
        if not self.allows(token):
            raise GBNFError(f"token {token} is not allowed by the grammar here")
        self._lib.llama_sampler_accept(self._smpl, int(token))

    def accepts_tokens(self, tokens: Sequence[int], *, complete: bool = True) -> bool:
        """Verdict on a whole token sequence from a fresh state; with ``complete`` the
        EOS token must be allowed at the end (the grammar is in an accepting state)."""
        self.reset()
        for t in tokens:
            if not self.allows(t):
                return False
            self._lib.llama_sampler_accept(self._smpl, int(t))
        return self.allows(self.llm.token_eos()) if complete else True

    def tokenize(self, data: bytes) -> list[int]:
        """Token ids for ``data`` (no BOS, special texts not parsed)."""
        return list(self.llm.tokenize(data, add_bos=False, special=False))

    def accepts(self, data: bytes) -> bool:
        """llama.cpp's verdict on the byte string ``data`` (tokenized with ``llm``).

        llama.cpp stops decoding at a NUL byte, so strings containing one are refused
        with :class:`~decoding.errors.UsageError` (a ``ValueError``) rather than given a
        meaningless verdict."""
        if b"\x00" in data:
            raise UsageError(f"LlamaGrammarEngine.accepts: data has a NUL byte at offset "
                             f"{data.index(0)}; llama.cpp's grammar engine cannot see NUL bytes")
        return self.accepts_tokens(self.tokenize(data))


def llama_accepts(text: str, data: bytes, *, llm=None, root: str = "root") -> bool:
    """One-shot llama.cpp verdict: does GBNF ``text`` accept the byte string ``data``?"""
    return LlamaGrammarEngine(text, llm=llm, root=root).accepts(data)
