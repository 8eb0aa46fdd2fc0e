"""GBNF front-end: llama.cpp GBNF text -> grammar IR."""
