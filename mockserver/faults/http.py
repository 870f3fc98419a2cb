"""HTTP faults: the error answers a provider gives, in its own words.

``http.429`` is OpenAI's rate-limit body with ``retry-after``, ``retry-after-ms`` and the
``x-ratelimit-*`` headers; ``http.502`` is the HTML a proxy in front of a provider sends; the
rest are OpenAI's envelopes for each status. The injector answers them before anything else
runs (:mod:`mockserver.edge.injection`).
"""

from __future__ import annotations

from typing import Any

from mockserver.errors import APIError, ContextLengthExceeded
from mockserver.faults.catalogue import Fault

__all__ = ["StatusError", "http_error", "retry_headers"]


class StatusError(APIError):
    """An HTTP fault with a status of its own."""

    def __init__(self, status: int, kind: str, message: str, code: str | None = None, **kw: Any) -> None:
        super().__init__(message, code=code, **kw)
        self.status = status
        self.type = kind


# OpenAI's words for each status: (status, type, code, message); {model} and {wait} are filled in.
_HTTP: dict[str, tuple[int, str, str | None, str]] = {
    "http.401": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.",
    ),
    "http.403": (
        403,
        "request_forbidden",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    "http.404": (
        404,
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    "http.408": (408, "timeout", None, "Request timed out."),
    "http.409": (409, "conflict", None, "The request conflicts with the current state of the server."),
    "http.429": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for {model} on requests per min (RPM): Limit 3, Used 3, Requested 1. "
        "Please try again in {wait}s.",
    ),
    "http.quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "http.500": (500, "server_error", None, "The server had an error while processing your request. Sorry about that!"),
    "http.503": (503, "server_error", None, "The engine is currently overloaded, please try again later."),
    "http.504": (504, "server_error", None, "Gateway timeout."),
    "http.529": (529, "overloaded_error", None, "Overloaded"),  # Anthropic's; worded by the answering profile
}
_BAD_GATEWAY = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"
)


def http_error(fault: Fault, model: str | None) -> APIError | tuple[int, bytes, str]:
    """The error an ``http.*`` fault answers with: OpenAI's exact words, or raw HTML for a 502."""
    if fault.name == "http.400":
        return ContextLengthExceeded(8192, 8200, 16, "messages")
    if fault.name == "http.502":
        return 502, _BAD_GATEWAY, "text/html"
    status, kind, code, text = _HTTP[fault.name]
    wait = fault.params.get("retry_after", 0.0)
    headers = retry_headers(wait) if status in (429, 503, 529) and (wait or status == 429) else {}
    if fault.name == "http.429":
        headers |= {
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": f"{wait:g}s",
        }
    return StatusError(status, kind, text.format(model=model or "the model", wait=f"{wait:g}"), code, headers=headers)


def retry_headers(seconds: float) -> dict[str, str]:
    return {"retry-after": f"{seconds:g}", "retry-after-ms": str(int(seconds * 1000))}
