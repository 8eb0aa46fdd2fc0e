"""Seeded eval tasks: a prompt, its grammar family and the expected field values.

Every task is generated from a seed (``generate_tasks(seed)``), never typed by hand.
Invariants
- ``expected`` maps field names to the exact decoded value a correct answer carries
  (strings; integers and booleans in their XML/JSON text form, e.g. ``"42"``, ``"true"``).
- The same ``(seed, per_family)`` always gives the same tasks, in the same order.
- Some values are Chinese (cities, product queries, app names, e-mail subjects).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Task", "FAMILIES", "generate_tasks", "example_task", "DEFAULT_PER_FAMILY"]

FAMILIES = ("user_query", "soap_command", "vehicle_request", "plist_dict",
            "get_weather", "search_product", "tool_routing")
DEFAULT_PER_FAMILY = 30  # 7 families x 30 = 210 prompts

CITIES = ["北京市", "上海市", "广州市", "深圳市", "杭州市", "成都市", "武汉市", "西安市", "南京市", "重庆市",
          "天津市", "苏州市", "长沙市", "青岛市", "厦门市"]
PRODUCTS = [("蓝牙耳机", "数码"), ("wireless mouse", "数码"), ("机械键盘", "数码"), ("phone charger", "数码"),
            ("running shoes", "服饰"), ("羽绒服", "服饰"), ("wool scarf", "服饰"), ("牛仔裤", "服饰"),
            ("咖啡豆", "食品"), ("green tea", "食品"), ("巧克力", "食品"), ("olive oil", "食品"),
            ("desk lamp", "家居"), ("保温杯", "家居"), ("bath towel", "家居"), ("收纳箱", "家居")]
COMMANDS = ["GetUserInfo", "GetOrderStatus", "CancelOrder", "ResetPassword", "ListInvoices", "UpdateAddress",
            "LockAccount", "GetBalance"]
WMI = ["LSV", "LFV", "LGB", "WVW", "WBA", "JTD", "LHG", "LRW"]
VIN_CHARS = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"
APPS = ["微信", "支付宝", "Notes", "Weather", "高德地图", "Calculator", "淘宝", "Music"]
AIRPORTS = ["PEK", "PVG", "CAN", "SZX", "CTU", "HGH", "XIY", "SHA"]
NAMES = ["alice", "bob", "wang", "li", "zhang", "chen", "liu", "zhao"]
SUBJECTS = ["会议纪要", "Weekly report", "发票", "Lunch plan", "项目进度", "Holiday schedule"]
LABELS = ["起床", "wake up", "开会", "gym", "吃药", "standup"]


@dataclass(frozen=True)
class Task:
    id: str
    family: str
    user: str  # the user's request (the system prompt comes from the family)
    expected: dict = field(default_factory=dict)


def _date(rng: random.Random) -> datetime:
    return datetime(2024, 1, 1) + timedelta(days=rng.randrange(0, 900), seconds=rng.randrange(0, 86400))


def _user_query(rng: random.Random) -> tuple[str, dict]:
    uid = str(rng.randrange(10 ** (rng.randint(3, 7)), 10 ** 8))
    t = rng.choice(["Look up the user with id {u}.", "Query user {u}.", "查询用户 {u} 的信息。",
                    "Please fetch the account of user {u}.", "帮我查一下用户{u}。"])
    return t.format(u=uid), {"user_id": uid, "action": "query"}


def _soap(rng: random.Random) -> tuple[str, dict]:
    cmd = rng.choice(COMMANDS)
    ident = rng.choice(["U9C", "ORD", "INV", "ACC"]) + "".join(rng.choice(string.digits) for _ in range(6))
    t = rng.choice(["Call ExecuteCommand with command {c} and id {i}.", "Run the ERP command {c} for {i}.",
                    "执行命令 {c}，id 为 {i}。", "Execute {c} on record {i}."])
    return t.format(c=cmd, i=ident), {"command": cmd, "id": ident}


def _vehicle(rng: random.Random) -> tuple[str, dict]:
    vin = rng.choice(WMI) + "".join(rng.choice(VIN_CHARS) for _ in range(14))
    ts = _date(rng).strftime("%Y-%m-%dT%H:%M:%SZ")
    t = rng.choice(["Book a service for vehicle {v} at {t}.", "车辆 {v} 预约保养，时间 {t}。",
                    "Send a service request for VIN {v}, time {t}.", "Vehicle {v} needs service at {t}."])
    return t.format(v=vin, t=ts), {"vin": vin, "timestamp": ts}


def _plist(rng: random.Random) -> tuple[str, dict]:
    name = rng.choice(APPS)
    build = str(rng.randrange(1, 999))
    enabled = rng.choice(["true", "false"])
    t = rng.choice(["Write the settings for app {n}: build {b}, enabled {e}.",
                    "应用 {n} 的配置：build 为 {b}，enabled 为 {e}。",
                    "Make a plist: name {n}, build {b}, enabled {e}."])
    return t.format(n=name, b=build, e=enabled), {"name": name, "build": build, "enabled": enabled}


def _weather(rng: random.Random) -> tuple[str, dict]:
    city = rng.choice(CITIES)
    d = _date(rng).strftime("%Y-%m-%d")
    t = rng.choice(["What's the weather in {c} on {d}?", "{d} {c}天气怎么样？", "Forecast for {c}, {d}.",
                    "查询{c}在{d}的天气。"])
    return t.format(c=city, d=d), {"city": city, "date": d}


def _product(rng: random.Random) -> tuple[str, dict]:
    q, cat = rng.choice(PRODUCTS)
    price = str(rng.choice([50, 80, 100, 150, 200, 300, 500, 1000, 2000]))
    t = rng.choice(["Find {q} in category {c} under {p} yuan.", "搜索{c}类的{q}，价格不超过{p}元。",
                    "Search {q} ({c}), max price {p}."])
    return t.format(q=q, c=cat, p=price), {"query": q, "category": cat, "max_price": price}


def _routing(rng: random.Random) -> tuple[str, dict]:
    tool = rng.choice(["get_weather", "search_product", "send_email", "set_alarm", "book_flight"])
    if tool == "get_weather":
        u, e = _weather(rng)
    elif tool == "search_product":
        u, e = _product(rng)
    elif tool == "send_email":
        to = f"{rng.choice(NAMES)}@example.com"
        s = rng.choice(SUBJECTS)
        u = rng.choice(["Email {t} with subject {s}.", "给 {t} 发邮件，主题是{s}。"]).format(t=to, s=s)
        e = {"to": to, "subject": s}
    elif tool == "set_alarm":
        tm = f"{rng.randrange(24):02d}:{rng.choice([0, 15, 30, 45]):02d}"
        lb = rng.choice(LABELS)
        u = rng.choice(["Set an alarm at {t} labelled {l}.", "设置{t}的闹钟，标签{l}。"]).format(t=tm, l=lb)
        e = {"time": tm, "label": lb}
    else:
        a, b = rng.sample(AIRPORTS, 2)
        d = _date(rng).strftime("%Y-%m-%d")
        u = rng.choice(["Book a flight from {a} to {b} on {d}.", "订一张{d}从{a}到{b}的机票。"]).format(a=a, b=b, d=d)
        e = {"from": a, "to": b, "date": d}
    return u, {"tool": tool, **e}


_MAKERS = {"user_query": _user_query, "soap_command": _soap, "vehicle_request": _vehicle,
           "plist_dict": _plist, "get_weather": _weather, "search_product": _product,
           "tool_routing": _routing}


def generate_tasks(seed: int = 0, per_family: int = DEFAULT_PER_FAMILY,
                   families: tuple[str, ...] = FAMILIES) -> list[Task]:
    """``per_family`` tasks for each family, deterministic in ``seed``."""
    out: list[Task] = []
    for fam in families:
        if fam not in _MAKERS:
            raise ValueError(f"unknown task family {fam!r}; choose from {', '.join(FAMILIES)}")
        rng = random.Random(f"{seed}:{fam}")
        for i in range(per_family):
            user, exp = _MAKERS[fam](rng)
            out.append(Task(f"{fam}-{i:03d}", fam, user, exp))
    return out


def example_task(family: str) -> Task:
    """The few-shot example of a family (from a seed no eval task uses)."""
    user, exp = _MAKERS[family](random.Random(f"few-shot:{family}"))
    return Task(f"{family}-example", family, user, exp)
