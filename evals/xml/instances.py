"""All real instances of ../shared/corpora/dtd in canonical form against the automata.

    PYTHONPATH=. .venv/bin/python evals/xml/instances.py [--part I --parts N]

``--part/--parts`` split the hibernate profile DFAs into N chunks (each run stays short on
a small machine); the other checks run with part 0 only.

plist, log4j, web-app: one DFA per DTD.  hibernate-mapping (too large for one explicit
DFA): every instance against (a) the whole DTD compiled by ``compile_grammar`` for the
llama-bpe vocabulary, which picks the pushdown back-end (decoding.backends.pushdown.index), (b) the
reference recognizer of tests/xml_helpers and (c) DFAs restricted to the element names an
instance uses (``only=``).  Prints accepted/total per DTD and the _invalid/ rejections.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from decoding.backends.automaton import NFAMatcher, compile_dfa  # noqa: E402
from decoding.frontends.xml.dtd import parse_dtd  # noqa: E402
from decoding.errors import LimitError  # noqa: E402
from decoding.frontends.xml.canonical import CanonicalizeError, canonicalize, parse_xml  # noqa: E402
from decoding.frontends.xml.grammar import dtd_grammar  # noqa: E402
from tests.xml_helpers import DTD_DIR, ir_accepts  # noqa: E402

MAN = json.loads((DTD_DIR / "instances" / "_manifest.json").read_text())
SETUP = {"apple-plist": ("plist", 3, {}), "log4j": ("log4j:configuration", 2, {}),
         "web-app_2_3": ("web-app", 2, {})}


def files(folder: str) -> list[Path]:
    return sorted(p for p in (DTD_DIR / "instances" / folder).iterdir() if not p.name.startswith("_"))


def names(el, acc: set) -> set:
    acc.add(el.name)
    for c in el.children:
        if not isinstance(c, str):
            names(c, acc)
    return acc


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    a = ap.parse_args()
    for folder, (root, depth, opts) in SETUP.items():
        if a.part != 0:
            break
        d = parse_dtd((DTD_DIR / MAN[folder]["dtd"]).read_text(encoding="utf-8"))
        t = time.time()
        dfa = compile_dfa(dtd_grammar(d, root, max_depth=depth, **opts))
        fs = files(folder)
        ok = sum(dfa.accepts(canonicalize(p.read_bytes(), d)) for p in fs)
        print(f"{folder}: accepted {ok}/{len(fs)} (states={dfa.n_states}, {time.time() - t:.1f}s)")
        inv = DTD_DIR / "instances" / "_invalid" / folder
        if inv.exists():
            for p in sorted(x for x in inv.iterdir() if not x.name.startswith("_")):
                try:
                    verdict = "accepted!" if dfa.accepts(canonicalize(p.read_bytes(), d)) else "rejected"
                except CanonicalizeError as exc:
                    verdict = f"rejected (not well-formed: {exc})"
                print(f"   _invalid/{folder}/{p.name}: {verdict}")
    folder = "hibernate-mapping-3.0"
    d = parse_dtd((DTD_DIR / MAN[folder]["dtd"]).read_text(encoding="utf-8"))
    g = dtd_grammar(d, "hibernate-mapping", max_depth=2)
    fs = files(folder)
    t = time.time()
    canon = {p.name: canonicalize(p.read_bytes(), d) for p in fs}
    if a.part == 0:
        from decoding.backends.select import compile_grammar
        from decoding.vocab import Vocab
        v = Vocab.from_gguf(DTD_DIR.parent / "vocab" / "ggml-vocab-llama-bpe.gguf")
        t = time.time()
        cg = compile_grammar(g, v)
        t_compile = time.time() - t
        t = time.time()
        ok_pd = sum(cg.accepts(c) for c in canon.values())
        print(f"{folder}: whole DTD, {type(cg).__name__} ({cg.stats().get('rules', '-')} rules, "
              f"{cg.stats()['states']} states, compiled in {t_compile:.1f}s): accepted "
              f"{ok_pd}/{len(fs)} ({time.time() - t:.1f}s)")
        t = time.time()
        ok_ir = sum(ir_accepts(g, c) for c in canon.values())
        print(f"{folder}: reference recognizer accepted {ok_ir}/{len(fs)} ({time.time() - t:.1f}s)")
    groups: dict[frozenset, list[bytes]] = defaultdict(list)
    for c in canon.values():
        groups[frozenset(names(parse_xml(c), set()))].append(c)
    ordered = sorted(groups.items(), key=lambda kv: sorted(kv[0]))
    chunk = ordered[a.part::a.parts]
    t = time.time()
    ok_dfa, biggest = 0, 0
    n_docs = sum(len(v) for _, v in chunk)
    too_big: list[tuple[int, int, int]] = []  # (profile size, documents, accepted by the NFA)
    for prof, docs in chunk:
        gp = dtd_grammar(d, "hibernate-mapping", max_depth=2, only=prof)
        try:
            dfa = compile_dfa(gp)
        except LimitError:
            try:
                nfa = NFAMatcher(gp)  # same automaton, simulated without determinising it
            except LimitError:
                too_big.append((len(prof), len(docs), -1))  # the unrolled NFA is too large as well
                continue
            too_big.append((len(prof), len(docs), sum(nfa.accepts(c) for c in docs)))
            continue
        biggest = max(biggest, dfa.n_states)
        ok_dfa += sum(dfa.accepts(c) for c in docs)
    print(f"{folder}: profile DFAs (part {a.part}/{a.parts}) accepted {ok_dfa}/{n_docs} "
          f"({len(chunk)} of {len(groups)} profiles, largest {biggest} states, "
          f"{time.time() - t:.1f}s)")
    if too_big:
        sim = [t for t in too_big if t[2] >= 0]
        print(f"   {sum(n for _, n, _ in too_big)} documents in {len(too_big)} profiles exceed the DFA "
              f"state limit (profile sizes {sorted(k for k, _, _ in too_big)}); simulated as an NFA "
              f"(decoding.backends.automaton.NFAMatcher): {sum(a for _, _, a in sim)}/{sum(n for _, n, _ in sim)} "
              f"accepted; {sum(n for _, n, a in too_big if a < 0)} documents exceed the NFA limit too "
              "(covered by the reference recognizer and the GBNF back-end only)")


if __name__ == "__main__":
    main()
