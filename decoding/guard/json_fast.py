"""Fast exact validity check for a common subset of JSON Schema.

``compile_fast(schema, cls, format_checker)`` compiles a schema into a predicate
``value -> bool`` that returns exactly ``cls(schema, format_checker=...).is_valid(value)``
(``cls`` a jsonschema validator class, draft 6 or later) as a :class:`FastSchema`,
or None when the
schema uses anything outside the subset; callers then use jsonschema.  The guard runs
the predicate first and asks jsonschema only for the messages of invalid documents.

Invariants
- Exactness by construction: a keyword is compiled only when ``cls.VALIDATORS`` maps it
  to the jsonschema function whose semantics are re-implemented here (checked by
  identity), and the type checker is the draft-6+ one; any other keyword that ``cls``
  validates makes the whole schema unsupported.  Keywords ``cls`` does not validate are
  ignored, as jsonschema ignores them.
- Subset: boolean schemas, ``type``, ``enum``/``const`` over strings and null,
  ``properties``, ``required``, ``additionalProperties``, ``items`` (one schema),
  ``min/maxItems``, ``min/maxLength``, ``pattern``, ``format``, ``minimum``/``maximum``/
  ``exclusiveMinimum``/``exclusiveMaximum`` (numbers), ``min/maxProperties``,
  ``dependentRequired``, ``allOf``/``anyOf``/``oneOf``/``not``.  No ``$ref``.
- ``FastSchema.iter_errors`` gives jsonschema's own errors for an invalid value,
  running jsonschema only where the compiled predicates fail.
"""

from __future__ import annotations

import re
from typing import Any, Callable

__all__ = ["compile_fast", "FastSchema"]

Check = Callable[[Any], bool]


class _Unsupported(Exception):
    pass


def _is_integer(x) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def _is_number(x) -> bool:
    t = type(x)
    if t is int or t is float:
        return True
    import numbers
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "integer": _is_integer,
    "number": _is_number,
}


def _expected_functions():
    from jsonschema import _keywords as k
    from jsonschema import _legacy_keywords as lk
    names = ["type", "enum", "const", "properties", "required", "additionalProperties",
             "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
             "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minProperties",
             "maxProperties", "dependentRequired", "allOf", "anyOf", "oneOf"]
    out = {n: {getattr(k, n)} for n in names}
    out["not"] = {k.not_}
    out["items"] = {k.items, lk.items_draft6_draft7_draft201909}
    return out


def _num(v) -> bool:
    return type(v) in (int, float)


def _count(v) -> bool:
    return type(v) is int and v >= 0


def _TRUE(x) -> bool:
    return True


def _FALSE(x) -> bool:
    return False


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _TRUE
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda x: a(x) and b(x)
    t = tuple(checks)
    return lambda x: all(c(x) for c in t)


class _Compiler:
    def __init__(self, cls, fc) -> None:
        from jsonschema import _types
        if cls.TYPE_CHECKER is not _types.draft202012_type_checker:
            raise _Unsupported("type checker")
        self.active = cls.VALIDATORS
        self.expected = _expected_functions()
        self.fc = fc
        self.preds: dict[int, Check] = {}       # id(subschema) -> its predicate
        self.local: dict[int, Check] = {}       # ... without properties/items descent

    def compile(self, s, root: bool = False) -> Check:
        if s is True or s is False:
            pred = _TRUE if s else _FALSE
            self.preds[id(s)] = self.local[id(s)] = pred
            return pred
        if not isinstance(s, dict):
            raise _Unsupported("schema is not an object")
        if not root and "$schema" in s:
            raise _Unsupported("$schema in a subschema")
        checks: list[Check] = []
        local: list[Check] = []
        for kw, v in s.items():
            fn = self.active.get(kw)
            if fn is None:
                continue                      # not a validation keyword of this draft
            if fn not in self.expected.get(kw, ()):
                raise _Unsupported(kw)
            c = self._keyword(kw, v, s)
            checks.append(c)
            if kw != "properties" and kw != "items":
                local.append(c)
        pred = _all(checks)
        self.preds[id(s)] = pred
        self.local[id(s)] = _all(local)
        return pred

    def _keyword(self, kw: str, v, s: dict) -> Check:
        if kw == "type":
            names = [v] if isinstance(v, str) else v
            if not isinstance(names, list) or not names or not all(
                    isinstance(t, str) and t in _TYPES for t in names):
                raise _Unsupported("type")
            fns = tuple(_TYPES[t] for t in names)
            if len(fns) == 1:
                return fns[0]
            return lambda x: any(f(x) for f in fns)
        if kw in ("enum", "const"):
            values = v if kw == "enum" else [v]
            if not isinstance(values, list) or not all(e is None or isinstance(e, str)
                                                       for e in values):
                raise _Unsupported(kw)
            strs = frozenset(e for e in values if e is not None)
            has_null = any(e is None for e in values)
            return lambda x: (x is None and has_null) or (isinstance(x, str) and x in strs)
        if kw == "properties":
            if not isinstance(v, dict):
                raise _Unsupported(kw)
            props = tuple((k, self.compile(sub)) for k, sub in v.items())

            def properties(x) -> bool:
                if not isinstance(x, dict):
                    return True
                for k, c in props:
                    if k in x and not c(x[k]):
                        return False
                return True
            return properties
        if kw == "required":
            if not isinstance(v, list) or not all(isinstance(k, str) for k in v):
                raise _Unsupported(kw)
            req = tuple(v)
            return lambda x: not isinstance(x, dict) or all(k in x for k in req)
        if kw == "additionalProperties":
            if "patternProperties" in s:
                raise _Unsupported("patternProperties")
            known = frozenset(s.get("properties", {}))
            if v is False:
                return lambda x: not isinstance(x, dict) or all(k in known for k in x)
            if v is True:
                return _TRUE
            sub = self.compile(v)
            return lambda x: not isinstance(x, dict) or all(
                sub(val) for k, val in x.items() if k not in known)
        if kw == "items":
            if "prefixItems" in s or not (isinstance(v, dict) or isinstance(v, bool)):
                raise _Unsupported(kw)
            sub = self.compile(v)
            return lambda x: not isinstance(x, list) or all(sub(e) for e in x)
        if kw in ("minItems", "maxItems", "minLength", "maxLength", "minProperties",
                  "maxProperties"):
            if not _count(v):
                raise _Unsupported(kw)
            typ = list if kw.endswith("Items") else str if kw.endswith("Length") else dict
            if kw.startswith("min"):
                return lambda x: not isinstance(x, typ) or len(x) >= v
            return lambda x: not isinstance(x, typ) or len(x) <= v
        if kw == "pattern":
            if not isinstance(v, str):
                raise _Unsupported(kw)
            try:
                rx = re.compile(v)
            except re.error as e:
                raise _Unsupported(kw) from e
            return lambda x: not isinstance(x, str) or rx.search(x) is not None
        if kw == "format":
            fc = self.fc
            if not isinstance(v, str):
                raise _Unsupported(kw)
            if fc is None or v not in fc.checkers:
                return _TRUE
            func, raises = fc.checkers[v]      # FormatChecker.conforms, inlined

            def conforms(x) -> bool:
                try:
                    return bool(func(x))
                except raises:
                    return False
            return conforms
        if kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if not _num(v):
                raise _Unsupported(kw)
            if kw == "minimum":
                return lambda x: not _is_number(x) or not x < v
            if kw == "maximum":
                return lambda x: not _is_number(x) or not x > v
            if kw == "exclusiveMinimum":
                return lambda x: not _is_number(x) or not x <= v
            return lambda x: not _is_number(x) or not x >= v
        if kw == "dependentRequired":
            if not isinstance(v, dict) or not all(
                    isinstance(d, list) and all(isinstance(e, str) for e in d)
                    for d in v.values()):
                raise _Unsupported(kw)
            deps = tuple((k, tuple(d)) for k, d in v.items())
            return lambda x: not isinstance(x, dict) or all(
                k not in x or all(e in x for e in d) for k, d in deps)
        if kw in ("allOf", "anyOf", "oneOf"):
            if not isinstance(v, list) or not v:
                raise _Unsupported(kw)
            subs = tuple(self.compile(e) for e in v)
            if kw == "allOf":
                return lambda x: all(c(x) for c in subs)
            if kw == "anyOf":
                return lambda x: any(c(x) for c in subs)
            return lambda x: sum(1 for c in subs if c(x)) == 1
        if kw == "not":
            sub = self.compile(v)
            return lambda x: not sub(x)
        raise _Unsupported(kw)


class FastSchema:
    """A compiled schema: ``is_valid`` (exact) and ``iter_errors`` (jsonschema's errors).

    ``iter_errors(validator, value)`` yields the errors ``validator.iter_errors(value)``
    yields (same keywords, paths and messages), but runs jsonschema only on the subtrees
    whose compiled predicate fails: ``properties`` and ``items`` are descended here,
    every other keyword of a failing node is evaluated by jsonschema.  Errors at the
    same path and keyword may come in a different order.
    """

    def __init__(self, schema: Any, is_valid: Check, preds: dict[int, Check],
                 local: dict[int, Check]) -> None:
        self.schema = schema
        self.is_valid = is_valid
        self._preds = preds
        self._local = local

    def iter_errors(self, validator, value, known_invalid: bool = False):
        """``known_invalid``: ``is_valid(value)`` was just False (skips one check)."""
        return self._explain(validator, self.schema, value, (), known_invalid)

    def _explain(self, validator, s, x, path: tuple, known_invalid: bool = False):
        if not isinstance(s, dict):
            if not self._preds[id(s)](x):
                yield from _errors(validator, s, x, path)
            return
        props = s.get("properties")
        items = s.get("items")
        descend = ((props is not None and isinstance(x, dict))
                   or (items is not None and isinstance(x, list)))
        if not descend:
            if known_invalid or not self._preds[id(s)](x):
                yield from _errors(validator, s, x, path)
            return
        # the children are explained one by one below; only this node's own keywords
        # (the local predicate) decide whether jsonschema has to look at this node
        if not self._local[id(s)](x):
            rest = {}
            for k, v in s.items():
                if k == "properties":
                    rest[k] = dict.fromkeys(v, True)    # keeps additionalProperties' view
                elif k != "items":
                    rest[k] = v
            yield from _errors(validator, rest, x, path)
        if props is not None and isinstance(x, dict):
            for k, sub in props.items():
                if k in x:
                    yield from self._explain(validator, sub, x[k], path + (k,))
        if items is not None and isinstance(x, list):
            for i, e in enumerate(x):
                yield from self._explain(validator, items, e, path + (i,))


def _errors(validator, schema, x, path: tuple):
    for err in validator.evolve(schema=schema).iter_errors(x):
        err.relative_path.extendleft(reversed(path))
        yield err


def compile_fast(schema: Any, cls, format_checker) -> FastSchema | None:
    """``schema`` compiled for ``cls`` (see :class:`FastSchema`), or None (unsupported)."""
    c = None
    try:
        c = _Compiler(cls, format_checker)
        pred = c.compile(schema, root=True)
    except (_Unsupported, RecursionError):
        return None
    return FastSchema(schema, pred, c.preds, c.local)
