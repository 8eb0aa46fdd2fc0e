"""Plain result types of the guard and the offset -> line/column helper.

Invariants
- Offsets are indices into the caller's original ``str`` (characters, not bytes).
- ``line`` and ``column`` are 1-based; ``column`` counts characters.
- All result objects are frozen and hold only plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Fragment", "Violation", "Change", "Repair", "GuardResult", "line_col"]


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of character ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


@dataclass(frozen=True)
class Fragment:
    """One XML element or JSON value found in mixed text.

    ``text == source[start:end]``.  ``complete`` is False when the source ended while
    the element/value was still open (``end == len(source)`` then).  For XML,
    ``prolog_start <= start`` is where an XML declaration / DOCTYPE / comments directly
    before the element begin (``== start`` when there are none); ``document`` is
    ``source[prolog_start:end]``.  ``name`` is the root element name (XML) or
    ``"object"``/``"array"`` (JSON).  ``notes`` lists lexical irregularities seen while
    scanning (mismatched end tags, trailing commas...), each as "line:col: what".
    """
    kind: Literal["xml", "json"]
    text: str
    start: int
    end: int
    line: int
    column: int
    complete: bool
    name: str
    prolog_start: int
    document: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    """One validation error, fit to be shown to a user or put into a retry prompt.

    ``path``: ``/request/user_id`` (XML; ``[n]`` for the n-th same-name sibling, n>1)
    or a JSON pointer.  ``code``: a stable kebab-case id (``unclosed-tag``,
    ``content-model``, ``schema-format``...).  ``line``/``column``/``offset`` locate
    the error in the source text given to the guard (0 when unknown).
    """
    code: str
    path: str
    message: str
    line: int = 0
    column: int = 0
    offset: int = -1

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}: " if self.line else ""
        return f"{where}{self.message}"


@dataclass(frozen=True)
class Change:
    """One edit made by repair: ``kind`` (e.g. ``close-tag``, ``escape``, ``drop-prose``),
    ``position`` (offset in the source text where it applies) and a human ``detail``."""
    kind: str
    position: int
    detail: str


@dataclass(frozen=True)
class Repair:
    """Outcome of a repair attempt.

    ``ok`` means ``text`` is valid.  When ``ok`` is False, ``text`` is None and
    ``refused`` says why; ``changes`` then lists what would have been done.
    """
    ok: bool
    text: str | None
    changes: tuple[Change, ...] = ()
    refused: str | None = None
    errors: tuple[Violation, ...] = ()


@dataclass(frozen=True)
class GuardResult:
    """Extraction + validation (+ optional repair) of one model output.

    ``ok``: ``text`` is a valid document (possibly after repair).  ``text`` is the
    document to use (the extracted fragment, or its repair).  ``value`` is the parsed
    JSON value for JSON guards.  ``errors`` are the violations of the *extracted*
    fragment (empty when it was valid).  ``repair`` is set when repair was attempted.
    """
    ok: bool
    text: str | None
    fragment: Fragment | None
    errors: tuple[Violation, ...] = ()
    repair: Repair | None = None
    value: Any = None
    changes: tuple[Change, ...] = field(default=())
