"""Prompt construction from a tool definition and the model's own chat template.

One function builds the prompt for a tool call, so that a constrained and an unconstrained
generation can get exactly the same text (the constraint is then the only difference):

- :func:`tool_messages`: chat messages for a :class:`ToolSpec`: a system prompt that shows
  the tool (name, description, argument schema or XML layout), optionally one worked
  example (user request + assistant answer), then the user's request.
- :func:`render_prompt`: those messages through the model's chat template (its ``tools``
  section when the template has one: the tool then travels as a ``tools=[...]`` argument
  and the system prompt only says how to answer), with the generation prompt appended.
  A GGUF without a template (a base model) gets :data:`PLAIN_TEMPLATE`.
- :func:`dump_json`: the one JSON layout used for examples, matching the generation's
  whitespace policy (``"natural"``: ``", "`` and ``": "``; ``"compact"``: none).

Invariants
- The text depends only on (tool, request, example, template): never on the decoding mode.
- The example answer is written in the same layout the constrained mode generates, so the
  mask never forbids the layout the prompt just showed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from decoding.errors import UsageError

__all__ = ["ToolSpec", "Example", "tool_messages", "render_prompt", "chat_template", "dump_json",
           "PLAIN_TEMPLATE", "GEMMA_TEMPLATE", "has_tools_section",
           "tool_from_source", "strip_dtd_comments"]

# Gemma's turn format (the packaged Gemma-3-270M is the base model and carries no template):
# the system text is folded into the first user turn.
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% set sys = '' %}{% for m in messages %}{% if m['role'] == 'system' %}"
    "{% set sys = m['content'] + '\n\n' %}{% else %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' "
    "else 'user' }}\n{% if loop.index0 == 1 %}{{ messages[0]['content'] }}\n\n{% endif %}{{ m['content'] }}"
    "<end_of_turn>\n{% endif %}{% endfor %}<start_of_turn>model\n")
# Any other template-less model: plain "role: text" lines.
PLAIN_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                  "assistant: ")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the prompt shows it.

    ``kind``: ``"json"`` (``schema`` is the JSON Schema of the arguments) or ``"xml"``
    (``layout`` is an example-free description of the element layout, e.g. the DTD text).
    ``answer``: what the reply is, e.g. ``"the JSON arguments"``."""

    name: str
    description: str
    kind: str = "json"
    schema: dict | None = None
    layout: str | None = None

    def openai_tool(self) -> dict:
        """The OpenAI ``tools=[...]`` entry (for templates with a tools section)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.schema or {}}}


@dataclass(frozen=True)
class Example:
    """One worked example: a request and its exact answer text."""

    user: str
    answer: str


def dump_json(value: Any, whitespace: str = "natural") -> str:
    """``value`` as JSON text in the layout of the whitespace policy (key order kept, UTF-8)."""
    if whitespace not in ("natural", "compact"):
        raise UsageError(f"dump_json: whitespace must be 'natural' or 'compact', not {whitespace!r}")
    seps = (", ", ": ") if whitespace == "natural" else (",", ":")
    return json.dumps(value, ensure_ascii=False, separators=seps)


def _system(tool: ToolSpec, in_template: bool) -> str:
    if tool.kind == "json":
        what = "the JSON object of its arguments"
        shown = "" if in_template else (f"\nTool: {tool.name}\nDescription: {tool.description}\n"
                                         f"Arguments (JSON Schema): {dump_json(tool.schema or {}, 'compact')}")
    elif tool.kind == "xml":
        what = "the XML document"
        shown = f"\nTool: {tool.name}\nDescription: {tool.description}\nLayout:\n{tool.layout or ''}"
    else:
        raise UsageError(f"tool_messages: tool {tool.name!r}: kind must be 'json' or 'xml', not {tool.kind!r}")
    return (f"You are a tool-calling assistant. Answer every request by calling the tool {tool.name}: "
            f"reply with only {what}. Copy names, numbers, dates and ids from the request exactly, "
            f"in the request's language.{shown}")


def tool_messages(tool: ToolSpec, user: str, example: Example | None = None, *,
                  in_template: bool = False) -> list[dict]:
    """Chat messages for one call of ``tool`` on ``user``'s request (with one worked
    ``example`` before it when given).  ``in_template``: the tool definition goes to the
    template's tools section, so the system prompt does not repeat the schema."""
    msgs = [{"role": "system", "content": _system(tool, in_template)}]
    if example is not None:
        msgs += [{"role": "user", "content": example.user}, {"role": "assistant", "content": example.answer}]
    msgs.append({"role": "user", "content": user})
    return msgs


def chat_template(llm: Any, model_name: str = "") -> tuple[str, str]:
    """(template text, where it came from): the GGUF's own, else Gemma turns for a Gemma
    model, else :data:`PLAIN_TEMPLATE`."""
    tmpl = llm.metadata.get("tokenizer.chat_template")
    if tmpl:
        return tmpl, "gguf"
    arch = str(llm.metadata.get("general.architecture", ""))
    if "gemma" in arch or "gemma" in model_name.lower():
        return GEMMA_TEMPLATE, "built-in gemma turns"
    return PLAIN_TEMPLATE, "built-in plain"


def has_tools_section(template: str) -> bool:
    """Whether the template renders a ``tools`` variable."""
    return "tools" in template


def render_prompt(llm: Any, tool: ToolSpec, user: str, example: Example | None = None, *,
                  model_name: str = "") -> str:
    """The prompt text for one call (generation prompt appended), ready for
    ``llm.tokenize(text, add_bos=True)`` / ``create_completion``: a BOS the template writes
    is dropped only when the tokenizer adds it again (SmolLM2's BOS is ``<|im_start|>``
    and its tokenizer adds none, so its text keeps the first ``<|im_start|>``)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    tmpl, _ = chat_template(llm, model_name)
    tools_in = tool.kind == "json" and has_tools_section(tmpl)
    vocab = llm._model
    eos = vocab.token_get_text(llm.token_eos()) if llm.token_eos() >= 0 else ""
    bos = vocab.token_get_text(llm.token_bos()) if llm.token_bos() >= 0 else ""
    fmt = Jinja2ChatFormatter(template=tmpl, eos_token=eos, bos_token=bos)
    msgs = tool_messages(tool, user, example, in_template=tools_in)
    text = fmt(messages=msgs, tools=[tool.openai_tool()] if tools_in else None).prompt
    if bos and text.startswith(bos) and llm._model.add_bos_token():
        text = text[len(bos):]
    return text


def strip_dtd_comments(text: str) -> str:
    """DTD text without its comments (they may hold worked examples that must not leak into
    a prompt)."""
    return re.sub(r"<!--.*?-->\s*", "", text, flags=re.S).strip()


def tool_from_source(name: str, kind: str, text: str) -> ToolSpec:
    """A :class:`ToolSpec` from a grammar source: ``kind`` ``"json-schema"`` (the schema's
    ``description`` becomes the tool's; ``$schema``/``title``/``description`` are not
    repeated in the arguments) or ``"dtd"`` (comments stripped)."""
    if kind == "json-schema":
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"tool_from_source: {name}: schema is not JSON: {e.msg}") from None
        if not isinstance(schema, dict):
            raise UsageError(f"tool_from_source: {name}: a tool's schema must be an object")
        args = {k: v for k, v in schema.items() if k not in ("$schema", "title", "description")}
        return ToolSpec(name, str(schema.get("description", "")), "json", schema=args)
    if kind == "dtd":
        return ToolSpec(name, "", "xml", layout=strip_dtd_comments(text))
    raise UsageError(f"tool_from_source: {name}: kind must be 'json-schema' or 'dtd', not {kind!r}")
