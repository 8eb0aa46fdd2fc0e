"""50 XML tool-call prompts on SmolLM2-135M-Instruct: constrained vs free (issue 4).

    python -m evals.xml50 [--n 50]

Seeded variations of the SCENARIOS shapes: query a user by id, a SOAP 1.1 ExecuteCommand
envelope, a vehicle request with VIN and ISO timestamp; some values in Chinese.  A
constrained output must be exactly a well-formed, DTD-valid document (lxml/libxml2 checks
it); for free output the first complete element is extracted with the guard
(`decoding.guard.extract_xml`) and checked the same way.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parents[1]
GRAMMARS = ROOT / "grammars"


def xml_prompts(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(grammar name, prompt) pairs with seeded values."""
    rng = random.Random(seed)
    vin_chars = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"
    out = []
    for i in range(n):
        k = i % 3
        if k == 0:
            uid = rng.randint(1000, 999999)
            who = rng.choice(["张三", "李四", "Alice", "王五"])
            out.append(("user_query", f"用户 {who} (user id {uid}) wants to query the account. Write the XML request "
                                      "<request><user_id>…</user_id><action>query</action></request>."))
        elif k == 1:
            cmd = rng.choice(["GetUserInfo", "ResetPassword", "ListOrders"])
            cid = f"U{rng.randint(1, 9)}C{rng.randint(100000, 999999)}"
            out.append(("soap_execute_command", f"Write the SOAP 1.1 envelope that calls ExecuteCommand with command "
                                                f"{cmd} and id {cid}."))
        else:
            vin = "".join(rng.choice(vin_chars) for _ in range(17))
            ts = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:30:00Z"
            out.append(("vehicle_request", f"车辆服务请求: VIN {vin}, time {ts}. Write the XML request with vin "
                                           "and timestamp elements."))
    return out


def main() -> None:
    from decoding import Compiler, generate
    from decoding.guard import extract_xml
    from decoding.models import load_model
    from decoding.frontends.xml.grammar import grammar_from_spec

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    specs = json.loads((GRAMMARS / "xml_grammars.json").read_text())
    llm = load_model("smollm2")
    compiled, dtds = {}, {}
    for name in ("user_query", "soap_execute_command", "vehicle_request"):
        compiled[name] = Compiler(llm).compile_ir(grammar_from_spec(specs[name], str(GRAMMARS)))
        dtds[name] = etree.DTD(str(GRAMMARS / specs[name]["dtd"]))

    def valid(name: str, text: str | None) -> bool:
        if not text:
            return False
        try:
            return dtds[name].validate(etree.fromstring(text.encode()))
        except etree.XMLSyntaxError:
            return False

    ok_c = ok_f = 0
    for i, (name, prompt) in enumerate(xml_prompts(args.n)):
        msgs = [{"role": "user", "content": prompt}]
        g = generate(llm, compiled[name], messages=msgs, max_tokens=160, temperature=0.7, seed=i)
        ok_c += valid(name, g.text)
        out = llm.create_chat_completion(messages=msgs, max_tokens=160, temperature=0.7, seed=i)
        frag = extract_xml(out["choices"][0]["message"]["content"] or "")
        ok_f += valid(name, frag.text if frag is not None else None)
    print(f"SmolLM2-135M-Instruct, {args.n} XML tool-call prompts (user query, SOAP, vehicle), temperature 0.7")
    print(f"constrained:   {ok_c}/{args.n} well-formed and DTD-valid")
    print(f"unconstrained: {ok_f}/{args.n} well-formed and DTD-valid (first element extracted by the guard)")


if __name__ == "__main__":
    main()
