"""Schema normalisation (draft-04..2020-12 spellings) and exact ``allOf`` merging.

``merge(a, b)`` returns one schema accepting exactly the instances both accept, or
raises :class:`SchemaError` when that cannot be expressed with the supported keywords.
"""

from __future__ import annotations

import re
from typing import Any

from decoding.errors import SchemaError

__all__ = ["normalize", "merge", "json_equal", "TYPES", "SEMANTIC"]

TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_MAX = ("maximum", "maxLength", "maxItems", "maxProperties")
_MIN = ("minimum", "minLength", "minItems", "minProperties")


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True != 1; objects ignore key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def normalize(s: dict) -> dict:
    """Rewrite older spellings: boolean exclusive bounds, ``items: [..]``/``additionalItems``."""
    if "items" not in s and "exclusiveMinimum" not in s and "exclusiveMaximum" not in s:
        return s  # (the common case: no generator made)
    s = dict(s)
    for ex, base in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        v = s.get(ex)
        if isinstance(v, bool):
            del s[ex]
            if v and base in s:
                s[ex] = s.pop(base)
    if isinstance(s.get("items"), list):
        s["prefixItems"] = s.pop("items")
        if "additionalItems" in s:
            s["items"] = s.pop("additionalItems")
    else:
        s.pop("additionalItems", None)  # ignored when items is not an array
    return s


def _types(s: dict) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _all_of(x: Any, y: Any) -> Any:
    if x is True or x == {}:
        return y
    if y is True or y == {}:
        return x
    if x is False or y is False:
        return False
    if x == y:
        return x
    return {"allOf": [x, y]}


def _matching(pp: dict, key: str) -> list:
    return [v for p, v in pp.items() if re.search(p, key)]


#: keywords whose values constrain instances; every other keyword is an annotation (title,
#: description, examples, x-*, unknown words) and never blocks a merge (the first value is kept)
SEMANTIC = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref", "not", "if", "then",
    "else", "uniqueItems", "multipleOf", "unevaluatedProperties", "unevaluatedItems", "contains",
    "minContains", "maxContains", "propertyNames", "dependentRequired", "dependentSchemas",
    "dependencies", "$dynamicRef", "$recursiveRef",
})


def merge(a: dict, b: dict, ptr: str) -> dict:
    """Exact conjunction of two (normalised, ref-free at top level) schemas."""
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    for side in (a, b):
        for k in ("unevaluatedProperties", "unevaluatedItems"):
            if k in side and side[k] is not True and side[k] != {}:
                raise SchemaError(ptr, k, f"'{k}' inside allOf/$ref/anyOf/oneOf combinations is "
                                  "not supported")
    out = dict(a)
    # types
    ta, tb = _types(a), _types(b)
    if ta is not None and tb is not None:
        t = ta & tb
        if "integer" in ta and "number" in tb or "integer" in tb and "number" in ta:
            t.add("integer")
        out["type"] = sorted(t)
    elif tb is not None:
        out["type"] = b["type"]
    for k, v in b.items():
        if k == "type":
            continue
        if k not in a:
            if k in ("properties", "patternProperties", "additionalProperties", "items", "prefixItems"):
                continue  # handled below
            out[k] = v
            continue
        av = a[k]
        if k in _MAX:
            out[k] = min(av, v)
        elif k in _MIN:
            out[k] = max(av, v)
        elif k == "exclusiveMinimum":
            out[k] = max(av, v)
        elif k == "exclusiveMaximum":
            out[k] = min(av, v)
        elif k == "required":
            out[k] = list(av) + [x for x in v if x not in av]
        elif k == "enum":
            out[k] = [x for x in av if any(json_equal(x, y) for y in v)]
        elif k == "const":
            if not json_equal(av, v):
                out["enum"] = []
        elif k == "propertyNames":
            out[k] = _all_of(av, v)
        elif k == "not":
            out[k] = {"anyOf": [av, v]}  # neither A nor B: not (A or B)
        elif k in ("anyOf", "oneOf"):
            prod = [{"allOf": [x, y]} for x in av for y in v]
            if len(prod) > 64:
                raise SchemaError(ptr, k, "allOf of two large anyOf/oneOf lists is too big to expand")
            out[k] = prod
        elif k == "allOf":
            out[k] = list(av) + list(v)
        elif k in ("properties", "patternProperties", "additionalProperties", "items", "prefixItems"):
            continue
        elif k not in SEMANTIC:
            continue  # an annotation (or unknown keyword): never blocks, the first value is kept
        elif av != v:
            raise SchemaError(ptr, k, f"allOf combines two different '{k}' values; their "
                              "intersection cannot be expressed")
    # arrays: element i is constrained by prefixItems[i] or else items, on each side
    if any(k in x for x in (a, b) for k in ("items", "prefixItems")):
        pa, pb = a.get("prefixItems", []), b.get("prefixItems", [])
        ia, ib = a.get("items", True), b.get("items", True)
        n = max(len(pa), len(pb))
        pre = [_all_of(pa[i] if i < len(pa) else ia, pb[i] if i < len(pb) else ib) for i in range(n)]
        if pre:
            out["prefixItems"] = pre
        else:
            out.pop("prefixItems", None)
        it = _all_of(ia, ib)
        if it is not True:
            out["items"] = it
        else:
            out.pop("items", None)
    # objects
    if any(k in a or k in b for k in ("properties", "patternProperties", "additionalProperties")):
        pa, pb = a.get("properties", {}), b.get("properties", {})
        ppa, ppb = a.get("patternProperties", {}), b.get("patternProperties", {})
        aa, ab = a.get("additionalProperties", True), b.get("additionalProperties", True)
        if ppa and ppb and ppa != ppb:
            raise SchemaError(ptr, "patternProperties", "allOf with patternProperties on both sides "
                              "is not supported")
        props: dict = {}
        for k in list(pa) + [k for k in pb if k not in pa]:
            parts = []
            for side_p, side_pp, side_a in ((pa, ppa, aa), (pb, ppb, ab)):
                if k in side_p:
                    parts.append(side_p[k])
                else:
                    m = _matching(side_pp, k)
                    if m:
                        parts.extend(m)
                    elif side_a is not True:
                        parts.append(side_a)
            v: Any = True
            for p in parts:
                v = _all_of(v, p)
            props[k] = v
        if props:
            out["properties"] = props
        else:
            out.pop("properties", None)
        pp = ppa or ppb
        if pp:
            other_addl = ab if ppa else aa
            if other_addl is not True and pp != (ppb if ppa else ppa):
                raise SchemaError(ptr, "patternProperties", "allOf of patternProperties with "
                                  "additionalProperties on the other side is not supported")
            out["patternProperties"] = pp
        addl = _all_of(aa, ab)
        if "additionalProperties" in a or "additionalProperties" in b:
            out["additionalProperties"] = addl
    return out
