"""Fast path of the JSON Schema front-end: a schema in a common subset written straight as
the native NFA builder's program (:mod:`decoding.ir.program`), with no IR made, estimated,
digested or serialised.

The subset (anything else, or any option other than the defaults that matter, gives None,
mostly before the schema is checked: the caller runs
:func:`~decoding.frontends.jsonschema.compile.compile_schema`):

- a schema with ``type`` (a kind or a list of kinds; absent: the kinds its keywords name, as
  ``untyped="infer"`` reads them), ``enum``/``const`` (next to ``type``
  at most), a local ``$ref`` alone (its target inlined; no cycle, no ``$id`` below the root),
  ``anyOf`` (the union; constraints beside it merged into each branch, as the pipeline merges
  them), ``oneOf`` alone whose branches each name a ``type`` and no
  two share a kind (integer and number are one kind; no ``enum``/``const``/``$ref`` in a
  branch, ``required`` in an object branch only: the pipeline's union then), ``true``, or
  annotations only (a free-form value, ``free_depth`` deep);
- strings: ``minLength`` up to :data:`MAX_BOUND` (given a ``tail``: :data:`MAX_MIN_LENGTH`),
  ``maxLength`` up to it or (given a ``tail``) any, or an asserted ``format`` alone, or a
  ``pattern`` (with length bounds: as the pipeline bounds it, its intersection with them an
  automaton leaf the caller's ``leaf_of`` makes).  With ``tail`` (the counted
  back-end's explicit units for the vocabulary), a string whose ``maxLength - minLength``
  exceeds ``tail + 1`` is written as the counted back-end's rewrite writes it
  (:func:`decoding.backends.counted.rewrite_products`): ``"`` ``U{lo}`` ``<en_i>`` ``U*``
  ``(<tp_i> U{0,tail})?`` ``"``, where ``U`` is one JSON string character, ``<en_i>`` is the
  special ``2i`` and ``<tp_i>`` the special ``2i + 1``, and loop ``i`` counts at most
  ``loops[i]`` units; equal bounds share one loop (as the rewrite shares equal repetitions);
- integers and numbers with ``minimum``/``maximum``/exclusive bounds, no ``multipleOf``;
  booleans; null;
- arrays: ``items`` (one schema of the subset; absent or true: any value), ``minItems``/``maxItems`` up to
  :data:`MAX_BOUND`;
- objects: ``properties`` (each a schema of the subset), ``required`` (declared names only),
  ``minProperties`` 0 or 1,
  ``additionalProperties`` false, absent (with ``extra_properties="omit"``, the default), a
  schema, or a bare object (undeclared names after the declared members);
- annotations (:data:`~decoding.frontends.jsonschema.compile.ANNOTATIONS`) and unknown
  keywords, which are listed in ``ignored`` as the full front-end lists them.

Invariant (``tests/test_schema_fast.py`` checks it on the shared corpora): for every schema
it accepts, the program's language is the language of ``compile_schema(schema, **options)``'s
grammar, and ``ignored`` is that front-end's.  An accepted schema is also checked by the
same :func:`~decoding.frontends.jsonschema.check.check_schema`; a schema it rejects gives None
(the full front-end then raises the same error).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from decoding.errors import LimitError, SchemaError
from decoding.frontends.jsonschema.check import check_schema
from decoding.frontends.jsonschema.compile import (_KNOWN, ANNOTATIONS, DEFAULT_FREE_DEPTH, DEFAULT_MAX_NFA,
                                                   _any_string, _constants, _format_string, _kind_of, _nothing,
                                                   _bound_single_repeat, _value_texts, inferred_kinds,
                                                   number_node)
from decoding.frontends.jsonschema.formats import CHECKED_FORMATS, format_regex
from decoding.frontends.jsonschema.jsonstr import (PRINTABLE_ASCII, any_json_char, json_char, non_ascii_json_char,
                                                   quote, string_of)
from decoding.frontends.jsonschema.logic import NOT_IN_MEMO, name_trie, one_char, other_char
from decoding.frontends.jsonschema.merge import SEMANTIC, TYPES, merge, normalize
from decoding.frontends.jsonschema.refs import pointer_join, resolve_ref
from decoding.ir import MAX_CP, Dfa, Node, complement_ranges, inter, plain_ids, rep
from decoding.ir.program import NK_CHOICE, NK_SEQ, Chunk, ProgramWriter
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.text.regex import length_range, parse_pattern, rx_to_ir

__all__ = ["FastProgram", "fast_program", "counted_unit", "MAX_BOUND", "FAST_VERSION"]

#: the largest ``minLength``/``maxLength``/``minItems``/``maxItems`` written here (larger
#: bounds are the counted back-end's: the full front-end and ``auto`` decide)
MAX_BOUND = 16
#: the largest ``minLength`` written when long strings are counted (``tail`` given): its
#: characters are written out before the loop (a JSON string character: ~14 NFA states)
MAX_MIN_LENGTH = 128
#: the full front-end's size estimate of one JSON string character of a bounded repetition
#: (NFA states: ``check_size`` of ``maxLength: 100`` is 7,204)
UNROLLED_CHAR_STATES = 72
#: the largest ``maxLength`` written as a counted loop
MAX_LENGTH = 2**31 - 1
#: schemas nested deeper than this (objects and arrays) are left to the full front-end
MAX_NESTING = 32
#: the deepest free-form values (option ``free_depth``) written here
MAX_FREE_DEPTH = 3
#: part of the digest: changed whenever the meaning of the records written here changes
FAST_VERSION = 2
#: the keywords of the subset besides annotations (unknown keywords are annotations too)
_SUBSET = frozenset({"type", "enum", "const", "properties", "required", "additionalProperties", "minProperties", "items",
                     "pattern",
                     "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                     "exclusiveMaximum", "format"})
#: the keywords that constrain a value (beside ``$ref``/``anyOf``/``enum``: left to the pipeline)
_SEMANTIC = SEMANTIC
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
#: an object key the walk always declines, or a ``minItems``/``maxItems`` above MAX_BOUND
#: (16) or a ``minLength`` above MAX_MIN_LENGTH (128), in the schema's compact JSON text: a schema holding one is declined before the walk (also
#: when the key is a property name or sits in an unused definition: only speed is lost).  No
#: string's content matches: a quote inside one is escaped, so ``allOf\":`` is never ``allOf":``
_OUTSIDE = re.compile(r'"(?:allOf|not|if|patternProperties|multipleOf|contains|prefixItems|'
                      r'dependencies|dependentRequired|dependentSchemas|propertyNames|maxProperties|'
                      r'unevaluatedProperties|unevaluatedItems|\$dynamicRef|\$recursiveRef|uniqueItems)":|'
                      r'"(?:maxItems|minItems)":(?:1[7-9]|[2-9]\d|\d{3})|"minLength":(?:129|1[3-9]\d|[2-9]\d\d|\d{4})|'
                      r'"minProperties":(?:[2-9]|\d\d)')
#: the options whose defaults the subset needs (the others cannot change its language: no
#: ``$ref``, ``format``, free-form value or untyped schema is compiled here)
_NEEDED = {"whitespace": "compact", "extra_properties": "omit", "format_mode": "assert", "untyped": "infer"}


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
    loops: tuple[int, ...] = ()  # loop i's most units in its middle (X); its markers are specials 2i, 2i+1
    tail: int = 0  # the explicit units after each loop's <tp> (the ``tail`` given)
    leaves: tuple = ()  # the program's automaton leaves (integer ranges), and where their records lie
    leaf_at: tuple[int, ...] = ()
    patterns: bool = False  # whether it holds a ``pattern`` (a nested repetition's subsets can be huge)
    unions: bool = False  # whether it holds an ``anyOf``/``oneOf`` (two strings may start at one place)
    lows: tuple[int, ...] = ()  # loop i's string's units before its <en_i> (minLength): 0 when ``"`` is right before it


class _Decline(Exception):
    """Internal: the schema is outside the subset."""


def fast_program(schema: Any, plain: Callable[[], tuple[Mapping[int, int], int, int, bytes]], *,
                 limits: Limits = DEFAULT_LIMITS, max_nfa: int = DEFAULT_MAX_NFA, registry: Any = None,
                 free_depth: int = DEFAULT_FREE_DEPTH, tail: int | None = None, count_above: int | None = None,
                 leaf_of: Callable[[Node, int], Dfa | None] | None = None, **options: Any) -> FastProgram | None:
    """The program of ``schema`` (a parsed JSON Schema) or None (outside the subset, another
    option, or a schema :func:`check_schema` rejects).  ``plain()``: the offsets of the
    registered plain nodes' records, the prefix's code entries, literal bytes and digest
    (:func:`decoding.backends.automaton.plain_program_offsets`); read again when a format's
    string is first made (it becomes a plain node).  ``tail``: write long ``maxLength``
    strings as counted loops with this many explicit units (None: decline them), when their
    unrolled size as the full front-end estimates it (:data:`UNROLLED_CHAR_STATES` per
    character beyond ``minLength``, summed over the places they are written) is above
    ``count_above`` (None: always), as ``auto`` counts a grammar estimated above
    ``COUNT_ABOVE``; otherwise unrolled.  ``leaf_of(node, max_states)``: the minimal automaton
    of a regular node as a leaf (None: empty; LimitError: more states), for a ``pattern``
    with length bounds (None: declined)."""
    if not isinstance(schema, dict) or max_nfa < DEFAULT_MAX_NFA or limits.max_nfa_states < \
            DEFAULT_LIMITS.max_nfa_states or limits.max_compile_work < DEFAULT_LIMITS.max_compile_work or \
            registry is not None or type(free_depth) is not int or not 0 <= free_depth <= MAX_FREE_DEPTH:
        return None
    for k, v in options.items():
        want = _NEEDED.get(k)
        if want is not None and v != want:
            return None
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, check_circular=False)
    except (TypeError, ValueError, RecursionError):
        return None
    if _OUTSIDE.search(text):
        return None  # (a keyword or bound the walk would decline, found at C speed: most declines)
    count = tail is not None
    for _ in range(8):  # (a retry per format string made plain by this call: a few per process)
        at, base, nlit, prefix = plain()
        w = _Writer(ProgramWriter(base, nlit), at, schema, free_depth, tail, prefix, count, leaf_of)
        try:
            root = w.node(schema, "", 0)
        except _Stale:
            continue
        except (_Decline, TypeError, ValueError, OverflowError, SchemaError, LimitError):
            return None  # (an error: the full front-end raises it, located)
        if w.loops and count_above is not None and w.unrolled <= count_above:
            count = False  # (small enough unrolled: written again so)
            continue
        break
    else:
        return None
    try:  # (after the walk: most schemas outside the subset are declined sooner than checked)
        check_schema(schema, limits)
    except Exception:  # noqa: BLE001 - the full front-end raises it, located as it locates it
        return None
    code, lits = w.out.code, bytes(w.out.lits)
    h = hashlib.blake2b(prefix, digest_size=32)
    h.update(b"%d:%d:%d:" % (FAST_VERSION, root, len(code)))  # (FAST_VERSION 2: leaves by their digests)
    h.update(code.tobytes())
    h.update(lits)
    if w.loops:
        h.update(repr((tail, w.loops)).encode())
    leaves = w.out.leaves
    for x in leaves:
        h.update(_leaf_digest(x))
    return FastProgram(code, lits, root, tuple(w.ignored), "fast:" + h.hexdigest(), tuple(w.loops), tail or 0,
                       tuple(leaves), tuple(w.out.leaf_at), w.patterns, w.unions, tuple(w.lows))


def prepare() -> None:
    """Register the constant nodes the programs name (a JSON string, an integer, a number) as
    plain nodes, once per process: call before reading the plain prefix's offsets."""
    _constants()


def counted_unit() -> Node:
    """The unit of the counted loops a program holds: one JSON string character (the node
    the pipeline's string repetitions repeat)."""
    return _constants().nodes[0]


class _Stale(Exception):
    """Internal: a node became plain while writing (the prefix's offsets are stale)."""


class _Writer:
    __slots__ = ("out", "leaf_of", "at", "root", "free_depth", "ignored", "_string", "_char", "_integer", "_number", "_non_ascii", "_refs",
                 "_active", "_ids", "_free", "tail", "loops", "_counted", "_chunks", "_parts", "count", "unrolled",
                 "patterns", "unions", "lows")

    def __init__(self, out: ProgramWriter, at: Mapping[int, int], root: dict, free_depth: int,
                 tail: int | None, prefix: bytes = b"", count: bool = True,
                 leaf_of: Callable[[Node, int], Dfa | None] | None = None) -> None:
        self.out = out
        self.leaf_of = leaf_of
        self.count = count  # long strings as counted loops (else unrolled)
        self.unrolled = 0  # the full front-end's estimate of the long strings unrolled
        self.patterns = False  # a ``pattern`` was written
        self.unions = False  # an ``anyOf``/``oneOf`` was written
        chunks = _CHUNKS.get(prefix)  # (chunks name the prefix's records by their offsets)
        if chunks is None or len(chunks) >= CHUNKS_MAX:
            if len(_CHUNKS) >= 4:
                _CHUNKS.clear()
            chunks = _CHUNKS[prefix] = {}
        self._chunks = chunks
        self._parts: dict[tuple[str, str], int] = {}
        self.tail = tail
        self.loops: list[int] = []
        self.lows: list[int] = []
        self._counted: dict[tuple[int, int], int] = {}  # (minLength, maxLength) -> the string's records
        self.at = at
        self.root = root
        self.free_depth = free_depth
        self._free: dict[int, int] = {}
        self.ignored: list[str] = []
        self._refs: dict[str, int] = {}  # a $ref's text -> its target's records
        self._active: set[str] = set()  # the $refs whose targets are being written
        self._ids: bool | None = None  # whether the schema holds a $id (or draft-04 id)
        c = _constants()
        try:
            self._char = at[id(c.nodes[0])]
            self._integer = at[id(c.nodes[1])]
            self._number = at[id(c.nodes[2])]
            self._string = at[id(_any_string())]
            self._non_ascii = at[id(non_ascii_json_char())]
        except KeyError:  # (the prefix was read before prepare())
            raise _Decline from None

    def bounded(self, s: dict, ptr: str, integer: bool) -> int:
        """The records of the integers or numbers within the bounds of ``s``
        (``number_node``'s): written once per program, and kept per process by their bounds
        (the bounds' JSON text: ``1``, ``1.0`` and ``true`` stay apart) as a relocatable chunk,
        or as the node where it holds an automaton leaf (a long range)."""
        key = ("n", json.dumps([integer] + [[k, s[k]] for k in _BOUNDS if k in s]))
        o = self._parts.get(key)
        if o is not None:
            return o
        hit = self._chunks.get(key)
        if hit is None:
            node = number_node(s, ptr, integer)  # (raises for bad bounds before anything is kept)
            if _nothing(node):
                hit = _EMPTY
            elif id(node) in self.at:
                hit = node
            else:
                if id(node) in plain_ids():
                    raise _Stale
                hit = ProgramWriter.chunk(node, self.at) or node
            self._chunks[key] = hit
        if hit is _EMPTY:
            raise _Decline
        o = self._parts[key] = self.out.put(hit) if isinstance(hit, Chunk) else self.ir(hit)
        return o

    def ir(self, node: Node) -> int:
        """The records of an IR node of the front-end's (regular, no Ref)."""
        if id(node) not in self.at and id(node) in plain_ids():
            raise _Stale
        return self.out.ir(node, self.at)

    def node(self, s: Any, ptr: str, depth: int) -> int:
        if s is True:
            return self.free(self.free_depth)
        if type(s) is not dict or depth > MAX_NESTING:
            raise _Decline
        if "$ref" in s:
            return self.ref(s, ptr, depth)
        if "anyOf" in s or "oneOf" in s:
            return self.any_of(s, ptr, depth)
        for k in s:
            if k not in _SUBSET and k not in ANNOTATIONS:
                if k in _KNOWN:
                    raise _Decline
                self.ignored.append(f"{ptr or '/'} {k}")
        if "exclusiveMinimum" in s or "exclusiveMaximum" in s:
            s = normalize(s)  # (draft-04's boolean exclusive bounds)
        t = s.get("type")
        if t is None:  # (the kinds its keywords name: the untyped="infer" default)
            kinds = inferred_kinds(s)
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
        if kinds is None and not any(k in _SUBSET for k in s):
            return self.free(self.free_depth)  # (annotations only: any value)
        if not kinds:
            raise _Decline
        alts = [self.kind(k, s, ptr, depth) for k in _ORDER if k in kinds]
        return self.out.choice(*alts)

    def ref(self, s: dict, ptr: str, depth: int) -> int:
        """A ``$ref`` alone (annotations beside it): its target's records, written once (the
        DFA back-end inlines every reference); a reference cycle is left to the pipeline."""
        ref = s["$ref"]
        if type(ref) is not str or not ref.startswith("#/") or any(k in _SEMANTIC for k in s if k != "$ref"):
            raise _Decline
        o = self._refs.get(ref)
        if o is not None:
            return o
        if ref in self._active:
            raise _Decline  # (recursion: unrolled to max_depth by the pipeline)
        if self._ids is None:
            self._ids = _holds_id(self.root)
        if self._ids:
            raise _Decline  # (scopes of their own)
        tptr, target = resolve_ref(self.root, ref, pointer_join(ptr, "$ref"))
        self._active.add(ref)
        try:
            o = self._refs[ref] = self.node(target, tptr, depth + 1)
        finally:
            self._active.discard(ref)
        return o

    def any_of(self, s: dict, ptr: str, depth: int) -> int:
        """``anyOf`` (or a ``oneOf`` of branches of disjoint kinds: :func:`_disjoint_kinds`)
        with no constraint beside it: the union of its branches."""
        kw = "anyOf" if "anyOf" in s else "oneOf"
        self.unions = True
        branches = s[kw]
        if type(branches) is not list or not branches or any(k not in _KNOWN for k in s if k != kw):
            raise _Decline  # (the pipeline merges the rest into each branch: unknown keys are listed there)
        if any(k in _SEMANTIC for k in s if k != kw):
            # anyOf with constraints beside it: each branch merged with them, as the pipeline
            # merges them (a branch that is a reference or not a schema object: the pipeline)
            rest = {k: v for k, v in s.items() if k != kw}
            if kw == "oneOf" or any(b is not True and (type(b) is not dict or "$ref" in b) for b in branches) \
                    or any(k in rest or any(type(b) is dict and k in b for b in branches) for k in _BOUNDS[2:]):
                raise _Decline
            try:
                branches = [merge(rest, {} if b is True else b, pointer_join(ptr, kw, i))
                            for i, b in enumerate(branches)]
            except SchemaError:
                raise _Decline from None  # (an allOf of the two there)
        elif kw == "oneOf" and not _disjoint_kinds(branches):
            raise _Decline  # (the pipeline proves disjointness, or subtracts the others' languages)
        alts = [self.node(b, pointer_join(ptr, kw, i), depth + 1) for i, b in enumerate(branches)
                if b is not False]
        if not alts:
            raise _Decline
        return self.out.choice(*dict.fromkeys(alts))

    def values(self, s: dict, t: Any, ptr: str) -> int:
        if "enum" in s and "const" in s or any(k in _SEMANTIC for k in s if k not in ("enum", "const", "type")):
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
        if kind == "integer" or kind == "number":
            if "multipleOf" in s:
                raise _Decline
            if not any(k in s for k in _BOUNDS):
                return self._integer if kind == "integer" else self._number
            return self.bounded(s, ptr, kind == "integer")
        if kind == "string":
            lo = _bound(s, "minLength", 0, MAX_MIN_LENGTH if self.tail is not None else MAX_BOUND)
            hi = _bound(s, "maxLength", None, MAX_LENGTH if self.tail is not None else MAX_BOUND)
            if hi is not None and hi < lo:
                raise _Decline
            fmt = s.get("format")
            if "pattern" in s:
                if fmt is not None:
                    raise _Decline  # (by intersection in the pipeline)
                return self.pattern(s["pattern"], lo, hi)
            if fmt is not None:
                return self.format(fmt, lo, hi, ptr)
            if lo == 0 and hi is None:
                return self._string
            if hi is not None and self.tail is not None and hi - lo > self.tail + 1:
                self.unrolled += UNROLLED_CHAR_STATES * (hi - lo)
                if self.count:
                    return self.counted_string(lo, hi)
            q = out.lit(b'"')
            return out.seq(q, out.repeat(self._char, lo, hi), q)
        if kind == "array":
            return self.array(s, ptr, depth)
        return self.obj(s, ptr, depth)

    def counted_string(self, lo: int, hi: int) -> int:
        """A string of ``lo`` to ``hi`` characters as a counted loop (see the module
        docstring); one loop per distinct ``(lo, hi)``."""
        o = self._counted.get((lo, hi))
        if o is None:
            out, c, tt = self.out, self._char, self.tail
            assert tt is not None
            i = len(self.loops)
            self.loops.append(hi - lo - tt)
            self.lows.append(lo)
            q = out.lit(b'"')
            parts = [q] + ([out.repeat(c, lo, lo)] if lo else [])
            parts += [out.special(2 * i), out.repeat(c, 0, None),
                      out.opt(out.seq(out.special(2 * i + 1), out.repeat(c, 0, tt))), q]
            o = self._counted[(lo, hi)] = out.seq(*parts)
        return o

    def not_in(self, names: list[str]) -> int:
        """The content of a JSON string whose value is none of ``names``: the records of
        :func:`~decoding.frontends.jsonschema.logic.not_in`'s trie, written here node by node,
        its per-process characters as chunks (made once per process: most of its records)."""
        out = self.out
        if not names:
            return out.repeat(self._char, 0, None)

        written: dict[tuple[str, str], int] = self._parts  # (one copy per program: the NFA builder shares its tails)

        def part(key: tuple[str, str]) -> int:
            o = written.get(key)
            if o is not None:
                return o
            o = self.other_char(key[1]) if key[0] == "o" else self.one_char(key[1])
            if o is not None:
                written[key] = o
                return o
            ch = self._chunks.get(key)
            if ch is None:
                node = other_char(key[1]) if key[0] == "o" else one_char(key[1])
                o = self.at.get(id(node))
                if o is not None:  # (made plain by the full front-end: in the prefix)
                    written[key] = o
                    return o
                if id(node) in plain_ids():
                    raise _Stale
                ch = self._chunks[key] = ProgramWriter.chunk(node, self.at)
                if ch is None:
                    raise _Decline
            o = written[key] = out.put(ch)
            return o

        code, base = out.code, out.base
        eps = out.eps()
        get = written.get

        def build(t: dict) -> int:  # (records written inline: ~1k trie nodes in a large object)
            kids = "".join(c for c in t if c)
            alts = [] if "" in t else [eps]
            o = get(("o", kids))
            alts.append(part(("o", kids)) if o is None else o)
            for c in kids:
                sub = build(t[c])
                one = get(("1", c))
                if one is None:
                    one = part(("1", c))
                o = base + len(code)
                code.extend((NK_SEQ, 2, one, sub))
                alts.append(o)
            if len(alts) == 1:
                return alts[0]
            o = base + len(code)
            code.append(NK_CHOICE)
            code.append(len(alts))
            code.extend(alts)
            return o

        return build(name_trie(names))

    def one_char(self, c: str) -> int | None:
        """The record of ``logic.one_char(c)`` for printable ASCII ``c`` (the byte, or the
        escape of ``"`` or ``\\``) written directly; None for other characters."""
        b = ord(c)
        lo, hi = PRINTABLE_ASCII
        if not lo <= b <= hi:
            return None
        if c == '"' or c == "\\":
            return self.out.lit(b"\\" + c.encode())
        return self.out.byteset(((b, b),))

    def other_char(self, kids: str) -> int | None:
        """``logic.other_char(kids)``'s language (a JSON character none of ``kids``, then any
        content) for printable ASCII ``kids`` (a property name's, mostly), written directly as
        records: their complement there as a byte set, the escapes of ``"`` and ``\\``, the
        non-ASCII constant (:func:`~decoding.frontends.jsonschema.jsonstr.non_ascii_json_char`,
        a registered plain node: named by its offset), any content written once per program; no
        node, no chunk.  None for other ``kids`` (the node's chunk is written then)."""
        parts = _ascii_other(kids)
        if parts is None:
            return None
        raw, escapes = parts
        out = self.out
        alts = [out.byteset(raw)] if raw else []
        alts += [out.lit(e) for e in escapes]
        alts.append(self._non_ascii)
        rest = self._parts.get(("*", ""))
        if rest is None:
            rest = self._parts[("*", "")] = out.repeat(self._char, 0, None)
        return out.seq(out.choice(*alts), rest)

    def free(self, depth: int) -> int:
        """A free-form JSON value nesting at most ``depth`` levels (the pipeline's rules
        ``free:<depth>``, inlined: each list one copy of its item)."""
        o = self._free.get(depth)
        if o is not None:
            return o
        out = self.out
        alts = [out.lit(b"null"), out.lit(b"true"), out.lit(b"false"), self._number, self._string]
        if depth > 0:
            v = self.free(depth - 1)
            comma = out.lit(b",")
            alts.append(out.seq(out.lit(b"["), out.opt(out.sep_loop(v, comma)), out.lit(b"]")))
            member = out.seq(self._string, out.lit(b":"), v)
            alts.append(out.seq(out.lit(b"{"), out.opt(out.sep_loop(member, comma)), out.lit(b"}")))
        o = self._free[depth] = out.choice(*alts)
        return o

    def pattern(self, pat: Any, lo: int = 0, hi: int | None = None) -> int:
        """A string matching ``pattern`` (searched, as JSON Schema reads it) of ``lo`` to ``hi``
        characters, no format beside it, as the pipeline's ``string``: the pattern's string
        when its lengths are within the bounds, the bounds folded into a ``^C{m,n}$`` pattern's
        repetition, else their intersection, here an automaton leaf made once per process
        (:func:`_pattern_leaf`; ``hi`` at most :data:`PATTERN_LEAF_MAX_LENGTH`)."""
        if type(pat) is not str:
            raise _Decline
        leaf = None
        try:
            re.compile(pat)
            rx = parse_pattern(pat)
            plo, phi = length_range(rx)
            if plo < lo or (hi is not None and (phi is None or phi > hi)):
                adj = _bound_single_repeat(rx, lo, hi)
                if adj is None:
                    leaf = _pattern_leaf(pat, rx, lo, hi, self.leaf_of)
                elif adj.kind == "chars" and not adj.ranges:
                    raise _Decline  # (no string: the pipeline reports it)
                else:
                    rx = adj
            node = leaf if leaf is not None else string_of(rx_to_ir(rx, json_char))
        except _Decline:
            raise
        except Exception:  # noqa: BLE001 - the pipeline reports it, located
            raise _Decline from None
        if leaf is None:
            self.patterns = True  # (a regex written out; the leaf is a made automaton)
        return self.ir(node)  # (TypeError for a node it cannot write: declined)

    def format(self, fmt: Any, lo: int, hi: int | None, ptr: str) -> int:
        """A string of a ``format`` (asserted: the option's default), no length bound."""
        if type(fmt) is not str or lo or hi is not None:
            raise _Decline
        src = format_regex(fmt)
        if src is None:
            if fmt in CHECKED_FORMATS:
                raise _Decline  # (lenient or an error: the pipeline says which)
            self.ignored.append(f"{ptr or '/'} format")
            return self._string
        return self.ir(_format_string(src, parse_pattern(src, anchored=True)))

    def array(self, s: dict, ptr: str, depth: int) -> int:
        items = s.get("items", True)  # (absent: any value, as the pipeline reads it)
        if type(items) is not dict and items is not True:
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
        if addl is not None and addl is not False and addl is not True and type(addl) is not dict:
            raise _Decline
        if not props:
            if props is not None and type(props) is not dict or "patternProperties" in s:
                raise _Decline
            if addl is None:
                addl = True  # (a bare object: any members, free-form values)
            props = {}
        if type(props) is not dict:
            raise _Decline
        required = s.get("required", ())
        if type(required) not in (list, tuple) or any(type(r) is not str for r in required):
            raise _Decline
        missing = [r for r in required if r not in props]
        if missing:  # (required, not declared: a member after the declared ones, its value the
            # additionalProperties schema, as the pipeline writes it; none allowed: it reports it)
            if addl is False or len(set(missing)) != len(missing):
                raise _Decline
            props = {**props, **{r: True if addl is None else addl for r in missing}}
        nonempty = s.get("minProperties", 0)
        if type(nonempty) is not int or not 0 <= nonempty <= 1:
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
        if addl is True or type(addl) is dict:
            # undeclared members after the declared ones: a name that is none of theirs,
            # the additionalProperties value (written after the declared values, as the
            # pipeline compiles them)
            v = self.node(addl, pointer_join(ptr, "additionalProperties"), depth + 1)
            q = out.lit(b'"')
            extra = out.seq(q, self.not_in(list(props)), q, out.lit(b":"), v)
            alts = [] if some < 0 else [out.seq(some, out.repeat(out.seq(comma, extra), 0, None))]
            if first:
                loop = out.sep_loop(extra, comma)
                alts.append(loop if nonempty else out.opt(loop))
            body = out.choice(*alts)
        elif some < 0:
            if nonempty:
                raise _Decline  # (no member can be written: the pipeline reports it)
            body = out.eps()
        else:
            body = out.choice(some, out.eps()) if first and not nonempty else some
        return out.seq(out.lit(b"{"), body, out.lit(b"}"))


_TYPES = frozenset(TYPES)
#: the order the full front-end writes a union of kinds in (the language does not depend on it)
_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")


#: the records of :func:`_Writer.not_in`'s characters, per process, by the digest of the plain
#: prefix they were written after (a few prefixes; each at most ``CHUNKS_MAX`` chunks): a
#: writer only reads its own prefix's, also while another thread writes after a newer prefix
_CHUNKS: dict[bytes, dict[tuple[str, str], Any]] = {}
_EMPTY = object()  # (a chunk cache entry: the bounds admit no value)
CHUNKS_MAX = 8192


#: the longest ``maxLength`` beside a ``pattern`` the fast path intersects (an automaton leaf of
#: at most :data:`PATTERN_LEAF_MAX_STATES` states); above, or bigger, the pipeline's counted
#: products do it
PATTERN_LEAF_MAX_LENGTH = 256
PATTERN_LEAF_MAX_STATES = 4096
#: (pattern, lo, hi) -> the leaf of :func:`_pattern_leaf` or ``_EMPTY`` (per process; bounded)
_PATTERN_LEAVES: dict[tuple[str, int, int], Any] = {}


#: :func:`_ascii_other` by ``kids`` (per process, at most ``logic.NOT_IN_MEMO``)
_ASCII_OTHER: dict[str, Any] = {}


def _ascii_other(kids: str) -> tuple[tuple[tuple[int, int], ...], tuple[bytes, ...]] | None:
    """The printable ASCII characters a JSON string holds as themselves that are none of
    ``kids`` (byte ranges) and the escapes of ``"`` and ``\\`` unless in ``kids``: with the
    non-ASCII constant, the first characters of :meth:`_Writer.other_char`; None where a kid is not
    printable ASCII.  Memoized (:data:`_ASCII_OTHER`)."""
    hit = _ASCII_OTHER.get(kids, _EMPTY)
    if hit is not _EMPTY:
        return hit
    lo, hi = PRINTABLE_ASCII
    if all(lo <= ord(c) <= hi for c in kids):
        raw = complement_ranges(((0, lo - 1), (hi + 1, MAX_CP), (0x22, 0x22), (0x5C, 0x5C),
                                 *((ord(c), ord(c)) for c in kids)))
        hit = raw, tuple(e for c, e in (('"', b'\\"'), ("\\", b"\\\\")) if c not in kids)
    else:
        hit = None
    if len(_ASCII_OTHER) < NOT_IN_MEMO:
        _ASCII_OTHER[kids] = hit
    return hit


#: id of a leaf -> (the leaf, the digest of its edges and accepting states): the leaves of
#: bounded numbers and patterns are kept per process, and their text is long (bounded)
_LEAF_DIGESTS: dict[int, tuple[Dfa, bytes]] = {}


def _leaf_digest(x: Dfa) -> bytes:
    hit = _LEAF_DIGESTS.get(id(x))
    if hit is None or hit[0] is not x:
        hit = (x, hashlib.blake2b(repr((x.edges, x.accept)).encode(), digest_size=32).digest())
        if len(_LEAF_DIGESTS) >= 4096:
            _LEAF_DIGESTS.clear()
        _LEAF_DIGESTS[id(x)] = hit
    return hit[1]


def _pattern_leaf(pat: str, rx: Any, lo: int, hi: int | None, leaf_of: Callable[[Node, int], Dfa | None] | None) -> Dfa:
    """The JSON strings of ``lo`` to ``hi`` characters whose text matches ``rx`` (parsed
    ``pat``), as the pipeline's intersection reads them, as one automaton leaf (``leaf_of``:
    the minimal automaton of a regular node of at most that many states, None where it is
    empty; given by the caller, as front-ends build no automata); _Decline where it is
    empty, too long, too big, or no ``leaf_of`` is given."""
    if hi is None or hi > PATTERN_LEAF_MAX_LENGTH or leaf_of is None:
        raise _Decline
    key = (pat, lo, hi)
    hit = _PATTERN_LEAVES.get(key)
    if hit is None:
        node = inter(string_of(rx_to_ir(rx, json_char)), string_of(rep(any_json_char(), lo, hi)))
        try:
            d = leaf_of(node, PATTERN_LEAF_MAX_STATES)
        except LimitError:
            d = None
        hit = _EMPTY if d is None else d
        if len(_PATTERN_LEAVES) >= 1024:
            _PATTERN_LEAVES.clear()
        _PATTERN_LEAVES[key] = hit
    if hit is _EMPTY:
        raise _Decline
    return hit


def _disjoint_kinds(branches: list) -> bool:
    """Whether every branch of a ``oneOf`` is a schema with a ``type`` and no
    ``enum``/``const``/``$ref``, no two branches share a kind (integer and number count as
    one), and only an object branch says ``required``: every instance of one branch then fails
    every other, and the full front-end compiles the union (no branch is narrowed)."""
    seen: set[str] = set()
    for b in branches:
        if type(b) is not dict or "enum" in b or "const" in b or "$ref" in b:
            return False
        t = b.get("type")
        kinds = {t} if type(t) is str else set(t) if type(t) is list and all(type(x) is str for x in t) else None
        if not kinds or len(kinds) != len(t if type(t) is list else (t,)):
            return False
        if kinds & {"integer", "number"}:
            kinds |= {"integer", "number"}
        if "required" in b and kinds != {"object"} or kinds & seen:
            return False
        seen |= kinds
    return True


def _bound(s: dict, kw: str, default: int | None, most: int = 0) -> int | None:
    """A length or count keyword of the subset: a non-negative int up to ``most`` (0:
    :data:`MAX_BOUND`)."""
    v = s.get(kw, default)
    if v is default:
        return v
    if type(v) is not int or not 0 <= v <= (most or MAX_BOUND):
        raise _Decline
    return v


def _holds_id(schema: Any) -> bool:
    """Whether a schema object below the root of ``schema`` (data keywords skipped) has a
    ``$id``, or a draft-04 ``id`` string, or the root's names a fragment: references then
    resolve in scopes the fast path does not track.  (The root's own base URI is the document
    every ``#/...`` reference resolves in: the same targets.)"""
    todo = [schema]
    root = True
    while todo:
        x = todo.pop()
        if type(x) is dict:
            if root:
                root = False
                rid = x.get("$id", x.get("id"))
                if "$id" in x and "id" in x or rid is not None and (type(rid) is not str or "#" in rid.rstrip("#")):
                    return True
            elif "$id" in x or type(x.get("id")) is str:
                return True
            for k, v in x.items():
                if k in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
                    if type(v) is dict:
                        todo.extend(v.values())
                elif k not in ("enum", "const", "examples", "default") and type(v) in (dict, list):
                    todo.append(v)
        elif type(x) is list:
            todo.extend(x)
    return False
