"""The native state masker (``_native.state_mask``: one call per first-visited DFA state) gives
the masks of the Python composition it replaced (``DFAGrammar.native_masker = False``:
``walk_tokens`` with the plain-text shortcuts, then the special and end-of-generation bits),
state by state, and the same digest for interning.  Covered: unbounded and bounded string
bodies (chains of at most ``EAGER_UPTO`` characters, longer ones below the longest plain
token, and longer), XML text, anchors matched as special tokens, end-of-generation in accepting
states, tiny and real vocabularies, and the error paths of the binding."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import get_vocab
from decoding import _native, compile_json_schema
from decoding.backends.masks import SPARSE_MAX
from decoding.errors import LimitError
from decoding.frontends.jsonschema import compile_schema
from decoding.backends.select import compile_grammar
from decoding.ir import Grammar, Special, lit, plus, seq, char_class
from decoding.vocab import Vocab

SCHEMAS = [
    {"type": "string"},
    {"type": "string", "maxLength": 3},
    {"type": "string", "minLength": 2, "maxLength": 8},
    {"type": "string", "maxLength": 12},
    {"type": "string", "maxLength": 40},
    {"type": "string", "maxLength": 300},
    {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"},
                                      "t": {"type": "string", "maxLength": 20}}, "required": ["q", "n"]},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{0,3}$"}, "maxItems": 3},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"enum": ["alpha", "beta", "\u4e2d\u6587"]},
    {"type": "string", "format": "date"},
]


def _pair(build):
    """(native, reference) compiled twice from ``build()``; the reference composes in Python."""
    fast, ref = build(), build()
    fast, ref = getattr(fast, "inner", fast), getattr(ref, "inner", ref)
    ref.native_masker = False
    return fast, ref


def _same_masks(fast, ref, limit: int = 400) -> None:
    n = min(fast.dfa.n_states, limit)
    for s in range(n):
        assert np.array_equal(fast.mask(s), ref.mask(s)), f"state {s}"
    assert fast._masker, "the native masker was not used"
    assert ref._masker is False
    assert len(fast.masks) == len(ref.masks)  # the same interning (digest and sparse ids)
    assert np.array_equal(fast.state_masks(), ref.state_masks())  # the same ids, state by state
    for mid in range(len(fast.masks)):  # read back through each table's own storage
        assert np.array_equal(fast.masks.ids(mid), ref.masks.ids(mid))


@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(i) for i in range(len(SCHEMAS))])
@pytest.mark.parametrize("vocab_name", ["gpt-2", "llama-bpe", "gemma-4"])
def test_native_masks_equal_the_python_composition(schema, vocab_name):
    v = get_vocab(vocab_name)
    _same_masks(*_pair(lambda: compile_json_schema(schema, v, backend="dfa")))


def test_native_masks_on_an_xml_dtd():
    from decoding.frontends.xml.dtd import parse_dtd
    from decoding.frontends.xml.grammar import dtd_grammar

    v = get_vocab("gpt-2")
    g = dtd_grammar(parse_dtd("<!ELEMENT note (to, body)><!ELEMENT to (#PCDATA)><!ELEMENT body (#PCDATA)>"), "note")
    fast, ref = _pair(lambda: compile_grammar(g, v, backend="dfa"))
    _same_masks(fast, ref)
    assert any(fast._plain_chain("xml-text", s) is not None for s in range(fast.dfa.n_states))


def test_native_masks_without_plain_profiles():
    v = get_vocab("gpt-2")
    fast, ref = _pair(lambda: compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}}, v, backend="dfa"))
    fast._loop_profiles = ref._loop_profiles = ()
    _same_masks(fast, ref)


def test_native_masks_on_xml_text_and_special_tokens():
    toks = [b"", b"<a>", b"</a>", b"x", b"xy", b"xyz<", b"<", b"a", b">", b"/", b"\xe4\xb8\xad", b"\xe4", b"\xb8\xad",
            b"<|s|>", b"<|e|>"]
    v = Vocab.from_bytes(toks, eog_ids=[0], special={"<|s|>": 13, "<|e|>": 14})
    text = plus(char_class([(ord("<"), ord("<")), (ord("&"), ord("&")), (ord(">"), ord(">"))], negate=True))
    g = Grammar.single(seq(Special("<|s|>"), lit("<a>"), text, lit("</a>"), Special("<|e|>")))
    fast, ref = _pair(lambda: compile_grammar(g, v, backend="dfa"))
    _same_masks(fast, ref)
    assert any(fast.mask(s)[0] & (1 << 13) for s in range(fast.dfa.n_states))  # the anchor is allowed somewhere


def test_state_mask_digest_matches_mask_digest():
    v = get_vocab("llama-bpe")
    cg = compile_json_schema({"type": "object", "properties": {"s": {"type": "string"}}}, v, backend="dfa")
    cg.mask(0)
    for s in range(cg.dfa.n_states):
        m, buf = np.empty(v.n_words, dtype=np.uint32), np.empty(SPARSE_MAX, dtype=np.uint32)
        key, count, inverted = _native.state_mask(cg._masker, s, m, buf)
        ref_buf = np.empty(SPARSE_MAX, dtype=np.uint32)
        ref_key, ref_count = _native.mask_digest(m, v.n_tokens, ref_buf)
        assert key == ref_key
        if inverted:
            inv = ~m
            inv[-1] &= np.uint32((1 << (v.n_tokens & 31)) - 1) if v.n_tokens & 31 else np.uint32(0xFFFFFFFF)
            ids = np.nonzero(np.unpackbits(inv.view(np.uint8), bitorder="little")[:v.n_tokens])[0]
            assert count == len(ids) <= SPARSE_MAX and np.array_equal(buf[:count], ids)
        else:
            assert count == ref_count
            if count <= SPARSE_MAX:
                assert np.array_equal(buf[:count], ref_buf[:count])


@pytest.mark.parametrize("max_masks", [1, 2, 3])
def test_native_interning_keeps_the_mask_limit(max_masks):
    """``MaskTable.intern_state`` (the native masker's path) raises the LimitError of ``intern``
    at the same state: a mask found again is no new one, the first mask past the limit is."""
    v = get_vocab("gpt-2")
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}
    g = compile_schema(schema).grammar
    fast, ref = _pair(lambda: compile_grammar(g, v, backend="dfa", max_masks=max_masks))
    for s in range(fast.dfa.n_states):
        try:
            want = ref.mask(s)
        except LimitError:
            with pytest.raises(LimitError, match=f"max_masks={max_masks}"):
                fast.mask(s)
            return
        assert np.array_equal(fast.mask(s), want)
    pytest.fail("the schema has fewer distinct masks than the limit")


def test_state_masker_rejects_bad_arguments():
    v = get_vocab("gpt-2")
    cg = compile_json_schema({"type": "string"}, v, backend="dfa")
    cg.mask(0)
    with pytest.raises(ValueError, match="out of range"):
        _native.state_mask(cg._masker, cg.dfa.n_states, np.empty(v.n_words, dtype=np.uint32),
                           np.empty(8, dtype=np.uint32))
    with pytest.raises(ValueError, match="nwords"):
        _native.state_mask(cg._masker, 0, np.empty(v.n_words + 1, dtype=np.uint32), np.empty(8, dtype=np.uint32))
    with pytest.raises(TypeError):
        _native.state_mask(cg._masker, 0, np.empty(v.n_words, dtype=np.int64), np.empty(8, dtype=np.uint32))
    tabs = cg._tabs
    table = cg._table.reshape(-1)
    acc = np.ascontiguousarray(cg.dfa.accepting).view(np.uint8)
    none = tabs.masker_profiles(())
    good = (none, cg._classes, table, cg._table.shape[1], cg.dfa.n_classes, np.zeros(0, dtype=np.uint32), acc, None, ())
    assert _native.state_masker(*good)
    bad_classes = np.full(256, cg.dfa.n_classes, dtype=np.uint8)
    with pytest.raises(ValueError, match="classes"):
        _native.state_masker(*((good[0], bad_classes) + good[2:]))
    with pytest.raises(ValueError, match="accepting"):
        _native.state_masker(*(good[:6] + (acc[:-1],) + good[7:]))
    with pytest.raises(ValueError, match="specials"):  # a special with no column of its own
        _native.state_masker(*(good[:5] + (np.array([v.n_tokens], dtype=np.uint32),) + good[6:]))
    with pytest.raises(ValueError, match="eog_mask"):
        _native.state_masker(*(good[:7] + (np.zeros(v.n_words - 1, dtype=np.uint32),) + good[8:]))
    with pytest.raises(ValueError, match="loop_memos"):
        _native.state_masker(*(good[:8] + ((np.zeros(cg.dfa.n_states, dtype=np.uint8),),)))
    with pytest.raises(ValueError, match="incorrect name"):
        _native.state_masker(*((tabs.trie,) + good[1:]))  # a trie is not a profiles capsule
    one = tabs.masker_profiles(("json-string",))
    memo = np.zeros(cg.dfa.n_states, dtype=np.uint8)
    assert _native.state_masker(*((one,) + good[1:8] + ((memo,),)))
    with pytest.raises(ValueError, match="loop_memo"):
        _native.state_masker(*((one,) + good[1:8] + ((memo[:-1],),)))
    with pytest.raises(TypeError):  # read-only memo
        ro = memo.copy()
        ro.setflags(write=False)
        _native.state_masker(*((one,) + good[1:8] + ((ro,),)))
    prof = tabs.profile("json-string").masker_args
    assert _native.masker_profiles(tabs.trie, v.n_tokens, (prof,))
    with pytest.raises(TypeError, match="profile"):
        _native.masker_profiles(tabs.trie, v.n_tokens, (1,))
    bad_dfa = prof[3].copy()
    bad_dfa[7] = 9  # a character state past the automaton
    with pytest.raises(ValueError, match="char_dfa"):
        _native.masker_profiles(tabs.trie, v.n_tokens, (prof[:3] + (bad_dfa,) + prof[4:],))
    with pytest.raises(ValueError, match="plain_mask"):
        _native.masker_profiles(tabs.trie, v.n_tokens + 64, (prof,))
    with pytest.raises(ValueError, match="node_plain"):
        _native.masker_profiles(tabs.trie, v.n_tokens, (prof[:1] + (prof[2], prof[1]) + prof[3:],))


def test_a_grammar_loaded_with_its_masks_steps_without_a_masker():
    """Artifacts hold every mask: stepping such a grammar must not build the vocabulary's
    plain-text profiles for a masker it never needs, and steps as the compiled one does."""
    from decoding.backends.dfa.index import DFAGrammar
    from decoding.testing import random_walk

    v = get_vocab("gpt-2")
    cg = compile_json_schema({"type": "object", "properties": {"a": {"type": "string", "maxLength": 6},
                                                              "b": {"type": "integer"}}}, v, backend="dfa").precompute()
    masks = [cg.masks[i] for i in range(len(cg.masks))]
    pre = DFAGrammar.from_precomputed(cg.dfa, v, cg.special_token_ids, cg.state_masks(), masks)
    for seed in range(5):
        w = random_walk(pre, np.random.default_rng(seed))
        s = 0
        for t in w.tokens:
            assert pre.next_state(s, t) == cg.next_state(s, t)
            s = cg.next_state(s, t)
    assert pre._masker is None and cg._masker


@pytest.mark.parametrize("vocab_name", ["gpt-2", "llama-bpe"])
def test_masks_from_many_threads_equal_one_thread(vocab_name):
    """First visits (the native call interns with the GIL released for the walk) and reads of
    sparse masks (expanded from the native index) from several threads at once give the masks
    one thread gives."""
    import threading

    v = get_vocab(vocab_name)
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                                               "c": {"type": "array", "items": {"enum": ["x", "yy", "zzz"]}}}}
    ref = compile_json_schema(schema, v, backend="dfa")
    want = [ref.mask(s).copy() for s in range(ref.dfa.n_states)]
    g = compile_json_schema(schema, v, backend="dfa")
    errors: list = []

    def run(seed: int) -> None:
        order = np.random.default_rng(seed).permutation(g.dfa.n_states)
        try:
            for _ in range(3):
                for s in order.tolist():
                    if not np.array_equal(g.mask(s), want[s]):
                        errors.append(s)
                    g.allowed_ids(s)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors

    def classes(ids: np.ndarray) -> list[int]:  # the ids depend on the visit order; equal masks share one
        first: dict[int, int] = {}
        return [first.setdefault(int(i), len(first)) for i in ids]

    assert classes(g.state_masks()) == classes(ref.state_masks())
    assert len(g.masks) == len(ref.masks)
