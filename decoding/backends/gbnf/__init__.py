"""The GBNF back-end: IR -> llama.cpp GBNF text, checked by llama.cpp's own parser."""
