"""A cassette folder as people keep one: stray files beside the cassettes, cassettes copied in
while the server runs, and a broken one — over a real server."""

from __future__ import annotations

import io
import json
import logging
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.cassettes.check import check_cassettes
from mockserver.cassettes.files import CassetteDir, CassetteError
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread


def _body(content: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 5}


def _interaction(content: str, answer: str) -> Interaction:
    """A recording of ``content`` answered with ``answer`` (what the replay must give back)."""
    request = RecordedRequest(
        "POST", "https://api.openai.com/v1/chat/completions", (), json.dumps(_body(content)).encode()
    )
    reply = {
        "id": f"chatcmpl-{answer}",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
    }
    headers = (("content-type", "application/json"),)
    return Interaction(request, RecordedResponse(200, headers, json.dumps(reply).encode(), "OK"))


def _server(directory: Path, **kw: Any) -> AbstractContextManager[Live]:
    return serve_in_thread(create_app(Settings(cassettes=str(directory), frozen_time=FROZEN, **kw)))


def _ask(live: Live, content: str) -> httpx.Response:
    return httpx.post(live.base_url + "/chat/completions", json=_body(content))


def _answer(reply: httpx.Response) -> str:
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-mockserver-source"] == "replay"
    return str(reply.json()["choices"][0]["message"]["content"])


# Files that are no cassette, as they turn up in a cassette folder.
STRAYS = {
    "x.expected.json": '{"choices": [{"message": {"content": "expected"}}]}',
    "README.md": "# Cassettes\nRecorded by `make record`.\n",
    "notes.txt": "interactions: not a cassette either\n",
    "sub/settings.yaml": "retries: 3\n",
    "list.json": "[1, 2, 3]\n",
    "prose.yaml": "key: [unclosed\n",  # no YAML, and nothing says cassette
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A cassette, and beside it every kind of stray file."""
    CassetteDir(tmp_path).save("sea.yaml", [_interaction("the sea", "waves")])
    for name, text in STRAYS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="mockserver"):
        yield caplog


def _lines_naming(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and name in r.getMessage()]


def test_stray_files_are_skipped_with_one_warning_each(folder: Path, warnings: pytest.LogCaptureFixture) -> None:
    with _server(folder) as live:
        assert _answer(_ask(live, "the sea")) == "waves"
        assert _ask(live, "the hills").status_code == 404  # a miss re-scans: no second warning
        reload = httpx.post(live.url + "/__mockserver/cassettes/reload").json()
    for name in STRAYS:
        lines = _lines_naming(warnings, name)
        assert len(lines) == 1, (name, lines)
        assert "skipping" in lines[0] and "not a cassette" in lines[0]
    assert _lines_naming(warnings, "sea.yaml") == []
    assert sorted(reload["skipped"]) == sorted(STRAYS)
    assert reload["cassettes"] == 1 and reload["loaded"] == [] and reload["broken"] == {}


def test_check_passes_where_serve_starts_and_lists_what_it_skips(folder: Path) -> None:
    out = io.StringIO()
    assert check_cassettes(str(folder), out=out) == 0
    report = out.getvalue()
    for name in STRAYS:
        assert f"{name}: skipped, serve does not load it: not a cassette" in report
    assert "sea.yaml" not in report


def test_a_cassette_copied_in_after_start_up_answers_the_next_request(folder: Path, tmp_path_factory: Any) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    CassetteDir(elsewhere).save("hills.yaml", [_interaction("the hills", "slopes")])
    with _server(folder) as live:
        missed = _ask(live, "the hills")
        assert missed.status_code == 404 and missed.json()["error"]["code"] == "cassette_miss"
        (folder / "later").mkdir()
        shutil.copy(elsewhere / "hills.yaml", folder / "later" / "hills.yaml")
        assert _answer(_ask(live, "the hills")) == "slopes"  # no reload, no restart
        # and by name, as a request naming its cassette asks for it
        named = httpx.post(
            live.base_url + "/chat/completions",
            json=_body("the hills"),
            headers={"x-mockserver-cassette": "later/hills"},
        )
        assert _answer(named) == "slopes"
        assert _answer(_ask(live, "the sea")) == "waves"  # what was there still replays


def test_a_cassette_rewritten_or_removed_after_start_up_is_seen(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)
    store.save("sea.yaml", [_interaction("the sea", "waves")])
    store.save("sky.yaml", [_interaction("the sky", "clouds")])
    with _server(tmp_path) as live:
        assert _answer(_ask(live, "the sea")) == "waves"
        store.save("sea.yaml", [_interaction("the sea", "tides"), _interaction("the moon", "full")])
        assert _answer(_ask(live, "the moon")) == "full"  # the miss re-read the changed file
        assert _answer(_ask(live, "the sea")) == "tides"  # and its old recording is gone
        (tmp_path / "sky.yaml").unlink()
        reload = httpx.post(live.url + "/__mockserver/cassettes/reload").json()
        assert reload["removed"] == ["sky.yaml"] and reload["cassettes"] == 1
        assert _ask(live, "the sky").status_code == 404


def test_the_reload_endpoint_says_what_it_loaded(folder: Path) -> None:
    with _server(folder) as live:
        CassetteDir(folder).save("new/one.yaml", [_interaction("one", "1"), _interaction("two", "2")])
        CassetteDir(folder).save("two.json", [_interaction("three", "3")])
        first = httpx.post(live.url + "/__mockserver/cassettes/reload")
        assert first.status_code == 200
        assert first.json()["loaded"] == ["new/one.yaml", "two.json"]
        assert first.json()["cassettes"] == 3 and first.json()["interactions"] == 4
        again = httpx.post(live.url + "/__mockserver/cassettes/reload").json()
        assert again["loaded"] == [] and again["cassettes"] == 3  # nothing changed: nothing read
        assert [_answer(_ask(live, c)) for c in ("one", "two", "three")] == ["1", "2", "3"]


def test_the_reload_endpoint_obeys_the_admin_rule(folder: Path) -> None:
    with _server(folder, admin_token="s3cret-admin") as live:
        url = live.url + "/__mockserver/cassettes/reload"
        assert httpx.post(url).status_code == 401
        assert httpx.post(url, headers={"authorization": "Bearer wrong"}).status_code == 401
        assert httpx.post(url, headers={"authorization": "Bearer s3cret-admin"}).status_code == 200


def test_the_reload_endpoint_without_cassettes_is_a_400() -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        answer = httpx.post(live.url + "/__mockserver/cassettes/reload")
        assert answer.status_code == 400 and "--cassettes" in answer.json()["error"]["message"]


# Cassettes that are damaged: the top level says cassette, the rest does not load.
BROKEN = {
    "torn.json": '{"version": 1, "interactions": [{"request": {"method": "POST", "uri": ',
    "unclosed.yaml": "interactions: [\n",
    "unsafe.yaml": "interactions: !!python/object/apply:os.system ['true']\nversion: 1\n",
    "no_response.yaml": "interactions:\n- request: {method: GET, uri: 'http://x/', headers: {}}\nversion: 1\n",
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_cassette_stops_start_up_and_fails_the_check(tmp_path: Path, name: str) -> None:
    CassetteDir(tmp_path).save("good.yaml", [_interaction("the sea", "waves")])
    (tmp_path / name).write_text(BROKEN[name])
    with pytest.raises(CassetteError, match=name):
        create_app(Settings(cassettes=str(tmp_path), frozen_time=FROZEN))
    out = io.StringIO()
    assert check_cassettes(str(tmp_path), out=out) == 1
    assert f"{name}: not a readable cassette, serve would not start" in out.getvalue()


def test_a_broken_cassette_copied_in_later_is_reported_and_the_server_keeps_answering(
    tmp_path: Path, warnings: pytest.LogCaptureFixture
) -> None:
    store = CassetteDir(tmp_path)
    store.save("sea.yaml", [_interaction("the sea", "waves")])
    with _server(tmp_path) as live:
        (tmp_path / "torn.json").write_text(BROKEN["torn.json"])
        assert _ask(live, "the hills").status_code == 404  # the miss found it, and warned
        reload = httpx.post(live.url + "/__mockserver/cassettes/reload").json()
        assert list(reload["broken"]) == ["torn.json"] and reload["loaded"] == []
        assert len(_lines_naming(warnings, "torn.json")) == 1  # once, not on every miss
        assert _answer(_ask(live, "the sea")) == "waves"
        # A cassette that breaks keeps its last good version until it is whole again.
        (tmp_path / "sea.yaml").write_text("interactions: [\n")
        assert list(httpx.post(live.url + "/__mockserver/cassettes/reload").json()["broken"]) == [
            "sea.yaml",
            "torn.json",
        ]
        assert _answer(_ask(live, "the sea")) == "waves"
        store.save("torn.json", [_interaction("the hills", "slopes")])
        assert _answer(_ask(live, "the hills")) == "slopes"  # mended: loaded on the next miss
