"""guarded-decoding: constrained decoding for llama.cpp.

Quick start::

    from decoding import Compiler, generate
    from decoding.models import load_model

    llm = load_model("smollm2")
    cg = Compiler(llm).compile_json_schema(schema)
    out = generate(llm, cg, messages=[{"role": "user", "content": "Weather in Beijing tomorrow?"}])

See README.md for the architecture and the guarantees.

The runtime names below are imported on first access (module ``__getattr__``), so
``import decoding.guard`` and the pure-Python front-ends work without the C extension
``decoding._native``; only the error classes are imported eagerly.
"""

import importlib as _importlib
from typing import Any as _Any

from decoding.errors import (ArtifactError, CanonicalizeError, DecodingError, DTDError, GBNFError, GrammarError,
                             LimitError, PatternError, ProcessorError, SchemaError, UnsatisfiableSchemaError,
                             UsageError, VocabError)

__version__ = "0.1.0"

# public name -> module that defines it; imported lazily by __getattr__
_LAZY = {
    "Compiler": "decoding.compiler",
    "compile_json_schema": "decoding.compiler",
    "CompiledGrammar": "decoding.backends.contract",
    "Matcher": "decoding.runtime.matcher",
    "BudgetMatcher": "decoding.runtime.budget",
    "GrammarLogitsProcessor": "decoding.runtime.processor",
    "Generation": "decoding.runtime.generate",
    "generate": "decoding.runtime.generate",
    "Vocab": "decoding.vocab",
    "as_vocab": "decoding.vocab",
    "canonical_json": "decoding.canonical",
    "canonical_xml": "decoding.canonical",
}

__all__ = [
    # compile
    "Compiler", "compile_json_schema", "CompiledGrammar", "Vocab", "as_vocab",
    # run
    "Matcher", "BudgetMatcher", "GrammarLogitsProcessor", "generate", "Generation",
    # canonical forms
    "canonical_json", "canonical_xml",
    # errors
    "DecodingError", "GrammarError", "SchemaError", "UnsatisfiableSchemaError", "DTDError", "GBNFError",
    "PatternError", "LimitError", "VocabError", "ArtifactError", "ProcessorError", "UsageError", "CanonicalizeError",
    "__version__",
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
