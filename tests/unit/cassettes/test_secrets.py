"""Every secret kind redaction knows, in every place a recording can carry it, and the scan
``mockserver cassettes check`` runs over files written by anyone (vcrpy included).

The secrets are assembled from pieces at import time, so this file holds no literal key a
secret scanner (ours, or a code host's) would stop a push for.
"""

from __future__ import annotations

import base64
import gzip
import http.server
import io
import json
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from mockserver.cassettes import redact
from mockserver.cassettes.check import check_cassettes
from mockserver.cassettes.files import CassetteError, load
from mockserver.cassettes.format import (
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Stream,
    StreamEvent,
    dumps,
    dumps_appendable,
    loads,
)
from mockserver.cassettes.redact import (
    REDACTED,
    add_pattern,
    added_patterns,
    find_secrets,
    redact_bytes,
    redact_headers,
    redact_text,
    redact_uri,
    scan,
    sensitive_header,
)


@dataclass(frozen=True)
class Kind:
    """A credential as it appears (``text``) and the part of it that must never reach disk."""

    name: str
    text: str
    secret: str


def _kinds() -> list[Kind]:
    aws_secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq8Ab3Cd4E"  # 40 characters
    password = "s3cr3t-" + "Pa55word"
    hook = "T0A1B2C3D/B4E5F6G7H/" + "x9y8z7w6v5u4t3s2r1q0"
    pem_body = "MIIEowIBAAKCAQEAx1y2z3" + "w4v5u6t7s8r9q0p1o2n3m4"
    jwt = "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sIgNaTuRe_abc-123"
    # (name, the text, the kept prefix or None, the secret when it is not the rest of the text)
    pieces: list[tuple[str, str, str | None, str | None]] = [
        ("openai", "sk-" + "proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "sk-", None),
        ("anthropic", "sk-" + "ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2", "sk-", None),
        ("bearer", "Bearer " + "opaque7Tok3nValue0123456", "Bearer ", None),
        ("jwt", jwt, "eyJ", None),
        ("aws-key-id", "AKIA" + "Q3EXAMPLEZ7WX2YV", "AKIA", None),
        ("aws-secret", "aws_secret_access_key=" + aws_secret, "aws_secret_access_key=", None),
        ("github", "ghp_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "ghp_", None),
        ("github-pat", "github_pat_" + "11ABCDEFG0abcdefghij_klmnopqrstuvwxyz0123", "github_pat_", None),
        ("slack", "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl", "xoxb-", None),
        ("slack-webhook", "https://hooks.slack.com/services/" + hook, None, hook.split("/", 1)[1]),
        ("google", "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIza", None),
        ("google-oauth", "ya29." + "a0AfH6SMBx1y2z3abcdefghijklmnop", "ya29.", None),
        ("stripe", "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_", None),
        ("url-password", "postgres://alice:" + password + "@db.example.com/app", None, password),
        (
            "private-key",
            "-----BEGIN RSA " + "PRIVATE KEY-----\n" + pem_body + "\nabcdEFGH1234==\n-----END RSA PRIVATE KEY-----",
            None,
            pem_body,
        ),
    ]
    return [
        Kind(name, text, secret if secret is not None else text[len(prefix or "") :])
        for name, text, prefix, secret in pieces
    ]


KINDS = _kinds()


def forms(secret: str) -> list[str]:
    """The ways a secret can be spelled in a file: as is, JSON-escaped (``\\/`` included),
    percent-encoded (``+`` for spaces too), base64."""
    escaped = json.dumps(secret)[1:-1]
    return [
        secret,
        escaped,
        escaped.replace("/", "\\/"),
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        base64.b64encode(secret.encode()).decode(),
    ]


def assert_gone(redacted: str, kind: Kind) -> None:
    for form in forms(kind.secret):
        assert form not in redacted, f"{kind.name} left as {form!r} in {redacted!r}"
    assert REDACTED in redacted


def assert_settled(redacted: str) -> None:
    """Redaction is idempotent and what it leaves scans clean."""
    assert redact_text(redacted) == redacted
    assert list(find_secrets(redacted)) == []


# ------------------------------------------------------------------ every kind, every place


def _interaction(kind: Kind) -> Interaction:
    """One recording carrying ``kind`` in every place: the URI (path and query), a header by
    value, the request body, the response headers, and a streamed answer echoing it."""
    body = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": f"remember {kind.text} please"}],
            "metadata": {"note": kind.text},
            "user": kind.text,
        }
    ).encode()
    echo = b"data: " + json.dumps({"choices": [{"delta": {"content": kind.text}}]}).encode() + b"\n\n"
    stream = Stream((StreamEvent(0.01, echo), StreamEvent(0.02, b"data: [DONE]\n\n")))
    return Interaction(
        RecordedRequest(
            "POST", "https://h/v1/chat/completions?note=" + quote(kind.text, safe=""), (("x-trace", kind.text),), body
        ),
        RecordedResponse.streamed(200, (("content-type", "text/event-stream"), ("x-echo", kind.text)), stream),
    )


PLACES = {
    "text": lambda text: redact_text(f"a note: {text} (end)"),
    "header-value": lambda text: redact_headers([("x-trace", f"id={text}")])[0][1],
    "query": lambda text: redact_uri("https://h/v1/models?note=" + quote(text, safe="") + "&limit=2"),
    "query-plain": lambda text: redact_uri(f"https://h/v1/models?q={text.replace(' ', '+')}&limit=2"),
    "json-body": lambda text: redact_bytes(json.dumps({"input": text, "meta": {"k": [text]}}).encode()).decode(),
    "json-slash-escaped": lambda text: redact_bytes(json.dumps({"input": text}).replace("/", "\\/").encode()).decode(),
    "json-in-json": lambda text: redact_bytes(json.dumps({"arguments": json.dumps({"v": text})}).encode()).decode(),
    "form-body": lambda text: redact_bytes(("note=" + quote_plus(f"x {text}") + "&n=1").encode()).decode(),
    "percent-encoded-text": lambda text: redact_bytes(
        ("see " + quote(f"x {text}", safe="") + " now").encode()
    ).decode(),
    "sse": lambda text: redact_bytes(
        b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"
    ).decode(),
}


@pytest.mark.parametrize("place", PLACES, ids=list(PLACES))
@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_kind_is_redacted_in_every_place(kind: Kind, place: str) -> None:
    redacted = PLACES[place](kind.text)
    assert_gone(redacted, kind)
    assert_settled(redacted)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_cassette_holds_no_form_of_any_secret(kind: Kind) -> None:
    interaction = _interaction(kind)
    for text in (dumps([interaction]), dumps([interaction], "json"), dumps_appendable([interaction])):
        for form in forms(kind.secret):
            assert form not in text, f"{kind.name} written as {form!r}"
    again = loads(dumps([interaction]))[0]
    assert again == again.redacted()  # loading a clean cassette changes nothing
    assert len(again.response.stream.events if again.response.stream else ()) == 2


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_the_scan_finds_each_kind_and_masks_it(kind: Kind, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "leaky.yaml").write_text(f"key: {json.dumps(kind.text)}\n")
    assert check_cassettes(str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "leaky.yaml:1:" in out
    # Masked: at most the kept prefix and 4 characters of the secret, never 6 in a row.
    windows = {kind.secret[i : i + 6] for i in range(len(kind.secret) - 5)}
    assert not any(window in out for window in windows), out


# ------------------------------------------------------------------------- headers by name


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "Proxy-Authorization",
        "api-key",
        "X-Api-Key",
        "x-goog-api-key",
        "Cookie",
        "Set-Cookie",
        "X-Custom-Token",
        "X-Auth-Token",
        "X-Amz-Security-Token",
        "X-Api-Secret",
        "x-client-password",
    ],
)
def test_credential_named_headers_lose_any_value(name: str) -> None:
    assert sensitive_header(name)
    assert redact_headers([(name, "plain-value-42")]) == ((name, REDACTED),)


@pytest.mark.parametrize(
    "name",
    [
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-reset-tokens",
        "openai-processing-ms",
        "x-request-id",
        "www-authenticate",
        "access-control-allow-headers",
        "content-type",
    ],
)
def test_ordinary_headers_keep_their_value(name: str) -> None:
    assert not sensitive_header(name)
    assert redact_headers([(name, "authorization, x-api-key, 9000")]) == ((name, "authorization, x-api-key, 9000"),)


# --------------------------------------------------------------------- no false positives


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"model": "m", "max_tokens": 100, "max_completion_tokens": 7}', id="max_tokens"),
        pytest.param("x-ratelimit-remaining-tokens: 149984", id="ratelimit-header-line"),
        pytest.param(
            '{"page_token": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA2", "nextToken": "abc123def456"}', id="page_token"
        ),
        pytest.param("Bearer authentication sends a token in the Authorization header.", id="bearer-prose"),
        pytest.param("client = OpenAI(api_key=os.environ['OPENAI_API_KEY'])", id="api_key-code"),
        pytest.param('requests.get(url, params={"api_key": os.environ["KEY"]})', id="api_key-dict-code"),
        pytest.param('{"token": "Hello", "logprob": -0.1, "bytes": [72]}', id="logprobs-token"),
        pytest.param('{"properties": {"password": {"type": "string", "minLength": 8}}}', id="schema-password"),
        pytest.param('{"secret_word": "banana"}', id="secret-prefixed-name"),
        pytest.param("postgres://alice@db.example.com:5432/app and https://host:8080/a@b", id="url-without-password"),
        pytest.param("the tokenizer splits sk-learn into tokens; ask the author", id="words"),
        pytest.param("sha256 9f86d081884c7d659a2feaea0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0", id="hex-digest"),
        pytest.param("id 123e4567-e89b-12d3-a456-426614174000 at 12:30:45", id="uuid-time"),
        pytest.param("Fran%C3%A7ais%20text%2C%20100%25%20plain", id="percent-encoded-prose"),
        pytest.param("HTTP Basic authentication is a scheme", id="basic-prose"),
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text
    assert redact_bytes(text.encode()) == text.encode()
    assert list(find_secrets(text)) == []


def test_credential_named_fields_lose_their_value_wherever_they_are() -> None:
    assert redact_uri("https://h/v1/x?page_token=abc&api_key=k1&model=m") == (
        "https://h/v1/x?page_token=abc&api_key=REDACTED&model=m"
    )
    assert redact_bytes(b"username=alice&password=hunter2&grant_type=password") == (
        b"username=alice&password=REDACTED&grant_type=password"
    )
    body = json.dumps({"db": {"password": "hunter2"}, "arguments": json.dumps({"client_secret": "s3"})})
    assert json.loads(redact_text(body)) == {"db": {"password": REDACTED}, "arguments": '{"client_secret": "REDACTED"}'}
    assert redact_text("Authorization: Basic dXNlcjpwYXNzd29yZA==") == "Authorization: Basic REDACTED"


def test_percent_encoded_secrets_keep_their_encoded_prefix() -> None:
    github = next(k for k in KINDS if k.name == "github")
    url = next(k for k in KINDS if k.name == "url-password")
    nested = "https://h/cb?next=" + quote(f"{url.text}?t={github.text}", safe="")
    assert redact_text(nested) == (
        "https://h/cb?next=postgres%3A%2F%2Falice%3AREDACTED%40db.example.com%2Fapp%3Ft%3Dghp_REDACTED"
    )


# --------------------------------------------------------------------- files, as the scan sees them


def _yaml_cassette(body: str) -> str:
    return (
        "interactions:\n- request:\n    body: null\n    headers: {}\n    method: GET\n"
        "    uri: https://h/v1/models\n  response:\n"
        f"    body:\n{body}\n    headers: {{}}\n    status: {{code: 200, message: OK}}\nversion: 1\n"
    )


def _folded(secret: str) -> str:
    # A double-quoted scalar continued with a trailing backslash: the key is cut mid-word.
    cut = len(secret) // 2
    return f'      string: "key: {secret[:cut]}\\\n        {secret[cut:]} end"'


def _escaped(secret: str) -> str:
    return '      string: "key: ' + "".join(f"\\x{ord(c):02x}" for c in secret) + '"'


def _binary(secret: str) -> str:
    return f"      string: !!binary |\n        {base64.b64encode(f'key: {secret}'.encode()).decode()}"


def _gzipped(secret: str) -> str:
    raw = gzip.compress(f"key: {secret}".encode())
    return f"      string: !!binary |\n        {base64.b64encode(raw).decode()}"


@pytest.mark.parametrize("spelling", [_folded, _escaped, _binary, _gzipped], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("kind", [k for k in KINDS if k.name in ("openai", "github", "aws-key-id", "jwt", "slack")])
def test_the_scan_sees_through_yaml_spellings(kind: Kind, spelling: object, tmp_path: Path) -> None:
    assert callable(spelling)
    path = tmp_path / "c.yaml"
    path.write_text(_yaml_cassette(spelling(kind.text)))
    findings = scan(path)
    assert findings and all(f.path == path for f in findings)
    if spelling is not _gzipped:  # vcrpy hands a gzipped body back still compressed
        (interaction,) = load(path)
        assert kind.secret.encode() not in interaction.response.body


# --------------------------------------------------------------------- added patterns


def test_add_pattern_redacts_and_scans_until_its_block_ends() -> None:
    internal = "ACME-" + "7731905521"
    assert redact_text(f"use {internal}") == f"use {internal}"
    with added_patterns(r"\bACME-\d{10}\b"):
        assert redact_text(f"use {internal}") == f"use {REDACTED}"
        assert [s.kind for s in find_secrets(f"use {internal}")] == ["custom pattern"]
    with added_patterns(r"(\bACME-)\d{10}\b"):  # a group keeps its text as the prefix
        assert redact_text(f"use {internal}") == "use ACME-REDACTED"
        assert redact_text("use ACME-REDACTED") == "use ACME-REDACTED"
    assert redact_text(f"use {internal}") == f"use {internal}"
    with pytest.raises(ValueError, match="empty string"):
        add_pattern(r"x*")
    with pytest.raises(ValueError, match="invalid pattern"):
        add_pattern(r"(")


def test_cassettes_check_takes_more_patterns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    internal = "ACME-" + "7731905521"
    (tmp_path / "c.yaml").write_text(_yaml_cassette(f'      string: "ticket {internal}"'))
    assert check_cassettes(str(tmp_path)) == 0
    assert check_cassettes(str(tmp_path), [r"(ACME-)\d{10}"]) == 1
    out = capsys.readouterr().out
    assert "c.yaml:9: custom pattern: ACME-… (10 chars)" in out and internal not in out
    assert check_cassettes(str(tmp_path)) == 0  # the pattern lasted one run only
    assert check_cassettes(str(tmp_path), ["("]) == 2
    assert check_cassettes(str(tmp_path), ["x?"]) == 2


# --------------------------------------------------------------------- cassettes check, whole


class _Echo(http.server.BaseHTTPRequestHandler):
    """An upstream that echoes what it was sent, headers and body, and sets a cookie."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = json.dumps({"headers": dict(self.headers), "body": body.decode(), "path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("set-cookie", "session=" + "c00k1e" * 4)
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def echo_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_check_fails_on_a_cassette_vcrpy_wrote_with_secrets(
    echo_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import vcr  # type: ignore[import-untyped]

    github, aws = (next(k for k in KINDS if k.name == n) for n in ("github", "aws-key-id"))
    path = tmp_path / "vcrpy.yaml"
    with vcr.use_cassette(str(path), record_mode="all"):  # vcrpy filters nothing by default
        request = urllib.request.Request(
            f"{echo_url}/v1/chat/completions?api_key=k123456",
            data=json.dumps({"content": f"my key is {aws.text}"}).encode(),
            headers={"Authorization": f"token {github.text}", "X-Custom-Token": "plain-value-42"},
        )
        with urllib.request.urlopen(request) as response:
            assert github.text in response.read().decode()  # the upstream echoed it
    written = path.read_text()
    assert github.text in written and aws.text in written and "plain-value-42" in written

    assert check_cassettes(str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert github.text not in out and aws.text not in out and "plain-value-42" not in out
    kinds = {line.split(": ")[1] for line in out.splitlines() if line.startswith(str(path))}
    assert {"GitHub token", "AWS access key id", "X-Custom-Token header", "secret query parameter"} <= kinds
    # and mockserver serves it clean
    for interaction in load(path):
        text = repr(interaction)
        assert github.text not in text and aws.text not in text and "plain-value-42" not in text


def test_check_fails_on_a_truncated_cassette_that_stops_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    interaction = Interaction(RecordedRequest("GET", "https://h/v1/models"), RecordedResponse(200, (), b'{"data": []}'))
    text = dumps([interaction, interaction])
    (tmp_path / "cut.yaml").write_text(text[: len(text) // 2])
    with pytest.raises(CassetteError):
        load(tmp_path / "cut.yaml")  # what serve does at start-up
    assert check_cassettes(str(tmp_path)) == 1
    assert "cut.yaml: not a readable cassette, serve would not start" in capsys.readouterr().out


def test_check_fails_on_a_torn_append(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    interaction = Interaction(RecordedRequest("GET", "https://h/v1/models"), RecordedResponse(200, (), b'{"data": []}'))
    text = dumps_appendable([interaction, interaction])
    (tmp_path / "torn.yaml").write_text(text[: -len("# end\n") - 5])
    assert len(load(tmp_path / "torn.yaml")) == 1  # serve starts, one recording short
    assert check_cassettes(str(tmp_path)) == 1
    assert "torn.yaml: loads only in part" in capsys.readouterr().out


def test_check_passes_a_clean_dir_and_refuses_a_missing_one(tmp_path: Path) -> None:
    kinds = [_interaction(kind) for kind in KINDS]
    (tmp_path / "all.yaml").write_text(dumps(kinds))
    (tmp_path / "appended.yaml").write_text(dumps_appendable(kinds))
    (tmp_path / "all.json").write_text(dumps(kinds, "json"))
    out = io.StringIO()
    assert check_cassettes(str(tmp_path), out=out) == 0, out.getvalue()
    assert check_cassettes(str(tmp_path / "missing")) == 2


# --------------------------------------------------------------------- streamed in pieces


def _chat_stream(text: str, size: int) -> Stream:
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    events = [
        b"data: " + json.dumps({"id": "c1", "choices": [{"index": 0, "delta": {"content": piece}}]}).encode() + b"\n\n"
        for piece in pieces
    ]
    return Stream(tuple(StreamEvent(0.01 * n, event) for n, event in enumerate([*events, b"data: [DONE]\n\n"])))


def _joined(interaction: Interaction) -> str:
    assert interaction.response.stream is not None
    datas = [json.loads(e.data[6:]) for e in interaction.response.stream.events if e.data.startswith(b"data: {")]
    return "".join(data["choices"][0]["delta"]["content"] for data in datas)


@pytest.mark.parametrize("size", [1, 3, 7])
@pytest.mark.parametrize("kind", [k for k in KINDS if k.name in ("openai", "github", "jwt", "url-password")])
def test_a_secret_streamed_a_few_characters_per_event_is_redacted_joined(kind: Kind, size: int) -> None:
    text = f"Your key: {kind.text} (twice: {kind.text})"
    stream = _chat_stream(text, size)
    recorded = Interaction(
        RecordedRequest("POST", "https://h/v1/chat/completions"),
        RecordedResponse.streamed(200, (("content-type", "text/event-stream"),), stream),
    )
    clean = recorded.redacted()
    assert _joined(clean) == redact_text(text)  # what a client reads back, redacted once
    assert clean.redacted() == clean
    assert len(clean.response.stream.events if clean.response.stream else ()) == len(stream.events)
    # the scan reads the pieces of a raw recording (as another tool would write it) together too
    raw = {"interactions": [{"response": {"body": {"string": recorded.response.body.decode()}}}], "version": 1}
    assert f"{kind.text[:10]}" not in recorded.response.body.decode()  # cut up: no pattern sees it whole
    assert {f.kind.endswith("(streamed in pieces)") for f in scan_text(json.dumps(raw))} == {True}
    assert scan_text(dumps([recorded])) == []  # dumps redacts


def scan_text(text: str) -> list[redact.Finding]:
    path = Path(tempfile.mkdtemp()) / "c.json"
    path.write_text(text)
    return scan(path)
