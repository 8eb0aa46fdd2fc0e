"""guarded-decoding: constrained decoding for llama.cpp.

Quick start::

    from decoding import compile_json_schema, generate
    from decoding.models import load_model

    llm = load_model("smollm2")
    cg = compile_json_schema(schema, llm)
    out = generate(llm, "Weather in Beijing tomorrow?", cg)

See README.md for the architecture and the guarantees.

The runtime names below are imported on first access (module ``__getattr__``), so
``import decoding.guard`` and the pure-Python front-ends work without the C extension
``decoding._native``; only the error classes are imported eagerly.
"""

import importlib as _importlib
from typing import Any as _Any

from decoding.errors import (ArtifactError, DecodingError, DTDError, GBNFError, GrammarError, LimitError,
                             ProcessorError, SchemaError, VocabError)

__version__ = "0.1.0"

# public name -> module that defines it; imported lazily by __getattr__
_LAZY = {
    "as_vocab": "decoding.compiler",
    "compile_ir": "decoding.compiler",
    "compile_json_schema": "decoding.compiler",
    "Generation": "decoding.runtime.generate",
    "generate": "decoding.runtime.generate",
    "CompiledGrammar": "decoding.backends.dfa.index",
    "compile_grammar": "decoding.backends.dfa.index",
    "Matcher": "decoding.runtime.matcher",
    "GrammarLogitsProcessor": "decoding.runtime.processor",
    "Vocab": "decoding.vocab",
}

__all__ = [
    "as_vocab", "compile_ir", "compile_json_schema", "compile_grammar", "CompiledGrammar", "Matcher",
    "GrammarLogitsProcessor", "Generation", "generate", "Vocab",
    "DecodingError", "GrammarError", "SchemaError", "DTDError", "GBNFError", "LimitError", "VocabError",
    "ArtifactError", "ProcessorError", "__version__",
]


def __getattr__(name: str) -> _Any:
    """Import a runtime name on first access and cache it in the module namespace."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'decoding' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
