"""One-call guards: extract -> validate -> (optional) repair.

``guard_xml`` / ``guard_json`` never raise on bad model output: every problem comes
back as :class:`Violation` objects inside a :class:`GuardResult`.  A text longer than
``limits.max_guard_input_chars`` is not read at all: the result holds one ``size-limit``
violation and no fragment.
"""

from __future__ import annotations

import json

from decoding.frontends.xml.model import DTD
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.guard.extract import extract_json, extract_xml
from decoding.guard.repair import XML_DECLARATION, repair_json, repair_xml
from decoding.guard.results import Change, GuardResult, Violation
from decoding.guard.validate import _limit_violation, validate_json, validate_xml

__all__ = ["guard_xml", "guard_json"]


def _none(kind: str) -> GuardResult:
    return GuardResult(False, None, None,
                       (Violation("no-fragment", "/", f"no {kind} found in the output", 1, 1, 0),))


def _too_long(text: str, limits: Limits) -> GuardResult | None:
    v = _limit_violation(limits, text, text, 0)
    return None if v is None else GuardResult(False, None, None, (v,))


def guard_xml(text: str, dtd: DTD, *, root: str | None = None, repair: bool = False,
              add_declaration: bool = False, limits: Limits | None = None) -> GuardResult:
    """Extract the element (named ``root`` if given) from ``text`` and validate it.

    With ``repair=True`` an invalid fragment is repaired (see ``decoding.guard.repair``);
    ``add_declaration`` (with ``repair``) prepends ``<?xml ...?>`` when missing.
    ``limits``: input size and nesting bounds (default :data:`decoding.limits.DEFAULT_LIMITS`).
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    refused = _too_long(text, limits)
    if refused is not None:
        return refused
    frag = extract_xml(text, root=root)
    if frag is None:
        return _none("XML element" + (f" <{root}>" if root else ""))
    errors = tuple(validate_xml(frag.document, dtd, root=root, base=frag.prolog_start,
                                source=text, limits=limits))
    if not repair:
        return GuardResult(not errors, frag.document if not errors else None, frag, errors)
    r = repair_xml(text, frag, dtd, root=root, add_declaration=add_declaration, errors=errors,
                   limits=limits)
    return GuardResult(r.ok, r.text, frag, errors, r, None, r.changes)


def guard_json(text: str, schema: dict, *, repair: bool = False,
               limits: Limits | None = None) -> GuardResult:
    """Extract the first JSON object/array from ``text`` and validate it against ``schema``.

    ``limits``: input size and nesting bounds (default :data:`decoding.limits.DEFAULT_LIMITS`).
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    refused = _too_long(text, limits)
    if refused is not None:
        return refused
    frag = extract_json(text)
    if frag is None:
        return _none("JSON object or array")
    value, errors = validate_json(frag.text, schema, base=frag.start, source=text, limits=limits)
    if not repair:
        ok = not errors
        return GuardResult(ok, frag.text if ok else None, frag, tuple(errors),
                           value=value if ok else None)
    r = repair_json(text, frag, schema, errors=errors, limits=limits)
    val = value if (r.ok and not errors) else None
    if r.ok and errors:
        val = json.loads(r.text)
    return GuardResult(r.ok, r.text, frag, tuple(errors), r, val, r.changes)
