"""High-level generation with llama-cpp-python under a compiled grammar.

:func:`generate` runs ``create_completion`` (or ``create_chat_completion`` with
``messages=``) with a :class:`~decoding.runtime.processor.GrammarLogitsProcessor`, surfaces any
error that happened inside the processor, and reports whether the structure is complete.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from decoding.backends.dfa.index import CompiledGrammar
from decoding.runtime.processor import GrammarLogitsProcessor

__all__ = ["Generation", "generate"]


@dataclass(frozen=True)
class Generation:
    text: str
    complete: bool  # the output is a complete sentence of the grammar
    finish_reason: str  # "stop" (end-of-generation) or "length" (max_tokens)
    n_tokens: int
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.n_tokens / self.seconds if self.seconds > 0 else 0.0


def generate(llm: Any, prompt: str | None, compiled: CompiledGrammar, *, messages: list | None = None,
             max_tokens: int = 256, temperature: float = 0.7, seed: int | None = None,
             budget: bool = True, **kw: Any) -> Generation:
    """Generate under ``compiled``.  Raises :class:`~decoding.errors.ProcessorError` if the
    constraint failed inside llama-cpp-python (where exceptions would otherwise vanish).

    ``budget=True`` (default) closes the structure within ``max_tokens``: it is never cut off."""
    from llama_cpp import LogitsProcessorList

    proc = GrammarLogitsProcessor(compiled, max_tokens=max_tokens if budget else None)
    t0 = time.perf_counter()
    if messages is not None:
        out = llm.create_chat_completion(messages=messages, logits_processor=LogitsProcessorList([proc]),
                                         max_tokens=max_tokens, temperature=temperature, seed=seed, **kw)
        text = out["choices"][0]["message"]["content"] or ""
    else:
        out = llm.create_completion(prompt, logits_processor=LogitsProcessorList([proc]),
                                    max_tokens=max_tokens, temperature=temperature, seed=seed, **kw)
        text = out["choices"][0]["text"]
    dt = time.perf_counter() - t0
    proc.raise_if_failed()
    reason = out["choices"][0].get("finish_reason") or "stop"
    n = int(out.get("usage", {}).get("completion_tokens", 0))
    if reason == "stop":
        complete = proc.matcher.is_accepting()
    else:  # cut at max_tokens: the processor never saw the last token, so check the text
        complete = not compiled.special_token_ids and compiled.accepts(text.encode("utf-8"))
    return Generation(text, complete, reason, n, dt)
