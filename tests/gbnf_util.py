"""Test helpers for the GBNF suites: llama.cpp's example grammars, random DFA walks.

The example grammars are read from ``../shared/corpora/gbnf/llama.cpp-0.3.36/`` (exactly as
shipped in ``vendor/llama.cpp/grammars/`` of the llama-cpp-python 0.3.36 sdist).  Nothing is
downloaded: a missing corpus is a test failure that names the folder.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from decoding.backends.automaton import DFA

__all__ = ["SDIST_VERSION", "GBNF_DIR", "sdist_grammars", "random_walks", "REPO", "SHARED"]

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / ".." / "shared"
SDIST_VERSION = "0.3.36"


GBNF_DIR = SHARED / "corpora" / "gbnf" / f"llama.cpp-{SDIST_VERSION}"


def sdist_grammars() -> dict[str, str]:
    """``{file name: text}`` of llama.cpp's example grammars (from ``shared/``, no network)."""
    files = sorted(GBNF_DIR.glob("*.gbnf"))
    if not files:
        raise FileNotFoundError(f"{GBNF_DIR.resolve()}: no .gbnf files; the shared corpora are missing")
    return {p.name: p.read_text(encoding="utf-8") for p in files}


def random_walks(dfa: DFA, n: int, *, seed: int = 0, max_len: int = 60,
                 stop: float = 0.15, avoid_nul: bool = True) -> list[bytes]:
    """``n`` accepted byte strings from random walks over ``dfa`` (byte transitions only).

    Walks take random transitions, stop at an accepting state with probability ``stop``,
    and after ``max_len`` bytes head for the nearest accepting state."""
    rng = random.Random(seed)
    dist = dfa.min_steps_to_accept()
    classes: list[list[int]] = [[] for _ in range(dfa.n_classes)]
    for b in range(256):
        if avoid_nul and b == 0:
            continue
        classes[int(dfa.byte_class[b])].append(b)
    trans = dfa.trans[:, :dfa.n_classes]
    out = []
    for _ in range(n):
        s, buf = 0, bytearray()
        while True:
            if dfa.accepting[s] and (len(buf) >= max_len or rng.random() < stop):
                break
            opts = [c for c in np.nonzero(trans[s] >= 0)[0] if classes[c]]
            if len(buf) >= max_len:
                best = min(dist[trans[s, c]] for c in opts) if opts else None
                opts = [c for c in opts if dist[trans[s, c]] == best]
            if not opts:
                if dfa.accepting[s]:
                    break
                raise AssertionError("walk got stuck in a non-accepting state")
            c = rng.choice(opts)
            buf.append(rng.choice(classes[c]))
            s = int(trans[s, c])
        out.append(bytes(buf))
    return out
