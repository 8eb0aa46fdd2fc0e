"""JSON Schema instance validation with the specification's decimal ``multipleOf``.

The ``jsonschema`` library checks ``multipleOf`` in floats (``instance / divisor``, then
``int(q) != q``), so it judges ``0.07`` not a multiple of ``0.01`` (``0.07 / 0.01`` is
``7.000000000000001``): 13.6% of the two-decimal values are rejected that way.  The
specification (2020-12 validation 6.2.1, "division by this keyword's value results in an
integer") is about the mathematical values of the JSON numbers, i.e. the decimals written in
the text; the JSON-Schema-Test-Suite follows it (``multipleOf: 0.0001`` accepts ``0.0075``).

:func:`validator_class` extends a ``jsonschema`` validator class (``jsonschema.validators.
extend``) with one change: ``multipleOf`` (draft-03's ``divisibleBy``) is decided in exact
rational arithmetic on :func:`exact_value` of the divisor and of the instance (a ``float``
stands for the decimal of its shortest round-trip ``repr``, the literal ``json`` read it
from; an ``int`` for itself).  Every other keyword, the messages, the type checker and the
format checker are the library's.  Non-finite floats (``json`` reads ``NaN``/``Infinity``)
keep the library's behaviour.  The grammars of :mod:`decoding.frontends.jsonschema` generate
exactly the multiples in this sense (``logic.multiple_of``), so this is the validator the
project checks generated instances with.

This module imports nothing from the package (the guard uses it and never reaches the C
extension); ``jsonschema`` is imported when a class is first built.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = ["exact_value", "validator_class", "validator", "is_multiple"]


def exact_value(x: int | float | Decimal | Fraction) -> Fraction:
    """The exact value of a JSON number as Python holds it: an ``int`` (or ``Fraction``,
    ``Decimal``) is itself; a finite ``float`` is the decimal of ``repr(x)`` (Python's
    shortest round-trip spelling, so ``0.01`` is 1/100, not the double nearest to it).
    ValueError for a non-finite float."""
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"{x!r} is not a JSON number")
        return Fraction(Decimal(repr(x)))
    if isinstance(x, Decimal):
        return Fraction(x)
    return Fraction(x)


def is_multiple(instance: int | float, divisor: int | float) -> bool:
    """Whether ``instance / divisor`` is an integer for the exact values (see :func:`exact_value`)."""
    if isinstance(instance, int) and isinstance(divisor, int):
        return instance % divisor == 0
    return (exact_value(instance) / exact_value(divisor)).denominator == 1


def _finite(x: Any) -> bool:
    return not isinstance(x, float) or math.isfinite(x)


@functools.lru_cache(maxsize=None)
def _extend(cls: type) -> type:
    import jsonschema
    from jsonschema.exceptions import ValidationError

    library = jsonschema.Draft202012Validator.VALIDATORS["multipleOf"]
    keys = [k for k, fn in cls.VALIDATORS.items() if fn is library]
    if not keys:
        return cls

    def multiple_of(validator: Any, dB: Any, instance: Any, schema: Any):
        if not validator.is_type(instance, "number"):
            return
        if not (_finite(instance) and _finite(dB)) or isinstance(instance, bool) or isinstance(dB, bool):
            yield from library(validator, dB, instance, schema)  # outside JSON: as the library
            return
        if not is_multiple(instance, dB):
            yield ValidationError(f"{instance!r} is not a multiple of {dB}")

    ext = jsonschema.validators.extend(cls, {k: multiple_of for k in keys})
    ext.__name__ = ext.__qualname__ = "Decimal" + cls.__name__
    plain_evolve = ext.evolve

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema picks the class of a sub-schema by its "$schema" (``validator_for``), which
        # returns the library's registered class for a ``$ref`` into a root or resource that
        # names its draft: keep the decimal multipleOf there too
        new = plain_evolve(self, **changes)
        want = _extend(type(new))
        if want is type(new):
            return new
        import attrs
        return want(**{f.alias: getattr(new, f.name) for f in attrs.fields(type(new)) if f.init})

    ext.evolve = evolve
    return ext


def validator_class(schema: Any = None, cls: type | None = None) -> type:
    """The validator class for ``schema``: the draft its ``$schema`` names (default 2020-12,
    as ``jsonschema.validators.validator_for``), or ``cls`` when given, with the decimal
    ``multipleOf`` (see the module docstring)."""
    import jsonschema

    if cls is None:
        cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                                  default=jsonschema.Draft202012Validator)
    return _extend(cls)


def validator(schema: Any, format_checker: Any = None, registry: Any = None, cls: type | None = None) -> Any:
    """A validator for ``schema`` (see :func:`validator_class`); ``format_checker`` and
    ``registry`` as jsonschema's (None: the class defaults, i.e. formats not asserted)."""
    kw: dict[str, Any] = {"format_checker": format_checker}
    if registry is not None:
        kw["registry"] = registry
    return validator_class(schema, cls)(schema, **kw)
