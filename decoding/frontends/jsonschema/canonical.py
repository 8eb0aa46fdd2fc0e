"""Canonical serialization of an instance: the form the compiled grammar generates.

Compact JSON (no whitespace), object keys in schema order (``properties`` order, then the
properties of the dependent schemas of present ``dependentSchemas`` triggers (draft-07:
schema-valued ``dependencies``), then required-only names, then those triggers, then names
from property dependencies, then undeclared keys in
instance order), numbers spelled by
:func:`jsonstr.number_text`, strings as ``json.dumps(ensure_ascii=False)``.  Within
``anyOf``/``oneOf`` the first branch the instance validates against decides the order;
an ``enum``/``const`` match is spelled like the schema's value.  Integral floats are
spelled as integers, except under draft-04/03 (whose ``integer`` excludes ``1.0``) where
the schema asks for an integer or no ``anyOf``/``oneOf`` branch holds: there they keep
their fraction, as the validator saw them.
"""

from __future__ import annotations

from typing import Any

from decoding.frontends.json_validator import validator_class
from decoding.frontends.jsonschema.jsonstr import dumps, quote
from decoding.frontends.jsonschema.merge import json_equal

__all__ = ["canonicalize"]


def canonicalize(schema: Any, instance: Any) -> str:
    """Canonical text of ``instance`` under ``schema`` (see module docstring)."""
    from decoding.frontends.jsonschema.compile import _Compiler  # local: avoid an import cycle
    comp = _Compiler(schema, whitespace="compact", max_ws=1, max_depth=1, free_depth=0, lenient=True)
    return _Canon(schema, comp).canon(schema, instance, 0)


class _Canon:
    def __init__(self, root: Any, comp: Any) -> None:
        self.root = root
        self.comp = comp
        cls = validator_class(root)  # decimal multipleOf, as the grammar (json_validator)
        self.validator = cls(root if isinstance(root, (dict, bool)) else {})
        self.legacy = bool(getattr(comp, "legacy", False))
        self.dumps = dumps

    def _valid(self, s: Any, v: Any) -> bool:
        try:
            return self.validator.evolve(schema=s).is_valid(v)
        except Exception:  # noqa: BLE001 - an unresolvable branch just isn't chosen
            return False

    def canon(self, s: Any, v: Any, depth: int) -> str:
        if depth > 200 or not isinstance(s, dict):
            return self.dumps(v)
        try:
            s = self.comp._deref(s, "")
        except Exception:  # noqa: BLE001
            return self.dumps(v)
        if not isinstance(s, dict):
            return self.dumps(v)
        if "allOf" in s:
            from decoding.frontends.jsonschema.merge import merge
            acc: Any = {k: x for k, x in s.items() if k != "allOf"}
            try:
                for p in s["allOf"]:
                    p = self.comp._deref(p, "")
                    if isinstance(p, dict):
                        acc = merge(acc, p, "")
            except Exception:  # noqa: BLE001
                return self.dumps(v)
            return self.canon(acc, v, depth + 1)
        for kw in ("anyOf", "oneOf"):
            if kw in s and isinstance(s[kw], list):
                rest = {k: x for k, x in s.items() if k != kw}
                from decoding.frontends.jsonschema.merge import merge
                for b in s[kw]:
                    try:
                        b = self.comp._deref(b, "")
                        m = merge(rest, b, "") if isinstance(b, dict) else b
                    except Exception:  # noqa: BLE001
                        continue
                    if self._valid(m, v):
                        return self.canon(m, v, depth + 1)
                # no branch holds: the instance is invalid; under draft-04 keep 1.0 a float
                return _dumps_keep_floats(v) if self.legacy else self.dumps(v)
        vals = [s["const"]] if "const" in s else s.get("enum") if isinstance(s.get("enum"), list) else None
        if vals is not None:
            for e in vals:
                if json_equal(e, v):
                    return self.dumps(e)
            return self.dumps(v)
        if isinstance(v, dict):
            props = s.get("properties", {}) if isinstance(s.get("properties"), dict) else {}
            req = s.get("required", []) if isinstance(s.get("required"), list) else []
            # schema dependencies (draft-07 and older: the schema values of ``dependencies``)
            # whose trigger is present: their branch merges the dependent schema, whose
            # properties follow the declared ones; the trigger is required in its branch
            triggers = {}
            for kw in ("dependentSchemas", "dependencies"):
                if isinstance(s.get(kw), dict):
                    triggers.update({t: x for t, x in s[kw].items()
                                     if t in v and not isinstance(x, list) and t not in triggers})
            order = [k for k in props if k in v]
            for x in triggers.values():
                try:
                    x = self.comp._deref(x, "")
                except Exception:  # noqa: BLE001
                    continue
                if isinstance(x, dict) and isinstance(x.get("properties"), dict):
                    order += [k for k in x["properties"] if k in v and k not in order]
            order += [k for k in req if k in v and k not in order]
            order += [k for k in triggers if k not in order]
            try:  # keys named by property dependencies come next (declared members)
                deps = self.comp._dep_required(s, "")
            except Exception:  # noqa: BLE001
                deps = {}
            for t, ds in deps.items():
                order += [k for k in (t, *ds) if k in v and k not in order]
            order += [k for k in v if k not in order]
            pp = s.get("patternProperties", {}) if isinstance(s.get("patternProperties"), dict) else {}
            addl = s.get("additionalProperties", True)
            parts = []
            for k in order:
                if k in props:
                    sub = props[k]
                else:
                    import re
                    m = [x for p, x in pp.items() if _search(re, p, k)]
                    sub = m[0] if len(m) == 1 else (addl if not m else True)
                parts.append(quote(k).decode() + ":" + self.canon(sub, v[k], depth + 1))
            return "{" + ",".join(parts) + "}"
        if isinstance(v, list):
            prefix = s.get("prefixItems")
            items = s.get("items", True)
            if isinstance(items, list):  # draft-04 tuple form
                prefix, items = items, s.get("additionalItems", True)
            prefix = prefix if isinstance(prefix, list) else []
            out = []
            for i, x in enumerate(v):
                sub = prefix[i] if i < len(prefix) else items
                out.append(self.canon(sub, x, depth + 1))
            return "[" + ",".join(out) + "]"
        if self.legacy and isinstance(v, float) and v.is_integer() and _integer_only(s):
            return _dumps_keep_floats(v)  # draft-04: 1.0 is not an integer
        return self.dumps(v)


def _integer_only(s: dict) -> bool:
    t = s.get("type")
    types = t if isinstance(t, list) else [t]
    return "integer" in types and "number" not in types


def _dumps_keep_floats(value: Any) -> str:
    """Compact JSON with floats spelled as floats (``1.0``), for draft-04/03 instances."""
    import json
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _search(re: Any, p: str, k: str) -> bool:
    try:
        return re.search(p, k) is not None
    except re.error:
        return False
