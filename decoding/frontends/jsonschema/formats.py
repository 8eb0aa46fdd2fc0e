"""``format`` values the compiler honours, each as a regex in the supported subset.

Every regex is a strict subset of its RFC (e.g. ``T``/``Z`` upper case only, no leap
seconds, hostnames of at most 8 labels of at most 30 characters) so that every string
the grammar emits is valid under any reasonable checker.  :func:`check_format` uses the
same regexes (with Python's ``re``) so feedback and grammar agree.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["FORMATS", "FORMAT_HINTS", "CHECKED_FORMATS", "FORMAT_SUPERSETS", "format_regex", "format_superset",
           "check_format"]

_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[2468][048]|[13579][26]|0[48])00)"
_MD = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
       r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
       r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
DATE = rf"(?:{_YEAR}-{_MD}|{_LEAP}-02-29)"
_OFFSET = r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIME = rf"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{{1,9}})?{_OFFSET}"
_DUR_T = r"T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
DURATION = (rf"P(?:(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:{_DUR_T})?"
            rf"|{_DUR_T}|[0-9]+W)")
_H = "[0-9a-f]"
UUID = rf"{_H}{{8}}-{_H}{{4}}-{_H}{{4}}-{_H}{{4}}-{_H}{{12}}"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = "[0-9a-fA-F]{1,4}"
IPV6 = ("(?:" + "|".join([
    rf"(?:{_H16}:){{7}}{_H16}",
    rf"(?:{_H16}:){{1,7}}:",
    rf"(?:{_H16}:){{1,6}}:{_H16}",
    rf"(?:{_H16}:){{1,5}}(?::{_H16}){{1,2}}",
    rf"(?:{_H16}:){{1,4}}(?::{_H16}){{1,3}}",
    rf"(?:{_H16}:){{1,3}}(?::{_H16}){{1,4}}",
    rf"(?:{_H16}:){{1,2}}(?::{_H16}){{1,5}}",
    rf"{_H16}:(?::{_H16}){{1,6}}",
    rf":(?::{_H16}){{1,7}}",
    "::",
]) + ")")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,28}[A-Za-z0-9])?"
HOSTNAME = rf"{_LABEL}(?:\.{_LABEL}){{0,7}}"
_WORD = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
EMAIL = rf"[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*@{_WORD}(?:\.{_WORD})+"
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|{_PCT})"
# RFC 3986 URI: scheme ":" hier-part; hier-part is "//" authority (host name or IPv4,
# possibly empty as in file:///, optional port) + path, or a path without authority
# (absolute "/a/b", rootless "isbn:0451450523", or empty); then query and fragment
URI = (rf"[A-Za-z][A-Za-z0-9+.-]*:(?://(?:{_LABEL}(?:\.{_LABEL}){{0,7}}|{IPV4})?(?::[0-9]{{1,5}})?"
       rf"(?:/{_PCHAR}*)*|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?)(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?")

FORMATS: dict[str, str] = {
    "date": DATE,
    "time": TIME,
    "date-time": rf"{DATE}T{TIME}",
    "duration": DURATION,
    "uuid": UUID,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "hostname": HOSTNAME,
    "email": EMAIL,
    "uri": URI,
}

FORMAT_HINTS: dict[str, str] = {
    "date": "YYYY-MM-DD",
    "time": "HH:MM:SS with offset, e.g. 10:30:00Z",
    "date-time": "YYYY-MM-DDTHH:MM:SSZ or with an offset like +08:00",
    "duration": "ISO 8601 duration such as P3DT4H",
    "uuid": "8-4-4-4-12 lowercase hex digits",
    "ipv4": "four decimal octets 0-255 such as 192.168.0.1",
    "ipv6": "IPv6 address such as 2001:db8::1",
    "hostname": "dot-separated labels such as example.com",
    "email": "name@example.com",
    "uri": "absolute URI such as https://example.com/path or urn:isbn:0451450523",
}


# Formats that some JSON Schema draft defines and that validators (``jsonschema``'s format
# checkers among them) assert.  Any other ``format`` value (``jsonpath``, ``int64``,
# ``semver``, ...) is an annotation: no validator checks it, so it constrains nothing.
CHECKED_FORMATS = frozenset(FORMATS) | frozenset({
    "idn-email", "idn-hostname", "iri", "iri-reference", "uri-reference", "uri-template",
    "json-pointer", "relative-json-pointer", "regex", "color", "host-name", "ip-address",
})


# Supersets of what ``jsonschema``'s format checkers (jsonschema 4.x with its ``format``
# extra) accept, as anchored regexes over characters: every string a checker accepts
# matches, many it rejects match too.  They over-approximate a format where a language
# must be *avoided* (the other branches of an overlapping ``oneOf``, the inside of a
# ``not``): avoiding the superset is sound.  ``[\s\S]`` is any character (the checkers'
# ``$`` also matches before a final newline).  A checked format without an entry here
# is over-approximated by every string.  Sources: ``jsonschema/_format.py``,
# ``rfc3339_validator`` (ASCII digits; the checker upper-cases first, and no character
# upper-cases to an ASCII digit, ``-`` or ``:``), ``rfc3986_validator`` (ASCII scheme),
# ``uuid.UUID`` with the checker's hyphen positions, ``ipaddress`` (ASCII digits only).
_ANY = r"[\s\S]"
FORMAT_SUPERSETS: dict[str, str] = {
    "date-time": rf"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}{_ANY}*",
    "date": rf"{_ANY}{{4}}-{_ANY}{{2}}-{_ANY}{{2}}",
    "time": rf"[0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}{_ANY}*",
    "uuid": rf"{_ANY}{{8}}-{_ANY}{{4}}-{_ANY}{{4}}-{_ANY}{{4}}-{_ANY}+",
    "email": rf"{_ANY}*@{_ANY}*",
    "idn-email": rf"{_ANY}*@{_ANY}*",
    "uri": rf"[A-Za-z][A-Za-z0-9+.-]*:{_ANY}*",
    "ipv4": r"[0-9.]+",
    "ipv6": r"[0-9A-Fa-f:.]+",
    "duration": rf"[+-]?[Pp]{_ANY}*",
}


def format_superset(name: str) -> str | None:
    """Anchored regex of a superset of the strings ``jsonschema``'s checker accepts for
    ``name``; None when every string must be assumed valid (no entry)."""
    return FORMAT_SUPERSETS.get(name)


def format_regex(name: str) -> str | None:
    """Anchored-by-caller regex for ``name``, or None if the format is not supported."""
    return FORMATS.get(name)


@lru_cache(maxsize=None)
def _compiled(name: str) -> re.Pattern[str]:
    return re.compile(FORMATS[name])


def check_format(name: str, value: str) -> bool | None:
    """True/False if ``value`` matches format ``name``; None if the format is unknown."""
    if name not in FORMATS:
        return None
    return _compiled(name).fullmatch(value) is not None
