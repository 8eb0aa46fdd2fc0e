"""The tool-call markers of a model, read from its own chat template.

A GGUF carries its chat template as the ``tokenizer.chat_template`` metadata (Jinja text).
Templates of tool-trained models render the ``tools`` variable and write each call between
fixed markers, for example Hermes / Qwen2.5 / Qwen3 / SmolLM3 ``<tool_call>...</tool_call>``.
:func:`markers_from_template` recognises the marker pairs of :data:`KNOWN_MARKERS` in a
template that has a tools section (it mentions ``tools``); the server then delimits the
calls of ``tool_choice: auto`` (and the calls it writes back into the conversation) with
them.

Fallback: when the template has no tools section, no known pair, or the GGUF has no
template (the two packaged models: SmolLM2-135M-Instruct's template renders only roles and
contents; the Gemma-3-270M GGUF has no ``tokenizer.chat_template``), the markers are the
literal text :data:`FALLBACK` (``<tool_call>`` / ``</tool_call>``, the most common pair).
Either way the markers are :class:`decoding.ir.Special` anchors, matched as one token when
the vocabulary has it, else as text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolMarkers", "KNOWN_MARKERS", "FALLBACK", "markers_from_template", "model_tool_markers"]

#: marker pairs (start, end) of tool-trained chat templates, tried in this order
KNOWN_MARKERS: tuple[tuple[str, str], ...] = (
    ("<tool_call>", "</tool_call>"),                    # Hermes 2/3, Qwen2.5, Qwen3, SmolLM3
    ("<|tool_call_start|>", "<|tool_call_end|>"),       # LFM2
    ("<start_function_call>", "<end_function_call>"),   # FunctionGemma
    ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),  # Kimi K2
)

FALLBACK = ("<tool_call>", "</tool_call>")

_TOOLS_VAR = re.compile(r"\btools\b")


@dataclass(frozen=True)
class ToolMarkers:
    start: str
    end: str
    source: str  # "chat template", or why the fallback is used

    @property
    def pair(self) -> tuple[str, str]:
        return self.start, self.end


def markers_from_template(template: str | None) -> ToolMarkers:
    """The tool-call markers of a chat template, or :data:`FALLBACK` with the reason."""
    if not template:
        return ToolMarkers(*FALLBACK, source="fallback: no chat template in the model")
    if not _TOOLS_VAR.search(template):
        return ToolMarkers(*FALLBACK, source="fallback: the chat template has no tools section")
    for start, end in KNOWN_MARKERS:
        i = template.find(start)
        if i >= 0 and template.find(end, i + len(start)) >= 0:
            return ToolMarkers(start, end, source="chat template")
    return ToolMarkers(*FALLBACK, source="fallback: the chat template's tools section has no known call markers")


def model_tool_markers(llm: Any) -> ToolMarkers:
    """The markers of a ``llama_cpp.Llama`` (its ``tokenizer.chat_template`` metadata)."""
    meta = getattr(llm, "metadata", None) or {}
    return markers_from_template(meta.get("tokenizer.chat_template"))
