"""A fast yes/no check of a schema against the draft 2020-12 metaschema (and the draft-04,
draft-06 and draft-07 ones: :func:`valid_draft4`, :func:`valid_draft6`, :func:`valid_draft7`,
same contract for ``jsonschema``'s validators of those drafts).

``jsonschema`` validates a large schema against the 2020-12 metaschema in about 10 ms
(Kubernetes schemas, median), mostly in its generic machinery (``$dynamicRef`` lookups,
``allOf`` over seven vocabularies).  The metaschema itself is simple: every subschema is an
object or a boolean, and each known keyword's value has a fixed shape (a string, a number,
a non-negative integer, an array of unique strings, a schema, an array or a map of
schemas...).  :func:`valid_2020_12` checks exactly those shapes in one iterative walk.

Contract (what :func:`decoding.frontends.jsonschema.check.check_metaschema` relies on)
- ``valid_2020_12(schema, fc) is True`` only if ``jsonschema``'s Draft 2020-12 metaschema
  validator with format checker ``fc`` finds no error: the same type rules (``1.0`` is an
  integer, a boolean is not a number), the same ``re.search`` for ``$id`` and anchors (so
  a trailing newline passes, as there), the same format functions (``fc.conforms``).
- ``False`` means "not known valid": the caller runs ``jsonschema`` for the verdict and
  its located error.  So a disagreement can only cost time, except a wrong ``True``,
  which ``tests/test_metacheck.py`` looks for differentially (suite, JSONSchemaBench,
  generated schemas).
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["valid_2020_12", "valid_draft4", "valid_draft7", "valid_draft6"]

_SIMPLE = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_ANCHOR = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
_ID = re.compile(r"^[^#]*#?$")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and v.is_integer())


def _non_negative(v: Any) -> bool:
    return _integer(v) and v >= 0


def _string_array(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v) and len(set(v)) == len(v)


def _type(v: Any) -> bool:
    if isinstance(v, str):
        return v in _SIMPLE
    return (isinstance(v, list) and len(v) >= 1 and all(isinstance(x, str) and x in _SIMPLE for x in v)
            and len(set(v)) == len(v))


_Check = Callable[[Any, list, Any], bool]


def _schema(v: Any, stack: list, fc: Any) -> bool:
    stack.append(v)
    return True


def _schema_array(v: Any, stack: list, fc: Any) -> bool:
    if not isinstance(v, list) or not v:
        return False
    stack.extend(v)
    return True


def _schema_map(v: Any, stack: list, fc: Any) -> bool:
    if not isinstance(v, dict):
        return False
    stack.extend(v.values())
    return True


def _of(pred: Callable[[Any], bool]) -> _Check:
    return lambda v, stack, fc: pred(v)


def _uri_ref(v: Any, stack: list, fc: Any) -> bool:
    return isinstance(v, str) and fc.conforms(v, "uri-reference")


def _anchor(v: Any, stack: list, fc: Any) -> bool:
    return isinstance(v, str) and _ANCHOR.search(v) is not None


def _id(v: Any, stack: list, fc: Any) -> bool:
    return isinstance(v, str) and _ID.search(v) is not None and fc.conforms(v, "uri-reference")


def _uri(v: Any, stack: list, fc: Any) -> bool:
    return isinstance(v, str) and fc.conforms(v, "uri")


def _vocabulary(v: Any, stack: list, fc: Any) -> bool:
    return isinstance(v, dict) and all(fc.conforms(k, "uri") and isinstance(b, bool) for k, b in v.items())


def _dependencies(v: Any, stack: list, fc: Any) -> bool:
    if not isinstance(v, dict):
        return False
    for d in v.values():
        if isinstance(d, (dict, bool)):
            stack.append(d)  # anyOf [schema, stringArray]: an object or a boolean is only a schema
        elif not _string_array(d):
            return False
    return True


def _dependent_required(v: Any, stack: list, fc: Any) -> bool:
    return isinstance(v, dict) and all(_string_array(x) for x in v.values())


def _string(v: Any, stack: list, fc: Any) -> bool:  # (inlined in _walk)
    return isinstance(v, str)


_boolean = _of(lambda v: isinstance(v, bool))
_array = _of(lambda v: isinstance(v, list))
_nonneg = _of(_non_negative)
_num = _of(_number)

#: every keyword the 2020-12 metaschema (with its vocabularies) constrains -> its check;
#: other keys are unconstrained there
_KEYWORDS: dict[str, _Check] = {
    # core
    "$id": _id, "$schema": _uri, "$ref": _uri_ref, "$anchor": _anchor, "$dynamicRef": _uri_ref,
    "$dynamicAnchor": _anchor, "$vocabulary": _vocabulary, "$comment": _string, "$defs": _schema_map,
    # applicator
    "prefixItems": _schema_array, "items": _schema, "contains": _schema, "additionalProperties": _schema,
    "properties": _schema_map, "patternProperties": _schema_map, "dependentSchemas": _schema_map,
    "propertyNames": _schema, "if": _schema, "then": _schema, "else": _schema, "allOf": _schema_array,
    "anyOf": _schema_array, "oneOf": _schema_array, "not": _schema,
    # unevaluated
    "unevaluatedItems": _schema, "unevaluatedProperties": _schema,
    # validation
    "type": _of(_type), "enum": _array, "multipleOf": _of(lambda v: _number(v) and v > 0),
    "maximum": _num, "exclusiveMaximum": _num, "minimum": _num, "exclusiveMinimum": _num,
    "maxLength": _nonneg, "minLength": _nonneg, "pattern": _string, "maxItems": _nonneg, "minItems": _nonneg,
    "uniqueItems": _boolean, "maxContains": _nonneg, "minContains": _nonneg, "maxProperties": _nonneg,
    "minProperties": _nonneg, "required": _of(_string_array), "dependentRequired": _dependent_required,
    # meta-data, format-annotation, content
    "title": _string, "description": _string, "deprecated": _boolean, "readOnly": _boolean,
    "writeOnly": _boolean, "examples": _array, "format": _string, "contentEncoding": _string,
    "contentMediaType": _string, "contentSchema": _schema,
    # the metaschema's own properties (earlier drafts' keywords)
    "definitions": _schema_map, "dependencies": _dependencies, "$recursiveAnchor": _anchor,
    "$recursiveRef": _uri_ref,
}


def valid_2020_12(schema: Any, fc: Any, memo: dict[str, bool] | None = None) -> bool:
    """Whether ``schema`` is valid against the 2020-12 metaschema with format checker
    ``fc`` (see the module docstring: ``False`` may also mean "not sure").  ``memo``: the
    verdicts of ``fc`` on ``uri-reference`` strings (``$ref`` values, which repeat) kept
    across calls by a caller whose ``fc`` never changes."""
    return _walk(schema, _KEYWORDS, fc, booleans=True, memo=memo)


#: at most this many ``uri-reference`` verdicts in a memo of :func:`valid_2020_12`
MEMO_SIZE = 8192


def _walk(schema: Any, keywords: dict, fc: Any, *, booleans: bool, extra: Any = None,
          memo: dict[str, bool] | None = None) -> bool:
    """Every subschema (pushed on the stack by the keyword checks) is an object, or a
    boolean where ``booleans``, whose keywords pass ``keywords`` and which passes ``extra``."""
    stack = [schema]
    get = keywords.get
    string, schema_, schema_map, uri_ref = _string, _schema, _schema_map, _uri_ref
    while stack:
        s = stack.pop()
        if booleans and isinstance(s, bool):
            continue
        if not isinstance(s, dict):
            return False
        for k, v in s.items():
            check = get(k)
            if check is None:
                continue
            # the commonest checks inline (the same tests as the functions)
            if check is string:
                if not isinstance(v, str):
                    return False
            elif check is schema_:
                stack.append(v)
            elif check is schema_map:
                if not isinstance(v, dict):
                    return False
                stack.extend(v.values())
            elif check is uri_ref and memo is not None and v.__class__ is str:
                ok = memo.get(v)
                if ok is None:
                    ok = fc.conforms(v, "uri-reference")
                    if len(memo) < MEMO_SIZE:
                        memo[v] = ok
                if not ok:
                    return False
            elif not check(v, stack, fc):
                return False
        if extra is not None and not extra(s):
            return False
    return True


# ------------------------------------------------------------------ draft-04
# The draft-04 metaschema differs: a subschema is an object (booleans only where
# additionalItems/additionalProperties allow them), an integer is an int (1.0 is not one),
# arrays of schemas, ``required``, ``enum`` and ``type`` lists are non-empty, the boolean
# exclusive bounds need their bound (its "dependencies"), and no format is checked.

def _d4_integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _d4_string_array(v: Any) -> bool:
    return _string_array(v) and len(v) >= 1


def _d4_type(v: Any) -> bool:
    return _type(v)  # the same simple types; a list is non-empty and unique there too


def _d4_bool_or_schema(v: Any, stack: list, fc: Any) -> bool:
    if not isinstance(v, bool):
        stack.append(v)  # anything but an object fails when popped
    return True


def _d4_items(v: Any, stack: list, fc: Any) -> bool:
    if isinstance(v, list):  # anyOf [schema, schemaArray]: a list can only be the array
        return _schema_array(v, stack, fc)
    stack.append(v)
    return True


def _d4_dependencies(v: Any, stack: list, fc: Any) -> bool:
    if not isinstance(v, dict):
        return False
    for d in v.values():
        if isinstance(d, list):
            if not _d4_string_array(d):
                return False
        else:
            stack.append(d)  # a schema (an object: anything else fails when popped)
    return True


def _d4_enum(v: Any) -> bool:
    from jsonschema._utils import uniq  # jsonschema's own uniqueItems equality (1 == 1.0, not True)

    return isinstance(v, list) and len(v) >= 1 and uniq(v)


_d4_nonneg = _of(lambda v: _d4_integer(v) and v >= 0)

#: every keyword the draft-04 metaschema constrains -> its check
_D4_KEYWORDS: dict[str, _Check] = {
    "id": _string, "$schema": _string, "title": _string, "description": _string, "format": _string,
    "pattern": _string,  # format "regex": not checked here (check.py's check_regexes is)
    "multipleOf": _of(lambda v: _number(v) and v > 0), "maximum": _num, "minimum": _num,
    "exclusiveMaximum": _boolean, "exclusiveMinimum": _boolean,
    "maxLength": _d4_nonneg, "minLength": _d4_nonneg, "maxItems": _d4_nonneg, "minItems": _d4_nonneg,
    "maxProperties": _d4_nonneg, "minProperties": _d4_nonneg, "uniqueItems": _boolean,
    "additionalItems": _d4_bool_or_schema, "additionalProperties": _d4_bool_or_schema, "items": _d4_items,
    "required": _of(_d4_string_array), "definitions": _schema_map, "properties": _schema_map,
    "patternProperties": _schema_map, "dependencies": _d4_dependencies, "enum": _of(_d4_enum),
    "type": _of(_d4_type), "allOf": _schema_array, "anyOf": _schema_array, "oneOf": _schema_array,
    "not": _schema,
}


def valid_draft4(schema: Any, fc: Any) -> bool:
    """Whether ``schema`` is valid against the draft-04 metaschema (the module docstring's
    contract, for ``jsonschema``'s Draft 4 metaschema validator; its format checker ``fc``
    has nothing to check there)."""
    return _walk(schema, _D4_KEYWORDS, fc, booleans=False, extra=_d4_exclusive_ok)


def _d4_exclusive_ok(s: dict) -> bool:
    """Draft-04's exclusiveMaximum/exclusiveMinimum need their maximum/minimum."""
    return not (("exclusiveMaximum" in s and "maximum" not in s) or ("exclusiveMinimum" in s and "minimum" not in s))


# ------------------------------------------------------------------ draft-07 and draft-06
# Their metaschemas (jsonschema's bundled copies): a subschema is an object or a boolean,
# an integer may be written 1.0 (as from draft-06 on), ``items`` is a schema or a non-empty
# array of schemas, ``required`` and the array values of ``dependencies`` are arrays of
# unique strings (possibly empty), ``$id`` and ``$ref`` are uri-references (no fragment rule,
# unlike 2020-12's ``$id``), ``$schema`` a uri.  Draft-06 lacks ``$comment``, ``readOnly``,
# ``contentMediaType``, ``contentEncoding`` and ``if``/``then``/``else`` (unconstrained there).
# 2020-12's keywords that these drafts do not have (``$defs``, ``prefixItems``...) are
# unconstrained too.

_D6_KEYWORDS: dict[str, _Check] = {
    "$id": _uri_ref, "$schema": _uri, "$ref": _uri_ref, "title": _string, "description": _string,
    "examples": _array, "multipleOf": _of(lambda v: _number(v) and v > 0), "maximum": _num,
    "exclusiveMaximum": _num, "minimum": _num, "exclusiveMinimum": _num, "maxLength": _nonneg,
    "minLength": _nonneg, "pattern": _string,  # format "regex": check.py's check_regexes
    "additionalItems": _schema, "items": _d4_items, "maxItems": _nonneg, "minItems": _nonneg,
    "uniqueItems": _boolean, "contains": _schema, "maxProperties": _nonneg, "minProperties": _nonneg,
    "required": _of(_string_array), "additionalProperties": _schema, "definitions": _schema_map,
    "properties": _schema_map, "patternProperties": _schema_map, "dependencies": _dependencies,
    "propertyNames": _schema, "enum": _array, "type": _of(_type), "format": _string,
    "allOf": _schema_array, "anyOf": _schema_array, "oneOf": _schema_array, "not": _schema,
}
_D7_KEYWORDS: dict[str, _Check] = {
    **_D6_KEYWORDS, "$comment": _string, "readOnly": _boolean, "contentMediaType": _string,
    "contentEncoding": _string, "if": _schema, "then": _schema, "else": _schema,
}


def valid_draft7(schema: Any, fc: Any, memo: dict[str, bool] | None = None) -> bool:
    """Whether ``schema`` is valid against the draft-07 metaschema (the module docstring's
    contract, for ``jsonschema``'s Draft 7 metaschema validator with format checker ``fc``;
    ``memo`` as for :func:`valid_2020_12`)."""
    return _walk(schema, _D7_KEYWORDS, fc, booleans=True, memo=memo)


def valid_draft6(schema: Any, fc: Any, memo: dict[str, bool] | None = None) -> bool:
    """The same for draft-06 (``jsonschema``'s Draft 6 metaschema validator)."""
    return _walk(schema, _D6_KEYWORDS, fc, booleans=True, memo=memo)
