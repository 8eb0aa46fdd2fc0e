"""JSON Schema front-end: compile a schema to the Grammar IR, canonicalize instances,
and produce retry feedback.  See docs/json-schema.md for the policies."""

from decoding.frontends.jsonschema.canonical import canonicalize
from decoding.frontends.jsonschema.compile import (DEFAULT_FREE_DEPTH, DEFAULT_MAX_DEPTH, DEFAULT_MAX_WS, SchemaGrammar,
                      compile_schema)
from decoding.frontends.jsonschema.feedback import feedback, validate_instance

__all__ = ["compile_schema", "SchemaGrammar", "canonicalize", "feedback", "validate_instance",
           "DEFAULT_MAX_DEPTH", "DEFAULT_MAX_WS", "DEFAULT_FREE_DEPTH"]
