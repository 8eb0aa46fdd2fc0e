"""Real DTD instances (../shared/corpora/dtd) in canonical form are accepted by the automaton;
the known-invalid ones are rejected; random walks validate with lxml."""

import json
import random
from collections import defaultdict

import lxml.etree as ET
import pytest

from decoding.backends.automaton import compile_dfa
from decoding.frontends.xml.dtd import parse_dtd
from decoding.frontends.xml.canonical import CanonicalizeError, canonicalize, parse_xml
from decoding.frontends.xml.grammar import dtd_grammar
from tests.xml_helpers import DTD_DIR, ir_accepts, random_walk_bytes

MANIFEST = json.loads((DTD_DIR / "instances" / "_manifest.json").read_text())
# folder -> (root, per-element recursion depth the instances need, extra options)
SETUP = {
    "apple-plist": ("plist", 3, {}),
    "log4j": ("log4j:configuration", 2, {}),
    # ID uniqueness is not regular, so random walks could repeat an id: web-app's #IMPLIED
    # ids are left out (ids="omit"); its one real instance carries none
    "web-app_2_3": ("web-app", 2, {"ids": "omit"}),
}
HIBERNATE = "hibernate-mapping-3.0"
# instances of _invalid/ that break only constraints outside the DTD subset: none so far
OUTSIDE_SUBSET: dict[str, str] = {}


def _dtd(folder):
    name = MANIFEST[folder]["dtd"]
    return parse_dtd((DTD_DIR / name).read_text(encoding="utf-8"), source=name)


def _instances(folder):
    return sorted(p for p in (DTD_DIR / "instances" / folder).iterdir()
                  if not p.name.startswith("_"))


@pytest.fixture(scope="module")
def compiled():
    out = {}
    for folder, (root, depth, opts) in SETUP.items():
        d = _dtd(folder)
        out[folder] = (d, compile_dfa(dtd_grammar(d, root, max_depth=depth, **opts)))
    return out


@pytest.mark.parametrize("folder", list(SETUP))
def test_every_instance_accepted(compiled, folder):
    d, dfa = compiled[folder]
    files = _instances(folder)
    assert len(files) == MANIFEST[folder]["count"]
    rejected = [p.name for p in files if not dfa.accepts(canonicalize(p.read_bytes(), d))]
    assert rejected == []


def test_flexible_whitespace_instances(compiled):
    d, _ = compiled["log4j"]
    root, depth, _ = SETUP["log4j"]
    dfa = compile_dfa(dtd_grammar(d, root, max_depth=depth, whitespace="flexible", max_ws=6))
    for p in _instances("log4j"):
        assert dfa.accepts(canonicalize(p.read_bytes(), d, whitespace="flexible", max_ws=6)), p
        assert not dfa.accepts(canonicalize(p.read_bytes(), d, whitespace="flexible",
                                            max_ws=40)) or b"\n" * 7 not in p.read_bytes()


def _names(el, acc):
    acc.add(el.name)
    for c in el.children:
        if not isinstance(c, str):
            _names(c, acc)
    return acc


@pytest.fixture(scope="module")
def hibernate_pushdown():
    """The whole hibernate-mapping DTD (no element profile) for llama-bpe: too large for one
    explicit DFA, so ``backend="auto"`` compiles it to the pushdown back-end."""
    from decoding.backends.select import compile_grammar
    from decoding.backends.pushdown.index import CompiledPushdown
    from tests.conftest import get_vocab
    d = _dtd(HIBERNATE)
    cg = compile_grammar(dtd_grammar(d, "hibernate-mapping", max_depth=2), get_vocab("llama-bpe"))
    assert isinstance(cg, CompiledPushdown)
    return d, cg


def test_hibernate_every_instance_accepted_by_pushdown(hibernate_pushdown):
    d, cg = hibernate_pushdown
    files = _instances(HIBERNATE)
    assert len(files) == MANIFEST[HIBERNATE]["count"] == 449
    rejected = [p.name for p in files if not cg.accepts(canonicalize(p.read_bytes(), d))]
    assert rejected == []
    # and small edits of real instances are rejected (the automaton is not trivially permissive)
    doc = canonicalize(files[0].read_bytes(), d)
    assert not cg.accepts(doc.replace(b"<class ", b"<klass ", 1))
    assert not cg.accepts(doc[:-1])


def test_hibernate_token_walks_validate(hibernate_pushdown):
    """Token-level random walks over the whole DTD on the 128k llama-bpe vocabulary: every
    finished walk is well-formed, DTD-valid for lxml and accepted by the reference
    recognizer; the mask is never empty on the way."""
    import numpy as np
    from decoding.testing import random_walk
    d, cg = hibernate_pushdown
    g = dtd_grammar(d, "hibernate-mapping", max_depth=2)
    validator = ET.DTD(str(DTD_DIR / MANIFEST[HIBERNATE]["dtd"]))
    rng = np.random.default_rng(2)
    finished = 0
    for _ in range(60):
        w = random_walk(cg, rng, max_steps=3000)
        if not w.finished:
            continue  # uniform walks through free attribute text can run long
        finished += 1
        tree = ET.fromstring(w.text)
        ok = validator.validate(tree)
        # libxml2 flags the DTD's own non-deterministic content model of hibernate-mapping
        errs = [e for e in validator.error_log if "DTD_CONTENT_NOT_DETERMINIST" not in e.type_name]
        assert ok or not errs, (w.text[:300], errs[:2])
        assert ir_accepts(g, w.text)
    assert finished >= 30


def test_hibernate_instances_reference_recognizer():
    """hibernate-mapping is too large for one explicit DFA (its path tree has ~2e7 NFA
    states even without recursion); every instance is checked against the full grammar IR
    with the pushdown reference recognizer (a sample here, all in evals/xml/instances.py),
    and small ones against profile DFAs below."""
    d = _dtd(HIBERNATE)
    g = dtd_grammar(d, "hibernate-mapping", max_depth=2)
    files = _instances(HIBERNATE)
    assert len(files) == MANIFEST[HIBERNATE]["count"]
    sample = files[::8]  # every 8th in pytest; all of them in evals/xml/instances.py
    rejected = [p.name for p in sample if not ir_accepts(g, canonicalize(p.read_bytes(), d))]
    assert rejected == []


def test_hibernate_instances_profile_dfa():
    """DFAs restricted (``only=``) to the elements an instance uses; instances with up to 5
    element names here (the 8 largest such groups), all 449 in evals/xml/instances.py."""
    d = _dtd(HIBERNATE)
    groups = defaultdict(list)
    for p in _instances(HIBERNATE):
        canon = canonicalize(p.read_bytes(), d)
        names = frozenset(_names(parse_xml(canon), set()))
        if len(names) <= 5:
            groups[names].append((p.name, canon))
    chosen = sorted(groups.items(), key=lambda kv: (-len(kv[1]), sorted(kv[0])))[:8]
    assert sum(len(v) for _, v in chosen) >= 40
    for names, docs in chosen:
        dfa = compile_dfa(dtd_grammar(d, "hibernate-mapping", max_depth=2, only=names))
        assert [n for n, c in docs if not dfa.accepts(c)] == []


@pytest.mark.parametrize("folder", ["apple-plist", "log4j"])
def test_invalid_instances_rejected(compiled, folder):
    d, dfa = compiled[folder]
    errors = json.loads((DTD_DIR / "instances" / "_invalid" / folder /
                         "_validation_errors.json").read_text())
    files = sorted(p for p in (DTD_DIR / "instances" / "_invalid" / folder).iterdir()
                   if not p.name.startswith("_"))
    assert {p.name for p in files} == set(errors)
    for p in files:
        if p.name in OUTSIDE_SUBSET:
            continue
        try:
            canon = canonicalize(p.read_bytes(), d)
        except CanonicalizeError:
            assert errors[p.name]["status"] == "not-wellformed"
            continue
        assert not dfa.accepts(canon), p.name


@pytest.mark.parametrize("folder", list(SETUP))
def test_random_walks_validate(compiled, folder):
    d, dfa = compiled[folder]
    validator = ET.DTD(str(DTD_DIR / MANIFEST[folder]["dtd"]))
    rng = random.Random(11)
    for _ in range(40):
        doc = random_walk_bytes(dfa, rng)
        assert validator.validate(ET.fromstring(doc)), (doc[:300], validator.error_log)
