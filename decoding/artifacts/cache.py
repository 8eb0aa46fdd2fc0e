"""Grammar cache: storage only.  An in-process LRU of compiled grammars plus an on-disk
artifact directory, both keyed by :func:`decoding.ir.key.grammar_key`.

Compiling is :class:`decoding.compiler.Compiler`'s job; it looks grammars up here and
stores what it compiled.  The directory is ``GUARDED_DECODING_CACHE`` if set, else
``$XDG_CACHE_HOME/guarded-decoding``, else ``~/.cache/guarded-decoding``.

Invariants
- an entry is stored under its own ``grammar_key`` (canonical IR + tokenizer fingerprint +
  format version), so equal grammars share one entry whatever their source formatting;
- a disk entry is used only after :func:`~decoding.artifacts.format.load_artifact` verified
  it (checksum, tokenizer fingerprint, key); a corrupt or mismatched file is never used: it
  counts in ``stats["disk_errors"]`` and the caller compiles and replaces it;
- files are written atomically (temporary file + rename), so concurrent processes see
  either no artifact or a whole one; a grammar whose back-end cannot be written as an
  artifact stays in memory only;
- ``alias`` entries (a request's source text -> key) only skip the front-end on a repeated
  identical request: they lead to an entry of the LRU or to nothing.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

from decoding.artifacts.format import ARTIFACT_SUFFIX, load_artifact, write_artifact
from decoding.limits import DEFAULT_LIMITS
from decoding.backends.contract import CompiledGrammar
from decoding.errors import ArtifactError
from decoding.vocab import Vocab

__all__ = ["GrammarCache", "default_cache_dir", "default_cache", "ENV_VAR"]

ENV_VAR = "GUARDED_DECODING_CACHE"
_MAX_ALIASES = 4096


def default_cache_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "guarded-decoding"


def _fits(cg: CompiledGrammar, backend: str) -> bool:
    return backend == "auto" or cg.backend == backend


class GrammarCache:
    """LRU of ``capacity`` compiled grammars in memory, backed by ``directory`` on disk
    (``directory=None``: the default cache dir; ``False``: memory only).  Thread-safe.

    ``stats``: ``memory_hits``, ``disk_hits``, ``compiles`` (grammars stored after a miss)
    and ``disk_errors`` (unusable files met on lookup)."""

    def __init__(self, directory: str | os.PathLike | None | bool = None, *, capacity: int = 32) -> None:
        if directory is None or directory is True:
            directory = default_cache_dir()
        self.directory = None if directory is False else Path(directory)
        self.capacity = max(1, int(capacity))
        self._lru: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._alias: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = {"memory_hits": 0, "disk_hits": 0, "compiles": 0, "disk_errors": 0}

    def path_for(self, key: str) -> Path | None:
        """Where the artifact of ``key`` lives (``None`` for a memory-only cache)."""
        return None if self.directory is None else self.directory / f"{key}{ARTIFACT_SUFFIX}"

    # ------------------------------------------------------------------ memory
    def get(self, key: str, *, backend: str = "auto") -> CompiledGrammar | None:
        """The entry of ``key`` in memory (built by ``backend`` unless ``"auto"``), without
        counting a hit."""
        with self._lock:
            cg = self._lru.get(key)
            if cg is None or not _fits(cg, backend):
                return None
            self._lru.move_to_end(key)
            return cg

    def put(self, cg: CompiledGrammar) -> None:
        """Keep ``cg`` in memory under its ``grammar_key`` (evicting the least recently used)."""
        if not cg.grammar_key:
            raise ArtifactError("grammar cache: cannot store a grammar without a grammar key")
        with self._lock:
            self._lru[cg.grammar_key] = cg
            self._lru.move_to_end(cg.grammar_key)
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)

    def clear_memory(self) -> None:
        with self._lock:
            self._lru.clear()
            self._alias.clear()

    def __len__(self) -> int:
        return len(self._lru)

    # ------------------------------------------------------------------ aliases
    def alias(self, alias: str, key: str) -> None:
        """Remember that the request ``alias`` compiles to ``key``."""
        with self._lock:
            self._alias[alias] = key
            self._alias.move_to_end(alias)
            while len(self._alias) > _MAX_ALIASES:
                self._alias.popitem(last=False)

    def get_alias(self, alias: str, *, backend: str = "auto") -> CompiledGrammar | None:
        """The in-memory entry a remembered request leads to (a memory hit), or ``None``."""
        with self._lock:
            key = self._alias.get(alias)
        cg = None if key is None else self.get(key, backend=backend)
        if cg is not None:
            self._count("memory_hits")
        return cg

    # ------------------------------------------------------------------ lookup / store
    def lookup(self, key: str, vocab: Vocab, *, backend: str = "auto",
               max_states: int | None = None) -> CompiledGrammar | None:
        """The grammar of ``key`` for ``vocab``: from memory, else from a verified artifact in
        the directory (then kept in memory), else ``None``.  ``max_states``: the DFA size the
        caller compiles to; an artifact up to that size loads even above the default
        ``Limits.max_dfa_states`` (the cache stores what the caller's own limit let through)."""
        cg = self.get(key, backend=backend)
        if cg is not None:
            self._count("memory_hits")
            return cg
        path = self.path_for(key)
        if path is None or not path.is_file():
            return None
        try:
            lim = DEFAULT_LIMITS
            if max_states is not None and max_states > lim.max_dfa_states:
                lim = replace(lim, max_dfa_states=int(max_states))
            cg = load_artifact(path, vocab, expect_key=key, limits=lim)
        except ArtifactError:
            self._count("disk_errors")
            return None
        if not _fits(cg, backend):
            return None
        self._count("disk_hits")
        self.put(cg)
        return cg

    def store(self, cg: CompiledGrammar, **artifact: Any) -> None:
        """Keep a freshly compiled ``cg`` in memory and write its artifact to the directory
        (``artifact``: header fields for :func:`~decoding.artifacts.format.write_artifact`:
        ``name``, ``kind``, ``options``, ``source``).  A back-end that cannot be written as
        an artifact (:class:`~decoding.errors.ArtifactError`) stays in memory only, and so
        does a lazy grammar: writing one makes its whole automaton and every mask (auto's
        lazy grammars are the largest: seconds), which a compile does not wait for."""
        self._count("compiles")
        self.put(cg)
        path = self.path_for(cg.grammar_key)
        if path is None or cg.backend == "lazy":
            return
        try:
            write_artifact(cg, path, **artifact)
        except ArtifactError:
            pass

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1


_default: list[GrammarCache] = []
_default_lock = threading.Lock()


def default_cache() -> GrammarCache:
    """The process-wide cache (default directory, 32 grammars in memory)."""
    with _default_lock:
        if not _default:
            _default.append(GrammarCache())
        return _default[0]
