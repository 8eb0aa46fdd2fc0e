"""GBNF -> llama-cpp-python: a checked ``LlamaGrammar`` and a generation path using it.

``to_llama_grammar`` accepts a :class:`~decoding.ir.Grammar` (emitted with
:func:`~decoding.backends.gbnf.emit.to_gbnf`) or GBNF text, and verifies with llama.cpp's own
parser (:func:`~decoding.backends.gbnf.check.check_gbnf`) before returning, so a grammar that
llama.cpp would silently drop raises :class:`~decoding.errors.GBNFError` instead.
Special tokens become ``<[id]>`` references when the model's vocabulary has the text as
a single token.
"""

from __future__ import annotations

import time
from typing import Any

from decoding.backends.gbnf.check import check_gbnf, load_vocab_model
from decoding.backends.gbnf.emit import to_gbnf
from decoding.ir import Grammar
from decoding.runtime.generate import Generation, check_prompt

__all__ = ["to_llama_grammar", "special_token_ids", "generate_with_gbnf"]


def special_token_ids(grammar: Grammar, llm) -> dict[str, int]:
    """``Special`` texts of ``grammar`` that ``llm`` spells as exactly one token."""
    out: dict[str, int] = {}
    for text in grammar.specials():
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if len(ids) == 1:
            out[text] = int(ids[0])
    return out


def to_llama_grammar(grammar_or_gbnf: Grammar | str, *, llm=None, root: str = "root"):
    """A ``llama_cpp.LlamaGrammar`` that llama.cpp is known to parse.

    ``llm``: the model (or a vocab-only ``Llama``) used to resolve special tokens and to
    check the text; default: the Llama-3 vocabulary of the shared corpora.
    """
    from llama_cpp import LlamaGrammar
    llm = llm or load_vocab_model()
    if isinstance(grammar_or_gbnf, Grammar):
        text = to_gbnf(grammar_or_gbnf, special_ids=special_token_ids(grammar_or_gbnf, llm))
        root = "root"
    else:
        text = grammar_or_gbnf
    check_gbnf(text, llm=llm, root=root)
    g = LlamaGrammar.from_string(text, verbose=False)
    g._root = root
    return g


def generate_with_gbnf(llm, grammar: Grammar | str, *, prompt: str | None = None, messages: list | None = None,
                       max_tokens: int = 256, temperature: float = 0.7, seed: int | None = None,
                       **kw: Any) -> Generation:
    """Generate from ``prompt`` or chat ``messages`` (exactly one) under ``grammar`` with
    llama.cpp's native grammar sampler (``create_completion(grammar=...)``).  Other keyword
    arguments go to ``create_completion``/``create_chat_completion``.

    ``complete`` is llama.cpp's judgement: its sampler allows end-of-generation only where
    the grammar is complete, so it is ``finish_reason == "stop"`` (unless a ``stop`` string
    ended the generation)."""
    check_prompt("generate_with_gbnf", prompt, messages)
    lg = to_llama_grammar(grammar, llm=llm)
    t0 = time.perf_counter()
    if messages is not None:
        out = llm.create_chat_completion(messages=messages, grammar=lg, max_tokens=max_tokens,
                                         temperature=temperature, seed=seed, **kw)
        text = out["choices"][0]["message"]["content"] or ""
    else:
        out = llm.create_completion(prompt, grammar=lg, max_tokens=max_tokens, temperature=temperature,
                                    seed=seed, **kw)
        text = out["choices"][0]["text"]
    dt = time.perf_counter() - t0
    reason = out["choices"][0].get("finish_reason") or "stop"
    n = int(out.get("usage", {}).get("completion_tokens", 0))
    return Generation(text, reason == "stop" and not kw.get("stop"), reason, n, dt)
