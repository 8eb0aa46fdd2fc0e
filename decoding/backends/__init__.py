"""Back-ends: compiled grammars for one tokenizer behind one contract (:mod:`decoding.backends.contract`)."""
