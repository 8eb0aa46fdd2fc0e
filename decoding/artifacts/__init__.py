"""Artifacts: the versioned binary format of compiled grammars and the on-disk/in-memory cache."""
