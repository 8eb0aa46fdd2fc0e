"""The stored Unicode classes of the regex shorthands (decoding/text/unicode_classes.py) are
what a scan of the running Python's ``str`` predicates gives, and the shorthands read them."""

from __future__ import annotations

import unicodedata

import pytest

from decoding.text import unicode_classes as uc
from decoding.text.regex import _wide

SCANNED = {}


def _scanned() -> dict:
    if not SCANNED:
        SCANNED.update(uc.scans())
    return SCANNED


@pytest.mark.parametrize("name", ["DECIMAL", "WORD", "SPACE"])
def test_stored_classes_equal_a_scan(name):
    assert unicodedata.unidata_version == uc.UNICODE_VERSION, \
        "another Unicode version: compare with python -m decoding.text.unicode_classes and regenerate"
    assert getattr(uc, name) == _scanned()[name]


@pytest.mark.parametrize("ch, cls, member", [
    ("7", "d", True), ("\u0663", "d", True), ("\uff19", "d", True), ("a", "d", False), ("\u00bd", "d", False),
    ("_", "w", True), ("\u00e9", "w", True), ("\u4e2d", "w", True), ("-", "w", False),
    ("\u3000", "s", True), ("\x1c", "s", True), ("\ufeff", "s", True), ("x", "s", False),
])
def test_wide_shorthands_read_the_stored_classes(ch, cls, member):
    cp = ord(ch)
    assert any(lo <= cp <= hi for lo, hi in _wide(cls)) == member
