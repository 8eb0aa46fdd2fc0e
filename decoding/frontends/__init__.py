"""Front-ends: JSON Schema, DTD/XML, GBNF and anchors, each compiled to the grammar IR (plain data)."""
