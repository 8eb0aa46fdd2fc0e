"""Retry feedback: validate a candidate and say precisely what to fix.

Messages look like ``/date: '明天' does not match format date (YYYY-MM-DD)`` and are
meant to be pasted into a retry prompt.  Validation is ``jsonschema`` plus the same
format regexes the grammar uses (so feedback and grammar agree).
"""

from __future__ import annotations

import json
from typing import Any

from decoding.frontends.json_validator import validator_class
from decoding.frontends.jsonschema.formats import FORMAT_HINTS, check_format

__all__ = ["validate_instance", "feedback"]


def _ptr(path: Any) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path) if path else "/"


def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v) if '"' not in v else json.dumps(v, ensure_ascii=False)
    return json.dumps(v, ensure_ascii=False)


def _walk_formats(schema: Any, inst: Any, path: list, out: list[str], root: Any, depth: int = 0) -> None:
    """Format errors jsonschema does not report (its checker may lack a format)."""
    if depth > 50 or not isinstance(schema, dict):
        return
    if "$ref" in schema and isinstance(schema["$ref"], str) and schema["$ref"].startswith("#"):
        from decoding.frontends.jsonschema.refs import resolve_ref
        try:
            _, t = resolve_ref(root, schema["$ref"], "")
            _walk_formats(t, inst, path, out, root, depth + 1)
        except Exception:  # noqa: BLE001
            pass
    fmt = schema.get("format")
    if isinstance(fmt, str) and isinstance(inst, str) and check_format(fmt, inst) is False:
        hint = FORMAT_HINTS.get(fmt)
        out.append(f"{_ptr(path)}: {_show(inst)} does not match format {fmt}" + (f" ({hint})" if hint else ""))
    for kw in ("allOf",):
        for sub in schema.get(kw, []) if isinstance(schema.get(kw), list) else []:
            _walk_formats(sub, inst, path, out, root, depth + 1)
    if isinstance(inst, dict) and isinstance(schema.get("properties"), dict):
        for k, sub in schema["properties"].items():
            if k in inst:
                _walk_formats(sub, inst[k], path + [k], out, root, depth + 1)
    if isinstance(inst, list) and isinstance(schema.get("items"), dict):
        for i, x in enumerate(inst):
            _walk_formats(schema["items"], x, path + [i], out, root, depth + 1)


def validate_instance(schema: Any, instance: Any) -> list[str]:
    """All problems with ``instance`` as short messages ``"<pointer>: <what is wrong>"``;
    an empty list means valid."""
    cls = validator_class(schema)  # the draft of "$schema"; decimal multipleOf (json_validator)
    v = cls(schema, format_checker=cls.FORMAT_CHECKER)
    msgs: list[str] = []
    fmt_msgs: list[str] = []
    _walk_formats(schema, instance, [], fmt_msgs, schema)
    fmt_ptrs = {m.split(":", 1)[0] for m in fmt_msgs}
    for err in sorted(v.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        where = _ptr(list(err.absolute_path))
        if err.validator == "format":
            if where in fmt_ptrs:
                continue
            fmt = err.validator_value
            hint = FORMAT_HINTS.get(fmt)
            msgs.append(f"{where}: {_show(err.instance)} does not match format {fmt}" + (f" ({hint})" if hint else ""))
        elif err.validator == "required":
            msgs.append(f"{where}: {err.message}")
        elif err.validator == "enum":
            msgs.append(f"{where}: {_show(err.instance)} is not one of {json.dumps(err.validator_value, ensure_ascii=False)}")
        elif err.validator == "type":
            msgs.append(f"{where}: {_show(err.instance)} is not of type {err.validator_value}")
        else:
            msgs.append(f"{where}: {err.message}")
    return fmt_msgs + msgs


def feedback(schema: Any, text: str) -> list[str]:
    """Messages for a model's raw output ``text`` (JSON parse errors included)."""
    try:
        inst = json.loads(text)
    except json.JSONDecodeError as e:
        return [f"/: output is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"]
    return validate_instance(schema, inst)
