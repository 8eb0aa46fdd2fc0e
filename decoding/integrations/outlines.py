"""outlines 1.x integration: ``outlines.from_llamacpp(llm)`` models constrained by this engine.

Usage::

    import outlines
    from decoding.integrations.outlines import Generator

    model = outlines.from_llamacpp(llm)                 # a llama_cpp.Llama
    gen = Generator(model, MyPydanticModel)             # or a dict schema, outlines.types.Regex,
    text = gen("Describe a user", max_tokens=64)        #   outlines.types.CFG (GBNF text), int...

Extension point used: ``outlines.Generator(model, processor=...)`` with a custom
:class:`outlines.processors.OutlinesLogitsProcessor` subclass (:class:`DecodingLogitsProcessor`).
It is the one outlines documents for supplying an externally built logits processor to a
steerable model, and ``LlamaCpp.generate`` hands it to llama-cpp-python unchanged (wrapped
in a ``LogitsProcessorList``).  The ``backend=`` argument is not an extension point in
outlines 1.3: ``outlines.backends._get_backend`` is a closed ``if`` chain over the names
"outlines_core", "xgrammar" and "llguidance" (anything else is ``ValueError``), so adding a
backend would mean monkeypatching outlines' private function.

Output types (resolved with outlines' own ``python_types_to_terms``, so the same Python
types mean the same thing as with outlines' backends):

- a JSON Schema (``dict`` instance, pydantic model, dataclass, TypedDict,
  ``outlines.types.JsonSchema`` including a JSON string) -> ``Compiler.compile_json_schema``;
  the ``dict`` *type* (outlines: any JSON object via its Lark JSON grammar) -> the schema
  ``{"type": "object"}``;
- ``outlines.types.CFG(text)`` -> ``Compiler.compile_gbnf``: the text must be llama.cpp GBNF
  (a Lark grammar is refused with :class:`~decoding.errors.GBNFError`);
- every other term (``Regex``, ``int``, ``Literal``, ``str`` instances, DSL combinations)
  -> outlines' ``to_regex`` -> this project's regex engine, anchored (whole output), each
  character spelled as its UTF-8 bytes -> ``Compiler.compile_ir``.

Errors surface: compile errors raise from :func:`logits_processor` / :class:`Generator`;
a failure inside the processor (which llama-cpp-python would swallow in its ctypes
callback) stops the generation at once and :class:`Generator` re-raises it as
:class:`~decoding.errors.ProcessorError` after the call (with a bare
``outlines.Generator(model, processor=p)``, call ``p.raise_if_failed()`` yourself).
Unsupported settings (``whitespace_pattern``, batches, a non-llama.cpp model) are
:class:`~decoding.errors.UsageError`.  Never a silent unconstrained output.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

try:
    import outlines as _outlines
    from outlines.models.llamacpp import LlamaCpp
    from outlines.processors import OutlinesLogitsProcessor
    from outlines.types.dsl import CFG, JsonSchema, python_types_to_terms, to_regex
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("decoding.integrations.outlines needs outlines>=1.3: "
                      "pip install 'guarded-decoding[integrations]'") from e

from decoding.backends.contract import CompiledGrammar
from decoding.compiler import Compiler
from decoding.errors import UsageError
from decoding.ir import Grammar, char_class
from decoding.runtime.processor import GrammarLogitsProcessor
from decoding.text.regex import regex_ir
from decoding.weakmemo import WeakMemo

__all__ = ["DecodingLogitsProcessor", "Generator", "compile_output_type", "logits_processor"]

#: one Compiler (hence one vocabulary extraction and one in-memory cache) per llama_cpp.Llama
_compilers: WeakMemo[Any, Compiler] = WeakMemo(Compiler)


def _llama(model: Any) -> Any:
    if not isinstance(model, LlamaCpp):
        raise UsageError(f"decoding.integrations.outlines: expected an outlines LlamaCpp model "
                         f"(outlines.from_llamacpp(llm)), got {type(model).__name__}")
    return model.model


def _utf8_char(ranges: tuple[tuple[int, int], ...]) -> Any:
    """Regex encoder: a character is its UTF-8 bytes (no escaping: the output is raw text)."""
    return char_class(ranges)


def compile_output_type(output_type: Any, compiler: Compiler) -> CompiledGrammar:
    """The compiled grammar for an outlines output type (see the module docstring)."""
    if output_type is None:
        raise UsageError("decoding.integrations.outlines: output_type is None (unconstrained); "
                         "use outlines.Generator(model) directly for free text")
    if isinstance(output_type, dict):
        return compiler.compile_json_schema(output_type)
    if output_type is dict:
        return compiler.compile_json_schema({"type": "object"})
    term = python_types_to_terms(output_type)
    if isinstance(term, JsonSchema):
        if term.whitespace_pattern is not None:
            raise UsageError(f"decoding.integrations.outlines: JsonSchema whitespace_pattern="
                             f"{term.whitespace_pattern!r} is not supported (the JSON grammar fixes "
                             "its own whitespace); leave it None")
        return compiler.compile_json_schema(json.loads(term.schema))
    if isinstance(term, CFG):
        return compiler.compile_gbnf(term.definition)
    return compiler.compile_ir(Grammar.single(regex_ir(to_regex(term), _utf8_char, anchored=True)))


class DecodingLogitsProcessor(OutlinesLogitsProcessor):
    """An outlines logits processor (numpy tensors, llama.cpp) that masks with this engine.

    Wraps one :class:`~decoding.GrammarLogitsProcessor`; batch size 1 only (outlines'
    LlamaCpp model has no batch generation).  ``max_tokens``: budget-aware closing, as in
    :class:`~decoding.GrammarLogitsProcessor`; pass the generation's ``max_tokens``.
    """

    def __init__(self, compiled: CompiledGrammar, *, max_tokens: int | None = None) -> None:
        super().__init__("numpy")
        self.compiled = compiled
        self.processor = GrammarLogitsProcessor(compiled, max_tokens=max_tokens)

    @property
    def error(self) -> BaseException | None:
        """The first error of the current generation, or None."""
        return self.processor.error

    def reset(self) -> None:
        """Start a new generation (outlines calls this before each one)."""
        self.processor.reset()

    def process_logits(self, input_ids: Any, logits: Any) -> Any:
        if logits.shape[0] != 1 and self.processor.error is None:
            self.processor.matcher.fail(UsageError(
                f"decoding.integrations.outlines: batch of {logits.shape[0]} sequences; "
                "only one sequence per generation is supported"))
        for row in range(logits.shape[0]):
            self.processor(input_ids[row], logits[row])  # in place; errors are recorded
        return logits

    def raise_if_failed(self) -> None:
        """Raise :class:`~decoding.errors.ProcessorError` if the last generation failed."""
        self.processor.raise_if_failed()


def logits_processor(model: Any, output_type: Any, *, compiler: Compiler | None = None,
                     max_tokens: int | None = None) -> DecodingLogitsProcessor:
    """A processor for ``outlines.Generator(model, processor=...)``; compile errors raise here."""
    llm = _llama(model)
    compiled = compile_output_type(output_type, compiler if compiler is not None else _compilers(llm))
    return DecodingLogitsProcessor(compiled, max_tokens=max_tokens)


class Generator:
    """``outlines.Generator(model, output_type)`` with this engine instead of outlines' backends.

    Compiles once (at construction); each call runs outlines' own generator with a fresh
    processor whose budget is the call's ``max_tokens`` (when given), then re-raises any
    processor error.  ``compiler``: a :class:`~decoding.Compiler` for ``model``'s tokenizer
    (default: one shared per ``llama_cpp.Llama``).
    """

    def __init__(self, model: Any, output_type: Any, *, compiler: Compiler | None = None) -> None:
        llm = _llama(model)
        self.model = model
        self.compiled = compile_output_type(output_type, compiler if compiler is not None else _compilers(llm))
        self.processor: DecodingLogitsProcessor | None = None

    def _generator(self, inference_kwargs: dict) -> Any:
        self.processor = DecodingLogitsProcessor(self.compiled, max_tokens=inference_kwargs.get("max_tokens"))
        return _outlines.Generator(self.model, processor=self.processor)

    def __call__(self, prompt: Any, **inference_kwargs: Any) -> str:
        text = self._generator(inference_kwargs)(prompt, **inference_kwargs)
        self.processor.raise_if_failed()  # type: ignore[union-attr]
        return text

    def stream(self, prompt: Any, **inference_kwargs: Any) -> Iterator[str]:
        yield from self._generator(inference_kwargs).stream(prompt, **inference_kwargs)
        self.processor.raise_if_failed()  # type: ignore[union-attr]
