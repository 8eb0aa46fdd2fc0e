"""Resource limits: one documented place for every bound on untrusted input.

The defaults are safe for a server that accepts schemas, DTDs, GBNF and text from strangers
on the 2-core / 24 GB machines this project targets: each bound keeps one input well under
a second of work and a few hundred MB of memory.  Exceeding a limit raises
:class:`~decoding.errors.LimitError` naming the place (JSON pointer, line:column, rule) and
the limit (its name here and its value); in the guard it is a violation instead.  A limit is
never a hang, a ``RecursionError`` or a ``MemoryError``.

Pass a :class:`Limits` (``dataclasses.replace(DEFAULT_LIMITS, ...)``) where an API takes
``limits=``; the module constants are the defaults of its fields.

This module imports nothing from the package: every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Limits", "DEFAULT_LIMITS", "with_compile_seconds", "past_estimates"]


@dataclass(frozen=True)
class Limits:
    """Bounds on one input.  Every field is a hard maximum."""

    # -- any parser (JSON Schema, DTD content models, GBNF, the guard's scanners)
    #: nesting depth of brackets, groups, subschemas or elements
    max_nesting: int = 256
    #: size of one source text (schema JSON, DTD, GBNF), in characters
    max_source_chars: int = 4_000_000

    # -- compiling a grammar (front-end IR -> automaton)
    #: estimated NFA states of one grammar before any automaton is built
    max_nfa_states: int = 2_000_000
    #: DFA states of one explicit automaton, counted after minimisation (the automaton that
    #: is kept: its table is ``(byte classes + specials) x 4`` bytes a state).  The subset
    #: construction before it may make up to
    #: :data:`~decoding.backends.automaton.SUBSET_STATES_FACTOR` (8) times as many states,
    #: within ``max_subset_bytes``
    max_dfa_states: int = 200_000
    #: bytes one subset construction may hold before minimisation: its transition table
    #: (``(byte classes + specials) x 4`` bytes a state) and its sets of NFA states.  The
    #: memory bound of a compile: the peak is about twice this (the table, then its pruned and
    #: minimised copies), plus the vocabulary's
    max_subset_bytes: int = 256 * 2**20
    #: wall-clock seconds for one compile (checked between construction steps)
    max_compile_seconds: float = 8.0
    #: estimated subset-construction work of one grammar (:func:`decoding.ir.size.estimate_work`:
    #: a repetition of a variable-length item costs the square of its NFA states), checked
    #: before any automaton is built so blow-ups such as ``("a"{0,100}){0,100}`` fail fast
    max_compile_work: int = 100_000_000
    #: whether the estimates made before any automaton is built may refuse a grammar: True,
    #: a grammar (or, in the JSON Schema front-end, a keyword or rule: its ``max_nfa``)
    #: estimated above ``max_nfa_states`` or ``max_compile_work`` is a LimitError at once
    #: (``estimated=True``); False, the build is tried and only the bounds met while building
    #: hold: NFA states as they are made (``max_nfa_states``), ``max_dfa_states``,
    #: ``max_subset_bytes``, ``max_compile_seconds``.  The estimates are upper bounds: a
    #: ``oneOf`` over a recursive definition is estimated at millions of states and compiles
    #: to about a thousand.  :class:`~decoding.compiler.Compiler` (back-end ``"auto"``)
    #: compiles again with False, in the time left, a grammar refused on an estimate.
    refuse_on_estimates: bool = True
    #: wall-clock seconds that second compile may take (within what is left of
    #: ``max_compile_seconds``): refused estimates that were only pessimistic compile in
    #: 0.2-0.6 s (Github_easy's), and a grammar that is really as large as estimated costs
    #: at most this much more than the refusal did
    past_estimates_seconds: float = 2.0

    # -- DTDs
    #: characters of entity replacement text in total (parameter AND general entities)
    max_entity_expansion: int = 4_000_000
    #: depth of entity references inside entity replacement text
    max_entity_depth: int = 64

    # -- the guard (post-hoc checks of model output)
    #: characters of text one guard call accepts
    max_guard_input_chars: int = 1_000_000


DEFAULT_LIMITS = Limits()


def with_compile_seconds(limits: Limits, seconds: float) -> Limits:
    """``dataclasses.replace(limits, max_compile_seconds=seconds)``, without its generic
    field walk (the compiler makes one per compile: a few µs saved on a sub-millisecond
    compile)."""
    out = object.__new__(Limits)
    out.__dict__.update(limits.__dict__)
    out.__dict__["max_compile_seconds"] = seconds
    return out


def past_estimates(limits: Limits, seconds_left: float | None = None) -> Limits:
    """``limits`` for compiling past a refusing estimate: ``refuse_on_estimates`` off and
    ``max_compile_seconds`` at most ``past_estimates_seconds`` (and ``seconds_left``, what
    the compile has left, when given).  What :class:`~decoding.compiler.Compiler` and the
    conformance runner compile with after an estimate refused a grammar."""
    seconds = min(limits.max_compile_seconds, limits.past_estimates_seconds)
    if seconds_left is not None:
        seconds = min(seconds, seconds_left)
    return replace(limits, refuse_on_estimates=False, max_compile_seconds=seconds)
