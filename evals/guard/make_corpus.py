"""Generate the guard's damaged-output corpus from the shared DTD and JSON instances.

    PYTHONPATH=. .venv/bin/python evals/guard/make_corpus.py [--out evals/results/guard/raw/corpus.jsonl]

Deterministic (seeded).  Each case is a dict:
  id, kind ('xml'|'json'), source (instance path under shared/corpora), mutation,
  text (the damaged model output), root (XML) / dtd (file name) or schema_ref,
  intended: {prolog_start, start, end} of the fragment the guard must find,
  valid: whether that fragment is valid (by construction; checked against lxml/libxml2
         or jsonschema when the case is built),
  repairable: True / False / None as docs/guard.md says: True = must be repaired to a
         valid document, False = must be refused, None = truncation: repaired exactly
         when closing the open structure yields a valid document (checked by oracle).
  original: the undamaged document.
Mutations: prose-before, prose-after, prose-both, truncate (sampled positions inside
the root), missing-end-tag (root or inner), stray-amp, stray-lt, wrong-nesting (XML);
prose-*, truncate, trailing-comma, missing-closer (JSON).
"""

from __future__ import annotations

import argparse
import json
import random
import xml.parsers.expat as expat
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora"

PROSE_BEFORE = ["Here is the XML request:\n", "Sure! Below is the document you asked for.\n\n",
                "Answer: ", "Use the <{root}> element as follows:\n"]
PROSE_AFTER = ["\nHope this helps!", "\n\nLet me know if you need anything else.", " Done."]
JPROSE_BEFORE = ["Here is the JSON:\n", "Sure! Fill in {city} like this: ", "```json\n"]
JPROSE_AFTER = ["\nHope this helps!", "\n```", " (all fields filled)"]


def _elements(doc: str) -> list[dict]:
    """Element spans of a well-formed document (char offsets)."""
    raw = doc.encode("utf-8")
    b2c = {}
    ci = 0
    bi = 0
    for ch in doc:
        b2c[bi] = ci
        bi += len(ch.encode("utf-8"))
        ci += 1
    b2c[bi] = ci
    p = expat.ParserCreate()
    p.UseForeignDTD(True)
    out: list[dict] = []
    stack: list[dict] = []

    def start(name, attrs):
        s = b2c[p.CurrentByteIndex]
        tag_end = _tag_end(doc, s)
        e = {"name": name, "start": s, "tag_end": tag_end, "depth": len(stack),
             "empty": doc[tag_end - 2:tag_end] == "/>", "children": 0,
             "parent": stack[-1]["i"] if stack else None, "i": len(out)}
        if stack:
            stack[-1]["children"] += 1
        stack.append(e)
        out.append(e)

    def end(name):
        e = stack.pop()
        if e["empty"]:
            e["end_start"] = e["end"] = e["tag_end"]
        else:
            s = b2c[p.CurrentByteIndex]
            e["end_start"] = s
            e["end"] = doc.index(">", s) + 1

    p.StartElementHandler = start
    p.EndElementHandler = end
    p.Parse(raw, True)
    return out


def _tag_end(doc: str, i: int) -> int:
    q = None
    while True:
        c = doc[i]
        if q:
            if c == q:
                q = None
        elif c in "\"'":
            q = c
        elif c == ">":
            return i + 1
        i += 1


def _lxml_valid(doc: str, dtd_obj) -> bool:
    from lxml import etree
    parser = etree.XMLParser(load_dtd=False, no_network=True, resolve_entities=False)
    try:
        tree = etree.fromstring(doc.encode("utf-8"), parser)
    except etree.XMLSyntaxError:
        return False
    return dtd_obj.validate(tree)


def _xml_cases(rng: random.Random, per_folder: int, trunc: int) -> list[dict]:
    from lxml import etree
    base = SHARED / "dtd"
    manifest = json.loads((base / "instances" / "_manifest.json").read_text())
    cases: list[dict] = []
    for folder in sorted(manifest):
        info = manifest[folder]
        root = next(iter(info["doctype_root_names"]))
        dtd_obj = etree.DTD(str(base / info["dtd"]))
        files = sorted(f for f in (base / "instances" / folder).iterdir()
                       if f.stat().st_size <= 6000)
        rng.shuffle(files)
        for f in files[:per_folder]:
            doc = f.read_text(encoding="utf-8").strip()
            els = _elements(doc)
            r = els[0]
            rel = str(f.relative_to(SHARED))
            oracle = _lxml_valid(doc, dtd_obj)   # False e.g. for log4j prefixes without the DTD

            def case(mut, text, intended, valid, repairable, check=True):
                if check and oracle and valid != _lxml_valid(text[intended["prolog_start"]:intended["end"]]
                                                   if intended else "", dtd_obj):
                    return  # label would disagree with libxml2: leave the case out
                cases.append({"id": f"xml-{len(cases)}", "kind": "xml", "source": rel,
                              "dtd": info["dtd"], "root": root, "mutation": mut, "text": text,
                              "intended": intended, "valid": valid, "repairable": repairable,
                              "original": doc, "oracle": oracle})

            whole = {"prolog_start": 0, "start": r["start"], "end": len(doc)}
            pb = rng.choice(PROSE_BEFORE).format(root=root)
            pa = rng.choice(PROSE_AFTER)
            sh = lambda d, k: {key: v + k for key, v in d.items()}
            case("prose-before", pb + doc, sh(whole, len(pb)), True, True)
            case("prose-after", doc + pa, whole, True, True)
            case("prose-both", pb + doc + pa, sh(whole, len(pb)), True, True)
            lo, hi = r["tag_end"] + 1, r["end"] - 1
            for cut in sorted(rng.sample(range(lo, hi), min(trunc, hi - lo))):
                t = doc[:cut]
                case("truncate", t, {"prolog_start": 0, "start": r["start"], "end": cut},
                     False, None, check=False)
            # missing end tag: the root's, and an inner element's
            t = doc[:r["end_start"]] + doc[r["end"]:]
            case("missing-end-tag-root", t, {"prolog_start": 0, "start": r["start"],
                                              "end": len(t)}, False, True, check=False)
            inner = [e for e in els[1:] if not e["empty"]]
            if inner:
                e = rng.choice(inner)
                t = doc[:e["end_start"]] + doc[e["end"]:]
                d = els_decl(dtd_obj, e["name"])
                follow = doc[e["end"]:].lstrip()
                parent = els[e["parent"]]
                closes_parent = follow.startswith(f"</{parent['name']}")
                rep = True if (d in ("PCDATA", "EMPTY") or closes_parent) else None
                case("missing-end-tag", t, {"prolog_start": 0, "start": r["start"],
                                             "end": len(t)}, False, rep, check=False)
            texts = [e for e in els if not e["empty"] and e["end_start"] > e["tag_end"]
                     and doc[e["tag_end"]:e["end_start"]].strip()
                     and "<" not in doc[e["tag_end"]:e["end_start"]]
                     and els_decl(dtd_obj, e["name"]) == "PCDATA"]
            if texts:
                e = rng.choice(texts)
                at = rng.randrange(e["tag_end"], e["end_start"])
                for mut, ins in (("stray-amp", " & "), ("stray-lt", " < ")):
                    t = doc[:at] + ins + doc[at:]
                    case(mut, t, {"prolog_start": 0, "start": r["start"], "end": len(t)},
                         False, True, check=False)
            nest = [e for e in els[1:] if not e["empty"] and e["children"]]
            nest = [e for e in nest if (lc := _last_child(els, e)) is not None
                    and not lc["empty"] and lc["name"] != e["name"] and not doc[lc["end"]:e["end_start"]].strip()]
            if nest:
                e = rng.choice(nest)
                lc = _last_child(els, e)
                t = (doc[:lc["end_start"]] + doc[e["end_start"]:e["end"]]
                     + doc[lc["end"]:e["end_start"]] + doc[lc["end_start"]:lc["end"]] + doc[e["end"]:])
                case("wrong-nesting", t, {"prolog_start": 0, "start": r["start"], "end": len(t)},
                     False, False, check=False)
    return cases


def _last_child(els: list[dict], e: dict) -> dict | None:
    kids = [c for c in els if c["parent"] == e["i"]]
    return kids[-1] if kids else None


_DECL_CACHE: dict = {}


def els_decl(dtd_obj, name: str) -> str:
    """'PCDATA', 'EMPTY', 'MIXED', 'ANY' or 'CHILDREN' per libxml2's view of the DTD."""
    key = (id(dtd_obj), name)
    if key not in _DECL_CACHE:
        kind = "CHILDREN"
        for el in dtd_obj.iterelements():
            if el.name == (name.split(":", 1)[1] if el.prefix and ":" in name else name) and \
                    (el.prefix or "") == (name.split(":", 1)[0] if ":" in name else ""):
                t = el.type
                if t == "empty":
                    kind = "EMPTY"
                elif t == "any":
                    kind = "ANY"
                elif t == "mixed":
                    kind = "PCDATA" if el.content is not None and el.content.type == "pcdata" else "MIXED"
                break
        _DECL_CACHE[key] = kind
    return _DECL_CACHE[key]


def _json_cases(rng: random.Random, n_instances: int, trunc: int) -> list[dict]:
    import jsonschema
    base = SHARED / "jsonschemabench"
    picks: list[tuple[str, dict, object]] = []
    for split in sorted(p.name for p in base.iterdir() if p.is_dir()):
        files = sorted((base / split).glob("*.json"))
        rng.shuffle(files)
        got = 0
        for f in files:
            if got >= n_instances // 5:
                break
            try:
                item = json.loads(f.read_text(encoding="utf-8"))
                schema = item["schema"]
                cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
                v = cls(schema)
                for t in item.get("tests", []):
                    d = t["data"]
                    if t["valid"] and isinstance(d, (dict, list)) and d and v.is_valid(d):
                        s = json.dumps(d, ensure_ascii=False, indent=2 if got % 2 else None)
                        if 20 <= len(s) <= 4000:
                            picks.append((str(f.relative_to(SHARED)), schema, d))
                            got += 1
                            break
            except Exception:
                continue
    cases: list[dict] = []
    for idx, (rel, schema, d) in enumerate(picks):
        doc = json.dumps(d, ensure_ascii=False, indent=2 if idx % 2 else None)

        def case(mut, text, intended, valid, repairable):
            cases.append({"id": f"json-{len(cases)}", "kind": "json", "source": rel,
                          "schema": schema, "mutation": mut, "text": text, "intended": intended,
                          "valid": valid, "repairable": repairable, "original": doc,
                          "oracle": True})

        pb, pa = rng.choice(JPROSE_BEFORE), rng.choice(JPROSE_AFTER)
        case("prose-before", pb + doc, {"start": len(pb), "end": len(pb) + len(doc)}, True, True)
        case("prose-after", doc + pa, {"start": 0, "end": len(doc)}, True, True)
        case("prose-both", pb + doc + pa, {"start": len(pb), "end": len(pb) + len(doc)}, True, True)
        for cut in sorted(rng.sample(range(1, len(doc) - 1), min(trunc, len(doc) - 2))):
            case("truncate", doc[:cut], {"start": 0, "end": cut}, False, None)
        closers = [i for i, c in enumerate(doc) if c in "}]" and doc[:i].rstrip()[-1:] not in "{["
                   and _outside_string(doc, i)]
        if closers:
            i = rng.choice(closers)
            j = len(doc[:i].rstrip())
            t = doc[:j] + "," + doc[j:]
            case("trailing-comma", t, {"start": 0, "end": len(t)}, False, True)
        t = doc[:-1]
        case("missing-closer", t, {"start": 0, "end": len(t)}, False, True)
    return cases


def _outside_string(doc: str, i: int) -> bool:
    inside = False
    k = 0
    while k < i:
        c = doc[k]
        if c == "\\" and inside:
            k += 2
            continue
        if c == '"':
            inside = not inside
        k += 1
    return not inside


def generate(seed: int = 0, *, xml_per_folder: int = 20, json_instances: int = 100,
             truncations: int = 6) -> list[dict]:
    rng = random.Random(seed)
    return _xml_cases(rng, xml_per_folder, truncations) + _json_cases(rng, json_instances, truncations)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "guard" / "raw" / "corpus.jsonl"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cases = generate(args.seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    by: dict[str, int] = {}
    for c in cases:
        by[f"{c['kind']}:{c['mutation']}"] = by.get(f"{c['kind']}:{c['mutation']}", 0) + 1
    print(f"{len(cases)} cases -> {args.out}")
    for k in sorted(by):
        print(f"  {k:28s} {by[k]:5d}")


if __name__ == "__main__":
    main()
