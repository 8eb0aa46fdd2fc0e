"""Peer engines for the harness: llguidance and outlines, as llama-cpp-python logits processors.

Both peers run inside the same ``create_completion`` call as the project's ``automaton``
mode (same prompt, same greedy sampling, same prefix caching), so only the mask differs.

- ``llguidance``: an :class:`llguidance.LLMatcher` over an ``LLTokenizer`` built from the
  model's llama.cpp vocabulary (``llguidance.llamacpp.lltokenizer_from_vocab``, end tokens =
  the model's end-of-generation ids).  JSON families: ``LLMatcher.grammar_from_json_schema``
  of the family's schema.  XML families: the project's GBNF of the family grammar
  (``decoding.backends.gbnf.emit.to_gbnf``) converted by llguidance's own ``gbnf_to_lark`` (with one
  escape fixed, see :meth:`LLGuidancePeer.grammar`).
- ``outlines``: outlines' llama.cpp model (``outlines.from_llamacpp`` wrapping the loaded
  ``Llama``) and its default JSON-schema backend (``outlines_core``).  JSON families only:
  outlines' own engine takes JSON Schema and regex; its CFG output type runs on llguidance
  (already measured as the ``llguidance`` mode) and the harness has no grammar-to-regex
  converter, so XML families are reported unsupported (:func:`outlines_unsupported`).

Invariants
- The tokenizer / model wrapper is built once per model and not counted as grammar
  compile time (like ``as_vocab`` for the automaton); the per-family grammar compile is.
- A processor object serves one generation at a time: the harness resets it before each.
- The llguidance processor advances on ``input_ids[-1]`` exactly like
  :class:`decoding.runtime.processor.GrammarLogitsProcessor`; a matcher error is recorded, only
  end-of-generation tokens are allowed from then on, and :meth:`raise_if_failed` re-raises.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from typing import Any

import numpy as np

from decoding import _native
from decoding.compiler import as_vocab
from decoding.errors import ProcessorError
from decoding.backends.gbnf.emit import to_gbnf

from evals.harness.families import Family

__all__ = ["peer_available", "outlines_unsupported", "LLGuidancePeer", "OutlinesPeer", "LLGuidanceProcessor"]

_PACKAGES = {"llguidance": ("llguidance",), "outlines": ("outlines", "outlines_core", "numba")}


def peer_available(mode: str) -> str | None:
    """``None`` when the peer can run here, else the reason it cannot."""
    missing = [p for p in _PACKAGES[mode] if importlib.util.find_spec(p) is None]
    if missing:
        return (f"unavailable: python package(s) {', '.join(missing)} not installed "
                f"(optional extra: pip install guarded-decoding[peers])")
    return None


def outlines_unsupported(fam: Family) -> str | None:
    """Why outlines cannot run ``fam`` (XML families), or ``None``."""
    if fam.kind == "xml":
        return ("unsupported for XML: outlines' own engine (outlines_core) takes JSON Schema or regex; its CFG "
                "output type runs on llguidance (measured as the llguidance mode); no grammar-to-regex converter")
    return None


class LLGuidanceProcessor:
    """llama-cpp-python logits processor filling llguidance's token bitmask."""

    def __init__(self, matcher: Any, n_vocab: int, eog_ids: list[int]) -> None:
        from llguidance.numpy import allocate_token_bitmask

        self.matcher = matcher
        self.bitmask = allocate_token_bitmask(1, n_vocab)
        self.eog_ids = eog_ids
        self.error: str | None = None
        self.seconds = 0.0
        self.calls = 0
        self._last_len = -1
        self._last_tok = -1

    def reset(self) -> None:
        self.matcher.reset()
        self.error = None
        self.seconds = 0.0
        self.calls = 0
        self._last_len = -1
        self._last_tok = -1

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        from llguidance.numpy import fill_next_token_bitmask

        t = time.perf_counter()
        self.calls += 1
        if self.error is None:
            n = len(input_ids)
            if self._last_len >= 0 and n == self._last_len + 1 and \
                    (self._last_len == 0 or int(input_ids[self._last_len - 1]) == self._last_tok):
                tok = int(input_ids[-1])
                if not self.matcher.consume_token(tok):
                    self.error = f"llguidance rejected sampled token {tok}: {self.matcher.get_error()}"
            elif self._last_len >= 0:
                self.matcher.reset()
            self._last_len = n
            self._last_tok = int(input_ids[-1]) if n else -1
        if self.error is None:
            fill_next_token_bitmask(self.matcher, self.bitmask)
            if self.matcher.is_error():
                self.error = f"llguidance matcher error: {self.matcher.get_error()}"
        if self.error is None:
            _native.apply_mask(scores, self.bitmask[0].view(np.uint32))
        else:
            keep = [i for i in self.eog_ids if i < scores.shape[0]]
            saved = scores[keep].copy()
            scores[:] = -np.inf
            scores[keep] = saved
        self.seconds += time.perf_counter() - t
        return scores

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise ProcessorError(self.error)


class LLGuidancePeer:
    """One model's llguidance state: tokenizer (built once) and a processor per family."""

    def __init__(self, llm: Any) -> None:
        import llguidance.llamacpp

        self.llm = llm
        eog = sorted(as_vocab(llm).eog_ids)
        t = time.perf_counter()
        self.tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(llm._model.vocab, eos_token=eog or None)
        self.tokenizer_s = time.perf_counter() - t
        self.eog = eog
        self._procs: dict[str, LLGuidanceProcessor] = {}

    @staticmethod
    def grammar(fam: Family) -> str:
        import llguidance

        if fam.kind == "json":
            return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(fam.schema))
        from llguidance.gbnf_to_lark import gbnf_to_lark

        # gbnf_to_lark shortens GBNF's \U0010FFFF to \U10FFFF, which llguidance's regex syntax
        # rejects; the braced form \x{10FFFF} is accepted
        lark = re.sub(r"\\U([0-9A-Fa-f]{1,8})", r"\\x{\1}", gbnf_to_lark(to_gbnf(fam.grammar())))
        return llguidance.LLMatcher.grammar_from_lark(lark)

    def processor(self, fam: Family) -> tuple[LLGuidanceProcessor, float]:
        """The family's processor (reset) and its compile seconds (0 when cached)."""
        import llguidance

        if fam.name in self._procs:
            p = self._procs[fam.name]
            p.reset()
            return p, 0.0
        t = time.perf_counter()
        m = llguidance.LLMatcher(self.tokenizer, self.grammar(fam), log_level=0)
        if m.is_error():
            raise ProcessorError(f"llguidance cannot compile the {fam.name} grammar: {m.get_error()}")
        p = LLGuidanceProcessor(m, self.llm.n_vocab(), self.eog)
        self._procs[fam.name] = p
        return p, time.perf_counter() - t


class _TimedOutlines:
    """Wraps an outlines logits processor: per-generation reset and time inside it."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.seconds = 0.0
        self.calls = 0

    def reset(self) -> None:
        self.proc.reset()
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        t = time.perf_counter()
        out = self.proc(input_ids, scores)
        if out is not scores:  # llama-cpp-python uses the returned array; keep its buffer in sync
            scores[:] = out
        self.seconds += time.perf_counter() - t
        self.calls += 1
        return scores

    def raise_if_failed(self) -> None:
        pass  # outlines raises inside the processor; llama-cpp-python propagates it


class OutlinesPeer:
    """One model's outlines state: the LlamaCpp wrapper (built once) and a processor per family."""

    def __init__(self, llm: Any) -> None:
        import outlines

        t = time.perf_counter()
        self.model = outlines.from_llamacpp(llm)
        self.wrap_s = time.perf_counter() - t
        self._procs: dict[str, _TimedOutlines] = {}

    def processor(self, fam: Family) -> tuple[_TimedOutlines, float]:
        from outlines.backends import get_json_schema_logits_processor

        why = outlines_unsupported(fam)
        if why:
            raise ValueError(f"outlines, family {fam.name}: {why}")
        if fam.name in self._procs:
            p = self._procs[fam.name]
            p.reset()
            return p, 0.0
        t = time.perf_counter()
        p = _TimedOutlines(get_json_schema_logits_processor("outlines_core", self.model, json.dumps(fam.schema)))
        self._procs[fam.name] = p
        return p, time.perf_counter() - t
