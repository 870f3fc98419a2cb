"""A batch's input file, read and judged as OpenAI's validation does.

A file uploaded with ``purpose: batch`` that is not JSONL at all is refused at upload
(:func:`not_jsonl`); a bad line further down fails the *batch*, at validation, with the line's
number (:func:`read_lines`): ``invalid_json_line``, a ``url`` other than the batch's endpoint
(``invalid_url``), a method other than POST, a missing ``custom_id`` or a duplicate one, a body
missing a parameter the endpoint requires or asking to ``stream`` (``invalid_request``), an
unknown model (``model_not_found``, when the server rejects unknown models), more than
:data:`MAX_LINES` requests. Every problem found is named (up to :data:`MAX_PROBLEMS`), so a
test sees all its bad lines at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from mockserver.wire.json import Json, NotFinite, NotJson, dumps, loads

__all__ = ["ENDPOINTS", "MAX_LINES", "Line", "Problem", "not_jsonl", "read_lines"]

# The endpoints a batch may run, and the body parameters each requires.
ENDPOINTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "/v1/chat/completions": ("model", "messages"),
        "/v1/completions": ("model", "prompt"),
        "/v1/embeddings": ("model", "input"),
        "/v1/responses": ("model",),
        "/v1/moderations": ("input",),
    }
)
MAX_LINES = 50_000  # requests one batch may hold (OpenAI's limit)
MAX_PROBLEMS = 100  # problems named in a failed batch's errors

# A model id's problem (None: the server serves it), as a direct request would find it.
ModelCheck = Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based, as the errors name lines
    custom_id: str
    body: bytes  # the request body, compact JSON
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    code: str
    line: int | None
    param: str | None
    message: str

    def to_json(self) -> Json:
        return {"code": self.code, "line": self.line, "param": self.param, "message": self.message}


def _rows(data: bytes) -> list[tuple[int, bytes]]:
    """The non-blank lines with their 1-based numbers."""
    return [(n, row) for n, row in enumerate(data.split(b"\n"), 1) if row.strip()]


def not_jsonl(data: bytes) -> str | None:
    """Why ``data`` is not JSONL at all (None: it is, at least its first line)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "The file is not UTF-8 text."
    rows = _rows(data)
    if not rows:
        return "The file holds no lines."
    try:
        first = loads(rows[0][1])
    except (NotJson, NotFinite):
        return f"Line {rows[0][0]} is not JSON: a batch file holds one JSON object per line."
    if not isinstance(first, dict):
        return f"Line {rows[0][0]} is not a JSON object: a batch file holds one request object per line."
    return None


def read_lines(data: bytes, endpoint: str, model_problem: ModelCheck) -> tuple[list[Line], list[Problem]]:
    """The requests of an input file for a batch on ``endpoint``, and every problem found."""
    lines: list[Line] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    rows = _rows(data)
    if not rows:
        return [], [Problem("empty_file", None, None, "The input file holds no requests.")]
    if len(rows) > MAX_LINES:
        message = f"The input file holds {len(rows)} requests; a batch may hold at most {MAX_LINES}."
        return [], [Problem("too_many_requests", None, None, message)]
    for number, row in rows:
        if len(problems) >= MAX_PROBLEMS:
            break
        problem, line = _line(number, row, endpoint, model_problem, seen)
        if problem is not None:
            problems.append(problem)
        elif line is not None:
            lines.append(line)
    return lines, problems


def _line(
    n: int, row: bytes, endpoint: str, model_problem: ModelCheck, seen: set[str]
) -> tuple[Problem | None, Line | None]:
    try:
        item = loads(row)
    except (NotJson, NotFinite):
        return Problem("invalid_json_line", n, None, f"Line {n} is not valid JSON."), None
    if not isinstance(item, dict):
        return Problem("invalid_json_line", n, None, f"Line {n} is not a JSON object."), None
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return Problem("invalid_request", n, "custom_id", f"Line {n} has no 'custom_id' string."), None
    if custom_id in seen:
        message = f"Line {n} repeats custom_id '{custom_id}': each request's custom_id must be unique."
        return Problem("duplicate_custom_id", n, "custom_id", message), None
    seen.add(custom_id)
    if item.get("method") != "POST":
        return Problem("invalid_request", n, "method", f"Line {n}: 'method' must be 'POST'."), None
    url = item.get("url")
    if url != endpoint:
        message = f"Line {n}: the url {url!r} is not the batch's endpoint '{endpoint}'."
        return Problem("invalid_url", n, "url", message), None
    body = item.get("body")
    if not isinstance(body, dict):
        return Problem("invalid_request", n, "body", f"Line {n}: 'body' must be a JSON object."), None
    for name in ENDPOINTS[endpoint]:
        if name not in body:
            message = f"Line {n}: the body misses the required parameter '{name}'."
            return Problem("invalid_request", n, f"body.{name}", message), None
    if body.get("stream") is True:
        message = f"Line {n}: streaming is not supported in a batch ('stream': true)."
        return Problem("invalid_request", n, "body.stream", message), None
    model = body.get("model")
    if isinstance(model, str):
        why = model_problem(model)
        if why is not None:
            return Problem("model_not_found", n, "body.model", f"Line {n}: {why}"), None
    return None, Line(n, custom_id, dumps(body), model if isinstance(model, str) else None)
