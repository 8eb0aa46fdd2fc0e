"""What one fuzz input does to one door, and how the outcome is classified.

``run_input(door, payload)`` runs one input against the installed package and returns an
:class:`Outcome`.  It is what the subprocess worker calls (``evals.fuzz.worker``) and what
the hypothesis tests call in-process (``tests/test_fuzz_doors.py``).

Outcomes (``Outcome.kind``)
- ``ok``: accepted, and where an oracle applies its verdict agrees (schema: random walks
  validate with ``jsonschema``; dtd: walks validate with lxml/libxml2; gbnf: llama.cpp
  parses the grammar and accepts the walks; artifact: the loaded grammar walks; guard: a
  result whose ``ok`` document validates with ``jsonschema``/lxml);
- ``located``: a :class:`~decoding.errors.DecodingError` naming a place: a
  ``SchemaError``-like ``.pointer`` that resolves in the schema (schema door), a ``.line``
  inside the text or a ``.rule`` (dtd, gbnf), an ``ArtifactError`` naming the artifact
  (artifact door).  The guard has no located errors: it must return a result;
- ``unlocated``: a ``DecodingError`` without a usable place;
- ``crash``: any other exception (the guard: any exception at all);
- ``invalid``: accepted, but an output (or the accepted input itself) is wrong by the oracle;
- ``hang`` is decided by the worker's parent (timeout), never here.

``Outcome.signature`` groups findings: exception type + innermost frame inside ``decoding/``
for exceptions, the oracle's reason for invalid outputs.  ``phase(name)`` callbacks tell the
worker which part runs (``door``, ``walk``, ``oracle``): a hang or a native crash during
``oracle`` is the oracle's fault and is counted as ``oracle_skipped``, not against the door.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from decoding.errors import ArtifactError, DecodingError, LimitError, UsageError

__all__ = ["DOORS", "Outcome", "run_input", "tiny_vocab", "resolve_pointer", "signature_of",
           "GRAMMARS_DIR", "GUARD_DTDS", "GUARD_SCHEMAS", "ARTIFACT_LABEL"]

DOORS = ("schema", "dtd", "gbnf", "artifact", "guard")
ROOT = Path(__file__).resolve().parents[2]
GRAMMARS_DIR = ROOT / "grammars"
#: the guard's grammars: DTD file -> root element, schema files
GUARD_DTDS = {"user_query.dtd": "request", "soap_execute_command.dtd": "soap:Envelope",
              "vehicle_request.dtd": "request", "plist.dtd": "plist"}
GUARD_SCHEMAS = ("get_weather.json", "search_product.json")
ARTIFACT_LABEL = "<artifact bytes>"
#: libxml2 errors that are not findings: a DTD's own nondeterministic content model (libxml2
#: reports it, then validates anyway), and ID uniqueness / IDREF targets, which are not
#: regular and documented as not enforced (docs/xml.md)
_TOLERATED_LXML = ("DTD_CONTENT_NOT_DETERMINIST", "DTD_UNKNOWN_ID", "DTD_ID_REDEFINED")
_WALKS = 3
_TOKEN_REF = re.compile(r"<\[|<\|")
_WALK_SLACK = 64
_MAX_BUDGET = 500
_UNBUDGETED_STEPS = 300


@dataclass
class Outcome:
    """The classified result of one input."""
    kind: str
    signature: str = ""
    message: str = ""
    phase: str = "door"
    oracle_skipped: bool = False
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "signature": self.signature, "message": self.message[:2000],
                "phase": self.phase, "oracle_skipped": self.oracle_skipped}


# ----------------------------------------------------------------------------- helpers

@functools.lru_cache(maxsize=1)
def tiny_vocab():
    """256 single-byte tokens plus one end-of-generation token: cheap masks, exact walks."""
    from decoding.vocab import Vocab
    return Vocab.from_bytes([bytes([i]) for i in range(256)] + [b""], eog_ids=[256],
                            special={"</s>": 256}, name="fuzz-bytes")


@functools.lru_cache(maxsize=1)
def _compiler():
    from decoding.compiler import Compiler
    return Compiler(tiny_vocab(), cache=False)


def _frames(tb) -> list[traceback.FrameSummary]:
    return list(traceback.extract_tb(tb))


def _where(frames: list) -> str:
    """``path:function`` of the innermost frame inside the package (else the innermost)."""
    if not frames:
        return "?"
    for fr in reversed(frames):
        fn = fr.filename.replace("\\", "/")
        if "/decoding/" in fn and "/evals/" not in fn:
            return f"decoding/{fn.rsplit('/decoding/', 1)[1]}:{fr.name}"
    fr = frames[-1]
    return f"{Path(fr.filename).name}:{fr.name}"


def signature_of(exc: BaseException) -> str:
    """Exception type + innermost package frame, e.g. ``TypeError @ decoding/x.py:f``."""
    return f"{type(exc).__name__} @ {_where(_frames(exc.__traceback__))}"


def resolve_pointer(doc: Any, pointer: str) -> bool:
    """Does the JSON pointer (RFC 6901, an optional leading ``#``) name a place in ``doc``?"""
    if not isinstance(pointer, str):
        return False
    if pointer.startswith("#"):
        pointer = pointer[1:]
    if pointer in ("", "/"):
        return True
    if not pointer.startswith("/"):
        return False
    cur = doc
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict):
            if part not in cur:
                return False
            cur = cur[part]
        elif isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                return False
            cur = cur[int(part)]
        else:
            return False
    return True


def _classify_error(door: str, exc: BaseException, payload: dict, phase: str) -> Outcome:
    sig = signature_of(exc)
    msg = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, DecodingError):
        return Outcome("crash", sig, msg, phase)
    if door == "dtd" and isinstance(exc, UsageError) and "root" in str(exc):
        return Outcome("located", type(exc).__name__, msg, phase)  # names the bad root option
    if _located(door, exc, payload):
        return Outcome("located", type(exc).__name__, msg, phase)
    return Outcome("unlocated", sig, msg, phase)


def _located(door: str, exc: DecodingError, payload: dict) -> bool:
    if door == "schema":
        ptr = getattr(exc, "pointer", None)
        return isinstance(ptr, str) and resolve_pointer(payload["schema"], ptr)
    if door in ("dtd", "gbnf"):
        text = payload[door]
        line = getattr(exc, "line", None)
        if isinstance(line, int) and not isinstance(line, bool):
            return 1 <= line <= text.count("\n") + 1
        rule = getattr(exc, "rule", None)
        if isinstance(rule, str) and rule and rule in text:
            return True
        msg = str(exc)
        # "<source>:line[:column]: reason" (the message form of every located error)
        m = re.match(r"[^\n]*?:(\d+)(?::\d+)?: ", msg)
        if m and 1 <= int(m.group(1)) <= text.count("\n") + 1:
            return True
        # a message that names a rule (GBNF) or an element (DTD) of the text is a place too
        m = re.search(r"\b(?:rule|element) '([^']+)'", msg)
        if m is None and isinstance(exc, LimitError):   # a limit hit while compiling rule x
            m = re.search(r"\bgrammar '([^']+)'", msg)
        return bool(m) and m.group(1) in text
    if door == "artifact":
        field_ = getattr(exc, "field", None)
        return isinstance(exc, ArtifactError) and (str(exc).startswith(ARTIFACT_LABEL + ":")
                                                    or bool(field_))
    return False


def _walks(cg, seed: int, n: int = _WALKS) -> list[bytes]:
    """Up to ``n`` finished random walks (budgeted when the completion cost is small)."""
    from decoding.testing import random_walk
    rng = np.random.default_rng(seed)
    try:
        cost = int(cg.completion_cost(0))
    except (AttributeError, NotImplementedError):
        cost = None
    out = []
    if cost is None or cost > _MAX_BUDGET:
        # no walk can be budgeted to completion: one bounded walk still checks the core
        # guarantees (mask never empty, allowed tokens accepted) but yields no output
        random_walk(cg, rng, max_steps=_UNBUDGETED_STEPS)
        return out
    for _ in range(n):
        w = random_walk(cg, rng, budget=cost + _WALK_SLACK, max_steps=cost + _WALK_SLACK + 1)
        if w.finished:
            out.append(w.text)
    return out


def _walk_failure(exc: DecodingError) -> Outcome | None:
    """A broken core guarantee seen by random_walk (empty mask, refused token, budget)."""
    msg = str(exc)
    if msg.startswith("random_walk:"):
        reason = msg.split(":", 2)[1].strip().split(" in state")[0].split(" after")[0]
        reason = "".join(c for c in reason if not c.isdigit()).strip()
        return Outcome("invalid", f"walk: {reason}", msg, "walk")
    return None


def _run_walks(door: str, cg, payload: dict, phase: Callable[[str], None], seed: int
               ) -> tuple[list[bytes] | None, Outcome | None]:
    phase("walk")
    try:
        return _walks(cg, seed), None
    except DecodingError as e:
        bad = _walk_failure(e)
        return None, bad or _classify_error(door, e, payload, "walk")
    except Exception as e:  # noqa: BLE001 - anything else is a crash
        return None, _classify_error(door, e, payload, "walk")


# ----------------------------------------------------------------------------- doors

def _schema(payload: dict, phase, seed: int) -> Outcome:
    schema = payload["schema"]
    try:
        cg = _compiler().compile_json_schema(schema)
    except Exception as e:  # noqa: BLE001
        return _classify_error("schema", e, payload, "door")
    outs, bad = _run_walks("schema", cg, payload, phase, seed)
    if bad is not None:
        return bad
    phase("oracle")
    try:
        import jsonschema

        from decoding.frontends.json_validator import validator_class
        cls = validator_class(schema)  # the "$schema" draft; decimal multipleOf, as the grammars
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as e:
            kw = next((p for p in reversed(e.absolute_path) if isinstance(p, str)), e.validator)
            return Outcome("invalid", f"metaschema: accepted an invalid '{kw}'",
                           f"/{'/'.join(map(str, e.absolute_path))}: {e.message}"[:2000], "oracle")
        validator = cls(schema)
        for text in outs:
            try:
                value = json.loads(text.decode("utf-8"))
            except UnicodeDecodeError:
                return Outcome("invalid", "output: not UTF-8", repr(text[:300]), "oracle")
            except ValueError:
                return Outcome("invalid", "output: not JSON", repr(text[:300]), "oracle")
            err = next(iter(validator.iter_errors(value)), None)
            if err is not None:
                return Outcome("invalid", f"output: jsonschema rejects ('{err.validator}')",
                               f"{text[:300]!r}: {err.message[:300]}", "oracle")
    except (RecursionError, MemoryError):
        return Outcome("ok", oracle_skipped=True, phase="oracle")
    except Exception as e:  # noqa: BLE001 - jsonschema cannot judge this schema
        return Outcome("ok", message=f"oracle: {type(e).__name__}: {e}"[:500], oracle_skipped=True,
                       phase="oracle")
    return Outcome("ok", phase="oracle")


def _lxml_validate(dtd_text: str, root: str, docs: list[bytes]) -> Outcome | None:
    import lxml.etree as ET
    with tempfile.TemporaryDirectory(prefix="fuzz-dtd-") as d:
        path = os.path.join(d, "g.dtd")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(dtd_text)
        try:
            validator = ET.DTD(path)
        except ET.DTDParseError:
            return None  # libxml2 cannot read this DTD: no verdict
        # recover=True: namespace errors (a prefix without xmlns, which DTDs know nothing
        # of) are not well-formedness errors; fatal errors still fail the document below
        # resolve_entities=True: lxml's default ("internal") leaves parameter entities
        # declared in the external subset undefined
        parser = ET.XMLParser(load_dtd=True, no_network=True, huge_tree=False, recover=True,
                              resolve_entities=True)
        for doc in docs:
            body = doc
            prolog = b""
            if body.startswith(b"<?xml"):
                k = body.find(b"?>") + 2
                prolog, body = body[:k], body[k:]
            full = prolog + b'<!DOCTYPE %s SYSTEM "%s">' % (root.encode(), path.encode()) + body
            try:
                tree = ET.fromstring(full, parser)
                log = list(parser.error_log)
                fatal = [e for e in log if e.level_name == "FATAL"
                         or (e.level_name == "ERROR" and e.domain_name not in ("NAMESPACE", "VALID"))]
            except ET.XMLSyntaxError as e:
                tree, log, fatal = None, [], [e]
            if any(getattr(e, "type_name", "") == "ERR_RESOURCE_LIMIT" for e in fatal):
                return Outcome("ok", message=f"oracle: libxml2 limit: {fatal[0]}"[:500], oracle_skipped=True,
                               phase="oracle")
            if tree is None or fatal:
                return Outcome("invalid", "output: not well-formed (libxml2)", f"{fatal[:1]}: {doc[:300]!r}",
                               "oracle")
            # a prefix without its xmlns (the DTD lost its #FIXED xmlns:p) breaks libxml2's
            # namespace-aware element lookup: no verdict on such a document
            unbound = any(e.domain_name == "NAMESPACE" for e in log)
            # validity errors while reading the DTD itself (e.g. an attribute default of the wrong type)
            errs = [e for e in log if e.domain_name == "VALID" and e.level_name == "ERROR"
                    and e.type_name not in _TOLERATED_LXML]
            if not errs and not validator.validate(tree):
                errs = [e for e in validator.error_log if e.type_name not in _TOLERATED_LXML]
            if errs and unbound:
                return Outcome("ok", message=f"oracle: namespace-unbound document: {errs[0].message}"[:500],
                               oracle_skipped=True, phase="oracle")
            if errs:
                return Outcome("invalid", f"output: libxml2 DTD-invalid ({errs[0].type_name})",
                               f"{errs[0].message}: {doc[:300]!r}", "oracle")
    return None


def _dtd(payload: dict, phase, seed: int) -> Outcome:
    text, root = payload["dtd"], payload["root"]
    with tempfile.TemporaryDirectory(prefix="fuzz-base-") as base:
        try:
            cg = _compiler().compile_source(text, "dtd", root=root, base_dir=base)
        except Exception as e:  # noqa: BLE001
            return _classify_error("dtd", e, payload, "door")
    outs, bad = _run_walks("dtd", cg, payload, phase, seed)
    if bad is not None:
        return bad
    phase("oracle")
    try:
        bad = _lxml_validate(text, root, outs)
    except Exception as e:  # noqa: BLE001
        return Outcome("ok", message=f"oracle: {type(e).__name__}: {e}"[:500], oracle_skipped=True,
                       phase="oracle")
    return bad or Outcome("ok", phase="oracle")


def _gbnf(payload: dict, phase, seed: int) -> Outcome:
    text = payload["gbnf"]
    try:
        cg = _compiler().compile_gbnf(text)
    except Exception as e:  # noqa: BLE001
        return _classify_error("gbnf", e, payload, "door")
    outs, bad = _run_walks("gbnf", cg, payload, phase, seed)
    if bad is not None:
        return bad
    if len(text) > 200_000 or not payload.get("llama", True) or "\x00" in text:
        # llama.cpp reads the grammar as a C string: a NUL ends it early
        return Outcome("ok", oracle_skipped=True, phase="oracle")
    phase("oracle")
    from decoding.backends.gbnf.check import check_gbnf, llama_accepts
    from decoding.errors import GBNFError
    try:
        check_gbnf(text)
    except GBNFError as e:
        if "sane defaults" in str(e):  # llama.cpp's own size limit on repetitions, not a language question
            return Outcome("ok", message=str(e)[:500], oracle_skipped=True, phase="oracle")
        return Outcome("invalid", "llama.cpp rejects a grammar we accept", str(e)[:2000], "oracle")
    except Exception as e:  # noqa: BLE001
        return Outcome("ok", message=f"oracle: {type(e).__name__}: {e}"[:500], oracle_skipped=True,
                       phase="oracle")
    if _TOKEN_REF.search(text):
        # token references (<[12]>, <|name|>) name ids of a vocabulary: the walks ran on the
        # byte vocabulary, llama.cpp checks with llama-bpe, so only the parse is comparable
        return Outcome("ok", message="token references: walks not comparable", oracle_skipped=True,
                       phase="oracle")
    for data in outs:
        if b"\x00" in data or len(data) > 2000:
            continue
        try:
            if not llama_accepts(text, data):
                if not data.isascii():
                    # llama.cpp's partial-UTF-8 matching of negated classes is approximate
                    # (root ::= [^\u2029]+ rejects U+240E): no verdict on non-ASCII walks
                    return Outcome("ok", message=f"llama.cpp rejects non-ASCII walk {data[:100]!r}",
                                   oracle_skipped=True, phase="oracle")
                return Outcome("invalid", "output: llama.cpp rejects a walk", repr(data[:300]), "oracle")
        except Exception as e:  # noqa: BLE001
            return Outcome("ok", message=f"oracle: {type(e).__name__}: {e}"[:500], oracle_skipped=True,
                           phase="oracle")
    return Outcome("ok", phase="oracle")


def _artifact(payload: dict, phase, seed: int) -> Outcome:
    from decoding.artifacts.format import load_artifact
    data = base64.b64decode(payload["b64"])
    try:
        cg = load_artifact(data, tiny_vocab())
    except Exception as e:  # noqa: BLE001
        return _classify_error("artifact", e, payload, "door")
    _, bad = _run_walks("artifact", cg, payload, phase, seed)
    if bad is not None and bad.kind == "invalid":
        # a consistent but crafted artifact is still a grammar, possibly one with dead
        # states (docs/artifacts.md "What it does not guarantee"): a DecodingError from the
        # walk is no finding; a crash or a hang while walking still is
        return Outcome("ok", message=f"crafted grammar: {bad.message}"[:500], oracle_skipped=True, phase="walk")
    return bad or Outcome("ok", phase="walk")


@functools.lru_cache(maxsize=None)
def _guard_dtd(name: str):
    from decoding.frontends.xml.dtd import parse_dtd
    path = GRAMMARS_DIR / name
    return parse_dtd(path.read_text(encoding="utf-8"), source=name, base_dir=GRAMMARS_DIR)


@functools.lru_cache(maxsize=None)
def _guard_schema(name: str) -> dict:
    return json.loads((GRAMMARS_DIR / name).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _lxml_dtd(name: str):
    import lxml.etree as ET
    return ET.DTD(str(GRAMMARS_DIR / name))


def _guard(payload: dict, phase, seed: int) -> Outcome:  # noqa: ARG001
    import decoding.guard as G
    text, fn, g = payload["text"], payload["fn"], payload["grammar"]
    repair = bool(payload.get("repair"))
    try:
        if g.endswith(".json"):
            schema = _guard_schema(g)
            if fn == "guard":
                res = G.guard_json(text, schema, repair=repair)
            elif fn == "extract":
                res = G.extract_json(text, all=repair)
            else:
                res = G.validate_json(text, schema)
        else:
            dtd, root = _guard_dtd(g), GUARD_DTDS[g]
            want = root if payload.get("root") else None
            if fn == "guard":
                res = G.guard_xml(text, dtd, root=want, repair=repair, add_declaration=repair)
            elif fn == "extract":
                res = G.extract_xml(text, all=repair, root=want)
            else:
                res = list(G.validate_xml(text, dtd, root=want))
    except Exception as e:  # noqa: BLE001 - the guard never raises on model output
        return Outcome("crash", signature_of(e), f"{type(e).__name__}: {e}", "door")
    if fn != "guard" or not res.ok or res.text is None:
        return Outcome("ok")
    phase("oracle")
    try:
        if g.endswith(".json"):
            import jsonschema

            from decoding.frontends.json_validator import validator
            err = next(iter(validator(_guard_schema(g), cls=jsonschema.Draft202012Validator)
                            .iter_errors(json.loads(res.text))), None)
            if err is not None:
                return Outcome("invalid", f"guard ok but jsonschema rejects ('{err.validator}')",
                               f"{res.text[:300]!r}: {err.message[:300]}", "oracle")
        else:
            import lxml.etree as ET
            parser = ET.XMLParser(no_network=True, resolve_entities=False, recover=True)
            try:
                tree = ET.fromstring(res.text.encode("utf-8"), parser)
                fatal = [e for e in parser.error_log if e.level_name == "FATAL"
                         or (e.level_name == "ERROR" and e.domain_name != "NAMESPACE")]
            except ET.XMLSyntaxError as e:
                tree, fatal = None, [e]
            if tree is None or fatal:
                return Outcome("invalid", "guard ok but libxml2: not well-formed", f"{fatal[:1]}: {res.text[:300]!r}",
                               "oracle")
            v = _lxml_dtd(g)
            if not v.validate(tree):
                errs = [e for e in v.error_log if e.type_name not in _TOLERATED_LXML]
                if errs and any(e.domain_name == "NAMESPACE" for e in parser.error_log):
                    return Outcome("ok", message=f"oracle: namespace-unbound document: {errs[0].message}"[:500],
                                   oracle_skipped=True, phase="oracle")
                if errs:
                    return Outcome("invalid", f"guard ok but libxml2 DTD-invalid ({errs[0].type_name})",
                                   f"{errs[0].message}: {res.text[:300]!r}", "oracle")
    except Exception as e:  # noqa: BLE001
        return Outcome("ok", message=f"oracle: {type(e).__name__}: {e}"[:500], oracle_skipped=True,
                       phase="oracle")
    return Outcome("ok", phase="oracle")


def _selftest(payload: dict, phase, seed: int) -> Outcome:  # noqa: ARG001
    """A door that misbehaves on request (tests of the worker): ``{"do": "ok" | "sleep" |
    "raise" | "abort" | "alloc", "arg": ...}``."""
    import time
    do, arg = payload["do"], payload.get("arg")
    if do == "sleep":
        time.sleep(float(arg))
    elif do == "raise":
        raise TypeError("selftest")
    elif do == "abort":
        os.abort()
    elif do == "alloc":
        try:
            b = bytearray(int(arg))
            del b
        except MemoryError as e:
            return Outcome("crash", signature_of(e), "MemoryError", "door")
    return Outcome("ok")


_DOORS = {"schema": _schema, "dtd": _dtd, "gbnf": _gbnf, "artifact": _artifact, "guard": _guard,
          "_selftest": _selftest}


def run_input(door: str, payload: dict, *, phase: Callable[[str], None] = lambda _p: None,
              seed: int = 0) -> Outcome:
    """Run one input against ``door`` and classify what happened (never raises, except
    ``KeyboardInterrupt``/``SystemExit``)."""
    phase("door")
    try:
        return _DOORS[door](payload, phase, seed)
    except (RecursionError, MemoryError) as e:
        return Outcome("crash", signature_of(e), f"{type(e).__name__}: {e}", "door")
    except Exception as e:  # noqa: BLE001 - a bug of the harness itself still gets a signature
        return Outcome("crash", signature_of(e), f"{type(e).__name__}: {e}", "door")
