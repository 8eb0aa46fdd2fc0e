"""XML front-end: DTD subset parser, DTD -> IR, JSON-Schema-shaped XML, canonical documents."""
