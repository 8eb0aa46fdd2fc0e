"""Anchors at the token level, on real vocabularies.

- strict: the output is exactly START, a DTD-valid document, END (gemma-4, where
  ``<|tool_call>`` / ``<tool_call|>`` are single control tokens, and qwen35, whose
  vocab-only GGUF has no ``<tool_call>`` token, so the anchor is matched as text);
- lazy: random walks that open regions always close them, and every region holds a
  DTD-valid document.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from conftest import get_vocab
from decoding.frontends.anchors import anchored
from decoding.backends.select import compile_grammar
from decoding.runtime.matcher import Matcher
from decoding.frontends.xml.grammar import grammar_from_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = json.loads((ROOT / "grammars" / "xml_grammars.json").read_text())["user_query"]
DOC = grammar_from_spec(SPEC, str(ROOT / "grammars"))
DTD = etree.DTD(str(ROOT / "grammars" / SPEC["dtd"]))


def dtd_valid(xml: bytes) -> bool:
    try:
        return DTD.validate(etree.fromstring(xml))
    except etree.XMLSyntaxError:
        return False


def walk(cg, rng, structural_bias: float = 0.0, inject: list[int] | None = None,
         max_steps: int = 5000) -> list[int]:
    """Uniform walk under the mask; with probability ``structural_bias`` a special or
    end-of-generation token is drawn when one is allowed, or the tokens of ``inject`` (a
    literal start anchor) are fed when the mask allows them (to reach the anchors quickly).
    Every token goes through the matcher, so the walk never leaves the grammar."""
    m = Matcher(cg)
    special = np.array(sorted(set(cg.special_token_ids) | set(cg.vocab.eog_ids)), dtype=np.int64)
    out: list[int] = []
    for _ in range(max_steps):
        ids = m.allowed_ids()
        assert len(ids) > 0, "empty mask before acceptance"
        if inject and m.is_allowed(inject[0]) and rng.random() < structural_bias:
            fed = 0
            for t in inject:  # refused once max_regions regions are open: undo
                if not m.advance(t):
                    break
                fed += 1
            if fed == len(inject):
                out.extend(inject)
                continue
            m.rollback(fed)
        structural = ids[np.isin(ids, special)].tolist() if structural_bias else []
        t = int(rng.choice(structural)) if structural and rng.random() < structural_bias else int(rng.choice(ids))
        assert m.advance(t)
        if m.finished:
            return out
        out.append(t)
    raise AssertionError("walk did not finish")


def test_strict_with_single_special_tokens_gemma4():
    v = get_vocab("gemma-4")
    start, end = v.special_token("<|tool_call>"), v.special_token("<tool_call|>")
    assert start is not None and end is not None
    cg = compile_grammar(anchored(DOC, "<|tool_call>", "<tool_call|>", mode="strict"), v)
    assert cg.special_token_ids == (start, end)
    rng = np.random.default_rng(1)
    for _ in range(200):
        toks = walk(cg, rng)
        assert toks[0] == start and toks[-1] == end
        assert start not in toks[1:-1] and end not in toks[1:-1]
        assert dtd_valid(v.decode(toks[1:-1]))


def test_strict_anchor_as_text_qwen35():
    v = get_vocab("qwen35")
    assert v.special_token("<tool_call>") is None  # this GGUF has no such token: matched as text
    cg = compile_grammar(anchored(DOC, "<tool_call>", "</tool_call>", mode="strict"), v)
    assert cg.special_token_ids == ()
    rng = np.random.default_rng(2)
    for _ in range(200):
        text = v.decode(walk(cg, rng))
        assert text.startswith(b"<tool_call>") and text.endswith(b"</tool_call>")
        assert dtd_valid(text[len(b"<tool_call>"):-len(b"</tool_call>")])


@pytest.mark.parametrize("vocab_name, start, end", [
    ("gemma-4", "<|tool_call>", "<tool_call|>"),
    ("llama-bpe", "<|xml_start|>", "<|xml_end|>"),  # not tokens of llama-bpe: literal text
])
def test_lazy_walks_close_every_region(vocab_name, start, end):
    v = get_vocab(vocab_name)
    cg = compile_grammar(anchored(DOC, start, end, mode="lazy", max_regions=3), v)
    rng = np.random.default_rng(3)
    sid, eid = v.special_token(start), v.special_token(end)
    opened = 0
    inject = None if sid is not None else v.tokenize(start)
    for _ in range(150):
        toks = walk(cg, rng, structural_bias=0.3, inject=inject)
        if sid is not None:
            # split on the special tokens: text, (START doc END text)*
            starts = [i for i, t in enumerate(toks) if t == sid]
            ends = [i for i, t in enumerate(toks) if t == eid]
            assert len(starts) == len(ends) <= 3
            for a, b in zip(starts, ends):
                assert a < b and dtd_valid(v.decode(toks[a + 1:b]))
            opened += len(starts)
        else:
            text = v.decode(toks)
            pieces = text.split(start.encode())
            for piece in pieces[1:]:
                assert end.encode() in piece, "a region was opened and not closed"
                assert dtd_valid(piece.split(end.encode())[0])
            opened += len(pieces) - 1
    assert opened > 0
