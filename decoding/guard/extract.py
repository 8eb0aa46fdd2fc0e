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
- Result: the first candidate that is not rejected (complete or not).  The C parser
  (strict: no NaN/Infinity) only accelerates the machine; it never changes a result.

Cost (both extractors): linear time in ``len(text)`` and memory a small multiple of it, for
any text.  Candidates are memoized: a JSON candidate rejected at offset ``j`` also rejects
every bracket its machine opened and had not closed by ``j`` (from there each would lex
exactly the same tokens), and an XML candidate cut by the end of the text also decides
every element it left open (each would be cut too, with the same inner elements).  The
work of failed C parses is capped at a multiple of the text.  Each fragment keeps at most
:data:`MAX_NOTES` notes (then one note that counts the rest).
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_right

from decoding.guard.results import Fragment
from decoding.text.xml_name import NAME_RUN, is_name_char, is_name_start

__all__ = ["extract_xml", "extract_json", "is_name_start", "is_name_char", "MAX_NOTES"]

#: notes kept per fragment (then one note counting the rest), so notes stay O(1)
MAX_NOTES = 50


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


class _Notes(list):
    """Notes of one candidate as ``(offset, what)``: the first :data:`MAX_NOTES` are kept,
    the rest only counted (``dropped``, from offset ``first_dropped``)."""

    __slots__ = ("dropped", "first_dropped")

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0
        self.first_dropped = -1

    def add(self, offset: int, what: str) -> None:
        if len(self) < MAX_NOTES:
            self.append((offset, what))
            return
        if not self.dropped:
            self.first_dropped = offset
        self.dropped += 1


_INTERN_DEPTH = 32


class _Lines:
    """``line_col`` for offsets that mostly increase, in time linear in the distance
    travelled (a step back restarts from the top, so callers keep steps back rare)."""

    __slots__ = ("s", "off", "line", "bol")

    def __init__(self, s: str) -> None:
        self.s = s
        self.off, self.line, self.bol = 0, 1, 0

    def at(self, offset: int) -> tuple[int, int]:
        s = self.s
        offset = max(0, min(offset, len(s)))
        if offset < self.off:
            self.off, self.line, self.bol = 0, 1, 0
        k = s.count("\n", self.off, offset)
        if k:
            self.line += k
            self.bol = s.rfind("\n", self.off, offset) + 1
        self.off = offset
        return self.line, offset - self.bol + 1


def _scan_element(s: str, i: int, n: int, want: str | None, notes: _Notes,
                  memo: dict[int, tuple[int, int] | None] | None = None):
    """Run the element machine from the start tag at i.

    Returns None (start tag does not lex or is cut), ``(end, True, None)`` when the
    element closes, or ``(n, False, inner)`` when the text ends inside it, where
    ``inner`` is ``(start, end)`` of its first properly closed descendant named
    ``want`` (any name when ``want`` is None), or None.

    ``memo`` (a dict, or None): when the text ends inside the element, it receives
    ``start -> inner`` for every element still open, which is what this function returns
    for that start (see the module docstring).
    """
    end, name, empty = _start_tag(s, i, n)
    if end < 0:
        return None
    if empty:
        return end, True, None
    # the open elements: names[k] started at starts[k]; deeper than _INTERN_DEPTH, one
    # string object per distinct name (memory per open element stays a few bytes)
    names = [name]
    starts = array("q", (i,))
    interned: dict[str, str] = {}
    # name -> how many open elements have it: built at the first end tag that does not
    # close the innermost element, so an unmatched end tag costs O(1), not O(depth)
    opened: dict[str, int] | None = None
    done: list[tuple[int, int]] | None = [] if memo is not None else None
    inner: tuple[int, int] | None = None
    pos = end
    while True:
        lt = s.find("<", pos)
        if lt < 0 or lt + 1 >= n:
            if lt >= 0:
                notes.add(lt, "text ends inside markup")
            return _cut(starts, inner, done, memo, n)
        c = s[lt + 1]
        if c == "/":
            oname = names[-1]
            k = lt + 2 + len(oname)
            if k < n and s[k] == ">" and s.startswith(oname, lt + 2):
                # common case, same as below: '</' + the innermost open name + '>'
                names.pop()
                ostart = starts.pop()
                if opened is not None:
                    opened[oname] -= 1
                pos = k + 1
                if not names:
                    return pos, True, None
                if want is None or oname == want:
                    if inner is None or ostart < inner[0]:
                        inner = (ostart, pos)
                    if done is not None:
                        done.append((ostart, pos))
                continue
            j = _NAME_RUN(s, lt + 2, n).end()       # _read_name(s, lt + 2, n), inlined
            k = j if j < n and s[j] == ">" else _skip_ws(s, j, n)
            if k >= n:
                return _cut(starts, inner, done, memo, n)
            if s[k] != ">" or j == lt + 2:
                notes.add(lt, "'<' that starts no markup")
                pos = lt + 1
                continue
            ename = s[lt + 2:j]
            pos = k + 1
            if ename == names[-1]:
                oname = names.pop()
                ostart = starts.pop()
                if opened is not None:
                    opened[oname] -= 1
                if not names:
                    return pos, True, None
                if want is None or oname == want:
                    if inner is None or ostart < inner[0]:
                        inner = (ostart, pos)
                    if done is not None:
                        done.append((ostart, pos))
                continue
            if opened is None:
                opened = {}
                for oname in names:
                    opened[oname] = opened.get(oname, 0) + 1
            if not opened.get(ename):
                notes.add(lt, f"end tag </{ename}> matches no open element")
                continue
            depth = len(names) - 1
            while names[depth] != ename:        # found: the elements above it are closed
                depth -= 1
            notes.add(lt, f"end tag </{ename}> closes unclosed <{names[-1]}>")
            for oname in names[depth:]:
                opened[oname] -= 1
            del names[depth:]
            del starts[depth:]
            if not names:
                return pos, True, None
            continue
        if c == "!" or c == "?":
            e, kind = _markup_end(s, lt, n)
            if e == _EOF:
                return _cut(starts, inner, done, memo, n)
            if e == _BAD:
                notes.add(lt, "'<!' that starts no markup")
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
                return _cut(starts, inner, done, memo, n)
            if e == _BAD:
                notes.add(lt, "'<' that starts no markup")
                pos = lt + 1
                continue
            pos = e
            if cempty:
                if want is None or cname == want:
                    if inner is None:
                        inner = (lt, e)
                    if done is not None:
                        done.append((lt, e))
            else:
                if len(names) > _INTERN_DEPTH:
                    cname = interned.setdefault(cname, cname)
                names.append(cname)
                starts.append(lt)
                if opened is not None:
                    opened[cname] = opened.get(cname, 0) + 1
            continue
        notes.add(lt, "'<' that starts no markup")
        pos = lt + 1


def _cut(starts, inner, done, memo, n: int):
    """Result of a scan the end of the text cut, filling ``memo`` (see _scan_element):
    an element left open is cut too, and its inner element is the first closed element
    (by start) that started after it."""
    if memo is not None and done is not None:
        done.sort()
        firsts = [a for a, _ in done]
        for start in starts:
            k = bisect_right(firsts, start)
            memo[start] = done[k] if k < len(done) else None
    return n, False, inner


def _fragment(kind: str, s: str, start: int, end: int, complete: bool, name: str,
              prolog_start: int, notes: _Notes, lines: _Lines) -> Fragment:
    line, col = lines.at(start)
    located = []
    for off, what in notes:
        ln, cl = lines.at(off)
        located.append(f"{ln}:{cl}: {what}")
    if notes.dropped:
        ln, cl = lines.at(notes.first_dropped)
        located.append(f"{ln}:{cl}: {notes.dropped} more irregularities not listed")
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
    lines = _Lines(s)
    found: list[Fragment] = []
    first_open: Fragment | None = None
    memo: dict[int, tuple[int, int] | None] | None = {} if all else None
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
        notes = _Notes()
        if memo and lt in memo:         # decided by an earlier cut scan that left it open
            r = (n, False, memo[lt])
        else:
            r = _scan_element(s, lt, n, root, notes, memo)
        if r is None:
            prolog = None
            pos = lt + 1
            continue
        end, complete, inner = r
        name = _xml_name_at(s, lt, n)
        if complete:
            found.append(_fragment("xml", s, lt, end, True, name,
                                   lt if prolog is None else prolog, notes, lines))
            if not all:
                return found[0]
            pos = end
            prolog = None
            continue
        if first_open is None:
            first_open = _fragment("xml", s, lt, n, False, name,
                                   lt if prolog is None else prolog, notes, lines)
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


def _c_gate(n: int) -> list[int]:
    """Fresh state for :func:`_strict_end` over a text of ``n`` characters: the work
    failed C parses may still cost (then the C parser is not used again for this text)."""
    return [32 * n + 65536]


def _strict_end(s: str, j: int, gate: list[int]) -> int:
    """End of the strictly valid JSON value at j by the C parser, or -1.

    Only an accelerator of the machines (its success implies theirs, without notes), so
    it may decline at will.  A success costs the value it skips, which the machine never
    reads again; a failure at offset p costs ``p - j`` plus ``p`` again (JSONDecodeError
    counts the lines before p), charged to ``gate[0]``: once failures have cost 32x the
    text, the C parser is not tried again, so the total stays linear whatever the text
    (a truncated document fails once per bracket open at the cut: a few times)."""
    if gate[0] < 0:
        return -1
    try:
        return STRICT_DECODER.raw_decode(s, j)[1]
    except json.JSONDecodeError as e:
        gate[0] -= 2 * e.pos - j + 1
    except (ValueError, RecursionError):    # NaN, an int too long for int(), deep nesting
        gate[0] -= 2 * len(s) + 1
    return -1


def _scan_json(s: str, i: int, n: int, notes: _Notes, gate: list[int],
               dead: bytearray | None = None) -> tuple[int, bool] | None:
    """Lex the JSON value starting with ``{``/``[`` at i.

    Returns ``(end, True)``, ``(n, False)`` when the text ends inside it, or None.
    States: 'v' value expected, 'k' key (or '}') expected, ':' colon expected,
    ',' comma or closer expected.  On None, ``dead[k]`` is set for the start ``k`` of
    every bracket still open: lexed alone, each would meet the same error.
    """
    stack: list[str] = []
    starts = array("q")
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
                # a complete nested value lexes the same in the C parser: skip it
                e = _strict_end(s, j, gate)
                if e >= 0:
                    j = e
                    state = ","
                    continue
            if c == "{":
                stack.append("}")
                starts.append(j)
                state = "k"
                j += 1
                continue
            if c == "[":
                stack.append("]")
                starts.append(j)
                j += 1
                k = _skip_ws(s, j, n)
                if k < n and s[k] == "]":
                    stack.pop()
                    starts.pop()
                    j = k + 1
                    if not stack:
                        return j, True
                    state = ","
                continue
            if not stack:
                return _rejected(starts, dead)
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
                    return _rejected(starts, dead)
                j = k
            elif c in "tfn":
                word = "true" if c == "t" else "false" if c == "f" else "null"
                if s.startswith(word, j):
                    j += len(word)
                elif n - j < len(word) and word.startswith(s[j:n]):
                    return n, False
                else:
                    return _rejected(starts, dead)
            elif c == "]" and stack[-1] == "]" and s[_back_ws(s, j - 1)] == ",":
                notes.add(_back_ws(s, j - 1), "trailing comma")
                stack.pop()
                starts.pop()
                j += 1
                if not stack:
                    return j, True
            else:
                return _rejected(starts, dead)
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
                    notes.add(_back_ws(s, j - 1), "trailing comma")
                stack.pop()
                starts.pop()
                j += 1
                if not stack:
                    return j, True
                state = ","
                continue
            return _rejected(starts, dead)
        if state == ":":
            if c != ":":
                return _rejected(starts, dead)
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
            starts.pop()
            j += 1
            if not stack:
                return j, True
            continue
        return _rejected(starts, dead)


def _rejected(starts, dead: bytearray | None) -> None:
    if dead is not None:
        for k in starts:
            dead[k] = 1
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
    lines = _Lines(s)
    found: list[Fragment] = []
    gate = _c_gate(n)
    dead = bytearray(n)
    pos = 0
    a = b = -2      # the next '{' / '[' at or after pos (-1: none), each found once
    while True:
        if a != -1 and a < pos:
            a = s.find("{", pos)
        if b != -1 and b < pos:
            b = s.find("[", pos)
        if a < 0 and b < 0:
            break
        i = b if a < 0 or (0 <= b < a) else a
        if dead[i]:
            pos = i + 1
            continue
        notes = _Notes()
        # fast path: a complete, strictly valid value (C parser); else the state machine
        fast_end = _strict_end(s, i, gate)
        r = (fast_end, True) if fast_end >= 0 else _scan_json(s, i, n, notes, gate, dead)
        if r is None:
            pos = i + 1
            continue
        end, complete = r
        found.append(_fragment("json", s, i, end, complete,
                               "object" if s[i] == "{" else "array", i, notes, lines))
        if not all or not complete:
            break
        pos = end
    if all:
        return found
    return found[0] if found else None
