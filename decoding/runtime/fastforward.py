"""A ``generate()`` driver over llama-cpp-python's low-level API with forced-token
fast-forward.

When the automaton allows exactly one continuation (a closing tag, a property name), the
forced bytes are tokenized canonically and appended instead of being sampled one token at
a time: they are evaluated in one batched ``eval`` together with the sampled token before
them (one llama.cpp decode per sampled token, however many tokens are forced after it).  The KV cache stays consistent because every token,
forced or sampled, goes through ``Llama.eval`` in order (the cache holds exactly the
prompt plus the output so far).

Sampling is temperature / top-k / top-p over the masked logits, with a seeded numpy
generator.  With ``compiled=None`` the same driver runs unconstrained (for fair speed
comparisons in one run).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from decoding import _native
from decoding.backends.contract import CompiledGrammar
from decoding.errors import ProcessorError
from decoding.runtime.generate import Generation, check_prompt
from decoding.runtime.matcher import Matcher
from decoding.vocab import as_vocab

__all__ = ["generate_fast", "format_chat"]


def format_chat(llm: Any, messages: list[dict]) -> str:
    """The model's own chat template applied to ``messages`` (generation prompt added)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    meta = llm.metadata
    template = meta.get("tokenizer.chat_template")
    if not template:
        return "\n".join(m["content"] for m in messages) + "\n"
    vocab = llm._model
    eos = vocab.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
    bos = vocab.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
    fmt = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
    text = fmt(messages=messages).prompt
    if bos and text.startswith(bos) and vocab.add_bos_token():  # the tokenizer adds it again
        text = text[len(bos):]
    return text


def _eval_prompt(llm: Any, ptoks: list[int]) -> None:
    """Evaluate the prompt, reusing the longest prefix already in the KV cache (at least
    the last prompt token is evaluated again, so its logits are fresh)."""
    n = 0
    limit = min(int(llm.n_tokens), len(ptoks) - 1)
    ids = llm._input_ids
    while n < limit and int(ids[n]) == ptoks[n]:
        n += 1
    if n > 0 and llm._ctx.kv_cache_seq_rm(-1, n, -1):
        llm.n_tokens = n
        llm.eval(ptoks[n:])
    else:
        llm.reset()
        llm.eval(ptoks)


def _sample(logits: np.ndarray, rng: np.random.Generator, temperature: float, top_k: int, top_p: float,
            allowed: np.ndarray | None = None) -> int:
    """Temperature / top-k / top-p sampling.  ``allowed`` (sorted ids) restricts the candidates
    without scanning the whole vocabulary when it is small."""
    if allowed is not None and len(allowed) <= 4096:
        pool, vals = allowed, logits[allowed]
    else:
        pool, vals = None, logits
    if temperature <= 0:
        i = int(np.argmax(vals))
        return int(pool[i]) if pool is not None else i
    k = min(top_k, len(vals)) if top_k > 0 else len(vals)
    cand = np.argpartition(vals, -k)[-k:] if k < len(vals) else np.arange(len(vals))
    cand = cand[np.isfinite(vals[cand])]
    z = vals[cand].astype(np.float64) / temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p)
        keep = np.cumsum(p[order]) - p[order] < top_p
        cand, p = cand[order[keep]], p[order[keep]]
        p /= p.sum()
    i = int(cand[rng.choice(len(cand), p=p)])
    return int(pool[i]) if pool is not None else i


def generate_fast(llm: Any, compiled: CompiledGrammar | None, *, prompt: str | None = None,
                  messages: list | None = None, max_tokens: int = 256, temperature: float = 0.7,
                  top_k: int = 40, top_p: float = 0.95, seed: int | None = None,
                  fast_forward: bool = True, budget: bool = True, add_bos: bool = True) -> Generation:
    """Generate from ``prompt`` or chat ``messages`` (exactly one) under ``compiled`` (or
    unconstrained with ``None``).  The :class:`~decoding.runtime.generate.Generation` has
    ``tokens``, ``n_forced``, ``prompt_seconds`` and ``mask_seconds`` filled in; ``seconds``
    excludes prompt evaluation.  ``add_bos``: let the tokenizer add its BOS (pass False for a
    prompt whose text already starts with it, e.g. a rendered chat template)."""
    import llama_cpp

    check_prompt("generate_fast", prompt, messages)
    text_prompt = prompt if messages is None else format_chat(llm, messages)
    ptoks = llm.tokenize(text_prompt.encode("utf-8"), add_bos=add_bos, special=True)
    t0 = time.perf_counter()
    _eval_prompt(llm, ptoks)
    t1 = time.perf_counter()
    n_vocab = llm.n_vocab()
    eog = set()
    matcher: Matcher | None = None
    if compiled is not None:
        vocab = compiled.vocab
        eog = set(vocab.eog_ids)
        if budget:
            from decoding.runtime.budget import BudgetMatcher

            matcher = BudgetMatcher(compiled, max_tokens)
        else:
            matcher = Matcher(compiled)
    else:
        vocab = as_vocab(llm)
        eog = set(vocab.eog_ids)
    rng = np.random.default_rng(seed)
    out: list[int] = []
    # tokens in ``out`` not yet evaluated: the last sampled token and the forced run after
    # it go to llama.cpp together, in one ``eval`` (one decode call instead of two)
    pending: list[int] = []
    n_forced = 0
    mask_s = 0.0
    reason = "length"
    while len(out) < max_tokens:
        if matcher is not None and fast_forward:
            tm = time.perf_counter()
            forced = matcher.forced_bytes()
            acc: list[int] = []
            if forced:
                for t in vocab.tokenize(forced)[: max_tokens - len(out)]:
                    if not matcher.advance(t):
                        break
                    acc.append(t)
            mask_s += time.perf_counter() - tm
            if acc:
                pending += acc
                out += acc
                n_forced += len(acc)
                continue
        if pending:
            llm.eval(pending)
            pending = []
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,))
        allowed = None
        if matcher is not None:
            tm = time.perf_counter()
            _native.apply_mask(logits, matcher.mask())
            allowed = matcher.allowed_ids()
            mask_s += time.perf_counter() - tm
        tok = _sample(logits, rng, temperature, top_k, top_p, allowed)
        if tok in eog:
            if matcher is not None:
                matcher.advance(tok)
            reason = "stop"
            break
        if matcher is not None and not matcher.advance(tok):  # pragma: no cover - mask forbids it
            raise ProcessorError(f"generate_fast: sampled token {tok} is not allowed by the grammar")
        out.append(tok)
        pending.append(tok)
    if pending:  # (the cache holds the prompt plus the whole output, as after every step)
        llm.eval(pending)
    t2 = time.perf_counter()
    text = vocab.decode(out).decode("utf-8", errors="replace")
    complete = True if matcher is None else matcher.is_accepting()
    return Generation(text, complete, reason, len(out), t2 - t1, tokens=tuple(out), n_forced=n_forced,
                      prompt_seconds=t1 - t0, mask_seconds=mask_s)
