"""Local ``$ref`` resolution (``#``, ``#/json/pointer``, ``#anchor``, root-``$id``-relative)."""

from __future__ import annotations

from urllib.parse import unquote

from decoding.errors import SchemaError

__all__ = ["resolve_ref", "resolve_pointer", "pointer_join"]


def pointer_join(ptr: str, *parts: object) -> str:
    for p in parts:
        if p.__class__ is not str:
            p = str(p)
        if "~" in p or "/" in p:
            p = p.replace("~", "~0").replace("/", "~1")
        ptr = ptr + "/" + p
    return ptr


_MISSING = object()


def resolve_pointer(doc: object, ptr: str) -> tuple[object] | None:
    """``(value,)`` at JSON pointer ``ptr`` in ``doc`` (RFC 6901), or None if it does not
    resolve.  Iterative; list indices are decimal without leading zeros."""
    node = doc
    if ptr == "":
        return (node,)
    if not ptr.startswith("/"):
        return None
    for raw in ptr[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
            if node is _MISSING:
                return None
        elif isinstance(node, list) and part.isdigit() and (part == "0" or not part.startswith("0")) \
                and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return (node,)


def _find_anchor(node: object, name: str, ptr: str) -> tuple[str, object] | None:
    if isinstance(node, dict):
        if node.get("$anchor") == name or node.get("$id") == "#" + name or node.get("id") == "#" + name:
            return ptr, node
        for k, v in node.items():
            if k in ("enum", "const", "examples", "default"):
                continue
            hit = _find_anchor(v, name, pointer_join(ptr, k))
            if hit:
                return hit
    elif isinstance(node, list):
        for i, v in enumerate(node):
            hit = _find_anchor(v, name, pointer_join(ptr, i))
            if hit:
                return hit
    return None


def resolve_ref(root: object, ref: str, at: str) -> tuple[str, object]:
    """Return (pointer, subschema) for ``ref`` found at pointer ``at``; local refs only."""
    if not isinstance(ref, str):
        raise SchemaError(at, "$ref", "must be a string")
    base = root.get("$id") or root.get("id") if isinstance(root, dict) else None
    frag = ref
    if not ref.startswith("#"):
        if isinstance(base, str) and (ref == base or ref.startswith(base.split("#")[0] + "#")) and base:
            frag = ref[len(base.split("#")[0]):] or "#"
        else:
            raise SchemaError(at, "$ref", f"only local references are supported, got {ref!r}")
    frag = frag[1:]
    if frag and not frag.startswith("/"):
        hit = _find_anchor(root, unquote(frag), "")
        if hit is None:
            raise SchemaError(at, "$ref", f"anchor {frag!r} not found")
        return hit
    node: object = root
    ptr = ""
    for raw in frag.split("/")[1:]:
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaError(at, "$ref", f"reference {ref!r} does not resolve (missing {part!r})")
        ptr = pointer_join(ptr, part)
    if not isinstance(node, (dict, bool)):
        raise SchemaError(at, "$ref", f"reference {ref!r} is not a schema")
    return ptr, node
