"""Validate -> re-prompt with specific errors -> clarify: a bounded retry loop.

``guarded_call`` calls ``llm.create_completion`` (a llama-cpp-python ``Llama`` or
anything with that method) at most ``1 + retries`` times.  After a failed attempt it
re-prompts with the guard's specific violation messages; when the budget is spent it
returns a :class:`CallResult` carrying a :class:`Clarification` instead of looping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from decoding.errors import UsageError
from decoding.frontends.xml.model import DTD
from decoding.guard.check import guard_json, guard_xml
from decoding.guard.results import GuardResult, Violation

__all__ = ["guarded_call", "CallResult", "Attempt", "Clarification", "feedback_prompt"]

MAX_RETRIES = 5


@dataclass(frozen=True)
class Attempt:
    prompt: str
    output: str
    result: GuardResult


@dataclass(frozen=True)
class Clarification:
    """What to ask the user when the model could not produce a valid answer."""
    question: str
    errors: tuple[Violation, ...]


@dataclass(frozen=True)
class CallResult:
    """``ok``: ``text`` (and ``value`` for JSON) is valid.  Otherwise ``clarification``."""
    ok: bool
    text: str | None
    value: Any
    attempts: tuple[Attempt, ...]
    clarification: Clarification | None


def feedback_prompt(prompt: str, output: str, errors: Sequence[Violation], kind: str) -> str:
    """Default re-prompt: the original prompt, the rejected answer and its errors."""
    lines = "\n".join(f"- {e.message}" for e in errors[:8])
    return (f"{prompt}{output}\n\nThat {kind} is invalid:\n{lines}\n"
            f"Fix these problems and answer again with only the corrected {kind}.\n")


def guarded_call(llm, prompt: str, *, schema: dict | None = None, dtd: DTD | None = None,
                 root: str | None = None, retries: int = 1, repair: bool = False,
                 reprompt: Callable[[str, str, Sequence[Violation], str], str] = feedback_prompt,
                 **completion_kwargs) -> CallResult:
    """Generate, validate and re-prompt at most ``retries`` times (0..5), then clarify.

    Exactly one of ``schema`` (JSON Schema dict) or ``dtd`` (with ``root``) is given.
    ``completion_kwargs`` go to ``llm.create_completion`` (e.g. ``max_tokens``,
    ``temperature``, ``seed``).  Never raises on bad model output; raises
    :class:`~decoding.errors.UsageError` on invalid arguments.
    """
    if (schema is None) == (dtd is None):
        raise UsageError("guarded_call: give exactly one of schema= or dtd=")
    if not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise UsageError(f"guarded_call: retries must be an int in 0..{MAX_RETRIES}, got {retries!r}")
    kind = "JSON" if schema is not None else "XML"
    attempts: list[Attempt] = []
    current = prompt
    for _ in range(retries + 1):
        out = llm.create_completion(current, **completion_kwargs)
        text = out["choices"][0]["text"]
        if schema is not None:
            res = guard_json(text, schema, repair=repair)
        else:
            res = guard_xml(text, dtd, root=root, repair=repair)
        attempts.append(Attempt(current, text, res))
        if res.ok:
            return CallResult(True, res.text, res.value, tuple(attempts), None)
        current = reprompt(prompt, text, res.errors, kind)
    errors = attempts[-1].result.errors
    detail = "; ".join(e.message for e in errors[:3])
    question = (f"I could not produce a valid {kind} answer after {len(attempts)} attempt(s) "
                f"({detail}). Could you clarify or supply the missing information?")
    return CallResult(False, None, None, tuple(attempts), Clarification(question, errors))
