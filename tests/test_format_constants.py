"""A format's JSON string node is made once per process and kept among the front-end's
constant nodes (``compile._format_string``): the IR is the one built afresh
(``string_of(rx_to_ir(parse_pattern(regex, anchored=True), json_char))``), with a pattern, with
length bounds and alone; the node is registered plain, its seeded estimates are those of a
fresh memo, and its productive ids are known."""

from __future__ import annotations

import pytest

import decoding.frontends.jsonschema.compile as C
from decoding.frontends.jsonschema import compile_schema
from decoding.frontends.jsonschema.formats import CHECKED_FORMATS, format_regex
from decoding.frontends.jsonschema.jsonstr import json_char, string_of
from decoding.ir import Grammar, walk
from decoding.ir.key import canonical_ir_text
from decoding.ir.nodes import plain_ids
from decoding.ir.size import _node_estimate
from decoding.text.regex import parse_pattern, rx_to_ir

FORMATS = sorted(f for f in CHECKED_FORMATS if format_regex(f) is not None)


def _fresh(fmt: str):
    return string_of(rx_to_ir(parse_pattern(format_regex(fmt), anchored=True), json_char))


@pytest.mark.parametrize("fmt", FORMATS)
def test_format_string_is_a_constant(fmt):
    g = compile_schema({"type": "string", "format": fmt}).grammar
    want = canonical_ir_text(Grammar.single(_fresh(fmt), max_depth=g.max_depth))
    got = canonical_ir_text(Grammar("root", ((g.start, g.rule(g.start)),), g.max_depth)).replace(
        f'"{g.start}"', '"root"')
    assert got == want
    node = C._FORMAT_STRINGS[format_regex(fmt)]
    k = C._constants()
    assert any(n is node for n in k.nodes)
    assert {id(n) for n in walk(node)} <= k.ids and {id(n) for n in walk(node)} <= plain_ids()
    assert id(node) in k.productive
    for counted in (False, True):
        assert k.estimates[counted][id(node)] == _node_estimate(node, counted)
    assert compile_schema({"type": "string", "format": fmt}).grammar.rule(g.start) is g.rule(g.start)


@pytest.mark.parametrize("extra", [{"pattern": "^[0-9T:+-]{4,40}$"}, {"minLength": 12},
                                   {"maxLength": 12}, {"minLength": 3, "maxLength": 40}])
@pytest.mark.parametrize("fmt", ["date", "date-time", "time", "email", "uuid"])
def test_format_with_other_keywords_same_ir(fmt, extra, monkeypatch):
    schema = {"type": "string", "format": fmt, **extra}
    try:
        got = canonical_ir_text(compile_schema(schema).grammar)
    except Exception as e:  # noqa: BLE001 - the same exception afresh
        got = (type(e).__name__, str(e))
    # afresh: the cache of format nodes bypassed (each call builds the node anew)
    monkeypatch.setattr(C, "_format_string", lambda src, rx: string_of(rx_to_ir(rx, json_char)))
    try:
        want = canonical_ir_text(compile_schema(schema).grammar)
    except Exception as e:  # noqa: BLE001
        want = (type(e).__name__, str(e))
    assert got == want
