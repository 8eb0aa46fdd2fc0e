"""Versioned binary artifact of a compiled grammar (build time -> run time).

Only the DFA back-end (:class:`~decoding.backends.dfa.index.DFAGrammar`) has a finite set of
states whose masks can all be computed ahead of time; a grammar of another back-end
(``cg.backend != "dfa"``) raises :class:`~decoding.errors.ArtifactError`.

Layout (all integers little-endian)::

    0   8   magic  b"\\x89GDA\\r\\n\\x1a\\n"
    8   4   u32    format version (FORMAT_VERSION)
    12  4   u32    header length H (UTF-8 JSON)
    16  8   u64    body length B (bytes 0..B; the checksum follows)
    24  H   header JSON: key, tokenizer fingerprint, front-end options, depth bound, sizes,
            and the offset/dtype/shape of every section
    ... sections, each 64-byte aligned: DFA (byte_class, trans dense or CSR, accepting),
            token index (state -> mask id; masks dense, or as sorted token-id lists of the
            allowed or of the disallowed tokens, whichever is smallest), and the budget
            table (:class:`~decoding.backends.dfa.index.BudgetTable`: sections
            ``min_tokens`` and ``worst_successor``)
    B   32  sha256 of bytes 0..B

Invariants
- :func:`read_artifact` checks size, magic, version and checksum *before* trusting any
  byte, then the whole header structure (:func:`check_header`: every field's type, the
  required fields and sections, each section's dtype, rank and shape, its size against
  its byte count, its offset aligned, after the header, inside the body and apart from
  the others); :func:`load_artifact` then checks every value range (sizes, states, mask
  ids, token ids sorted and in range, padding bits clear, budgets) and the tokenizer
  fingerprint.  Any failure raises :class:`~decoding.errors.ArtifactError` naming the
  file, the header field or section, and the reason.  A loaded artifact therefore yields
  exactly the masks that were written, or nothing.
- Artifacts are trusted build outputs: the checksum catches accidents, not a crafted
  file.  With a crafted (checksum recomputed) file the loader still raises only
  ``ArtifactError``, reads nothing outside the file's buffer, runs in time linear in the
  file, and allocates the file plus at most the expanded transition table of at most
  ``limits.max_dfa_states`` states x (256 + :data:`MAX_SPECIALS`) columns; the grammar it
  returns is internally consistent but may accept anything.
- Loading reads the file in one go; dense sections are zero-copy views of that buffer;
  sparse masks are expanded on first use into a bounded LRU (``mask_cache`` masks).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from decoding.backends.automaton import DFA, state_dtype
from decoding.backends.contract import CompiledGrammar
from decoding.backends.dfa.index import BudgetTable, DFAGrammar
from decoding.errors import ArtifactError, LimitError
from decoding.limits import DEFAULT_LIMITS, Limits
from decoding.vocab import Vocab

__all__ = ["FORMAT_VERSION", "MAGIC", "ARTIFACT_SUFFIX", "ArtifactData", "artifact_bytes", "write_artifact",
           "read_artifact", "load_artifact", "check_header", "DEFAULT_MASK_CACHE", "MAX_SPECIALS"]

FORMAT_VERSION = 1
MAGIC = b"\x89GDA\r\n\x1a\n"
ARTIFACT_SUFFIX = ".gdc"
DEFAULT_MASK_CACHE = 32
_PRE = struct.Struct("<8sIIQ")
_ALIGN = 64
_SUM = 32
_DENSE, _POS, _NEG = 0, 1, 2
_GENERATOR = "guarded-decoding"
#: special-symbol columns an artifact's automaton may have (the writer refuses more)
MAX_SPECIALS = 256
#: every section: (dtype string, rank); ``mask_ids`` has the header's ``index.id_dtype``
_SECTIONS = {
    "byte_class": ("<u2", 1), "accepting": ("|u1", 1), "state_mask": ("<i4", 1),
    "trans": ("<i4", 2), "trans_ptr": ("<u4", 1), "trans_col": ("<u2", 1), "trans_next": ("<i4", 1),
    "mask_kind": ("|u1", 1), "mask_start": ("<u4", 1), "mask_end": ("<u4", 1),
    "dense_masks": ("<u4", 2), "mask_ids": ("", 1),
    "min_tokens": ("<i4", 1), "worst_successor": ("<i4", 1),
}
_ALWAYS = ("byte_class", "accepting", "state_mask", "mask_kind", "mask_start", "mask_end",
           "dense_masks", "mask_ids")
_TRANS_FORMS = {"dense": ("trans",), "csr": ("trans_ptr", "trans_col", "trans_next")}
_ID_DTYPES = ("<u2", "<u4")
#: no count in a header is this large (JSON has unbounded integers; numpy does not)
_MAX_COUNT = 1 << 48


@dataclass(frozen=True)
class ArtifactData:
    """A verified artifact: its header and its sections (read-only arrays)."""
    header: dict
    arrays: dict
    size: int
    path: str


# ----------------------------------------------------------------------------- writing

def _encode_masks(cg: DFAGrammar) -> tuple[dict, dict]:
    n_tokens, n_words = cg.vocab.n_tokens, cg.n_words
    id_dtype = np.dtype("<u2") if n_tokens <= 1 << 16 else np.dtype("<u4")
    kinds, starts, ends, dense, ids = [], [], [], [], []
    n_ids = 0
    masks = cg.masks
    for mid in range(len(masks)):
        m = np.asarray(masks[mid], dtype=np.uint32)
        bits = np.unpackbits(m.view(np.uint8), bitorder="little")[:n_tokens]
        on = np.flatnonzero(bits)
        dense_cost, pos_cost, neg_cost = 4 * n_words, id_dtype.itemsize * len(on), id_dtype.itemsize * (n_tokens - len(on))
        if dense_cost <= min(pos_cost, neg_cost):
            kinds.append(_DENSE)
            starts.append(len(dense))
            ends.append(len(dense) + 1)
            dense.append(m)
            continue
        sel = on if pos_cost <= neg_cost else np.flatnonzero(bits == 0)
        kinds.append(_POS if pos_cost <= neg_cost else _NEG)
        starts.append(n_ids)
        n_ids += len(sel)
        ends.append(n_ids)
        ids.append(sel.astype(id_dtype))
    arrays = {
        "mask_kind": np.array(kinds, dtype="<u1"),
        "mask_start": np.array(starts, dtype="<u4"),
        "mask_end": np.array(ends, dtype="<u4"),
        "dense_masks": (np.stack(dense) if dense else np.zeros((0, n_words), dtype=np.uint32)).astype("<u4"),
        "mask_ids": np.concatenate(ids) if ids else np.zeros(0, dtype=id_dtype),
    }
    info = {"n_masks": len(kinds), "n_dense": len(dense), "n_sparse": len(kinds) - len(dense),
            "id_dtype": id_dtype.str}
    return arrays, info


def _encode_trans(trans: np.ndarray) -> tuple[dict, str]:
    t = np.ascontiguousarray(trans, dtype="<i4")
    rows, cols = np.nonzero(t >= 0)
    csr_bytes = 4 * (t.shape[0] + 1) + 2 * len(rows) + 4 * len(rows)
    if csr_bytes >= t.nbytes:
        return {"trans": t}, "dense"
    ptr = np.zeros(t.shape[0] + 1, dtype="<u4")
    np.cumsum(np.bincount(rows, minlength=t.shape[0]), out=ptr[1:])
    return {"trans_ptr": ptr, "trans_col": cols.astype("<u2"), "trans_next": t[rows, cols].astype("<i4")}, "csr"


def artifact_bytes(cg: CompiledGrammar, *, name: str = "", kind: str = "", options: dict | None = None,
                   source: dict | None = None, budget: bool = True) -> bytes:
    """Serialize ``cg`` (its masks are computed first if needed).  ``source`` (name, kind,
    text, options) is stored for ``gbnf``/validation; ``budget`` stores the budget tables."""
    if cg.backend == "lazy":  # (its automaton made explicit and minimal: a DFA back-end grammar)
        try:
            cg = cast(Any, cg).to_dfa_grammar()
        except LimitError as e:
            raise ArtifactError(f"cannot write an artifact for this lazy grammar: {e}") from None
    if cg.backend != "dfa":
        raise ArtifactError(f"cannot write an artifact for a {cg.backend} grammar: only the DFA back-end "
                            "has a finite set of states to precompute (pushdown grammars, too large for "
                            "one explicit automaton, are compiled at run time); compile with "
                            "backend='dfa' and a smaller grammar to precompile")
    if not cg.grammar_key:
        raise ArtifactError("cannot write an artifact for a grammar without a grammar key "
                            "(compile it through decoding.compiler.Compiler or decoding.ir.key)")
    cg = cast(DFAGrammar, cg)
    if len(cg.dfa.specials) > MAX_SPECIALS:
        raise ArtifactError(f"cannot write an artifact for an automaton with {len(cg.dfa.specials)} special "
                            f"symbols: the format holds at most MAX_SPECIALS={MAX_SPECIALS}")
    cg.precompute()
    d = cg.dfa
    arrays: dict[str, np.ndarray] = {"byte_class": np.ascontiguousarray(d.byte_class, dtype="<u2"),
                                     "accepting": np.ascontiguousarray(d.accepting, dtype="<u1"),
                                     "state_mask": np.ascontiguousarray(cg.state_masks(), dtype="<i4")}
    tr, trans_form = _encode_trans(d.trans)
    arrays.update(tr)
    marr, minfo = _encode_masks(cg)
    arrays.update(marr)
    if budget:
        bt = cg.budget_table()
        arrays["min_tokens"] = np.ascontiguousarray(bt.min_tokens, dtype="<i4")
        arrays["worst_successor"] = np.ascontiguousarray(bt.worst_successor, dtype="<i4")
    meta = dict(cg.meta)
    header = {
        "format_version": FORMAT_VERSION,
        "generator": _GENERATOR,
        "grammar_key": cg.grammar_key,
        "grammar_digest": meta.pop("grammar_digest", ""),
        "name": name,
        "kind": kind,
        "options": options or {},
        "max_depth": meta.pop("max_depth", None),
        "meta": meta,
        "source": source or {},
        "vocab": {"fingerprint": cg.vocab.fingerprint, "name": cg.vocab.name,
                  "n_tokens": cg.vocab.n_tokens, "n_words": cg.n_words},
        "dfa": {"n_states": d.n_states, "n_classes": d.n_classes, "specials": list(d.specials),
                "special_token_ids": [int(t) for t in cg.special_token_ids], "trans": trans_form,
                "width": int(d.trans.shape[1])},
        "index": minfo,
        "sections": {},
    }
    # Offsets depend on the header length, which depends on the offsets: iterate to a fixpoint.
    hlen = 0
    for _ in range(8):
        off = _align(_PRE.size + hlen)
        secs = {}
        for key, a in arrays.items():
            secs[key] = {"dtype": a.dtype.str, "shape": list(a.shape), "offset": off, "nbytes": int(a.nbytes)}
            off = _align(off + a.nbytes)
        header["sections"] = secs
        try:
            hb = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"cannot write an artifact: its header (meta, options, source) is not "
                                f"plain JSON data: {e}") from None
        if len(hb) == hlen:
            break
        hlen = len(hb)
    else:  # pragma: no cover - the header length converges in two rounds
        raise ArtifactError("artifact header did not converge")
    body_len = off
    buf = bytearray(body_len + _SUM)
    _PRE.pack_into(buf, 0, MAGIC, FORMAT_VERSION, hlen, body_len)
    buf[_PRE.size:_PRE.size + hlen] = hb
    for key, a in arrays.items():
        o = secs[key]["offset"]
        buf[o:o + a.nbytes] = a.tobytes()
    buf[body_len:] = hashlib.sha256(memoryview(buf)[:body_len]).digest()
    return bytes(buf)


def write_artifact(cg: CompiledGrammar, path: str | os.PathLike, **kw: Any) -> int:
    """Write the artifact of ``cg`` to ``path`` atomically; returns its size in bytes."""
    data = artifact_bytes(cg, **kw)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(data)


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


# ----------------------------------------------------------------------------- reading

def _fail(where: str, reason: str) -> ArtifactError:
    return ArtifactError(f"{where}: {reason}")


def _prelude(buf: bytes | memoryview, where: str) -> tuple[int, int, int]:
    if len(buf) < _PRE.size:
        raise _fail(where, f"truncated artifact ({len(buf)} bytes, shorter than the {_PRE.size}-byte prelude)")
    magic, version, hlen, body_len = _PRE.unpack_from(buf, 0)
    if magic != MAGIC:
        raise _fail(where, "not a guarded-decoding artifact (bad magic bytes)")
    if version != FORMAT_VERSION:
        raise _fail(where, f"artifact format version {version}, but this build reads version "
                           f"{FORMAT_VERSION}; recompile it (python -m decoding compile ...)")
    return version, hlen, body_len


def _is_int(x: Any) -> bool:
    return type(x) is int


def check_header(h: Any, where: str, *, data_start: int, body_len: int) -> None:
    """Check the whole structure of a parsed artifact header before any field is used.

    Every field the reader or the CLI uses has its JSON type; counts are integers in
    ``[0, 2**48)``; ``format_version`` matches; the sections are exactly known names, the
    required ones present (the automaton's, the token index's, the transitions of the
    stored ``dfa.trans`` form, and the budget pair or neither), each with its dtype and
    rank, a shape whose size times the item size is its ``nbytes``, and a 64-byte
    aligned offset at or after ``data_start`` with its bytes inside ``body_len`` and
    overlapping no other section.  Raises :class:`ArtifactError` naming ``where`` and the
    field (``header.vocab.fingerprint``, ``header.sections.trans.shape``...)."""

    def bad(field: str, reason: str) -> ArtifactError:
        return _fail(where, f"malformed artifact header: {field} {reason}")

    def obj(parent: Any, key: str, field: str) -> dict:
        v = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(v, dict):
            raise bad(field, "is missing" if v is None else f"must be an object, not {_jtype(v)}")
        return v

    def get(parent: dict, key: str, field: str, kind: str) -> Any:
        if key not in parent:
            raise bad(field, "is missing")
        v = parent[key]
        ok = {"str": isinstance(v, str), "count": _is_int(v) and 0 <= v < _MAX_COUNT,
              "list": isinstance(v, list), "object": isinstance(v, dict),
              "count|null": v is None or (_is_int(v) and 0 <= v < _MAX_COUNT)}[kind]
        if not ok:
            what = {"count": "a non-negative integer below 2**48", "count|null": "null or a count",
                    "object": "an object", "list": "an array", "str": "a string"}[kind]
            raise bad(field, f"must be {what}, not {_jtype(v, short=False)}")
        return v

    if not isinstance(h, dict):
        raise bad("header", f"must be an object, not {_jtype(h)}")
    if get(h, "format_version", "header.format_version", "count") != FORMAT_VERSION:
        raise bad("header.format_version", f"is {h['format_version']}, not {FORMAT_VERSION} as in the prelude")
    key = get(h, "grammar_key", "header.grammar_key", "str")
    if not key:
        raise bad("header.grammar_key", "is empty")
    for k in ("generator", "grammar_digest", "name", "kind"):
        if k in h:
            get(h, k, f"header.{k}", "str")
    for k in ("options", "meta", "source"):
        if k in h:
            get(h, k, f"header.{k}", "object")
    if "max_depth" in h:
        get(h, "max_depth", "header.max_depth", "count|null")
    src = h.get("source") or {}
    for k in ("text", "kind", "name"):
        if k in src:
            get(src, k, f"header.source.{k}", "str")
    if src.get("options") is not None:
        get(src, "options", "header.source.options", "object")

    v = obj(h, "vocab", "header.vocab")
    fp = get(v, "fingerprint", "header.vocab.fingerprint", "str")
    if not fp:
        raise bad("header.vocab.fingerprint", "is empty")
    if "name" in v:
        get(v, "name", "header.vocab.name", "str")
    for k in ("n_tokens", "n_words"):
        get(v, k, f"header.vocab.{k}", "count")

    d = obj(h, "dfa", "header.dfa")
    for k in ("n_states", "n_classes", "width"):
        get(d, k, f"header.dfa.{k}", "count")
    specials = get(d, "specials", "header.dfa.specials", "list")
    if len(specials) > MAX_SPECIALS or not all(isinstance(x, str) for x in specials):
        raise bad("header.dfa.specials", f"must be at most {MAX_SPECIALS} strings")
    sids = get(d, "special_token_ids", "header.dfa.special_token_ids", "list")
    if len(sids) > MAX_SPECIALS or not all(_is_int(x) and 0 <= x < _MAX_COUNT for x in sids):
        raise bad("header.dfa.special_token_ids", f"must be at most {MAX_SPECIALS} token ids")
    form = get(d, "trans", "header.dfa.trans", "str")
    if form not in _TRANS_FORMS:
        raise bad("header.dfa.trans", f"must be 'dense' or 'csr', not {form!r}"[:200])

    x = obj(h, "index", "header.index")
    for k in ("n_masks", "n_dense", "n_sparse"):
        get(x, k, f"header.index.{k}", "count")
    id_dtype = get(x, "id_dtype", "header.index.id_dtype", "str")
    if id_dtype not in _ID_DTYPES:
        raise bad("header.index.id_dtype", f"must be one of {', '.join(_ID_DTYPES)}, not {id_dtype!r}"[:200])

    secs = obj(h, "sections", "header.sections")
    spans = []
    for name, sec in secs.items():
        field = f"header.sections.{name}"
        if name not in _SECTIONS:
            raise bad(field[:200], "is not a section of this format")
        if not isinstance(sec, dict):
            raise bad(field, f"must be an object, not {_jtype(sec)}")
        want, rank = _SECTIONS[name]
        dt = get(sec, "dtype", f"{field}.dtype", "str")
        if dt != (want or id_dtype):
            raise bad(f"{field}.dtype", f"must be {want or id_dtype!r}, not {dt!r}"[:200])
        shape = get(sec, "shape", f"{field}.shape", "list")
        if len(shape) != rank or not all(_is_int(n) and 0 <= n < _MAX_COUNT for n in shape):
            raise bad(f"{field}.shape", f"must be {rank} non-negative integer(s) below 2**48")
        off = get(sec, "offset", f"{field}.offset", "count")
        nb = get(sec, "nbytes", f"{field}.nbytes", "count")
        size = 1
        for n in shape:
            size *= n
        if size * np.dtype(dt).itemsize != nb:
            raise bad(f"{field}.nbytes", f"is {nb}, but shape {shape} of {dt} holds "
                                         f"{size * np.dtype(dt).itemsize} bytes")
        if off % _ALIGN or off < data_start or off + nb > body_len:
            raise bad(f"{field}.offset", f"{off} (+{nb} bytes) is not a {_ALIGN}-byte aligned offset "
                                         f"between the header end {data_start} and the body end {body_len}")
        spans.append((off, off + nb, name))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise bad(f"header.sections.{b}.offset", f"overlaps section {a!r}")
    need = _ALWAYS + _TRANS_FORMS[form]
    for name in need:
        if name not in secs:
            raise bad(f"header.sections.{name}", f"is missing (required with dfa.trans={form!r})")
    for name in _TRANS_FORMS["csr" if form == "dense" else "dense"]:
        if name in secs:
            raise bad(f"header.sections.{name}", f"does not belong to dfa.trans={form!r}")
    if ("min_tokens" in secs) != ("worst_successor" in secs):
        raise bad("header.sections", "must hold both budget sections (min_tokens, worst_successor) or neither")


def _jtype(v: Any, short: bool = True) -> str:
    """The JSON type name of a parsed value (for messages)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean" if not short else "boolean"
    t = {int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(type(v), type(v).__name__)
    if not short and isinstance(v, (int, float)) and not isinstance(v, bool):
        r = repr(v)
        return f"{t} {r if len(r) <= 40 else r[:37] + '...'}"
    return t if short else f"{'an' if t[0] in 'aeiou' else 'a'} {t}"


def read_artifact(source: str | os.PathLike | bytes) -> ArtifactData:
    """Read and fully verify an artifact (a path, or its bytes) in one go."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf, where = bytes(source), "<artifact bytes>"
    else:
        where = os.fspath(source)
        try:
            with open(source, "rb") as fh:
                buf = fh.read()
        except OSError as e:
            raise _fail(where, f"cannot read artifact: {e.strerror or e}") from None
    _, hlen, body_len = _prelude(buf, where)
    if len(buf) != body_len + _SUM:
        what = "truncated" if len(buf) < body_len + _SUM else "has trailing bytes"
        raise _fail(where, f"artifact {what} or its length field is corrupt ({len(buf)} bytes, "
                           f"the prelude says {body_len + _SUM})")
    mv = memoryview(buf)
    if hashlib.sha256(mv[:body_len]).digest() != buf[body_len:]:
        raise _fail(where, "corrupt artifact (sha256 checksum mismatch)")
    if _PRE.size + hlen > body_len:
        raise _fail(where, "corrupt artifact (header longer than the body)")
    try:
        header = json.loads(mv[_PRE.size:_PRE.size + hlen].tobytes())
    except (ValueError, RecursionError):    # not UTF-8 / not JSON / nested too deeply
        raise _fail(where, "corrupt artifact header (not a JSON object)") from None
    check_header(header, where, data_start=_PRE.size + hlen, body_len=body_len)
    arrays: dict[str, np.ndarray] = {}
    for key, s in header["sections"].items():
        dtype, shape, off, nb = np.dtype(s["dtype"]), tuple(s["shape"]), s["offset"], s["nbytes"]
        a = np.frombuffer(buf, dtype=dtype, count=nb // dtype.itemsize, offset=off).reshape(shape)
        if not dtype.isnative:
            a = a.astype(dtype.newbyteorder("="))
            a.setflags(write=False)
        arrays[key] = a
    return ArtifactData(header, arrays, len(buf), where)


class _StoredMasks:
    """The distinct masks of an artifact, indexed by mask id.

    Dense masks are zero-copy views of the artifact buffer; sparse ones (sorted ids of the
    allowed, or of the disallowed, tokens) are expanded on first use and kept in an LRU of
    at most ``capacity`` masks.  Returned arrays are read-only and stay valid after eviction.
    """

    __slots__ = ("kind", "start", "end", "dense", "ids", "n_tokens", "n_words", "capacity", "_lru", "_lock")

    def __init__(self, a: dict, n_tokens: int, n_words: int, capacity: int) -> None:
        self.kind, self.start, self.end = a["mask_kind"], a["mask_start"], a["mask_end"]
        self.dense, self.ids = a["dense_masks"], a["mask_ids"]
        self.n_tokens, self.n_words = n_tokens, n_words
        self.capacity = max(1, int(capacity))
        self._lru: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.kind)

    def __getitem__(self, mid: Any) -> np.ndarray:
        mid = int(mid)
        k = self.kind[mid]
        if k == _DENSE:
            return self.dense[self.start[mid]]
        with self._lock:
            m = self._lru.get(mid)
            if m is not None:
                self._lru.move_to_end(mid)
                return m
        sel = self.ids[self.start[mid]:self.end[mid]]
        bits = np.zeros(self.n_words * 32, dtype=np.uint8)
        if k == _POS:
            bits[sel] = 1
        else:
            bits[:self.n_tokens] = 1
            bits[sel] = 0
        m = np.packbits(bits, bitorder="little").view("<u4").astype(np.uint32, copy=False)
        m.setflags(write=False)
        with self._lock:
            self._lru[mid] = m
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)
        return m

    def expanded_bytes(self) -> int:
        return sum(m.nbytes for m in self._lru.values())


def _validate(data: ArtifactData, limits: Limits) -> None:
    """Value-range checks that make a checksummed artifact safe to use (the header's
    structure was checked by :func:`check_header` when it was read)."""
    h, a, where = data.header, data.arrays, data.path
    d = h["dfa"]
    n, C, width = d["n_states"], d["n_classes"], d["width"]
    specials, sids = d["specials"], d["special_token_ids"]
    n_tokens, n_words = h["vocab"]["n_tokens"], h["vocab"]["n_words"]
    form = d["trans"]
    nm = h["index"]["n_masks"]

    def check(ok: bool, reason: str) -> None:
        if not ok:
            raise _fail(where, f"inconsistent artifact: {reason}")

    if n > limits.max_dfa_states:
        raise _fail(where, f"the automaton has {n} states (header.dfa.n_states), more than "
                           f"max_dfa_states={limits.max_dfa_states} (decoding.limits); load it with "
                           "limits raised if it is a trusted build output")
    check(n >= 1 and 1 <= C <= 256 and width == C + len(specials) == len(sids) + C, "automaton sizes")
    check(n_words == (n_tokens + 31) // 32 and all(0 <= t < n_tokens for t in sids), "vocabulary sizes")
    bc = a["byte_class"]
    check(bc.shape == (256,) and int(bc.max()) < C, "byte classes")
    check(a["accepting"].shape == (n,) and int(a["accepting"].max(initial=0)) <= 1, "accepting flags")
    sm = a["state_mask"]
    check(sm.shape == (n,) and int(sm.min()) >= 0 and int(sm.max()) < nm, "state -> mask ids")
    kind, st, en, dense, ids = a["mask_kind"], a["mask_start"], a["mask_end"], a["dense_masks"], a["mask_ids"]
    check(kind.shape == st.shape == en.shape == (nm,) and int(kind.max(initial=0)) <= _NEG, "mask table")
    check(dense.ndim == 2 and dense.shape[1] == n_words, "dense mask width")
    isd = kind == _DENSE
    check(bool(np.all(st[isd] < dense.shape[0])) and bool(np.all(en[isd] == st[isd] + 1)), "dense mask rows")
    sp = ~isd
    check(bool(np.all(st[sp] <= en[sp])) and bool(np.all(en[sp] <= len(ids))), "sparse mask ranges")
    if len(ids):
        check(int(ids.max()) < n_tokens, "token id out of range")
        inc = np.diff(ids.astype(np.int64)) > 0
        starts = st[sp][(st[sp] > 0) & (st[sp] < en[sp])].astype(np.int64)
        inc[starts[starts <= len(inc)] - 1] = True  # segment boundaries need not increase
        check(bool(inc.all()), "sparse token ids not strictly increasing")
    if n_tokens % 32 and dense.shape[0]:
        check(not np.any(dense[:, -1] >> np.uint32(n_tokens % 32)), "padding bits set")
    if form == "dense":
        t = a["trans"]
        check(t.shape == (n, width), "transition table shape")
    else:
        ptr, col, nxt = a["trans_ptr"], a["trans_col"], a["trans_next"]
        check(ptr.shape == (n + 1,) and int(ptr[0]) == 0 and int(ptr[-1]) == len(col) == len(nxt)
              and bool(np.all(np.diff(ptr.astype(np.int64)) >= 0)), "sparse transition rows")
        check(len(col) == 0 or int(col.max()) < width, "sparse transition columns")
        t = nxt
    check(t.size == 0 or (int(t.min()) >= -1 and int(t.max()) < n), "transition to a missing state")
    for key in ("min_tokens", "worst_successor"):
        if key in a:
            check(a[key].shape == (n,) and int(a[key].min()) >= 0, f"{key} table shape or values")


def load_artifact(source: str | os.PathLike | bytes | ArtifactData, vocab: Vocab, *,
                  expect_key: str | None = None, mask_cache: int = DEFAULT_MASK_CACHE,
                  limits: Limits | None = None) -> CompiledGrammar:
    """A ready compiled grammar (DFA back-end) from an artifact, for ``vocab`` (no recompilation).

    Raises :class:`ArtifactError` if the artifact is corrupt, truncated, malformed, of
    another format version, for another tokenizer, or (with ``expect_key``) for another
    grammar, or if its automaton has more than ``limits.max_dfa_states`` states (default
    :data:`decoding.limits.DEFAULT_LIMITS`)."""
    data = source if isinstance(source, ArtifactData) else read_artifact(source)
    h, a, where = data.header, data.arrays, data.path
    _validate(data, DEFAULT_LIMITS if limits is None else limits)
    fp = h["vocab"]["fingerprint"]
    if fp != vocab.fingerprint:
        raise _fail(where, f"built for tokenizer {h['vocab'].get('name') or '?'} (fingerprint {fp}), "
                           f"not for {vocab.name or 'this tokenizer'} (fingerprint {vocab.fingerprint}); "
                           "recompile it for this model")
    if h["vocab"]["n_tokens"] != vocab.n_tokens:  # the fingerprint implies it; a crafted header need not
        raise _fail(where, f"built for {h['vocab']['n_tokens']} tokens (header.vocab.n_tokens), "
                           f"the vocabulary has {vocab.n_tokens}")
    if expect_key is not None and h.get("grammar_key") != expect_key:
        raise _fail(where, f"holds grammar {h.get('grammar_key')}, expected {expect_key}")
    d = h["dfa"]
    n, width = int(d["n_states"]), int(d["width"])
    if d["trans"] == "dense":
        trans = a["trans"]
    else:
        ptr = a["trans_ptr"].astype(np.intp)
        rows = np.repeat(np.arange(n, dtype=np.intp), np.diff(ptr))
        trans = np.full((n, width), -1, dtype=state_dtype(n))
        trans[rows, a["trans_col"].astype(np.intp)] = a["trans_next"]
        trans.setflags(write=False)
    dfa = DFA(a["byte_class"], trans, a["accepting"].view(np.bool_), tuple(d["specials"]), int(d["n_classes"]))
    meta = dict(h.get("meta") or {})
    meta.update(name=h.get("name", ""), kind=h.get("kind", ""), options=h.get("options", {}),
                max_depth=h.get("max_depth"), grammar_digest=h.get("grammar_digest", ""),
                artifact=where, artifact_bytes=data.size)
    budget = BudgetTable(a["min_tokens"], a["worst_successor"]) if "min_tokens" in a else None
    masks = _StoredMasks(a, vocab.n_tokens, vocab.n_words, mask_cache)
    return DFAGrammar.from_precomputed(dfa, vocab, tuple(d["special_token_ids"]), a["state_mask"], masks,
                                       grammar_key=h["grammar_key"], meta=meta, budget=budget)
