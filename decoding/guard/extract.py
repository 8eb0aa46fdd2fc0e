"""Find XML elements and JSON values inside mixed model output with state machines.

Both extractors are hand-written state machines that jump with ``str.find`` between
the characters that can change state, so a 2 KB document costs a few hundred steps.
The only pattern is ``_NAME_RUN``, which reads one XML Name (or nothing): names are
those of :mod:`decoding.text.xml_name`, the definition the DTD front-end compiles, so
the guard accepts exactly the names a grammar can produce.

XML (``extract_xml``)
- A *candidate* starts at ``<`` followed by a name-start character.  Its start tag must
  lex (name, ``name="value"`` attributes with ``>`` allowed inside quotes, ``>`` or
  ``/>``), else the ``<`` is prose.  From there the machine tracks the open-element
  stack through comments, CDATA sections, processing instructions, text and tags.
- Complete: the stack empties.  An end tag naming a deeper open element closes the
  ones above it (noted); an end tag naming no open element is ignored (noted); a
  ``<`` that starts no markup is text (noted).
- Incomplete: the text ends while the stack is non-empty (the start tag itself done).
- Result: the first complete candidate (named ``root`` when given); when there is none,
  the first incomplete candidate (``complete=False``), else None.  An unclosed
  candidate that contains complete elements yields its first complete descendant
  (named ``root`` when given) as the complete answer, so a tag quoted in prose
  ("use the <request> tag: <request>...</request>") does not hide the document.
- An XML declaration, DOCTYPE (with internal subset), comments and PIs directly before
  the element (only whitespace between) form its prolog (``Fragment.prolog_start``).

JSON (``extract_json``)
- A candidate starts at ``{`` or ``[`` and is lexed as JSON (strings with escapes and
  braces inside, numbers, literals).  Trailing commas are tolerated and noted.  A
  lexical error rejects the candidate; the end of text inside it makes it incomplete.
- Result: the first candidate that is not rejected (complete or not).
"""

from __future__ import annotations

import json

from decoding.guard.results import Fragment, line_col
from decoding.text.xml_name import NAME_RUN, is_name_char, is_name_start

__all__ = ["extract_xml", "extract_json", "is_name_start", "is_name_char"]


_WS = " \t\r\n"


_NAME_START_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")


# One XML Name at i, or nothing (``.end() == i``): callers check only the ASCII part of
# ``is_name_start`` before it (``_NAME_START_ASCII`` or any non-ASCII character), and a
# non-ASCII character that cannot start a Name reads as an empty name, so the tag does
# not lex.  Only names are matched by a pattern; the machines below stay hand-written.
_NAME_RUN = NAME_RUN.match


def _read_name(s: str, i: int, n: int) -> int:
    """End of the XML Name at i (i itself if none starts there), at most n."""
    return _NAME_RUN(s, i, n).end()


def _skip_ws(s: str, i: int, n: int) -> int:
    while i < n and s[i] in _WS:
        i += 1
    return i


_EOF = -1      # the text ended inside the construct
_BAD = -2      # the construct does not lex


def _start_tag(s: str, i: int, n: int) -> tuple[int, str, bool]:
    """Lex a start tag at ``s[i] == '<'``; return (end, name, self_closing) or (_EOF|_BAD, ...)."""
    j = _NAME_RUN(s, i + 1, n).end()
    name = s[i + 1:j]
    if j < n and s[j] == ">":           # common case: no attributes, no space
        return j + 1, name, False
    while True:
        k = _skip_ws(s, j, n)
        if k >= n:
            return _EOF, name, False
        c = s[k]
        if c == ">":
            return k + 1, name, False
        if c == "/":
            if k + 1 >= n:
                return _EOF, name, False
            return (k + 2, name, True) if s[k + 1] == ">" else (_BAD, name, False)
        if k == j or not is_name_start(c):      # attributes need whitespace before them
            return _BAD, name, False
        j = _read_name(s, k, n)
        j = _skip_ws(s, j, n)
        if j >= n:
            return _EOF, name, False
        if s[j] != "=":
            return _BAD, name, False
        j = _skip_ws(s, j + 1, n)
        if j >= n:
            return _EOF, name, False
        q = s[j]
        if q != '"' and q != "'":
            return _BAD, name, False
        e = s.find(q, j + 1)
        if e < 0:
            return _EOF, name, False
        if "<" in s[j + 1:e]:
            return _BAD, name, False
        j = e + 1


def _doctype_end(s: str, i: int, n: int) -> int:
    """End of ``<!DOCTYPE ...>`` at i (internal subset and quotes respected) or _EOF."""
    j = i + 9
    depth = 0
    while j < n:
        c = s[j]
        if c == '"' or c == "'":
            e = s.find(c, j + 1)
            if e < 0:
                return _EOF
            j = e + 1
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == ">" and depth <= 0:
            return j + 1
        elif c == "<" and depth > 0 and s.startswith("<!--", j):
            e = s.find("-->", j + 4)
            if e < 0:
                return _EOF
            j = e + 3
            continue
        j += 1
    return _EOF


def _markup_end(s: str, i: int, n: int) -> tuple[int, str]:
    """For ``<!--``, ``<![CDATA[`` or ``<?`` at i: (end, kind) or (_EOF, kind); else (_BAD, '')."""
    if s.startswith("<!--", i):
        e = s.find("-->", i + 4)
        return (e + 3 if e >= 0 else _EOF), "comment"
    if s.startswith("<![CDATA[", i):
        e = s.find("]]>", i + 9)
        return (e + 3 if e >= 0 else _EOF), "cdata"
    if s.startswith("<?", i):
        e = s.find("?>", i + 2)
        return (e + 2 if e >= 0 else _EOF), "pi"
    return _BAD, ""


def _scan_element(s: str, i: int, n: int, want: str | None, notes: list[str]):
    """Run the element machine from the start tag at i.

    Returns None (start tag does not lex or is cut), ``(end, True, None)`` when the
    element closes, or ``(n, False, inner)`` when the text ends inside it, where
    ``inner`` is ``(start, end)`` of its first properly closed descendant named
    ``want`` (any name when ``want`` is None), or None.
    """
    end, name, empty = _start_tag(s, i, n)
    if end < 0:
        return None
    if empty:
        return end, True, None
    stack = [(name, i)]
    inner: tuple[int, int] | None = None
    pos = end
    while True:
        lt = s.find("<", pos)
        if lt < 0 or lt + 1 >= n:
            if lt >= 0:
                notes.append(f"{lt}: text ends inside markup")
            return n, False, inner
        c = s[lt + 1]
        if c == "/":
            oname, ostart = stack[-1]
            k = lt + 2 + len(oname)
            if k < n and s[k] == ">" and s.startswith(oname, lt + 2):
                # common case, same as below: '</' + the innermost open name + '>'
                stack.pop()
                pos = k + 1
                if not stack:
                    return pos, True, None
                if (want is None or oname == want) and (inner is None or ostart < inner[0]):
                    inner = (ostart, pos)
                continue
            j = _NAME_RUN(s, lt + 2, n).end()       # _read_name(s, lt + 2, n), inlined
            k = j if j < n and s[j] == ">" else _skip_ws(s, j, n)
            if k >= n:
                return n, False, inner
            if s[k] != ">" or j == lt + 2:
                notes.append(f"{lt}: '<' that starts no markup")
                pos = lt + 1
                continue
            ename = s[lt + 2:j]
            pos = k + 1
            if ename == stack[-1][0]:
                oname, ostart = stack.pop()
                if not stack:
                    return pos, True, None
                if (want is None or oname == want) and (inner is None or ostart < inner[0]):
                    inner = (ostart, pos)
                continue
            depth = len(stack) - 1
            while depth >= 0 and stack[depth][0] != ename:
                depth -= 1
            if depth < 0:
                notes.append(f"{lt}: end tag </{ename}> matches no open element")
                continue
            notes.append(f"{lt}: end tag </{ename}> closes unclosed <{stack[-1][0]}>")
            del stack[depth:]
            if not stack:
                return pos, True, None
            continue
        if c == "!" or c == "?":
            e, kind = _markup_end(s, lt, n)
            if e == _EOF:
                return n, False, inner
            if e == _BAD:
                notes.append(f"{lt}: '<!' that starts no markup")
                pos = lt + 1
                continue
            pos = e
            continue
        if c in _NAME_START_ASCII or c > "\x7f":      # is_name_start(c), inlined
            j = _NAME_RUN(s, lt + 1, n).end()
            if j < n and s[j] == ">":       # _start_tag's common case, inlined
                e, cname, cempty = j + 1, s[lt + 1:j], False
            else:
                e, cname, cempty = _start_tag(s, lt, n)
            if e == _EOF:
                return n, False, inner
            if e == _BAD:
                notes.append(f"{lt}: '<' that starts no markup")
                pos = lt + 1
                continue
            pos = e
            if cempty:
                if (want is None or cname == want) and inner is None:
                    inner = (lt, e)
            else:
                stack.append((cname, lt))
            continue
        notes.append(f"{lt}: '<' that starts no markup")
        pos = lt + 1


def _fragment(kind: str, s: str, start: int, end: int, complete: bool, name: str,
              prolog_start: int, notes: list[str]) -> Fragment:
    line, col = line_col(s, start)
    located = []
    for note in notes:
        off, _, what = note.partition(": ")
        ln, cl = line_col(s, int(off))
        located.append(f"{ln}:{cl}: {what}")
    return Fragment(kind, s[start:end], start, end, line, col, complete, name,
                    prolog_start, s[prolog_start:end], tuple(located))


def _xml_name_at(s: str, i: int, n: int) -> str:
    return s[i + 1:_read_name(s, i + 1, n)]


def extract_xml(text: str, *, all: bool = False, root: str | None = None):
    """First complete XML element in ``text`` (or all of them with ``all=True``).

    ``root``: only elements with this name count.  Returns a :class:`Fragment`
    or None (``all=True``: a list, possibly empty).  See the module docstring for
    the exact rules, including incomplete results.
    """
    s = text
    n = len(s)
    found: list[Fragment] = []
    first_open: Fragment | None = None
    pos = 0
    prolog: int | None = None
    skip_until = -1
    while True:
        lt = s.find("<", pos)
        if lt < 0 or lt + 1 >= n:
            break
        if prolog is not None and s[pos:lt].strip(_WS):
            prolog = None
        c = s[lt + 1]
        if c == "?" or c == "!":
            if s.startswith("<!DOCTYPE", lt):
                e = _doctype_end(s, lt, n)
            else:
                e, _ = _markup_end(s, lt, n)
            if e == _EOF:
                break
            if e == _BAD:
                prolog = None
                pos = lt + 1
                continue
            if prolog is None:
                prolog = lt
            pos = e
            continue
        if (not is_name_start(c) or lt < skip_until
                or (root is not None and _xml_name_at(s, lt, n) != root)):
            prolog = None
            pos = lt + 1
            continue
        notes: list[str] = []
        r = _scan_element(s, lt, n, root, notes)
        if r is None:
            prolog = None
            pos = lt + 1
            continue
        end, complete, inner = r
        name = _xml_name_at(s, lt, n)
        if complete:
            found.append(_fragment("xml", s, lt, end, True, name,
                                   lt if prolog is None else prolog, notes))
            if not all:
                return found[0]
            pos = end
            prolog = None
            continue
        if first_open is None:
            first_open = _fragment("xml", s, lt, n, False, name,
                                   lt if prolog is None else prolog, notes)
        if inner is None:
            break
        # rescan from here treating '<' before the inner element as prose, so the
        # inner element gets its own prolog and notes
        skip_until = inner[0]
        prolog = None
        pos = lt + 1
    if all:
        if first_open is not None and (not found or first_open.start >= found[-1].end):
            found.append(first_open)
        return found
    return first_open


# ---------------------------------------------------------------- JSON

_NUM = frozenset("+-0123456789.eE")
_DECODER = json.JSONDecoder()


def _no_constant(name: str):
    # control flow only: every STRICT_DECODER.raw_decode caller catches ValueError
    # (like json.JSONDecodeError), so this never leaves the guard
    raise ValueError(f"{name} is not JSON")


# Accepts exactly the values the state machines below accept without a note (no NaN,
# Infinity, trailing commas, raw control characters or bad escapes in strings).
STRICT_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _json_string_end(s: str, i: int, n: int) -> int:
    """End (after the closing quote) of the string whose opening quote is at i, or _EOF."""
    j = i + 1
    while True:
        q = s.find('"', j)
        if q < 0:
            return _EOF
        b = q - 1
        while s[b] == "\\":
            b -= 1
        if (q - 1 - b) % 2 == 0:
            return q + 1
        j = q + 1


def _number_ok(tok: str) -> bool:
    """Strict JSON number grammar, hand-checked."""
    i, n = 0, len(tok)
    if i < n and tok[i] == "-":
        i += 1
    if i >= n or not tok[i].isdigit():
        return False
    if tok[i] == "0":
        i += 1
    else:
        while i < n and tok[i].isdigit():
            i += 1
    if i < n and tok[i] == ".":
        i += 1
        if i >= n or not tok[i].isdigit():
            return False
        while i < n and tok[i].isdigit():
            i += 1
    if i < n and tok[i] in "eE":
        i += 1
        if i < n and tok[i] in "+-":
            i += 1
        if i >= n or not tok[i].isdigit():
            return False
        while i < n and tok[i].isdigit():
            i += 1
    return i == n and tok[-1].isdigit()


def _scan_json(s: str, i: int, n: int, notes: list[str]) -> tuple[int, bool] | None:
    """Lex the JSON value starting with ``{``/``[`` at i.

    Returns ``(end, True)``, ``(n, False)`` when the text ends inside it, or None.
    States: 'v' value expected, 'k' key (or '}') expected, ':' colon expected,
    ',' comma or closer expected.
    """
    stack: list[str] = []
    state = "v"
    j = i
    while True:
        while j < n and s[j] in _WS:
            j += 1
        if j >= n:
            return n, False
        c = s[j]
        if state == "v":
            if stack and (c == "{" or c == "["):
                try:  # a complete nested value lexes the same in the C parser; skip it
                    _, e = STRICT_DECODER.raw_decode(s, j)
                except ValueError:
                    pass
                else:
                    if e <= n:
                        j = e
                        state = ","
                        continue
            if c == "{":
                stack.append("}")
                state = "k"
                j += 1
                continue
            if c == "[":
                stack.append("]")
                j += 1
                k = _skip_ws(s, j, n)
                if k < n and s[k] == "]":
                    stack.pop()
                    j = k + 1
                    if not stack:
                        return j, True
                    state = ","
                continue
            if not stack:
                return None
            if c == '"':
                e = _json_string_end(s, j, n)
                if e == _EOF:
                    return n, False
                j = e
            elif c in "-0123456789":
                k = j + 1
                while k < n and s[k] in _NUM:
                    k += 1
                if k >= n:
                    return n, False
                if not _number_ok(s[j:k]):
                    return None
                j = k
            elif c in "tfn":
                word = "true" if c == "t" else "false" if c == "f" else "null"
                if s.startswith(word, j):
                    j += len(word)
                elif word.startswith(s[j:]):
                    return n, False
                else:
                    return None
            elif c == "]" and stack[-1] == "]" and s[_back_ws(s, j - 1)] == ",":
                notes.append(f"{_back_ws(s, j - 1)}: trailing comma")
                stack.pop()
                j += 1
                if not stack:
                    return j, True
            else:
                return None
            state = ","
            continue
        if state == "k":
            if c == '"':
                e = _json_string_end(s, j, n)
                if e == _EOF:
                    return n, False
                j = e
                state = ":"
                continue
            if c == "}":
                if s[_back_ws(s, j - 1)] == ",":
                    notes.append(f"{_back_ws(s, j - 1)}: trailing comma")
                stack.pop()
                j += 1
                if not stack:
                    return j, True
                state = ","
                continue
            return None
        if state == ":":
            if c != ":":
                return None
            j += 1
            state = "v"
            continue
        # state ','
        if c == ",":
            j += 1
            state = "k" if stack[-1] == "}" else "v"
            continue
        if c == stack[-1]:
            stack.pop()
            j += 1
            if not stack:
                return j, True
            continue
        return None


def _back_ws(s: str, j: int) -> int:
    while j > 0 and s[j] in _WS:
        j -= 1
    return j


def extract_json(text: str, *, all: bool = False):
    """First JSON object/array in ``text`` (or all of them with ``all=True``).

    Returns a :class:`Fragment` (possibly ``complete=False`` when the text ends inside
    it) or None; with ``all=True`` a list of the non-overlapping candidates.
    """
    s = text
    n = len(s)
    found: list[Fragment] = []
    pos = 0
    while True:
        a = s.find("{", pos)
        b = s.find("[", pos)
        if a < 0 and b < 0:
            break
        i = b if a < 0 or (0 <= b < a) else a
        notes: list[str] = []
        try:  # fast path: a complete, strictly valid value (C parser); else the state machine
            _, fast_end = _DECODER.raw_decode(s, i)
            r = (fast_end, True)
        except ValueError:
            r = _scan_json(s, i, n, notes)
        if r is None:
            pos = i + 1
            continue
        end, complete = r
        found.append(_fragment("json", s, i, end, complete,
                               "object" if s[i] == "{" else "array", i, notes))
        if not all or not complete:
            break
        pos = end
    if all:
        return found
    return found[0] if found else None
