"""DTD-subset parser: accepted constructs and located errors."""

from pathlib import Path

import pytest

from decoding.frontends.xml.dtd import parse_dtd
from decoding.frontends.xml.model import Particle
from decoding.errors import DTDError
from tests.xml_helpers import DTD_DIR


def test_element_kinds_and_models():
    d = parse_dtd("""<?xml version="1.0"?>
<!-- c -->
<?pi data?>
<!ELEMENT a EMPTY>
<!ELEMENT b ANY>
<!ELEMENT c (#PCDATA)>
<!ELEMENT m (#PCDATA|a|b)*>
<!ELEMENT s:x (a, (b|c)+, a?, c*)>
""")
    kinds = {e.name: e.content for e in d.elements}
    assert kinds == {"a": "EMPTY", "b": "ANY", "c": "PCDATA", "m": "MIXED", "s:x": "CHILDREN"}
    assert d.element("m").mixed_names == ("a", "b")
    model = d.element("s:x").model
    assert model == Particle("seq", children=(
        Particle("name", "a"),
        Particle("choice", children=(Particle("name", "b"), Particle("name", "c")), occur="+"),
        Particle("name", "a", occur="?"), Particle("name", "c", occur="*")))
    assert (d.element("s:x").line, d.element("s:x").column) == (8, 1)


def test_attlist_types_defaults_and_first_wins():
    d = parse_dtd("""<!NOTATION gif SYSTEM "image/gif">
<!ENTITY pic SYSTEM "p.gif" NDATA gif>
<!ENTITY co "ACME &amp; Co">
<!ATTLIST e
  c CDATA #REQUIRED  i ID #IMPLIED  r IDREF #IMPLIED  rs IDREFS #IMPLIED
  t NMTOKEN "  x  "  ts NMTOKENS #IMPLIED  en ENTITY #IMPLIED  es ENTITIES #IMPLIED
  n NOTATION (gif) #IMPLIED  k (yes|no) "no"  f CDATA #FIXED "v&#65;&co;"
  c CDATA "ignored">
""")
    at = {a.name: a for a in d.attlist("e")}
    assert [a.name for a in d.attlist("e")] == ["c", "i", "r", "rs", "t", "ts", "en", "es", "n", "k", "f"]
    assert at["c"].default == "#REQUIRED" and at["c"].type == "CDATA"
    assert at["t"].value == "x"  # non-CDATA defaults are normalized
    assert at["n"].type == "NOTATION" and at["n"].values == ("gif",)
    assert at["k"].type == "ENUM" and at["k"].values == ("yes", "no") and at["k"].value == "no"
    assert at["f"].default == "#FIXED" and at["f"].value == "vAACME & Co"
    assert d.unparsed_entities == ("pic",) and d.notations == ("gif",)
    assert dict(d.general_entities) == {"co": "ACME &amp; Co"}


def test_parameter_entities_and_conditional_sections():
    d = parse_dtd("""<!ENTITY % obj "(a | b)">
<!ENTITY % on "INCLUDE">
<!ELEMENT r (%obj;)*>
<![%on;[ <!ELEMENT a EMPTY> ]]>
<![IGNORE[ <!ELEMENT a ANY> <![INCLUDE[ nested ]]> ]]>
<!ELEMENT b EMPTY>""")
    assert d.element("a").content == "EMPTY"
    assert d.element("r").model.occur == "*"


def test_external_parameter_entity(tmp_path: Path):
    (tmp_path / "common.ent").write_text('<!ELEMENT leaf (#PCDATA)>', encoding="utf-8")
    text = '<!ENTITY % common SYSTEM "common.ent">\n%common;\n<!ELEMENT root (leaf)>'
    d = parse_dtd(text, base_dir=tmp_path)
    assert d.element("leaf").content == "PCDATA"
    with pytest.raises(DTDError) as e:
        parse_dtd(text)
    assert (e.value.line, e.value.column) == (2, 1)
    with pytest.raises(DTDError):
        parse_dtd('<!ENTITY % x SYSTEM "http://example.com/x.dtd">\n%x;', base_dir=tmp_path)
    with pytest.raises(DTDError):
        parse_dtd('<!ENTITY % x SYSTEM "../../etc/passwd">\n%x;', base_dir=tmp_path)


@pytest.mark.parametrize("text,line,column", [
    ("<!ELEMENT a (b,c|d)>", 1, 18),
    ("<!ELEMENT a (b>", 1, 15),
    ("<!ELEMENT a EMPTY>\n<!ELEMENT a ANY>", 2, 1),
    ("\n\n   <!ELEMENT a %x;>", 3, 16),
    ("<!ATTLIST a b (x|y) \"z\">", 1, 13),
    ("<!ATTLIST a b FOO #IMPLIED>", 1, 15),
    ("<!ELEMENT a (#PCDATA|b)>", 1, 24),
    ("<!-- never closed", 1, 1),
    ("<!ELEMENT a EMPTY>\n<![INCLUDE[ <!ELEMENT y EMPTY>", 2, 1),
    ("<!ENTITY % p \"(a|b\">\n<!ELEMENT x %p;>", 2, 16),
    ("<!ELEMENT x (a)>\n<!DOCTYPE x>", 2, 1),
    ("<!ELEMENT x (#PCDATA|a|a)*>", 1, 25),
    ("<!ELEMENT x (a,#PCDATA)>", 1, 16),
    ("<!ELEMENT x (a)>\n<?xml version='1.0'?>", 2, 1),
    ("<!ELEMENT x (a)>]]>", 1, 17),
])
def test_errors_carry_line_and_column(text, line, column):
    with pytest.raises(DTDError) as e:
        parse_dtd(text, source="t.dtd")
    assert (e.value.line, e.value.column) == (line, column), str(e.value)
    assert str(e.value).startswith(f"t.dtd:{line}:{column}: ")


def test_error_inside_entity_names_the_entity():
    with pytest.raises(DTDError) as e:
        parse_dtd('<!ENTITY % m "(a,,b)">\n<!ELEMENT x %m;>')
    assert (e.value.line, e.value.column) == (2, 13)
    assert "%m;" in str(e.value)


def test_recursive_parameter_entity_is_an_error():
    with pytest.raises(DTDError):
        parse_dtd('<!ENTITY % a "%b;">\n<!ENTITY % b "x">\n<!ENTITY % c "%c2;">\n'
                  '<!ENTITY % r "(x | %r2;)">\n<!ENTITY % r2 "%r;">\n<!ELEMENT e %r;>')


@pytest.mark.parametrize("name,root,n_elements", [
    ("PropertyList-1.0.dtd", "plist", 11),
    ("log4j.dtd", "log4j:configuration", 31),
    ("web-app_2_3.dtd", "web-app", 77),
    ("hibernate-mapping-3.0.dtd", "hibernate-mapping", 86),
])
def test_real_dtds_parse(name, root, n_elements):
    d = parse_dtd((DTD_DIR / name).read_text(encoding="utf-8"), source=name)
    assert len(d.elements) == n_elements
    assert d.element(root) is not None


def test_bytes_input_is_a_located_dtd_error():
    with pytest.raises(DTDError, match="^my.dtd: parse_dtd expects str, not bytes"):
        parse_dtd(b"<!ELEMENT a EMPTY>", source="my.dtd")
