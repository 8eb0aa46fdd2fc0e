"""The shipped XML grammars (grammars/xml_grammars.json) accept the SCENARIOS examples."""

import json
from pathlib import Path

import pytest

from decoding.backends.automaton import compile_dfa
from decoding.frontends.xml.grammar import grammar_from_spec

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
SPECS = json.loads((GRAMMARS / "xml_grammars.json").read_text())
SOAP = ('<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>'
        '<urn:ExecuteCommand xmlns:urn="http://tempuri.org/"><command>GetUserInfo</command>'
        '<id>{id}</id></urn:ExecuteCommand></soap:Body></soap:Envelope>')
VEH = "<request><vin>{vin}</vin><timestamp>{ts}</timestamp></request>"

CASES = {
    "user_query": (["<request><user_id>12345</user_id><action>query</action></request>"],
                   ["<request><user_id>12a</user_id><action>query</action></request>",
                    "<request><user_id>1</user_id><action>delete</action></request>",
                    "Here is the XML request: <request><user_id>1</user_id><action>query</action></request>",
                    "<request><user_id>1</user_id><action>query</action>"]),
    "soap_execute_command": ([SOAP.format(id="U9C123456")],
                             [SOAP.format(id="U9C 123"), SOAP.replace(' xmlns:urn="http://tempuri.org/"', ""),
                              SOAP.format(id="x").replace("<soap:Body>", "<soap:Body>\n")]),
    "vehicle_request": ([VEH.format(vin="LSVAM2BR1PA123456", ts="2024-06-15T10:30:00Z")],
                        [VEH.format(vin="LSVAM2BR1PA12345O", ts="2024-06-15T10:30:00Z"),
                         VEH.format(vin="LSVAM2BR1PA123456", ts="2024-13-15T10:30:00Z"),
                         VEH.format(vin="LSVAM2BR1PA123456", ts="2024-06-15 10:30:00")]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_shipped_examples(name):
    dfa = compile_dfa(grammar_from_spec(SPECS[name], str(GRAMMARS)))
    good, bad = CASES[name]
    assert all(dfa.accepts(g.encode()) for g in good)
    assert not any(dfa.accepts(b.encode()) for b in bad)
