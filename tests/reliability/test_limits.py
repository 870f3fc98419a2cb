"""Request limits against a real server in a child process, as a hostile client would test them:
bodies over the limit (413 before they are read whole), JSON nested 100k deep, numbers JSON
cannot carry, 100k prompts, and prompts of megabytes. Each case asserts the 4xx in OpenAI's
envelope, that the server still answers afterwards, and for the big prompts the server's RSS
and ``/health`` latency meanwhile (a figure; asserted only against a generous bound, so a
loaded machine cannot fail it: the issue's aim is a p99 ≤ 50 ms).

Sizes: ``make test`` runs a 1 MB prompt; ``MOCKSERVER_RELIABILITY=full`` 5 MB and 20 MB.
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.reliability.conftest import BUDGET
from tests.reliability.harness import Child, child_server, error_envelope, proc_status

Json = dict[str, Any]
MB = 1024 * 1024
SMALL_LIMIT = MB  # --max-body-bytes of the server that checks the 413s
PROMPT_MBS = (5, 20) if BUDGET.name == "full" else (1,)
HEALTH_BOUND = 1.0  # seconds: a sanity bound on /health p99 during abuse (the aim is 50 ms)
RSS_GROWTH_BOUND = 200 * 1024  # kB the server may grow by over a prompt of megabytes
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """A server whose body limit is small and whose depth limit is the highest allowed."""
    log = tmp_path_factory.mktemp("limits") / "small.log"
    with child_server(["--max-body-bytes", str(SMALL_LIMIT), "--max-json-depth", "1000"], log) as child:
        _serving(child)  # warm: the model is loaded on first use, and RSS is compared after that
        yield child


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """A server that takes bodies of megabytes, so big prompts reach the context check."""
    log = tmp_path_factory.mktemp("limits") / "roomy.log"
    with child_server(["--max-body-bytes", str(64 * MB)], log) as child:
        _serving(child)
        yield child


def _port(child: Child) -> int:
    return int(child.url.rsplit(":", 1)[1])


def _strict(text: str | bytes) -> Any:
    """JSON as any strict parser reads it: NaN and Infinity refused."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"the server wrote {name}, which is not JSON")

    return json.loads(text, parse_constant=refuse)


def _serving(child: Child) -> None:
    """The server still answers a health check and a normal generation."""
    assert httpx.get(child.url + "/health", timeout=30).status_code == 200
    answer = httpx.post(
        child.base_url + "/chat/completions", json={"model": "m", "messages": HI, "max_tokens": 2}, timeout=60
    )
    assert answer.status_code == 200, answer.text[:500]


def _read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a content-length: its status and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a response: {data[:200]!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(v) for k, _, v in (line.partition(":") for line in lines[1:]) if k.lower() == "content-length")
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-body"
        body += chunk
    return status, body[:length]


def _assert_413(status: int, body: bytes) -> None:
    assert status == 413, body[:300]
    error = error_envelope(_strict(body))
    assert error["code"] == "request_too_large" and str(SMALL_LIMIT) in error["message"]


# ---- 413 ----------------------------------------------------------------------------------


def _head(length: int | None) -> bytes:
    framing = f"content-length: {length}" if length is not None else "transfer-encoding: chunked"
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(small: Child) -> None:
    rss = proc_status(small.pid, "VmRSS")
    with socket.create_connection(("127.0.0.1", _port(small)), timeout=30) as sock:
        # A gigabyte declared, 64 KiB sent: the answer comes without the rest.
        sock.sendall(_head(1024 * MB) + b"{" + b" " * 65535)
        _assert_413(*_read_response(sock))
    assert proc_status(small.pid, "VmRSS") - rss < 50 * 1024
    _serving(small)


def test_a_body_over_the_limit_leaves_the_connection_serving(small: Child) -> None:
    body = b'{"model": "m", "messages": [], "pad": "' + b"x" * (2 * SMALL_LIMIT) + b'"}'
    with socket.create_connection(("127.0.0.1", _port(small)), timeout=30) as sock:
        sock.sendall(_head(len(body)) + body)
        _assert_413(*_read_response(sock))
        # The same connection: the unread body was discarded and the next request is served.
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        status, _ = _read_response(sock)
        assert status == 200


def test_a_chunked_body_is_refused_once_past_the_limit(small: Child) -> None:
    rss = proc_status(small.pid, "VmRSS")
    chunk = b"x" * 65536
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    with socket.create_connection(("127.0.0.1", _port(small)), timeout=30) as sock:
        sock.sendall(_head(None) + b'6\r\n{"a":"\r\n')
        # Twice the limit, and no last chunk: an answer proves the body was never read whole.
        for _ in range(2 * SMALL_LIMIT // len(chunk)):
            try:
                sock.sendall(framed)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server answered and closed: what follows reads its answer
        _assert_413(*_read_response(sock))
    assert proc_status(small.pid, "VmRSS") - rss < 50 * 1024
    _serving(small)


# ---- JSON depth and numbers ---------------------------------------------------------------


def _nested(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


@pytest.mark.parametrize("levels", [100_000, 1001])
def test_json_nested_past_the_limit_is_a_400(small: Child, levels: int) -> None:
    body = '{"model": "m", "messages": ' + _nested(levels) + "}"
    answer = httpx.post(
        small.base_url + "/chat/completions", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert answer.status_code == 400, answer.text[:300]
    assert "--max-json-depth" in error_envelope(_strict(answer.text))["message"]
    _serving(small)


@pytest.mark.parametrize("levels", [486, 990])
def test_a_deep_request_leaves_the_journal_readable(small: Child, levels: int) -> None:
    # Under the limit (1000 here): served, journaled, and the journal must still render.
    deep = '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "deep": '
    for path in ("/chat/completions", "/completions"):
        body = (
            deep.replace('"messages": [{"role": "user", "content": "hi"}]', '"prompt": "hi"')
            if path == "/completions"
            else deep
        )
        answer = httpx.post(
            small.base_url + path,
            content=body + _nested(levels) + "}",
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert answer.status_code < 500, answer.text[:300]
        journal = httpx.get(small.url + "/__mockserver/journal", timeout=30)
        assert journal.status_code == 200, journal.text[:300]
        _strict(journal.text)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        pytest.param(
            '"tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "x": NaN}}]',
            "tools[0].parameters.x",
            id="tools-parameters-nan",
        ),
        pytest.param(
            '"tools": [{"type": "function", "name": "f", "parameters": {"maximum": 1e400}}]',
            "tools[0].parameters.maximum",
            id="tools-parameters-overflow",
        ),
        pytest.param(
            '"text": {"format": {"type": "json_schema", "name": "f", "schema": {"minimum": -Infinity}}}',
            "text.format.schema.minimum",
            id="text-format-schema-infinity",
        ),
        pytest.param(
            '"text": {"format": {"type": "json_schema", "name": "f", "schema": {"enum": [1, 1e400]}}}',
            "text.format.schema.enum[1]",
            id="text-format-schema-overflow",
        ),
    ],
)
def test_numbers_json_cannot_carry_are_a_400_naming_the_field(small: Child, extra: str, param: str) -> None:
    body = '{"model": "m", "input": "hi", "max_output_tokens": 4, ' + extra + "}"
    for stream in (False, True):
        sent = body[:-1] + ', "stream": true}' if stream else body
        answer = httpx.post(
            small.base_url + "/responses", content=sent, headers={"content-type": "application/json"}, timeout=30
        )
        assert answer.status_code == 400, answer.text[:300]
        error = error_envelope(_strict(answer.text))
        assert error["param"] == param
    _serving(small)


# ---- many prompts, big lists --------------------------------------------------------------


def test_a_hundred_thousand_prompts_are_refused_fast(roomy: Child) -> None:
    start = time.perf_counter()
    answer = httpx.post(roomy.base_url + "/completions", json={"model": "m", "prompt": ["hi"] * 100_000}, timeout=60)
    took = time.perf_counter() - start
    assert answer.status_code == 400, answer.text[:300]
    assert error_envelope(_strict(answer.text))["param"] == "prompt"
    assert took < 10, f"{took:.1f} s to refuse"  # a sanity bound: work was skipped, not done (it was 59 s)
    _serving(roomy)


@pytest.mark.parametrize("name", ["logit_bias", "stop_token_ids"])
def test_a_huge_list_gets_a_small_error(roomy: Child, name: str) -> None:
    count = 500_000 if BUDGET.name == "full" else 100_000
    entries: Any = {f"not-a-token-{i}": 1 for i in range(count)} if name == "logit_bias" else [-1] * count
    answer = httpx.post(
        roomy.base_url + "/chat/completions", json={"model": "m", "messages": HI, name: entries}, timeout=60
    )
    assert answer.status_code == 400
    assert error_envelope(_strict(answer.text))["param"] == name
    assert len(answer.content) < 2000, f"{len(answer.content)} bytes of error"


# ---- prompts of megabytes -----------------------------------------------------------------


class HealthProbe:
    """``/health`` asked again and again on its own connection, in a thread, while it runs."""

    def __init__(self, url: str) -> None:
        self.url = url + "/health"
        self.samples: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-probe", daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                start = time.perf_counter()
                ok = client.get(self.url).status_code == 200
                self.samples.append(time.perf_counter() - start)
                self.failures += not ok
                time.sleep(0.005)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def quantile(self, q: float) -> float:
        return statistics.quantiles(self.samples, n=100, method="inclusive")[int(q * 100) - 1]


def _big_prompt(endpoint: str, size: int) -> tuple[str, Json]:
    text = "word " * (size // 5)
    if endpoint == "chat":
        return "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 4}
    if endpoint == "responses":
        return "/responses", {"model": "m", "input": text, "max_output_tokens": 16}
    return "/completions", {"model": "m", "prompt": text, "max_tokens": 4}


@pytest.mark.parametrize("endpoint", ["completions", "chat", "responses"])
@pytest.mark.parametrize("mb", PROMPT_MBS)
def test_a_prompt_of_megabytes_is_refused_by_its_size(
    roomy: Child, endpoint: str, mb: int, figures: dict[str, Any]
) -> None:
    path, body = _big_prompt(endpoint, mb * MB)
    sent = json.dumps(body).encode()
    _serving(roomy)
    rss_before = proc_status(roomy.pid, "VmRSS")
    with HealthProbe(roomy.url) as probe:
        time.sleep(0.2)  # some samples at rest first
        start = time.perf_counter()
        for _ in range(3):
            answer = httpx.post(
                roomy.base_url + path, content=sent, headers={"content-type": "application/json"}, timeout=120
            )
            assert answer.status_code == 400, answer.text[:300]
        took = (time.perf_counter() - start) / 3
        time.sleep(0.2)
    rss_after = proc_status(roomy.pid, "VmRSS")
    error = error_envelope(_strict(answer.text))
    assert error["code"] == "context_length_exceeded"
    assert error["param"] == {"chat": "messages", "responses": "input"}.get(endpoint, "prompt")
    assert "at least" in error["message"]
    p99 = probe.quantile(0.99)
    figures.update(
        {
            "request": f"{endpoint}, {mb} MB prompt, x3",
            "refused in (s, mean)": round(took, 3),
            "health p50 (ms)": round(statistics.median(probe.samples) * 1000, 1),
            "health p99 (ms)": round(p99 * 1000, 1),
            "health samples": len(probe.samples),
            "rss before (MB)": round(rss_before / 1024, 1),
            "rss after (MB)": round(rss_after / 1024, 1),
        }
    )
    print(
        f"\n{endpoint} {mb} MB: health p99 {p99 * 1000:.1f} ms, RSS {rss_before / 1024:.0f} → {rss_after / 1024:.0f} MB"
    )
    assert probe.failures == 0
    assert p99 < HEALTH_BOUND, f"/health p99 {p99 * 1000:.0f} ms while a {mb} MB prompt was refused"
    assert rss_after - rss_before < RSS_GROWTH_BOUND, f"RSS grew {(rss_after - rss_before) / 1024:.0f} MB"
    _serving(roomy)


# ---- max_tokens too large names a field the endpoint has ----------------------------------


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        pytest.param("/chat/completions", {"messages": HI, "max_tokens": 100_000}, "max_tokens", id="chat"),
        pytest.param("/completions", {"prompt": "hi", "max_tokens": 100_000}, "max_tokens", id="completions"),
        pytest.param("/responses", {"input": "hi", "max_output_tokens": 100_000}, "max_output_tokens", id="responses"),
        pytest.param("/responses", {"input": "word " * 9000}, "input", id="responses-long-input"),
        pytest.param(
            "/chat/completions",
            {"messages": [{"role": "user", "content": "word " * 9000}], "max_tokens": 4},
            "messages",
            id="chat-long-messages",
        ),
        pytest.param("/completions", {"prompt": "word " * 9000, "max_tokens": 4}, "prompt", id="completions-long"),
    ],
)
def test_context_errors_name_a_field_of_the_endpoint(roomy: Child, path: str, body: Json, param: str) -> None:
    answer = httpx.post(roomy.base_url + path, json={"model": "m", **body}, timeout=60)
    assert answer.status_code == 400, answer.text[:300]
    error = error_envelope(_strict(answer.text))
    assert error["code"] == "context_length_exceeded"
    assert error["param"] == param, error
    assert (param in body) or param in ("messages", "prompt", "input")
    if "messages" not in body:
        assert "messages" not in error["message"]
