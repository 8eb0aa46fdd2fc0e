"""guarded_call: bounded re-prompting with specific errors, then clarification."""

import pytest

from decoding.errors import UsageError
from decoding.frontends.xml.dtd import parse_dtd
from decoding.guard import guarded_call

SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string"}, "date": {"type": "string", "format": "date"}},
          "required": ["city", "date"]}


class Scripted:
    """A stand-in with llama-cpp-python's create_completion shape, replaying answers."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.prompts = []

    def create_completion(self, prompt, **kw):
        self.prompts.append(prompt)
        return {"choices": [{"text": self.answers[len(self.prompts) - 1]}]}


def test_retry_with_specific_message_then_ok():
    llm = Scripted('{"city": "北京市", "date": "明天"}', '{"city": "北京市", "date": "2024-06-16"}')
    r = guarded_call(llm, "Q: weather tomorrow?\nA: ", schema=SCHEMA)
    assert r.ok and r.value == {"city": "北京市", "date": "2024-06-16"} and len(r.attempts) == 2
    assert "/date: '明天' does not match format date (YYYY-MM-DD)" in llm.prompts[1]


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_budget_then_clarification(retries):
    llm = Scripted(*(['no idea'] * 10))
    r = guarded_call(llm, "Q: ", schema=SCHEMA, retries=retries)
    assert not r.ok and len(llm.prompts) == retries + 1
    assert r.clarification is not None and "clarify" in r.clarification.question
    assert r.clarification.errors[0].code == "no-fragment"


def test_xml_with_repair():
    dtd = parse_dtd("<!ELEMENT r (a)><!ELEMENT a (#PCDATA)>")
    llm = Scripted("Here: <r><a>x & y</a>")
    r = guarded_call(llm, "Q: ", dtd=dtd, root="r", repair=True)
    assert r.ok and r.text == "<r><a>x &amp; y</a></r>" and len(llm.prompts) == 1


@pytest.mark.parametrize("kw", [{}, {"schema": SCHEMA, "dtd": parse_dtd("<!ELEMENT r EMPTY>")},
                                {"schema": SCHEMA, "retries": -1}, {"schema": SCHEMA, "retries": 99}])
def test_bad_arguments(kw):
    with pytest.raises(UsageError, match="guarded_call") as info:
        guarded_call(Scripted("{}"), "Q", **kw)
    assert isinstance(info.value, ValueError)     # UsageError keeps except ValueError working


@pytest.mark.model
def test_real_smollm2(smollm2):
    """SmolLM2-135M: the loop calls the real model at most 1 + retries times and either
    returns a schema-valid value or a clarification; a failed first try is re-prompted
    with its specific error messages."""
    prompt = ("<|im_start|>user\nReturn only JSON with keys city (e.g. 北京市) and date "
              "(YYYY-MM-DD) for: weather in Beijing on 2024-06-15<|im_end|>\n<|im_start|>assistant\n")
    calls = []

    class Counting:
        def create_completion(self, p, **kw):
            calls.append(p)
            return smollm2.create_completion(p, **kw)

    # an unsatisfiable schema: exactly 1 + retries calls, the retry prompt carries the
    # first attempt's specific messages, and the result is a clarification
    impossible = {"type": "object", "required": ["never"], "properties": {"never": {"const": "x" * 40}}}
    r = guarded_call(Counting(), prompt, schema=impossible, retries=1, max_tokens=16, temperature=0.0)
    assert not r.ok and len(calls) == 2 and len(r.attempts) == 2
    assert r.clarification is not None and r.clarification.errors
    assert r.attempts[0].result.errors[0].message in calls[1]
    # the realistic request, no retry budget: a valid value or a clarification, one call
    calls.clear()
    r2 = guarded_call(Counting(), prompt, schema=SCHEMA, retries=0, max_tokens=40, temperature=0.0)
    assert len(calls) == 1
    assert (r2.ok and {"city", "date"} <= set(r2.value)) or (not r2.ok and r2.clarification)
