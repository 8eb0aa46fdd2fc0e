"""SmolLM2 under the shipped XML grammars: every constrained output is DTD-valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lxml import etree

from decoding import Compiler, generate
from decoding.frontends.xml.grammar import grammar_from_spec
from evals.xml50 import xml_prompts

pytestmark = pytest.mark.model
GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
SPECS = json.loads((GRAMMARS / "xml_grammars.json").read_text())


@pytest.mark.parametrize("i, name, prompt", [(i, n, p) for i, (n, p) in enumerate(xml_prompts(9, seed=1))])
def test_constrained_xml_is_dtd_valid(smollm2, i, name, prompt):
    cg = Compiler(smollm2).compile_ir(grammar_from_spec(SPECS[name], str(GRAMMARS)))
    g = generate(smollm2, cg, messages=[{"role": "user", "content": prompt}], max_tokens=160,
                 temperature=0.7, seed=i)
    assert g.complete, g
    dtd = etree.DTD(str(GRAMMARS / SPECS[name]["dtd"]))
    assert dtd.validate(etree.fromstring(g.text.encode())), (g.text, dtd.error_log)
