"""``import decoding.guard`` (post-hoc use with a remote model) needs no C extension."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import sys
    sys.modules["decoding._native"] = None      # any import of the extension now fails
    import decoding.guard
    from decoding.guard import guard_json, guard_xml
    from decoding.frontends.xml.dtd import parse_dtd

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    r = guard_json('Sure: {"a": 1} done', schema)
    assert r.ok and r.value == {"a": 1}, r
    r = guard_json('{"a": "x"}', schema)
    assert not r.ok and r.errors[0].path == "/a", r
    dtd = parse_dtd("<!ELEMENT r (a)><!ELEMENT a (#PCDATA)>")
    r = guard_xml("Here: <r><a>x & y</a></r>", dtd, root="r", repair=True)
    assert r.ok and r.text == "<r><a>x &amp; y</a></r>", r
    loaded = sorted(m for m in sys.modules if m.startswith("decoding") and sys.modules[m] is not None)
    print("\\n".join(loaded))
''')


def test_guard_without_native_extension():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split()
    assert "decoding.guard" in loaded
    assert not any(m.startswith(("decoding.runtime", "decoding.backends")) for m in loaded), loaded
