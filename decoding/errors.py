"""The one error hierarchy of guarded-decoding.

Every exception the package raises on purpose derives from :class:`DecodingError`.
Each message names *where* (a JSON pointer, a line and column, a rule name, a file)
and *why*, so it can be shown to a user or put into a retry prompt unchanged.

    DecodingError
    ├── GrammarError          the grammar itself is unusable (empty language, bad IR)
    │   ├── SchemaError       JSON Schema front-end: .pointer, .keyword, .reason
    │   │   └── UnsatisfiableSchemaError  the schema provably has no valid instance
    │   ├── DTDError          DTD front-end: .line, .column, .reason
    │   ├── GBNFError         GBNF front-end / llama.cpp parse check: .line, .column
    │   ├── PatternError      a regex outside the supported subset: .pattern, .pos, .reason
    │   └── LimitError        a configured limit (states, index size, depth) was hit
    ├── VocabError            tokenizer problems, fingerprint mismatches
    ├── ArtifactError         corrupt, truncated, wrong-version or mismatched artifact
    ├── ProcessorError        a failure inside a logits processor, surfaced to the caller
    ├── CanonicalizeError     a document given to canonical_xml is not well-formed XML
    └── UsageError            a public function got an invalid argument (also a ValueError)
"""

from __future__ import annotations

__all__ = [
    "DecodingError",
    "GrammarError",
    "SchemaError",
    "UnsatisfiableSchemaError",
    "DTDError",
    "GBNFError",
    "PatternError",
    "LimitError",
    "VocabError",
    "ArtifactError",
    "ProcessorError",
    "CanonicalizeError",
    "UsageError",
]


class DecodingError(Exception):
    """Root of every error raised deliberately by guarded-decoding."""


class GrammarError(DecodingError):
    """The grammar cannot be compiled (for example, it accepts no string)."""


class SchemaError(GrammarError):
    """A JSON Schema cannot be honoured exactly.

    ``pointer`` is the JSON pointer of the offending subschema, ``keyword`` the
    keyword at fault (or ``None``), ``reason`` a human explanation.
    """

    def __init__(self, pointer: str, keyword: str | None, reason: str) -> None:
        self.pointer = pointer or ""
        self.keyword = keyword
        self.reason = reason
        where = self.pointer or "/"
        kw = f" keyword '{keyword}'" if keyword else ""
        super().__init__(f"{where}:{kw} {reason}")


class UnsatisfiableSchemaError(SchemaError):
    """The compiler proved that no instance is valid against the schema; ``pointer`` and
    ``keyword`` name the subschema where the proof starts."""


class _Located(GrammarError):
    def __init__(self, reason: str, line: int | None = None, column: int | None = None,
                 source: str | None = None) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        self.source = source
        where = source or "<input>"
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {reason}")


class DTDError(_Located):
    """A DTD cannot be parsed or compiled; carries ``line`` and ``column``."""


class GBNFError(_Located):
    """GBNF text cannot be parsed (by us or by llama.cpp); carries ``line``/``column``."""


class PatternError(GrammarError):
    """The pattern is malformed or uses a feature outside the supported subset.

    ``pattern`` is the source, ``pos`` the offset of the fault in it, ``reason`` why."""

    def __init__(self, pattern: str, pos: int, reason: str) -> None:
        self.pattern = pattern
        self.pos = pos
        self.reason = reason
        super().__init__(f"pattern {pattern!r} at offset {pos}: {reason}")


class LimitError(GrammarError):
    """A configured limit (automaton states, index size, recursion depth) was exceeded.

    The message names the place and the limit.  Optional attributes for callers: ``pointer``
    (JSON pointer into a schema, or None), ``limit`` (the :class:`~decoding.limits.Limits`
    field name, or None), ``value`` (what was measured or asked for, or None) and
    ``estimated`` (True: refused on an estimate made before any automaton was built, not on
    a bound met while building; see :attr:`~decoding.limits.Limits.refuse_on_estimates`)."""

    def __init__(self, message: str, *, pointer: str | None = None, limit: str | None = None,
                 value: object = None, estimated: bool = False) -> None:
        self.pointer = pointer
        self.limit = limit
        self.value = value
        self.estimated = estimated
        super().__init__(message)


class VocabError(DecodingError):
    """The vocabulary cannot be loaded or does not match what was expected."""


class ArtifactError(DecodingError):
    """A compiled artifact is corrupt, truncated, of another version, or for another tokenizer."""


class ProcessorError(DecodingError):
    """A logits processor failed during generation.

    llama-cpp-python swallows exceptions raised inside logits processors; ours record
    the exception and this error re-raises it (as ``__cause__``) to the caller.
    """


class CanonicalizeError(DecodingError):
    """The input is not well-formed XML (message carries expat's line:column)."""


class UsageError(DecodingError, ValueError):
    """A public function was called with an invalid argument (wrong type, out of range,
    conflicting options).  Also a ``ValueError``, so ``except ValueError`` keeps working."""
