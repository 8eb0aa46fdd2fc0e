"""``generate_fast`` on SmolLM2: the KV cache ends up holding exactly the prompt plus the
output, and a sampled token goes to llama.cpp in the same ``eval`` as the forced run after
it (one decode per sampled token, plus at most one for a forced run before the first).

A spy wraps ``Llama.eval`` and records every batch; each test fails if the driver evaluates
a token twice, skips one, or evaluates a forced run in a call of its own.
"""

from __future__ import annotations

import pytest

from decoding import Compiler
from decoding.runtime.fastforward import generate_fast

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                           "days": {"type": "integer", "minimum": 1, "maximum": 9},
                                           "unit": {"enum": ["celsius", "fahrenheit"]}},
          "required": ["city", "days", "unit"], "additionalProperties": False}
MESSAGES = [{"role": "user", "content": "Weather in 北京市 for 3 days? Reply with the JSON arguments."}]


class _Spy:
    """``llm.eval`` recording each batch (the real eval runs)."""

    def __init__(self, llm) -> None:
        self.llm, self.real, self.calls = llm, llm.eval, []

    def __call__(self, tokens) -> None:
        self.calls.append(list(tokens))
        self.real(tokens)

    def __enter__(self):
        self.llm.eval = self
        return self

    def __exit__(self, *exc) -> None:
        del self.llm.eval  # the instance attribute goes; the class's method is back


@pytest.mark.parametrize("seed, max_tokens, budget", [(0, 64, True), (1, 64, True), (2, 9, False), (3, 1, False)])
def test_forced_runs_ride_with_the_sampled_token(smollm2, seed, max_tokens, budget):
    cg = Compiler(smollm2).compile_json_schema(SCHEMA)
    with _Spy(smollm2) as spy:
        g = generate_fast(smollm2, cg, messages=MESSAGES, max_tokens=max_tokens, temperature=0.8, seed=seed,
                          budget=budget)
    out = list(g.tokens)
    assert out and len(out) <= max_tokens
    n_prompt = smollm2.n_tokens - len(out)
    # the cache: the prompt, then exactly the output, in order
    assert [int(t) for t in smollm2._input_ids[n_prompt:smollm2.n_tokens]] == out
    # the calls after the prompt's evaluation spell the output once, in order
    prompt_calls = 1
    gen_calls = spy.calls[prompt_calls:]
    assert [t for c in gen_calls for t in c] == out
    n_sampled = len(out) - g.n_forced
    # one call per sampled token, plus one for a forced run before the first sampled one
    assert len(gen_calls) <= n_sampled + 1, (len(gen_calls), n_sampled, gen_calls)
    if g.n_forced and max_tokens > 1:
        assert any(len(c) > 1 for c in gen_calls), gen_calls  # a sampled token with its forced run
    assert g.complete or g.finish_reason == "length"


def test_without_grammar_one_call_per_token(smollm2):
    with _Spy(smollm2) as spy:
        g = generate_fast(smollm2, None, messages=MESSAGES, max_tokens=8, temperature=0.8, seed=0)
    gen_calls = spy.calls[1:]
    assert [t for c in gen_calls for t in c] == list(g.tokens)
    assert all(len(c) == 1 for c in gen_calls)
