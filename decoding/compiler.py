"""Front door: compile a JSON Schema / IR grammar for a tokenizer, in one call.

``tokenizer`` may be a :class:`~decoding.vocab.Vocab`, a ``llama_cpp.Llama`` or a GGUF path.
"""

from __future__ import annotations

import json
import os
from typing import Any

from decoding.backends.dfa.index import CompiledGrammar, compile_grammar
from decoding.ir import Grammar
from decoding.vocab import Vocab

__all__ = ["as_vocab", "compile_json_schema", "compile_ir"]


def as_vocab(tokenizer: Any) -> Vocab:
    if isinstance(tokenizer, Vocab):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        return Vocab.from_gguf(tokenizer)
    cached = getattr(tokenizer, "_guarded_decoding_vocab", None)
    if cached is None:
        cached = Vocab.from_llama(tokenizer)
        try:
            tokenizer._guarded_decoding_vocab = cached
        except AttributeError:  # pragma: no cover - objects without __dict__
            pass
    return cached


def compile_ir(grammar: Grammar, tokenizer: Any, **kw: Any) -> CompiledGrammar:
    return compile_grammar(grammar, as_vocab(tokenizer), **kw)


def compile_json_schema(schema: dict | bool | str, tokenizer: Any, *, eager: bool = False,
                        **options: Any) -> CompiledGrammar:
    """Compile a JSON Schema (dict, bool or JSON text) for ``tokenizer``.  ``options`` go to
    :func:`decoding.frontends.jsonschema.compile_schema` (whitespace, max_depth, lenient, ...)."""
    from decoding.frontends.jsonschema import compile_schema

    if isinstance(schema, str):
        schema = json.loads(schema)
    sg = compile_schema(schema, **options)
    return compile_grammar(sg.grammar, as_vocab(tokenizer), eager=eager,
                           meta={"frontend": "json-schema", "options": options,
                                 "dropped": list(getattr(sg, "dropped", ()))})
