"""Decoding modes: how one task is turned into one generation, with timings.

Prompts (issue 18): every mode gets the same prompt, built by
:func:`decoding.runtime.prompting.tool_messages` from the family's tool definition (JSON
Schema, or the DTD without comments) through the model's chat template, with ``shots``
= 0 or 1 worked example (its answer in the generation's whitespace layout).  So a
constrained mode and ``free`` with the same ``shots`` differ only by the constraint.

Modes
- ``free``: the prompt; no mask.
- ``prompt``: kept as an alias of ``free`` with one shot (the old anchors prompt is gone).
- ``automaton``: the same prompt, masked by :class:`decoding.GrammarLogitsProcessor`.
- ``copy``: ``automaton`` with the copy bias on the task's request
  (``GrammarLogitsProcessor(copy_from=task.user)``, :mod:`decoding.runtime.copy_bias`).
- ``fastforward``: the same prompt, same automaton, through the project's own driver
  (:func:`decoding.runtime.fastforward.generate_fast`): forced bytes are appended in one batched
  eval and budget-aware closing keeps the output completable within ``max_tokens``.  The
  driver reuses the cached prompt prefix and times the whole prompt evaluation
  (``prompt_s``), untimed refills excluded, so its TTFT is close to, not equal with, the
  other modes'.
- ``gbnf``: the same prompt, masked by llama.cpp's own grammar sampler running the GBNF
  that :func:`decoding.backends.gbnf.emit.to_gbnf` emits (``decoding.runtime.llama_grammar``).
- ``llguidance``, ``outlines``: peer engines as logits processors in the same
  ``create_completion`` call (``evals.harness.peers``); a peer whose package is missing,
  or a family a peer cannot express (outlines: XML), is reported with the reason.

Timing (per generation)
- ``prep_s``: getting the compiled grammar; the first request of a (model, family) pays
  the compile, later ones hit the cache (0).
- ``prompt_s``: evaluation of the task's prompt suffix (``Llama.eval``, timed).  Every
  mode of a task does the same work: the KV cache is cut back to (or refilled, untimed,
  with) the family's shared prefix first.
- ``decode_s``: wall time of ``create_completion``, which finds the whole prompt cached
  and starts sampling at once; tokens/s = tokens / decode_s.
- ``ttft_s`` = prep_s + prompt_s + decode_s / tokens (the first token's share).
- ``mask_s``: time spent inside the logits processor (automaton and the peers; llama.cpp's
  grammar sampler cannot be timed from Python).
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from typing import Any

import llama_cpp
from llama_cpp import LogitsProcessorList
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from decoding.compiler import Compiler, as_vocab
from decoding.ir import Grammar, Ref, byteset, rep, seq
from decoding.runtime.fastforward import generate_fast
from decoding.runtime.llama_grammar import to_llama_grammar
from decoding.runtime.processor import GrammarLogitsProcessor

from decoding.runtime.prompting import Example, chat_template, tool_messages

from evals.harness.families import DEFAULT_WHITESPACE, Family
from evals.harness.peers import LLGuidancePeer, OutlinesPeer, outlines_unsupported, peer_available
from evals.harness.tasks import Task, example_task

__all__ = ["with_lead_in", "MODES", "MAIN_MODES", "PEER_MODES", "Runner", "Output", "peer_status", "family_status"]

MAIN_MODES = ("free", "prompt", "automaton", "copy", "fastforward", "gbnf")
PEER_MODES = ("outlines", "llguidance")
MODES = MAIN_MODES + PEER_MODES


def peer_status(mode: str) -> str:
    """``"ran"`` for a peer that can run here, else the reason it cannot."""
    return peer_available(mode) or "ran"


def family_status(mode: str, fam: Family) -> str | None:
    """Why ``mode`` cannot run ``fam`` (a peer's unsupported family), or ``None``."""
    return outlines_unsupported(fam) if mode == "outlines" else None


@dataclass
class Output:
    text: str
    finish_reason: str
    n_tokens: int
    prep_s: float
    prompt_s: float
    prompt_tokens: int
    decode_s: float
    mask_s: float | None
    mask_calls: int

    @property
    def ttft_s(self) -> float:
        return self.prep_s + self.prompt_s + self.decode_s / max(self.n_tokens, 1)


def _longest_path(dfa) -> int | None:
    """Length of the longest accepted byte string of an acyclic (pruned) DFA, or None."""
    import numpy as np

    trans = np.asarray(dfa.trans)
    n = trans.shape[0]
    succ = [sorted({int(t) for t in trans[s] if t >= 0}) for s in range(n)]
    best: list[int | None] = [None] * n
    state = [0] * n  # 0 new, 1 on stack, 2 done
    stack = [(0, 0)]
    while stack:
        s, i = stack.pop()
        if i == 0:
            if state[s] == 2:
                continue
            state[s] = 1
        if i < len(succ[s]):
            stack.append((s, i + 1))
            t = succ[s][i]
            if state[t] == 1:
                return None  # a cycle: unbounded
            if state[t] == 0:
                stack.append((t, 0))
            continue
        vals = [best[t] + 1 for t in succ[s] if best[t] is not None]
        if dfa.accepting[s]:
            vals.append(0)
        best[s] = max(vals) if vals else None
        state[s] = 2
    return best[0]


def with_lead_in(g: Grammar) -> Grammar:
    """``g`` preceded by at most one newline or space: the prompt/answer boundary healed.
    Without it the mask forbids a first token such as Gemma's ``"\n{"`` (the model's own
    start of a JSON answer after its turn header) and pushes it to a rarer split."""
    start = "__lead_in"
    return Grammar(start, ((start, seq(rep(byteset([(10, 10), (32, 32)]), 0, 1), Ref(g.start))), *g.rules),
                   max_depth=g.max_depth)


class _Timed:
    """Wraps a logits processor and accumulates the time spent inside it."""

    def __init__(self, proc: GrammarLogitsProcessor) -> None:
        self.proc = proc
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, input_ids, scores):
        t = time.perf_counter()
        out = self.proc(input_ids, scores)
        self.seconds += time.perf_counter() - t
        self.calls += 1
        return out


class Runner:
    """Runs tasks on one loaded model; caches compiled grammars per family and backend."""

    def __init__(self, llm: Any, model_name: str, examples=example_task) -> None:
        self.llm = llm
        self.model = model_name
        self.examples = examples  # family name -> Task (the worked example)
        self.lead_in = True  # boundary healing: the grammar may start with one newline/space (with_lead_in)
        meta = llm.metadata
        tmpl, self.template = chat_template(llm, model_name)

        def tok(key: str) -> str:
            i = meta.get(key)
            return llm._model.token_get_text(int(i)) if i is not None else ""

        self.fmt = Jinja2ChatFormatter(tmpl, eos_token=tok("tokenizer.ggml.eos_token_id"),
                                       bos_token=tok("tokenizer.ggml.bos_token_id"))
        self._automaton: dict[str, Any] = {}
        self._gbnf: dict[str, Any] = {}
        self._prefix: dict[tuple[str, str], int] = {}
        self._bound: dict[str, int | None] = {}
        self.compile_s: dict[str, dict[str, float]] = {"automaton": {}, "gbnf": {}, "llguidance": {},
                                                       "outlines": {}}
        self._peers: dict[str, Any] = {}
        self.peer_setup_s: dict[str, float] = {}
        as_vocab(llm)  # read the vocabulary once (not part of any grammar's compile time)

    # ------------------------------------------------------------------ prompts
    def messages(self, fam: Family, task: Task, shots: int = 0, whitespace: str = DEFAULT_WHITESPACE) -> list[dict]:
        """The one prompt of (family, task, shots): identical for every mode."""
        ex = None
        if shots:
            e = self.examples(fam.name)
            ex = Example(e.user, fam.render(e.expected, whitespace))
        return tool_messages(fam.tool(), task.user, ex)

    def _tokens(self, msgs: list[dict]) -> tuple[list[int], list[str]]:
        r = self.fmt(messages=msgs)
        toks = self.llm.tokenize(r.prompt.encode("utf-8"), add_bos=not r.added_special, special=True)
        stop = r.stop if isinstance(r.stop, list) else ([r.stop] if r.stop else [])
        return toks, stop

    def _shared_prefix(self, fam: Family, style: tuple) -> int:
        key = (fam.name, style)
        if key not in self._prefix:
            a = self._tokens(self.messages(fam, Task("a", fam.name, "A"), *style))[0]
            b = self._tokens(self.messages(fam, Task("b", fam.name, "Z"), *style))[0]
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            self._prefix[key] = n
        return self._prefix[key]

    # ------------------------------------------------------------------ grammars
    def _grammar(self, fam: Family, whitespace: str):
        g = fam.grammar(whitespace)
        return with_lead_in(g) if self.lead_in and fam.kind == "json" else g

    def automaton(self, fam: Family, whitespace: str = DEFAULT_WHITESPACE):
        key = (fam.name, whitespace)
        if key not in self._automaton:
            t = time.perf_counter()
            self._automaton[key] = Compiler(self.llm).compile_ir(self._grammar(fam, whitespace))
            self.compile_s["automaton"][fam.name] = time.perf_counter() - t
            return self._automaton[key], self.compile_s["automaton"][fam.name]
        return self._automaton[key], 0.0

    def gbnf(self, fam: Family, whitespace: str = DEFAULT_WHITESPACE):
        key = (fam.name, whitespace)
        if key not in self._gbnf:
            t = time.perf_counter()
            self._gbnf[key] = to_llama_grammar(self._grammar(fam, whitespace), llm=self.llm)
            self.compile_s["gbnf"][fam.name] = time.perf_counter() - t
            return self._gbnf[key], self.compile_s["gbnf"][fam.name]
        return self._gbnf[key], 0.0

    def peer(self, mode: str):
        """The model's peer engine state (tokenizer / model wrapper, built once, not compile time)."""
        if mode not in self._peers:
            t = time.perf_counter()
            self._peers[mode] = (LLGuidancePeer if mode == "llguidance" else OutlinesPeer)(self.llm)
            self.peer_setup_s[mode] = time.perf_counter() - t
        return self._peers[mode]

    def length_bound(self, fam: Family) -> int | None:
        """Longest document of the family's automaton in bytes (None if unbounded): no
        generation under the mask can need more tokens than this (every text token spells
        at least one byte)."""
        if fam.name not in self._bound:
            cg, _ = self.automaton(fam)
            # (a lazy grammar's automaton made explicit: its longest path is the language's)
            self._bound[fam.name] = _longest_path(cg.to_dfa_grammar().dfa if cg.backend == "lazy" else cg.dfa)
        return self._bound[fam.name]

    # ------------------------------------------------------------------ one generation
    def run(self, fam: Family, task: Task, mode: str, max_tokens: int, *, shots: int = 0,
            whitespace: str = DEFAULT_WHITESPACE, temperature: float = 0.0, seed: int = 0) -> Output:
        if mode == "prompt":  # the old few-shot mode: now the same prompt as every mode, one shot
            mode, shots = "free", 1
        style = (shots, whitespace)
        msgs = self.messages(fam, task, *style)
        toks, stop = self._tokens(msgs)
        kw: dict[str, Any] = {}
        timed = None
        prep = 0.0
        if mode in ("automaton", "copy"):
            cg, prep = self.automaton(fam, whitespace)
            timed = _Timed(GrammarLogitsProcessor(cg, copy_from=task.user if mode == "copy" else None))
            kw["logits_processor"] = LogitsProcessorList([timed])
        elif mode == "gbnf":
            kw["grammar"], prep = self.gbnf(fam, whitespace)
        elif mode in PEER_MODES:
            why = peer_available(mode) or family_status(mode, fam)
            if why:
                raise ValueError(f"mode {mode!r} cannot run family {fam.name}: {why}")
            timed, prep = self.peer(mode).processor(fam)
            if prep:
                self.compile_s[mode][fam.name] = prep
            kw["logits_processor"] = LogitsProcessorList([timed])
        elif mode not in ("free", "prompt", "fastforward"):
            raise ValueError(f"mode {mode!r} is unknown")
        llm = self.llm
        if mode == "fastforward":
            cg, prep = self.automaton(fam, whitespace)
            r = self.fmt(messages=msgs)  # the very tokens of the other modes (BOS as _tokens adds it)
            g = generate_fast(llm, cg, prompt=r.prompt, max_tokens=max_tokens, temperature=temperature, seed=seed,
                              add_bos=not r.added_special)
            n = len(g.tokens)  # like llama-cpp-python's completion_tokens: the end token is not counted
            return Output(g.text, g.finish_reason, n, prep, g.prompt_seconds, 0, max(g.seconds, 1e-9),
                          g.mask_seconds, max(n, 1))
        shared = self._shared_prefix(fam, style)
        cached = llm.n_tokens >= shared and list(llm._input_ids[:shared]) == toks[:shared]
        if not (cached and llm._ctx.kv_cache_seq_rm(-1, shared, -1)):  # refill the shared prefix, untimed
            llm.reset()
            llm.eval(toks[:shared])
        llm.n_tokens = shared
        t0 = time.perf_counter()
        llm.eval(toks[shared:])  # the task's own prompt suffix: the same work in every mode
        t1 = time.perf_counter()
        # the whole prompt is now cached, so create_completion samples at once: its wall time is decoding
        out = llm.create_completion(toks, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed, **kw)
        t2 = time.perf_counter()
        if timed is not None:
            (timed.proc if isinstance(timed, _Timed) else timed).raise_if_failed()
        ch = out["choices"][0]
        return Output(ch["text"], ch.get("finish_reason") or "stop", int(out["usage"]["completion_tokens"]),
                      prep, t1 - t0, len(toks) - shared, max(t2 - t1, 1e-9),
                      timed.seconds if timed else None, timed.calls if timed else 0)
