"""SmolLM2 tool calls under emitted GBNF: N JSON and N XML generations, all validated.

JSON: a tool-call schema -> compile_schema -> to_gbnf -> llama.cpp's native grammar
sampler (create_completion(grammar=...)); each output is validated with jsonschema.
XML: a tool-call DTD -> dtd_grammar -> to_gbnf -> same path; each output is validated
with lxml against the DTD.

Run:  PYTHONPATH=. .venv/bin/python evals/gbnf/smollm2_toolcalls.py --n 20
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from decoding.frontends.xml.dtd import parse_dtd  # noqa: E402
from decoding.runtime.llama_grammar import generate_with_gbnf  # noqa: E402
from decoding.models import load_model  # noqa: E402
from decoding.frontends.jsonschema import compile_schema  # noqa: E402
from decoding.frontends.xml.grammar import dtd_grammar  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"enum": ["get_weather", "search", "send_email"]},
        "arguments": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 40},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}

DTD = """<!ELEMENT tool_call (name, arg, arg?)>
<!ELEMENT name (#PCDATA)>
<!ELEMENT arg (#PCDATA)>
<!ATTLIST arg key (query|limit|to) #REQUIRED>
"""

PROMPT = ("<|im_start|>user\nCall a tool to find the weather in Paris. Answer with the "
          "tool call only.<|im_end|>\n<|im_start|>assistant\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=160)
    args = ap.parse_args(argv)
    import jsonschema
    from lxml import etree

    llm = load_model("smollm2")
    t0 = time.time()
    json_g = compile_schema(SCHEMA).grammar
    ok_json = 0
    for i in range(args.n):
        text = generate_with_gbnf(llm, json_g, prompt=PROMPT, max_tokens=args.max_tokens,
                                  temperature=0.9, seed=i).text
        try:
            jsonschema.validate(json.loads(text), SCHEMA)
            ok_json += 1
        except Exception as e:  # noqa: BLE001 - report every failure
            print(f"json #{i} invalid: {e!s:.100} :: {text!r:.200}")
    dtd = parse_dtd(DTD, source="tool_call.dtd")
    xml_g = dtd_grammar(dtd, "tool_call", xml_declaration="none",
                        text_patterns={"name": "[a-z_]{1,20}", "arg": "[A-Za-z0-9 ]{1,30}"})
    ldtd = etree.DTD(io.StringIO(DTD))
    ok_xml = 0
    for i in range(args.n):
        text = generate_with_gbnf(llm, xml_g, prompt=PROMPT.replace("tool call only", "XML tool call only"),
                                  max_tokens=args.max_tokens, temperature=0.9, seed=i).text
        try:
            doc = etree.fromstring(text.encode())
            if not ldtd.validate(doc):
                raise ValueError(str(ldtd.error_log.filter_from_errors()))
            ok_xml += 1
        except Exception as e:  # noqa: BLE001 - report every failure
            print(f"xml #{i} invalid: {e!s:.100} :: {text!r:.200}")
    print(f"JSON tool calls valid: {ok_json}/{args.n}")
    print(f"XML tool calls valid:  {ok_xml}/{args.n}")
    print(f"({time.time() - t0:.0f}s)")
    return 0 if ok_json == ok_xml == args.n else 1


if __name__ == "__main__":
    raise SystemExit(main())
