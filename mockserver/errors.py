"""Every error the server answers with, mapped to OpenAI's envelope in one place.

The tree::

    APIError                      status, type, code, param, message → the envelope
    ├── InvalidRequest            400 invalid_request_error (names the parameter)
    │   └── ContextLengthExceeded 400 code=context_length_exceeded
    ├── AuthenticationError       401 invalid_api_key
    ├── NotFound                  404 (unknown route, unknown model: code=model_not_found)
    ├── MethodNotAllowed          405
    └── InternalError             500 (never carries a stack trace)

Handlers raise these; :func:`envelope` turns any of them into the JSON body. Before the first
byte of a response an error is an HTTP status; after it (mid-stream) the same envelope is sent
in-band as an SSE frame by the streaming layer.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIError",
    "AuthenticationError",
    "ContextLengthExceeded",
    "InternalError",
    "InvalidRequest",
    "MethodNotAllowed",
    "NotFound",
    "envelope",
]


class APIError(Exception):
    """An error with everything needed to answer it in OpenAI's format."""

    status: int = 500
    type: str = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return envelope(self.message, self.type, self.param, self.code)


class InvalidRequest(APIError):
    status = 400
    type = "invalid_request_error"


class ContextLengthExceeded(InvalidRequest):
    def __init__(self, context_window: int, prompt_tokens: int, completion_tokens: int, param: str) -> None:
        where = "in the messages" if param == "messages" else "in your prompt"
        super().__init__(
            f"This model's maximum context length is {context_window} tokens. However, you requested "
            f"{prompt_tokens + completion_tokens} tokens ({prompt_tokens} {where}, {completion_tokens} "
            f"in the completion). Please reduce the length of the "
            f"{'messages' if param == 'messages' else 'prompt'} or completion.",
            param=param,
            code="context_length_exceeded",
        )


class AuthenticationError(APIError):
    status = 401
    type = "invalid_request_error"


class NotFound(APIError):
    status = 404
    type = "invalid_request_error"


class MethodNotAllowed(APIError):
    status = 405
    type = "invalid_request_error"


class InternalError(APIError):
    status = 500
    type = "server_error"


def envelope(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
