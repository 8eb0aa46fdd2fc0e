"""Back-end selection: compile an IR grammar with the DFA back-end, the pushdown back-end,
or whichever fits (``"auto"``).

Both back-ends recognise the same language (the grammar with recursion bounded by its
``max_depth``) and produce the same masks; they differ in cost.  The result is always a
:class:`~decoding.backends.contract.CompiledGrammar`.

Before anything is built the IR is estimated (:func:`decoding.ir.size.check_size`) against
``limits``: refs inlined for the DFA back-end, rule by rule for the pushdown back-end, so a
grammar that would blow up is a :class:`~decoding.errors.LimitError` naming the rule and the
limit in milliseconds instead of a long compile.  The pushdown back-end's estimate is of the
grammar it compiles: large bounded repetitions split into helper rules
(:func:`~decoding.backends.pushdown.repeats.split_repeats`).
"""

from __future__ import annotations

import time
from dataclasses import replace

from decoding.backends.automaton import DEFAULT_MAX_STATES
from decoding.backends.contract import CompiledGrammar
from decoding.backends.counted import compile_counted
from decoding.backends.dfa.index import compile_dfa_grammar
from decoding.backends.dfa.lazy import compile_lazy_grammar
from decoding.backends.masks import DEFAULT_MAX_MASKS
from decoding.backends.pushdown.index import compile_grammar_pushdown
from decoding.backends.pushdown.repeats import split_repeats
from decoding.errors import GrammarError, LimitError
from decoding.ir import Grammar
from decoding.ir.size import check_size, release_estimates
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.vocab import Vocab

__all__ = ["compile_grammar", "BACKENDS", "AUTO_PUSHDOWN_ABOVE", "LAZY_ABOVE", "LAZY_NFA_ABOVE"]

BACKENDS = ("auto", "dfa", "lazy", "pushdown", "counted")
#: above this IR size estimate (NFA states with refs expanded) ``backend="auto"`` goes
#: straight to the pushdown back-end instead of trying to build the explicit DFA first
AUTO_PUSHDOWN_ABOVE = 300_000
#: above this estimate (or over the limits) ``backend="auto"`` first tries counting the large
#: bounded repetitions (:mod:`decoding.backends.counted`); below it the unrolled DFA is cheap
COUNT_ABOVE = 20_000
#: above this estimate ``backend="auto"`` determinises lazily (:mod:`decoding.backends.dfa.lazy`)
#: instead of building the whole minimal DFA: the eager subset construction and minimisation
#: cost about 2 ms per 1,000 estimated NFA states (Kubernetes: 27k -> 57 ms, 202k -> 690 ms),
#: the lazy back-end only the NFA (kb_1110: ~180 ms), but its first visits cost more (states
#: are not minimised; Snowplow 50k-270k: masks 2-5x slower) and it keeps the NFA (Kubernetes
#: above 20k: 48 MB instead of 12), so only the largest go lazy.  The eager DFA that exceeds
#: its size limits also goes lazy before the pushdown back-end is tried.
LAZY_ABOVE = 100_000
#: the JSON Schema fast path (:mod:`decoding.frontends.jsonschema.fast`), which builds the NFA
#: before it decides, determinises lazily above this many NFA states with ``backend="auto"``:
#: an object with many optional properties (NFA linear in them, minimal DFA quadratic).  Lower
#: compiles faster still but masks slower (first visits of states not minimised): with every
#: Glaiveai2K schema lazy the maskbench's mask mean was about xgrammar's (0.7 of it eager).
#: 1,000 since the lazy set-up reads an edge as one move (not one per byte class): warm
#: compile p50 on Snowplow 60 0.73 -> 0.65 ms against 2,000 (Kubernetes, Github_easy a little
#: lower, Glaiveai2K the same), mask mean and p99 of their valid walks the same
LAZY_NFA_ABOVE = 1_000


def compile_grammar(grammar: Grammar, vocab: Vocab, *, max_states: int = DEFAULT_MAX_STATES,
                    eager: bool = False, grammar_key: str = "", meta: dict | None = None,
                    backend: str = "auto", max_masks: int = DEFAULT_MAX_MASKS,
                    limits: Limits | None = None) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.  Specials that are one control/user-defined token of
    the vocabulary are matched as that token, the others as literal text.

    ``backend``: ``"dfa"`` (one explicit byte DFA, refs inlined: fastest masks, exact
    budgets, can be precompiled to artifacts; LimitError above ``max_states``), ``"lazy"``
    (the same DFA made one state at a time as generation reaches it: compiles in the time
    of its NFA; budgets an upper bound),
    ``"pushdown"`` (one small DFA per rule plus a stack; same language, for grammars too
    large to unroll), ``"counted"`` (:mod:`decoding.backends.counted`: the DFA with large
    bounded repetitions counted, not unrolled; GrammarError if there is none it can count) or
    ``"auto"`` (counted when that helps, else the DFA when it fits: eager up to ``LAZY_ABOVE``
    estimated NFA states, lazy above, else pushdown).  ``eager`` does
    the mask work now (every state for the DFA, the start for pushdown).  ``limits``
    (default :data:`~decoding.limits.DEFAULT_LIMITS`) bounds the compile: LimitError naming
    the rule and the limit.  With ``"auto"``, a grammar estimated above ``COUNT_ABOVE`` NFA
    states unrolled is first tried counted (it gives up at once when its own estimate is too
    large); the other back-ends get what is left of ``max_compile_seconds``."""
    if backend not in BACKENDS:
        raise GrammarError(f"compile_grammar: backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    try:
        return _compile_grammar(grammar, vocab, max_states=max_states, eager=eager, grammar_key=grammar_key,
                                meta=meta, backend=backend, max_masks=max_masks, limits=limits)
    finally:  # the front-end's estimates (decoding.ir.size.attach_estimates) are not needed after
        release_estimates(grammar)


def _compile_grammar(grammar: Grammar, vocab: Vocab, *, max_states: int, eager: bool, grammar_key: str,
                     meta: dict | None, backend: str, max_masks: int, limits: Limits | None) -> CompiledGrammar:
    lim = DEFAULT_LIMITS if limits is None else limits
    t0 = time.monotonic()
    if backend == "lazy":
        return compile_lazy_grammar(grammar, vocab, grammar_key=grammar_key, meta=dict(meta or {}, backend="lazy"),
                                    max_masks=max_masks, limits=lim, eager=eager)
    if backend == "counted":
        why: list[str] = []
        cg = compile_counted(grammar, vocab, limits=lim, grammar_key=grammar_key,
                             meta=dict(meta or {}, backend="counted"), max_masks=max_masks, max_states=max_states,
                             why=why)
        if cg is None:
            raise GrammarError(f"grammar '{grammar.start}': the counted back-end found no repetition it can "
                               f"count ({'; '.join(why) or 'none'})")
        return cg.precompute() if eager else cg
    if backend == "auto":
        try:
            unrolled = check_size(grammar, lim).states
        except LimitError:
            unrolled = None
        if unrolled is None or unrolled > COUNT_ABOVE:  # large: count big repetitions if it can
            counted_error: LimitError | None = None
            try:
                counted = compile_counted(grammar, vocab, limits=lim, grammar_key=grammar_key,
                                          meta=dict(meta or {}, backend="counted"), max_masks=max_masks,
                                          max_states=max_states)
            except LimitError as e:
                counted = None  # too large even counted: the other back-ends in what time is left
                counted_error = e
            if counted is not None:
                return counted.precompute() if eager else counted
            left = lim.max_compile_seconds - (time.monotonic() - t0)  # one budget for every try
            if left <= 0:
                raise LimitError(f"grammar '{grammar.start}': compiling took longer than "
                                 f"max_compile_seconds={lim.max_compile_seconds:g}",
                                 limit="max_compile_seconds", value=lim.max_compile_seconds)
            try:
                return _compile_rest(grammar, vocab, unrolled, replace(lim, max_compile_seconds=left), t0=time.monotonic(),
                                     max_states=max_states, grammar_key=grammar_key, meta=meta,
                                     max_masks=max_masks, eager=eager)
            except LimitError as e:
                raise _with_counted(_name_budget(e, left, lim.max_compile_seconds), counted_error) from None
        return _compile_rest(grammar, vocab, unrolled, lim, t0=t0, max_states=max_states, grammar_key=grammar_key,
                             meta=meta, max_masks=max_masks, eager=eager)
    return _compile_rest(grammar, vocab, None, lim, t0=t0, max_states=max_states, grammar_key=grammar_key,
                         meta=meta, max_masks=max_masks, eager=eager, backend=backend)


def _with_counted(e: LimitError, counted: LimitError | None) -> LimitError:
    """``e`` (the last back-end's limit) also naming the limit the counted form hit first: that
    one, not the unrolled size, is what kept the grammar from compiling counted."""
    if counted is None:
        return e
    return LimitError(f"{e} (the counted form was tried first: {counted})", pointer=e.pointer, limit=e.limit,
                      value=e.value, estimated=e.estimated)


def _name_budget(e: LimitError, left: float, total: float) -> LimitError:
    """``e`` naming the grammar's whole budget instead of what was left of it."""
    if f"max_compile_seconds={left:g}" not in str(e):
        return e
    return LimitError(str(e).replace(f"max_compile_seconds={left:g}", f"max_compile_seconds={total:g}"),
                      pointer=e.pointer, limit="max_compile_seconds", value=total)


def _compile_rest(grammar: Grammar, vocab: Vocab, unrolled: int | None, lim: Limits, *, t0: float,
                  max_states: int, grammar_key: str, meta: dict | None, max_masks: int, eager: bool,
                  backend: str = "auto") -> CompiledGrammar:
    """The DFA or pushdown back-end (``backend``; ``"auto"``: by the unrolled estimate)."""
    if backend == "auto":
        if unrolled is None or unrolled > AUTO_PUSHDOWN_ABOVE:
            backend = "pushdown"
        elif unrolled > LAZY_ABOVE:
            try:
                return compile_lazy_grammar(grammar, vocab, grammar_key=grammar_key,
                                            meta=dict(meta or {}, backend="lazy"), max_masks=max_masks, limits=lim,
                                            size_checked=True, eager=eager)
            except LimitError:  # the NFA is too large: the pushdown back-end in what time is left
                backend = "pushdown"
                left = lim.max_compile_seconds - (time.monotonic() - t0)
                if left <= 0:
                    raise
                lim = replace(lim, max_compile_seconds=left)
    if backend == "pushdown":
        grammar = split_repeats(grammar)  # (what the pushdown back-end compiles: estimated so)
        check_size(grammar, lim, inline=False)
    else:
        try:
            cg = compile_dfa_grammar(grammar, vocab, max_states=max_states, grammar_key=grammar_key,
                                     meta=meta, max_masks=max_masks, limits=lim,
                                     size_checked=unrolled is not None)
        except LimitError as e:  # the automaton is too large (not a mask limit: those propagate)
            if backend == "dfa":
                raise
            if e.limit in ("max_dfa_states", "max_subset_bytes"):  # its NFA fits: made state by state
                left = lim.max_compile_seconds - (time.monotonic() - t0)
                if left > 0:
                    try:
                        return compile_lazy_grammar(grammar, vocab, grammar_key=grammar_key,
                                                    meta=dict(meta or {}, backend="lazy"), max_masks=max_masks,
                                                    limits=replace(lim, max_compile_seconds=left),
                                                    size_checked=True, eager=eager)
                    except LimitError:
                        pass
        else:
            return cg.precompute() if eager else cg
        grammar = split_repeats(grammar)
        check_size(grammar, lim, inline=False)
        left = lim.max_compile_seconds - (time.monotonic() - t0)  # one budget for both tries
        if left <= 0:
            raise LimitError(f"grammar '{grammar.start}': compiling took longer than "
                             f"max_compile_seconds={lim.max_compile_seconds:g} (the DFA back-end "
                             "gave up; no time left for the pushdown back-end)",
                             limit="max_compile_seconds", value=lim.max_compile_seconds)
        lim = replace(lim, max_compile_seconds=left)
    return compile_grammar_pushdown(grammar, vocab, grammar_key=grammar_key, eager=eager,
                                    meta=dict(meta or {}, backend="pushdown"), max_masks=max_masks,
                                    limits=lim, size_checked=True)  # (check_size inline=False above)
