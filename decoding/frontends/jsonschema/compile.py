"""JSON Schema -> Grammar IR.

Invariant: every byte string the returned grammar accepts is valid JSON that
``jsonschema`` validates against the schema (formats included).  Where a keyword cannot
be honoured exactly the compiler raises :class:`SchemaError` (pointer, keyword, reason);
it never widens the language.  Policies are documented in docs/json-schema.md.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from decoding.errors import GrammarError, LimitError, SchemaError, UnsatisfiableSchemaError, UsageError
import contextlib
from typing import Iterator

from decoding.ir import (DEFAULT_MAX_DEPTH, EMPTY, MAX_CP, NOTHING, ByteSet, Choice, Diff, Grammar, Inter, Node, Ref, Repeat, Seq,
                         Special,
                         byteset, choice, diff, inter, reachable_rules, register_plain, walk,
                         lit, opt, rep, seq, star)
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.frontends.json_validator import exact_value, validator_class
from decoding.frontends.jsonschema.check import check_schema, load_schema_text
from decoding.frontends.jsonschema.formats import CHECKED_FORMATS, check_format, format_regex
from decoding.frontends.jsonschema.jsonstr import (any_json_char, dumps, encode_str, json_char, non_ascii_json_char,
                                                   quote, string_of)
from decoding.ir.key import canonical_ir_text, grammar_digest
from decoding.ir.literals import literal_set
from decoding.ir.productive import known_productive
from decoding.ir.size import Estimate, _node_estimate, _node_fold, attach_estimates
from decoding.frontends.jsonschema.merge import SEMANTIC, TYPES, json_equal, merge, normalize
from decoding.frontends.jsonschema.numbers import INTEGER, NUMBER, integer_bounds, integer_range, number_range
from decoding.text.regex import PatternError, Rx, length_range, parse_pattern, rx_to_ir
from decoding.frontends.jsonschema.refs import pointer_join, resolve_pointer, resolve_ref
from decoding.frontends.jsonschema.logic import (BOOLEAN_DEPTH, NOT_IN_MEMO, Logic, count_list, multiple_of, peel_not,
                                                 not_in as _not_in)


#: keywords whose values are data, not schemas (the walk of :meth:`_Compiler._pointer_of` skips them)
_NOT_SCHEMAS = frozenset(("enum", "const", "examples", "default"))


def _estimate(node: Node, counted: bool, memo: dict | None = None) -> Estimate:
    """Size estimate of one rule (Refs count as one symbol; with ``counted``, large
    repetitions as the counted back-end builds them), memoized in ``memo`` for one compile:
    ``memo[counted]`` is the subtree memo and keep list of :func:`decoding.ir.size._node_fold`
    (the keep list holds the nodes alive while their ids are keys)."""
    if memo is None:
        return _node_estimate(node, counted)
    shared = memo.get(counted)
    if shared is None:  # subtrees estimated once per compile
        shared = memo[counted] = _seeded_fold(counted)
    hit = shared[0].get(id(node))  # (most calls: a node estimated already, read without a fold)
    return hit if hit is not None else _node_fold(node, counted, shared[0], shared[1])


def _nothing(n: Node) -> bool:
    """``n == NOTHING`` (the empty language), without the dataclasses' comparison."""
    return n.__class__ is Choice and not n.items  # type: ignore[union-attr]


def _uncounted_estimate(node: Node, memo: dict):
    """The estimate of ``node`` with ``counted=False`` (the DFA's own unrolled size), read from
    the counted one (which :meth:`_Compiler.bounded` has mostly made already) when no
    repetition in it was counted (``Estimate.cut``: then the two are the same)."""
    est = _estimate(node, True, memo)
    return _estimate(node, False, memo) if est.cut else est


@dataclass(frozen=True)
class _Constants:
    """The nodes nearly every compile reaches: a JSON string character
    (:func:`any_json_char`), :data:`INTEGER`, :data:`NUMBER` and any JSON string, with what the passes over
    a grammar learn of them once per process: ``ids`` (every node of their subtrees, none
    a Ref), ``productive`` (the ids of those that derive some string), ``estimates``
    (per ``counted``, the subtree memo of :func:`decoding.ir.size._fold`).

    Sound across compiles whatever their options or registries: these facts depend on the
    nodes alone (with Refs as one symbol, an estimate depends on the node and ``counted``
    alone, ``size._node_estimate``), and ``nodes`` holds the nodes for the life of the
    process, so no id here ever names another node."""
    nodes: tuple[Node, ...]
    ids: frozenset[int]
    productive: frozenset[int]
    estimates: dict[bool, dict]


_CONSTANTS: list[_Constants] = []


def _constants() -> _Constants:
    """The :class:`_Constants` of this process (built on first use; extended by
    :func:`_format_string`)."""
    if not _CONSTANTS:
        _CONSTANTS.append(_with_constants(None, (any_json_char(), INTEGER, NUMBER,
                                                 string_of(star(any_json_char())), non_ascii_json_char())))
    return _CONSTANTS[0]


def _with_constants(base: _Constants | None, nodes: tuple[Node, ...]) -> _Constants:
    """``base`` (None: no constant yet) with ``nodes`` added: registered plain (GrammarError if
    one is not), their ids, productive ids and estimates learnt."""
    inside = [n for r in nodes for n in walk(r)]
    if any(isinstance(n, Ref) for n in inside):
        raise AssertionError("the shared constant nodes must hold no Ref")
    for r in nodes:  # the IR passes (grammar check, productive rules, key) learn them once
        register_plain(r)
    productive: set[int] = set() if base is None else set(base.productive)
    for r in nodes:
        _productive(r, set(), productive)
    estimates: dict[bool, dict] = {}
    for counted in (False, True):
        memo: dict = {} if base is None else dict(base.estimates[counted])
        keep: list = []
        for r in nodes:
            _node_fold(r, counted, memo, keep)
        estimates[counted] = memo
    ids = frozenset(map(id, inside))
    if base is None:
        return _Constants(nodes, ids, frozenset(productive), estimates)
    return _Constants(base.nodes + nodes, base.ids | ids, frozenset(productive), estimates)


#: the JSON string node of each format regex made so far (:func:`_format_string`), by its source
_FORMAT_STRINGS: dict[str, Node] = {}


def _format_string(src: str, rx: Rx) -> Node:
    """``string_of(rx_to_ir(rx, json_char))`` of a format's regex (``src``, parsed as ``rx``):
    made once per process and added to :func:`_constants` (formats are a fixed set of
    regexes, so this stays small), so what the passes learn of it is learnt once.  A node
    that cannot be a constant (not plain) is made anew each time, as before."""
    node = _FORMAT_STRINGS.get(src)
    if node is not None:
        return node
    node = string_of(rx_to_ir(rx, json_char))
    base = _constants()
    try:
        more = _with_constants(base, (node,))
    except GrammarError:
        return node
    if _CONSTANTS[0] is base:  # (another thread's addition kept otherwise: this node is just not seeded)
        _CONSTANTS[0] = more
    _FORMAT_STRINGS[src] = node
    return node


def warm() -> Grammar:
    """Build this process's shared constant nodes now (:func:`_constants`: any JSON string,
    the numbers) and their canonical key texts, so that no schema's compile pays for them
    (about 4 ms): :class:`~decoding.compiler.Compiler` calls it once, and compiles the
    grammar returned, which reaches every one of them, to warm the back-end's per-process
    records of them.  Idempotent; the nodes are the ones a compile would have made on first
    use.  The formats' strings are still made by the first schema that uses each (seeding
    every compile with all of them would cost each compile more than it saves)."""
    grammar = Grammar("shared", (("shared", choice(*_constants().nodes)),))
    canonical_ir_text(grammar)
    grammar_digest(grammar)  # (its plain texts as the digest folds them)
    return grammar


def _any_string() -> Node:
    """Any JSON string (``string_of(star(any_json_char()))``): one node for the process,
    among :func:`_constants`, so what the passes learn of it is learnt once."""
    return _constants().nodes[3]


#: the counted size estimates (Refs as one symbol) of the per-process nodes of
#: :func:`logic.not_in` and of the free-form value rules (:func:`_free_bodies`), by id, and of
#: every node below them, with the nodes (alive while their ids are keys); see
#: :func:`_shared_estimate`
_SHARED_ESTIMATES: tuple[dict[int, Estimate], list[Node]] = ({}, [])
#: at most this many entries in :data:`_SHARED_ESTIMATES` (beyond: estimated per compile)
SHARED_ESTIMATES_MAX = 20_000


def _shared_estimate(node: Node) -> Estimate | None:
    """The counted estimate of ``node``, a per-process node (a part of :func:`logic.not_in`'s
    tries, kept by logic.py for the life of the process, or a free-form value rule's body,
    kept by :data:`_FREE_BODIES`), made once per process: with Refs as one symbol an
    estimate depends on the node and ``counted`` alone (see :class:`_Constants`), so a
    compile's memo may hold it as if it had made it.  None when the table is full."""
    memo, keep = _SHARED_ESTIMATES
    est = memo.get(id(node))
    if est is None and len(memo) < SHARED_ESTIMATES_MAX:
        est = _node_fold(node, True, memo, keep)
    return est


#: whether each part of :func:`logic.not_in`'s tries derives some string, by id, with the
#: node (held alive: its id names no other node while the entry lives); see _shared_productive
_SHARED_PRODUCTIVE: dict[int, tuple[Node, bool]] = {}


def _shared_productive(node: Node) -> bool:
    """Whether ``node`` (a Ref-free part of :func:`logic.not_in`'s tries) derives some
    string, by :func:`_productive` (which does not depend on the rules for a Ref-free node),
    found once per process (at most 4 x NOT_IN_MEMO nodes kept)."""
    hit = _SHARED_PRODUCTIVE.get(id(node))
    if hit is not None:
        return hit[1]
    ok = _productive(node, set(), set())
    if len(_SHARED_PRODUCTIVE) < 4 * NOT_IN_MEMO:
        _SHARED_PRODUCTIVE[id(node)] = (node, ok)
    return ok


def _seeded_fold(counted: bool) -> tuple[dict, list]:
    """A fresh subtree memo and keep list for one compile's estimates (see
    :func:`decoding.ir.size._fold`), holding the estimates of :func:`_constants`'s nodes."""
    return dict(_constants().estimates[counted]), []


__all__ = ["SchemaGrammar", "compile_schema", "DEFAULT_MAX_DEPTH", "DEFAULT_MAX_WS",
           "DEFAULT_FREE_DEPTH", "DEFAULT_MAX_NFA", "EXTRA_PROPERTIES", "FORMAT_MODES", "UNTYPED"]

DEFAULT_MAX_WS = 8
DEFAULT_FREE_DEPTH = 2
DEFAULT_MAX_NFA = 300_000
HOIST_ABOVE = 1_000  # see _Compiler.hoist
#: an enum with more values than this compiles to one minimal automaton leaf
#: (:func:`decoding.ir.literals.literal_set`, same language) instead of a Choice of literals:
#: every later pass then costs per automaton state, not per value.  Smaller enums stay
#: literals (readable GBNF).  Either is countable by the counted back-end as (part of) the
#: unit of a large array (decoding.backends.counted._unit accepts Dfa leaves)
ENUM_AUTOMATON_ABOVE = 256
#: integer bounds (minimum, maximum, ...) of more decimal digits are a LimitError (their
#: digit automata grow with the square of the length); every double has at most 309
MAX_BOUND_DIGITS = 400
# policies for undeclared properties when ``additionalProperties`` is absent
EXTRA_PROPERTIES = ("omit", "allow")
#: ``format``: asserted (generation default) or an annotation (draft 2020-12's default)
FORMAT_MODES = ("assert", "annotate")
#: a schema without ``type``: generate the kinds its keywords constrain ("infer", generation
#: default) or also every other kind as a free value ("any", as the spec says)
UNTYPED = ("infer", "any")

ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$comment", "title", "description", "default", "examples", "example",
    "deprecated", "readOnly", "writeOnly", "$anchor", "$dynamicAnchor", "$vocabulary",
    "contentMediaType", "contentEncoding", "contentSchema", "$defs", "definitions",
})
SUPPORTED = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
    "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref",
    "uniqueItems", "multipleOf", "unevaluatedProperties", "unevaluatedItems", "if",
    "dependentRequired", "dependentSchemas", "dependencies", "not", "then", "else", "contains",
    "minContains", "maxContains", "propertyNames",
})
MAX_DEP_SCHEMAS = 3
#: uniqueItems is compiled (one "at most once" automaton per value, intersected: 2**n
#: states) when every item is one of at most this many values
MAX_UNIQUE_DOMAIN = 10
# known semantic keywords we cannot honour, and the instance kinds they constrain
UNSUPPORTED: dict[str, frozenset[str]] = {
    "$recursiveRef": frozenset(TYPES),
}
#: every keyword :meth:`_Compiler.base` does not list as ignored
_KNOWN = SUPPORTED | ANNOTATIONS | frozenset(UNSUPPORTED)
#: keywords compiled by intersection/complement (decoding.frontends.jsonschema.logic)
LOGIC = ("not", "if")
def inferred_kinds(s: dict) -> set[str] | None:
    """The kinds an untyped schema's keywords name (``integer`` with ``number``), or None:
    what ``untyped="infer"`` generates."""
    kinds = {k for k, kws in _KIND_KW.items() if any(w in s for w in kws)}
    if "number" in kinds:
        kinds.add("integer")
    return kinds or None


_KIND_KW = {
    "object": ("properties", "required", "additionalProperties", "patternProperties",
               "minProperties", "maxProperties", "propertyNames", "unevaluatedProperties",
               "dependentRequired", "dependentSchemas", "dependencies"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains",
              "unevaluatedItems", "minContains", "maxContains"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


@dataclass(frozen=True)
class SchemaGrammar:
    """Compiled schema: the grammar, what ``lenient`` dropped and which unknown keywords
    were treated as annotations (each entry is ``"<pointer> <keyword>"``)."""
    grammar: Grammar
    dropped: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


class _Compiler:
    def __init__(self, root: Any, *, whitespace: str, max_ws: int, max_depth: int,
                 free_depth: int, lenient: bool, extra_properties: str = "omit",
                 max_nfa: int = DEFAULT_MAX_NFA, limits: Limits = DEFAULT_LIMITS,
                 format_mode: str = "assert", untyped: str = "infer", registry: Any = None) -> None:
        self.root = root
        self.format_mode = format_mode
        self.untyped = untyped
        self.max_nfa = max_nfa
        self.limits = limits
        self._building: set[str] = set()
        self.allow_extra = extra_properties == "allow"
        self.lenient = lenient
        self.max_depth = max_depth
        self.free_depth = free_depth
        self.ws, self.comma, self.colon = _separators(whitespace, max_ws)
        self.rules: dict[str, Node] = {}
        self._estimates: dict = {}  # size estimates of this compile (see _estimate)
        self.rule_of_ptr: dict[tuple, str] = {}
        self.dropped: list[str] = []
        self.ignored: list[str] = []
        self._free: dict[int, Node] = {}
        self._inline_refs: list[tuple] = []
        self._keep: list[Any] = []
        #: id of an anyOf/oneOf branch (kept alive in _keep) -> the bare {"$ref": ...} it was
        #: dereferenced from, compiled as that reference (see any_one_of)
        self._ref_branch: dict[int, Any] = {}
        dialect = root.get("$schema", "") if isinstance(root, dict) else ""
        self.legacy = isinstance(dialect, str) and ("draft-04" in dialect or "draft-03" in dialect)
        self.logic = Logic(self)
        self._init_refs(registry)

    # ------------------------------------------------------------------ services for logic.py
    def _init_refs(self, registry: Any) -> None:
        """References resolve through ``referencing`` (what ``jsonschema`` uses): ``$id``
        base URIs, ``$anchor``, ``$dynamicRef``/``$dynamicAnchor`` (the dynamic scope is
        the chain of resources entered while compiling, static here), and remote documents
        from ``registry`` only (a ``referencing.Registry`` or a mapping URI -> schema);
        never the network."""
        referencing, rj = _referencing()
        self._refs_mod = referencing
        dialect = self.root.get("$schema") if isinstance(self.root, dict) else None
        self._spec = rj.specification_with(dialect, default=rj.DRAFT202012) \
            if isinstance(dialect, str) else rj.DRAFT202012
        #: draft-07 and older: ``$ref`` overrides its sibling keywords (``$id`` too).  (By
        #: identity: ``specification_with`` returns these objects themselves, and comparing
        #: specifications by value compares every field)
        spec = self._spec
        self.ref_alone = spec is rj.DRAFT7 or spec is rj.DRAFT4 or spec is rj.DRAFT6 or spec is rj.DRAFT3
        try:
            reg = self._root_registry = _registry(registry)
            self._resolver_now: Any = None
            if registry is not None or isinstance(self.root, dict) and ("$id" in self.root or "id" in self.root):
                self._resolver_now = reg.resolver_with_root(self._spec.create_resource(self.root))
            # (else made on first use, see _resolver: ``create_resource`` wraps the root, it
            # cannot fail, and neither can ``resolver_with_root`` of a root without an id)
        except (referencing.exceptions.CannotDetermineSpecification, TypeError, ValueError) as e:
            raise SchemaError("", None, f"registry: {e}") from None
        self._res_of: dict[int, Any] = {}
        #: ``resolve_ref(root, ref)`` of the references resolved by walking the root (the root
        #: does not change while compiling; ``at`` only words its errors, which are not kept)
        self._local_refs: dict[str, tuple[str, Any]] = {}
        #: the per-process Ref-free parts of the not_in tries made in this compile, by id (see not_in)
        self._shared_parts: dict[int, Node] = {}
        self._ptr_of: dict[int, tuple[Any, Any] | None] | None = None  # see _pointer_of
        self._ids = True  # some schema object holds a $id (known once _ptr_of is built)
        self._dynamic: bool | None = True if registry is not None else None  # see _dynamic_scopes

    @property
    def _resolver(self) -> Any:
        """The ``referencing`` resolver of the scope now; the root's is made on first use (a
        schema without references never needs it)."""
        r = self._resolver_now
        if r is None:
            r = self._resolver_now = self._root_registry.resolver_with_root(self._spec.create_resource(self.root))
        return r

    @_resolver.setter
    def _resolver(self, r: Any) -> None:
        self._resolver_now = r

    def _pointer_of(self, target: Any, default: str) -> str:
        """The place of ``target`` (an object inside the root schema, by identity) in the
        root schema, else ``default``.  The table (the first place a depth-first walk finds,
        not entering enum/const/examples/default values) is built on the first reference
        resolved: a schema without references never walks.  The root is not changed while
        compiling, so the table is the same whenever it is built."""
        links = self._ptr_of
        if links is None:
            # each object's first parent and key (a pointer is made only for a target asked
            # for: a Kubernetes schema has thousands of objects and tens of references)
            links = self._ptr_of = {}
            ids = False
            stack: list[tuple[Any, Any]] = [(self.root, None)]
            push = stack.append
            while stack:
                x, link = stack.pop()
                if isinstance(x, dict):
                    if id(x) not in links:
                        links[id(x)] = link
                    if not ids and ("$id" in x or isinstance(x.get("id"), str)):
                        ids = True
                    for k, v in x.items():
                        if isinstance(v, (dict, list)) and k not in _NOT_SCHEMAS:
                            push((v, (x, k)))
                elif isinstance(x, list):
                    if id(x) not in links:
                        links[id(x)] = link
                    for i, v in enumerate(x):
                        if isinstance(v, (dict, list)):
                            push((v, (x, i)))
            self._ids = ids
        if not isinstance(target, dict) or id(target) not in links:
            return default
        parts = []
        link = links[id(target)]
        while link is not None:
            parent, key = link
            parts.append(key)
            link = links[id(parent)]
        return pointer_join("", *reversed(parts))

    def _local_fast(self) -> bool:
        """Whether a ``#``-fragment reference may be resolved by walking the root schema
        (:func:`resolve_ref`) instead of through ``referencing``: the same target and scope
        when no registry is given, no ``$dynamicRef`` is used and no schema object holds a
        ``$id`` (or a draft-04 string ``id``), so every base URI is the root's and the scope
        entered is the root resolver (``referencing``'s lookup costs ~0.1-0.3 ms a reference
        on large Kubernetes schemas)."""
        if self._ptr_of is None:
            self._pointer_of(None, "")
        return not self._ids and not self._dynamic_scopes()

    def _dynamic_scopes(self) -> bool:
        """Whether reference targets are told apart by their dynamic scope: with a registry,
        or when the schema's text holds ``$dynamicRef`` anywhere (found on the first
        reference: a schema without references never serializes)."""
        if self._dynamic is None:
            self._dynamic = _text_holds(self.root, "$dynamicRef")
        return self._dynamic

    def resolve(self, ref: Any, at: str) -> tuple[str, Any]:
        """(pointer, subschema) of a ``$ref``/``$dynamicRef`` value found at ``at``, in
        the current resolution scope.  The pointer is the target's place in the root
        schema, or ``at``'s subschema for a target in another document."""
        if not isinstance(ref, str):
            raise SchemaError(at, "$ref", "must be a string")
        if ref.startswith("#") and self._local_fast():
            hit = self._local_refs.get(ref)
            if hit is None:
                try:
                    hit = self._local_refs[ref] = resolve_ref(self.root, ref, at)
                except SchemaError:
                    pass  # (referencing may still resolve it; else it reports the same error)
            if hit is not None:
                ptr, target = hit
                self._keep.append(target)
                self._res_of[id(target)] = self._resolver  # (the root's: no $id anywhere)
                if isinstance(target, bool):
                    return ptr, target
                return self._pointer_of(target, at[:-len("/$ref")] if at.endswith("/$ref") else at), target
        exc = self._refs_mod.exceptions
        try:
            resolved = self._resolver.lookup(ref)
        except (exc.Unresolvable, exc.CannotDetermineSpecification) as e:
            if ref.startswith("#"):
                return resolve_ref(self.root, ref, at)  # raises the located, specific error
            raise SchemaError(at, "$ref", f"reference {ref!r} does not resolve (only the schema "
                              f"and the documents of the registry passed in are known): {e}") from None
        target = resolved.contents
        if not isinstance(target, (dict, bool)):
            raise SchemaError(at, "$ref", f"reference {ref!r} is not a schema")
        self._keep.append(target)
        self._res_of[id(target)] = resolved.resolver
        site = at[:-len("/$ref")] if at.endswith("/$ref") else at
        if isinstance(target, bool) and ref.startswith("#"):  # booleans are no identities
            try:
                return resolve_ref(self.root, ref, at)[0], target
            except SchemaError:
                return site, target
        return self._pointer_of(target, site), target

    def ref_key(self, target: Any) -> tuple:
        """Identity of a reference target in its scope: the same subschema reached in a
        different dynamic scope may resolve its ``$dynamicRef`` differently."""
        res = self._res_of.get(id(target), self._resolver)
        dyn: tuple = ()
        if self._dynamic_scopes():
            dyn = tuple(dict.fromkeys(u for u, _ in res.dynamic_scope()))
        return (id(target), res._base_uri, dyn)

    @contextlib.contextmanager
    def scope_of(self, target: Any) -> Iterator[None]:
        """The resolution scope while compiling ``target`` (a referenced subschema)."""
        old = self._resolver
        self._resolver = self._res_of.get(id(target), old)
        try:
            yield
        finally:
            self._resolver = old

    @contextlib.contextmanager
    def subschema(self, s: Any) -> Iterator[None]:
        """Enter ``s``: a ``$id`` changes the base URI (as the validator's descent does)."""
        old = self._resolver
        if isinstance(s, dict) and ("$id" in s or "id" in s):
            try:
                self._resolver = old.in_subresource(self._spec.create_resource(s))
            except Exception:  # noqa: BLE001 - a malformed id: the metaschema check reports it
                pass
        try:
            yield
        finally:
            self._resolver = old

    def format_asserts(self) -> bool:
        return self.format_mode == "assert"

    def format_exact(self, fmt: str) -> bool:
        """Whether the format's regex is exactly the validator's format check (needed to
        complement it); no format is claimed exact yet."""
        return False

    def format_checker(self) -> Any:
        import jsonschema
        return jsonschema.Draft202012Validator.FORMAT_CHECKER if self.format_asserts() else None

    def number_bounds(self, s: dict, ptr: str) -> tuple[Fraction | None, bool, Fraction | None, bool]:
        """(lower, exclusive?, upper, exclusive?) of a number schema, exact values."""
        return number_bounds(s, ptr)

    def multiple(self, mo: Any, ptr: str, integer: bool, exact: bool = False) -> Node:
        """The spellings of multiples of ``mo`` (see :func:`logic.multiple_of`)."""
        if isinstance(mo, bool) or not isinstance(mo, (int, float)) or mo <= 0:
            raise SchemaError(ptr, "multipleOf", "must be a positive number")
        try:
            return multiple_of(mo, integer)
        except ValueError as e:
            raise SchemaError(ptr, "multipleOf", f"multipleOf {mo!r}: {e}") from None

    def contains_bounds(self, s: dict, ptr: str) -> tuple[int, int | None]:
        lo = s.get("minContains", 1)
        hi = s.get("maxContains")
        return int(lo), None if hi is None else int(hi)

    def list_body(self, elems: list[Node], tail: Node, mn: int, mx: int | None) -> Node:
        """Comma-separated items: ``elems[i]`` at position i, then ``tail``; between ``mn``
        and ``mx`` items (NOTHING if none can be)."""
        k = len(elems)
        if mx is not None:
            if mx < mn:
                return NOTHING
            elems = elems[:mx]
            k = len(elems)
        if any(_nothing(e) for e in elems):
            k = elems.index(NOTHING)
            elems = elems[:k]
            mx = k if mx is None else min(mx, k)
            if mn > k:
                return NOTHING
            tail = NOTHING
        a = max(0, mn - k)
        b = None if mx is None else max(0, mx - k)
        if _nothing(tail):
            if a > 0:
                return NOTHING
            b = 0
        if k == 0:
            if b == 0:
                return EMPTY if mn == 0 else NOTHING
            more = rep(seq(self.comma, tail), max(0, a - 1), None if b is None else b - 1)
            body = seq(tail, more)
            return opt(body) if a == 0 else body
        r: Node = rep(seq(self.comma, tail), a, b) if b != 0 else EMPTY
        for j in range(k - 1, 0, -1):
            nxt = seq(self.comma, elems[j], r)
            r = choice(EMPTY, nxt) if j >= mn else nxt
        body = seq(elems[0], r)
        return opt(body) if mn == 0 else body

    def free_kind(self, kind: str) -> Node:
        """Every value of one kind, free-form (nesting ``free_depth``)."""
        if kind == "null":
            return lit("null")
        if kind == "boolean":
            return choice(lit("true"), lit("false"))
        if kind in ("number", "integer"):
            return NUMBER
        if kind == "string":
            return _any_string()
        if self.free_depth <= 0:
            return NOTHING
        self.free(self.free_depth)
        v = self.free(self.free_depth - 1)
        if kind == "array":
            return seq(lit("["), self.ws, opt(seq(v, star(seq(self.comma, v)))), self.ws, lit("]"))
        mem = Ref(f"free-member:{self.free_depth - 1}")
        return seq(lit("{"), self.ws, opt(seq(mem, star(seq(self.comma, mem)))), self.ws, lit("}"))

    # ------------------------------------------------------------------ boolean logic
    def inlined(self, node: Node, ptr: str, kw: str) -> Node:
        """``node`` Ref-free (see :meth:`Logic.inline`), within the size limits."""
        out = self.logic.inline(node, BOOLEAN_DEPTH)
        return self.bounded(out, ptr, kw)

    def logic_node(self, s: dict, ptr: str) -> Node:
        """A schema with ``not`` or ``if``: the exact language of the whole schema when it
        can be built (values nested at most BOOLEAN_DEPTH), else the generation grammar of
        the other keywords intersected with the exact parts."""
        try:
            return self.bounded(self.logic.exact(s, ptr, BOOLEAN_DEPTH), ptr, None)
        except (SchemaError, LimitError) as first:  # the parts alone may still fit
            err = first
        rest = {k: v for k, v in s.items() if k not in ("not", "if", "then", "else")}
        parts: list[Node] = []
        # a part that cannot be built exactly: what is complemented is over-approximated
        # (Logic.over: avoiding a superset of the valid values is sound), what is
        # intersected is the generation grammar (a subset of the valid values)
        try:
            if "not" in s:
                u = self.logic.universe(BOOLEAN_DEPTH)
                inner, p, neg = peel_not(s["not"], pointer_join(ptr, "not"))
                if neg:
                    try:
                        e = self.logic.exact(inner, p, BOOLEAN_DEPTH)
                    except SchemaError:
                        e = self.logic.over(inner, p, BOOLEAN_DEPTH)
                        if e is u:  # widened to every value: nothing left, say why
                            raise
                    parts.append(diff(u, e))
                else:
                    parts.append(self.logic.exact(inner, p, BOOLEAN_DEPTH))
            if "if" in s and ("then" in s or "else" in s):
                ip = pointer_join(ptr, "if")
                u = self.logic.universe(BOOLEAN_DEPTH)
                th = self.inlined(self.node(s.get("then", True), pointer_join(ptr, "then")), ptr, "then")
                el = self.inlined(self.node(s.get("else", True), pointer_join(ptr, "else")), ptr, "else")
                try:
                    e_if = o_if = self.logic.exact(s["if"], ip, BOOLEAN_DEPTH)
                except SchemaError:
                    e_if = self.inlined(self.node(s["if"], ip), ip, None)  # generated: valid
                    o_if = self.logic.over(s["if"], ip, BOOLEAN_DEPTH)
                parts.append(choice(inter(e_if, th), inter(diff(u, o_if), el)))
        except SchemaError:
            raise err from None
        if set(rest) & SEMANTIC:
            parts.insert(0, self.inlined(self.node(rest, ptr), ptr, None))
        if not parts:
            return self.node(rest, ptr)
        return self.bounded(inter(*parts), ptr, None)

    # ------------------------------------------------------------------ entry points
    def ref_only(self, s: Any) -> Any:
        """``s`` as the schema's dialect reads it: under draft-07 and older a ``$ref`` makes
        every sibling keyword (``$id`` included) an annotation, so only ``$ref`` is kept."""
        if self.ref_alone and isinstance(s, dict) and "$ref" in s and len(s) > 1:
            s = {"$ref": s["$ref"]}
            self._keep.append(s)
        return s

    def node(self, s: Any, ptr: str) -> Node:
        if self.ref_alone:
            s = self.ref_only(s)
        if isinstance(s, dict) and ("$id" in s or "id" in s):
            with self.subschema(s):
                return self._node(s, ptr)
        return self._node(s, ptr)

    def _evaluated(self, x: Any, ptr: str, depth: int = 0) -> tuple | None:
        """What ``x`` and its in-place subschemas evaluate (annotation tracking, statically):
        (property names, patterns, every property?, prefix length, every item?); None where
        it depends on which branch holds (anyOf/oneOf/if/dependentSchemas evaluating
        something) or cannot be told."""
        if not isinstance(x, dict) or depth > 16:
            return (set(), set(), False, 0, False) if isinstance(x, bool) or depth <= 16 else None
        names = set(x.get("properties", {}) or {})
        pats = set(x.get("patternProperties", {}) or {})
        allp = "additionalProperties" in x or x.get("unevaluatedProperties") not in (None, True, {})
        x = normalize(x)
        n = len(x.get("prefixItems", []) or [])
        alli = "items" in x or x.get("unevaluatedItems") not in (None, True, {})
        if "contains" in x:
            alli = alli or None  # some items, depending on the instance: only fine if all anyway
        subs: list[tuple[Any, str]] = []
        for k in ("$ref", "$dynamicRef"):
            if k in x:
                try:
                    subs.append(self.resolve(x[k], pointer_join(ptr, k))[::-1])
                except SchemaError:
                    return None
        subs += [(p, pointer_join(ptr, "allOf", i)) for i, p in enumerate(x.get("allOf", []) or [])]
        for sub, sp in subs:
            e = self._evaluated(sub, sp, depth + 1)
            if e is None:
                return None
            names |= e[0]
            pats |= e[1]
            allp = allp or e[2]
            n = max(n, e[3])
            alli = alli or e[4]
        cond = [p for k in ("anyOf", "oneOf") for p in (x.get(k, []) or [])]
        cond += [x[k] for k in ("if", "then", "else") if k in x]
        cond += list((x.get("dependentSchemas", {}) or {}).values())
        for sub in cond:
            e = self._evaluated(sub, ptr, depth + 1)
            if e is None or e[0] or e[1] or e[2] or e[3] or e[4]:
                return None
        if alli is None:
            return None
        return names, pats, allp, n, alli

    def _uneval_rewrite(self, s: dict, ptr: str) -> dict | None:
        """``unevaluatedProperties``/``unevaluatedItems`` next to ``$ref``/``allOf``: the
        evaluated names (items) are known statically, so the keyword becomes an allOf part
        ``{"properties": {name: true...}, "additionalProperties": U}`` (``{"prefixItems":
        [true...], "items": U}``).  None where that is not exact."""
        own = ("unevaluatedProperties", "unevaluatedItems")
        e = self._evaluated({k: v for k, v in s.items() if k not in own}, ptr)
        if e is None:
            return None
        names, pats, allp, n, alli = e
        out = {k: v for k, v in s.items() if k not in ("unevaluatedProperties", "unevaluatedItems")}
        extra: list[dict] = []
        up = s.get("unevaluatedProperties")
        if up not in (None, True, {}) and not allp:
            part: dict = {"properties": {k: True for k in names}, "additionalProperties": up}
            if pats:
                part["patternProperties"] = {p: True for p in pats}
            extra.append(part)
        ui = s.get("unevaluatedItems")
        if ui not in (None, True, {}) and not alli:
            extra.append({"prefixItems": [True] * n, "items": ui} if n else {"items": ui})
        if extra:
            out["allOf"] = list(out.get("allOf", []) or []) + extra
        self._keep.append(out)
        return out

    def _node(self, s: Any, ptr: str) -> Node:
        if isinstance(s, dict) and ("unevaluatedProperties" in s or "unevaluatedItems" in s) \
                and any(s.get(k) not in (None, True, {}) for k in ("unevaluatedProperties", "unevaluatedItems")) \
                and any(k in s for k in ("allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas")):
            r = self._uneval_rewrite(s, ptr)
            if r is not None:
                s = r
        if s is True:
            return self.free(self.free_depth)
        if s is False:
            return NOTHING
        if not isinstance(s, dict):
            raise SchemaError(ptr, None, f"a schema must be an object or a boolean, got {type(s).__name__}")
        if ANNOTATIONS.issuperset(s):
            return self.free(self.free_depth)
        rkw = "$ref" if "$ref" in s else "$dynamicRef" if "$dynamicRef" in s else None
        if rkw is not None:
            if len(self._building) + len(self._inline_refs) >= self.limits.max_nesting:
                n = self.limits.max_nesting
                raise _limit(pointer_join(ptr, rkw), f"references nested more than {n} deep",
                             "max_nesting", n, n + 1)
            rest = {k: v for k, v in s.items() if k != rkw}
            tptr, target = self.resolve(s[rkw], pointer_join(ptr, rkw))
            if not set(rest) & SEMANTIC:
                return self.ref_rule(tptr, target)
            key = self.ref_key(target)
            if key in self._inline_refs:
                raise SchemaError(ptr, rkw, "recursive reference combined with sibling keywords "
                                  "is not supported")
            if target is False:
                return NOTHING
            if self._res_of[id(target)]._base_uri != self._resolver._base_uri or not isinstance(target, dict):
                # another resource: its references resolve in its own scope; intersect
                a = self.inlined(self.ref_rule(tptr, target), ptr, rkw)
                return self.bounded(inter(a, self.inlined(self.node(rest, ptr), ptr, rkw)), ptr, rkw)
            self._inline_refs.append(key)
            try:
                t = normalize(target)
                try:
                    merged = merge(normalize(rest), t, ptr)
                except SchemaError as e:
                    try:
                        a = self.inlined(self.ref_rule(tptr, target), ptr, rkw)
                        return self.bounded(inter(a, self.inlined(self.node(rest, ptr), ptr, rkw)), ptr, rkw)
                    except SchemaError:
                        raise e from None
                return self.node(merged, ptr)
            finally:
                self._inline_refs.pop()
        s = normalize(s)
        if "not" in s and _not_of_everything(s["not"], ptr):
            return NOTHING  # not of a schema every instance satisfies (unsat() says why)
        if "not" in s or ("if" in s and ("then" in s or "else" in s)):
            return self.logic_node(s, ptr)
        for k in ("unevaluatedProperties", "unevaluatedItems"):
            if k in s and s[k] is not True and s[k] != {} and any(
                    x in s for x in ("allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas")):
                raise SchemaError(ptr, k, f"'{k}' next to in-place applicators is not supported")
        if "allOf" in s:
            return self.all_of(s, ptr)
        if "anyOf" in s or "oneOf" in s:
            return self.any_one_of(s, ptr)
        return self.base(s, ptr)

    def hoist(self, node: Node, ptr: str) -> Node:
        """A large sub-grammar (more than HOIST_ABOVE automaton states) as a rule of its own:
        the same language (the DFA back-end inlines it again), but the pushdown back-end
        then builds it once instead of once per place it is repeated in its parent."""
        if isinstance(node, Ref) or _nothing(node):
            return node
        # the DFA's own unrolled size (counted=False)
        if _uncounted_estimate(node, self._estimates).states <= HOIST_ABOVE:
            return node
        name = f"h{len(self.rules)}:{ptr or '#'}"
        self.rules[name] = node
        return Ref(name)

    def ref_rule(self, tptr: str, target: Any) -> Node:
        key = self.ref_key(target)
        name = self.rule_of_ptr.get(key)
        if name is None:
            name = f"r{len(self.rule_of_ptr)}:{tptr or '#'}"
            self.rule_of_ptr[key] = name
            self.rules[name] = NOTHING  # placeholder for cycles
            self._building.add(name)
            old = self._resolver  # (scope_of(target), inline)
            self._resolver = self._res_of.get(id(target), old)
            try:
                self.rules[name] = self.node(target, tptr)
            finally:
                self._resolver = old
                self._building.discard(name)
        if name not in self._building:
            body = self.rules[name]
            if _nothing(body):
                return NOTHING  # a finished rule with no instance (e.g. a ref to false): no branch here
            if isinstance(body, Ref):
                return body  # a reference to a reference: no rule of its own (chains stay flat)
        return Ref(name)

    # ------------------------------------------------------------------ size limits
    def bounded(self, node: Node, ptr: str, kw: str | None) -> Node:
        """``node`` if its estimated automaton (states, determinising work) is within the
        limits; else a :class:`LimitError` at ``ptr/kw`` (the keyword whose repetition or
        list made it large).  Checked where the node is built, before any automaton."""
        est = _estimate(node, True, self._estimates)
        if not self.limits.refuse_on_estimates:
            return node  # (estimated all the same: hoisting and the back-ends read the estimates)
        states = est.states
        if states > self.max_nfa:
            raise _limit(pointer_join(ptr, kw) if kw else ptr, f"'{kw or 'schema'}' expands to about {states} "
                         "automaton states", "max_nfa", self.max_nfa, states, estimated=True)
        work = est.work
        if work > self.limits.max_compile_work:
            raise _limit(pointer_join(ptr, kw) if kw else ptr, f"'{kw or 'schema'}' costs about {work} steps "
                         "to determinise (a counted "
                         "repetition of variable-length items)", "max_compile_work",
                         self.limits.max_compile_work, work, estimated=True)
        return node

    def _deref(self, s: Any, ptr: str, depth: int = 0) -> Any:
        s = self.ref_only(s)
        while isinstance(s, dict) and "$ref" in s:
            if depth > 16:
                raise SchemaError(ptr, "$ref", "reference chain too deep or cyclic inside allOf")
            rest = {k: v for k, v in s.items() if k != "$ref"}
            _, target = self.resolve(s["$ref"], pointer_join(ptr, "$ref"))
            if isinstance(target, dict) and self._res_of[id(target)]._base_uri != self._resolver._base_uri:
                raise SchemaError(ptr, "$ref", "a reference into another resource cannot be merged here")
            if target is False:
                return False
            target = self._deref(target, ptr, depth + 1)
            s = merge(normalize(rest), normalize(target) if isinstance(target, dict) else {}, ptr) \
                if target is not True else rest
            depth += 1
        return normalize(s) if isinstance(s, dict) else s

    def all_of(self, s: dict, ptr: str) -> Node:
        parts = s["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError(ptr, "allOf", "must be a non-empty array")
        acc: Any = {k: v for k, v in s.items() if k != "allOf"}
        derefed = []
        for i, p in enumerate(parts):
            try:
                p = self._deref(p, pointer_join(ptr, "allOf", i))
            except SchemaError:
                pass  # kept as is (a reference into another resource): intersected below
            if p is False:
                return NOTHING
            derefed.append(p)
        try:
            for i, p in enumerate(derefed):
                if isinstance(p, dict) and "$ref" in p:
                    raise SchemaError(pointer_join(ptr, "allOf", i), "$ref", "a reference into another "
                                      "resource cannot be merged")
                if p is True:
                    continue
                acc = merge(acc, p, pointer_join(ptr, "allOf", i))
        except SchemaError as e:
            # no merged schema: intersect the parts' languages (each a sound subset)
            rest = {k: v for k, v in s.items() if k != "allOf"}
            langs: list[Node] = []
            try:
                for i, p in enumerate(derefed):
                    if p is True:
                        continue
                    pp = pointer_join(ptr, "allOf", i)
                    langs.append(self.inlined(self.node(merge(rest, p, pp) if rest else p, pp), pp, None))
            except SchemaError:
                raise e from None
            self._keep.append(derefed)
            return self.bounded(inter(*langs), ptr, "allOf") if langs else self.node(rest, ptr)
        self._keep.append(acc)
        return self.node(acc, ptr)

    def any_one_of(self, s: dict, ptr: str) -> Node:
        kw = "anyOf" if "anyOf" in s else "oneOf"
        branches = s[kw]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(ptr, kw, "must be a non-empty array")
        rest = {k: v for k, v in s.items() if k != kw}
        merged = []
        # a branch that is only a reference is compiled as that reference (a rule: recursion
        # is cut at max_depth), not as the schema it was dereferenced to for the analysis
        # below (a recursive element, "children": {"oneOf": [..., {"$ref": "#/element"}]},
        # would otherwise be inlined into itself without end)
        for i, b in enumerate(branches):
            bp = pointer_join(ptr, kw, i)
            raw = b
            try:
                b = self._deref(b, bp)
            except SchemaError:
                if not (isinstance(b, dict) and "$ref" in b):
                    raise  # else: a reference into another resource, compiled by node()
            if b is False:
                merged.append(False)
                continue
            try:
                merged.append(merge(rest, b if b is not True else {}, bp) if rest else b)
            except SchemaError:  # no merged schema: the branch is an allOf (by intersection)
                merged.append({"allOf": [rest, b]})
            if isinstance(raw, dict) and isinstance(b, dict) and b is not raw and \
                    not (set(raw) - {"$ref"}) & SEMANTIC and not set(rest) & SEMANTIC:
                self._ref_branch[id(merged[-1])] = raw
        self._keep.append(merged)
        if kw == "oneOf" and self.unsat(s, ptr) is not None:
            return NOTHING  # provably no instance: the empty language is exact
        if kw == "oneOf":
            original = merged
            merged = self._separate(self._force_discriminators(merged))
            try:
                self._check_disjoint(merged, ptr, original)
            except SchemaError as e:
                return self.exactly_one(original, ptr, e)
        alts = [self.hoist(self.node(self._ref_branch.get(id(m), m), pointer_join(ptr, kw, i)),
                           pointer_join(ptr, kw, i)) for i, m in enumerate(merged)]
        return choice(*[a for a in alts if not _nothing(a)]) if any(not _nothing(a) for a in alts) else NOTHING

    def exactly_one(self, branches: list, ptr: str, err: SchemaError) -> Node:
        """``oneOf`` whose branches may overlap: branch i's generation language, within the
        universe U(BOOLEAN_DEPTH), minus the exact languages of the others (exact only
        within U: ``97523.0`` is outside it, so it is never generated).  A branch whose
        exact language cannot be built (a ``format``: the checker's exact language is not
        a regex here) is avoided by its over-approximation (``Logic.over``): sound, and
        the other branches generate a little less."""
        try:
            exact = []
            for i, b in enumerate(branches):
                bp = pointer_join(ptr, "oneOf", i)
                try:
                    exact.append(self.logic.exact(b, bp, BOOLEAN_DEPTH))
                except SchemaError:
                    exact.append(self.logic.over(b, bp, BOOLEAN_DEPTH))
            alts = []
            for i, b in enumerate(branches):
                bp = pointer_join(ptr, "oneOf", i)
                others = [x for j, x in enumerate(exact) if j != i and not _nothing(x)]
                mine = self.inlined(self.node(self._ref_branch.get(id(b), b), bp), bp, None)
                if others:  # the others' exact languages decide only within the universe
                    mine = diff(inter(mine, self.logic.universe(BOOLEAN_DEPTH)), choice(*others))
                alts.append(mine)
        except SchemaError:
            raise err from None
        alts = [a for a in alts if not _nothing(a)]
        return self.bounded(choice(*alts), ptr, "oneOf") if alts else NOTHING

    # ------------------------------------------------------------------ unsatisfiability
    def unsat(self, s: Any, ptr: str, depth: int = 0) -> tuple[str, str | None, str] | None:
        """A proof that no instance is valid against ``s``: ``(pointer, keyword, reason)``,
        or None.  Sound, not complete; independent of the generation policies.  Rules: the
        ``false`` schema; an empty ``enum``; ``allOf``/``$ref`` with an unsatisfiable part;
        ``anyOf``/``oneOf`` whose branches are all unsatisfiable; ``oneOf`` with two or more
        branches that every instance of the sibling keywords satisfies (branches that only
        say ``required`` with names the siblings already require, or no constraint at all);
        an object-only schema with a required property whose schema is unsatisfiable."""
        if s is False:
            return (ptr, None, "the schema is false")
        if not isinstance(s, dict) or depth > 32:
            return None
        s = self.ref_only(s)
        if "$ref" in s:
            try:
                tptr, target = self.resolve(s["$ref"], pointer_join(ptr, "$ref"))
            except SchemaError:
                return None
            hit = self.unsat(target, tptr, depth + 1)
            if hit is not None:
                return hit
        if isinstance(s.get("enum"), list) and not s["enum"]:
            return (ptr, "enum", "enum is empty")
        if "not" in s and _not_of_everything(s["not"], ptr):
            # the place is the schema holding the innermost 'not' of a peeled chain
            where = peel_not(s["not"], pointer_join(ptr, "not"))[1].rsplit("/", 1)[0]
            return (where, "not", "'not' of a schema that every instance satisfies")
        if isinstance(s.get("allOf"), list):
            for i, p in enumerate(s["allOf"]):
                hit = self.unsat(p, pointer_join(ptr, "allOf", i), depth + 1)
                if hit is not None:
                    return hit
        for kw in ("anyOf", "oneOf"):
            br = s.get(kw)
            if not isinstance(br, list) or not br:
                continue
            hits = [self.unsat(b, pointer_join(ptr, kw, i), depth + 1) for i, b in enumerate(br)]
            if all(h is not None for h in hits):
                return (ptr, kw, f"every {kw} branch is unsatisfiable ({hits[0][0] or '/'}: {hits[0][2]})")
            if kw == "oneOf":
                req = s.get("required") if isinstance(s.get("required"), list) else []
                implied = [i for i, b in enumerate(br) if _implied_by_required(b, req)]
                if len(implied) >= 2:
                    return (ptr, "oneOf", f"branches {implied[0]} and {implied[1]} hold for every "
                            "instance of the sibling keywords (their required names are already "
                            "required), so no instance matches exactly one branch")
        t = s.get("type")
        if t == "object" or t == ["object"]:
            props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
            req = s.get("required") if isinstance(s.get("required"), list) else []
            for k in req:
                if k in props:
                    hit = self.unsat(props[k], pointer_join(ptr, "properties", k), depth + 1)
                    if hit is not None:
                        return hit
        return None

    # ------------------------------------------------------------------ oneOf disjointness
    def _kinds(self, s: Any) -> set[str]:
        if s is True or not isinstance(s, dict):
            return set(TYPES) if s is not False else set()
        vals = None
        if "const" in s:
            vals = [s["const"]]
        elif "enum" in s and isinstance(s["enum"], list):
            vals = s["enum"]
        if vals is not None:
            return {_kind_of(v) for v in vals}
        t = s.get("type")
        if t is None:
            inferred = self._inferred(s)
            return set(TYPES) if inferred is None or self.untyped == "any" else inferred
        ts = {t} if isinstance(t, str) else set(t)
        if "number" in ts:
            ts.add("integer")
        if "integer" in ts:
            ts.add("number")
        return ts

    def _valid_kinds(self, s: Any) -> set[str]:
        """The kinds of value ``s`` may accept (validity, not generation): kinds are
        narrowed only by ``type``, ``enum`` or ``const``, never inferred from keywords."""
        if s is False:
            return set()
        if not isinstance(s, dict):
            return set(TYPES)
        vals = self._values(s)
        if vals is not None:
            return {_kind_of(v) for v in vals} | ({"number"} if any(
                _kind_of(v) == "integer" for v in vals) else set())
        t = s.get("type")
        if t is None:
            return set(TYPES)
        ts = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set(TYPES)
        if ts & {"number", "integer"}:
            ts |= {"number", "integer"}
        return ts

    def _check_disjoint(self, branches: list, ptr: str, original: list) -> None:
        """Every instance generated from branch i fails every other branch j.  ``branches``
        are what is generated (narrowed by _separate/_force_discriminators); generation
        exclusion is proved against the ``original`` branches, which decide validity."""
        for i in range(len(branches)):
            for j in range(i + 1, len(branches)):
                a, b = branches[i], branches[j]
                if a is False or b is False:
                    continue
                # a generated instance must fail the other ORIGINAL branch: a branch without
                # type/enum/const accepts every value its type-specific keywords ignore
                # ({"minLength": 9} holds for every number), whatever kind it generates
                overlap = (self._kinds(a) & self._valid_kinds(original[j])) | \
                    (self._kinds(b) & self._valid_kinds(original[i]))
                if not overlap:
                    continue
                if self._disjoint_values(a, b) or self._discriminated(a, b, overlap):
                    continue
                if self._gen_excluded(a, original[j]) and self._gen_excluded(b, original[i]):
                    continue
                if json_equal(a, b):
                    raise SchemaError(ptr, "oneOf", f"branches {i} and {j} are identical once the "
                                      "sibling keywords are merged in, so no instance matches "
                                      "exactly one of them")
                raise SchemaError(ptr, "oneOf", f"branches {i} and {j} may both match the same "
                                  "instance; oneOf is only supported for provably disjoint branches "
                                  "(different types, enum/const values, or a required "
                                  "discriminator property)")

    def _separate(self, branches: list) -> list:
        """oneOf of object branches that differ only in ``required``: let branch i omit
        one key that each other branch j requires and i does not (a subset of branch i),
        so every generated instance fails the other branches."""
        out = list(branches)
        for i, a in enumerate(branches):
            for j, b in enumerate(branches):
                if i == j or not (isinstance(a, dict) and isinstance(b, dict)):
                    continue
                if self._kinds(a) != {"object"} or self._gen_excluded(out[i], b):
                    continue
                ra = a.get("required", []) if isinstance(a.get("required"), list) else []
                rb = b.get("required", []) if isinstance(b.get("required"), list) else []
                diff = [k for k in rb if k not in ra]
                if not diff:
                    continue
                cur = dict(out[i])
                props = dict(cur.get("properties", {}) if isinstance(cur.get("properties"), dict) else {})
                props[diff[0]] = False
                cur["properties"] = props
                out[i] = cur
        self._keep.append(out)
        return out

    def _gen_excluded(self, gen: Any, other: Any) -> bool:
        return self._never_emits_required(gen, other) or self._always_emits_forbidden(gen, other)

    def _always_emits_forbidden(self, gen: Any, other: Any) -> bool:
        """True if objects generated from ``gen`` always carry a key ``other`` forbids."""
        if not (isinstance(gen, dict) and isinstance(other, dict)):
            return False
        if self._kinds(gen) != {"object"} or not isinstance(gen.get("required"), list):
            return False
        oprops = other.get("properties", {}) if isinstance(other.get("properties"), dict) else {}
        opp = other.get("patternProperties", {}) or {}
        for k in gen["required"]:
            if oprops.get(k, None) is False:
                return True
            if k not in oprops and other.get("additionalProperties") is False and \
                    not any(re.search(p, k) for p in opp):
                return True
        return False

    def _never_emits_required(self, gen: Any, other: Any) -> bool:
        """True if objects generated from ``gen`` always lack a key ``other`` requires (our
        grammar emits only declared keys unless extra properties are allowed)."""
        if not (isinstance(gen, dict) and isinstance(other, dict)):
            return False
        if self._kinds(gen) != {"object"}:
            return False
        oreq = other.get("required", []) if isinstance(other.get("required"), list) else []
        gprops = gen.get("properties", {}) if isinstance(gen.get("properties"), dict) else {}
        if any(gprops.get(k, True) is False for k in oreq):
            return True  # a required key declared false here is never emitted (extras and
            # patternProperties keys exclude declared names)
        if gen.get("additionalProperties") not in (None, False) or _bare_object(gen):
            return False
        if self.allow_extra and gen.get("additionalProperties", gen.get("unevaluatedProperties")) is None and \
                not gen.get("patternProperties"):
            return False  # undeclared keys (any name but the declared ones) may be emitted
        emits = set(gen.get("properties", {})) | set(gen.get("required", []))
        pp = gen.get("patternProperties", {}) or {}
        for k in other.get("required", []) if isinstance(other.get("required"), list) else []:
            if k in emits:
                continue
            if any(re.search(p, k) for p in pp):
                continue
            return True
        return False

    @staticmethod
    def _values(s: dict) -> list | None:
        if "const" in s:
            return [s["const"]]
        if isinstance(s.get("enum"), list):
            return s["enum"]
        return None

    def _disjoint_values(self, a: Any, b: Any) -> bool:
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        va, vb = self._values(a), self._values(b)
        if va is None or vb is None:
            return False
        return not any(json_equal(x, y) for x in va for y in vb)

    def _discriminated(self, a: Any, b: Any, overlap: set[str]) -> bool:
        """Objects generated from either branch fail the other (a required property with
        disjoint values in both); only a proof when ``overlap`` (the kinds one branch
        generates and the other accepts) holds objects alone."""
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        if overlap - {"object"}:
            return False
        pa, pb = a.get("properties", {}), b.get("properties", {})
        for k in set(pa) & set(pb):
            if k in a.get("required", []) and k in b.get("required", []):
                if self._disjoint_values(self._flat(pa[k]), self._flat(pb[k])):
                    return True
        return False

    def _flat(self, s: Any) -> Any:
        """``s`` with top-level ``$ref`` and ``allOf`` merged away (``s`` itself if that fails)."""
        try:
            d = self._deref(s, "")
            if isinstance(d, dict) and isinstance(d.get("allOf"), list):
                acc: Any = {k: v for k, v in d.items() if k != "allOf"}
                for p in d["allOf"]:
                    p = self._flat(p)
                    if p is False:
                        return False
                    if p is not True:
                        acc = merge(acc, p, "")
                return acc
            return d
        except SchemaError:
            return s

    def _force_discriminators(self, branches: list) -> list:
        """oneOf of object branches that declare a common property with disjoint enum/const
        values: require that property in both, so each generated instance matches exactly
        one branch (a subset of the valid instances: those without it are not generated)."""
        out = list(branches)
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                a, b = out[i], out[j]
                if not (isinstance(a, dict) and isinstance(b, dict)) or \
                        self._kinds(a) & self._kinds(b) - {"object"} or \
                        not self._kinds(a) & self._kinds(b) or self._discriminated(a, b, self._kinds(a) & self._kinds(b)):
                    continue
                pa, pb = a.get("properties", {}), b.get("properties", {})
                if not (isinstance(pa, dict) and isinstance(pb, dict)):
                    continue
                for k in [k for k in pa if k in pb]:
                    if self._disjoint_values(self._flat(pa[k]), self._flat(pb[k])):
                        for idx in (i, j):
                            req = out[idx].get("required", [])
                            if isinstance(req, list) and k not in req:
                                out[idx] = {**out[idx], "required": list(req) + [k]}
                        break
        self._keep.append(out)
        return out

    # ------------------------------------------------------------------ base schemas
    def _inferred(self, s: dict) -> set[str] | None:
        return inferred_kinds(s)

    def base(self, s: dict, ptr: str) -> Node:
        if not _KNOWN.issuperset(s):  # (most schemas: every keyword known)
            for k in s:
                if k not in SUPPORTED and k not in ANNOTATIONS and k not in UNSUPPORTED:
                    self.ignored.append(f"{ptr or '/'} {k}")
        if "enum" in s or "const" in s:
            return self.enumeration(s, ptr)
        if "dependentSchemas" in s or isinstance(s.get("dependencies"), dict) and any(
                not isinstance(v, list) for v in s["dependencies"].values()):
            return self.dep_schemas(s, ptr)
        t = s.get("type")
        if t is None:
            kinds = self._inferred(s)
            if kinds is None:
                self._check_unsupported(s, ptr, set(TYPES))
                return self.free(self.free_depth)
        elif isinstance(t, str):
            if t not in TYPES:
                raise SchemaError(ptr, "type", f"unknown type {t!r}")
            kinds = {t}
        else:
            if not isinstance(t, list) or any(x not in TYPES for x in t):
                raise SchemaError(ptr, "type", f"unknown type {t!r}")
            kinds = set(t)
            if "number" in kinds:
                kinds.discard("integer")
        self._check_unsupported(s, ptr, kinds)
        if len(kinds) == 1 and (t is not None or self.untyped != "any"):  # (the loops below, for one kind)
            a = self.kind(next(iter(kinds)), s, ptr)
            return NOTHING if _nothing(a) else choice(a)
        alts: list[Node] = []
        for kind in ("object", "array", "string", "integer", "number", "boolean", "null"):
            if kind in kinds:
                alts.append(self.kind(kind, s, ptr))
        if t is None and self.untyped == "any":  # the keywords constrain their kinds only
            for kind in ("object", "array", "string", "number", "boolean", "null"):
                if kind not in kinds and not (kind == "number" and "integer" in kinds):
                    alts.append(self.free_kind(kind))
        alts = [a for a in alts if not _nothing(a)]
        return choice(*alts) if alts else NOTHING

    def dep_schemas(self, s: dict, ptr: str) -> Node:
        """Schema-valued dependencies, exactly: for each optional trigger ``t`` the union of
        "``t`` absent" and "``t`` present and the dependent schema holds" (at most
        MAX_DEP_SCHEMAS optional triggers, i.e. 2**n branches); a required trigger merges."""
        rest = {k: v for k, v in s.items() if k != "dependentSchemas"}
        if not isinstance(s.get("dependentSchemas", {}), dict):  # e.g. under draft-04, whose metaschema does not type it
            raise SchemaError(pointer_join(ptr, "dependentSchemas"), "dependentSchemas", "must be an object")
        dep: dict[str, Any] = dict(s.get("dependentSchemas") or {})
        if isinstance(s.get("dependencies"), dict):
            arrays = {t: v for t, v in s["dependencies"].items() if isinstance(v, list)}
            for t, v in s["dependencies"].items():
                if not isinstance(v, list):
                    dep[t] = {"allOf": [dep[t], v]} if t in dep else v
            rest.pop("dependencies")
            if arrays:
                rest["dependencies"] = arrays
        branches: list[Any] = [rest]
        for t, ds in dep.items():
            dptr = pointer_join(ptr, "dependentSchemas", t)
            ds = self._deref(ds, dptr)
            nxt: list[Any] = []
            for b in branches:
                req = b.get("required", []) if isinstance(b.get("required"), list) else []
                bprops = b.get("properties", {}) if isinstance(b.get("properties"), dict) else {}
                if bprops.get(t, True) is False or ds is True or ds == {}:
                    nxt.append(b)  # the trigger is never present, or the dependency is vacuous
                    continue
                with_t = {**b, "required": req + ([t] if t not in req else [])}
                nxt.append(False if ds is False else merge(with_t, ds, dptr))
                if t not in req:
                    nxt.append({**b, "properties": {**bprops, t: False}})
            branches = [b for b in nxt if b is not False]
            if len(branches) > 2 ** MAX_DEP_SCHEMAS:
                raise SchemaError(ptr, "dependentSchemas", f"more than {MAX_DEP_SCHEMAS} optional "
                                  "triggers of schema dependencies")
        self._keep.append(branches)
        alts = [self.node(b, ptr) for b in branches]
        alts = [a for a in alts if not _nothing(a)]
        return choice(*alts) if alts else NOTHING

    def _check_unsupported(self, s: dict, ptr: str, kinds: set[str]) -> None:
        for k, affected in UNSUPPORTED.items():
            if k in s and affected & (kinds | {"integer"} if "number" in kinds else kinds):
                if k in ("then", "else") and "if" not in s:
                    continue  # then/else without if have no effect
                raise SchemaError(ptr, k, f"keyword '{k}' is not supported")
        if s.get("uniqueItems") is True and "array" in kinds:
            if not (isinstance(s.get("maxItems"), int) and s["maxItems"] <= 1) and \
                    self._item_domain(s) is None:
                raise SchemaError(ptr, "uniqueItems", "uniqueItems is only supported over small finite "
                                  f"item domains (at most {MAX_UNIQUE_DOMAIN} values: enum/const, "
                                  "boolean, null, small integer ranges) or with maxItems <= 1")

    def kind(self, kind: str, s: dict, ptr: str) -> Node:
        if kind == "null":
            return lit("null")
        if kind == "boolean":
            return choice(lit("true"), lit("false"))
        if kind == "string":
            return self.string(s, ptr)
        if kind in ("integer", "number"):
            return self.number(s, ptr, kind == "integer")
        if kind == "array":
            return self.array(s, ptr)
        return self.obj(s, ptr)

    # ------------------------------------------------------------------ enum / const
    def enumeration(self, s: dict, ptr: str) -> Node:
        if "const" in s:
            values = [s["const"]]
            kw = "const"
            if "enum" in s:
                values = [v for v in values if any(json_equal(v, e) for e in s["enum"])]
        else:
            kw = "enum"
            values = s["enum"]
            if not isinstance(values, list):
                raise SchemaError(ptr, "enum", "must be an array")
        # the keywords that constrain the values (unknown ones, which may even hold "$ref"s,
        # are annotations)
        rest = {k: v for k, v in s.items() if k not in ("enum", "const") and k in SEMANTIC}
        keep = [v for v in values if self._value_ok(v, rest, ptr, kw)] if rest else values
        texts = _value_texts(keep, ptr, kw)
        if len(texts) > ENUM_AUTOMATON_ABOVE:
            words = {t.encode("utf-8") for t in texts}
            # the Choice of literals' estimate (as size.py counts it): over max_nfa, the
            # literals below raise the same LimitError as before
            if 2 + len(words) + sum(map(len, words)) <= self.max_nfa:
                return self.bounded(literal_set(words), ptr, kw)
        alts = [lit(t) for t in texts]
        return self.bounded(choice(*alts), ptr, kw) if alts else NOTHING

    def _value_ok(self, v: Any, rest: dict, ptr: str, kw: str) -> bool:
        if not rest:
            return True
        if set(rest) == {"type"}:
            t = rest["type"]
            return _kind_of(v) in ({t} if isinstance(t, str) else set(t)) or (
                _kind_of(v) == "integer" and ("number" in t if isinstance(t, list) else t == "number"))
        if "$ref" in json.dumps(rest):  # depth-bounded by check_schema
            raise SchemaError(ptr, kw, "enum/const combined with $ref siblings is not supported")
        cls = validator_class(self.root)  # the root's draft; decimal multipleOf (json_validator)
        if not cls(rest).is_valid(v):
            return False
        fmt = rest.get("format")
        if isinstance(fmt, str) and isinstance(v, str) and check_format(fmt, v) is False:
            return False
        return True

    # ------------------------------------------------------------------ strings
    def string(self, s: dict, ptr: str) -> Node:
        lo = s.get("minLength", 0)
        hi = s.get("maxLength")
        for k, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                if not (isinstance(v, float) and v.is_integer() and v >= 0):
                    raise SchemaError(ptr, k, "must be a non-negative integer")
        lo = int(lo)
        hi = None if hi is None else int(hi)
        if hi is not None and hi < lo:
            return NOTHING
        rx: Rx | None = None
        fmt_string: Node | None = None  # the format's JSON string node while ``rx`` is its regex
        fmt = s.get("format") if self.format_asserts() else None
        if fmt is not None:
            src = format_regex(fmt) if isinstance(fmt, str) else None
            if src is None and isinstance(fmt, str) and fmt not in CHECKED_FORMATS:
                self.ignored.append(f"{ptr or '/'} format")  # an annotation: nothing asserts it
            elif src is None:
                if self.lenient:
                    self.dropped.append(f"{ptr or '/'} format")
                else:
                    raise SchemaError(ptr, "format", f"format {fmt!r} is not supported "
                                      "(pass lenient=True to treat it as an annotation)")
            else:
                rx = parse_pattern(src, anchored=True)
                fmt_string = _format_string(src, rx)
        extra: list[Node] = []
        if "pattern" in s:
            if fmt_string is not None:  # pattern and format: both, by intersection
                extra.append(fmt_string)
                fmt_string = None
            pat = s["pattern"]
            if not isinstance(pat, str):
                raise SchemaError(ptr, "pattern", "must be a string")
            try:
                re.compile(pat)
                rx = parse_pattern(pat)
            except PatternError as e:
                raise SchemaError(ptr, "pattern", str(e)) from None
            except re.error as e:
                raise SchemaError(ptr, "pattern", f"not a valid regex: {e}") from None
        if rx is None:
            kw = "maxLength" if "maxLength" in s else "minLength" if "minLength" in s else None
            return self.bounded(_any_string() if lo == 0 and hi is None else string_of(rep(any_json_char(), lo, hi)),
                                ptr, kw)
        kw = "pattern" if "pattern" in s else "format"
        plo, phi = length_range(rx)
        if plo >= lo and (hi is None or (phi is not None and phi <= hi)):
            body = fmt_string if fmt_string is not None else string_of(rx_to_ir(rx, json_char))
            return self.bounded(inter(body, *extra), ptr, kw)
        adj = _bound_single_repeat(rx, lo, hi)
        if adj is not None:
            return self.bounded(inter(string_of(rx_to_ir(adj, json_char)), *extra), ptr, kw)
        # length bounds and a pattern/format: by intersection
        body = fmt_string if fmt_string is not None else string_of(rx_to_ir(rx, json_char))
        return self.bounded(inter(body, *extra, string_of(rep(any_json_char(), lo, hi))), ptr, kw)

    # ------------------------------------------------------------------ numbers
    def number(self, s: dict, ptr: str, integer: bool) -> Node:
        node = self._number(s, ptr, integer)
        mo = s.get("multipleOf")
        if mo is None or _nothing(node):
            return node
        if isinstance(mo, bool) or not isinstance(mo, (int, float)) or mo <= 0:
            raise SchemaError(ptr, "multipleOf", "must be a positive number")
        m = exact_value(mo)  # the decimal written: 0.01 is 1/100 (json_validator)
        if m == 1 or (integer and m.numerator == 1):
            return self._number(s, ptr, True)  # 1/n divides every integer
        return self.bounded(inter(node, self.multiple(mo, ptr, integer)), ptr, "multipleOf")

    def _number(self, s: dict, ptr: str, integer: bool) -> Node:
        return number_node(s, ptr, integer)

    # ------------------------------------------------------------------ arrays
    def array(self, s: dict, ptr: str) -> Node:
        if "contains" not in s:
            return self._array(s, ptr)
        lo, hi = self.contains_bounds(s, ptr)
        rest = {k: v for k, v in s.items() if k not in ("contains", "minContains", "maxContains")}
        if lo == 0 and hi is None:
            return self._array(rest, ptr)
        if s.get("uniqueItems") is True:
            raise SchemaError(ptr, "uniqueItems", "uniqueItems with contains is not supported")
        cptr = pointer_join(ptr, "contains")
        d = BOOLEAN_DEPTH
        x = self.logic.exact(s["contains"], cptr, d - 1)
        y = diff(self.logic.universe(d - 1), x)
        counted = seq(lit("["), self.ws, count_list(x, y, lo, hi, self.comma), self.ws, lit("]"))
        base = self.inlined(self._array(rest, ptr), ptr, "contains")
        return self.bounded(inter(base, counted), ptr, "contains")

    def _item_domain(self, s: dict) -> list | None:
        """The finite set of values every item of ``s`` is one of (at most
        MAX_UNIQUE_DOMAIN), or None: items given by enum/const, boolean, null or an integer
        range, in ``prefixItems`` and ``items`` (which must then be present)."""
        s = normalize(s)
        parts = list(s.get("prefixItems", []) or [])
        if "items" not in s and not (isinstance(s.get("maxItems"), int) and s["maxItems"] <= len(parts)):
            return None
        if "items" in s:
            parts.append(s["items"])
        out: list = []
        for p in parts:
            try:
                p = self._deref(p, "")
            except SchemaError:
                return None
            vals = _finite_values(p)
            if vals is None:
                return None
            for v in vals:  # one value per spelling (1 and 1.0 are equal items)
                if not any(dumps(v) == dumps(w) for w in out):
                    out.append(v)
            if len(out) > MAX_UNIQUE_DOMAIN:
                return None
        return out

    def _array(self, s: dict, ptr: str) -> Node:
        if s.get("uniqueItems") is True and not (isinstance(s.get("maxItems"), int) and s["maxItems"] <= 1):
            dom = self._item_domain(s)
            if dom is None:
                raise SchemaError(ptr, "uniqueItems", "uniqueItems is only supported over small finite "
                                  f"item domains (at most {MAX_UNIQUE_DOMAIN} values)")
            rest = {k: v for k, v in s.items() if k != "uniqueItems"}
            base = self.inlined(self._array(rest, ptr), ptr, "uniqueItems")
            spell = [lit(dumps(v)) for v in dom]
            once = []
            for i, x in enumerate(spell):  # value i at most once, among items of the domain
                others = [y for j, y in enumerate(spell) if j != i]
                y = choice(*others) if others else NOTHING
                once.append(seq(lit("["), self.ws, count_list(x, y, 0, 1, self.comma), self.ws, lit("]")))
            return self.bounded(inter(base, *once), ptr, "uniqueItems")
        prefix = s.get("prefixItems", [])
        if not isinstance(prefix, list):
            raise SchemaError(ptr, "prefixItems", "must be an array")
        tail_s = s.get("items", s.get("unevaluatedItems", True))
        mn = int(s.get("minItems", 0))
        mx = s.get("maxItems")
        mx = None if mx is None else int(mx)
        if mx is not None and mx < mn:
            return NOTHING
        elems: list[Node] = []
        for i, p in enumerate(prefix):
            if mx is not None and i >= mx:
                break
            e = self.hoist(self.node(p, pointer_join(ptr, "prefixItems", i)), pointer_join(ptr, "prefixItems", i))
            if _nothing(e):
                break
            elems.append(e)
        k = len(elems)
        if k < len(prefix) and (mx is None or k < mx):
            # a prefix item is unsatisfiable: arrays must stop before it
            mx = k if mx is None else min(mx, k)
            if mn > k:
                return NOTHING
            tail = NOTHING
        else:
            tail = self.hoist(self.node(tail_s, pointer_join(ptr, "items")), pointer_join(ptr, "items")) \
                if tail_s is not False else NOTHING
        a = max(0, mn - k)
        b = None if mx is None else max(0, mx - k)
        if _nothing(tail):
            if a > 0:
                return NOTHING
            b = 0
        # after k prefix elements: the tail
        if k == 0:
            if b == 0:
                body = EMPTY if mn == 0 else NOTHING
            else:
                rest_hi = None if b is None else b - 1
                more = rep(seq(self.comma, tail), max(0, a - 1), rest_hi)
                body = seq(tail, more)
                if a == 0:
                    body = opt(body)
        else:
            r: Node = rep(seq(self.comma, tail), a, b) if b != 0 else EMPTY
            for j in range(k - 1, 0, -1):  # r = R(j): after j elements
                nxt = seq(self.comma, elems[j], r)
                r = choice(EMPTY, nxt) if j >= mn else nxt
            body = seq(elems[0], r)
            if mn == 0:
                body = opt(body)
        if _nothing(body):
            return NOTHING
        kw = next((k for k in ("maxItems", "minItems", "prefixItems", "items") if k in s), None)
        return self.bounded(seq(lit("["), self.ws, body, self.ws, lit("]")), ptr, kw)

    # ------------------------------------------------------------------ objects
    def obj(self, s: dict, ptr: str) -> Node:
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError(ptr, "properties", "must be an object")
        required = s.get("required", [])
        if not isinstance(required, list):
            raise SchemaError(ptr, "required", "must be an array of property names")
        pp = s.get("patternProperties", {}) or {}
        addl = s.get("additionalProperties", s.get("unevaluatedProperties", None))
        if _bare_object(s):
            addl = True  # a bare object schema: any members (see docs, additionalProperties)
        elif addl is None and self.allow_extra:
            addl = True  # spec-faithful: undeclared members with free-form values
        minp = int(s.get("minProperties", 0))
        maxp = s.get("maxProperties")
        maxp = None if maxp is None else int(maxp)
        for p in pp:
            try:
                re.compile(p)
            except re.error as e:
                raise SchemaError(pointer_join(ptr, "patternProperties", p), "patternProperties",
                                  f"not a valid regex: {e}") from None
        extras_allowed = addl not in (None, False)
        required = list(required)
        pn = s.get("propertyNames")
        pn_lang: Node | None = None
        if pn is not None and pn is not True and pn != {}:
            import jsonschema
            pptr = pointer_join(ptr, "propertyNames")
            pn_lang = self.logic.exact(pn, pptr, 0)  # a name is a string: no nesting
            check = jsonschema.Draft202012Validator(pn, format_checker=self.format_checker()) \
                if not (isinstance(pn, dict) and "$ref" in json.dumps(pn)) else None
            if check is None:
                raise SchemaError(ptr, "propertyNames", "propertyNames with references is not supported")
            bad = [k for k in list(props) + list(required) if not check.is_valid(k)]
            if any(k in required for k in bad):
                return NOTHING
            props = {k: (False if k in bad else v) for k, v in props.items()}
        deps = self._dep_required(s, ptr)
        for k in {k for t, ds in deps.items() for k in (t, *ds)} - set(props) - set(required) if deps else ():
            if any(re.search(p, k) for p in pp):
                raise SchemaError(ptr, "dependentRequired", f"dependency on {k!r}, which only "
                                  "patternProperties declare, is not supported")
        changed = bool(deps)
        while changed:  # a required trigger makes its dependents required
            changed = False
            for t, ds in deps.items():
                if t in required:
                    for d in ds:
                        if d not in required:
                            required.append(d)
                            changed = True

        def value_schema(key: str) -> Any:
            parts = [props[key]] if key in props else []
            matched = [v for p, v in pp.items() if re.search(p, key)]
            parts += matched
            if key not in props and not matched and addl is not None:
                parts.append(addl)
            if not parts:
                return True
            acc: Any = parts[0]
            for x in parts[1:]:
                acc = {"allOf": [acc, x]} if acc is not True else x
            return acc

        names = list(props) + [r for r in required if r not in props]
        if extras_allowed:  # dependency keys become declared members (excluded from extras)
            for t, ds in deps.items():
                for k in [t, *ds]:
                    if k not in names:
                        names.append(k)
        # each member as the parts of its sequence ``"key" : value`` (its Seq is never made:
        # every use splices the parts into a longer seq, which flattens them the same way)
        members: list[tuple[str, tuple[Node, Node, Node], bool]] = []
        colon = self.colon
        for key in names:
            if pp:
                vs = value_schema(key)
            else:  # (value_schema without patterns)
                vs = props[key] if key in props else addl if addl is not None else True
            req = key in required
            if vs is False or (key not in props and addl is False and not any(re.search(p, key) for p in pp)):
                if req:
                    return NOTHING
                continue
            vptr = pointer_join(ptr, "properties", key)
            self._keep.append(vs)
            v = self.hoist(self.node(vs, vptr), vptr)
            if _nothing(v):
                if req:
                    return NOTHING
                continue
            members.append((key, (lit(quote(key)), colon, v), req))
        cons: list[tuple[str, frozenset[str]]] = []
        last: list[int] = []
        tracked: set[str] = set()
        if deps:
            # dependencies between emittable members (a trigger whose dependent can never be
            # emitted is itself never emitted)
            while True:
                emitted = {k for k, _, _ in members}
                banned = {t for t, ds in deps.items() if t in emitted and not set(ds) <= emitted}
                if not banned:
                    break
                if any(r for k, _, r in members if k in banned):
                    return NOTHING
                members = [m for m in members if m[0] not in banned]
            emitted = {k for k, _, _ in members}
            cons = [(t, frozenset(ds) - {t}) for t, ds in deps.items()
                    if t in emitted and t not in required and not set(ds) <= set(required)]
            cons = [(t, ds) for t, ds in cons if ds]
            pos = {k: i for i, (k, _, _) in enumerate(members)}
            last = [max(pos[k] for k in (t, *ds)) for t, ds in cons]
            tracked = {k for t, ds in cons for k in (t, *ds)}
        if len(tracked) > 12:
            raise SchemaError(ptr, "dependentRequired", f"dependencies among {len(tracked)} properties "
                              "are too many to track exactly (limit 12)")
        # extra (undeclared) members
        extra: Node | None = None
        if pp:
            # keys matching no pattern (governed by additionalProperties) are not generated:
            # the complement of the patterns is not built.  Each pattern's keys get the
            # conjunction of all pattern schemas, since a key may match several patterns.
            distinct = {json.dumps(v, sort_keys=True) for v in pp.values()}
            vals = list(pp.values())
            vs: Any = vals[0]
            if len(distinct) > 1:
                vs = {"allOf": vals}
                self._keep.append(vs)
            try:
                keys = choice(*(rx_to_ir(parse_pattern(p), json_char) for p in pp))
            except PatternError as e:
                raise SchemaError(ptr, "patternProperties", str(e)) from None
            if any(re.search(p, key) for p in pp for key in names):
                keys = inter(keys, self.not_in(names))  # declared names are members of their own
            v = self.node(vs, pointer_join(ptr, "patternProperties", next(iter(pp))))
            key_lang = string_of(keys) if pn_lang is None else inter(string_of(keys), pn_lang)
            if not _nothing(v) and not _nothing(keys):
                extra = seq(key_lang, self.colon, v)
            if extras_allowed:  # names matching no pattern: additionalProperties (a complement)
                av = self.node(addl, pointer_join(ptr, "additionalProperties"))
                try:
                    pats = choice(*(rx_to_ir(parse_pattern(p), json_char) for p in pp))
                except PatternError as e:
                    raise SchemaError(ptr, "patternProperties", str(e)) from None
                other = string_of(diff(self.not_in(names), pats))
                if pn_lang is not None:
                    other = inter(other, pn_lang)
                if not _nothing(av):
                    more = seq(other, self.colon, av)
                    extra = more if extra is None else choice(extra, more)
        elif extras_allowed:
            v = self.node(addl, pointer_join(ptr, "additionalProperties"))
            if not _nothing(v):  # a shared rule: lists of extras are built with one copy
                ename = f"extra{len(self.rules)}:{ptr or '#'}"
                key_lang = string_of(self.not_in(names))
                if pn_lang is not None:
                    key_lang = inter(key_lang, pn_lang)
                self.rules[ename] = seq(key_lang, self.colon, v)
                extra = Ref(ename)
        n_req = sum(1 for _, _, r in members if r)
        if extra is None and maxp is not None and maxp >= len(members):
            maxp = None
        if minp <= n_req:
            minp = 0
        if extra is None and minp > len(members):
            return NOTHING
        cap = maxp if maxp is not None else max(minp, 1)
        empty: frozenset[str] = frozenset()
        # each state's language as the parts of a sequence, ``seq(*parts)`` (equal to the
        # nested seq(seq(L, ...), ...) of its path, none of whose parts is a Seq holding a Seq,
        # made once instead of once per member); no part is NOTHING (no m is)
        states: dict[tuple[int, frozenset[str]], tuple[Node, ...]] = {(0, empty): (EMPTY,)}
        for i, (key, m, req) in enumerate(members):
            new: dict[tuple[int, frozenset[str]], list[tuple[Node, ...]]] = {}
            for (c, fl), L in states.items():
                c2 = c + 1
                take = maxp is None or c2 <= maxp
                c2 = min(c2, cap)
                fl2 = fl | {key} if key in tracked else fl
                if not req and take and (c2, fl2) == (c, fl):
                    # skipping and taking lead to the same state: ``L ("," m)?`` holds one
                    # copy of L, not two (with two, a run of optional members doubles the
                    # IR per member: 16 optional properties were 4.9 million NFA states)
                    new.setdefault((c, fl), []).append(L + (opt(seq(self.comma if c else EMPTY, *m)),))
                    continue
                if not req:
                    new.setdefault((c, fl), []).append(L)
                if take:
                    new.setdefault((c2, fl2), []).append(L + (self.comma if c else EMPTY, *m))
            if key in tracked:
                done = [cons[j] for j in range(len(cons)) if last[j] == i]
                live = {k for j in range(len(cons)) if last[j] > i for k in (cons[j][0], *cons[j][1])}
                pruned: dict[tuple[int, frozenset[str]], list[tuple[Node, ...]]] = {}
                for (c, fl), ls in new.items():
                    if any(t in fl and not ds <= fl for t, ds in done):
                        continue
                    pruned.setdefault((c, fl & live), []).extend(ls)
                new = pruned
            states = {}
            for k, ls in new.items():  # (one path: ``choice`` of its sequence is the sequence)
                if len(ls) == 1:
                    states[k] = ls[0]
                else:
                    alt = choice(*[seq(*L) for L in ls])
                    if not _nothing(alt):
                        states[k] = (alt,)
        kw = next((k for k in ("maxProperties", "minProperties", "properties", "required") if k in s), None)
        if extra is None and len(states) == 1:
            # one state: ``seq("{", ws, seq(*L), ws, "}")`` spliced at once (the same IR: a
            # sequence of parts none of which is a Seq holding only a Seq flattens the same
            # in one step as in two, and the choices of one alternative below are that one)
            ((c, _), L), = states.items()
            if c < minp:
                return NOTHING
            node = seq(lit("{"), self.ws, *L, self.ws, lit("}"))
            return NOTHING if _nothing(node) else self.bounded(node, ptr, kw)
        counts: dict[int, list[Node]] = {}
        for (c, _), L in states.items():
            counts.setdefault(c, []).append(seq(*L))
        by_count = {c: choice(*ls) for c, ls in counts.items()}
        if extra is not None:
            final: list[Node] = []
            too_few = False
            for c, L in by_count.items():
                room = None if maxp is None else maxp - c
                need = max(0, minp - c)
                if need > 1:
                    # several undeclared members would have to carry distinct names: this
                    # count of declared members is not generated
                    too_few = True
                    continue
                if room is not None and need > room:
                    continue
                if room == 0:
                    final.append(L)
                elif c == 0:
                    more = seq(extra, rep(seq(self.comma, extra), 0, None if room is None else room - 1))
                    final.append(seq(L, more if need else opt(more)))
                else:
                    final.append(seq(L, rep(seq(self.comma, extra), need, room)))
            if not final and too_few:
                raise SchemaError(ptr, "minProperties", "minProperties needing more than one "
                                  "undeclared property cannot be enforced exactly")
            body = choice(*final) if final else NOTHING
        else:
            ok = [L for c, L in by_count.items() if c >= minp]
            body = choice(*ok) if ok else NOTHING
        if _nothing(body):
            return NOTHING
        return self.bounded(seq(lit("{"), self.ws, body, self.ws, lit("}")), ptr, kw)

    def not_in(self, names: list[str]) -> Node:
        """:func:`~decoding.frontends.jsonschema.logic.not_in` of ``names``, with the size
        estimates (counted) of the per-process nodes it is made of put in this compile's memo
        (:func:`_shared_estimate`): a trie over many names is otherwise estimated anew by each
        compile, mostly in those nodes (a JSON character class each)."""
        used = self._shared_parts
        node = _not_in(names, used)
        self._seed_shared(used.values())
        return node

    def _seed_shared(self, nodes: Any) -> None:
        """Put the counted estimates of per-process ``nodes`` (:func:`_shared_estimate`) in
        this compile's memo."""
        shared = self._estimates.get(True)
        if shared is None:  # (as _estimate makes it)
            shared = self._estimates[True] = _seeded_fold(True)
        memo = shared[0]
        for n in nodes:
            i = id(n)
            if i not in memo:
                est = _shared_estimate(n)
                if est is not None:
                    memo[i] = est

    def _dep_required(self, s: dict, ptr: str) -> dict[str, list[str]]:
        """Property-presence dependencies (``dependentRequired``, array-valued ``dependencies``)."""
        out: dict[str, list[str]] = {}
        for kw in ("dependentRequired", "dependencies"):
            d = s.get(kw)
            if d is None:
                continue
            if not isinstance(d, dict):
                raise SchemaError(ptr, kw, "must be an object")
            for t, v in d.items():
                if kw == "dependencies" and not isinstance(v, list):
                    continue  # schema-valued: expanded in base()
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise SchemaError(pointer_join(ptr, kw, t), kw, "must be an array of property names")
                out.setdefault(t, [])
                out[t] += [x for x in v if x not in out[t]]
        return out

    # ------------------------------------------------------------------ free-form values
    def free(self, depth: int) -> Node:
        """A free-form JSON value nesting at most ``depth`` levels, as a shared rule
        ``free:<depth>`` (the IR stays a DAG; lists are ``X (, X)*`` with X a Ref, which
        the automaton builder expands once per list instead of twice)."""
        hit = self._free.get(depth)
        if hit is not None:
            return hit
        if depth > 0:
            self.free(depth - 1)  # (its rules first)
        member, body, kept = _free_bodies(depth, self.ws, self.comma, self.colon)
        if member is not None:
            self.rules[f"free-member:{depth - 1}"] = member
        name = f"free:{depth}"
        self.rules[name] = body
        if kept:  # (per-process nodes: their estimates made once)
            self._seed_shared((body,) if member is None else (member, body))
        node = Ref(name)
        self._free[depth] = node
        return node


#: the bodies of the free-form value rules, made once per process (see :func:`_free_bodies`):
#: by ``(depth, ids of the separators)``, with the separators (alive: the ids stay theirs)
_FREE_BODIES: dict[tuple[int, int, int, int], tuple[tuple[Node, Node, Node], Node | None, Node]] = {}
#: at most this many entries in :data:`_FREE_BODIES` (beyond: made per compile, as before)
FREE_BODIES_MAX = 64


def _free_bodies(depth: int, ws: Node, comma: Node, colon: Node) -> tuple[Node | None, Node, bool]:
    """The bodies of rules ``free-member:<depth - 1>`` (None at depth 0) and ``free:<depth>``
    (see :meth:`_Compiler.free`): a free-form JSON value nesting at most ``depth`` levels,
    its lists ``X (, X)*`` over Refs to the rules one level down.  A function of ``depth``
    and the separators alone, so made once per process (and estimated once, see
    :meth:`_Compiler._seed_shared`): the same IR every compile would make.  The third
    item: whether the bodies are the per-process ones (False when the table is full)."""
    key = (depth, id(ws), id(comma), id(colon))
    hit = _FREE_BODIES.get(key)
    if hit is not None and hit[0][0] is ws and hit[0][1] is comma and hit[0][2] is colon:
        return hit[1], hit[2], True
    alts = [lit("null"), lit("true"), lit("false"), NUMBER, _any_string()]
    member: Node | None = None
    if depth > 0:
        v = Ref(f"free:{depth - 1}")
        alts.append(seq(lit("["), ws, opt(seq(v, star(seq(comma, v)))), ws, lit("]")))
        member = seq(_any_string(), colon, v)
        mem = Ref(f"free-member:{depth - 1}")
        alts.append(seq(lit("{"), ws, opt(seq(mem, star(seq(comma, mem)))), ws, lit("}")))
    body = choice(*alts)
    kept = len(_FREE_BODIES) < FREE_BODIES_MAX
    if kept:
        _FREE_BODIES[key] = ((ws, comma, colon), member, body)
    return member, body, kept


def _finite_values(p: Any) -> list | None:
    """The values an item schema allows when it names them (enum/const, boolean, null, an
    integer range of at most MAX_UNIQUE_DOMAIN values), filtered by its type; else None."""
    if not isinstance(p, dict):
        return None
    t = p.get("type")
    ts = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else None
    if "const" in p or "enum" in p:
        vals = [p["const"]] if "const" in p else p["enum"]
        if not isinstance(vals, list) or set(p) - ANNOTATIONS - {"enum", "const", "type"}:
            return None
        if ts is not None:
            vals = [v for v in vals if _kind_of(v) in ts or (_kind_of(v) == "integer" and "number" in ts)]
        if any(isinstance(v, float) and not v.is_integer() or isinstance(v, (list, dict)) for v in vals):
            return None  # spellings of fractions and containers: not enumerated here
        return list(vals)
    if set(p) - ANNOTATIONS - {"type", "minimum", "maximum"}:
        return None
    if ts == {"boolean"}:
        return [] if "minimum" in p or "maximum" in p else [True, False]
    if ts == {"null"}:
        return [None]
    if ts == {"integer"} and isinstance(p.get("minimum"), int) and isinstance(p.get("maximum"), int) \
            and not isinstance(p["minimum"], bool) and p["maximum"] - p["minimum"] < MAX_UNIQUE_DOMAIN:
        return list(range(p["minimum"], p["maximum"] + 1))
    return None


def _implied_by_required(b: Any, required: list) -> bool:
    """True if every instance satisfying ``required`` satisfies branch ``b``."""
    if b is True:
        return True
    if not isinstance(b, dict) or not set(b) <= ANNOTATIONS | {"required"}:
        return False
    r = b.get("required", [])
    return isinstance(r, list) and set(r) <= set(required)


def _bare_object(s: dict) -> bool:
    """True if obj() lets ``s`` have any members (no properties, patterns or additional)."""
    return not s.get("properties") and not s.get("patternProperties") and \
        "additionalProperties" not in s and "unevaluatedProperties" not in s


def _value_texts(values: list, ptr: str, kw: str) -> list[str]:
    """The canonical JSON text of each value (:func:`dumps`); a value that is not JSON is a
    SchemaError at ``ptr``/``kw``."""
    out: list[str] = []
    for v in values:
        try:
            out.append(encode_str(v) if type(v) is str else dumps(v))
        except UsageError as e:
            raise SchemaError(ptr, kw, f"value {v!r} is not JSON: {e}") from None
    return out


def _kind_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or isinstance(v, float) and v.is_integer():
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def number_bounds(s: dict, ptr: str) -> tuple[Fraction | None, bool, Fraction | None, bool]:
    """(lower, exclusive?, upper, exclusive?) of a number schema, exact values."""
    bounds = {}
    for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if k in s:
            v = s[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise SchemaError(ptr, k, "must be a number")
            if isinstance(v, float) and not math.isfinite(v):
                raise SchemaError(ptr, k, "must be a finite number")
            if isinstance(v, int) and abs(v) >= 10 ** MAX_BOUND_DIGITS:
                raise _limit(pointer_join(ptr, k), f"'{k}' has {len(str(abs(v)))} digits",
                             "MAX_BOUND_DIGITS", MAX_BOUND_DIGITS, len(str(abs(v))))
            # validators compare an instance with the double the bound parses to, exactly
            bounds[k] = Fraction(v)
    lo, lo_x = _tighter(bounds.get("minimum"), bounds.get("exclusiveMinimum"), True)
    hi, hi_x = _tighter(bounds.get("maximum"), bounds.get("exclusiveMaximum"), False)
    return lo, lo_x, hi, hi_x


def number_node(s: dict, ptr: str, integer: bool) -> Node:
    """The integers (``integer``) or numbers within the bounds of ``s`` (without ``multipleOf``)."""
    lo, lo_x, hi, hi_x = number_bounds(s, ptr)
    if integer:
        a, b = integer_bounds(lo, lo_x, hi, hi_x)
        if a is None and b is None:
            return INTEGER
        if a is not None and b is not None and a > b:
            return NOTHING
        return integer_range(a, b)
    if lo is None and hi is None:
        return NUMBER
    try:
        return number_range(lo, lo_x, hi, hi_x)
    except LimitError as e:
        raise _limit(ptr, str(e), "MAX_BOUND_DIGITS", MAX_BOUND_DIGITS, None) from None


def _tighter(incl: Fraction | None, excl: Fraction | None, lower: bool) -> tuple[Fraction | None, bool]:
    if incl is None:
        return excl, excl is not None
    if excl is None:
        return incl, False
    if lower:
        return (excl, True) if excl >= incl else (incl, False)
    return (excl, True) if excl <= incl else (incl, False)


def _bound_single_repeat(rx: Rx, lo: int, hi: int | None) -> Rx | None:
    """``^C{m,n}$``-shaped patterns: fold length bounds into the repeat."""
    items = rx.items if rx.kind == "seq" else (rx,)
    inner = [x for x in items if not (x.kind == "seq" and not x.items)]
    if len(inner) == 1 and inner[0].kind == "seq":
        inner = [x for x in inner[0].items]
    if len(inner) != 1 or inner[0].kind != "rep" or inner[0].items[0].kind != "chars":
        return None
    r = inner[0]
    if r.lo == 0 and r.hi is None and r.items[0].ranges == ((0, MAX_CP),) and rx.kind == "seq" and len(rx.items) > 1:
        return None
    nlo = max(lo, r.lo)
    nhi = hi if r.hi is None else (r.hi if hi is None else min(hi, r.hi))
    if nhi is not None and nhi < nlo:
        return Rx("chars", ())
    return Rx("rep", items=r.items, lo=nlo, hi=nhi)


def compile_schema(schema: dict | bool | str, *, whitespace: Literal["compact", "flexible", "natural"] = "compact",
                   max_ws: int = DEFAULT_MAX_WS, max_depth: int = DEFAULT_MAX_DEPTH,
                   free_depth: int = DEFAULT_FREE_DEPTH, lenient: bool = False,
                   max_nfa: int = DEFAULT_MAX_NFA,
                   extra_properties: Literal["omit", "allow"] = "omit",
                   limits: Limits = DEFAULT_LIMITS,
                   format_mode: Literal["assert", "annotate"] = "assert",
                   untyped: Literal["infer", "any"] = "infer",
                   registry: Any = None) -> SchemaGrammar:
    """Compile ``schema`` (a dict, a boolean, or JSON text) to a :class:`SchemaGrammar`.

    The schema is checked first (:func:`decoding.frontends.jsonschema.check.check_schema`):
    JSON data nested at most ``limits.max_nesting`` deep, valid against the metaschema of its
    ``$schema`` (default 2020-12), regexes that compile.  A malformed schema is a
    :class:`SchemaError` located at the offending keyword value, also when ``lenient``.

    whitespace: ``"compact"`` (no insignificant whitespace) or ``"flexible"`` (a run of at
    most ``max_ws`` of space/tab/CR/LF around every structural character) or ``"natural"``
    (exactly one space after ``:`` and ``,``, none elsewhere: ``json.dumps``' default layout).
    max_depth: recursive ``$ref`` unrolling depth (default :data:`decoding.ir.DEFAULT_MAX_DEPTH`,
    shared by every front-end).  free_depth: nesting depth of values
    left unconstrained by the schema (``{}``/``true``).  lenient: treat unsupported
    ``format`` values as annotations and list them in ``.dropped``.
    extra_properties: what an object schema with ``properties``/``patternProperties`` but
    no ``additionalProperties`` generates beyond its declared keys: ``"omit"`` (default,
    for generation: nothing, an exact subset that keeps small models on the declared keys)
    or ``"allow"`` (as the spec says: after the declared keys, any number of members whose
    names are any string except the declared names, with free-form values).
    format_mode: ``"assert"`` (default, for generation: strings match the format) or
    ``"annotate"`` (draft 2020-12's default: ``format`` constrains nothing).
    untyped: a schema without ``type`` generates the kinds its keywords constrain
    (``"infer"``, default) or also every other kind as a free value (``"any"``, as the spec
    says: ``{"minLength": 2}`` holds for 12).
    ``not``, ``if``/``then``/``else``, overlapping ``oneOf`` branches, ``contains``,
    ``propertyNames``, ``multipleOf``, allOf parts that do not merge, pattern with format or
    lengths are compiled by intersection and complement of regular languages
    (:mod:`decoding.frontends.jsonschema.logic`); values inside a complemented position
    nest at most :data:`~decoding.frontends.jsonschema.logic.BOOLEAN_DEPTH` levels.
    registry: documents that ``$ref`` may name besides the schema itself (a
    ``referencing.Registry``, or a mapping from URI to schema); nothing is fetched.
    limits: resource bounds (:class:`decoding.limits.Limits`): ``max_nesting``,
    ``max_source_chars`` (text), ``max_compile_work`` (estimated determinising work of one
    keyword's sub-grammar and of all rules together) and ``max_nfa_states`` (all rules
    together).
    Raises SchemaError (pointer, keyword, reason) or LimitError (``.pointer``, ``.limit``,
    ``.value``: a keyword whose sub-grammar is estimated above ``max_nfa`` automaton states
    or ``limits.max_compile_work``, checked before any automaton is built; grammars too
    large to unroll as a whole are compiled by the pushdown back-end, see
    :func:`decoding.backends.select.compile_grammar`).  Every error pointer resolves in the
    schema.
    """
    if isinstance(schema, str):
        schema = load_schema_text(schema, limits=limits)
    if whitespace not in ("compact", "flexible", "natural"):
        raise SchemaError("", None, f"whitespace must be 'compact', 'flexible' or 'natural', not {whitespace!r}")
    if extra_properties not in EXTRA_PROPERTIES:
        raise SchemaError("", None, f"extra_properties must be 'omit' or 'allow', not {extra_properties!r}")
    if format_mode not in FORMAT_MODES:
        raise SchemaError("", None, f"format_mode must be 'assert' or 'annotate', not {format_mode!r}")
    if untyped not in UNTYPED:
        raise SchemaError("", None, f"untyped must be 'infer' or 'any', not {untyped!r}")
    if max_depth < 1 or max_ws < 1 or free_depth < 0:
        raise SchemaError("", None, "max_depth and max_ws must be >= 1, free_depth >= 0")
    check_schema(schema, limits)
    c = _Compiler(schema, whitespace=whitespace, max_ws=max_ws, max_depth=max_depth,
                  free_depth=free_depth, lenient=lenient, extra_properties=extra_properties,
                  max_nfa=max_nfa, limits=limits, format_mode=format_mode, untyped=untyped,
                  registry=registry)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        root = c.node(schema, "")
        if _nothing(root):
            proof = c.unsat(schema, "")
            if proof is not None:
                ptr, kw, why = proof
                raise UnsatisfiableSchemaError(ptr, kw, f"no instance is valid against the schema: {why}")
            raise SchemaError("", None, "schema accepts no instance the grammar can generate")
        facts: dict[str, bool] = {}
        # (one walk: the rules reached and, when it can tell, that the root derives a string;
        # else the least fixpoint over those rules says which rule derives none)
        rules, derives = _reach_and_derive(root, c.rules, c._shared_parts, facts)
        dead = None if derives else _unproductive(root, rules, c._shared_parts)
        if dead is not None:
            raise SchemaError(_rule_pointer(dead), "$ref", "the references here form a cycle that "
                              "never reaches a schema with a finite instance")
        # (rules reached and ``regular``: _reachable walked every node Grammar's own walk
        # would, but Ref-free ones, and found some Ref and no Special, Inter or Diff; no rule
        # made: the estimates' walk of the root saw every node: the grammar needs no second walk)
        body = (("root", root),) + tuple(rules.items())
        if rules and facts.get("regular") is True:
            g = Grammar.walked("root", body, max_depth)
        elif not c.rules and _regular_estimated(root, c):
            g = Grammar.walked("root", body, max_depth, refs=False)
        else:
            g = Grammar("root", body, max_depth)
        known_productive(g)  # (found by _unproductive: a back-end need not look again)
        _check_rules(g, c)
        _attach_estimates(g, c)
    except RecursionError:  # not expected within max_nesting: a backstop, located at the root
        raise _limit("", "schema too deeply nested to compile", "max_nesting", limits.max_nesting,
                     None) from None
    except (SchemaError, LimitError) as e:
        raise _located(e, schema) from None
    finally:
        sys.setrecursionlimit(old)
    return SchemaGrammar(g, tuple(c.dropped), tuple(c.ignored))


#: the empty ``referencing.Registry`` (immutable: every compile without a registry shares it)
_EMPTY_REGISTRY: dict[int, Any] = {}
#: ``(referencing, referencing.jsonschema)`` once imported (see :func:`_referencing`)
_REFERENCING: list[tuple[Any, Any]] = []


def _referencing() -> tuple[Any, Any]:
    """The modules ``referencing`` and ``referencing.jsonschema``, imported on first use (not
    when this module is: importing them costs; an import statement per compile costs too)."""
    if not _REFERENCING:
        import referencing
        import referencing.jsonschema as rj
        _REFERENCING.append((referencing, rj))
    return _REFERENCING[0]


#: ``(ws, comma, colon)`` by ``(whitespace, max_ws)`` (see :func:`_separators`)
_SEPARATORS: dict[tuple[str, int], tuple[Node, Node, Node]] = {}


def _separators(whitespace: str, max_ws: int) -> tuple[Node, Node, Node]:
    """The insignificant whitespace, ``,`` and ``:`` of a ``whitespace`` policy: the same
    nodes for every compile with these options (immutable, made from the options alone; at
    most 32 pairs kept, since ``max_ws`` is any integer)."""
    cached = type(max_ws) is int  # (8.0 must not hit 8's nodes)
    hit = _SEPARATORS.get((whitespace, max_ws)) if cached else None
    if hit is not None:
        return hit
    ws: Node = EMPTY if whitespace in ("compact", "natural") else rep(byteset([(9, 10), (13, 13), (32, 32)]), 0, max_ws)
    comma = seq(ws, lit(","), ws)
    colon = seq(ws, lit(":"), ws)
    if whitespace == "natural":  # json.dumps' default separators: exactly ", " and ": "
        comma, colon = lit(", "), lit(": ")
    out = (ws, comma, colon)
    if cached and len(_SEPARATORS) < 32:
        _SEPARATORS[(whitespace, max_ws)] = out
    return out


def _registry(registry: Any) -> Any:
    """A ``referencing.Registry`` from ``registry`` (None, a Registry, or URI -> schema)."""
    if registry is None and _EMPTY_REGISTRY:
        return _EMPTY_REGISTRY[0]
    referencing, rj = _referencing()
    if registry is None:
        return _EMPTY_REGISTRY.setdefault(0, referencing.Registry())
    if isinstance(registry, referencing.Registry):
        return registry
    if not isinstance(registry, dict):
        raise TypeError("registry must be a referencing.Registry or a mapping from URI to schema")
    out = referencing.Registry()
    for uri, doc in registry.items():
        dialect = doc.get("$schema") if isinstance(doc, dict) else None
        spec = rj.specification_with(dialect, default=rj.DRAFT202012) if isinstance(dialect, str) else rj.DRAFT202012
        out = out.with_resource(uri, spec.create_resource(doc))
    return out


def _text_holds(doc: Any, word: str) -> bool:
    """``word in json.dumps(doc)`` for a ``word`` with no character JSON escapes or uses
    between tokens (``"$dynamicRef"``): such a word is in the text exactly when it is in a
    string (a key or a value) of ``doc``.  Found by walking ``doc`` (about twice as fast as
    serializing it); anything the walk is not sure of (a value of another type, nesting
    deeper than 1,000, which a cycle would be) is left to ``json.dumps``, so its errors too
    are the same."""
    level: list[Any] = [doc]
    found = False
    for _ in range(1000):
        if not level:
            return found
        nxt: list[Any] = []
        push = nxt.append
        for v in level:
            cls = v.__class__
            if cls is dict:
                for k in v:
                    if k.__class__ is not str:
                        return word in json.dumps(doc)
                    if word in k:
                        found = True
                items = v.values()
            elif cls is list:
                items = v
            else:  # (the root only: members are checked below, not pushed)
                if cls is str:
                    if word in v:
                        found = True
                elif not (cls is int or cls is float or cls is bool or v is None):
                    return word in json.dumps(doc)
                continue
            for x in items:
                c = x.__class__
                if c is str:
                    if word in x:
                        found = True
                elif c is dict or c is list:
                    push(x)
                elif not (c is int or c is float or c is bool or x is None):
                    return word in json.dumps(doc)
        level = nxt
    return word in json.dumps(doc)


#: the node classes ``Grammar``'s walk looks for besides Refs
_IRREGULAR = frozenset((Special, Inter, Diff))


def _regular_estimated(root: Node, c: _Compiler) -> bool:
    """Whether ``root`` (of a compile that made no rule: it holds no Ref) holds no Special,
    Inter or Diff, as its counted estimate's walk says: every node below ``root`` is then in
    the memo's keep list (the nodes that walk estimated), a registered plain constant, or
    a per-process part of :meth:`_Compiler.not_in` (JSON characters), which hold none.
    (The estimate is :func:`_check_rules`' own, made first; False: some may.)"""
    _estimate(root, True, c._estimates)
    keep = c._estimates[True][1]
    irregular = _IRREGULAR
    for n in keep:
        if n.__class__ in irregular:
            return False
    return True


def _reachable(root: Node, rules: dict[str, Node], shared: dict[int, Node] | None = None,
               facts: dict[str, bool] | None = None) -> dict[str, Node]:
    """The rules reachable from ``root`` (in their creation order).  The constant nodes
    (:func:`_constants`, registered plain) and the per-process parts in ``shared`` (by id,
    see :meth:`_Compiler.not_in`: JSON characters, any JSON string content), which hold no
    Ref, Special, Inter or Diff, are not walked.  ``facts["regular"]`` (when walked): no
    walked node is a Special, Inter or Diff (see :func:`decoding.ir.reachable_rules`)."""
    if not rules:  # none to reach (nothing to walk for)
        return {}
    ids = _constants().ids
    irregular: list[bool] = []
    seen = set(reachable_rules(root, rules.__getitem__, ids.union(shared) if shared else ids, irregular))
    if facts is not None:
        facts["regular"] = not irregular
    return {k: v for k, v in rules.items() if k in seen}


def _productive(node: Node, good: set[str], true: set[int]) -> bool:
    """Whether ``node`` derives some string when the rules in ``good`` do (Refs to the
    others derive none), by the rules of :func:`decoding.ir.productive._derives` (so the
    start rule found productive here is productive there: ``known_productive``), evaluated
    bottom-up with an explicit stack.  ``true``: ids of nodes known productive (not
    evaluated again), updated with those found; the caller keeps the nodes alive while it
    holds the set."""
    false: set[int] = set()  # unproductive with this ``good``
    # a node, or ``(node,)`` once its children are evaluated (each node is expanded once: the
    # IR below a node, Refs not followed, cannot hold it)
    stack: list = [node]
    while stack:
        n = stack.pop()
        if n.__class__ is tuple:
            n = n[0]
            cls = n.__class__
            if cls is Repeat:
                ok = id(n.item) in true
            elif cls is Seq:
                ok = True
                for x in n.items:
                    if id(x) not in true:
                        ok = False
                        break
            else:
                ok = False
                for x in n.items:
                    if id(x) in true:
                        ok = True
                        break
        else:
            i = id(n)
            if i in true or i in false:
                continue
            cls = n.__class__
            if cls is Ref:
                ok = n.name in good
            elif cls is Seq or cls is Choice:
                stack.append((n,))
                for x in n.items:
                    if id(x) not in true and id(x) not in false:
                        stack.append(x)
                continue
            elif cls is Repeat:
                if n.min == 0 or (n.max is not None and n.max < n.min):
                    ok = n.min == 0
                else:
                    stack.append((n,))
                    stack.append(n.item)
                    continue
            elif cls is ByteSet:
                ok = bool(n.ranges)
            else:
                ok = True  # Lit, Special, Inter, Diff, Dfa
        (true if ok else false).add(id(n))
    return id(node) in true


def _reach_and_derive(root: Node, rules: dict[str, Node], shared: dict[int, Node] | None = None,
                      facts: dict[str, bool] | None = None) -> tuple[dict[str, Node], bool]:
    """``(_reachable(root, rules, shared, facts), derives)`` in one walk: ``derives`` True
    says ``root`` derives some string (then :func:`_unproductive` is None), False that this
    walk cannot tell (ask :func:`_unproductive`).  Post-order, each rule's body walked when
    its first Ref is, by :func:`_productive`'s rules; a Ref to a rule whose body is being
    walked (a cycle), or a node met again while it is being walked, counts as deriving
    nothing, so a value found True is true whatever the fixpoint (values only grow with
    the rules known productive) and False may be too low.  Walks the nodes
    :func:`_reachable` does (the constant nodes and ``shared`` parts are not walked: known
    productive or not once per process, :func:`_unproductive`'s ``true``).  Without rules
    (nothing to reach) it is :func:`_unproductive`'s walk alone."""
    if not rules:
        return {}, _unproductive(root, rules, shared) is None
    ids = _constants().ids
    ref_free = ids.union(shared) if shared else ids
    true = set(_constants().productive)
    for i, n in (shared or {}).items():
        if _shared_productive(n):
            true.add(i)
    # the walked nodes' values, None while a node is walked (read as False: met again inside
    # itself through a rule); a ``ref_free`` node's is ``id in true``
    val: dict[int, bool | None] = {}
    rule_val: dict[str, bool | None] = {}  # the rules reached: None while their body is walked
    irregular = False
    # a node to enter, or ``(node,)`` to leave once its children (a Ref: its rule's body) are
    stack: list = [root]
    pop = stack.pop
    push = stack.append
    while stack:
        n = pop()
        cls = n.__class__
        if cls is tuple:
            n = n[0]
            cls = n.__class__
            if cls is Seq:
                ok = True
                for x in n.items:
                    i = id(x)
                    if not (val[i] if i in val else i in true):
                        ok = False
                        break
            elif cls is Choice:
                ok = False
                for x in n.items:
                    i = id(x)
                    if val[i] if i in val else i in true:
                        ok = True
                        break
            elif cls is Repeat:
                i = id(n.item)
                ok = bool(val[i] if i in val else i in true)
            else:  # a Ref whose rule's body is walked
                i = id(rules[n.name])
                ok = rule_val[n.name] = bool(val[i] if i in val else i in true)
            val[id(n)] = ok
            continue
        i = id(n)
        if i in val or i in ref_free:
            continue  # (known, or being walked: read as False; or not walked)
        if cls is Seq or cls is Choice:
            val[i] = None
            push((n,))
            stack.extend(reversed(n.items))
        elif cls is Repeat:
            if n.min == 0 or (n.max is not None and n.max < n.min):
                val[i] = n.min == 0
                push(n.item)  # (walked for the rules it reaches)
            else:
                val[i] = None
                push((n,))
                push(n.item)
        elif cls is Ref:
            name = n.name
            if name in rule_val:
                val[i] = bool(rule_val[name])  # (None: a cycle, read as False)
            else:
                rule_val[name] = val[i] = None
                push((n,))
                push(rules[name])
        elif cls is ByteSet:
            val[i] = bool(n.ranges)
        else:  # Lit, Special, Inter, Diff, Dfa
            val[i] = True
            if cls is Inter:
                stack.extend(reversed(n.items))  # (walked for what they hold, as _reachable)
                irregular = True
            elif cls is Diff:
                push(n.minus)
                push(n.base)
                irregular = True
            elif cls is Special:
                irregular = True
    if facts is not None:
        facts["regular"] = not irregular
    i = id(root)
    return {k: v for k, v in rules.items() if k in rule_val}, bool(val[i] if i in val else i in true)


def _unproductive(root: Node, rules: dict[str, Node], shared: dict[int, Node] | None = None) -> str | None:
    """None if ``root`` derives some string; else the name of a reachable rule that derives
    none (a reference cycle with no way out, like ``{"$ref": "#"}``).  Least fixpoint of the
    productive rules (:func:`_productive`).  ``good`` only grows, so a node found
    productive stays so: those are remembered across the passes (by id: the nodes are alive
    in ``rules``), starting from the constant nodes' (:func:`_constants`)."""
    good: set[str] = set()
    true = set(_constants().productive)
    for i, n in (shared or {}).items():  # per-process Ref-free parts: known once per process
        if _shared_productive(n):
            true.add(i)
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in good and _productive(body, good, true):
                good.add(name)
                changed = True
    if _productive(root, good, true):
        return None
    bad = [n for n in rules if n not in good]
    return bad[0] if bad else ""


def _limit(where: str, what: str, name: str, limit: int, value: Any, *, estimated: bool = False) -> LimitError:
    """A LimitError naming the place (a pointer), the limit (name and value) and the measure
    (``estimated``: an estimate's, see :attr:`~decoding.limits.Limits.refuse_on_estimates`)."""
    return LimitError(f"{where or '/'}: {what} (limit {name}={limit})", pointer=where, limit=name,
                      value=value, estimated=estimated)


def _rule_pointer(name: str) -> str:
    """The schema pointer a rule was built for (rule names are ``kind:pointer``)."""
    _, _, ptr = name.partition(":")
    return "" if ptr in ("", "#") or not ptr.startswith("/") else ptr


def _check_rules(g: Grammar, c: _Compiler) -> None:
    """Each rule within ``max_nfa`` states and ``max_compile_work``; all distinct rules
    together (the pushdown back-end builds each) within ``max_nfa_states`` and
    ``max_compile_work``.  Located at the rule's (or the largest rule's) subschema.  Nothing
    is checked when ``limits.refuse_on_estimates`` is off (the rules are estimated all the
    same: the back-end selection reads the estimates)."""
    seen: list[tuple[int, int, str]] = []  # (states, work, name) of each distinct body
    alike: dict[tuple[int, int], list[Node]] = {}  # distinct bodies by (states, work)
    for name, node in g.rules:
        est = _estimate(node, True, c._estimates)
        states, work = est.states, est.work
        # equal bodies have equal estimates: only those are compared (hashing a body
        # would walk it whole)
        bodies = alike.setdefault((states, work), [])
        if any(b is node or b == node for b in bodies):
            continue
        bodies.append(node)
        seen.append((states, work, name))
        if states > c.max_nfa and c.limits.refuse_on_estimates:
            raise _limit(_rule_pointer(name), f"rule '{name}' expands to about {states} automaton states",
                         "max_nfa", c.max_nfa, states, estimated=True)
        if work > c.limits.max_compile_work and c.limits.refuse_on_estimates:
            raise _limit(_rule_pointer(name), f"rule '{name}' costs about {work} steps to determinise",
                         "max_compile_work", c.limits.max_compile_work, work, estimated=True)
    if not c.limits.refuse_on_estimates:
        return
    total_states = sum(v[0] for v in seen)
    total_work = sum(v[1] for v in seen)
    biggest = _rule_pointer(max(seen, key=lambda v: (v[1], v[0]))[2])
    if total_states > c.limits.max_nfa_states:
        raise _limit(biggest, f"the schema's {len(seen)} rules expand to about {total_states} automaton "
                     "states in total (the largest is here)", "max_nfa_states", c.limits.max_nfa_states,
                     total_states, estimated=True)
    if total_work > c.limits.max_compile_work:
        raise _limit(biggest, f"the schema's {len(seen)} rules cost about {total_work} steps to "
                     "determinise in total (the largest is here)", "max_compile_work",
                     c.limits.max_compile_work, total_work, estimated=True)


def _attach_estimates(g: Grammar, c: _Compiler) -> None:
    """Attach the subtree estimates this compile made (:func:`_estimate`'s memos, which
    :func:`_check_rules` completed for every rule) to ``g`` for the back-end selection's
    :func:`decoding.ir.size.check_size` (:func:`decoding.ir.size.attach_estimates`)."""
    memos: dict[bool, dict] = {}
    keep: list = []
    for counted in (False, True):
        shared = c._estimates.get(counted)
        if shared is not None:
            memos[counted] = shared[0]
            keep.append(shared[1])
    if memos:
        attach_estimates(g, memos, keep)


def _located(e: SchemaError | LimitError, schema: Any) -> SchemaError | LimitError:
    """``e`` with its pointer shortened to the longest prefix that resolves in ``schema``
    (a keyword merged in from an ``allOf`` part or a ``$ref`` names its subschema)."""
    ptr = e.pointer
    if ptr is None:
        ptr = ""
    good = ptr
    while good and resolve_pointer(schema, good) is None:
        good = good.rsplit("/", 1)[0]
    if good == e.pointer:
        return e
    if isinstance(e, SchemaError):
        out: SchemaError | LimitError = type(e)(good, e.keyword, e.reason)
    else:
        msg = str(e)
        old = f"{e.pointer or '/'}: "
        msg = (good or "/") + ": " + (msg[len(old):] if e.pointer is not None and msg.startswith(old) else msg)
        out = LimitError(msg, pointer=good, limit=e.limit, value=e.value, estimated=e.estimated)
    return out


def _not_of_everything(sub: Any, ptr: str) -> bool:
    """Whether ``{"not": sub}`` rejects every instance: ``sub`` (double negations peeled)
    is ``true`` or has no semantic keyword, under an odd number of nots."""
    inner, _, neg = peel_not(sub, pointer_join(ptr, "not"))
    return neg and (inner is True or isinstance(inner, dict) and not set(inner) & SEMANTIC)
