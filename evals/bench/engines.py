"""Engine adapters for the mask benchmark: this project and its peers, one interface.

Every adapter owns the timed loop of its engine (:meth:`Engine.walk`) so that the timed
region holds only the engine's own calls plus two ``perf_counter_ns`` reads:

- mask  = compute the allowed-token bitmask for the current state
          (ours: ``Matcher.mask()`` = the contract's ``CompiledGrammar.mask(state)``, a memo
          hit after the first request; peers: fill their bitmask buffer);
- advance = consume the token (ours: ``Matcher.advance``; peers: consume/accept/advance);
- apply = write the mask into a float32 logits buffer of the vocabulary's size
          (ours: ``_native.apply_mask``; peers: their own apply where one runs here,
          otherwise the numpy reference :func:`numpy_apply`).

The per-token "mask time" of the report is mask + advance, for every engine alike.
Adapters raise :class:`Unavailable` at setup when a peer cannot be imported or built.
Ours uses only the back-end contract (:mod:`decoding.backends.contract`) and the public
compiler, so schemas compiled by either back-end ("auto" picks) run in every column.
Acceptance checks (:meth:`Engine.accepts`) run untimed on fresh per-request state, so
they do not warm what the timed walk measures.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable

import numpy as np

from decoding.vocab import Vocab

__all__ = ["Engine", "Unavailable", "Samples", "ENGINES", "make_engine", "numpy_apply"]

_pc = time.perf_counter_ns


class Unavailable(Exception):
    """The engine cannot run here (not installed, needs a device, ...); the message says why."""


@dataclass
class Samples:
    """Per-step timings of one walk, in nanoseconds.  ``first[i]`` is True when step ``i``
    was the first request for that state's mask on its compiled grammar (ours only: a lazy
    back-end computes the mask then; peers leave it False)."""

    mask: list = field(default_factory=list)
    adv: list = field(default_factory=list)
    apply: list = field(default_factory=list)
    first: list = field(default_factory=list)


def numpy_apply(logits: np.ndarray, mask: np.ndarray) -> None:
    """Reference apply: disallowed logits := -inf (unpack the little-endian bitmask)."""
    n = logits.shape[0]
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:n]
    logits[bits == 0] = -np.inf


def _bit(mask: np.ndarray, tok: int) -> bool:
    return bool((int(mask[tok >> 5]) >> (tok & 31)) & 1)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


class Engine:
    name = ""
    apply_name = ""

    def setup(self, vocab: Vocab) -> None:
        """Build the per-vocabulary structures (timed by the caller as setup)."""
        raise NotImplementedError

    def compile(self, schema: Any) -> Any:
        """Compile ``schema`` into a ready-to-use handle; raise on failure."""
        raise NotImplementedError

    def walk(self, handle: Any, tokens: list[int], logits: np.ndarray, eos: int, rec: Samples) -> bool:
        """Timed walk: mask/apply/advance for every token, then the final mask; True when
        every token was allowed and ``eos`` is allowed at the end."""
        raise NotImplementedError

    def accepts(self, handle: Any, tokens: list[int], text: bytes) -> bool:
        """Untimed: does a fresh matcher accept ``tokens`` as a complete output?"""
        raise NotImplementedError

    def done_checking(self, handle: Any) -> None:
        """Every acceptance check of ``handle`` has run: drop what only they needed."""

    def native_bytes(self, handle: Any) -> int | None:
        """Engine-reported memory of one compiled grammar, if the engine reports it."""
        return None

    def backend(self, handle: Any) -> str | None:
        """Which of the engine's back-ends compiled ``handle`` (ours only; peers: None)."""
        return None

    def setup_bytes(self) -> int | None:
        return None

    def version(self) -> str:
        return ""

    def describe(self) -> str:
        """How the engine is configured (for the report)."""
        return ""


# ----------------------------------------------------------------------------- ours

#: ``stats()`` keys, besides the common ``mask_bytes``, that a back-end documents as bytes it
#: holds for one compiled grammar (the DFA's transition table); summed when present
EXTRA_BYTES_KEYS = ("table_bytes",)


class OursHandle:
    """One compiled grammar (timed), the states whose mask the bench has asked for already
    (a lazy back-end computes a state's mask on that first request and memoizes it), and a
    second, untimed compile of the same schema for the acceptance checks: a back-end may
    memoize what ``accepts`` computes (pushdown: its byte steps), and that must not warm
    the timed grammar."""

    __slots__ = ("cg", "asked", "schema", "check")

    def __init__(self, cg: Any, schema: Any) -> None:
        self.cg = cg
        self.asked: set[int] = set()
        self.schema = schema
        self.check: Any = None


class Ours(Engine):
    """This project, through the back-end contract only (:mod:`decoding.backends.contract`):
    ``mask``, ``next_state`` (via :class:`~decoding.runtime.matcher.Matcher`), ``accepts`` and
    ``stats``; whichever back-end "auto" picks."""

    name = "ours"
    apply_name = "_native.apply_mask"

    def __init__(self, backend: str = "auto") -> None:
        self.backend_choice = backend

    def setup(self, vocab: Vocab) -> None:
        from decoding import _native
        from decoding.backends.tables import prepare
        from decoding.compiler import Compiler

        self.vocab = vocab
        self._native = _native
        # no cache: every schema is compiled, none is a hit of an earlier equal grammar
        self._compile = Compiler(vocab, cache=False, backend=self.backend_choice).compile_json_schema
        # the per-vocabulary tables both back-ends share (token trie, plain-text profiles)
        # are built on first use: build them here (setup), not in the first compile or mask
        self.tables = prepare(vocab)

    def compile(self, schema: Any) -> OursHandle:
        return OursHandle(self._compile(schema), schema)

    def backend(self, h: OursHandle) -> str:
        return str(h.cg.stats()["backend"])

    def walk(self, h: OursHandle, tokens: list[int], logits: np.ndarray, eos: int, rec: Samples) -> bool:
        from decoding.runtime.matcher import Matcher

        apply = self._native.apply_mask
        m = Matcher(h.cg)
        asked, add = h.asked, h.asked.add
        am, aa, ap, af = rec.mask.append, rec.adv.append, rec.apply.append, rec.first.append
        for tok in tokens:
            s = m.state
            af(s not in asked)
            add(s)
            t0 = _pc()
            mk = m.mask()
            t1 = _pc()
            ok = _bit(mk, tok)
            t2 = _pc()
            apply(logits, mk)
            t3 = _pc()
            ap(t3 - t2)
            if not ok:
                am(t1 - t0)
                aa(0)
                return False
            t4 = _pc()
            m.advance(tok)
            t5 = _pc()
            am(t1 - t0)
            aa(t5 - t4)
        s = m.state
        af(s not in asked)
        add(s)
        t0 = _pc()
        mk = m.mask()
        t1 = _pc()
        apply(logits, mk)
        t2 = _pc()
        am(t1 - t0)
        aa(0)
        ap(t2 - t1)
        return _bit(mk, eos)

    def accepts(self, h: OursHandle, tokens: list[int], text: bytes) -> bool:
        # Byte-level membership (contract ``accepts``): the same language as the token walk
        # (allowed tokens are exactly the consumable ones), on the untimed twin grammar.
        if h.check is None:
            h.check = self._compile(h.schema)
        return bool(h.check.accepts(text))

    def done_checking(self, h: OursHandle) -> None:
        h.check = None  # not counted in the memory of the compiled grammars

    def native_bytes(self, h: OursHandle) -> int:
        st = h.cg.stats()
        return int(st["mask_bytes"]) + sum(int(st[k]) for k in EXTRA_BYTES_KEYS if k in st)

    def setup_bytes(self) -> int:
        """The shared per-vocabulary tables: token trie, and per plain-text profile its tries
        of the other tokens and of their rests plus its arrays."""
        from decoding.backends.tables import PROFILES

        t = self.tables
        profiles = [t.profile(name) for name in PROFILES]
        tries = [t.trie] + [p.other_trie for p in profiles] + [p.rest_trie for p in profiles if p.rest_trie]
        return (sum(int(self._native.trie_info(x)[1]) for x in tries)
                + sum(int(p.plain_mask.nbytes + p.n_chars.nbytes) for p in profiles))

    def version(self) -> str:
        return _version("guarded-decoding") + f" (kernel {self._native.impl()})"

    def describe(self) -> str:
        return (f"Compiler(vocab, cache=False, backend={self.backend_choice!r}).compile_json_schema(schema): "
                "compact JSON, lazy masks")


# ----------------------------------------------------------------------------- llguidance

class LLGuidance(Engine):
    name = "llguidance"
    apply_name = "llguidance.numpy.apply_token_bitmask_inplace"

    def setup(self, vocab: Vocab) -> None:
        try:
            import llguidance
            import llguidance.llamacpp
            import llguidance.numpy as lnp
        except ImportError as e:
            raise Unavailable(f"not installed ({e})") from None
        if vocab._llama is None:
            raise Unavailable("needs a llama.cpp vocabulary pointer")
        self.ll = llguidance
        self._apply = lnp.apply_token_bitmask_inplace
        self.tok = llguidance.llamacpp.lltokenizer_from_vocab(vocab._llama._model.vocab)
        self.opts = {"whitespace_flexible": False}

    def compile(self, schema: Any) -> Any:
        M = self.ll.LLMatcher
        g = M.grammar_from_json_schema(schema, defaults=self.opts)
        m = M(self.tok, g, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return (g, m)

    def walk(self, h: Any, tokens: list[int], logits: np.ndarray, eos: int, rec: Samples) -> bool:
        m = h[1]
        buf = np.zeros((1, (logits.shape[0] + 31) // 32), dtype=np.int32)
        row = buf[0]
        ptr, nb = buf.ctypes.data, buf.nbytes
        lg = logits[None, :]
        compute, consume, apply = m.unsafe_compute_mask_ptr, m.consume_token, self._apply
        am, aa, ap = rec.mask.append, rec.adv.append, rec.apply.append
        for tok in tokens:
            t0 = _pc()
            compute(ptr, nb)
            t1 = _pc()
            ok = _bit(row, tok)
            t2 = _pc()
            apply(lg, buf)
            t3 = _pc()
            ap(t3 - t2)
            if not ok:
                am(t1 - t0)
                aa(0)
                return False
            t4 = _pc()
            ok = consume(tok)
            t5 = _pc()
            am(t1 - t0)
            aa(t5 - t4)
            if not ok:
                return False
        t0 = _pc()
        compute(ptr, nb)
        t1 = _pc()
        apply(lg, buf)
        t2 = _pc()
        am(t1 - t0)
        aa(0)
        ap(t2 - t1)
        return _bit(row, eos)

    def accepts(self, h: Any, tokens: list[int], text: bytes) -> bool:
        m = self.ll.LLMatcher(self.tok, h[0], log_level=0)
        return bool(m.consume_tokens(tokens)) and not m.is_error() and bool(m.is_accepting())

    def version(self) -> str:
        return _version("llguidance")

    def describe(self) -> str:
        return "LLMatcher(grammar_from_json_schema(schema, whitespace_flexible=False))"


# ----------------------------------------------------------------------------- xgrammar

class XGrammar(Engine):
    name = "xgrammar"
    apply_name = "xgrammar.apply_token_bitmask_inplace (torch CPU)"

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads

    def setup(self, vocab: Vocab) -> None:
        try:
            import torch
            import xgrammar as xgr
        except Exception as e:  # noqa: BLE001 - any import failure (CUDA builds, ABI) means unavailable
            raise Unavailable(f"import failed ({type(e).__name__}: {e})") from None
        self.xgr, self.torch = xgr, torch
        ti = xgr.TokenizerInfo(list(vocab.token_bytes), xgr.VocabType.RAW, vocab_size=vocab.n_tokens,
                               stop_token_ids=sorted(vocab.eog_ids))
        self.compiler = xgr.GrammarCompiler(ti, max_threads=self.threads, cache_enabled=False)
        self.stop = min(vocab.eog_ids)

    def compile(self, schema: Any) -> Any:
        cg = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
        return (cg, self.xgr.GrammarMatcher(cg))

    def walk(self, h: Any, tokens: list[int], logits: np.ndarray, eos: int, rec: Samples) -> bool:
        m = h[1]
        torch = self.torch
        buf = np.zeros((1, (logits.shape[0] + 31) // 32), dtype=np.int32)
        row = buf[0]
        tbuf = torch.from_numpy(buf)
        tlog = torch.from_numpy(logits)[None, :]
        fill, accept = m.fill_next_token_bitmask, m.accept_token
        apply = self.xgr.apply_token_bitmask_inplace
        am, aa, ap = rec.mask.append, rec.adv.append, rec.apply.append
        for tok in tokens:
            t0 = _pc()
            fill(buf)
            t1 = _pc()
            ok = _bit(row, tok)
            t2 = _pc()
            apply(tlog, tbuf)
            t3 = _pc()
            ap(t3 - t2)
            if not ok:
                am(t1 - t0)
                aa(0)
                return False
            t4 = _pc()
            ok = accept(tok)
            t5 = _pc()
            am(t1 - t0)
            aa(t5 - t4)
            if not ok:
                return False
        t0 = _pc()
        fill(buf)
        t1 = _pc()
        apply(tlog, tbuf)
        t2 = _pc()
        am(t1 - t0)
        aa(0)
        ap(t2 - t1)
        return _bit(row, eos)

    def accepts(self, h: Any, tokens: list[int], text: bytes) -> bool:
        m = self.xgr.GrammarMatcher(h[0])
        for tok in tokens:
            if not m.accept_token(tok):
                return False
        return bool(m.accept_token(self.stop))

    def native_bytes(self, h: Any) -> int:
        return int(h[0].memory_size_bytes)

    def version(self) -> str:
        return _version("xgrammar") + f" (torch {_version('torch')}, max_threads={self.threads})"

    def describe(self) -> str:
        return ("GrammarCompiler(TokenizerInfo(raw bytes, specials b''), cache off).compile_json_schema("
                "any_whitespace=False, separators=(',', ':'))")


# ----------------------------------------------------------------------------- outlines-core

class OutlinesCore(Engine):
    name = "outlines-core"
    apply_name = "numpy reference (outlines-core's numpy kernel needs numba, its torch kernel torch.compile)"

    def setup(self, vocab: Vocab) -> None:
        try:
            import outlines_core as oc
        except ImportError as e:
            raise Unavailable(f"not installed ({e})") from None
        import llama_cpp

        self.oc = oc
        lv = vocab._llama._model.vocab if vocab._llama is not None else None
        eos = int(llama_cpp.llama_vocab_eos(lv)) if lv is not None else min(vocab.eog_ids)
        mp: dict[bytes, list[int]] = {}
        for i, b in enumerate(vocab.token_bytes):
            if b and i != eos:
                mp.setdefault(b, []).append(i)
        self.vocabulary = oc.Vocabulary(eos, mp)

    def compile(self, schema: Any) -> Any:
        rx = self.oc.json_schema.build_regex_from_schema(json.dumps(schema), "")
        idx = self.oc.Index(rx, self.vocabulary)
        return (idx, self.oc.Guide(idx))

    def walk(self, h: Any, tokens: list[int], logits: np.ndarray, eos: int, rec: Samples) -> bool:
        g = h[1]
        buf = np.zeros((logits.shape[0] + 31) // 32, dtype=np.int32)
        ptr, nw = buf.ctypes.data, buf.shape[0]
        write, advance = g.write_mask_into, g.advance
        am, aa, ap = rec.mask.append, rec.adv.append, rec.apply.append
        for tok in tokens:
            t0 = _pc()
            write(ptr, nw, 4)
            t1 = _pc()
            ok = _bit(buf, tok)
            t2 = _pc()
            numpy_apply(logits, buf)
            t3 = _pc()
            ap(t3 - t2)
            if not ok:
                am(t1 - t0)
                aa(0)
                return False
            t4 = _pc()
            try:
                advance(tok, False)
            except Exception:  # noqa: BLE001 - outlines raises on a token it does not allow
                return False
            t5 = _pc()
            am(t1 - t0)
            aa(t5 - t4)
        t0 = _pc()
        write(ptr, nw, 4)
        t1 = _pc()
        numpy_apply(logits, buf)
        t2 = _pc()
        am(t1 - t0)
        aa(0)
        ap(t2 - t1)
        return _bit(buf, eos)

    def accepts(self, h: Any, tokens: list[int], text: bytes) -> bool:
        g = self.oc.Guide(h[0])
        try:
            for tok in tokens:
                g.advance(tok, False)
        except Exception:  # noqa: BLE001
            return False
        return bool(g.is_finished())

    def version(self) -> str:
        return _version("outlines-core")

    def describe(self) -> str:
        return "Guide(Index(build_regex_from_schema(schema, whitespace_pattern=''), Vocabulary))"


class _OursWith(Ours):
    """:class:`Ours` with one back-end forced (``ours-dfa``, ``ours-lazy``: A/B of back-ends
    side by side in one run)."""

    def __init__(self, backend: str) -> None:
        super().__init__(backend)
        self.name = f"ours-{backend}"


ENGINES: dict[str, Callable[[], Engine]] = {
    "ours": Ours,
    "ours-dfa": lambda: _OursWith("dfa"),
    "ours-lazy": lambda: _OursWith("lazy"),
    "llguidance": LLGuidance,
    "xgrammar": XGrammar,
    "outlines-core": OutlinesCore,
}


def make_engine(name: str, **kw: Any) -> Engine:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
    return ENGINES[name](**kw) if kw else ENGINES[name]()
