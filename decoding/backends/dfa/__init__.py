"""The explicit byte-DFA back-end: refs inlined, recursion unrolled, masks by a native trie walk."""
