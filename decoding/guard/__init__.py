"""Post-hoc guard: extract, validate and minimally repair structured model output.

For outputs produced without a mask (remote APIs, older pipelines): pull the XML
element or JSON value out of mixed text, validate it against the same DTD model or
JSON Schema the compiler uses, optionally repair it (``repair=True``, deterministic,
every change reported, refused when the result would still be invalid), and re-prompt
a llama-cpp-python model with the specific errors (``guarded_call``).
"""

from decoding.guard.check import guard_json, guard_xml
from decoding.guard.extract import extract_json, extract_xml
from decoding.guard.repair import XML_DECLARATION, repair_json, repair_xml
from decoding.guard.results import Change, Fragment, GuardResult, Repair, Violation, line_col
from decoding.guard.retry import Attempt, CallResult, Clarification, feedback_prompt, guarded_call
from decoding.guard.validate import checked_formats, validate_json, validate_xml

__all__ = [
    "extract_xml", "extract_json",
    "validate_xml", "validate_json", "checked_formats",
    "repair_xml", "repair_json", "XML_DECLARATION",
    "guard_xml", "guard_json",
    "guarded_call", "feedback_prompt", "CallResult", "Attempt", "Clarification",
    "Fragment", "Violation", "Change", "Repair", "GuardResult", "line_col",
]
