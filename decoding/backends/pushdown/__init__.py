"""The pushdown back-end: one small DFA per rule plus a stack of calls (docs/pushdown.md)."""
