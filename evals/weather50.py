"""50 get_weather prompts on SmolLM2-135M-Instruct at temperature 0.7: constrained vs free.

    python -m evals.weather50 [--n 50]

Prints how many outputs parse as JSON and validate against grammars/get_weather.json, with
the constraint (GrammarLogitsProcessor via decoding.generate) and without (same prompts,
same seeds).  The constrained count is also asserted by tests/test_processor.py.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[1]
CITIES = ["北京市", "上海市", "广州市", "深圳市", "杭州市", "成都市", "Paris", "Berlin", "New York", "Tokyo"]


def weather_prompts(n: int, seed: int = 0) -> list[str]:
    """Seeded variations of a get_weather request (city, date, phrasing)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        city = rng.choice(CITIES)
        date = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        style = rng.choice(["What's the weather in {c} on {d}?", "Call get_weather for {c}, date {d}.",
                            "天气 {c} {d} 怎么样？", "Need the forecast: city={c} day={d}"])
        out.append(style.format(c=city, d=date) + " Reply with the get_weather JSON arguments only.")
    return out


def valid(text: str, validator: jsonschema.Draft202012Validator) -> bool:
    try:
        return validator.is_valid(json.loads(text))
    except ValueError:
        return False


def main() -> None:
    from decoding import compile_json_schema, generate
    from decoding.models import load_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    schema = json.loads((ROOT / "grammars" / "get_weather.json").read_text())
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    llm = load_model("smollm2")
    cg = compile_json_schema(schema, llm)
    ok_c = ok_f = 0
    for i, p in enumerate(weather_prompts(args.n)):
        msgs = [{"role": "user", "content": p}]
        g = generate(llm, cg, messages=msgs, max_tokens=64, temperature=0.7, seed=i)
        ok_c += valid(g.text, validator)
        out = llm.create_chat_completion(messages=msgs, max_tokens=64, temperature=0.7, seed=i)
        ok_f += valid((out["choices"][0]["message"]["content"] or "").strip(), validator)
    print(f"SmolLM2-135M-Instruct, {args.n} get_weather prompts, temperature 0.7")
    print(f"constrained:   {ok_c}/{args.n} parse and validate")
    print(f"unconstrained: {ok_f}/{args.n} parse and validate")


if __name__ == "__main__":
    main()
