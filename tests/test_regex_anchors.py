"""Assertions in patterns: ``^`` and ``$`` anywhere, and top-level lookaheads.

``^`` and ``$`` anywhere in a pattern (JSON Schema ``pattern``: ``^$|^(a|$)``, found in
JSONSchemaBench): anchors inside groups and alternations are assertions, eliminated into
anchor-free languages (decoding.text.regex._anchor_forms).  Oracle: Python's ``re``
(``search`` in search mode, ``fullmatch`` in anchored mode) on every string of up to 5
characters over a small alphabet without newlines (Python's ``$`` also matches before a
final newline, ECMA's does not; the engine takes the intersection, tested below)."""

from __future__ import annotations

import itertools
import re

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.errors import GrammarError, PatternError
from decoding.frontends.jsonschema.jsonstr import json_char
from decoding.ir import Grammar
from decoding.text.regex import regex_ir

STRINGS = ["".join(p) for n in range(6) for p in itertools.product("ab, c", repeat=n)]
PATTERNS = [
    r"^$|(^(?:\S+\s+){0,3}\S+$)",  # Github_easy o21053 (with {0,99})
    r"^([^,]|$)",                  # Github_easy o55159
    r"/^[0-9]{4}$/",               # Github_easy o21833: matches nothing
    r"a^b", r"(^a|b)*c", r"(a|^)b", r"x(a$|b)", r"(^a|b){0,3}$", r"^(a|$)", r"(^|,)a(,|$)",
    r"((^a)|b)+", r"(a$|b)*", r"(^|b)(a|$)", r"((^|a)b)*$", r"(b$|^a){2}", r"(^)*a", r"a($)+", r"(a|$){2,}",
]


def _accepts(pattern: str, anchored: bool):
    try:
        dfa = compile_dfa(Grammar.single(regex_ir(pattern, json_char, anchored=anchored)))
    except GrammarError as e:  # the empty language
        assert "accepts no string" in str(e)
        return lambda s: False
    return lambda s: dfa.accepts(s.encode())


@pytest.mark.parametrize("anchored", [False, True])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_same_strings_as_python_re(pattern: str, anchored: bool) -> None:
    acc = _accepts(pattern, anchored)
    match = re.fullmatch if anchored else re.search
    wrong = [s for s in STRINGS if acc(s) != (match(pattern, s) is not None)]
    assert not wrong, wrong[:5]


def test_dollar_is_the_end_only() -> None:
    """ECMA's ``$`` is the end of the string; Python's also matches before a final newline:
    the intersection is taken, as for the other anchors."""
    acc = _accepts(r"(a$|b)", False)
    assert acc("xa") and not acc("a\n") and re.search(r"(a$|b)", "a\n")


@pytest.mark.parametrize("pattern,pos", [("^*", 1), ("(^a){20}", 8), ("a$?", 2)])
def test_refused_anchor_forms_are_located(pattern: str, pos: int) -> None:
    with pytest.raises(PatternError) as e:
        regex_ir(pattern, json_char)
    assert e.value.pos == pos, str(e.value)


LOOKAHEADS = [r"^(?=.*[0-9])(?=.*[a-z]).{3,}$", r"(?=ab)a", r"a(?!b)", r"^(?!ab).*$", r"(?=.*c)b", r"x|(?=a)ab",
              r"^(?=a)", r"(?!a)$", r"(?!c)(?=a|b)."]
LOOK_STRINGS = ["".join(p) for n in range(6) for p in itertools.product("abc1", repeat=n)]


@pytest.mark.parametrize("anchored", [False, True])
@pytest.mark.parametrize("pattern", LOOKAHEADS)
def test_top_level_lookaheads_are_exact(pattern: str, anchored: bool) -> None:
    """``(?=X)`` / ``(?!X)`` in a top-level branch: intersection / difference with
    ``X any*`` at that position (the password rule of real schemas)."""
    acc = _accepts(pattern, anchored)
    match = re.fullmatch if anchored else re.search
    wrong = [s for s in LOOK_STRINGS if acc(s) != (match(pattern, s) is not None)]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("pattern,pos", [("(?<=a)b", 1), ("(a(?=b))", 3), ("(?=a)*", 5)])
def test_lookbehind_and_nested_lookaheads_are_refused(pattern: str, pos: int) -> None:
    with pytest.raises(PatternError) as e:
        regex_ir(pattern, json_char)
    assert e.value.pos == pos, str(e.value)


@pytest.mark.parametrize("value,ok", [("abcdefg1", True), ("1abcdefghijk", True), ("abcdefgh", False),
                                      ("12345678", False), ("abc1", False), ("abcdefghijk12", False)])
def test_password_rule_in_a_schema(value: str, ok: bool) -> None:
    import json

    from decoding.frontends.jsonschema import compile_schema
    schema = {"type": "string", "pattern": "^(?=.*[0-9])(?=.*[a-z]).{8,}$", "maxLength": 12}
    dfa = compile_dfa(compile_schema(schema).grammar)
    assert dfa.accepts(json.dumps(value).encode()) is ok
