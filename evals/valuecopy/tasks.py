"""Value-copy tasks: generated deterministically from templates (no hand-typed tasks).

Five tools (:data:`TOOLS`), each a JSON-Schema tool definition.  Every expected argument is
either a span of the request (cities in Chinese or English, ISO dates, ids, prices, free
text) or a member of a closed set the schema lists (``enum``) that the request names
verbatim.

Invariants
- ``generate(seed, n)`` gives the same ``n`` tasks for the same seed, ids unique, tools in
  rotation (each tool gets n/5 tasks, ±1).
- Every expected value (as JSON text: strings as is, numbers in ``str``) occurs verbatim
  in the request; the correct answer (``Family.render``) is valid against the tool schema.
- Some requests are Chinese, some English, some mixed.
"""

from __future__ import annotations

import json
import random
import string
from datetime import date, timedelta

from evals.harness.families import DEFAULT_WHITESPACE, Family, _json_fields, _json_grammar
from evals.harness.tasks import Task

__all__ = ["TOOLS", "FAMILY", "TOOL_NAMES", "generate", "example", "DEFAULT_N"]

DEFAULT_N = 200

CITIES_ZH = ["北京市", "上海市", "广州市", "深圳市", "杭州市", "成都市", "武汉市", "西安市", "南京市", "重庆市",
             "天津市", "苏州市", "长沙市", "青岛市", "厦门市", "昆明市"]
CITIES_EN = ["Beijing", "Shanghai", "Paris", "London", "Tokyo", "New York", "Berlin", "Madrid", "Sydney",
             "Toronto", "Seoul", "Singapore", "Chicago", "Rome", "Vienna", "Dubai"]
PRODUCTS = ["wireless headphones", "蓝牙耳机", "mechanical keyboard", "机械键盘", "running shoes", "羽绒服",
            "coffee beans", "咖啡豆", "desk lamp", "保温杯", "phone charger", "wool scarf", "green tea", "收纳箱"]
CATEGORIES = ["数码", "服饰", "食品", "家居"]
CURRENCIES = ["CNY", "USD", "EUR", "JPY", "GBP", "HKD"]
UNITS = ["celsius", "fahrenheit"]


def _schema(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_DATE = {"type": "string", "format": "date"}
TOOLS: dict[str, tuple[str, dict]] = {
    "get_weather": ("Get the weather forecast for a city on a date.", _schema(
        {"city": {"type": "string", "minLength": 1, "maxLength": 24}, "date": _DATE,
         "unit": {"enum": UNITS}}, ["city", "date", "unit"])),
    "search_product": ("Search the product catalogue.", _schema(
        {"query": {"type": "string", "minLength": 1, "maxLength": 48}, "category": {"enum": CATEGORIES},
         "max_price": {"type": "integer", "minimum": 0, "maximum": 1000000}}, ["query", "category", "max_price"])),
    "get_order": ("Look up an order of a user.", _schema(
        {"user_id": {"type": "string", "pattern": "^U[0-9A-Z]{8}$"},
         "order_id": {"type": "string", "pattern": "^ORD-[0-9]{8}-[0-9]{4}$"}}, ["user_id", "order_id"])),
    "convert_currency": ("Convert an amount of money between currencies.", _schema(
        {"amount": {"type": "number", "minimum": 0}, "from": {"enum": CURRENCIES}, "to": {"enum": CURRENCIES}},
        ["amount", "from", "to"])),
    "book_flight": ("Book a flight between two cities on a date.", _schema(
        {"from_city": {"type": "string", "minLength": 1, "maxLength": 24},
         "to_city": {"type": "string", "minLength": 1, "maxLength": 24}, "date": _DATE},
        ["from_city", "to_city", "date"])),
}
TOOL_NAMES = tuple(TOOLS)


def _city(rng: random.Random) -> str:
    return rng.choice(CITIES_ZH if rng.random() < 0.5 else CITIES_EN)


def _iso(rng: random.Random) -> str:
    return (date(2024, 1, 1) + timedelta(days=rng.randrange(0, 1000))).isoformat()


def _weather(rng: random.Random) -> tuple[str, dict]:
    c, d, u = _city(rng), _iso(rng), rng.choice(UNITS)
    t = rng.choice(["What's the weather in {c} on {d}? Use {u}.", "{d} {c}的天气怎么样？单位用{u}。",
                    "Forecast for {c}, {d}, in {u}.", "查询{c}在{d}的天气（{u}）。"])
    return t.format(c=c, d=d, u=u), {"city": c, "date": d, "unit": u}


def _product(rng: random.Random) -> tuple[str, dict]:
    q, cat = rng.choice(PRODUCTS), rng.choice(CATEGORIES)
    p = str(rng.choice([50, 80, 100, 150, 200, 299, 300, 500, 1000, 2000, 3500]))
    t = rng.choice(["Find {q} in category {c} under {p} yuan.", "搜索{c}类的{q}，价格不超过{p}元。",
                    "Search {q} ({c}), max price {p}.", "I want {q}, category {c}, at most {p} yuan."])
    return t.format(q=q, c=cat, p=p), {"query": q, "category": cat, "max_price": p}


def _order(rng: random.Random) -> tuple[str, dict]:
    u = "U" + "".join(rng.choice(string.digits + string.ascii_uppercase) for _ in range(8))
    o = f"ORD-{rng.randrange(20240101, 20251231)}-{rng.randrange(10000):04d}"
    t = rng.choice(["Where is order {o} of user {u}?", "查一下用户{u}的订单{o}。",
                    "User {u} asks about order {o}.", "订单 {o}（用户 {u}）到哪了？"])
    return t.format(o=o, u=u), {"user_id": u, "order_id": o}


def _money(rng: random.Random) -> tuple[str, dict]:
    a = rng.choice([f"{rng.randrange(1, 5000)}", f"{rng.randrange(1, 999)}.{rng.randrange(1, 100):02d}"])
    a = a.rstrip("0").rstrip(".") if "." in a else a
    f, to = rng.sample(CURRENCIES, 2)
    t = rng.choice(["Convert {a} {f} to {t}.", "把{a} {f}换成{t}。", "How much is {a} {f} in {t}?",
                    "{a} {f} 等于多少 {t}？"])
    return t.format(a=a, f=f, t=to), {"amount": a, "from": f, "to": to}


def _flight(rng: random.Random) -> tuple[str, dict]:
    pool = CITIES_ZH if rng.random() < 0.5 else CITIES_EN
    a, b = rng.sample(pool, 2)
    d = _iso(rng)
    t = rng.choice(["Book a flight from {a} to {b} on {d}.", "订一张{d}从{a}到{b}的机票。",
                    "I need to fly {a} → {b} on {d}.", "帮我订{d}{a}飞{b}的航班。"])
    return t.format(a=a, b=b, d=d), {"from_city": a, "to_city": b, "date": d}


_MAKERS = {"get_weather": _weather, "search_product": _product, "get_order": _order,
           "convert_currency": _money, "book_flight": _flight}


def _render(name: str):
    schema = TOOLS[name][1]

    def render(e: dict) -> str:
        v = {}
        for k in schema["properties"]:
            typ = schema["properties"][k].get("type")
            v[k] = int(e[k]) if typ == "integer" else (json.loads(e[k]) if typ == "number" else e[k])
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return render


def family(name: str, schema: dict | None = None, tag: str = "") -> Family:
    """The tool as a harness :class:`Family` (``schema`` overrides the tool's, e.g. with
    the properties in another order; ``tag`` names the variant)."""
    desc, base = TOOLS[name]
    s = schema or base
    key = name + tag
    return Family(name, "json", desc, None, 64,
                  lambda ws=DEFAULT_WHITESPACE: _json_grammar("valuecopy:" + key, s, ws),
                  _render(name), _json_fields, schema=s)


FAMILY = {n: family(n) for n in TOOLS}


def generate(seed: int = 0, n: int = DEFAULT_N) -> list[Task]:
    """``n`` tasks, tools in rotation, deterministic in ``seed``."""
    rngs = {t: random.Random(f"valuecopy:{seed}:{t}") for t in TOOLS}
    out = []
    for i in range(n):
        tool = TOOL_NAMES[i % len(TOOL_NAMES)]
        user, exp = _MAKERS[tool](rngs[tool])
        out.append(Task(f"{tool}-{i:03d}", tool, user, exp))
    return out


def example(tool: str) -> Task:
    """The worked example of a tool (a seed no benchmark task uses)."""
    user, exp = _MAKERS[tool](random.Random(f"valuecopy-few-shot:{tool}"))
    return Task(f"{tool}-example", tool, user, exp)
