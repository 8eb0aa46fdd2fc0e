"""vLLM v1 integration: a batch-level logits processor driven by this project's grammars.

Usage (vLLM >= 0.10, the v1 engine)::

    from vllm import LLM, SamplingParams
    from decoding.integrations.vllm import GuardedLogitsProcessor

    llm = LLM("HuggingFaceTB/SmolLM2-135M-Instruct", logits_processors=[GuardedLogitsProcessor],
              additional_config={"guarded_decoding": {"tokenizer": "smollm2.gguf"}})
    sp = SamplingParams(max_tokens=128, extra_args={"guarded_decoding": {"json_schema": schema}})
    out = llm.generate(["Describe a user as JSON:"], sp)

A request opts in through ``SamplingParams.extra_args["guarded_decoding"]``, a dict with
exactly one grammar (:data:`GRAMMAR_FIELDS`):

- ``{"json_schema": <dict or JSON text>}``
- ``{"dtd": <DTD text, or a file name under dtd_dir>, "root": "<element>"}``
- ``{"gbnf": "<GBNF text>"}``
- ``{"artifact": "<grammar key, or a file name under artifacts_dir>"}`` (precompiled with
  ``python -m decoding compile``)

and optionally ``"options"`` (front-end options, as ``Compiler.compile_source`` takes them),
``"budget"`` (default true: budget-aware closing within ``SamplingParams.max_tokens``, as in
``python -m decoding serve``) and ``"id"`` (a name used in error reports; default: the row).
Requests without the key are not touched.

Settings (first found wins): keyword arguments of the constructor, then
``vllm_config.additional_config["guarded_decoding"]``, then the environment
(``DECODING_TOKENIZER``, ``DECODING_ARTIFACTS_DIR``, ``DECODING_DTD_DIR``):
``tokenizer`` (a GGUF file with the served model's tokenizer: the grammar's token masks are
built for its exact token bytes; required), ``artifacts_dir``, ``dtd_dir``, ``cache_dir``.

Invariants
- one :class:`~decoding.runtime.matcher.Matcher` (a ``BudgetMatcher`` with a budget) per
  constrained request, keyed by its batch row; ``update_state`` applies vLLM's
  :class:`BatchUpdate` in the documented order (removed, added, moved: a unidirectional
  move ``a -> b`` leaves ``a`` empty, a swap exchanges the rows) and then advances every
  matcher over the request's new output tokens (vLLM hands each added request's live
  ``output_tok_ids`` list; the processor remembers how many it consumed);
- ``apply`` masks each constrained row: float32 CPU rows in place with the native kernel
  (:func:`decoding._native.apply_mask` on the tensor's memory, through a NumPy view);
  anything else (CUDA, other dtypes) with the documented fallback: the rows' uint32
  bitmasks are stacked, moved to the logits' device, expanded to booleans there and
  applied with ``masked_fill_`` (one host-to-device copy per step, no per-token Python);
- columns past the tokenizer's vocabulary (vLLM pads the vocabulary) are always masked;
- errors are per request: a grammar that does not compile, an unknown artifact, or a
  sampled token the grammar forbids is recorded in :attr:`GuardedLogitsProcessor.failures`
  (and logged); from then on that row allows only end-of-generation tokens, so the request
  ends at once, and the other rows are unaffected.  Nothing is swallowed: a failed request's
  text is incomplete and must be treated as failed (the client sees only a short answer,
  since vLLM has no channel from a logits processor to a request's output: check the
  answer with :mod:`decoding.guard`, or read ``failures`` in-process).

vLLM is imported lazily: when it is importable the class subclasses
``vllm.v1.sample.logits_processor.LogitsProcessor``; otherwise it subclasses a local
stand-in with the same methods, and :class:`BatchUpdate` / :class:`MoveDirectionality`
here mirror vLLM's (same field names and order), which is what the tests drive when
vLLM is not installed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from enum import Enum, auto
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from decoding import _native
from decoding.backends.contract import CompiledGrammar
from decoding.compiler import Compiler
from decoding.errors import DecodingError, ProcessorError, UsageError
from decoding.runtime.matcher import Matcher

__all__ = ["GuardedLogitsProcessor", "RequestFailure", "BatchUpdate", "MoveDirectionality",
           "GRAMMAR_FIELDS", "EXTRA_ARGS_KEY", "VLLM_AVAILABLE"]

log = logging.getLogger("decoding.vllm")

EXTRA_ARGS_KEY = "guarded_decoding"
GRAMMAR_FIELDS = ("json_schema", "dtd", "gbnf", "artifact")
_SPEC_FIELDS = set(GRAMMAR_FIELDS) | {"root", "options", "budget", "id"}

try:  # the real interface when vLLM is installed
    from vllm.v1.sample.logits_processor import BatchUpdate as _VBatchUpdate  # type: ignore
    from vllm.v1.sample.logits_processor import LogitsProcessor as _Base  # type: ignore
    from vllm.v1.sample.logits_processor import MoveDirectionality as _VMove  # type: ignore
    VLLM_AVAILABLE = True
except Exception:  # noqa: BLE001 - vLLM absent or not importable here: the stand-in below
    VLLM_AVAILABLE = False
    _VBatchUpdate = _VMove = None

    class _Base:  # type: ignore[no-redef]
        """Stand-in for ``vllm.v1.sample.logits_processor.LogitsProcessor`` (same methods)."""

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            return None


if VLLM_AVAILABLE:
    BatchUpdate = _VBatchUpdate
    MoveDirectionality = _VMove
else:
    class MoveDirectionality(Enum):  # type: ignore[no-redef]
        """Mirror of vLLM's ``MoveDirectionality``."""
        UNIDIRECTIONAL = auto()
        SWAP = auto()

    @dataclass(frozen=True)
    class BatchUpdate:  # type: ignore[no-redef]
        """Mirror of vLLM's ``BatchUpdate``: ``removed`` row indices, ``added``
        ``(index, params, prompt_tok_ids, output_tok_ids)``, ``moved`` ``(a, b, direction)``."""
        batch_size: int
        removed: Sequence[int]
        added: Sequence[tuple]
        moved: Sequence[tuple]


@dataclass(frozen=True)
class RequestFailure:
    """One failed request: its ``id`` (the spec's ``"id"`` or ``"row <i>"``), the row it
    had when it failed and the error (a :class:`~decoding.errors.DecodingError`)."""

    id: str
    row: int
    error: BaseException


@dataclass
class _Req:
    id: str
    output: list  # vLLM's live list of output token ids (a reference)
    matcher: Matcher | None = None
    consumed: int = 0
    error: BaseException | None = None
    finished: bool = False


def _spec_of(params: Any) -> dict | None:
    extra = getattr(params, "extra_args", None) or {}
    if not isinstance(extra, dict) or EXTRA_ARGS_KEY not in extra:
        return None
    return extra[EXTRA_ARGS_KEY]


def check_spec(spec: Any) -> None:
    """Raise :class:`UsageError` if ``spec`` (the ``extra_args`` value) is malformed."""
    where = f"SamplingParams.extra_args[{EXTRA_ARGS_KEY!r}]"
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: must be a dict naming a grammar ({', '.join(GRAMMAR_FIELDS)}), "
                         f"not {type(spec).__name__}")
    unknown = sorted(set(spec) - _SPEC_FIELDS)
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(sorted(_SPEC_FIELDS))}")
    named = [k for k in GRAMMAR_FIELDS if k in spec]
    if len(named) != 1:
        raise UsageError(f"{where}: exactly one of {', '.join(GRAMMAR_FIELDS)} is needed, got "
                         f"{', '.join(named) or 'none'}")
    if "dtd" in spec and not isinstance(spec.get("root"), str):
        raise UsageError(f"{where}: a 'dtd' grammar needs 'root' (the root element name)")
    if not isinstance(spec.get("options", {}), dict):
        raise UsageError(f"{where}: 'options' must be a dict of front-end options")


class GuardedLogitsProcessor(_Base):
    """vLLM v1 batch logits processor enforcing this project's grammars (module docstring)."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """vLLM calls this on each request before it is scheduled: a malformed spec raises
        :class:`~decoding.errors.UsageError` (a ``ValueError``: HTTP 400 in vLLM's server)."""
        spec = _spec_of(sampling_params)
        if spec is not None:
            check_spec(spec)  # UsageError is a ValueError, as vLLM expects

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool, *,
                 compiler: Compiler | None = None, tokenizer: Any = None,
                 artifacts_dir: str | os.PathLike | None = None, dtd_dir: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None, use_native: bool = True) -> None:
        cfg = dict(((getattr(vllm_config, "additional_config", None) or {}).get(EXTRA_ARGS_KEY)) or {})

        def setting(name: str, value: Any, env: str) -> Any:
            if value is not None:
                return value
            return cfg.get(name) if cfg.get(name) is not None else os.environ.get(env)

        if compiler is None:
            tok = setting("tokenizer", tokenizer, "DECODING_TOKENIZER")
            if tok is None:
                raise UsageError("GuardedLogitsProcessor: no tokenizer; pass additional_config="
                                 "{'guarded_decoding': {'tokenizer': '<model>.gguf'}} to vllm.LLM, or set "
                                 "$DECODING_TOKENIZER (a GGUF file with the served model's tokenizer)")
            cache = setting("cache_dir", cache_dir, "DECODING_CACHE_DIR")
            compiler = Compiler(tok, cache=cache if cache is not None else True)
        self.compiler = compiler
        self.vocab = compiler.vocab
        ad = setting("artifacts_dir", artifacts_dir, "DECODING_ARTIFACTS_DIR")
        dd = setting("dtd_dir", dtd_dir, "DECODING_DTD_DIR")
        self.artifacts_dir = Path(ad) if ad else None
        self.dtd_dir = Path(dd) if dd else None
        self.device = device
        self.use_native = use_native
        self._rows: dict[int, _Req] = {}
        self.failures: list[RequestFailure] = []
        self._eog = np.array(sorted(t for t in self.vocab.eog_ids if 0 <= t < self.vocab.n_tokens), dtype=np.intp)
        nw = (self.vocab.n_tokens + 31) // 32
        self._eog_mask = np.zeros(nw, dtype=np.uint32)
        for t in self._eog.tolist():
            self._eog_mask[t >> 5] |= np.uint32(1 << (t & 31))

    # ------------------------------------------------------------------ vLLM interface
    def is_argmax_invariant(self) -> bool:
        return False  # masking changes the greedy choice

    def update_state(self, batch_update: Any) -> None:
        if batch_update is not None:
            for index in batch_update.removed:
                self._rows.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                req = self._new_request(index, params, output)
                if req is None:
                    self._rows.pop(index, None)
                else:
                    self._rows[index] = req
            for a, b, direction in batch_update.moved:
                ra, rb = self._rows.pop(a, None), self._rows.pop(b, None)
                if ra is not None:
                    self._rows[b] = ra
                if rb is not None and direction == MoveDirectionality.SWAP:
                    self._rows[a] = rb
        for row, req in self._rows.items():
            self._sync(row, req)

    def apply(self, logits: Any) -> Any:
        if not self._rows:
            return logits
        import torch

        n_cols = int(logits.shape[1])
        rows = sorted(r for r in self._rows if r < logits.shape[0])
        masks = [self._mask_of(r, self._rows[r]) for r in rows]
        if self.use_native and logits.device.type == "cpu" and logits.dtype == torch.float32:
            for r, m in zip(rows, masks):
                try:
                    self._apply_native(logits[r], m, n_cols)
                except Exception as e:  # noqa: BLE001 - this request fails, the batch goes on
                    self._fail(r, self._rows[r], e)
                    self._apply_native(logits[r], self._eog_mask, n_cols)
            return logits
        # fallback (CUDA, other dtypes): bitmasks to the device, expanded there
        words = np.stack(masks).view(np.int32)
        dev = torch.from_numpy(words).to(logits.device, non_blocking=False)
        shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
        allowed = ((dev.unsqueeze(-1) >> shifts) & 1).bool().reshape(len(rows), -1)
        if allowed.shape[1] < n_cols:
            pad = torch.zeros((len(rows), n_cols - allowed.shape[1]), dtype=torch.bool, device=logits.device)
            allowed = torch.cat([allowed, pad], dim=1)
        idx = torch.tensor(rows, device=logits.device, dtype=torch.long)
        logits[idx] = logits[idx].masked_fill(~allowed[:, :n_cols], float("-inf"))
        return logits

    # ------------------------------------------------------------------ per request
    def _new_request(self, index: int, params: Any, output: list) -> _Req | None:
        spec = _spec_of(params)
        if spec is None:
            return None
        rid = str(spec.get("id")) if isinstance(spec, dict) and spec.get("id") is not None else f"row {index}"
        req = _Req(rid, output)
        try:
            check_spec(spec)
            cg = self._compile(spec)
            budget = getattr(params, "max_tokens", None) if spec.get("budget", True) else None
            if budget is not None:
                from decoding.runtime.budget import BudgetMatcher

                req.matcher = BudgetMatcher(cg, int(budget))
            else:
                req.matcher = Matcher(cg)
        except Exception as e:  # noqa: BLE001 - recorded for this request only
            self._fail(index, req, e)
        return req

    def _compile(self, spec: dict) -> CompiledGrammar:
        opts = dict(spec.get("options") or {})
        c = self.compiler
        if "json_schema" in spec:
            return c.compile_json_schema(spec["json_schema"], **opts)
        if "gbnf" in spec:
            return c.compile_gbnf(spec["gbnf"], **opts)
        if "dtd" in spec:
            dtd = spec["dtd"]
            if "<" not in dtd:  # a file name, only under dtd_dir
                if self.dtd_dir is None:
                    raise UsageError(f"dtd {dtd!r}: a DTD file name needs the 'dtd_dir' setting")
                path = (self.dtd_dir / dtd).resolve()
                if self.dtd_dir.resolve() not in path.parents:
                    raise UsageError(f"dtd {dtd!r}: outside dtd_dir {self.dtd_dir}")
                return c.compile_dtd(path, root=spec["root"], base_dir=self.dtd_dir, **opts)
            return c.compile_dtd(dtd, root=spec["root"], base_dir=self.dtd_dir, **opts)
        return self._artifact(str(spec["artifact"]))

    def _artifact(self, name: str) -> CompiledGrammar:
        from decoding.artifacts.format import ARTIFACT_SUFFIX, load_artifact

        if self.compiler.cache is not None:
            cg = self.compiler.cache.lookup(name, self.vocab)
            if cg is not None:
                return cg
        if self.artifacts_dir is not None:
            fname = name if name.endswith(ARTIFACT_SUFFIX) else name + ARTIFACT_SUFFIX
            path = (self.artifacts_dir / fname).resolve()
            if self.artifacts_dir.resolve() in path.parents and path.is_file():
                return load_artifact(path, self.vocab)
        raise UsageError(f"artifact {name!r}: no such grammar key in the cache"
                         + (f" nor file in {self.artifacts_dir}" if self.artifacts_dir else
                            " (and no 'artifacts_dir' setting)"))

    def _sync(self, row: int, req: _Req) -> None:
        """Advance ``req``'s matcher over the output tokens vLLM appended since last time."""
        if req.error is not None or req.matcher is None:
            return
        out = req.output
        try:
            if len(out) < req.consumed:  # the output was rewound (e.g. preempted): replay
                req.matcher.reset()
                req.consumed, req.finished = 0, False
            while req.consumed < len(out):
                tok = int(out[req.consumed])
                if req.finished:
                    raise ProcessorError(f"token {tok} sampled after the grammar's end-of-generation")
                if not req.matcher.advance(tok):
                    req.matcher.raise_if_failed()
                    raise ProcessorError(f"token {tok} ({self._tok(tok)!r}) was sampled although the grammar "
                                         f"forbids it in state {req.matcher.state}; another processor or "
                                         "sampler overrode the mask")
                req.consumed += 1
                req.finished = req.matcher.finished
        except Exception as e:  # noqa: BLE001 - recorded for this request only
            self._fail(row, req, e)

    def _mask_of(self, row: int, req: _Req) -> np.ndarray:
        if req.error is None and req.matcher is not None and not req.finished:
            m = req.matcher.mask()
            if req.matcher.error is None:
                return m
            self._fail(row, req, req.matcher.error)
        return self._eog_mask

    def _apply_native(self, row: Any, mask: np.ndarray, n_cols: int) -> None:
        n = min(n_cols, mask.shape[0] * 32)
        _native.apply_mask(row[:n].numpy(), mask)
        if n < n_cols:
            row[n:] = float("-inf")

    def _fail(self, row: int, req: _Req, e: BaseException) -> None:
        if req.error is not None:
            return
        if not isinstance(e, DecodingError):
            e = ProcessorError(f"{type(e).__name__}: {e}")
        err = ProcessorError(f"vLLM request {req.id} (row {row}): {e}")
        err.__cause__ = e
        req.error = err
        self.failures.append(RequestFailure(req.id, row, err))
        log.error("guarded-decoding: %s", err)

    def _tok(self, tok: int) -> bytes:
        tb = self.vocab.token_bytes
        return tb[tok] if 0 <= tok < len(tb) else b"?"

    # ------------------------------------------------------------------ inspection
    def request_error(self, row: int) -> BaseException | None:
        """The recorded error of the request now in ``row`` (None if it has none or is not
        constrained)."""
        req = self._rows.get(row)
        return None if req is None else req.error

    def constrained_rows(self) -> list[int]:
        return sorted(self._rows)
