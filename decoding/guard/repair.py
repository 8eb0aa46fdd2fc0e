"""Minimal, deterministic repair of an extracted XML or JSON fragment.

Repair is only attempted on an invalid fragment, and its result is re-validated: if
it is still invalid the repair is refused (``Repair.ok`` False, ``refused`` says why).
A valid fragment is returned unchanged, so repair never turns one valid document into
a different one.  Every edit is reported as a :class:`Change` whose position is an
offset in the source text.

XML edits (and nothing else)
- ``drop-prose``: text before the prolog/element and after it is not part of the result.
- ``escape``: ``&`` that starts no entity/character reference -> ``&amp;``; ``<`` that
  starts no markup -> ``&lt;``; ``]]>`` in text -> ``]]&gt;``.
- ``close-tag``: an open element is closed, only if it is declared in the DTD:
  * an element declared ``EMPTY`` or ``(#PCDATA)`` is closed before the first child
    start tag inside it (after its last non-space text);
  * an end tag that names an open ancestor closes the open elements above it;
  * at the end of the text, all open elements are closed innermost first.
- ``drop-partial``: markup cut off by the end of the text (``<act``, ``<!-- ...``) is
  dropped; ``drop-prose`` also drops non-space text at the end of an element that
  allows no text.
- ``add-declaration``: ``<?xml version="1.0" encoding="UTF-8"?>`` is prepended when
  ``add_declaration=True`` and there is none.
An end tag that names no open element (wrong nesting) is not repaired.

JSON edits (and nothing else)
- ``drop-prose`` as above; ``remove-comma``: a trailing comma before ``}``/``]``;
- at the end of truncated text: ``close-string`` (an unterminated string value is
  closed; a cut escape at its end is dropped), ``drop-partial`` (a cut number or
  literal, a key without a value, a dangling comma), ``close-bracket``.

Bounds: a fragment with a ``size-limit`` or ``nesting-limit`` violation is not repaired
(``refused`` quotes the violation), and a repair that needs more than
:data:`MAX_CHANGES` edits is refused, so repair costs time linear in the text and memory
a small multiple of it.
"""

from __future__ import annotations

import json
from array import array

from decoding.frontends.xml.model import DTD
from decoding.guard.extract import (_EOF, _NAME_RUN, _NAME_START_ASCII, _NUM, _json_string_end,
                                    _c_gate, _markup_end, _number_ok, _skip_ws, _start_tag,
                                    _strict_end)
from decoding.guard.results import Change, Fragment, Repair
from decoding.guard.validate import dtd_checker, validate_json, validate_xml
from decoding.limits import Limits

__all__ = ["repair_xml", "repair_json", "XML_DECLARATION", "MAX_CHANGES"]

XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>'
#: edits one repair may make; a fragment that needs more is refused (not "minimal")
MAX_CHANGES = 1000
_LIMIT_CODES = frozenset(("size-limit", "nesting-limit"))


def _over_limit(errors) -> str | None:
    """Why a fragment with a limit violation is not repaired, else None."""
    for v in errors:
        if v.code in _LIMIT_CODES:
            return f"not repaired: {v.message}"
    return None


_TOO_MANY = f"more than {MAX_CHANGES} edits would be needed (MAX_CHANGES): not a minimal repair"


def _prose_changes(source: str, start: int, end: int) -> list[Change]:
    out = []
    if source[:start].strip():
        out.append(Change("drop-prose", 0, f"dropped {start} characters before the document"))
    if source[end:].strip():
        out.append(Change("drop-prose", end,
                          f"dropped {len(source) - end} characters after the document"))
    return out


def _escape_text(text: str, base: int, entities, changes: list[Change]) -> str:
    """Escape stray ``&`` and ``]]>`` in a text run (``<`` never occurs in a run).

    Linear: the next ``;`` and ``&`` are found once per position, and a reference is
    only read when no ``&`` comes before its ``;``.  Stops early (result unused) once
    ``changes`` exceeds MAX_CHANGES."""
    if "&" not in text and "]]>" not in text:
        return text
    out = []
    i = 0
    n = len(text)
    semi = amp = -2       # the next ';' / '&' after the current '&' (-1: none)
    while i < n:
        c = text[i]
        if c == "&":
            if len(changes) > MAX_CHANGES:
                return ""
            if semi != -1 and semi <= i:
                semi = text.find(";", i + 1)
            if amp != -1 and amp <= i:
                amp = text.find("&", i + 1)
            ref = text[i + 1:semi] if semi > 0 and not 0 <= amp < semi else ""
            ok = False
            if ref.startswith("#x"):
                ok = len(ref) > 2 and all(ch in "0123456789abcdefABCDEF" for ch in ref[2:])
            elif ref.startswith("#"):
                ok = len(ref) > 1 and ref[1:].isdigit()
            elif ref:
                ok = ref in entities
            if ok:
                out.append(text[i:semi + 1])
                i = semi + 1
                continue
            out.append("&amp;")
            changes.append(Change("escape", base + i, "escaped '&' as &amp;"))
            i += 1
            continue
        if c == "]" and text.startswith("]]>", i):
            out.append("]]&gt;")
            changes.append(Change("escape", base + i, "escaped ']]>' as ]]&gt;"))
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _rstrip_pos(pieces: list[str]) -> int:
    """Index in ``pieces`` after which only whitespace pieces/suffixes follow (split there)."""
    k = len(pieces)
    while k > 0 and not pieces[k - 1].strip():
        k -= 1
    if k > 0:
        last = pieces[k - 1]
        stripped = last.rstrip()
        if len(stripped) != len(last):
            pieces[k - 1:k] = [stripped, last[len(stripped):]]
    return k


def repair_xml(source: str, fragment: Fragment, dtd: DTD, *, root: str | None = None,
               add_declaration: bool = False, errors=None, limits: Limits | None = None) -> Repair:
    """Repair ``fragment`` (found in ``source``) against ``dtd``; see module docstring.

    ``errors``: the fragment's violations when already known (saves one validation).
    ``limits``: for the validations (default :data:`decoding.limits.DEFAULT_LIMITS`).
    """
    checker = dtd_checker(dtd)
    changes = _prose_changes(source, fragment.prolog_start, fragment.end)
    s = source
    n = fragment.end
    base = fragment.prolog_start
    if errors is None:
        errors = validate_xml(fragment.document, dtd, root=root, base=base, source=source,
                              limits=limits)
    over = _over_limit(errors)
    if over is not None:
        return Repair(False, None, tuple(changes), over, tuple(errors))
    if not errors:
        text = fragment.document
        if add_declaration and not text.startswith("<?xml"):
            text = XML_DECLARATION + text
            changes.append(Change("add-declaration", base, "added " + XML_DECLARATION))
        return Repair(True, text, tuple(changes))
    pieces: list[str] = []
    stack: list[str] = []
    refused: str | None = None
    markup_end = [0]          # len(pieces) after the last markup piece

    def markup(piece: str) -> None:
        pieces.append(piece)
        markup_end[0] = len(pieces)

    def decl(name: str):
        return checker.dtd.element(name)

    def close(name: str, at: int, before_space: bool) -> bool:
        nonlocal refused
        if decl(name) is None:
            refused = f"cannot close <{name}>: it is not declared in the DTD"
            return False
        if before_space:
            k = _rstrip_pos(pieces)
            pieces.insert(k, f"</{name}>")
            markup_end[0] = max(markup_end[0] + 1, k + 1)
        else:
            markup(f"</{name}>")
        changes.append(Change("close-tag", at, f"added </{name}>"))
        return True

    text_only_names = checker.text_only

    def text_only(name: str) -> bool:
        return name in text_only_names

    pos = base
    may_escape = s.find("&", base, n) >= 0 or s.find("]]>", base, n) >= 0
    while pos < n and refused is None:
        if len(changes) > MAX_CHANGES:
            refused = _TOO_MANY
            break
        lt = s.find("<", pos, n)
        if lt < 0:
            lt = n
        elif not may_escape and lt + 1 < n:
            # fast paths, same result as the general code below: a plain end tag of the
            # innermost element, or a plain start tag outside text-only elements; the text
            # before the tag and the tag become one piece (no edit splits them later:
            # pieces are only split or cut after their last non-space character or after
            # the last markup piece, and a tag ends both)
            c = s[lt + 1]
            if c == "/":
                if stack:
                    top = stack[-1]         # a non-empty name
                    j = lt + 2 + len(top)
                    if j < n and s[j] == ">" and s.startswith(top, lt + 2):
                        stack.pop()
                        pieces.append(s[pos:j + 1])
                        markup_end[0] = len(pieces)
                        pos = j + 1
                        continue
            elif c in _NAME_START_ASCII or c > "\x7f":
                j = _NAME_RUN(s, lt + 1, n).end()
                if j < n and s[j] == ">" and not (stack and stack[-1] in text_only_names):
                    pieces.append(s[pos:j + 1])
                    markup_end[0] = len(pieces)
                    stack.append(s[lt + 1:j])
                    pos = j + 1
                    continue
        if lt > pos:
            seg = s[pos:lt]
            pieces.append(_escape_text(seg, pos, checker.entities, changes) if may_escape else seg)
            pos = lt
        if pos >= n:
            break
        c = s[lt + 1] if lt + 1 < n else ""
        if c == "":
            changes.append(Change("drop-partial", lt, "dropped '<' cut off at the end"))
            pos = n
            break
        if c == "/":
            j = _NAME_RUN(s, lt + 2, n).end()       # _read_name(s, lt + 2, n), inlined
            k = j if j < n and s[j] == ">" else _skip_ws(s, j, n)
            if k >= n:
                changes.append(Change("drop-partial", lt, f"dropped cut end tag {s[lt:n]!r}"))
                pos = n
                break
            if s[k] != ">" or j == lt + 2:
                pieces.append("&lt;")
                changes.append(Change("escape", lt, "escaped '<' as &lt;"))
                pos = lt + 1
                continue
            name = s[lt + 2:j]
            if stack and stack[-1] == name:     # common case: closes the innermost element
                stack.pop()
                pieces.append(s[lt:k + 1])
                markup_end[0] = len(pieces)
                pos = k + 1
                continue
            if name not in stack:
                refused = f"end tag </{name}> at offset {lt} matches no open element (wrong nesting)"
                break
            while stack[-1] != name:
                inner = stack.pop()
                if not close(inner, lt, text_only(inner)):
                    break
            if refused:
                break
            stack.pop()
            pieces.append(s[lt:k + 1])          # markup(), inlined
            markup_end[0] = len(pieces)
            pos = k + 1
            continue
        if c in "!?":
            if s.startswith("<!DOCTYPE", lt) and not stack:
                from decoding.guard.extract import _doctype_end
                e = _doctype_end(s, lt, n)
            else:
                e, _ = _markup_end(s, lt, n)
            if e == _EOF:
                changes.append(Change("drop-partial", lt, "dropped markup cut off at the end"))
                pos = n
                break
            if e < 0:
                pieces.append("&lt;")
                changes.append(Change("escape", lt, "escaped '<' as &lt;"))
                pos = lt + 1
                continue
            markup(s[lt:e])
            pos = e
            continue
        if c in _NAME_START_ASCII or c > "\x7f":      # is_name_start(c), inlined
            j = _NAME_RUN(s, lt + 1, n).end()
            if j < n and s[j] == ">":       # _start_tag's common case, inlined
                e, name, empty = j + 1, s[lt + 1:j], False
            else:
                e, name, empty = _start_tag(s, lt, n)
            if e == _EOF:
                changes.append(Change("drop-partial", lt, "dropped start tag cut off at the end"))
                pos = n
                break
            if e < 0:
                pieces.append("&lt;")
                changes.append(Change("escape", lt, "escaped '<' as &lt;"))
                pos = lt + 1
                continue
            while stack and stack[-1] in text_only_names:
                if not close(stack.pop(), lt, True):
                    break
            if refused:
                break
            pieces.append(s[lt:e])              # markup(), inlined
            markup_end[0] = len(pieces)
            if not empty:
                stack.append(name)
            pos = e
            continue
        pieces.append("&lt;")
        changes.append(Change("escape", lt, "escaped '<' as &lt;"))
        pos = lt + 1
    if refused is None and stack:
        d = decl(stack[-1])
        if d is not None and d.content in ("CHILDREN", "EMPTY"):
            tail = "".join(pieces[markup_end[0]:])
            if tail.strip():
                del pieces[markup_end[0]:]
                changes.append(Change("drop-prose", n - len(tail),
                                      f"dropped text {tail.strip()[:40]!r} at the end of <{d.name}>"))
        while stack:
            if not close(stack.pop(), n, False):
                break
    if refused is None and len(changes) > MAX_CHANGES:
        refused = _TOO_MANY
    if refused is not None:
        return Repair(False, None, tuple(changes), refused, tuple(errors))
    text = "".join(pieces)
    if add_declaration and not text.startswith("<?xml"):
        text = XML_DECLARATION + text
        changes.append(Change("add-declaration", base, "added " + XML_DECLARATION))
    after = validate_xml(text, dtd, root=root, limits=limits)
    if after:
        return Repair(False, None, tuple(changes),
                      "still invalid after repair: " + "; ".join(v.message for v in after[:3]),
                      tuple(errors))
    return Repair(True, text, tuple(changes), None, tuple(errors))


# ---------------------------------------------------------------- JSON

class _Tokens:
    """The token list of :func:`repair_json` as parallel arrays (kinds, starts, ends): a
    few bytes per token instead of a tuple and two ints."""

    __slots__ = ("kinds", "starts", "ends")

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.starts = array("q")
        self.ends = array("q")

    def append(self, t: tuple[str, int, int]) -> None:
        self.kinds.append(t[0])
        self.starts.append(t[1])
        self.ends.append(t[2])

    def pop(self) -> tuple[str, int, int]:
        return self.kinds.pop(), self.starts.pop(), self.ends.pop()

    def __len__(self) -> int:
        return len(self.kinds)

    def __getitem__(self, k: int) -> tuple[str, int, int]:
        return self.kinds[k], self.starts[k], self.ends[k]

    def __setitem__(self, k: int, t: tuple[str, int, int]) -> None:
        self.kinds[k], self.starts[k], self.ends[k] = t

    def __iter__(self):
        return zip(self.kinds, self.starts, self.ends)


def repair_json(source: str, fragment: Fragment, schema: dict, *, errors=None,
                limits: Limits | None = None) -> Repair:
    """Repair the JSON ``fragment`` (found in ``source``); see module docstring.

    ``errors``: the fragment's violations when already known (saves one validation).
    ``limits``: for the validations (default :data:`decoding.limits.DEFAULT_LIMITS`).
    """
    changes = _prose_changes(source, fragment.start, fragment.end)
    if errors is None:
        _, errors = validate_json(fragment.text, schema, base=fragment.start, source=source,
                                  limits=limits)
    over = _over_limit(errors)
    if over is not None:
        return Repair(False, None, tuple(changes), over, tuple(errors))
    if not errors:
        return Repair(True, fragment.text, tuple(changes))
    s = source
    n = fragment.end
    # tokens: (kind, start, end) with kind in '{}[]:,' or 's' (string), 'k' (key),
    # 'v' (number/literal)
    out = _Tokens()
    stack: list[str] = []
    expect_key = False
    j = fragment.start
    gate = _c_gate(n)       # the C parser's accelerator state (extract._strict_end)
    while True:
        j = _skip_ws(s, j, n)
        if j >= n:
            break
        c = s[j]
        if c in "{[" and stack:
            # a complete nested value tokenizes to itself: keep it as one token
            e = _strict_end(s, j, gate)
            if 0 <= e <= n:
                out.append(("v", j, e))
                expect_key = False
                j = e
                continue
        if c in "{[":
            stack.append("}" if c == "{" else "]")
            out.append((c, j, j + 1))
            expect_key = c == "{"
            j += 1
        elif c in "}]":
            if out and out[-1][0] == ",":
                _, cs, _ = out.pop()
                changes.append(Change("remove-comma", cs, "removed trailing comma"))
                if len(changes) > MAX_CHANGES:
                    return Repair(False, None, tuple(changes), _TOO_MANY, tuple(errors))
            if not stack or stack[-1] != c:
                return Repair(False, None, tuple(changes), f"unbalanced {c!r} at offset {j}",
                              tuple(errors))
            stack.pop()
            out.append((c, j, j + 1))
            expect_key = False
            j += 1
        elif c == ":":
            out.append((":", j, j + 1))
            expect_key = False
            j += 1
        elif c == ",":
            out.append((",", j, j + 1))
            expect_key = bool(stack) and stack[-1] == "}"
            j += 1
        elif c == '"':
            e = _json_string_end(s, j, n)
            kind = "k" if expect_key else "s"
            if e == _EOF:
                out.append((kind + "!", j, n))
                break
            out.append((kind, j, e))
            j = e
        else:
            k = j
            while k < n and (s[k] in _NUM or s[k].isalpha()):
                k += 1
            tok = s[j:k]
            complete = tok in ("true", "false", "null") or _number_ok(tok)
            if k >= n and not complete:
                out.append(("v!", j, k))
                break
            if not complete:
                return Repair(False, None, tuple(changes), f"bad token {tok!r} at offset {j}",
                              tuple(errors))
            out.append(("v", j, k))
            j = k
    tail_fix: list[str] = []
    if stack:
        last = out[-1][0] if out else ""
        if last == "s!":
            _, ss, se = out[-1]
            body = s[ss:se]
            cut = len(body)
            bs = body.rfind("\\")
            if bs >= 0 and (cut - bs <= 1 or (body[bs + 1] == "u" and cut - bs < 6)):
                nb = bs
                while nb > 0 and body[nb - 1] == "\\":
                    nb -= 1
                if (bs - nb) % 2 == 0:
                    cut = bs
                    changes.append(Change("drop-partial", ss + bs, "dropped a cut escape"))
            out[-1] = ("s", ss, ss + cut)
            tail_fix.append('"')
            changes.append(Change("close-string", n, "closed the unterminated string"))
        elif last in ("k!", "v!"):
            _, ts, _ = out.pop()
            changes.append(Change("drop-partial", ts, f"dropped cut {s[ts:n]!r}"))
        while out and out[-1][0] in (":", ",", "k", "k!"):
            kind, ts, te = out.pop()
            if kind == ":" and out and out[-1][0] == "k":
                _, ks, _ = out.pop()
                changes.append(Change("drop-partial", ks, f"dropped key {s[ks:te]!r} without value"))
            else:
                changes.append(Change("drop-partial", ts, f"dropped dangling {s[ts:te]!r}"))
    # the tokens with the gaps between them, where a gap keeps only its whitespace (a
    # gap is only whitespace unless a token was removed from it); runs of tokens with
    # whitespace gaps are copied as one slice
    parts: list[str] = []
    run = prev_end = -1
    for kind, ts, te in out:
        if prev_end < 0:
            run = ts
        else:
            gap = s[prev_end:ts]
            if gap.strip():
                parts.append(s[run:prev_end])
                parts.append("".join(ch for ch in gap if ch in " \t\r\n"))
                run = ts
        prev_end = te
    if prev_end >= 0:
        parts.append(s[run:prev_end])
    parts.extend(tail_fix)
    for closer in reversed(stack):
        parts.append(closer)
        changes.append(Change("close-bracket", n, f"added {closer!r}"))
    text = "".join(parts)
    _, after = validate_json(text, schema, limits=limits)
    if after:
        return Repair(False, None, tuple(changes),
                      "still invalid after repair: " + "; ".join(v.message for v in after[:3]),
                      tuple(errors))
    return Repair(True, text, tuple(changes), None, tuple(errors))
