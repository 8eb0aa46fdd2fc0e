"""guarded-decoding: constrained decoding for llama.cpp.

Quick start::

    from decoding import compile_json_schema, generate
    from decoding.models import load_model

    llm = load_model("smollm2")
    cg = compile_json_schema(schema, llm)
    out = generate(llm, "Weather in Beijing tomorrow?", cg)

See README.md for the architecture and the guarantees.
"""

from decoding.compiler import as_vocab, compile_ir, compile_json_schema
from decoding.errors import (ArtifactError, DecodingError, DTDError, GBNFError, GrammarError, LimitError,
                     ProcessorError, SchemaError, VocabError)
from decoding.runtime.generate import Generation, generate
from decoding.backends.dfa.index import CompiledGrammar, compile_grammar
from decoding.runtime.matcher import Matcher
from decoding.runtime.processor import GrammarLogitsProcessor
from decoding.vocab import Vocab

__version__ = "0.1.0"

__all__ = [
    "as_vocab", "compile_ir", "compile_json_schema", "compile_grammar", "CompiledGrammar", "Matcher",
    "GrammarLogitsProcessor", "Generation", "generate", "Vocab",
    "DecodingError", "GrammarError", "SchemaError", "DTDError", "GBNFError", "LimitError", "VocabError",
    "ArtifactError", "ProcessorError", "__version__",
]
