"""Every error the server answers with, mapped to OpenAI's envelope in one place.

The tree::

    APIError                      status, type, code, param, message → the envelope
    ├── InvalidRequest            400 invalid_request_error (names the parameter)
    │   └── ContextLengthExceeded 400 code=context_length_exceeded
    ├── AuthenticationError       401 invalid_api_key
    ├── NotFound                  404 (unknown route, unknown model: code=model_not_found)
    ├── MethodNotAllowed          405
    ├── RequestTooLarge           413 code=request_too_large (the body is over --max-body-bytes)
    └── InternalError             500 (never carries a stack trace)

Handlers raise these; :meth:`APIError.body` turns any of them into the JSON body, in the error
style of the profile answering (OpenAI's envelope, vLLM's, or Fireworks'). Before the first
byte of a response an error is an HTTP status; after it (mid-stream) the same body is sent
in-band as an SSE frame by the streaming layer.

A message never echoes more than a short prefix of what was sent: whoever quotes the request
quotes it through :func:`clip`, and every message (and ``param``) is cut at a bound whatever
its maker did, so no request can make its error body big.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "APIError",
    "AuthenticationError",
    "ContextLengthExceeded",
    "ErrorStyle",
    "InternalError",
    "InvalidRequest",
    "MethodNotAllowed",
    "NotFound",
    "RequestTooLarge",
    "clip",
    "envelope",
]

ECHO = 200  # characters of the request a message may quote (see clip)
MAX_MESSAGE = 2000  # characters: longer messages are cut (a backstop; makers clip what they quote)
MAX_PARAM = 256


def clip(text: str, limit: int = ECHO) -> str:
    """``text`` as an error message may quote it: whole when short, else its first ``limit``
    characters and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


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
        message = message if len(message) <= MAX_MESSAGE else clip(message, MAX_MESSAGE)
        super().__init__(message)
        self.message = message
        self.param = param if param is None or len(param) <= MAX_PARAM else param[:MAX_PARAM] + "…"
        self.code = code
        self.headers = headers or {}

    def body(self, style: ErrorStyle = "openai") -> dict[str, Any]:
        if style == "vllm":  # vLLM ≥ 0.10.1: nested, the type a class name, the code the status
            kind = _VLLM_TYPES.get(self.status, "InternalServerError" if self.status >= 500 else "BadRequestError")
            return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status}}
        if style == "fireworks":  # Fireworks: no param or code; the message names the parameter
            return {"error": {"object": "error", "type": self.type, "message": self.message}}
        if style == "gemini":  # Google's: the status code, and its canonical name (google.rpc.Code)
            status = _GOOGLE_STATUS.get(self.status, "INTERNAL" if self.status >= 500 else "INVALID_ARGUMENT")
            return {"error": {"code": self.status, "message": self.message, "status": status}}
        if style == "anthropic":  # Anthropic's: {"type": "error", "error": {"type", "message"}}, typed by status
            kind = _ANTHROPIC_TYPES.get(self.status, "api_error" if self.status >= 500 else "invalid_request_error")
            return {"type": "error", "error": {"type": kind, "message": self.message}}
        return envelope(self.message, self.type, self.param, self.code)


ErrorStyle = Literal["openai", "vllm", "fireworks", "gemini", "anthropic"]

# Anthropic's error types by HTTP status (its "Errors" page); 529 is its "overloaded".
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# Google's canonical status names for the HTTP statuses we answer with.
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_VLLM_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    413: "RequestTooLargeError",
}


class InvalidRequest(APIError):
    status = 400
    type = "invalid_request_error"


class ContextLengthExceeded(InvalidRequest):
    """A prompt and completion that do not fit the model's window. ``param`` is the field to
    change and ``prompt`` the request's prompt field (``messages``, ``prompt``, ``input``; by
    default ``param``): they differ when the completion asked for cannot fit whatever the
    prompt, and ``param`` is then the endpoint's max-tokens field. ``at_least``: the prompt was
    refused by its size before it was tokenized, so its count is a lower bound (every token
    stands for at most so many bytes)."""

    def __init__(
        self,
        context_window: int,
        prompt_tokens: int,
        completion_tokens: int,
        param: str,
        at_least: bool = False,
        prompt: str | None = None,
    ) -> None:
        field = prompt or param
        noun = "messages" if field == "messages" else "input" if field.startswith("input") else "prompt"
        where = "in your prompt" if noun == "prompt" else f"in the {noun}"
        bound = "at least " if at_least else ""
        advice = (
            f"Please reduce '{param}': the completion alone does not fit."
            if param != field
            else f"Please reduce the length of the {noun} or completion."
        )
        super().__init__(
            f"This model's maximum context length is {context_window} tokens. However, you requested "
            f"{bound}{prompt_tokens + completion_tokens} tokens ({bound}{prompt_tokens} {where}, {completion_tokens} "
            f"in the completion). {advice}",
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


class RequestTooLarge(APIError):
    """A body over the server's limit, refused before it is read whole."""

    status = 413
    type = "invalid_request_error"

    def __init__(self, limit: int, size: int | None = None) -> None:
        told = f"{size} bytes, over" if size is not None else "it passed"
        super().__init__(
            f"The request body is too large: {told} this server's limit of {limit} bytes (--max-body-bytes).",
            code="request_too_large",
        )


class InternalError(APIError):
    status = 500
    type = "server_error"


def envelope(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class Forbidden(APIError):
    """403: the client may not do this (the admin API's rule: loopback or --admin-remote, and
    the admin token; or a record mode above the server's own)."""

    status = 403
    type = "invalid_request_error"
