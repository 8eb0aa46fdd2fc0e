"""Input generators, one per door: mutations of real inputs plus hand-made hostile shapes.

Each generator is ``gen(rng) -> (payload, description)`` where ``payload`` is what
:func:`evals.fuzz.targets.run_input` takes (plain JSON data) and ``description`` a short
note of how it was made.  Seeds come from ``../shared/corpora`` (jsonschemabench and the
JSON-Schema test suite, ``dtd/*.dtd``, ``gbnf/**.gbnf``), from ``grammars/`` (schemas,
DTDs, and artifacts compiled from them for the fuzz vocabulary) and from the
guard corpora (instances under ``corpora/dtd/instances`` and walks of the grammars).
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
import random
import struct
from typing import Any, Callable

from evals.fuzz.targets import GRAMMARS_DIR, GUARD_DTDS, GUARD_SCHEMAS, ROOT

__all__ = ["GENERATORS", "CORPORA", "WEIRD_VALUES", "SCHEMA_KEYWORDS", "schema_seeds", "dtd_seeds",
           "gbnf_seeds", "artifact_seeds", "recompute_checksum", "mutate_text",
           "edit_artifact_header", "DTD_TOKENS", "GBNF_TOKENS", "GUARD_TOKENS"]

CORPORA = (ROOT / ".." / "shared" / "corpora").resolve()

#: wrong-typed, extreme and odd keyword values
WEIRD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 5, 1.5, -0.0, 1e20, -1e20, 10 ** 40, -(10 ** 40), 1e308, -1e308,
    2 ** 63, 2 ** 64 + 1, 1000, 2000, "x", "", "string", "#", "#/$defs/a", "x{99999999999}", "(a+)+$",
    "[", "\\", "\ud800", [], [1], [None], ["a", 10 ** 40], [{}], [[]], {}, {"a": 1}, {"type": 5},
    {"$ref": "#"}, {"": {}},
]

SCHEMA_KEYWORDS = [
    "type", "enum", "const", "properties", "patternProperties", "additionalProperties", "required",
    "minProperties", "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas",
    "items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains", "minItems",
    "maxItems", "uniqueItems", "unevaluatedItems", "unevaluatedProperties", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs", "definitions", "$id",
    "$schema", "$anchor", "$dynamicRef", "$dynamicAnchor", "contentEncoding", "dependencies", "default",
]

_TYPES = ["string", "number", "integer", "boolean", "null", "object", "array", "strin", "any", "", 5]


# ----------------------------------------------------------------------------- seeds

@functools.lru_cache(maxsize=1)
def schema_seeds() -> list:
    out: list = []
    bench = sorted((CORPORA / "jsonschemabench").glob("*/*.json"))
    for p in random.Random(0).sample(bench, min(600, len(bench))):
        try:
            out.append(json.loads(p.read_text(encoding="utf-8"))["schema"])
        except (ValueError, KeyError, OSError):
            pass
    for p in sorted((CORPORA / "json-schema-test-suite" / "draft2020-12").glob("*.json")):
        try:
            out.extend(case["schema"] for case in json.loads(p.read_text(encoding="utf-8")))
        except (ValueError, KeyError, OSError):
            pass
    for name in GUARD_SCHEMAS:
        out.append(json.loads((GRAMMARS_DIR / name).read_text(encoding="utf-8")))
    return out


@functools.lru_cache(maxsize=1)
def dtd_seeds() -> list[tuple[str, str]]:
    roots = {"PropertyList-1.0.dtd": "plist", "log4j.dtd": "log4j:configuration",
             "web-app_2_3.dtd": "web-app", "hibernate-mapping-3.0.dtd": "hibernate-mapping"}
    out = [((CORPORA / "dtd" / f).read_text(encoding="utf-8"), r) for f, r in roots.items()]
    out += [((GRAMMARS_DIR / f).read_text(encoding="utf-8"), r) for f, r in GUARD_DTDS.items()]
    return out


@functools.lru_cache(maxsize=1)
def gbnf_seeds() -> list[str]:
    out = [p.read_text(encoding="utf-8") for p in sorted((CORPORA / "gbnf").glob("**/*.gbnf"))]
    out += ['root ::= "a" | "b"\n', 'root ::= [a-z]+ ("," [a-z]+)*\n',
            'root ::= item{2,5}\nitem ::= "x" [0-9]?\n', 'root ::= "{" ws "}"\nws ::= [ \\t\\n]*\n']
    return out


@functools.lru_cache(maxsize=1)
def artifact_seeds() -> list[tuple[str, bytes]]:
    """Artifacts compiled from grammars/ (and one GBNF) for the fuzz vocabulary."""
    from decoding.artifacts.format import artifact_bytes
    from decoding.compiler import Compiler
    from evals.fuzz.targets import tiny_vocab
    c = Compiler(tiny_vocab(), cache=False, backend="dfa")
    out = []
    for name in GUARD_SCHEMAS:
        cg = c.compile_json_schema((GRAMMARS_DIR / name).read_text(encoding="utf-8"), eager=True)
        out.append((name, artifact_bytes(cg, name=name, kind="json-schema")))
    cg = c.compile_source((GRAMMARS_DIR / "user_query.dtd").read_text(encoding="utf-8"), "dtd",
                          root="request", base_dir=GRAMMARS_DIR, eager=True)
    out.append(("user_query.dtd", artifact_bytes(cg, name="user_query", kind="dtd")))
    cg = c.compile_gbnf('root ::= "a"{1,3} ("," [0-9])*\n', eager=True)
    out.append(("small.gbnf", artifact_bytes(cg, name="small", kind="gbnf")))
    return out


# ----------------------------------------------------------------------------- schema door

def _subschemas(node: Any, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """(path, dict) of every dict inside ``node``."""
    out = []
    stack = [(path, node)]
    while stack and len(out) < 5000:
        p, n = stack.pop()
        if isinstance(n, dict):
            out.append((p, n))
            stack.extend((p + (k,), v) for k, v in n.items())
        elif isinstance(n, list):
            stack.extend((p + (i,), v) for i, v in enumerate(n))
    return out


def _weird(rng: random.Random) -> Any:
    """A fresh (never shared) odd value."""
    r = rng.random()
    if r < 0.7:
        v: Any = rng.choice(WEIRD_VALUES)
    elif r < 0.85:
        v = [rng.choice(WEIRD_VALUES) for _ in range(rng.randint(1, 3))]
    else:
        v = {rng.choice(SCHEMA_KEYWORDS): rng.choice(WEIRD_VALUES)}
    return copy.deepcopy(v)


def _nest(inner: Any, depth: int, rng: random.Random) -> Any:
    how = rng.choice(["items", "properties", "allOf", "anyOf", "not", "additionalProperties", "prefixItems"])
    for _ in range(depth):
        if how == "properties":
            inner = {"type": "object", "properties": {"a": inner}, "required": ["a"]}
        elif how in ("allOf", "anyOf", "prefixItems"):
            inner = {how: [inner]}
        else:
            inner = {how: inner}
    return inner


def _hostile_schema(rng: random.Random) -> tuple[Any, str]:
    k = rng.randrange(14)
    n = rng.choice([10, 100, 300, 1000, 3000])
    if k == 0:
        return _nest({"type": "string"}, n, rng), f"nested x{n}"
    if k == 1:
        kw = rng.choice(["maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties",
                         "maxContains", "minContains"])
        v = rng.choice([300, 1000, 2000, 10 ** 6, 1e20, 10 ** 40, -1, 1.5, "x", None, []])
        t = {"maxLength": "string", "minLength": "string"}.get(kw, rng.choice(["array", "object", None]))
        s = {kw: v}
        if t:
            s["type"] = t
        return s, f"{kw}={v!r}"
    if k == 2:
        lo = rng.choice([1e308, -1e308, 10 ** 40, 1e-300, 0.1, 9007199254740993, 2 ** 63])
        s = {"type": rng.choice(["number", "integer"]), "minimum": lo, "maximum": lo}
        if rng.random() < 0.5:
            s["multipleOf"] = rng.choice([0.1, 1e-10, 3, 1e308, 0.5])
        return s, "huge/odd numeric bounds"
    if k == 3:
        return {"enum": list(range(n * 3))}, f"enum of {n * 3}"
    if k == 4:
        return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)},
                "required": [f"p{i}" for i in range(n)]}, f"{n} required properties"
    if k == 5:
        pat = rng.choice(["a{1000}", "(a|b){500}", "((a+)+)+", "x{99999999999}", "[a-z]{0,5000}", "(a{0,100}){0,100}",
                          "(" * 300 + "a" + ")" * 300, "\\p{L}+", "(?<=a)b", "a**", "[z-a]", "\\"])
        return {"type": "string", "pattern": pat}, f"pattern {pat[:30]!r}"
    if k == 6:
        return {"$ref": "#/$defs/a", "$defs": {"a": rng.choice([False, True, {"$ref": "#/$defs/a"}, {"$ref": "#"},
                                                                 {"$ref": "#/$defs/b"}, 5, "x"])}}, "$ref tricks"
    if k == 7:
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
        defs[f"d{n}"] = {"type": "string"}
        return {"$ref": "#/$defs/d0", "$defs": defs}, f"$ref chain {n}"
    if k == 8:
        return {"type": rng.choice(_TYPES + [["string", 5], [], ["string", "string"]])}, "type names"
    if k == 9:
        return {"required": ["a", rng.choice([10 ** 40, None, 5, True, {}, ""])],
                "properties": {"a": {}}}, "required non-strings"
    if k == 10:
        return {"allOf": [{"minLength": rng.randint(0, 20)}, {"minLength": rng.choice([None, "x", -1, 1e20])}]}, \
            "allOf merge of wrong-typed"
    if k == 11:
        kw = rng.choice(["uniqueItems", "exclusiveMaximum", "exclusiveMinimum", "additionalProperties",
                         "items", "contains", "propertyNames", "dependentRequired", "patternProperties"])
        return {kw: _weird(rng)}, f"{kw} weird"
    if k == 12:
        return {"anyOf": [{"type": "string", "maxLength": rng.randint(1, 60)} for _ in range(rng.randint(2, 60))]
                + [{"type": "array", "items": {"$ref": "#"}}]}, "anyOf fan-out"
    return {"type": "object", "patternProperties": {rng.choice(["x{99999999999}", "^a", "(", "[a-"]): {}},
            "additionalProperties": rng.choice([True, False, {}, 5])}, "patternProperties"


def _mutate_schema(schema: Any, rng: random.Random) -> tuple[Any, str]:
    s = json.loads(json.dumps(schema))
    notes = []
    for _ in range(rng.randint(1, 3)):
        subs = _subschemas(s)
        if not subs:
            return _weird(rng), "weird root"
        path, d = rng.choice(subs)
        op = rng.randrange(6)
        if op == 0 or not d:
            kw = rng.choice(SCHEMA_KEYWORDS)
            d[kw] = _weird(rng)
            notes.append(f"{'/'.join(map(str, path))}/{kw}=weird")
        elif op == 1:
            kw = rng.choice(list(d))
            d[kw] = _weird(rng)
            notes.append(f"{'/'.join(map(str, path))}/{kw}=weird")
        elif op == 2:
            kw = rng.choice(list(d))
            del d[kw]
            notes.append(f"del {kw}")
        elif op == 3:
            other = rng.choice(schema_seeds())
            kw = rng.choice(list(d))
            d[kw] = json.loads(json.dumps(other))
            notes.append(f"graft at {kw}")
        elif op == 4:
            kw = rng.choice(list(d))
            d[kw] = _nest(d[kw], rng.choice([50, 300, 1200]), rng)
            notes.append(f"nest {kw}")
        else:
            h, why = _hostile_schema(rng)
            if isinstance(h, dict):
                d.update(h)
            notes.append(f"merge hostile ({why})")
    return s, "; ".join(notes)


def gen_schema(rng: random.Random) -> tuple[dict, str]:
    r = rng.random()
    if r < 0.3:
        s, why = _hostile_schema(rng)
    else:
        s, why = _mutate_schema(rng.choice(schema_seeds()), rng)
    return {"schema": s}, why


# ----------------------------------------------------------------------------- text mutation

def mutate_text(text: str, rng: random.Random, tokens: list[str], n: int | None = None) -> str:
    for _ in range(n or rng.randint(1, 4)):
        L = len(text)
        op = rng.randrange(6)
        i = rng.randint(0, L)
        j = min(L, i + rng.randint(0, 40))
        if op == 0:
            text = text[:i] + rng.choice(tokens) + text[i:]
        elif op == 1:
            text = text[:i] + text[j:]
        elif op == 2:
            text = text[:i] + text[i:j] * rng.choice([2, 3, 50, 1000]) + text[j:]
        elif op == 3 and L:
            k = rng.randrange(L)
            text = text[:k] + chr(rng.choice([0, 9, 10, 13, 32, 34, 39, 40, 41, 60, 62, 92, 127, 0xA0, 0xFFFD,
                                               0xFFFF, 0x10FFFF, rng.randrange(0x20, 0x3000)])) + text[k + 1:]
        elif op == 4:
            k = rng.randint(0, L)
            m = rng.randint(0, L)
            text = text[:k] + text[m:m + rng.randint(1, 200)] + text[k:]
        else:
            text = text[:i] + rng.choice(tokens) * rng.choice([2, 10, 100]) + text[j:]
    return text


# ----------------------------------------------------------------------------- DTD door

DTD_TOKENS = ["(", ")", "|", ",", "*", "+", "?", "#PCDATA", "<!ENTITY ", "<!ENTITY % p ", "%p;", "&e;", ";",
               '"', "'", "<!--", "-->", "<![INCLUDE[", "<![IGNORE[", "]]>", "ANY", "EMPTY", "NOTATION (n)",
               "#REQUIRED", "#IMPLIED", "#FIXED", " ID ", " IDREF ", " ENTITIES ", " NMTOKENS ", "<!ELEMENT ",
               "<!ATTLIST ", "<!NOTATION n SYSTEM 'x'>", ">", "\u00e9", "\x00", "&#0;", "&#x10FFFF;", "&#xD800;",
               "<?xml version='1.0'?>", "SYSTEM 'x.dtd'", "PUBLIC 'a' 'b'"]


def _element_names(text: str) -> list[str]:
    import re
    return re.findall(r"<!ELEMENT\s+([^\s>()]+)", text) or ["r"]


def _hostile_dtd(rng: random.Random) -> tuple[str, str, str]:
    k = rng.randrange(11)
    n = rng.choice([10, 100, 500, 1000, 3000])
    if k == 0:
        return f"<!ELEMENT r {'(' * n}a{')' * n}>\n<!ELEMENT a EMPTY>\n", "r", f"{n} nested parens"
    if k == 1:
        lv = rng.choice([3, 6, 9, 12])
        ents = '<!ENTITY e0 "lol">\n' + "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">\n' for i in range(1, lv))
        return ents + f'<!ELEMENT r EMPTY>\n<!ATTLIST r a CDATA "&e{lv - 1};">\n', "r", \
            f"general-entity laughs x{lv} in ATTLIST default"
    if k == 2:
        lv = rng.choice([3, 6, 9, 12])
        ents = '<!ENTITY % e0 "(a)*">\n' + "".join(f'<!ENTITY % e{i} "{f"%e{i - 1};" * 10}">\n'
                                                   for i in range(1, lv))
        return ents + "<!ELEMENT a EMPTY>\n<!ELEMENT r (a)>\n", "r", f"parameter-entity laughs x{lv}"
    if k == 3:
        return f"<!ELEMENT r ({'|'.join(f'a{i}' for i in range(n))})>\n" + \
            "".join(f"<!ELEMENT a{i} EMPTY>\n" for i in range(n)), "r", f"choice of {n}"
    if k == 4:
        return "".join(f"<!ELEMENT e{i} (e{i + 1})>\n" for i in range(n)) + f"<!ELEMENT e{n} (#PCDATA)>\n", "e0", \
            f"chain of {n} elements"
    if k == 5:
        return f"<!ELEMENT r ({','.join(['a?'] * (n // 10 + 2))})>\n<!ELEMENT a (#PCDATA)>\n", "r", \
            f"{n // 10 + 2} optional a in sequence"
    if k == 6:
        return "<!ELEMENT r EMPTY>\n<!ATTLIST r nt NOTATION (nope) #REQUIRED>\n", "r", "undeclared notation"
    if k == 7:
        return f"<!ELEMENT r EMPTY>\n<!ATTLIST r v ({'|'.join(f'v{i}' for i in range(n))}) #REQUIRED>\n", "r", \
            f"attribute enum of {n}"
    if k == 8:
        return "<!ELEMENT r (r?,a)>\n<!ELEMENT a (#PCDATA|r)*>\n", "r", "recursion"
    if k == 9:
        return f"<!ELEMENT r (#PCDATA|{'|'.join(f'm{i}' for i in range(n // 5 + 1))})*>\n" + \
            "".join(f"<!ELEMENT m{i} (#PCDATA)>\n" for i in range(n // 5 + 1)), "r", "wide mixed content"
    return f'<!ENTITY big "{"x" * (n * 1000)}">\n<!ELEMENT r (#PCDATA)>\n', "r", f"{n}k-char entity"


def gen_dtd(rng: random.Random) -> tuple[dict, str]:
    if rng.random() < 0.35:
        text, root, why = _hostile_dtd(rng)
        if rng.random() < 0.3:
            text = mutate_text(text, rng, DTD_TOKENS, 1)
            why += " + mutated"
    else:
        text, root = rng.choice(dtd_seeds())
        text = mutate_text(text, rng, DTD_TOKENS)
        if rng.random() < 0.3:
            root = rng.choice(_element_names(text))
        why = "mutated seed"
    return {"dtd": text, "root": root}, why


# ----------------------------------------------------------------------------- GBNF door

GBNF_TOKENS = ["::=", " | ", "(", ")", "*", "+", "?", "{0,100}", "{2,}", "{99999999}", '"', "'", "[", "]", "[^",
                "\\", "\\x", "\\u", "\\U0011FFFF", "-", "root", "#", "\n", " ", "a-z", "\\n", "x", "undefined-rule",
                "root ::= root \"a\"\n", '"\\x{41}"', "\x00", "\ud7ff", "<[1]>", "<|eot|>", ".", "!"]


def _hostile_gbnf(rng: random.Random) -> tuple[str, str]:
    k = rng.randrange(10)
    n = rng.choice([10, 100, 1000, 3000])
    if k == 0:
        return f"root ::= {'(' * n}\"a\"{')' * n}\n", f"{n} nested parens"
    if k == 1:
        return "root ::= r0\n" + "".join(f"r{i} ::= r{i + 1} \"x\"\n" for i in range(n)) + f"r{n} ::= \"a\"\n", \
            f"chain of {n} rules"
    if k == 2:
        a, b = rng.choice([(10, 10), (100, 100), (50, 200), (1000, 3)])
        return f'root ::= ("a"{{0,{a}}}){{0,{b}}}\n', f"nested bounded repetition {a}x{b}"
    if k == 3:
        m = rng.choice([1000, 20000])
        return "root ::= " + " ".join(f'"l{i}"' for i in range(m)) + "\n", f"{m}-literal sequence"
    if k == 4:
        return 'rot ::= "a"\n', "no root"
    if k == 5:
        return f'root ::= "a"{{{rng.choice([10 ** 9, 99999999999, 2 ** 31, 65536, 1000])}}}\n', "huge repetition"
    if k == 6:
        return 'root ::= root "a" | "b"\n', "left recursion"
    if k == 7:
        return f"root ::= {' | '.join(f'[{chr(97 + i % 26)}-{chr(98 + i % 25)}]' for i in range(n))}\n", \
            f"{n} alternatives"
    if k == 8:
        return 'root ::= [\\U0011FFFF] | "\\xZZ" | [\\u0000-\\U0010FFFF]\n', "odd escapes"
    return "root ::= x\n" + "x ::= " + "(x)" * (n // 10 + 1) + ' | "a"\n', "recursive fan"


def gen_gbnf(rng: random.Random) -> tuple[dict, str]:
    if rng.random() < 0.35:
        text, why = _hostile_gbnf(rng)
        if rng.random() < 0.3:
            text = mutate_text(text, rng, GBNF_TOKENS, 1)
            why += " + mutated"
    else:
        text = mutate_text(rng.choice(gbnf_seeds()), rng, GBNF_TOKENS)
        why = "mutated seed"
    return {"gbnf": text}, why


# ----------------------------------------------------------------------------- artifact door

_PRE = struct.Struct("<8sIIQ")


def recompute_checksum(body: bytes) -> bytes:
    """``body`` (prelude + header + sections, body length field fixed) + its sha256."""
    magic, version, hlen, _ = _PRE.unpack_from(body, 0)
    body = _PRE.pack(magic, version, hlen, len(body)) + body[_PRE.size:]
    return body + hashlib.sha256(body).digest()


def _json_paths(node: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _json_paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:8]):
            out += _json_paths(v, path + (i,))
    return out


_ART_VALUES = [None, True, 0, -1, 1, 2 ** 31, 2 ** 63, 10 ** 30, -(10 ** 30), 1.5, "x", "", "<u8", "|b1", "=f8",
               [], [10 ** 30], [-1], [1, 1, 1], {}, {"dtype": "<u4"}, 7]


def _edit_header(header: dict, rng: random.Random) -> str:
    paths = [p for p in _json_paths(header) if p]
    p = rng.choice(paths)
    parent = header
    for k in p[:-1]:
        parent = parent[k]
    last = p[-1]
    if rng.random() < 0.3 and isinstance(parent, dict):
        del parent[last]
        return f"del {'.'.join(map(str, p))}"
    v = copy.deepcopy(rng.choice(_ART_VALUES))
    if rng.random() < 0.3 and isinstance(parent[last], int) and not isinstance(parent[last], bool):
        v = parent[last] + rng.choice([-1, 1, 64, -64, 10 ** 6])
    parent[last] = v
    return f"{'.'.join(map(str, p))}={v!r}"[:120]


def gen_artifact(rng: random.Random) -> tuple[dict, str]:
    name, data = rng.choice(artifact_seeds())
    body = bytearray(data[:-32])
    r = rng.random()
    magic, version, hlen, blen = _PRE.unpack_from(body, 0)
    if r < 0.1:                                   # raw byte flips: the checksum must catch them
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return {"b64": base64.b64encode(bytes(b)).decode()}, f"{name}: byte flips"
    if r < 0.15:
        cut = rng.randrange(len(data))
        return {"b64": base64.b64encode(data[:cut] + (b"\0" * rng.randint(0, 64))).decode()}, f"{name}: truncated"
    if r < 0.4:                                   # section bytes edited, checksum recomputed
        for _ in range(rng.randint(1, 6)):
            k = rng.randrange(_PRE.size + hlen, len(body))
            body[k] = rng.choice([0, 0xFF, 0x7F, 0x80, body[k] ^ (1 << rng.randrange(8))])
        return {"b64": base64.b64encode(recompute_checksum(bytes(body))).decode()}, \
            f"{name}: section bytes, checksum recomputed"
    if r < 0.45:                                  # prelude fields
        v = rng.choice([0, 1, 2, 2 ** 32 - 1])
        hl = rng.choice([hlen, 0, 1, hlen + 1, hlen - 1, 2 ** 32 - 1])
        body[:_PRE.size] = _PRE.pack(magic, v if rng.random() < 0.3 else version, hl, blen)
        return {"b64": base64.b64encode(recompute_checksum(bytes(body))).decode()}, f"{name}: prelude edit"
    blob, desc = edit_artifact_header(data, rng, rng.randint(1, 3))
    return {"b64": blob}, f"{name}: {desc}"


def edit_artifact_header(data: bytes, rng: random.Random, edits: int = 1) -> tuple[str, str]:
    """``data`` with ``edits`` random header edits (the header padded to its old length when
    it shrinks) and the checksum recomputed: (base64, description)."""
    body = bytearray(data[:-32])
    magic, version, hlen, _ = _PRE.unpack_from(body, 0)
    header = json.loads(bytes(body[_PRE.size:_PRE.size + hlen]))
    notes = [_edit_header(header, rng) for _ in range(edits)]
    new = json.dumps(header, separators=(",", ":")).encode()
    if len(new) <= hlen:
        body[_PRE.size:_PRE.size + hlen] = new + b" " * (hlen - len(new))
    else:
        body = bytearray(_PRE.pack(magic, version, len(new), 0) + new + bytes(body[_PRE.size + hlen:]))
    return base64.b64encode(recompute_checksum(bytes(body))).decode(), \
        f"header {'; '.join(notes)}, checksum recomputed"


# ----------------------------------------------------------------------------- guard door

@functools.lru_cache(maxsize=1)
def guard_seeds() -> list[tuple[str, str]]:
    """(grammar file, text) pairs: valid documents from walks, wrapped in prose."""
    import numpy as np

    from decoding.compiler import Compiler
    from decoding.testing import random_walk
    from evals.fuzz.targets import tiny_vocab
    c = Compiler(tiny_vocab(), cache=False)
    out = []
    rng = np.random.default_rng(0)
    for name in GUARD_SCHEMAS:
        cg = c.compile_json_schema((GRAMMARS_DIR / name).read_text(encoding="utf-8"))
        for _ in range(3):
            w = random_walk(cg, rng, budget=cg.completion_cost(0) + 40)
            out.append((name, w.text.decode("utf-8", "replace")))
    for name, root in GUARD_DTDS.items():
        cg = c.compile_source((GRAMMARS_DIR / name).read_text(encoding="utf-8"), "dtd", root=root,
                              base_dir=GRAMMARS_DIR, max_depth=2)
        for _ in range(3):
            w = random_walk(cg, rng, budget=cg.completion_cost(0) + 40)
            out.append((name, w.text.decode("utf-8", "replace")))
    return out


GUARD_TOKENS = ["\ud800", "\udfff", "\x00", "<", ">", "</", "/>", "<a>", "</b>", "<!--", "-->", "<![CDATA[", "]]>",
                 "<?xml version=\"1.0\" encoding=\"UF-8\"?>", "<?xml version='1.0' encoding='utf-16'?>",
                 "<!DOCTYPE r [<!ENTITY a \"aaaa\">]>", "&a;", "&#0;", "&#xD800;", "{", "}", "[", "]", ",", ":",
                 '"', "\\", "\\ud800", "1e999999", "-", "NaN", "true", "\u2028", "\ufeff", "```json\n", "```"]


def _hostile_guard(rng: random.Random, name: str) -> tuple[str, str]:
    k = rng.randrange(9)
    n = rng.choice([100, 1000, 10_000, 100_000, 350_000, 1_100_000])
    if k == 0:
        return "[" * n, f"'[' x {n}"
    if k == 1:
        return '{"a":' * n, f"'{{\"a\":' x {n}"
    if k == 2:
        return "<array>" * n, f"'<array>' x {n}"
    if k == 3:
        return "<a></b>" * (n // 7 + 1), f"'<a></b>' x {n // 7 + 1}"
    if k == 4:
        return "<a>" * (n // 3 + 1), f"'<a>' x {n // 3 + 1}"
    if k == 5:
        return '<?xml version="1.0" encoding="UF-8"?><request/>', "unknown encoding"
    if k == 6:
        lv = rng.choice([3, 6, 9])
        ents = '<!ENTITY e0 "lol">' + "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, lv))
        return f"<!DOCTYPE request [{ents}]><request>&e{lv - 1};</request>", f"entity laughs x{lv}"
    if k == 7:
        return "x\ud800 <request>\udc00</request> {\"a\": \"\ud800\"}", "lone surrogates"
    return "Sure! " * (n // 6) + '{"location": "x"', f"long prose {n}"


def gen_guard(rng: random.Random) -> tuple[dict, str]:
    name, text = rng.choice(guard_seeds())
    if rng.random() < 0.4:
        hostile, why = _hostile_guard(rng, name)
        r = rng.random()
        text = hostile if r < 0.5 else (text + hostile if r < 0.75 else hostile + text)
    else:
        text = mutate_text(f"Here you go:\n{text}\nDone.", rng, GUARD_TOKENS)
        why = "mutated walk"
    if rng.random() < 0.2:
        name = rng.choice(list(GUARD_DTDS) + list(GUARD_SCHEMAS))
    return {"text": text, "grammar": name, "fn": rng.choice(["guard", "guard", "extract", "validate"]),
            "repair": rng.random() < 0.5, "root": rng.random() < 0.5}, why


GENERATORS: dict[str, Callable[[random.Random], tuple[dict, str]]] = {
    "schema": gen_schema, "dtd": gen_dtd, "gbnf": gen_gbnf, "artifact": gen_artifact, "guard": gen_guard}
