"""DTD -> grammar IR -> byte DFA: accept/reject lists, options, random walks validated by lxml."""

import random

import lxml.etree as ET
import pytest

from decoding.backends.automaton import compile_dfa
from decoding.frontends.xml.dtd import parse_dtd
from decoding.errors import DTDError, GrammarError, UsageError
from decoding.frontends.xml.grammar import dtd_grammar
from decoding.frontends.xml.text import int_range, text_char
from decoding.ir import Grammar
from decoding.text.regex import regex_ir
from tests.xml_helpers import ir_accepts, random_walk_bytes

SMALL = """<!ENTITY co "ACME Co">
<!ELEMENT doc (head?, (p | list)+, foot)>
<!ATTLIST doc lang (en|zh) #REQUIRED  id ID #IMPLIED  ver CDATA #FIXED "1.0">
<!ELEMENT head (#PCDATA)>
<!ELEMENT p (#PCDATA | b)*>
<!ELEMENT b (#PCDATA)>
<!ELEMENT list (item*)>
<!ELEMENT item (#PCDATA | list)*>
<!ATTLIST item n NMTOKEN #IMPLIED  k CDATA "x">
<!ELEMENT foot EMPTY>
<!ELEMENT n:x EMPTY>
<!ATTLIST n:x xmlns:n CDATA #FIXED "urn:n">
"""


@pytest.fixture(scope="module")
def small():
    return parse_dtd(SMALL, source="small.dtd")


@pytest.fixture(scope="module")
def small_dfa(small):
    return compile_dfa(dtd_grammar(small, "doc", max_depth=3))


V = ' ver="1.0"'


@pytest.mark.parametrize("doc", [
    f'<doc lang="en"{V}><p>hi</p><foot/></doc>',
    f'<?xml version="1.0" encoding="UTF-8"?><doc lang="zh"{V}><p/><foot/></doc>',
    f'<doc lang="en" id="a1"{V}><head>T &amp; &lt;x&gt; &quot;</head><p>a<b>bold</b>c</p><list/><foot/></doc>',
    f'<doc lang="en"{V}><list><item n="q-1" k="v&amp;&quot;w">t<list><item>x</item></list></item></list><foot/></doc>',
    f'<doc lang="en"{V}><p>张三 &#10; ok</p><p></p><foot/></doc>',
    f'<doc lang="en"{V}><list><item><list><item><list/></item></list></item></list><foot/></doc>',
])
def test_small_accepts(small_dfa, doc):
    assert small_dfa.accepts(doc.encode())


@pytest.mark.parametrize("doc", [
    '<doc lang="en"><p>hi</p><foot/></doc>',                       # #FIXED missing
    f'<doc{V}><p>hi</p><foot/></doc>',                             # #REQUIRED missing
    f'<doc ver="1.0" lang="en"><p>hi</p><foot/></doc>',            # attribute order
    f'<doc lang="fr"{V}><p>hi</p><foot/></doc>',                   # enum
    f'<doc lang="en"{V}><foot/></doc>',                            # (p|list)+ missing
    f'<doc lang="en"{V}><p>hi</p></doc>',                          # foot missing
    f'<doc lang="en"{V}><p>hi</p><foot></foot></doc>',             # EMPTY written open
    f'<doc lang="en"{V}><p>a < b</p><foot/></doc>',                # raw <
    f'<doc lang="en"{V}><p>a & b</p><foot/></doc>',                # raw &
    f'<doc lang="en"{V}><p>a > b</p><foot/></doc>',                # raw > (canonical: &gt;)
    f'<doc lang="en"{V}><p>&nbsp;</p><foot/></doc>',               # undeclared entity
    f'<doc lang="en"{V}><p>hi</p> <foot/></doc>',                  # whitespace (compact)
    f'<doc  lang="en"{V}><p>hi</p><foot/></doc>',                  # two spaces in tag
    f'<doc lang="en"{V}><p>hi</p><foot/></doc>\n',                 # trailing newline
    f'Here is the XML: <doc lang="en"{V}><p>hi</p><foot/></doc>',  # prose before root
    f'<doc lang="en"{V}><p>hi<foot/></doc>',                       # unclosed
    f'<doc lang="en"{V}><p><b>x</p></b><foot/></doc>',             # bad nesting
    f'<doc lang="en"{V}><list><item n="a b"/></list><foot/></doc>',  # NMTOKEN with space
    f'<doc lang="en"{V}><p><![CDATA[x]]></p><foot/></doc>',        # CDATA off by default
    f'<doc lang="en" id="1a"{V}><p/><foot/></doc>',                # ID must be a Name
])
def test_small_rejects(small_dfa, doc):
    assert not small_dfa.accepts(doc.encode())


def test_depth_bound(small):
    nest = lambda k: "<list><item>" * k + "</item></list>" * k  # noqa: E731
    for depth in (1, 2, 3):
        dfa = compile_dfa(dtd_grammar(small, "doc", max_depth=depth))
        ok = f'<doc lang="en"{V}>{nest(depth)}<foot/></doc>'.encode()
        deep = f'<doc lang="en"{V}>{nest(depth + 1)}<foot/></doc>'.encode()
        assert dfa.accepts(ok) and not dfa.accepts(deep)
        # the IR itself is unbounded (GBNF back-end): the reference recognizer accepts both
        g = dtd_grammar(small, "doc", max_depth=depth)
        assert ir_accepts(g, ok) and ir_accepts(g, deep)


def test_options(small):
    base = f'<doc lang="en"{V}><p>hi</p><foot/></doc>'
    decl = '<?xml version="1.0" encoding="UTF-8"?>'
    req = compile_dfa(dtd_grammar(small, "doc", xml_declaration="required"))
    none = compile_dfa(dtd_grammar(small, "doc", xml_declaration="none"))
    assert req.accepts((decl + base).encode()) and not req.accepts(base.encode())
    assert none.accepts(base.encode()) and not none.accepts((decl + base).encode())
    flex = compile_dfa(dtd_grammar(small, "doc", whitespace="flexible", max_ws=4))
    pretty = f'<doc lang="en"{V}>\n  <p>hi</p>\n  <foot/>\n</doc>'
    assert flex.accepts(pretty.encode())
    assert not flex.accepts(pretty.replace("\n  <foot", "\n      <foot").encode())  # > max_ws
    assert not flex.accepts(f'<doc lang="en"{V}>\n<p>hi</p><foot/ ></doc>'.encode())
    ent = compile_dfa(dtd_grammar(small, "doc", general_entities=True))
    assert ent.accepts(f'<doc lang="en"{V}><p>&co;</p><foot/></doc>'.encode())
    assert not compile_dfa(dtd_grammar(small, "doc")).accepts(
        f'<doc lang="en"{V}><p>&co;</p><foot/></doc>'.encode())
    omit = compile_dfa(dtd_grammar(small, "doc", ids="omit"))
    assert not omit.accepts(f'<doc lang="en" id="a"{V}><p/><foot/></doc>'.encode())
    fs = compile_dfa(dtd_grammar(small, "doc", failsafe=True))
    err = ("<error><code>SCHEMA_MISMATCH</code><message>Unable to infer valid XML structure "
           "from input</message></error>")
    assert fs.accepts(err.encode()) and fs.accepts(base.encode())
    assert not compile_dfa(dtd_grammar(small, "doc")).accepts(err.encode())
    assert not fs.accepts(err.replace("SCHEMA_MISMATCH", "OTHER").encode())


TINY = "<!ELEMENT p (#PCDATA)>"


def test_cdata_and_numeric_refs(tmp_path):
    tiny = parse_dtd(TINY)
    cd = compile_dfa(dtd_grammar(tiny, "p", cdata=True))
    assert cd.accepts(b"<p><![CDATA[a<b&]]c]]>x<![CDATA[]]></p>")
    assert not cd.accepts(b"<p><![CDATA[a]]>b]]></p>")
    nr = compile_dfa(dtd_grammar(tiny, "p", numeric_refs=True, cdata=True))
    assert nr.accepts("<p>&#65;&#x10FFFF;&#xd7ff;&#xD7FF;</p>".encode())
    for bad in ("&#0;", "&#xD800;", "&#x110000;", "&#065;", "&#xFFFE;", "&#x;"):
        assert not nr.accepts(f"<p>{bad}</p>".encode()), bad
    (tmp_path / "tiny.dtd").write_text(TINY, encoding="utf-8")
    validator = ET.DTD(str(tmp_path / "tiny.dtd"))
    rng = random.Random(7)
    for _ in range(200):
        doc = random_walk_bytes(nr, rng, stop_prob=0.1, max_len=200)
        assert validator.validate(ET.fromstring(doc)), doc


def test_text_patterns(small):
    dfa = compile_dfa(dtd_grammar(small, "doc", text_patterns={"head": r"[0-9]{2,3}|a<b"}))
    ok = [f'<doc lang="en"{V}><head>{t}</head><p/><foot/></doc>' for t in ("12", "123", "a&lt;b")]
    bad = [f'<doc lang="en"{V}><head>{t}</head><p/><foot/></doc>' for t in ("1", "1234", "a<b", "x")]
    assert all(dfa.accepts(d.encode()) for d in ok)
    assert not any(dfa.accepts(d.encode()) for d in bad)
    with pytest.raises(DTDError):
        dtd_grammar(small, "doc", text_patterns={"p": "x"})  # mixed content
    with pytest.raises(DTDError):
        dtd_grammar(small, "doc", text_patterns={"nope": "x"})


def test_colon_names_and_fixed_namespace(small):
    dfa = compile_dfa(dtd_grammar(small, "n:x"))
    assert dfa.accepts(b'<n:x xmlns:n="urn:n"/>')
    assert not dfa.accepts(b"<n:x/>")


@pytest.mark.parametrize("dtd,root,exc", [
    ("<!ELEMENT a (b)>", "a", DTDError),          # undeclared child
    ("<!ELEMENT a EMPTY>", "z", UsageError),      # undeclared root: a bad option
    ("<!ELEMENT a EMPTY><!ATTLIST a e ENTITY #REQUIRED>", "a", DTDError),  # no entity to use
])
def test_compile_errors(dtd, root, exc):
    with pytest.raises(exc):
        dtd_grammar(parse_dtd(dtd), root)


def test_bad_options(small):
    for kw in ({"whitespace": "pretty"}, {"xml_declaration": "maybe"}, {"ids": "x"},
               {"max_depth": 0}):
        with pytest.raises(GrammarError):
            dtd_grammar(small, "doc", **kw)


@pytest.mark.parametrize("pattern,yes,no", [
    (r"[+-]?[0-9]+", ["1", "-12", "+0"], ["", "1.0", "a"]),
    (r"^(?:ab|c)*$", ["", "abc", "cab"], ["a", "b"]),
    (r"\d{2}-\w+\s?", ["12-a_", "12-x "], ["1-a", "12-"]),
    (r"[^<]x.", ["ax!", "&amp;x&lt;"], ["<xa", "&lt;xa"]),
    (r"[A-HJ-NPR-Z0-9]{3}", ["AZ9"], ["AIZ", "AZ"]),
    (r"张+", ["张张"], ["李"]),
])
def test_anchored_text_pattern(pattern, yes, no):
    """DTD text patterns: the one regex engine, anchored, with the XML text encoder."""
    dfa = compile_dfa(Grammar.single(regex_ir(pattern, text_char, anchored=True)))
    assert all(dfa.accepts(s.encode()) for s in yes)
    assert not any(dfa.accepts(s.encode()) for s in no)


@pytest.mark.parametrize("pattern", ["(a", "a{3,2}", "*a", "a**?", "(?<=a)", r"\b", "^*"])
def test_text_pattern_errors(small, pattern):
    """A bad text pattern is a DTDError at the element's declaration, naming the offset."""
    with pytest.raises(DTDError) as e:
        dtd_grammar(small, "doc", text_patterns={"head": pattern})
    assert e.value.line is not None and "text_patterns['head']" in str(e.value)
    assert "at offset" in str(e.value)


@pytest.mark.parametrize("lo,hi,base", [(0, 0, 10), (7, 123, 10), (32, 55295, 10),
                                        (0xE000, 0xFFFD, 16), (9, 10, 16), (1, 1000, 10)])
def test_int_range_exact(lo, hi, base):
    dfa = compile_dfa(Grammar.single(int_range(lo, hi, base)))
    fmt = (lambda n: str(n)) if base == 10 else (lambda n: format(n, "x"))
    for n in list(range(max(0, lo - 30), lo + 30)) + list(range(hi - 30, hi + 30)):
        assert dfa.accepts(fmt(n).encode()) == (lo <= n <= hi), n
    assert not dfa.accepts(b"0" + fmt(hi).encode())  # no leading zeros


def test_random_walks_small_dtd_validate_with_lxml(small, tmp_path):
    (tmp_path / "small.dtd").write_text(SMALL, encoding="utf-8")
    validator = ET.DTD(str(tmp_path / "small.dtd"))
    dfa = compile_dfa(dtd_grammar(small, "doc", ids="omit", max_depth=3))
    rng = random.Random(4)
    for _ in range(300):
        doc = random_walk_bytes(dfa, rng, stop_prob=0.2, max_len=300)
        tree = ET.fromstring(doc)
        assert validator.validate(tree), (doc, validator.error_log)
