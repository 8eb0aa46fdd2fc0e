"""Back-end selection: compile an IR grammar with the DFA back-end, the pushdown back-end,
or whichever fits (``"auto"``).

Both back-ends recognise the same language (the grammar with recursion bounded by its
``max_depth``) and produce the same masks; they differ in cost.  The result is always a
:class:`~decoding.backends.contract.CompiledGrammar`.

Before anything is built the IR is estimated (:func:`decoding.ir.size.check_size`) against
``limits``: refs inlined for the DFA back-end, rule by rule for the pushdown back-end, so a
grammar that would blow up is a :class:`~decoding.errors.LimitError` naming the rule and the
limit in milliseconds instead of a long compile.
"""

from __future__ import annotations

import time
from dataclasses import replace

from decoding.backends.automaton import DEFAULT_MAX_STATES
from decoding.backends.contract import CompiledGrammar
from decoding.backends.dfa.index import compile_dfa_grammar
from decoding.backends.masks import DEFAULT_MAX_MASKS
from decoding.backends.pushdown.index import compile_grammar_pushdown
from decoding.errors import GrammarError, LimitError
from decoding.ir import Grammar
from decoding.ir.size import check_size
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.vocab import Vocab

__all__ = ["compile_grammar", "BACKENDS", "AUTO_PUSHDOWN_ABOVE"]

BACKENDS = ("auto", "dfa", "pushdown")
#: above this IR size estimate (NFA states with refs expanded) ``backend="auto"`` goes
#: straight to the pushdown back-end instead of trying to build the explicit DFA first
AUTO_PUSHDOWN_ABOVE = 300_000


def compile_grammar(grammar: Grammar, vocab: Vocab, *, max_states: int = DEFAULT_MAX_STATES,
                    eager: bool = False, grammar_key: str = "", meta: dict | None = None,
                    backend: str = "auto", max_masks: int = DEFAULT_MAX_MASKS,
                    limits: Limits | None = None) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.  Specials that are one control/user-defined token of
    the vocabulary are matched as that token, the others as literal text.

    ``backend``: ``"dfa"`` (one explicit byte DFA, refs inlined: fastest masks, exact
    budgets, can be precompiled to artifacts; LimitError above ``max_states``),
    ``"pushdown"`` (one small DFA per rule plus a stack; same language, for grammars too
    large to unroll) or ``"auto"`` (the DFA when it fits, else pushdown).  ``eager`` does
    the mask work now (every state for the DFA, the start for pushdown).  ``limits``
    (default :data:`~decoding.limits.DEFAULT_LIMITS`) bounds the compile: LimitError naming
    the rule and the limit."""
    if backend not in BACKENDS:
        raise GrammarError(f"compile_grammar: backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    lim = DEFAULT_LIMITS if limits is None else limits
    t0 = time.monotonic()
    if backend == "auto":
        try:
            if check_size(grammar, lim).states > AUTO_PUSHDOWN_ABOVE:
                backend = "pushdown"
        except LimitError:  # too large to inline: the pushdown back-end may still fit
            backend = "pushdown"
    if backend == "pushdown":
        check_size(grammar, lim, inline=False)
    else:
        try:
            cg = compile_dfa_grammar(grammar, vocab, max_states=max_states, grammar_key=grammar_key,
                                     meta=meta, max_masks=max_masks, limits=lim)
        except LimitError:  # the automaton is too large (not a mask limit: those propagate)
            if backend == "dfa":
                raise
        else:
            return cg.precompute() if eager else cg
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
                                    limits=lim)
