"""HTTP errors as OpenAI-style JSON bodies: ``{"error": {"message", "type", "param", "code"}}``.

:class:`APIError` is the one exception the request path raises; :func:`from_decoding_error`
maps a :class:`~decoding.errors.DecodingError` to it: a grammar that cannot be compiled is 422,
with the JSON pointer or line:column, the keyword and the reason in the message and as
separate fields."""

from __future__ import annotations

from typing import Any

from decoding.errors import (DecodingError, DTDError, GBNFError, GrammarError, LimitError, PatternError,
                             ProcessorError, SchemaError, UsageError)

__all__ = ["APIError", "from_decoding_error", "error_body"]

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
          413: "invalid_request_error", 422: "invalid_request_error", 500: "server_error",
          503: "server_error"}


class APIError(DecodingError):
    """An HTTP error answer: ``status``, ``message``, ``param``, ``code``, extra body fields and
    headers (``Retry-After`` of a 503)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}
        self.extra = {k: v for k, v in extra.items() if v is not None}

    def body(self) -> dict:
        return error_body(self.status, self.message, param=self.param, code=self.code, **self.extra)


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None,
               **extra: Any) -> dict:
    err = {"message": message, "type": _TYPES.get(status, "server_error"), "param": param, "code": code}
    err.update(extra)
    return {"error": err}


def from_decoding_error(e: BaseException, param: str | None = None) -> APIError:
    """The HTTP error for an exception of the compile or generation path."""
    if isinstance(e, APIError):
        return e
    if isinstance(e, SchemaError):
        return APIError(422, f"{param}: {e}" if param else str(e), param=param, code="unsupported_schema",
                        pointer=e.pointer or "/", keyword=e.keyword, reason=e.reason)
    if isinstance(e, (DTDError, GBNFError)):
        code = "invalid_dtd" if isinstance(e, DTDError) else "invalid_grammar"
        return APIError(422, f"{param}: {e}" if param else str(e), param=param, code=code,
                        line=e.line, column=e.column, reason=e.reason)
    if isinstance(e, LimitError):
        return APIError(422, f"{param}: {e}" if param else str(e), param=param, code="grammar_limit",
                        pointer=e.pointer, limit=e.limit)
    if isinstance(e, PatternError):
        return APIError(422, f"{param}: {e}" if param else str(e), param=param, code="unsupported_pattern",
                        keyword="pattern", reason=e.reason)
    if isinstance(e, GrammarError):
        return APIError(422, f"{param}: {e}" if param else str(e), param=param, code="invalid_grammar")
    if isinstance(e, UsageError):
        return APIError(400, str(e), param=param)
    if isinstance(e, ProcessorError):
        cause = e.__cause__ or e
        return APIError(500, f"constrained generation failed: {e} (cause: {cause!r})",
                        code="processor_error")
    return APIError(500, f"internal error: {type(e).__name__}: {e}", code="internal_error")
