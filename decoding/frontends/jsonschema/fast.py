"""Fast path of the JSON Schema front-end: a schema in a common subset written straight as
the native NFA builder's program (:mod:`decoding.ir.program`), with no IR made, estimated,
digested or serialised.

The subset (anything else, or any option other than the defaults that matter, gives None:
the caller runs :func:`~decoding.frontends.jsonschema.compile.compile_schema`):

- every compiled schema is an object with ``type`` (a kind or a list of kinds) or
  ``enum``/``const`` (next to ``type`` at most);
- strings: ``minLength``/``maxLength`` up to :data:`MAX_BOUND`; no ``pattern``/``format``;
- integers and numbers without bounds; booleans; null;
- arrays: ``items`` (one schema of the subset), ``minItems``/``maxItems`` up to
  :data:`MAX_BOUND`;
- objects: ``properties`` (each a schema of the subset), ``required`` (declared names only),
  ``additionalProperties: false`` or absent (with ``extra_properties="omit"``, the default);
- annotations (:data:`~decoding.frontends.jsonschema.compile.ANNOTATIONS`) and unknown
  keywords, which are listed in ``ignored`` as the full front-end lists them.

Invariant (``tests/test_schema_fast.py`` checks it on the shared corpora): for every schema
it accepts, the program's language is the language of ``compile_schema(schema, **options)``'s
grammar, and ``ignored`` is that front-end's.  The schema is checked first by the same
:func:`~decoding.frontends.jsonschema.check.check_schema`; a schema it rejects gives None (the
full front-end then raises the same error).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

from decoding.frontends.jsonschema.check import check_schema
from decoding.frontends.jsonschema.compile import (_KNOWN, ANNOTATIONS, DEFAULT_MAX_NFA, _any_string, _constants,
                                                   _kind_of, _value_texts)
from decoding.frontends.jsonschema.jsonstr import quote
from decoding.frontends.jsonschema.merge import TYPES
from decoding.frontends.jsonschema.refs import pointer_join
from decoding.ir.program import ProgramWriter
from decoding.limits import DEFAULT_LIMITS, Limits

__all__ = ["FastProgram", "fast_program", "MAX_BOUND", "FAST_VERSION"]

#: the largest ``minLength``/``maxLength``/``minItems``/``maxItems`` written here (larger
#: bounds are the counted back-end's: the full front-end and ``auto`` decide)
MAX_BOUND = 16
#: schemas nested deeper than this (objects and arrays) are left to the full front-end
MAX_NESTING = 32
#: part of the digest: changed whenever the meaning of the records written here changes
FAST_VERSION = 1
#: the keywords of the subset besides annotations (unknown keywords are annotations too)
_SUBSET = frozenset({"type", "enum", "const", "properties", "required", "additionalProperties", "items",
                     "minItems", "maxItems", "minLength", "maxLength"})
#: the options whose defaults the subset needs (the others cannot change its language: no
#: ``$ref``, ``format``, free-form value or untyped schema is compiled here)
_NEEDED = {"whitespace": "compact", "extra_properties": "omit"}


@dataclass(frozen=True)
class FastProgram:
    """The program of a schema: records and literal bytes written after the plain prefix,
    the root record's offset, the front-end's ``ignored`` list and a digest of the plain
    prefix and the records (a cache key part: equal digests, equal languages)."""
    code: Any  # array('i')
    lits: bytes
    root: int
    ignored: tuple[str, ...]
    digest: str


class _Decline(Exception):
    """Internal: the schema is outside the subset."""


def fast_program(schema: Any, plain: tuple[Mapping[int, int], int, int, bytes], *, limits: Limits = DEFAULT_LIMITS,
                 max_nfa: int = DEFAULT_MAX_NFA, **options: Any) -> FastProgram | None:
    """The program of ``schema`` (a parsed JSON Schema) or None (outside the subset, another
    option, or a schema :func:`check_schema` rejects).  ``plain``: the offsets of the
    registered plain nodes' records, the prefix's code entries, literal bytes and digest
    (:func:`decoding.backends.automaton.plain_program_offsets`, read after
    :func:`prepare`)."""
    if not isinstance(schema, dict) or max_nfa < DEFAULT_MAX_NFA or limits.max_nfa_states < \
            DEFAULT_LIMITS.max_nfa_states or limits.max_compile_work < DEFAULT_LIMITS.max_compile_work:
        return None
    for k, v in options.items():
        want = _NEEDED.get(k)
        if want is not None and v != want:
            return None
    try:
        check_schema(schema, limits)
    except Exception:  # noqa: BLE001 - the full front-end raises it, located as it locates it
        return None
    at, base, nlit, prefix = plain
    w = _Writer(ProgramWriter(base, nlit), at)
    try:
        root = w.node(schema, "", 0)
    except _Decline:
        return None
    code, lits = w.out.code, bytes(w.out.lits)
    h = hashlib.blake2b(prefix, digest_size=32)
    h.update(b"%d:%d:%d:" % (FAST_VERSION, root, len(code)))
    h.update(code.tobytes())
    h.update(lits)
    return FastProgram(code, lits, root, tuple(w.ignored), "fast:" + h.hexdigest())


def prepare() -> None:
    """Register the constant nodes the programs name (a JSON string, an integer, a number) as
    plain nodes, once per process: call before reading the plain prefix's offsets."""
    _constants()


class _Writer:
    __slots__ = ("out", "at", "ignored", "_string", "_char", "_integer", "_number")

    def __init__(self, out: ProgramWriter, at: Mapping[int, int]) -> None:
        self.out = out
        self.at = at
        self.ignored: list[str] = []
        c = _constants()
        try:
            self._char = at[id(c.nodes[0])]
            self._integer = at[id(c.nodes[1])]
            self._number = at[id(c.nodes[2])]
            self._string = at[id(_any_string())]
        except KeyError:  # (the prefix was read before prepare())
            raise _Decline from None

    def node(self, s: Any, ptr: str, depth: int) -> int:
        if type(s) is not dict or depth > MAX_NESTING:
            raise _Decline
        for k in s:
            if k not in _SUBSET and k not in ANNOTATIONS:
                if k in _KNOWN:
                    raise _Decline
                self.ignored.append(f"{ptr or '/'} {k}")
        t = s.get("type")
        if t is None:
            kinds = None
        elif type(t) is str:
            kinds = {t}
        else:
            kinds = set(t)
            if "number" in kinds:
                kinds.discard("integer")
        if kinds is not None and not kinds <= _TYPES:
            raise _Decline
        if "enum" in s or "const" in s:
            return self.values(s, t, ptr)
        if not kinds:
            raise _Decline
        alts = [self.kind(k, s, ptr, depth) for k in _ORDER if k in kinds]
        return self.out.choice(*alts)

    def values(self, s: dict, t: Any, ptr: str) -> int:
        if "enum" in s and "const" in s:
            raise _Decline
        values = [s["const"]] if "const" in s else s["enum"]
        if type(values) is not list:
            raise _Decline
        if t is not None:
            kinds = {t} if type(t) is str else set(t)
            values = [v for v in values if _kind_of(v) in kinds or (_kind_of(v) == "integer" and "number" in kinds)]
        texts = _value_texts(values, ptr, "const" if "const" in s else "enum")
        if not texts:
            raise _Decline
        lit = self.out.lit
        return self.out.choice(*dict.fromkeys(lit(x.encode("utf-8")) for x in texts))

    def kind(self, kind: str, s: dict, ptr: str, depth: int) -> int:
        out = self.out
        if kind == "null":
            return out.lit(b"null")
        if kind == "boolean":
            return out.choice(out.lit(b"true"), out.lit(b"false"))
        if kind == "integer":
            return self._integer
        if kind == "number":
            return self._number
        if kind == "string":
            lo, hi = _bound(s, "minLength", 0), _bound(s, "maxLength", None)
            if lo == 0 and hi is None:
                return self._string
            if hi is not None and hi < lo:
                raise _Decline
            q = out.lit(b'"')
            return out.seq(q, out.repeat(self._char, lo, hi), q)
        if kind == "array":
            return self.array(s, ptr, depth)
        return self.obj(s, ptr, depth)

    def array(self, s: dict, ptr: str, depth: int) -> int:
        items = s.get("items")
        if type(items) is not dict:
            raise _Decline
        mn, mx = _bound(s, "minItems", 0), _bound(s, "maxItems", None)
        out = self.out
        if mx == 0:
            if mn:
                raise _Decline
            return out.lit(b"[]")
        if mx is not None and mx < mn:
            raise _Decline
        tail = self.node(items, pointer_join(ptr, "items"), depth + 1)
        comma = out.lit(b",")
        if mx is None and mn <= 1:
            body = out.sep_loop(tail, comma)
        else:
            body = out.seq(tail, out.repeat(out.seq(comma, tail), max(0, mn - 1), None if mx is None else mx - 1))
        if mn == 0:
            body = out.opt(body)
        return out.seq(out.lit(b"["), body, out.lit(b"]"))

    def obj(self, s: dict, ptr: str, depth: int) -> int:
        props = s.get("properties")
        addl = s.get("additionalProperties", None)
        if addl is not None and addl is not False:
            raise _Decline
        if not props:
            if addl is None or props is not None and type(props) is not dict:
                raise _Decline  # (a bare object: any members)
            props = {}
        if type(props) is not dict:
            raise _Decline
        required = s.get("required", ())
        if type(required) not in (list, tuple) or any(r not in props for r in required):
            raise _Decline
        req = set(required)
        out = self.out
        comma = out.lit(b",")
        # the members written so far: ``first`` whether none may have been (the empty prefix
        # is still possible), ``some`` the language of the non-empty prefixes (-1: none);
        # each member is one ``"key":value`` after a comma unless it is the first written
        first, some = True, -1
        for key, sub in props.items():
            m = out.seq(out.lit(quote(key) + b":"), self.node(sub, pointer_join(ptr, "properties", key), depth + 1))
            alts = [m] if first else []
            if key in req:
                if some >= 0:
                    alts.append(out.seq(some, comma, m))
                first = False
            elif some >= 0:
                alts.append(out.seq(some, out.opt(out.seq(comma, m))))
            some = out.choice(*alts)
        if some < 0:
            body = out.eps()
        else:
            body = out.choice(some, out.eps()) if first else some
        return out.seq(out.lit(b"{"), body, out.lit(b"}"))


_TYPES = frozenset(TYPES)
#: the order the full front-end writes a union of kinds in (the language does not depend on it)
_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")


def _bound(s: dict, kw: str, default: int | None) -> int | None:
    """A length or count keyword of the subset: a non-negative int up to :data:`MAX_BOUND`."""
    v = s.get(kw, default)
    if v is default:
        return v
    if type(v) is not int or not 0 <= v <= MAX_BOUND:
        raise _Decline
    return v
