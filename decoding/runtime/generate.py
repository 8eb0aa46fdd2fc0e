"""High-level generation with llama-cpp-python under a compiled grammar.

:func:`generate` runs ``create_completion`` (``prompt=``) or ``create_chat_completion``
(``messages=``) with a :class:`~decoding.runtime.processor.GrammarLogitsProcessor`, surfaces
any error that happened inside the processor, and reports whether the structure is
complete.  :class:`Generation` is the one result type of every generation driver
(:func:`generate`, :func:`decoding.runtime.fastforward.generate_fast`,
:func:`decoding.runtime.llama_grammar.generate_with_gbnf`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from decoding.backends.contract import CompiledGrammar
from decoding.errors import UsageError
from decoding.runtime.processor import GrammarLogitsProcessor

__all__ = ["Generation", "generate", "check_prompt"]


@dataclass(frozen=True)
class Generation:
    """The result of a generation.

    ``complete``: the output is a complete sentence of the grammar; ``finish_reason``:
    ``"stop"`` (end-of-generation) or ``"length"`` (``max_tokens``); ``seconds``: generation
    time.  Drivers that see the tokens also give ``tokens`` (the generated ids),
    ``n_forced`` (tokens appended by fast-forward, not sampled), ``prompt_seconds`` and
    ``mask_seconds`` (time spent computing and applying masks)."""

    text: str
    complete: bool
    finish_reason: str
    n_tokens: int
    seconds: float
    tokens: tuple[int, ...] | None = None
    n_forced: int = 0
    prompt_seconds: float = 0.0
    mask_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.n_tokens / self.seconds if self.seconds > 0 else 0.0


def check_prompt(where: str, prompt: str | None, messages: list | None) -> None:
    """Exactly one of ``prompt`` and ``messages`` (a UsageError naming ``where`` otherwise)."""
    if (prompt is None) == (messages is None):
        raise UsageError(f"{where}: give exactly one of prompt= (plain completion) or messages= "
                         "(chat template)")


def generate(llm: Any, compiled: CompiledGrammar, *, prompt: str | None = None, messages: list | None = None,
             max_tokens: int = 256, temperature: float = 0.7, seed: int | None = None,
             budget: bool = True, copy_from: str | None = None, **kw: Any) -> Generation:
    """Generate under ``compiled`` from ``prompt`` or chat ``messages`` (exactly one).
    Raises :class:`~decoding.errors.ProcessorError` if the constraint failed inside
    llama-cpp-python (where exceptions would otherwise vanish).

    ``budget=True`` (default) closes the structure within ``max_tokens``: it is never cut
    off.  ``copy_from`` (the user's request) turns on the copy bias
    (:mod:`decoding.runtime.copy_bias`).  Other keyword arguments go to ``create_completion``/``create_chat_completion``."""
    from llama_cpp import LogitsProcessorList

    check_prompt("generate", prompt, messages)
    proc = GrammarLogitsProcessor(compiled, max_tokens=max_tokens if budget else None, copy_from=copy_from)
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
