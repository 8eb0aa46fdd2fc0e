"""Canonical forms: the exact text a compiled grammar generates for a given instance.

A JSON instance or an XML document has many spellings; the grammars emit one.  These
functions put a real instance into that one spelling, so real and generated outputs can be
compared byte for byte (and a harness can check that a grammar accepts a valid instance by
feeding it the canonical text).

- :func:`canonical_json(schema, instance) <canonical_json>`: the JSON Schema front-end's
  form (compact, keys in schema order, numbers spelled as the grammar spells them);
- :func:`canonical_xml(document, dtd) <canonical_xml>`: the XML front-end's form (attributes
  in DTD order, fixed escapes, no comments or DOCTYPE, empty elements as ``<a/>``).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from decoding.frontends.xml.model import DTD

__all__ = ["canonical_json", "canonical_xml"]


def canonical_json(schema: Any, instance: Any) -> str:
    """Canonical text of the JSON ``instance`` (parsed data) under ``schema`` (a dict or bool),
    as the grammar of ``Compiler.compile_json_schema(schema)`` (compact whitespace) spells it."""
    from decoding.frontends.jsonschema.canonical import canonicalize

    return canonicalize(schema, instance)


def canonical_xml(document: str | bytes, dtd: DTD | str | os.PathLike, *,
                  whitespace: Literal["compact", "flexible"] = "compact", max_ws: int = 8,
                  xml_declaration: bool = False) -> str:
    """Canonical text of the XML ``document`` under ``dtd`` (a parsed DTD, DTD text, or the
    path of a DTD file: a ``PathLike`` or a ``str`` without ``<``), as the grammar of
    ``Compiler.compile_dtd`` with the same ``whitespace``/``max_ws`` spells it.  Raises
    :class:`~decoding.frontends.xml.canonical.CanonicalizeError` for a document that is not
    well-formed, :class:`~decoding.errors.DTDError` for a DTD that does not parse."""
    from decoding.frontends.xml.canonical import canonicalize

    return canonicalize(document, _dtd(dtd), whitespace=whitespace, max_ws=max_ws,
                        xml_declaration=xml_declaration).decode("utf-8")


def _dtd(dtd: DTD | str | os.PathLike) -> DTD:
    from decoding.frontends.sources import read_source
    from decoding.frontends.xml.dtd import parse_dtd

    if isinstance(dtd, DTD):
        return dtd
    if isinstance(dtd, os.PathLike) or (isinstance(dtd, str) and "<" not in dtd):
        return parse_dtd(read_source(dtd), source=os.fspath(dtd),
                         base_dir=os.path.dirname(os.path.abspath(dtd)))
    return parse_dtd(dtd)
