"""GBNF -> llama-cpp-python: a checked ``LlamaGrammar`` and a generation path using it.

``to_llama_grammar`` accepts a :class:`~decoding.ir.Grammar` (emitted with
:func:`~decoding.backends.gbnf.emit.to_gbnf`) or GBNF text, and verifies with llama.cpp's own
parser (:func:`~decoding.backends.gbnf.check.check_gbnf`) before returning, so a grammar that
llama.cpp would silently drop raises :class:`~decoding.errors.GBNFError` instead.
Special tokens become ``<[id]>`` references when the model's vocabulary has the text as
a single token.
"""

from __future__ import annotations

from typing import Any

from decoding.backends.gbnf.check import check_gbnf, load_vocab_model
from decoding.backends.gbnf.emit import to_gbnf
from decoding.ir import Grammar

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


def generate_with_gbnf(llm, prompt: str, grammar: Grammar | str, **kw: Any) -> str:
    """Complete ``prompt`` under ``grammar`` with llama.cpp's native grammar sampler
    (``create_completion(grammar=...)``); returns the generated text.  Keyword
    arguments go to ``create_completion`` (default ``max_tokens=256``, ``temperature=0.7``)."""
    kw.setdefault("max_tokens", 256)
    kw.setdefault("temperature", 0.7)
    out = llm.create_completion(prompt, grammar=to_llama_grammar(grammar, llm=llm), **kw)
    return out["choices"][0]["text"]
