"""The back-end contract: what every compiled grammar offers, whatever built it.

A compiled grammar is an immutable, shareable object (per-request state lives in
:class:`~decoding.runtime.matcher.Matcher`).  States are ints; ``0`` is the start state.
Every consumer (matcher, budget, processor, artifacts, cache, CLI, benches) uses only what
:class:`CompiledGrammar` declares, never a back-end's internals.

Invariants every back-end keeps (checked for each back-end by ``tests/test_contract.py``):

- ``mask(s)`` is a read-only ``uint32[n_words]`` bitmask; bit ``t`` is set iff
  ``next_state(s, t) != -1``.  In a state that is not accepting the mask is never empty
  (no dead ends), and end-of-generation tokens are set exactly in accepting states.
- ``next_state(s, t)`` is ``-1`` for a forbidden token, ``-2`` for end-of-generation in an
  accepting state, otherwise the (live) state after ``t``.
- ``allowed_ids(s)`` is the sorted, read-only array of the set bits of ``mask(s)``.
- ``forced_bytes(s)`` is the longest byte string every continuation from ``s`` starts with
  (empty in an accepting state or where there is a choice); specials are not included.
- ``completion_cost(s)`` is a number of text tokens that is always *enough* to complete the
  output from ``s`` (``COST_UNREACHABLE`` if none is): exact on the DFA back-end (fewest
  tokens), an upper bound on pushdown (fewest bytes).  ``successor_costs(s)`` gives
  ``(allowed ids, cost after each)``, with ``-2`` for end-of-generation; each cost is
  ``>= completion_cost`` of the state the token leads to, and from a state of cost ``c > 0``
  some allowed token has cost ``<= c - 1`` (so a budget of ``c`` tokens always closes).
  ``worst_successor_cost(s)`` is at least the largest text-token cost of
  ``successor_costs(s)`` (0 if there is none): exact where a back-end has it in a table
  (the DFA's budget table), else computed from ``successor_costs`` (:func:`worst_text_cost`).
  The budget matcher (:mod:`decoding.runtime.budget`) relies only on these three.
- ``stats()`` is plain data (JSON-serializable), as is ``meta``; memos and tables a
  back-end keeps live on the compiled object itself, never in ``meta``.

Shared building blocks: :mod:`decoding.backends.masks` (the distinct-mask table),
:mod:`decoding.backends.tables` (per-vocabulary trie and plain-text profiles), and
:mod:`decoding.backends.select` (``compile_grammar``: back-end ``"auto"``/``"dfa"``/``"pushdown"``).
Back-end specific extras (``DFAGrammar.successors``, its ``BudgetTable``) are not part of
the contract.
- ``accepts(data)`` is byte-level membership of the language (no specials).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from decoding.vocab import Vocab

__all__ = ["CompiledGrammar", "COST_UNREACHABLE", "EOG", "FORBIDDEN", "worst_text_cost"]

#: ``next_state`` result: the token is not allowed
FORBIDDEN = -1
#: ``next_state`` result: end-of-generation accepted (the output is complete)
EOG = -2
#: ``completion_cost`` of a state from which acceptance cannot be reached
COST_UNREACHABLE = int(np.iinfo(np.int32).max)


@runtime_checkable
class CompiledGrammar(Protocol):
    """A grammar compiled for one tokenizer (see the module docstring for the invariants)."""

    #: the tokenizer the grammar was compiled for
    vocab: Vocab
    #: canonical key (:func:`decoding.ir.key.grammar_key`): names the artifact and cache entry
    grammar_key: str
    #: plain data only (front-end, options, digest, back-end name): JSON-serializable
    meta: dict
    #: token id of each special symbol of the grammar (anchors)
    special_token_ids: tuple[int, ...]

    @property
    def backend(self) -> str:
        """The back-end's name (``"dfa"`` or ``"pushdown"``)."""
        ...

    @property
    def n_words(self) -> int:
        """``ceil(vocab.n_tokens / 32)``: the length of a mask."""
        ...

    def mask(self, state: int) -> np.ndarray: ...

    def allowed_ids(self, state: int) -> np.ndarray: ...

    def next_state(self, state: int, token: int) -> int: ...

    def is_accepting(self, state: int) -> bool: ...

    def accepts(self, data: bytes) -> bool: ...

    def forced_bytes(self, state: int) -> bytes: ...

    def completion_cost(self, state: int) -> int: ...

    def successor_costs(self, state: int) -> tuple[np.ndarray, np.ndarray]: ...

    def worst_successor_cost(self, state: int) -> int:
        """At least the largest text-token cost of ``successor_costs(state)`` (0 if none)."""
        ...

    def precompute(self) -> "CompiledGrammar":
        """Do now the work that would otherwise happen on first use; returns ``self``."""
        ...

    def stats(self) -> dict:
        """Plain-data figures.  Keys every back-end gives: ``backend``, ``states`` (states of
        the compiled automata: the DFA's, or the sum of the pushdown rule DFAs'; pushdown
        also gives ``configs``, the configurations created so far), ``distinct_masks``,
        ``mask_bytes``, ``vocab``, ``fingerprint``."""
        ...


def worst_text_cost(costs: np.ndarray) -> int:
    """The largest cost among the text tokens of ``successor_costs``' costs (end-of-generation,
    ``EOG``, left out); 0 if there are none."""
    text = costs[costs != EOG]
    return int(text.max()) if len(text) else 0
