"""Shared fixtures: paths to ../shared, real vocabularies and the packaged models."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPORA = SHARED / "corpora"
VOCAB_DIR = CORPORA / "vocab"

_vocabs: dict = {}
_models: dict = {}


def vocab_path(name: str) -> Path:
    return VOCAB_DIR / f"ggml-vocab-{name}.gguf"


def get_vocab(name: str):
    """A real vocabulary: a shared vocab-only GGUF name (llama-bpe, gemma-4, ...) or a
    packaged model (smollm2, gemma3)."""
    from decoding.models import MODELS
    from decoding.vocab import Vocab

    if name not in _vocabs:
        if name in MODELS:
            _vocabs[name] = Vocab.from_llama(get_model(name), name=name)
        else:
            _vocabs[name] = Vocab.from_gguf(vocab_path(name))
    return _vocabs[name]


def get_model(name: str = "smollm2"):
    from decoding.models import load_model

    if name not in _models:
        _models[name] = load_model(name, n_ctx=1024)
    return _models[name]


@pytest.fixture(scope="session")
def smollm2():
    return get_model("smollm2")


@pytest.fixture(scope="session", autouse=True)
def _close_llama_objects():
    """Free llama.cpp objects before interpreter shutdown (avoids noise from late __del__)."""
    yield
    for llm in list(_models.values()) + [v._llama for v in _vocabs.values() if v._llama is not None]:
        try:
            llm.close()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass
