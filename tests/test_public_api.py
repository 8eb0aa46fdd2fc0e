"""The public API: what ``decoding`` exports, the error root, and no state on user objects."""

from __future__ import annotations

import gc
import inspect
import weakref

import pytest

import decoding
import decoding.errors
from conftest import vocab_path
from decoding.vocab import Vocab

VOCAB = Vocab.from_bytes([bytes([i]) for i in range(256)] + [b""], eog_ids=[256])


@pytest.mark.parametrize("name", decoding.__all__)
def test_every_exported_name_exists(name):
    assert getattr(decoding, name) is not None
    assert name in dir(decoding)


def test_documented_names_are_exported():
    for name in ("Compiler", "CompiledGrammar", "Matcher", "BudgetMatcher", "GrammarLogitsProcessor",
                 "generate", "Generation", "Vocab", "as_vocab", "canonical_json", "canonical_xml",
                 "UnsatisfiableSchemaError"):
        assert name in decoding.__all__, name
    from decoding.backends.contract import CompiledGrammar
    from decoding.testing import random_walk

    assert decoding.CompiledGrammar is CompiledGrammar and callable(random_walk)


def test_every_error_derives_from_decoding_error():
    exported = [getattr(decoding, n) for n in decoding.__all__]
    errors = [x for x in exported if inspect.isclass(x) and issubclass(x, BaseException)]
    defined = [x for _, x in inspect.getmembers(decoding.errors, inspect.isclass) if issubclass(x, BaseException)]
    assert errors and set(defined) <= set(errors) | {decoding.errors._Located}
    for e in errors + defined:
        assert issubclass(e, decoding.DecodingError), e


def test_compiler_results_satisfy_the_contract():
    cg = decoding.Compiler(VOCAB).compile_gbnf('root ::= "a"+')
    assert isinstance(cg, decoding.CompiledGrammar)
    m = decoding.Matcher(cg)
    assert m.advance(ord("a")) and m.is_accepting()


def test_as_vocab_leaves_no_attribute_and_forgets_the_model():
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(vocab_path("llama-bpe")), vocab_only=True, verbose=False)
    before = dict(vars(llm))
    v = decoding.as_vocab(llm)
    assert decoding.as_vocab(llm) is v  # read once
    assert vars(llm).keys() == before.keys() and all(vars(llm)[k] is before[k] for k in before)
    assert v.tokenize("hello") and v.n_tokens > 1000
    ref = weakref.ref(llm)
    llm.close()
    del llm
    gc.collect()
    assert ref() is None  # the weak map keeps nothing alive
    with pytest.raises(decoding.VocabError, match="freed"):
        v.tokenize("hello")
    assert decoding.as_vocab(VOCAB) is VOCAB


@pytest.mark.parametrize("args", [{}, {"prompt": "x", "messages": [{"role": "user", "content": "x"}]}])
def test_generate_needs_exactly_one_of_prompt_and_messages(args):
    from decoding.runtime.fastforward import generate_fast

    cg = decoding.Compiler(VOCAB).compile_gbnf('root ::= "a"')
    for fn in (decoding.generate, generate_fast):
        with pytest.raises(decoding.UsageError, match="exactly one of prompt"):
            fn(object(), cg, **args)


def test_canonical_forms():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "number"}}}
    assert decoding.canonical_json(schema, {"a": 1.0, "b": 2}) == '{"b":2,"a":1}'
    dtd = '<!ELEMENT r (x)>\n<!ELEMENT x EMPTY>\n<!ATTLIST x k CDATA #IMPLIED>\n'
    doc = '<?xml version="1.0"?>\n<!-- c -->\n<r>\n  <x k=\'v\'></x>\n</r>'
    out = decoding.canonical_xml(doc, dtd)
    assert out == '<r><x k="v"/></r>'
    assert decoding.Compiler(VOCAB).compile_dtd(dtd, root="r", xml_declaration="none").accepts(out.encode())
    with pytest.raises(decoding.CanonicalizeError):
        decoding.canonical_xml("<r>", dtd)
