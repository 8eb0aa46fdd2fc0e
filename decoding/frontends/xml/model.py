"""Plain-data model of a parsed DTD subset (what the DTD front-end returns).

Shared by the DTD -> IR compiler (``decoding.frontends.xml.dtd``) and the post-hoc guard
(``decoding.guard``).  All objects are frozen and hold only strings, tuples and ints.

Invariants
- ``DTD.elements`` keeps declaration order; element names are unique.
- ``DTD.attributes`` keeps declaration order; the first declaration of an
  (element, attribute) pair wins, as in XML 1.0 §3.3.
- Entities are already expanded inside declarations; ``general_entities`` keeps the
  replacement text of internal general entities (``&name;`` is legal in text).
- ``line``/``column`` are 1-based positions in the DTD source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Particle", "ElementDecl", "AttributeDecl", "DTD"]

Occur = Literal["", "?", "*", "+"]


@dataclass(frozen=True)
class Particle:
    """A content-model particle: an element ``name`` or a ``seq``/``choice`` group."""
    kind: Literal["name", "seq", "choice"]
    name: str | None = None
    children: tuple["Particle", ...] = ()
    occur: Occur = ""


@dataclass(frozen=True)
class ElementDecl:
    """``<!ELEMENT name content>``.

    ``content``: ``EMPTY``, ``ANY``, ``PCDATA`` (``(#PCDATA)``), ``MIXED``
    (``(#PCDATA|a|b)*`` with ``mixed_names=("a","b")``) or ``CHILDREN`` (``model`` set).
    """
    name: str
    content: Literal["EMPTY", "ANY", "PCDATA", "MIXED", "CHILDREN"]
    model: Particle | None = None
    mixed_names: tuple[str, ...] = ()
    line: int = 0
    column: int = 0


@dataclass(frozen=True)
class AttributeDecl:
    """One attribute of an ``<!ATTLIST>``.

    ``type``: CDATA, ID, IDREF, IDREFS, NMTOKEN, NMTOKENS, ENTITY, ENTITIES, NOTATION
    or ENUM (``values`` holds the enumeration / notation names).
    ``default``: ``#REQUIRED``, ``#IMPLIED``, ``#FIXED`` or ``DEFAULT`` (then ``value``).
    """
    element: str
    name: str
    type: str
    values: tuple[str, ...] = ()
    default: Literal["#REQUIRED", "#IMPLIED", "#FIXED", "DEFAULT"] = "#IMPLIED"
    value: str | None = None
    line: int = 0
    column: int = 0


@dataclass(frozen=True)
class DTD:
    elements: tuple[ElementDecl, ...]
    attributes: tuple[AttributeDecl, ...] = ()
    general_entities: tuple[tuple[str, str], ...] = ()
    source: str | None = None
    #: names of unparsed entities (``<!ENTITY n SYSTEM "..." NDATA x>``): the legal values
    #: of ENTITY / ENTITIES attributes.  Added by the DTD front-end (additive field).
    unparsed_entities: tuple[str, ...] = ()
    #: names of declared ``<!NOTATION>``s, in declaration order.
    notations: tuple[str, ...] = ()
    _el: dict = field(default=None, init=False, repr=False, compare=False, hash=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_el", {e.name: e for e in self.elements})

    def element(self, name: str) -> ElementDecl | None:
        return self._el.get(name)

    def attlist(self, element: str) -> tuple[AttributeDecl, ...]:
        return tuple(a for a in self.attributes if a.element == element)
