"""Grammar IR: a small immutable algebra of byte-level languages.

Every front-end (JSON Schema, DTD, GBNF, anchors) returns a :class:`Grammar` built from
these nodes, and every back-end (byte automaton, GBNF emitter) reads it.

Invariants
- Nodes are frozen dataclasses; a grammar is hashable, comparable and serializable
  to plain JSON data (:func:`to_data` / :func:`from_data`).
- The alphabet is *bytes*: characters are spelled as their UTF-8 byte sequences
  (see :func:`char_class`), so tokens that split a UTF-8 character work.
- ``Special(text)`` is an anchor / special token.  When the vocabulary has ``text`` as
  one control or user-defined token it is matched as that token, otherwise as the
  literal UTF-8 bytes of ``text``.
- ``Ref(name)`` refers to a rule of the enclosing grammar.  The automaton back-end
  unrolls recursion to ``Grammar.max_depth`` nested expansions of the same rule;
  deeper expansions denote the empty language (and are pruned).
- ``Dfa(edges, accept)`` is a regular leaf given as its automaton (state 0 starts; per
  state a tuple of ``(lo, hi, target)`` byte-range edges): a remainder automaton, say,
  whose regular expression would be exponentially long.
- ``Inter(items)`` (intersection) and ``Diff(base, minus)`` (the strings of ``base`` not in
  ``minus``) are the boolean operations on *regular* sub-languages: their operands contain
  no ``Ref`` and no ``Special`` (checked by :class:`Grammar`), so every back-end can build
  them as one byte automaton (product construction of the operands' DFAs).  A front-end
  that wants a recursive language inside inlines it to a bounded depth first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable, Iterable, Union

from decoding.errors import GrammarError

__all__ = [
    "Lit", "ByteSet", "Seq", "Choice", "Repeat", "Ref", "Special", "Inter", "Diff", "Dfa", "Node", "Grammar",
    "EMPTY", "NOTHING", "lit", "seq", "choice", "opt", "star", "plus", "rep",
    "byteset", "char_class", "any_char", "normalize_ranges", "complement_ranges", "map_leaves", "reachable_rules", "to_data",
    "from_data", "walk", "nullable", "DEFAULT_MAX_DEPTH", "MAX_CP", "inter", "diff", "check_regular",
    "register_plain", "plain_ids", "plain_nodes",
]

#: Default recursion bound of every front-end (JSON Schema ``$ref`` cycles, DTD elements
#: nested in themselves, recursive GBNF rules) unless the caller passes ``max_depth``: a
#: rule may be expanded at most this many times nested inside itself on one path.  Small
#: on purpose: the DFA back-end unrolls recursion, so its size grows with the depth (as a
#: power of it where rules recurse through each other).
DEFAULT_MAX_DEPTH = 3

#: The largest Unicode code point; code-point sets are ranges within ``0..MAX_CP``.
MAX_CP = 0x10FFFF


def _hash_once(*fields: str) -> Callable[[type], type]:
    """Give a composite node class (under its ``@dataclass``, which then keeps them) a hash
    made once per node and an equality that reads it: ``hash`` of the compared ``fields``
    (what the generated ``__hash__`` hashed), never 0, stored in the ``_h`` slot, which is
    unset until then (``__eq__`` reads an unset one as 0: "not made yet"; two made hashes
    that differ tell different nodes without walking their subtrees).  The generated hash
    walked the whole subtree on every call, and the per-process memos keyed by nodes
    (:func:`decoding.backends.automaton.regular_dfa`'s, the counted back-end's) ask for the
    hashes of deep trees many times (Snowplow sp_209's first compile: 57k calls)."""

    get = attrgetter(*fields)  # (one field: its value; more: their tuple)
    one = len(fields) == 1

    def decorate(cls: type) -> type:
        def __hash__(self: Any) -> int:
            try:
                return self._h
            except AttributeError:
                h = hash((get(self),) if one else get(self)) or 1
                object.__setattr__(self, "_h", h)
                return h

        def __eq__(self: Any, other: object) -> bool:
            if other is self:
                return True
            if other.__class__ is not self.__class__:
                return NotImplemented
            a, b = getattr(self, "_h", 0), getattr(other, "_h", 0)
            return (a == b or not (a and b)) and get(self) == get(other)

        cls.__hash__ = __hash__  # type: ignore[method-assign]
        cls.__eq__ = __eq__  # type: ignore[method-assign]
        return cls

    return decorate


@dataclass(frozen=True, slots=True)
class Lit:
    """The exact byte string ``data``."""
    data: bytes


@dataclass(frozen=True, slots=True)
class ByteSet:
    """One byte in any of ``ranges`` (sorted, disjoint, inclusive ``(lo, hi)`` pairs)."""
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
@_hash_once("items")
class Seq:
    """Concatenation; ``Seq(())`` is the empty string."""
    items: tuple["Node", ...]
    _h: int = field(init=False, repr=False, compare=False, hash=False)  # (the hash, once made; unset before)


@dataclass(frozen=True, slots=True)
@_hash_once("items")
class Choice:
    """Alternation; ``Choice(())`` is the empty language."""
    items: tuple["Node", ...]
    _h: int = field(init=False, repr=False, compare=False, hash=False)  # (the hash, once made; unset before)


@dataclass(frozen=True, slots=True)
@_hash_once("item", "min", "max")
class Repeat:
    """``item{min,max}``; ``max=None`` means unbounded."""
    item: "Node"
    min: int = 0
    max: int | None = None
    _h: int = field(init=False, repr=False, compare=False, hash=False)  # (the hash, once made; unset before)


@dataclass(frozen=True, slots=True)
class Ref:
    """Reference to the rule ``name`` of the enclosing grammar."""
    name: str


@dataclass(frozen=True, slots=True)
class Special:
    """An anchor / special token such as ``<|xml_start|>`` or ``<tool_call>``."""
    text: str


@dataclass(frozen=True, slots=True)
@_hash_once("items")
class Inter:
    """Intersection: the strings every one of ``items`` accepts (regular operands only:
    no Ref, no Special).  ``Inter(())`` is not allowed (no universe is implied)."""
    items: tuple["Node", ...]
    _h: int = field(init=False, repr=False, compare=False, hash=False)  # (the hash, once made; unset before)


@dataclass(frozen=True, slots=True)
@_hash_once("base", "minus")
class Diff:
    """Difference: the strings of ``base`` that ``minus`` does not accept (regular operands
    only).  Complement relative to a universe ``U`` is ``Diff(U, x)``."""
    base: "Node"
    minus: "Node"
    _h: int = field(init=False, repr=False, compare=False, hash=False)  # (the hash, once made; unset before)


@dataclass(frozen=True, slots=True)
@_hash_once("edges", "accept")
class Dfa:
    """A regular leaf given as a deterministic or not automaton over bytes: state 0 is the
    start, ``edges[i]`` the ``(lo, hi, target)`` edges of state ``i`` (inclusive byte
    ranges), ``accept`` the accepting states (sorted)."""
    edges: tuple[tuple[tuple[int, int, int], ...], ...]
    accept: tuple[int, ...]
    _h: int = field(init=False, repr=False, compare=False, hash=False)  # (the hash, once made; unset before)

    def __post_init__(self) -> None:
        n = len(self.edges)
        if n == 0:
            raise GrammarError("an automaton leaf needs at least one state")
        for es in self.edges:
            for lo, hi, t in es:
                if not (0 <= lo <= hi <= 255 and 0 <= t < n):
                    raise GrammarError(f"automaton leaf: bad edge ({lo}, {hi}, {t}) for {n} states")
        if any(not 0 <= a < n for a in self.accept):
            raise GrammarError("automaton leaf: accepting state out of range")


Node = Union[Lit, ByteSet, Seq, Choice, Repeat, Ref, Special, Inter, Diff, Dfa]

EMPTY: Node = Seq(())
NOTHING: Node = Choice(())


@dataclass(frozen=True)
class Grammar:
    """A start rule plus named rules.  ``rules`` is a tuple of ``(name, node)`` pairs."""
    start: str
    rules: tuple[tuple[str, Node], ...]
    max_depth: int = DEFAULT_MAX_DEPTH
    _by_name: dict = field(default=None, init=False, repr=False, compare=False, hash=False)  # type: ignore[assignment]
    _specials: tuple = field(default=(), init=False, repr=False, compare=False, hash=False)
    _rule_refs: dict = field(default=None, init=False, repr=False, compare=False, hash=False)  # type: ignore[assignment]
    #: ``(find_empty(self),)`` once known (:func:`decoding.ir.productive.find_empty`), else ``()``
    _empty: tuple = field(default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        table = self._table()
        # one walk per rule: undefined refs (reported first), Inter/Diff operands, specials
        undefined: GrammarError | None = None
        irregular: tuple[str, Node] | None = None
        specials: dict[str, None] = {}
        # one walk over all the rules (a subtree shared by rules is visited once): the first
        # undefined ref, the first Inter/Diff and the specials' order are what rule-by-rule
        # walks find, since what a skipped subtree holds was found where it was first seen
        # (the registered plain nodes hold none of these: skipped, see :func:`register_plain`)
        plain = _PLAIN_IDS
        seen: set[int] = set()
        mark = seen.add
        has_ref = False
        for name, node in self.rules:
            stack = [node]  # (the pre-order of :func:`walk`)
            pop = stack.pop
            while stack:
                n = pop()
                i = id(n)
                if i in seen or i in plain:
                    continue
                mark(i)
                cls = n.__class__
                if cls is Seq or cls is Choice:
                    stack += n.items[::-1]  # type: ignore[union-attr]
                elif cls is Repeat:
                    stack.append(n.item)  # type: ignore[union-attr]
                elif cls is Lit or cls is ByteSet:
                    continue
                elif cls is Ref:
                    has_ref = True
                    if undefined is None and n.name not in table:  # type: ignore[union-attr]
                        undefined = GrammarError(f"rule '{name}' refers to undefined rule '{n.name}'")  # type: ignore[union-attr]
                elif cls is Special:
                    specials.setdefault(n.text)  # type: ignore[union-attr]
                elif cls is Inter or cls is Diff:
                    if irregular is None:
                        irregular = (name, n)
                    stack.extend(reversed(n.items) if cls is Inter else (n.minus, n.base))  # type: ignore[union-attr]
        if undefined is not None:
            raise undefined
        if irregular is not None:
            for name, node in self.rules:  # the first offending rule, as check_regular names it
                check_regular(node, f"rule '{name}'")
        self._check_depth()
        object.__setattr__(self, "_by_name", table)
        object.__setattr__(self, "_specials", tuple(specials))
        if not has_ref:  # no rule refers to any (the walk saw every node but the plain ones, which hold none)
            object.__setattr__(self, "_rule_refs", {n: () for n in table})

    def _table(self) -> dict:
        """The rules by name; GrammarError on a duplicate name or an undefined start rule."""
        table = dict(self.rules)
        if len(table) != len(self.rules):
            names = [n for n, _ in self.rules]
            dup = sorted({n for n in names if names.count(n) > 1})
            raise GrammarError(f"duplicate rule name(s): {', '.join(dup)}")
        if self.start not in table:
            raise GrammarError(f"start rule '{self.start}' is not defined")
        return table

    def _check_depth(self) -> None:
        if self.max_depth < 1:
            raise GrammarError(f"grammar {self.start!r}: max_depth must be at least 1, not {self.max_depth}")

    @classmethod
    def walked(cls, start: str, rules: tuple[tuple[str, Node], ...], max_depth: int = DEFAULT_MAX_DEPTH, *,
               refs: bool = True) -> "Grammar":
        """``Grammar(start, rules, max_depth)`` without its walk over the rules, for a caller
        that has walked them already (:func:`reachable_rules` with ``irregular``, or a walk
        that saw every node) and found what that walk would: some Ref (none with
        ``refs=False``), each naming a rule of ``rules``, and no Special, Inter or Diff
        outside the registered plain nodes (so no special, nothing for
        :func:`check_regular`).  The same grammar, the same errors otherwise (a duplicate
        name, an undefined start, a bad ``max_depth``)."""
        g = object.__new__(cls)
        object.__setattr__(g, "start", start)
        object.__setattr__(g, "rules", rules)
        object.__setattr__(g, "max_depth", max_depth)
        object.__setattr__(g, "_specials", ())
        object.__setattr__(g, "_rule_refs", None)
        object.__setattr__(g, "_empty", ())
        table = g._table()
        g._check_depth()
        object.__setattr__(g, "_by_name", table)
        if not refs:  # (as the walk sets it when it meets no Ref)
            object.__setattr__(g, "_rule_refs", {n: () for n in table})
        return g

    @classmethod
    def single(cls, node: Node, *, max_depth: int = DEFAULT_MAX_DEPTH) -> "Grammar":
        """A grammar whose start rule ``root`` is ``node``."""
        return cls("root", (("root", node),), max_depth)

    def rule(self, name: str) -> Node:
        return self._by_name[name]

    def rule_refs(self, name: str) -> tuple[str, ...]:
        """Names of the rules the body of rule ``name`` refers to, in first-occurrence
        order (a pre-order walk; registered plain nodes hold no Ref and are not walked).
        Computed once per rule and grammar."""
        memo = self._rule_refs
        if memo is None:
            memo = {}
            object.__setattr__(self, "_rule_refs", memo)
        hit = memo.get(name)
        if hit is None:
            out: dict[str, None] = {}
            for n in walk(self._by_name[name], set(_PLAIN_IDS)):
                if isinstance(n, Ref):
                    out.setdefault(n.name)
            hit = memo[name] = tuple(out)
        return hit

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.rules]

    def specials(self) -> list[str]:
        """Texts of all :class:`Special` nodes, in first-seen order (found when the grammar
        was built)."""
        return list(self._specials)


#: ids of the registered plain nodes (:func:`register_plain`) and the nodes themselves,
#: kept alive for the life of the process so that no id here ever names another node
_PLAIN_IDS: set[int] = set()
_PLAIN_KEEP: list[Node] = []


def register_plain(node: Node) -> None:
    """Register ``node`` and every node of its subtree as *plain*: constant IR that many
    grammars of the process share (a JSON string character, a JSON number), holding no
    Ref, Special, Inter, Diff or Dfa, every node of it deriving some string.  The passes over
    a grammar (its check when built, :func:`decoding.ir.productive.productive_rules`,
    :func:`decoding.ir.key.canonical_ir_text`) then learn what they need of those nodes once
    per process instead of walking them in every grammar; what they compute is unchanged.
    The nodes are kept alive for the life of the process.  GrammarError if ``node`` is not
    plain."""
    inside: list[Node] = []  # post-order: every node after its subtree's
    done: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in done:
            continue
        kids = n.items if isinstance(n, (Seq, Choice, Inter)) else (n.item,) if isinstance(n, Repeat) \
            else (n.base, n.minus) if isinstance(n, Diff) else ()
        if ready or not kids:
            done.add(id(n))
            inside.append(n)
            continue
        stack.append((n, True))
        stack.extend((k, False) for k in reversed(kids))
    derives: dict[int, bool] = {}
    for n in inside:
        if isinstance(n, (Ref, Special, Inter, Diff, Dfa)):
            raise GrammarError(f"register_plain: a {type(n).__name__} is no plain node")
        if isinstance(n, Seq):
            ok = all(derives[id(x)] for x in n.items)
        elif isinstance(n, Choice):
            ok = any(derives[id(x)] for x in n.items)
        elif isinstance(n, Repeat):
            ok = n.min == 0 or (derives[id(n.item)] and (n.max is None or n.max >= n.min))
        elif isinstance(n, ByteSet):
            ok = bool(n.ranges)
        else:
            ok = isinstance(n, Lit)
        if not ok:
            raise GrammarError("register_plain: a node of the subtree derives no string")
        derives[id(n)] = ok
    for n in inside:
        if id(n) not in _PLAIN_IDS:
            _PLAIN_KEEP.append(n)
            _PLAIN_IDS.add(id(n))


def plain_ids() -> set[int]:
    """The ids of the registered plain nodes (:func:`register_plain`; read only)."""
    return _PLAIN_IDS


def plain_nodes() -> list[Node]:
    """The registered plain nodes (:func:`register_plain`; read only), in registration
    order, every node after its subtree's."""
    return _PLAIN_KEEP


def children(n: Node) -> tuple[Node, ...]:
    """The direct sub-nodes of ``n`` (a Ref's rule is not one; leaves have none)."""
    cls = n.__class__
    if cls is Seq or cls is Choice or cls is Inter:
        return n.items  # type: ignore[union-attr]
    if cls is Repeat:
        return (n.item,)  # type: ignore[union-attr]
    if cls is Diff:
        return (n.base, n.minus)  # type: ignore[union-attr]
    return ()


def walk(node: Node, seen: set[int] | None = None) -> Iterable[Node]:
    """Pre-order iteration over ``node`` and its children (not following refs).  A subtree
    shared by several parents (the same object) is visited once, so IR that shares
    subtrees heavily is walked in time linear in its distinct nodes.  ``seen``: ids of
    nodes already visited, skipped with their subtrees and updated; shared by the walks of
    several rules, a subtree they share (a JSON string character) is visited once in all.
    The caller keeps those nodes alive while the set is in use (ids are not reused)."""
    stack = [node]
    if seen is None:
        seen = set()
    pop = stack.pop
    mark = seen.add
    while stack:
        n = pop()
        i = id(n)
        if i in seen:
            continue
        mark(i)
        yield n
        cls = n.__class__  # (the node classes have no subclasses)
        if cls is Seq or cls is Choice or cls is Inter:
            stack += n.items[::-1]  # type: ignore[union-attr]
        elif cls is Repeat:
            stack.append(n.item)  # type: ignore[union-attr]
        elif cls is Diff:
            stack.append(n.minus)  # type: ignore[union-attr]
            stack.append(n.base)  # type: ignore[union-attr]


def check_regular(node: Node, where: str) -> None:
    """GrammarError naming ``where`` if an Inter/Diff inside ``node`` has a Ref or a Special
    among its operands (their languages must be regular and byte-level)."""
    # (linear: the Inter/Diff nodes in pre-order, then their subtrees walked with one shared
    # ``seen``: a nested operand's nodes were walked with its parent's, and any Ref or Special
    # there would have been reported then; the same first error as a walk per node)
    logic = [n for n in walk(node) if isinstance(n, (Inter, Diff))]
    seen: set[int] = set()
    for n in logic:
        if isinstance(n, Inter) and not n.items:
            raise GrammarError(f"{where}: an intersection needs at least one operand")
        for x in walk(n, seen):
            if isinstance(x, (Ref, Special)):
                    what = f"reference to rule '{x.name}'" if isinstance(x, Ref) else f"special {x.text!r}"
                    raise GrammarError(f"{where}: an intersection/difference operand contains a {what}; "
                                       "only regular byte languages (no Ref, no Special) may be "
                                       "intersected or complemented (inline them first)")


def map_leaves(node: Node, f: "Callable[[Node], Node]") -> Node:
    """``node`` with every leaf (Lit, ByteSet, Ref, Special) replaced by ``f(leaf)``;
    sequences, choices and repeats are rebuilt around them.  ``Inter``/``Diff`` are
    returned unchanged (their operands hold no Ref or Special, see the module docstring).  Iterative (an explicit
    stack), so IR nested thousands deep is no ``RecursionError``."""
    out: list[Node] = []
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, built = stack.pop()
        if isinstance(n, (Seq, Choice)):
            if built:
                k = len(n.items)
                items = tuple(out[len(out) - k:]) if k else ()
                del out[len(out) - k:]
                out.append(type(n)(items))
            else:
                stack.append((n, True))
                stack.extend((x, False) for x in reversed(n.items))
        elif isinstance(n, Repeat):
            if built:
                out.append(Repeat(out.pop(), n.min, n.max))
            else:
                stack.append((n, True))
                stack.append((n.item, False))
        else:
            out.append(f(n))
    return out[0]


def nullable(node: Node, ref: "Callable[[str], bool] | None" = None) -> bool:
    """Whether ``node`` accepts the empty string.  A Ref counts as ``ref(name)`` (never
    empty without ``ref``); bytes and specials never are."""
    if isinstance(node, Lit):
        return not node.data
    if isinstance(node, Seq):
        return all(nullable(x, ref) for x in node.items)
    if isinstance(node, Choice):
        return any(nullable(x, ref) for x in node.items)
    if isinstance(node, Repeat):
        return node.min == 0 or nullable(node.item, ref)
    if isinstance(node, Ref):
        return ref is not None and ref(node.name)
    if isinstance(node, Inter):
        return all(nullable(x, ref) for x in node.items)
    if isinstance(node, Diff):
        return nullable(node.base, ref) and not nullable(node.minus, ref)
    if isinstance(node, Dfa):
        return 0 in node.accept
    return False


def reachable_rules(root: Node, rule: "Callable[[str], Node]", ref_free: "Iterable[int]" = (),
                    irregular: "list[bool] | None" = None) -> list[str]:
    """Names of the rules ``root`` reaches through Refs (``rule(name)`` gives a body), in
    the order they are first found.  Iterative.  ``ref_free``: ids of nodes known to hold
    no Ref (kept alive by the caller), not walked.  ``irregular`` (a list): ``True`` is
    appended when a walked node is a Special, Inter or Diff (what :class:`Grammar`'s own
    walk looks for besides Refs; see :meth:`Grammar.walked`)."""
    found: list[str] = []
    seen: set[str] = set()
    # nodes walked: one walk for all the bodies, a subtree they share is visited once (the
    # bodies are kept alive in ``walked`` while ids name them)
    # (the pre-order of :func:`walk`, inlined: no generator step per node)
    visited: set[int] = set(ref_free)
    walked: list[Node] = []
    todo = [root]
    while todo:
        walked.append(todo.pop())
        stack = [walked[-1]]
        while stack:
            n = stack.pop()
            i = id(n)
            if i in visited:
                continue
            visited.add(i)
            cls = n.__class__
            if cls is Seq or cls is Choice:
                stack.extend(reversed(n.items))  # type: ignore[union-attr]
            elif cls is Repeat:
                stack.append(n.item)  # type: ignore[union-attr]
            elif cls is Ref:
                if n.name not in seen:  # type: ignore[union-attr]
                    seen.add(n.name)  # type: ignore[union-attr]
                    found.append(n.name)  # type: ignore[union-attr]
                    todo.append(rule(n.name))  # type: ignore[union-attr]
            elif cls is Inter:
                stack.extend(reversed(n.items))  # type: ignore[union-attr]
                if irregular is not None:
                    irregular.append(True)
            elif cls is Diff:
                stack.append(n.minus)  # type: ignore[union-attr]
                stack.append(n.base)  # type: ignore[union-attr]
                if irregular is not None:
                    irregular.append(True)
            elif cls is Special and irregular is not None:
                irregular.append(True)
    return found


def _refs(node: Node) -> Iterable[str]:
    for n in walk(node):
        if isinstance(n, Ref):
            yield n.name


# ----------------------------------------------------------------------------- builders

# the builders make nodes without the frozen dataclasses' ``__init__`` (which sets each field
# through ``object.__setattr__``): the field's slot set directly, the same object (these
# classes have no ``__post_init__``); nodes are built by the thousand per compile
_new = object.__new__
_set_data = Lit.data.__set__  # type: ignore[attr-defined]
_set_items = Seq.items.__set__  # type: ignore[attr-defined]
_set_choice_items = Choice.items.__set__  # type: ignore[attr-defined]


def _lit(data: bytes) -> Lit:
    n = _new(Lit)
    _set_data(n, data)
    return n


def _seq(items: tuple) -> Seq:
    n = _new(Seq)
    _set_items(n, items)
    return n


def _choice(items: tuple) -> Choice:
    n = _new(Choice)
    _set_choice_items(n, items)
    return n


def lit(s: str | bytes) -> Node:
    return _lit(s.encode("utf-8") if isinstance(s, str) else bytes(s))


def seq(*items: Node) -> Node:
    """Concatenation: nested sequences flattened (one level), adjacent literals merged, empty
    literals dropped; NOTHING if an item is NOTHING; the item itself when one is left.  A
    literal that is merged with none is kept (the same object)."""
    merged: list[Node] = []
    run: bytes | None = None  # the bytes of the literals since the last other item
    only: Node | None = None  # the run's literal when it is one
    for it in items:
        cls = it.__class__
        if cls is Lit:  # (a literal or another non-sequence item: handled as one of a sequence's)
            data = it.data  # type: ignore[union-attr]
            if data:
                if run is None:
                    run, only = data, it
                else:
                    run, only = run + data, None
            continue
        if cls is not Seq:
            if cls is Choice and not it.items:  # type: ignore[union-attr]
                return NOTHING
            if run is not None:
                merged.append(only if only is not None else _lit(run))
                run = None
            merged.append(it)
            continue
        for x in it.items:  # type: ignore[union-attr]
            cls = x.__class__
            if cls is Lit:
                data = x.data  # type: ignore[union-attr]
                if data:
                    if run is None:
                        run, only = data, x
                    else:
                        run, only = run + data, None
                continue
            if cls is Choice and not x.items:  # type: ignore[union-attr]  # ``x == NOTHING``, without comparing
                return NOTHING
            if run is not None:
                merged.append(only if only is not None else _lit(run))
                run = None
            merged.append(x)
    if run is not None:
        merged.append(only if only is not None else _lit(run))
    return merged[0] if len(merged) == 1 else _seq(tuple(merged))


def _surface(x: Node) -> Any:
    """A cheap key of ``x`` that equal nodes share: a literal's bytes, a byte set's ranges,
    a repetition's bounds, else the class."""
    cls = x.__class__
    if cls is Lit:
        return x.data  # type: ignore[union-attr]
    if cls is ByteSet:
        return x.ranges  # type: ignore[union-attr]
    if cls is Repeat:
        return (x.min, x.max)  # type: ignore[union-attr]
    return cls


def _shallow(x: Node) -> tuple:
    """A composite's key for :func:`choice`'s dedup: equal composites have equal keys."""
    cls = x.__class__
    if cls is Repeat:
        return (cls, x.min, x.max, _surface(x.item))  # type: ignore[union-attr]
    if cls is Diff:
        return (cls, _surface(x.base), _surface(x.minus))  # type: ignore[union-attr]
    its = x.items  # type: ignore[union-attr]
    if not its:
        return (cls, 0)
    return (cls, len(its), _surface(its[0]), _surface(its[-1]))


def choice(*items: Node) -> Node:
    """Alternation: nested choices flattened (one level), repeated alternatives dropped; the
    alternative itself when one is left."""
    if len(items) == 1 and items[0].__class__ is not Choice:
        return items[0]
    flat: list[Node] = []
    datas: set[bytes] = set()  # the literals' bytes (equal literals: equal bytes)
    leaves: set[Node] = set()  # other leaves hash cheaply: many alternatives stay linear
    # composites are compared (hashing one walks it whole), only within a bucket of equal
    # shallow keys (equal nodes have equal keys): alternatives that differ at the surface,
    # like a digit range's, are never compared
    nested: dict[tuple, list[Node]] = {}
    for it in items:
        for x in (it.items if it.__class__ is Choice else (it,)):  # type: ignore[union-attr]
            cls = x.__class__
            if cls is Lit:
                if x.data in datas:  # type: ignore[union-attr]
                    continue
                datas.add(x.data)  # type: ignore[union-attr]
            elif cls is Seq or cls is Choice or cls is Repeat or cls is Inter or cls is Diff:
                key = _shallow(x)
                bucket = nested.get(key)
                if bucket is None:
                    nested[key] = [x]
                elif x in bucket:
                    continue
                else:
                    bucket.append(x)
            elif x in leaves:
                continue
            else:
                leaves.add(x)
            flat.append(x)
    return flat[0] if len(flat) == 1 else _choice(tuple(flat))


def rep(item: Node, lo: int = 0, hi: int | None = None) -> Node:
    if lo < 0 or (hi is not None and hi < lo):
        raise GrammarError(f"invalid repetition bounds {{{lo},{hi}}}")
    if hi == 0:
        return EMPTY
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


def inter(*items: Node) -> Node:
    """Intersection builder: NOTHING if an operand is NOTHING, the operand itself if there
    is one distinct operand."""
    flat: list[Node] = []
    for it in items:
        for x in (it.items if isinstance(it, Inter) else (it,)):
            if x == NOTHING:
                return NOTHING
            if x not in flat:
                flat.append(x)
    if not flat:
        raise GrammarError("an intersection needs at least one operand")
    return flat[0] if len(flat) == 1 else Inter(tuple(flat))


def diff(base: Node, minus: Node) -> Node:
    """Difference builder: ``base`` when ``minus`` is NOTHING, NOTHING when ``base`` is."""
    if base == NOTHING or minus == NOTHING:
        return base
    if base == minus:
        return NOTHING
    return Diff(base, minus)


def opt(item: Node) -> Node:
    return rep(item, 0, 1)


def star(item: Node) -> Node:
    return rep(item, 0, None)


def plus(item: Node) -> Node:
    return rep(item, 1, None)


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, merged, disjoint inclusive ranges (empty ``lo > hi`` pairs dropped)."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def complement_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Complement over code points 0..U+10FFFF (surrogates included; ``char_class`` drops them)."""
    out, nxt = [], 0
    for lo, hi in normalize_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return tuple(out)


def byteset(ranges: Iterable[tuple[int, int]]) -> Node:
    rs = normalize_ranges(ranges)
    for lo, hi in rs:
        if lo < 0 or hi > 255:
            raise GrammarError(f"byte range {lo}-{hi} outside 0-255")
    return ByteSet(rs) if rs else NOTHING


_SURROGATES = (0xD800, 0xDFFF)
_UTF8_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CP))


def _utf8_split(lo: int, hi: int) -> list[Node]:
    """Byte-sequence alternatives for code points lo..hi of one encoded length."""
    blo, bhi = chr(lo).encode(), chr(hi).encode()
    n = len(blo)
    if n == 1:
        return [ByteSet(((lo, hi),))]
    # split where continuation bytes are not full ranges (classic utf8-ranges algorithm)
    for i in range(n - 1, 0, -1):
        m = (1 << (6 * (n - i))) - 1
        if lo & ~m != hi & ~m:
            if lo & m != 0:
                return _utf8_split(lo, (lo | m)) + _utf8_split((lo | m) + 1, hi)
            if hi & m != m:
                return _utf8_split(lo, (hi & ~m) - 1) + _utf8_split(hi & ~m, hi)
    return [Seq(tuple(ByteSet(((blo[i], bhi[i]),)) for i in range(n)))]


#: :func:`_utf8_pieces` by ``(lo, hi)`` (at most :data:`UTF8_PIECES_MEMO` entries)
_UTF8_PIECES: dict[tuple[int, int], tuple[Node, ...]] = {}
UTF8_PIECES_MEMO = 4096


def _utf8_pieces(lo: int, hi: int) -> tuple[Node, ...]:
    """``_utf8_split(lo, hi)``, the same node objects for the same range: a class that leaves
    out a few ASCII characters (a JSON key not among the declared names, one per node of
    their trie) splits the same multi-byte ranges as every other such class, and their
    nodes are then also shared by what the back-ends learn of nodes (estimates, NFA program
    records, by identity).  Nodes are immutable, so sharing them changes no language."""
    key = (lo, hi)
    hit = _UTF8_PIECES.get(key)
    if hit is None:
        hit = tuple(_utf8_split(lo, hi))
        if len(_UTF8_PIECES) < UTF8_PIECES_MEMO:
            _UTF8_PIECES[key] = hit
    return hit


def char_class(ranges: Iterable[tuple[int, int]], *, negate: bool = False) -> Node:
    """One Unicode scalar value in ``ranges`` (inclusive code-point pairs), as UTF-8 bytes.

    With ``negate=True`` the complement over all scalar values (surrogates excluded).
    """
    rs = list(complement_ranges(ranges) if negate else normalize_ranges(ranges))
    # remove surrogates, split at encoding-length boundaries
    pieces: list[tuple[int, int]] = []
    for lo, hi in rs:
        for a, b in ((lo, min(hi, _SURROGATES[0] - 1)), (max(lo, _SURROGATES[1] + 1), hi)):
            for blo, bhi in _UTF8_BOUNDS:
                x, y = max(a, blo), min(b, bhi)
                if x <= y:
                    pieces.append((x, y))
    alts: list[Node] = []
    ascii_ranges: list[tuple[int, int]] = []
    for lo, hi in pieces:
        if hi <= 0x7F:
            ascii_ranges.append((lo, hi))
        else:
            alts.extend(_utf8_pieces(lo, hi))
    if ascii_ranges:
        alts.insert(0, ByteSet(normalize_ranges(ascii_ranges)))
    if not alts:
        return NOTHING
    return alts[0] if len(alts) == 1 else Choice(tuple(alts))


def any_char() -> Node:
    """Any Unicode scalar value, UTF-8 encoded."""
    return char_class([(0, MAX_CP)])


# ----------------------------------------------------------------------------- plain data

def _node_to_data(n: Node) -> list:
    if isinstance(n, Lit):
        return ["lit", n.data.hex()]
    if isinstance(n, ByteSet):
        return ["bytes", [list(r) for r in n.ranges]]
    if isinstance(n, Seq):
        return ["seq", [_node_to_data(x) for x in n.items]]
    if isinstance(n, Choice):
        return ["choice", [_node_to_data(x) for x in n.items]]
    if isinstance(n, Repeat):
        return ["repeat", _node_to_data(n.item), n.min, n.max]
    if isinstance(n, Ref):
        return ["ref", n.name]
    if isinstance(n, Special):
        return ["special", n.text]
    if isinstance(n, Inter):
        return ["inter", [_node_to_data(x) for x in n.items]]
    if isinstance(n, Diff):
        return ["diff", _node_to_data(n.base), _node_to_data(n.minus)]
    if isinstance(n, Dfa):
        return ["dfa", [[list(e) for e in es] for es in n.edges], list(n.accept)]
    raise GrammarError(f"not an IR node: {n!r}")


def _node_from_data(d: list) -> Node:
    tag = d[0]
    if tag == "lit":
        return Lit(bytes.fromhex(d[1]))
    if tag == "bytes":
        return ByteSet(tuple((int(a), int(b)) for a, b in d[1]))
    if tag == "seq":
        return Seq(tuple(_node_from_data(x) for x in d[1]))
    if tag == "choice":
        return Choice(tuple(_node_from_data(x) for x in d[1]))
    if tag == "repeat":
        return Repeat(_node_from_data(d[1]), int(d[2]), None if d[3] is None else int(d[3]))
    if tag == "ref":
        return Ref(str(d[1]))
    if tag == "special":
        return Special(str(d[1]))
    if tag == "inter":
        return Inter(tuple(_node_from_data(x) for x in d[1]))
    if tag == "diff":
        return Diff(_node_from_data(d[1]), _node_from_data(d[2]))
    if tag == "dfa":
        return Dfa(tuple(tuple((int(a), int(b), int(t)) for a, b, t in es) for es in d[1]),
                   tuple(int(a) for a in d[2]))
    raise GrammarError(f"unknown IR tag {tag!r}")


def to_data(g: Grammar) -> dict:
    """Plain JSON-serializable form of ``g``."""
    return {"start": g.start, "max_depth": g.max_depth,
            "rules": [[name, _node_to_data(node)] for name, node in g.rules]}


def from_data(d: dict) -> Grammar:
    return Grammar(d["start"], tuple((n, _node_from_data(x)) for n, x in d["rules"]),
                   int(d.get("max_depth", DEFAULT_MAX_DEPTH)))
