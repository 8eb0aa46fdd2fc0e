"""Per-output checks (closure, well-formedness, validity, fields) and Wilson intervals.

Invariants
- ``closure``: XML — from the first start tag, every opened tag is closed in proper
  nesting and at least one element was completed; JSON — from the first ``{``/``[``,
  brackets balance outside strings.  Prose around the structure is ignored.
- ``well_formed``: the guard's extractor finds a complete fragment and it parses (expat
  without namespace processing for XML, ``json.loads`` for JSON).
- ``valid``: the guard's DTD validator (root element fixed) for XML; jsonschema
  Draft 2020-12 with its format checker for JSON.  valid implies well_formed.
- ``fields_ok``: every expected field equals the output's decoded value exactly.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from xml.parsers import expat
from xml.etree import ElementTree as ET

from jsonschema import Draft202012Validator

from decoding.frontends.json_validator import validator_class
from decoding.guard import extract_json, extract_xml, validate_xml

__all__ = ["Check", "check_output", "wilson", "xml_closure", "json_closure"]

_TAG = re.compile(r"<(/?)([A-Za-z_:][-A-Za-z0-9_.:]*)[^<>]*?(/?)>")


@dataclass(frozen=True)
class Check:
    closure: bool
    well_formed: bool
    valid: bool
    fields_ok: bool
    fields_correct: int
    fields_total: int
    errors: tuple[str, ...] = ()


def xml_closure(text: str) -> bool:
    i = text.find("<")
    stack: list[str] = []
    completed = False
    while i >= 0:
        if text.startswith("<!--", i):
            j = text.find("-->", i)
            if j < 0:
                return False
            i = text.find("<", j + 3)
            continue
        if text.startswith("<![CDATA[", i):
            j = text.find("]]>", i)
            if j < 0:
                return False
            i = text.find("<", j + 3)
            continue
        if text.startswith("<?", i) or text.startswith("<!", i):
            j = text.find(">", i)
            if j < 0:
                return False
            i = text.find("<", j + 1)
            continue
        m = _TAG.match(text, i)
        if m is None:  # '<' that is not a tag: prose or an unfinished tag
            if stack and text.find(">", i) < 0:
                return False
            i = text.find("<", i + 1)
            continue
        close, name, selfclose = m.group(1), m.group(2), m.group(3)
        if close:
            if not stack or stack[-1] != name:
                return False
            stack.pop()
            completed = completed or not stack
        elif selfclose:
            completed = completed or not stack
        else:
            stack.append(name)
        i = text.find("<", m.end())
    return completed and not stack


def json_closure(text: str) -> bool:
    starts = [p for p in (text.find("{"), text.find("[")) if p >= 0]
    if not starts:
        return False
    depth = 0
    in_str = esc = False
    for ch in text[min(starts):]:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth < 0:
                return False
            if depth == 0:
                return True
    return False


def _expat_ok(doc: str) -> bool:
    p = expat.ParserCreate()
    try:
        p.Parse(doc.encode("utf-8"), True)
        return True
    except expat.ExpatError:
        return False


def _compare(family, value, expected: dict) -> tuple[int, int]:
    got = family.fields(value) if value is not None else {}
    ok = sum(1 for k, v in expected.items() if got.get(k) == v)
    return ok, len(expected)


def check_output(family, text: str, expected: dict) -> Check:
    if family.kind == "xml":
        closure = xml_closure(text)
        frag = extract_xml(text, root=family.root)
        if frag is None or not frag.complete or not _expat_ok(frag.document):
            return Check(closure, False, False, False, 0, len(expected), ("not well-formed",))
        errs = validate_xml(frag.document, family.dtd, root=family.root)
        try:
            value = ET.fromstring(frag.text.encode("utf-8"))
        except ET.ParseError:  # unbound namespace prefix: fields cannot be read
            value = None
        ok, tot = _compare(family, value, expected)
        return Check(closure, True, not errs, ok == tot, ok, tot, tuple(str(e) for e in errs[:3]))
    closure = json_closure(text)
    frag = extract_json(text)
    if frag is None or not frag.complete:
        return Check(closure, False, False, False, 0, len(expected), ("no complete JSON value",))
    try:
        value = json.loads(frag.text)
    except json.JSONDecodeError as e:
        return Check(closure, False, False, False, 0, len(expected), (f"json: {e.msg}",))
    # the decimal multipleOf the grammars generate (decoding.frontends.json_validator)
    v = validator_class(cls=Draft202012Validator)(family.schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    errs = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(value)]
    ok, tot = _compare(family, value if isinstance(value, dict) else None, expected)
    return Check(closure, True, not errs, ok == tot, ok, tot, tuple(errs[:3]))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score 95% interval of k successes in n trials ((0, 1) when n == 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)
