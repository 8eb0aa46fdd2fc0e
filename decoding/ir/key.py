"""Canonical grammar keys: equal grammars share one artifact and one cache entry.

The canonical form of a grammar is its IR (:func:`decoding.ir.to_data`) written as JSON
with sorted keys and no whitespace (:func:`canonical_text`).  Every front-end option that
changes the language (whitespace policy, depth bounds, DTD root, text patterns, ...) is
already in the IR, and everything that does not (JSON whitespace and keyword order, DTD and
GBNF whitespace and comments, parameter-entity indirection) is gone from it.  So:

- ``grammar_digest(g)`` identifies the language exactly (rule names included);
- ``grammar_key(g, fingerprint, version=...)`` adds the artifact format version, the
  tokenizer fingerprint and the index options: it names one artifact.

Note: the order of the members of a JSON Schema ``properties`` object *is* part of the
language (the compiler emits properties in that order), so reordering properties gives a
different key; reordering keywords does not.

``source_key`` is a cheap alias (whitespace-normalized source text + options) used only to
skip the front-end on repeated identical requests; it never decides equality of grammars.

This module knows nothing of the artifact format: callers pass its version in.
"""

from __future__ import annotations

import hashlib
import json
import sys
from json.encoder import encode_basestring as _encode_str  # json.dumps(str, ensure_ascii=False)
from typing import Any

from decoding.ir.nodes import (ByteSet, Choice, Diff, Grammar, Inter, Lit, Node, Ref, Repeat, Seq, _node_to_data,
                               plain_nodes,
                               to_data)
from decoding.ir.size import attached_nodes

__all__ = ["canonical_text", "canonical_ir_text", "grammar_digest", "grammar_key", "source_key", "DIGEST_FOLD_ABOVE"]


def canonical_text(obj: Any) -> str:
    """JSON text with sorted keys, no insignificant whitespace, non-ASCII kept as is."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: a subtree whose canonical text is longer than this is written into its parent's text as
#: ``["h","<sha256 of its text>"]`` by :func:`grammar_digest` (see there)
DIGEST_FOLD_ABOVE = 2048


def grammar_digest(grammar: Grammar) -> str:
    """sha256 of the canonical IR of ``grammar`` with long subtrees folded: the text of
    :func:`canonical_ir_text` in which every subtree whose own text is longer than
    :data:`DIGEST_FOLD_ABOVE` characters is replaced, in its parent's text, by
    ``["h","<sha256 hex of that text>"]`` (bottom-up: a folded child's parent folds the text
    with the child folded).  Equal grammars have equal digests; different ones different
    digests unless sha256 collides (a folded text names its subtree's text exactly).
    Linear in the IR's distinct nodes, whereas the unfolded text is linear in the IR
    *expanded* (shared subtrees written at every use: 2 MB for Snowplow's sp_0, 1 MB of it
    in its largest rule), so that is what it saves.  Grammars whose subtrees are all short
    (nearly every tool schema) get ``sha256(canonical_text(to_data(grammar)))``."""
    return _sha(_ir_text(grammar, DIGEST_FOLD_ABOVE, attached_nodes(grammar)))


def _dumps(x: Any) -> str:
    if type(x) is str:  # what json.dumps(x, ensure_ascii=False) returns for a str, without its set-up
        return _encode_str(x)
    if type(x) is int:  # (and for an int)
        return str(x)
    return json.dumps(x, ensure_ascii=False, separators=(",", ":"))


def canonical_ir_text(grammar: Grammar) -> str:
    """``canonical_text(to_data(grammar))``, built bottom-up with the text of every distinct
    node object made once (the IR is a DAG: JSON Schema refs and shared fragments make
    ``to_data`` expand the same subtree many times).  Iterative: no recursion limit."""
    return _ir_text(grammar, None)


def _fold(text: str) -> str:
    return '["h","' + _sha(text) + '"]'


def _ir_text(grammar: Grammar, fold_above: int | None, order: "list[list[Node]] | None" = None) -> str:
    """:func:`canonical_ir_text`, with every subtree text longer than ``fold_above`` (None:
    none) folded to :func:`_fold` of it in its parents' texts.  ``order``: lists of nodes
    (kept alive by the caller), each node after every child it has in that list: their
    texts are written first, in that order, without the walk's stack (see
    :func:`grammar_digest`); the text is the same."""
    plain = _plain_texts(fold_above)
    limit = sys.maxsize if fold_above is None else fold_above
    # (memo's keys stay valid: the grammar holds every node it names alive while this runs)
    memo: dict[int, str] = {}
    if order:
        _texts_in_order(order, memo, plain, limit)
    for _, root in grammar.rules:
        _walk_texts(root, memo, plain, limit)
    rules = ",".join(f"[{_dumps(name)},{memo[id(node)]}]" for name, node in grammar.rules)
    return f'{{"max_depth":{_dumps(grammar.max_depth)},"rules":[{rules}],"start":{_dumps(grammar.start)}}}'


def _walk_texts(root: Node, memo: dict[int, str], plain: dict[int, str], limit: int) -> str:
    """The text of ``root`` (see :func:`_ir_text`) into ``memo``, with those of the nodes
    below it (Refs not followed) that are not there yet.  Iterative: no recursion limit."""
    hit = memo.get(id(root))
    if hit is not None:
        return hit
    # a node, or ``(node,)`` once its children are pushed: then their texts are in memo
    # (each node is expanded once: the IR below a node, Refs not followed, cannot hold it)
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
                text = '["seq",[' + ",".join([memo[id(x)] for x in n.items]) + "]]"
            elif cls is Choice:
                text = '["choice",[' + ",".join([memo[id(x)] for x in n.items]) + "]]"
            elif cls is Repeat:  # (as _node_text writes it)
                text = f'["repeat",{memo[id(n.item)]},{_num(n.min)},{_num(n.max)}]'
            else:
                text = _node_text(n, memo)
            memo[id(n)] = _fold(text) if len(text) > limit else text
            continue
        i = id(n)
        if i in memo:
            continue
        text = plain.get(i)
        if text is not None:
            memo[i] = text
            continue
        if cls is Lit:
            text = '["lit","' + n.data.hex() + '"]'
        elif cls is Ref:
            text = '["ref",' + _dumps(n.name) + "]"
        else:
            kids = n.items if cls is Seq or cls is Choice or cls is Inter else \
                (n.item,) if cls is Repeat else (n.base, n.minus) if cls is Diff else ()
            if kids:  # their texts first, then this node's
                push((n,))
                for k in reversed(kids):
                    if id(k) not in memo:
                        push(k)
                continue
            text = _node_text(n, memo)
        memo[i] = _fold(text) if len(text) > limit else text
    return memo[id(root)]


def _texts_in_order(order: "list[list[Node]]", memo: dict[int, str], plain: dict[int, str], limit: int) -> None:
    """The texts of the nodes of ``order`` into ``memo`` (see :func:`_ir_text`): a Lit,
    Seq or Choice whose children's texts are known (in ``memo``, registered plain, or a
    Ref's) is written at once; any other node, or a child not known yet, by
    :func:`_walk_texts` (the same text, by the walk)."""
    for nodes in order:
        for n in nodes:
            i = id(n)
            if i in memo:
                continue
            cls = n.__class__
            if cls is Lit:
                text = '["lit","' + n.data.hex() + '"]'  # type: ignore[union-attr]
            elif cls is Seq or cls is Choice:
                parts = []
                put = parts.append
                for x in n.items:  # type: ignore[union-attr]
                    t = memo.get(id(x))
                    put(_child_text(x, memo, plain, limit) if t is None else t)
                text = ('["seq",[' if cls is Seq else '["choice",[') + ",".join(parts) + "]]"
            elif cls is Repeat:
                x = n.item  # type: ignore[union-attr]
                t = memo.get(id(x))
                if t is None:
                    t = _child_text(x, memo, plain, limit)
                text = f'["repeat",{t},{_num(n.min)},{_num(n.max)}]'  # type: ignore[union-attr]  # (as _node_text)
            else:
                _walk_texts(n, memo, plain, limit)
                continue
            memo[i] = _fold(text) if len(text) > limit else text


def _child_text(x: Node, memo: dict[int, str], plain: dict[int, str], limit: int) -> str:
    """The text of a child not in ``memo`` yet: a registered plain node's (then kept in
    ``memo``), else made by :func:`_walk_texts`."""
    t = plain.get(id(x))
    if t is None:
        return _walk_texts(x, memo, plain, limit)
    memo[id(x)] = t
    return t


def _num(x: object) -> str:
    """JSON text of a repetition bound (an int or None)."""
    return str(x) if type(x) is int else "null" if x is None else _dumps(x)


#: per fold threshold (None: unfolded, :func:`canonical_ir_text`), the text of each registered
#: plain node (:func:`decoding.ir.nodes.register_plain`, kept alive for the life of the
#: process) as :func:`_ir_text` writes it, by id
_PLAIN_TEXT: dict[int | None, dict[int, str]] = {}


def _plain_texts(fold_above: int | None) -> dict[int, str]:
    """The table of :data:`_PLAIN_TEXT` for ``fold_above``, first completed with the nodes
    registered since."""
    nodes = plain_nodes()
    out = _PLAIN_TEXT.setdefault(fold_above, {})
    if len(out) < len(nodes):
        limit = sys.maxsize if fold_above is None else fold_above
        for n in list(nodes):  # every node after its subtree's
            if id(n) not in out:
                text = _node_text(n, out)
                out[id(n)] = _fold(text) if len(text) > limit else text
    return out


def _node_text(n: Node, memo: dict[int, str]) -> str:
    """The canonical JSON text of ``_node_to_data(n)``; children's texts are in ``memo``."""
    if isinstance(n, Lit):
        return f'["lit","{n.data.hex()}"]'
    if isinstance(n, ByteSet):
        return '["bytes",[' + ",".join(f"[{a},{b}]" for a, b in n.ranges) + "]]"
    if isinstance(n, (Seq, Choice, Inter)):
        tag = "seq" if isinstance(n, Seq) else "choice" if isinstance(n, Choice) else "inter"
        return f'["{tag}",[' + ",".join(memo[id(x)] for x in n.items) + "]]"
    if isinstance(n, Repeat):
        return f'["repeat",{memo[id(n.item)]},{_num(n.min)},{_num(n.max)}]'
    if isinstance(n, Diff):
        return f'["diff",{memo[id(n.base)]},{memo[id(n.minus)]}]'
    return canonical_text(_node_to_data(n))  # Ref, Special, Dfa: leaves, as to_data writes them


def grammar_key(grammar: Grammar | str, fingerprint: str, *, version: int,
                index_options: dict | None = None) -> str:
    """Key of the artifact (format ``version``) of ``grammar`` (or of its digest) for the
    tokenizer ``fingerprint``."""
    digest = grammar if isinstance(grammar, str) else grammar_digest(grammar)
    if not index_options and type(version) is int and digest.isalnum() and fingerprint.isalnum():
        # (the same text canonical_text writes: keys sorted, no escape in a hex string)
        return _sha(f'{{"format":{version},"grammar":"{digest}","index":{{}},"vocab":"{fingerprint}"}}')[:40]
    return _sha(canonical_text({"format": version, "grammar": digest, "vocab": fingerprint,
                                "index": index_options or {}}))[:40]


def source_key(text: str, kind: str, options: dict, fingerprint: str, *, version: int) -> str:
    """Alias of one exact request (JSON sources are whitespace-normalized by the caller)."""
    return _sha(canonical_text({"format": version, "kind": kind, "text": text, "options": options,
                                "vocab": fingerprint}))
