"""Well-formedness of a schema before it is compiled: JSON data, nesting, the metaschema.

:func:`check_schema` runs three cheap passes and raises located errors; after it the
compiler may assume well-typed keyword values:

1. the value is JSON data (objects with string keys, arrays, strings, finite numbers,
   booleans, null) nested at most ``limits.max_nesting`` deep: an iterative walk, so a
   schema nested 100,000 deep is a :class:`LimitError` naming the pointer where the limit
   is crossed, never a ``RecursionError``;
2. the schema validates against the metaschema of its ``$schema`` (draft-03 to 2020-12,
   default 2020-12) with ``jsonschema``: the best error becomes a :class:`SchemaError` whose
   ``pointer`` is the location of the offending value (``/properties/a/minLength``) and
   whose ``keyword`` is the keyword it belongs to.  Formats are asserted as ``check_schema``
   does (``uri`` for ``$schema`` ...), except ``regex`` (pass 3).  Draft 2020-12, -07, -06
   and -04 schemas first go through :mod:`~decoding.frontends.jsonschema.metacheck` (the
   same verdict in one walk, about 200x faster); jsonschema runs when that walk is not sure;
3. every ``pattern`` and ``patternProperties`` name compiles with Python's ``re``, which
   the compiler uses to match property names: any failure (``re.error``, an
   ``OverflowError`` for ``x{99999999999}``, too deep) is a :class:`SchemaError` there.

Text is parsed by :func:`load_schema_text`: a ``JSONDecodeError``, an over-long integer or
text nested too deep for ``json`` becomes a located error (line:column).

Invariant: every pointer in an error raised here resolves in the schema (errors on an
object key that is not a string point at the object holding it).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import warnings
from typing import Any, Iterator

from decoding.errors import LimitError, SchemaError
from decoding.frontends.jsonschema.metacheck import valid_2020_12, valid_draft4, valid_draft6, valid_draft7
from decoding.frontends.jsonschema.refs import pointer_join
from decoding.limits import DEFAULT_LIMITS, Limits

__all__ = ["check_schema", "load_schema_text", "check_data", "check_metaschema", "schema_positions"]

# keywords whose value is a schema, an array of schemas, or a map name -> schema
_ONE = frozenset({"additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties",
                  "not", "if", "then", "else", "contains", "propertyNames", "contentSchema", "items"})
_MANY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items", "extends"})
_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                  "dependencies"})
_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_REASON_CHARS = 240
_SURROGATE = re.compile("[\ud800-\udfff]")


def _where(line: int, col: int) -> str:
    return f"line {line} column {col}"


def _text_depth_place(text: str, limit: int) -> tuple[int, int] | None:
    """(line, column) of the first '[' or '{' nested deeper than ``limit`` (outside strings)."""
    depth = 0
    line, col0 = 1, 0
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return line, i - col0 + 1
        elif ch in "]}":
            depth -= 1
        elif ch == "\n":
            line, col0 = line + 1, i + 1
    return None


def load_schema_text(text: str, *, name: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse schema text.  Raises :class:`SchemaError` (not JSON, with line and column) or
    :class:`LimitError` (longer than ``max_source_chars``, nested deeper than ``max_nesting``)."""
    what = name or "schema"
    if len(text) > limits.max_source_chars:
        raise LimitError(f"{what}: {len(text)} characters of schema text (limit max_source_chars="
                         f"{limits.max_source_chars})", pointer="", limit="max_source_chars", value=len(text))
    place = _text_depth_place(text, limits.max_nesting) if text.count("[") + text.count("{") > \
        limits.max_nesting else None
    if place is not None:
        raise LimitError(f"{what}: {_where(*place)}: JSON nested deeper than {limits.max_nesting} "
                         f"(limit max_nesting={limits.max_nesting})", limit="max_nesting",
                         value=limits.max_nesting + 1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SchemaError("", None, f"{what} is not Unicode text: lone surrogate at offset {e.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError("", None, f"{what} is not valid JSON: {e.msg} at {_where(e.lineno, e.colno)}") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
        raise SchemaError("", None, f"{what} is not usable JSON: {str(e)[:_REASON_CHARS]}") from None


def _is_data(schema: Any, max_nesting: int) -> bool:
    """Whether :func:`check_data` passes ``schema``: the same tests without the paths that
    locate a failure (so in any order); the common case, a valid schema, costs one pass."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        if isinstance(v, dict):
            if depth >= max_nesting:
                return False
            for k, x in v.items():
                if not isinstance(k, str) or not k.isascii() and _SURROGATE.search(k):
                    return False
                if isinstance(x, str):  # (most values: checked here, not pushed)
                    if not x.isascii() and _SURROGATE.search(x):
                        return False
                else:
                    push((x, depth + 1))
        elif isinstance(v, list):
            if depth >= max_nesting:
                return False
            for x in v:
                push((x, depth + 1))
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                return False
        elif isinstance(v, str):
            if not v.isascii() and _SURROGATE.search(v):
                return False
        elif not (v is None or isinstance(v, (int, bool))):
            return False
    return True


def check_data(schema: Any, limits: Limits = DEFAULT_LIMITS) -> None:
    """Iteratively check that ``schema`` is JSON data nested at most ``limits.max_nesting``."""
    if _is_data(schema, limits.max_nesting):
        return
    # located: the first failure in this walk's order
    stack: list[tuple[Any, tuple]] = [(schema, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, (dict, list)):
            if len(path) >= limits.max_nesting:
                ptr = pointer_join("", *path)
                raise LimitError(f"{ptr or '/'}: schema nested deeper than {limits.max_nesting} objects/arrays "
                                 f"(limit max_nesting={limits.max_nesting})", pointer=ptr,
                                 limit="max_nesting", value=len(path) + 1)
            if isinstance(v, dict):
                for k, x in v.items():
                    if not isinstance(k, str) or not k.isascii() and _SURROGATE.search(k):
                        raise SchemaError(pointer_join("", *path), _keyword_of(schema, list(path)),
                                          f"object key {k!r} is not a string of Unicode text")
                    stack.append((x, path + (k,)))
            else:
                for i, x in enumerate(v):
                    stack.append((x, path + (i,)))
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise SchemaError(pointer_join("", *path), _keyword_of(schema, list(path)),
                                  f"{v!r} is not a JSON number")
        elif isinstance(v, str):
            if not v.isascii() and _SURROGATE.search(v):
                raise SchemaError(pointer_join("", *path), _keyword_of(schema, list(path)),
                                  "string with a lone surrogate (not Unicode text)")
        elif not (v is None or isinstance(v, (int, bool))):
            raise SchemaError(pointer_join("", *path), _keyword_of(schema, list(path)),
                              f"not a JSON value: {type(v).__name__}")


@functools.lru_cache(maxsize=None)
def _meta_validator(cls: type) -> Any:
    """One metaschema validator per draft (building one costs more than validating), with
    the draft's format checker (as ``check_schema``) less ``regex``: Python's ``re`` raises
    more than ``re.error`` on hostile patterns, so :func:`check_regexes` does that part."""
    from jsonschema import FormatChecker

    fc = FormatChecker(())
    fc.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k != "regex"}
    return cls(cls.META_SCHEMA, format_checker=fc)


@functools.lru_cache(maxsize=None)
def _uri_memo(cls: type) -> dict[str, bool]:
    """The ``uri-reference`` verdicts of :func:`_meta_validator`'s format checker for ``cls``
    (made once, never changed: a verdict depends on the string alone), kept across schemas
    (bounded: :data:`~decoding.frontends.jsonschema.metacheck.MEMO_SIZE`)."""
    return {}


def _validator_class(schema: Any) -> type:
    import jsonschema

    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        with warnings.catch_warnings():  # an unknown $schema: the default, like jsonschema
            warnings.simplefilter("ignore", DeprecationWarning)
            return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return jsonschema.Draft202012Validator


def _keyword_of(schema: Any, path: list) -> str | None:
    """The keyword a metaschema error at ``path`` belongs to (walking schema positions)."""
    node, kw, i = schema, None, 0
    while i < len(path) and isinstance(node, dict):
        key = path[i]
        kw = key
        val = node.get(key)
        if key in _MAP and isinstance(val, dict) and i + 1 < len(path) and path[i + 1] in val and \
                isinstance(val[path[i + 1]], (dict, bool)):
            node, i = val[path[i + 1]], i + 2
        elif key in _MANY and isinstance(val, list) and i + 1 < len(path) and isinstance(path[i + 1], int):
            node, i = val[path[i + 1]], i + 2
        elif key in _ONE and isinstance(val, (dict, bool)):
            node, i = val, i + 1
        else:
            break
    return kw


def _reason(err: Any) -> str:
    """A short reason for a metaschema error (the instance is not echoed in full)."""
    path = list(err.absolute_path)
    if "type" in path[-2:] and path[-1] != "$defs" and err.validator in ("anyOf", "enum") and \
            not isinstance(err.instance, list):
        return f"unknown type {_short(err.instance)}; the types are {', '.join(_TYPES)}"
    if err.validator == "anyOf" and err.context:
        deepest = max(err.context, key=lambda e: len(e.absolute_path))
        if len(deepest.absolute_path) > len(err.absolute_path):
            return _reason(deepest)
    if err.validator == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return f"must be of type {want}, got {_short(err.instance)}"
    msg = err.message
    return msg if len(msg) <= _REASON_CHARS else msg[:_REASON_CHARS] + "..."


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def check_metaschema(schema: Any) -> None:
    """Validate ``schema`` against its draft's metaschema; the best error becomes a
    :class:`SchemaError` at the offending value.  Expects :func:`check_data` to have passed."""
    import jsonschema

    cls = _validator_class(schema)
    validator = _meta_validator(cls)
    if cls is jsonschema.Draft202012Validator and valid_2020_12(schema, validator.format_checker,
                                                                _uri_memo(cls)):
        return  # known valid: the same verdict as jsonschema's, ~30x faster (metacheck.py)
    if cls is jsonschema.Draft4Validator and valid_draft4(schema, validator.format_checker):
        return  # the same for draft-04 (most of Github_easy)
    if cls is jsonschema.Draft7Validator and valid_draft7(schema, validator.format_checker, _uri_memo(cls)):
        return  # and draft-07 (jsonschema takes ~1 ms on a Github_easy schema)
    if cls is jsonschema.Draft6Validator and valid_draft6(schema, validator.format_checker, _uri_memo(cls)):
        return
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))  # metaschema validation recurses per nesting level
    try:
        err = jsonschema.exceptions.best_match(validator.iter_errors(schema))
    finally:
        sys.setrecursionlimit(old)
    if err is None:
        return
    path = list(err.absolute_path)
    ptr = pointer_join("", *path)
    draft = cls.__name__.replace("Validator", "")
    raise SchemaError(ptr, _keyword_of(schema, path), f"{_reason(err)} (metaschema {draft})")


def schema_positions(schema: Any) -> Iterator[tuple[dict, str]]:
    """Every subschema object of ``schema`` with its pointer (iterative, schema positions only:
    not inside ``enum``/``const``/``default``/``examples`` or property-name maps' keys)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        s, ptr = stack.pop()
        if not isinstance(s, dict):
            continue
        yield s, ptr
        for k, v in s.items():
            if k in _MAP and isinstance(v, dict):
                for name, sub in v.items():
                    stack.append((sub, pointer_join(ptr, k, name)))
            elif k in _MANY and isinstance(v, list):
                for i, sub in enumerate(v):
                    stack.append((sub, pointer_join(ptr, k, i)))
            elif k in _ONE:
                stack.append((v, pointer_join(ptr, k)))


@functools.lru_cache(maxsize=4096)
def _py_regex_error(src: str) -> str | None:
    try:
        re.compile(src)
    except re.error as e:
        return f"not a valid regex: {e}"
    except (OverflowError, RecursionError, ValueError, MemoryError) as e:
        return f"not a usable regex: {type(e).__name__}: {e}"
    return None


def _regexes_ok(schema: Any) -> bool:
    """Whether :func:`check_regexes` passes ``schema`` (the same subschemas, in any order,
    without their pointers)."""
    stack: list[Any] = [schema]
    while stack:
        s = stack.pop()
        if not isinstance(s, dict):
            continue
        pat = s.get("pattern")
        if isinstance(pat, str) and _py_regex_error(pat):
            return False
        pp = s.get("patternProperties")
        if isinstance(pp, dict) and any(_py_regex_error(p) for p in pp):
            return False
        for k, v in s.items():
            if k in _MAP and isinstance(v, dict):
                stack.extend(v.values())
            elif k in _MANY and isinstance(v, list):
                stack.extend(v)
            elif k in _ONE:
                stack.append(v)
    return True


def check_regexes(schema: Any) -> None:
    """Every ``pattern`` and ``patternProperties`` name compiles with Python's ``re``."""
    if _regexes_ok(schema):
        return
    for s, ptr in schema_positions(schema):  # located: the first failure in this order
        pat = s.get("pattern")
        if isinstance(pat, str):
            why = _py_regex_error(pat)
            if why:
                raise SchemaError(pointer_join(ptr, "pattern"), "pattern", why)
        pp = s.get("patternProperties")
        if isinstance(pp, dict):
            for p in pp:
                why = _py_regex_error(p)
                if why:
                    raise SchemaError(pointer_join(ptr, "patternProperties", p), "patternProperties", why)


def check_schema(schema: Any, limits: Limits = DEFAULT_LIMITS) -> None:
    """JSON data within ``limits.max_nesting``, valid against its metaschema, regexes that
    compile.  Raises located :class:`SchemaError` / :class:`LimitError`."""
    check_data(schema, limits)
    check_metaschema(schema)
    check_regexes(schema)
