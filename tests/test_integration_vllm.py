"""decoding.integrations.vllm on synthetic batches (issue 17).

The processor is driven exactly as vLLM's v1 engine drives a batch-level logits processor:
``update_state(BatchUpdate | None)`` before every step, then ``apply(logits)`` on the
``(batch, vocab)`` float32 logits.  When vLLM is importable the real ``BatchUpdate``,
``MoveDirectionality`` and ``SamplingParams`` are used (the class then subclasses vLLM's
``LogitsProcessor``); otherwise the module's mirrors of them (same field names) and a plain
object with ``extra_args`` / ``max_tokens``.  Every constrained row is compared with a
standalone :class:`~decoding.runtime.matcher.Matcher` fed the same tokens.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the vLLM adapter masks torch tensors)")

from decoding.compiler import Compiler  # noqa: E402
from decoding.integrations.vllm import (VLLM_AVAILABLE, BatchUpdate, GuardedLogitsProcessor,  # noqa: E402
                                        MoveDirectionality)
from decoding.runtime.budget import BudgetMatcher  # noqa: E402
from decoding.runtime.matcher import Matcher  # noqa: E402

from conftest import ROOT, get_vocab  # noqa: E402

WEATHER = json.loads((ROOT / "grammars" / "get_weather.json").read_text())
PRODUCT = json.loads((ROOT / "grammars" / "search_product.json").read_text())
GBNF = 'root ::= "yes" | "no" | [0-9]{1,3}\n'
DTD = '<!ELEMENT r (a, b?)><!ELEMENT a (#PCDATA)><!ELEMENT b EMPTY>'


@pytest.fixture(scope="module")
def compiler():
    return Compiler(get_vocab("llama-bpe"), cache=True)


def params(spec=None, max_tokens=64):
    extra = None if spec is None else {"guarded_decoding": spec}
    if VLLM_AVAILABLE:
        from vllm import SamplingParams

        return SamplingParams(max_tokens=max_tokens, extra_args=extra)
    return SimpleNamespace(max_tokens=max_tokens, extra_args=extra)


class Req:
    """One request of the synthetic batch: its output list (shared with the processor, as
    vLLM shares it) and a standalone reference matcher."""

    def __init__(self, compiler, spec, budget_tokens=None):
        self.spec = spec
        self.output: list[int] = []
        self.ref = None
        if spec is not None and "bad" not in str(spec.get("id", "")):
            cg = _compile(compiler, spec)
            self.ref = BudgetMatcher(cg, budget_tokens) if budget_tokens else Matcher(cg)

    def added(self, row, max_tokens=64):
        return (row, params(self.spec, max_tokens), [1, 2, 3], self.output)


def _compile(compiler, spec):
    if "json_schema" in spec:
        return compiler.compile_json_schema(spec["json_schema"])
    if "gbnf" in spec:
        return compiler.compile_gbnf(spec["gbnf"])
    return compiler.compile_dtd(spec["dtd"], root=spec["root"])


def _update(removed=(), added=(), moved=(), size=0):
    return BatchUpdate(batch_size=size, removed=list(removed), added=list(added), moved=list(moved))


def _logits(rows, n_cols, seed):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((rows, n_cols)).astype(np.float32))


def _check(proc, batch, logits_in, logits_out, n_tokens):
    """Each row: constrained rows equal the reference matcher's mask, others untouched."""
    for row, req in batch.items():
        got = logits_out[row].numpy()
        raw = logits_in[row].numpy()
        if req.ref is None:
            if req.spec is None:
                assert np.array_equal(got, raw), f"row {row}: unconstrained row changed"
            continue
        if req.ref.finished:  # end-of-generation sampled: vLLM stops the request (removed next step)
            continue
        ids = req.ref.allowed_ids()
        allowed = np.zeros(got.shape[0], dtype=bool)
        allowed[ids] = True
        assert np.array_equal(np.isfinite(got), allowed), (
            f"row {row}: mask differs from the standalone matcher "
            f"({int(np.isfinite(got).sum())} vs {len(ids)} allowed)")
        assert np.array_equal(got[allowed], raw[allowed])
        assert not np.isfinite(got[n_tokens:]).any()


def _step(proc, batch, seed, n_cols):
    """One engine step: update_state(None), apply, then sample one allowed token per row
    (a random one among the reference's allowed tokens) and append it to the output."""
    proc.update_state(None)
    lin = _logits(max(batch) + 1, n_cols, seed)
    lout = proc.apply(lin.clone())
    _check(proc, batch, lin, lout, proc.vocab.n_tokens)
    rng = np.random.default_rng(seed)
    for req in batch.values():
        if req.ref is not None and not req.ref.finished:
            ids = [t for t in req.ref.allowed_ids() if t not in proc.vocab.eog_ids] or list(req.ref.allowed_ids())
            t = int(ids[rng.integers(len(ids))])
            assert req.ref.advance(t)
            if not req.ref.finished:
                req.output.append(t)


SPECS = [
    {"json_schema": WEATHER, "budget": False, "id": "weather"},
    {"gbnf": GBNF, "budget": False, "id": "gbnf"},
    {"dtd": DTD, "root": "r", "budget": False, "id": "dtd"},
    {"json_schema": PRODUCT, "budget": False, "id": "product"},
]


@pytest.mark.parametrize("use_native", [True, False], ids=["native-kernel", "torch-bitmask-fallback"])
def test_add_remove_reorder_matches_standalone_matchers(compiler, use_native):
    proc = GuardedLogitsProcessor(None, torch.device("cpu"), False, compiler=compiler, use_native=use_native)
    n_cols = proc.vocab.n_tokens + 64  # vLLM pads the vocabulary: padding columns stay masked
    batch = {0: Req(compiler, SPECS[0]), 1: Req(compiler, None), 2: Req(compiler, SPECS[1])}
    proc.update_state(_update(added=[batch[r].added(r) for r in batch], size=3))
    assert proc.constrained_rows() == [0, 2]
    for s in range(3):
        _step(proc, batch, s, n_cols)
    # add two (one into a new row), remove the unconstrained one
    batch[3], batch[4] = Req(compiler, SPECS[2]), Req(compiler, SPECS[3])
    del batch[1]
    proc.update_state(_update(removed=[1], added=[batch[3].added(3), batch[4].added(4)], size=4))
    _step(proc, batch, 10, n_cols)
    # swap 0 <-> 4
    proc.update_state(_update(moved=[(0, 4, MoveDirectionality.SWAP)], size=4))
    batch[0], batch[4] = batch[4], batch[0]
    _step(proc, batch, 11, n_cols)
    # condense: unidirectional 4 -> 1 (row 4 becomes empty)
    proc.update_state(_update(moved=[(4, 1, MoveDirectionality.UNIDIRECTIONAL)], size=4))
    batch[1] = batch.pop(4)
    assert proc.constrained_rows() == sorted(batch)
    for s in range(12, 20):
        _step(proc, batch, s, n_cols)
    # remove everything but row 3; a removed row's slot reused by a new unconstrained request
    proc.update_state(_update(removed=[0, 1, 2], added=[(0, params(None), [1], [])], size=2))
    batch = {3: batch[3], 0: Req(compiler, None)}
    assert proc.constrained_rows() == [3]
    _step(proc, batch, 30, n_cols)
    assert proc.failures == []


def test_masks_follow_whole_generations_to_the_end(compiler):
    """Rows walk until their grammar ends (budget-aware closing within max_tokens=30: the
    walk prefers text tokens, so only the budget makes it stop)."""
    proc = GuardedLogitsProcessor(None, torch.device("cpu"), False, compiler=compiler)
    specs = [dict(SPECS[1], budget=True), dict(SPECS[2], budget=True)]
    batch = {0: Req(compiler, specs[0], budget_tokens=30), 1: Req(compiler, specs[1], budget_tokens=30)}
    proc.update_state(_update(added=[batch[r].added(r, max_tokens=30) for r in batch], size=2))
    for s in range(200):
        if all(r.ref.finished for r in batch.values()):
            break
        _step(proc, batch, 100 + s, proc.vocab.n_tokens)
    assert all(r.ref.finished and len(r.output) <= 30 for r in batch.values())
    assert proc.failures == []


def test_budget_follows_max_tokens(compiler):
    spec = {"json_schema": WEATHER, "id": "budgeted"}
    proc = GuardedLogitsProcessor(None, torch.device("cpu"), False, compiler=compiler)
    req = Req(compiler, spec, budget_tokens=40)
    batch = {0: req}
    proc.update_state(_update(added=[req.added(0, max_tokens=40)], size=1))
    for s in range(60):
        if req.ref.finished:
            break
        _step(proc, batch, 200 + s, proc.vocab.n_tokens)
    assert req.ref.finished and len(req.output) <= 40
    assert proc.failures == []


BAD = [
    ({"json_schema": {"type": "string", "pattern": "(?<=a)b"}, "id": "bad-pattern"}, "lookaround"),
    ({"gbnf": "root ::= undefined-rule\n", "id": "bad-gbnf"}, "undefined-rule"),
    ({"dtd": "<!ELEMENT r (x)>", "root": "r", "id": "bad-dtd"}, "x"),
    ({"artifact": "no-such-key", "id": "bad-artifact"}, "no-such-key"),
    ({"gbnf": "root ::= \"a\"", "json_schema": {}, "id": "bad-two"}, "exactly one"),
]


@pytest.mark.parametrize("spec,needle", BAD, ids=[b[0]["id"] for b in BAD])
def test_bad_grammar_fails_only_its_request(compiler, spec, needle):
    proc = GuardedLogitsProcessor(None, torch.device("cpu"), False, compiler=compiler)
    batch = {0: Req(compiler, SPECS[0]), 1: Req(compiler, spec), 2: Req(compiler, None)}
    proc.update_state(_update(added=[batch[r].added(r) for r in batch], size=3))
    assert [f.id for f in proc.failures] == [spec["id"]]
    assert needle in str(proc.failures[0].error)
    assert proc.request_error(1) is proc.failures[0].error and proc.request_error(0) is None
    lin = _logits(3, proc.vocab.n_tokens, 5)
    lout = proc.apply(lin.clone())
    finite = np.nonzero(np.isfinite(lout[1].numpy()))[0]
    assert set(finite.tolist()) == set(proc.vocab.eog_ids)  # the failed row can only stop
    del batch[1]
    _check(proc, batch, lin, lout, proc.vocab.n_tokens)  # the others are untouched by the failure


def test_forbidden_sampled_token_fails_that_request_only(compiler):
    proc = GuardedLogitsProcessor(None, torch.device("cpu"), False, compiler=compiler)
    batch = {0: Req(compiler, SPECS[1]), 1: Req(compiler, SPECS[0])}
    proc.update_state(_update(added=[batch[r].added(r) for r in batch], size=2))
    bad = proc.vocab.tokenize("}")[0]
    assert not batch[0].ref.is_allowed(bad)
    batch[0].output.append(bad)  # another sampler overrode the mask
    proc.update_state(None)
    assert [f.id for f in proc.failures] == ["gbnf"]
    assert "was sampled although the grammar forbids it" in str(proc.failures[0].error)
    lin = _logits(2, proc.vocab.n_tokens, 7)
    lout = proc.apply(lin.clone())
    _check(proc, {1: batch[1]}, lin, lout, proc.vocab.n_tokens)


@pytest.mark.parametrize("extra,message", [
    ({"guarded_decoding": "root ::= \"a\""}, "must be a dict"),
    ({"guarded_decoding": {"gbnf": "root ::= \"a\"", "temperature": 1}}, "unknown field"),
    ({"guarded_decoding": {}}, "exactly one"),
    ({"guarded_decoding": {"dtd": DTD}}, "needs 'root'"),
])
def test_validate_params_refuses_malformed_specs(extra, message):
    p = SimpleNamespace(extra_args=extra, max_tokens=8)
    with pytest.raises(ValueError, match=message):
        GuardedLogitsProcessor.validate_params(p)


def test_validate_params_accepts_good_and_absent_specs():
    for p in (params(None), params(SPECS[0]), params({"artifact": "k"})):
        GuardedLogitsProcessor.validate_params(p)


def test_no_tokenizer_is_a_usage_error(monkeypatch):
    from decoding.errors import UsageError

    monkeypatch.delenv("DECODING_TOKENIZER", raising=False)
    with pytest.raises(UsageError, match="no tokenizer"):
        GuardedLogitsProcessor(SimpleNamespace(additional_config={}), torch.device("cpu"), False)


def test_artifact_by_grammar_key(compiler):
    cg = compiler.compile_json_schema(WEATHER)
    proc = GuardedLogitsProcessor(None, torch.device("cpu"), False, compiler=compiler)
    spec = {"artifact": cg.grammar_key, "budget": False}
    req = Req(compiler, {"json_schema": WEATHER})
    req.spec = spec
    proc.update_state(_update(added=[req.added(0)], size=1))
    assert proc.failures == []
    _step(proc, {0: req}, 1, proc.vocab.n_tokens)


def test_subclasses_vllm_interface_when_installed():
    if not VLLM_AVAILABLE:
        pytest.skip("vLLM not importable here: the adapter runs on its structural stand-in "
                    "(BatchUpdate/MoveDirectionality mirrors); see docs/scale-out.md")
    from vllm.v1.sample.logits_processor import LogitsProcessor

    assert issubclass(GuardedLogitsProcessor, LogitsProcessor)
