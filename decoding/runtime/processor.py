"""llama-cpp-python adapter: a logits processor that masks every token the grammar forbids.

Use as ``llm.create_completion(..., logits_processor=LogitsProcessorList([proc]))`` (or in
``create_chat_completion``), then call :meth:`GrammarLogitsProcessor.raise_if_failed`, or
use :func:`decoding.generate`, which does both.

How it tracks the generation
- llama-cpp-python calls the processor once per sampled token with ``input_ids`` (prompt
  plus everything sampled so far) and ``scores`` (a float32 view, index = token id, over
  llama.cpp's candidate array: stride 12 bytes).  The processor learns the token sampled
  last time only from ``input_ids[-1]`` of the next call.
- A call whose ``input_ids`` is not the previous one plus one token starts a new
  generation (the matcher resets).
- Errors: llama-cpp-python swallows exceptions raised inside processors.  Ours catches
  everything and records the first error as the matcher's sticky error
  (:attr:`~decoding.runtime.matcher.Matcher.error`), logs it, and from then on allows only
  end-of-generation tokens so the generation stops at once; ``raise_if_failed`` re-raises
  it as :class:`~decoding.errors.ProcessorError`.
- ``max_tokens`` (optional): budget-aware closing; tokens after which the structure can no
  longer be completed within the remaining budget are forbidden.
- ``canonical_forced`` (default False): where the grammar forces the next bytes (a tag name,
  a property name, a closing run: :meth:`~decoding.runtime.matcher.Matcher.forced_bytes`),
  only the first token of the tokenizer's own spelling of those bytes is allowed, so the
  model never reads, in its own context, splits it would not write itself (``<soap:Envelope``
  sampled as ``'<','s','oa','p',':','E','n','velop','e'``), and a forced run costs the tokens
  the tokenizer spells it with (longest match for a hand-built vocabulary).  Off by default:
  on the value-copy benchmark the canonical spelling (``fastforward`` mode) was no better for
  values than the model's own split (docs/evals.md), and ``make demo`` then drops one optional
  field; it saves tokens (SOAP envelope: 112 instead of 120 on SmolLM2).
  Invariant: the narrowed mask is a subset of the grammar's (and the budget's) mask and never
  empty; when that token is not allowed there (a budget cut), the full mask is used.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from decoding import _native
from decoding.backends.contract import CompiledGrammar
from decoding.errors import ProcessorError, VocabError
from decoding.runtime.matcher import Matcher

__all__ = ["GrammarLogitsProcessor"]

log = logging.getLogger("decoding")


class GrammarLogitsProcessor:
    def __init__(self, compiled: CompiledGrammar, *, max_tokens: int | None = None,
                 canonical_forced: bool = False) -> None:
        self.compiled = compiled
        self.canonical_forced = canonical_forced
        self._first_token: dict[bytes, int] = {}  # forced bytes -> first token of their spelling
        if max_tokens is not None:
            from decoding.runtime.budget import BudgetMatcher

            self.matcher: Matcher = BudgetMatcher(compiled, max_tokens)
        else:
            self.matcher = Matcher(compiled)
        self._prompt_len: int | None = None
        self._last_len = -1
        self._last_tok = -1
        self.calls = 0

    @property
    def error(self) -> BaseException | None:
        """The first error of this generation (the matcher's sticky error), or None."""
        return self.matcher.error

    # ------------------------------------------------------------------ llama-cpp-python API
    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.matcher.error is not None:
            self._stop(scores)
            return scores
        try:
            self._sync(input_ids)
            if scores.shape[0] > self.compiled.vocab.n_tokens:
                raise VocabError(f"model has {scores.shape[0]} logits but the grammar was compiled for "
                                 f"a {self.compiled.vocab.n_tokens}-token vocabulary "
                                 f"({self.compiled.vocab.name}); compile it for this model's tokenizer")
            mask = self.matcher.mask()  # an error inside the grammar becomes the sticky error
            if self.matcher.error is not None:
                raise self.matcher.error
            tok = self._canonical_token(mask) if self.canonical_forced else -1
            if tok >= 0:
                keep = scores[tok]
                scores[:] = -np.inf
                scores[tok] = keep
            else:
                _native.apply_mask(scores, mask)
        except BaseException as e:  # noqa: BLE001 - recorded and re-raised by raise_if_failed
            self.matcher.fail(e)
            log.error("guarded-decoding logits processor failed: %r", e)
            self._stop(scores)
        return scores

    def _canonical_token(self, mask: np.ndarray) -> int:
        """The first token of the tokenizer's spelling of the forced bytes, if the mask allows
        it; else -1 (no forced bytes, or a budget cut forbids it)."""
        forced = self.matcher.forced_bytes()
        if not forced:
            return -1
        tok = self._first_token.get(forced)
        if tok is None:
            vocab = self.compiled.vocab  # a hand-built vocabulary has no tokenizer: longest match
            ids = vocab.tokenize(forced) if vocab.can_tokenize else vocab.greedy(forced)
            tok = ids[0] if ids else -1
            if len(self._first_token) >= 4096:
                self._first_token.clear()
            self._first_token[forced] = tok
        if tok >= 0 and (int(mask[tok >> 5]) >> (tok & 31)) & 1:
            return tok
        return -1

    def _stop(self, scores: np.ndarray) -> None:
        """After an error: allow only end-of-generation tokens, so the generation ends now."""
        keep = [t for t in self.compiled.vocab.eog_ids if t < scores.shape[0]]
        saved = scores[keep].copy()
        scores[:] = -np.inf
        if keep:
            scores[keep] = saved

    def _sync(self, input_ids: Any) -> None:
        n = len(input_ids)
        if self._prompt_len is not None and n == self._last_len + 1 and \
                (self._last_len == 0 or int(input_ids[self._last_len - 1]) == self._last_tok):
            tok = int(input_ids[-1])
            if not self.matcher.advance(tok):
                if self.matcher.error is not None:
                    raise self.matcher.error
                raise ProcessorError(
                    f"token {tok} ({self.compiled.vocab.token_bytes[tok]!r}) was sampled although the "
                    f"grammar forbids it in state {self.matcher.state}; another sampler or processor "
                    "overrode the mask")
        else:
            self.matcher.reset()
            self._prompt_len = n
        self._last_len = n
        self._last_tok = int(input_ids[-1]) if n else -1

    # ------------------------------------------------------------------ caller API
    def reset(self) -> None:
        """Forget the current generation (the next call starts a new one) and any error."""
        self.matcher.reset()
        self._prompt_len = None
        self._last_len = -1
        self._last_tok = -1

    def raise_if_failed(self) -> None:
        """Raise :class:`~decoding.errors.ProcessorError` if the constraint failed."""
        self.matcher.raise_if_failed()
