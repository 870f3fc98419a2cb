"""Secrets never land: header, body and URL redaction, the scan, and ``cassettes check``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mockserver.cassettes.redact import (
    REDACTED,
    find_secrets,
    redact_bytes,
    redact_headers,
    redact_text,
    redact_uri,
    scan,
    secret_parameter,
)
from mockserver.cli import main
from tests.support.live import ROOT

KEY = "sk-" + "proj-" + "Xy7" * 12  # split so this file itself holds no literal key
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxIn0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    "name", ["Authorization", "api-key", "X-Api-Key", "OpenAI-Organization", "openai-project", "Cookie", "set-cookie"]
)
def test_sensitive_headers_lose_their_value(name: str) -> None:
    assert redact_headers([(name, "anything"), ("content-type", "application/json")]) == (
        (name, REDACTED),
        ("content-type", "application/json"),
    )


def test_other_headers_lose_only_key_looking_values() -> None:
    assert redact_headers([("x-custom", f"key={KEY}")]) == (("x-custom", "key=sk-REDACTED"),)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(f'{{"key": "{KEY}"}}', '{"key": "sk-REDACTED"}', id="sk-key"),
        pytest.param("sk-ant-api03-" + "a1B2" * 8, "sk-REDACTED", id="anthropic"),
        pytest.param(f"Authorization: Bearer {JWT}", "Authorization: Bearer REDACTED", id="bearer"),
        pytest.param("bearer  " + "tok3n" * 4, "bearer  REDACTED", id="bearer-lowercase"),
        pytest.param("fw_" + "3ab" * 8, "fw_REDACTED", id="fireworks"),
        pytest.param("AIza" + "Sy" + "x1" * 16 + "z", "AIzaREDACTED", id="google"),
        pytest.param("https://h/v1?token=abcdef123&x=1", "https://h/v1?token=REDACTED&x=1", id="query"),
        # not secrets: must survive untouched
        pytest.param("sk-test", "sk-test", id="short-sk"),
        pytest.param("a task-management-and-scheduling-system", "a task-management-and-scheduling-system", id="word"),
        pytest.param("Bearer authentication is a scheme", "Bearer authentication is a scheme", id="prose"),
        pytest.param("client = OpenAI(api_key=os.environ[k])", "client = OpenAI(api_key=os.environ[k])", id="code"),
    ],
)
def test_values_that_look_like_keys_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_bytes(text.encode()) == expected.encode()
    assert redact_text(expected) == expected  # idempotent
    assert list(find_secrets(expected)) == []  # and what it leaves scans clean


def test_bytes_that_are_not_utf8_are_redacted_too() -> None:
    assert redact_bytes(b"\xff\xfe " + KEY.encode() + b" \x00") == b"\xff\xfe sk-REDACTED \x00"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("https://h/v1/x?api_key=k&model=m", "https://h/v1/x?api_key=REDACTED&model=m"),
        ("https://h/v1/x?model=m&key=abc#f", "https://h/v1/x?model=m&key=REDACTED#f"),
        ("https://h/v1/x?API-KEY=abc&access_token=t", "https://h/v1/x?API-KEY=REDACTED&access_token=REDACTED"),
        (f"https://h/v1/{KEY}/x?monkey=1", "https://h/v1/sk-REDACTED/x?monkey=1"),
    ],
)
def test_uris_lose_credentials(uri: str, expected: str) -> None:
    assert redact_uri(uri) == expected
    assert redact_uri(expected) == expected


def test_secret_parameter_names() -> None:
    assert [secret_parameter(n) for n in ("api_key", "Api-Key", "token", "monkey", "api-version")] == [
        True,
        True,
        True,
        False,
        False,
    ]


CLEAN = """interactions:
- request:
    body: '{"model": "m"}'
    headers:
      Authorization:
      - REDACTED
    method: POST
    uri: https://api.openai.com/v1/chat/completions
  response:
    body: {string: ok}
    headers: {}
    status: {code: 200, message: OK}
version: 1
"""


def test_scan_finds_a_planted_key_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "clean.yaml").write_text(CLEAN)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "leaky.yaml").write_text(CLEAN.replace('"m"}', f'"m", "k": "{KEY}"}}'))
    assert scan(tmp_path / "clean.yaml") == []
    (finding,) = scan(tmp_path)
    assert (finding.path, finding.line, finding.kind) == (tmp_path / "sub" / "leaky.yaml", 3, "sk- key")
    assert KEY not in str(finding) and str(finding).startswith(f"{tmp_path / 'sub' / 'leaky.yaml'}:3: sk- key: sk-proj")


def test_scan_finds_live_sensitive_headers(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CLEAN.replace("- REDACTED", "- Basic dXNlcjpwYXNz"))
    (finding,) = scan(tmp_path)
    assert (finding.line, finding.kind) == (6, "Authorization header")


def test_scan_sees_through_yaml_folding_and_binary(tmp_path: Path) -> None:
    folded = f'body:\n  string: "a long answer that mentions a token: Bearer\\\n    \\ {JWT} and more"\n'
    (tmp_path / "folded.yaml").write_text(folded)
    import base64

    (tmp_path / "binary.yaml").write_text(f"body: !!binary |\n  {base64.b64encode(KEY.encode()).decode()}\n")
    found = {(f.path.name, f.line, f.kind) for f in scan(tmp_path)}
    assert found == {("folded.yaml", 2, "bearer token"), ("binary.yaml", 1, "sk- key")}


def test_scan_reads_files_that_are_not_yaml(tmp_path: Path) -> None:
    (tmp_path / ".cassette.yaml.x1.tmp").write_text(f"interactions: [\n  half-written {KEY}")
    assert [(f.line, f.kind) for f in scan(tmp_path)] == [(2, "sk- key")]


def test_cli_check_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "clean.yaml").write_text(CLEAN)
    assert main(["cassettes", "check", str(tmp_path)]) == 0
    (tmp_path / "leaky.yaml").write_text(
        CLEAN.replace("uri: https://api.openai.com/v1/chat/completions", f"uri: x?{KEY}")
    )
    assert main(["cassettes", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path / 'leaky.yaml'}:8: sk- key:" in out and KEY not in out
    assert main(["cassettes", "check", str(tmp_path / "missing")]) == 2


def test_cli_check_as_a_process(tmp_path: Path) -> None:
    (tmp_path / "leaky.yaml").write_text(f"key: {KEY}\n")
    command = [sys.executable, "-m", "mockserver", "cassettes", "check", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert "leaky.yaml:1: sk- key" in result.stdout
