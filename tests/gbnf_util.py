"""Test helpers for the GBNF suites: sdist grammars, random DFA walks, shared vocab.

The example grammars come from the llama-cpp-python 0.3.36 sdist
(``vendor/llama.cpp/grammars/*.gbnf``), fetched once with ``pip download --no-binary
:all: --no-deps`` into ``~/.cache/guarded-decoding/sdist`` (override with
``GUARDED_DECODING_CACHE``) and extracted next to it.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

from decoding.automaton import DFA

__all__ = ["SDIST_VERSION", "sdist_grammars", "random_walks", "REPO", "SHARED"]

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / ".." / "shared"
SDIST_VERSION = "0.3.36"


def _cache() -> Path:
    base = os.environ.get("GUARDED_DECODING_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "guarded-decoding"


def sdist_grammars() -> dict[str, str]:
    """``{file name: text}`` of the example grammars shipped in the sdist."""
    cache = _cache() / "sdist"
    out_dir = cache / f"grammars-{SDIST_VERSION}"
    if not out_dir.is_dir() or not any(out_dir.glob("*.gbnf")):
        cache.mkdir(parents=True, exist_ok=True)
        tarball = cache / f"llama_cpp_python-{SDIST_VERSION}.tar.gz"
        if not tarball.is_file():
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                            "--no-deps", f"llama-cpp-python=={SDIST_VERSION}",
                            "-d", str(cache)], check=True, capture_output=True)
        tmp = cache / f"grammars-{SDIST_VERSION}.tmp"
        tmp.mkdir(exist_ok=True)
        prefix = f"llama_cpp_python-{SDIST_VERSION}/vendor/llama.cpp/grammars/"
        with tarfile.open(tarball) as tf:
            for m in tf.getmembers():
                if m.name.startswith(prefix) and m.name.endswith(".gbnf") and m.isfile():
                    data = tf.extractfile(m).read()  # type: ignore[union-attr]
                    (tmp / Path(m.name).name).write_bytes(data)
        tmp.rename(out_dir)
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(out_dir.glob("*.gbnf"))}


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
