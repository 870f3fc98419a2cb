"""The library's re-scan of its directory: what it reads, and what it leaves alone."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from mockserver.cassettes.files import CassetteDir, NotACassette, file_name, read
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse, dumps
from mockserver.cassettes.library import CassetteOptions, Library


def _interaction(content: str) -> Interaction:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()
    request = RecordedRequest("POST", "https://api.openai.com/v1/chat/completions", (), body)
    return Interaction(request, RecordedResponse(200, (("content-type", "application/json"),), b'{"id":"x"}', "OK"))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names every CassetteDir.read was asked for."""
    asked: list[str] = []
    real = CassetteDir.read

    def counted(self: CassetteDir, name: str) -> tuple[Interaction, ...]:
        asked.append(name)
        return real(self, name)

    monkeypatch.setattr(CassetteDir, "read", counted)
    return asked


def test_an_unchanged_directory_is_listed_not_read(tmp_path: Path, reads: list[str]) -> None:
    CassetteDir(tmp_path).save("a.yaml", [_interaction("a")])
    library = Library(CassetteOptions(str(tmp_path)))
    assert reads == ["a.yaml"]
    outcome = asyncio.run(library.refresh())
    assert not outcome.changed and reads == ["a.yaml"]
    assert outcome.cassettes == 1 and outcome.interactions == 1


def test_only_new_or_changed_files_are_read(tmp_path: Path, reads: list[str]) -> None:
    store = CassetteDir(tmp_path)
    store.save("a.yaml", [_interaction("a")])
    store.save("b.yaml", [_interaction("b")])
    library = Library(CassetteOptions(str(tmp_path)))
    reads.clear()
    store.save("c.yaml", [_interaction("c")])
    store.save("b.yaml", [_interaction("b"), _interaction("b2")])
    outcome = asyncio.run(library.refresh())
    assert sorted(reads) == ["b.yaml", "c.yaml"] and outcome.loaded == ("b.yaml", "c.yaml")
    assert len(library.index) == 4 and len(library.index_of("b")) == 2
    assert library.generation == 1  # b.yaml was replaced: caches keyed on recordings must go


def test_only_additions_keep_the_generation(tmp_path: Path) -> None:
    library = Library(CassetteOptions(str(tmp_path)))
    CassetteDir(tmp_path).save("new.yaml", [_interaction("n")])
    assert asyncio.run(library.refresh()).loaded == ("new.yaml",)
    assert library.generation == 0 and len(library.index) == 1


def test_a_recording_is_not_read_back_by_the_next_scan(tmp_path: Path, reads: list[str]) -> None:
    library = Library(CassetteOptions(str(tmp_path)))

    async def record_then_scan() -> bool:
        await library.keep("rec", _interaction("one"))
        await library.keep("rec", _interaction("two"))
        return (await library.refresh()).changed

    assert asyncio.run(record_then_scan()) is False
    assert reads == []  # what keep wrote it also indexed: reading it again would cost O(size)
    assert len(library.index) == 2 and len(library.index_of("rec.yaml")) == 2


def test_a_file_still_being_copied_is_read_again_once_complete(tmp_path: Path) -> None:
    whole = dumps([_interaction("a"), _interaction("b")], "yaml")
    target = tmp_path / "copied.yaml"
    cut = whole.index("- request", whole.index("- request") + 1)  # the first interaction only
    target.write_text(whole[:cut])
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    library = Library(CassetteOptions(str(tmp_path)))
    assert len(library.index) == 1
    target.write_text(whole)  # the copy finishes: size and mtime change
    assert asyncio.run(library.refresh()).loaded == ("copied.yaml",)
    assert len(library.index) == 2


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("x.expected.json", '{"choices": []}', "its top level has no 'interactions'"),
        ("list.yaml", "- 1\n- 2\n", "its top level has no 'interactions'"),
        ("prose.yaml", "key: [unclosed\n", "does not parse as YAML"),
        ("prose.json", "{not json", "does not parse as JSON"),
        ("README", "interactions: notes", "not .yaml, .yml or .json"),
    ],
    ids=["json-without-interactions", "yaml-list", "bad-yaml", "bad-json", "no-suffix"],
)
def test_what_is_not_a_cassette(tmp_path: Path, name: str, text: str, reason: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(NotACassette) as raised:
        read(tmp_path / name)
    assert raised.value.reason == reason and name in str(raised.value)


def test_an_empty_file_is_a_cassette_with_nothing_yet(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    assert read(tmp_path / "empty.yaml") == ()


@pytest.mark.parametrize(("given", "file"), [("a", "a.yaml"), ("a.json", "a.json"), ("x/b.yml", "x/b.yml")])
def test_file_names_follow_resolve_name(tmp_path: Path, given: str, file: str) -> None:
    assert file_name(given) == file
    assert CassetteDir(tmp_path).resolve(given) == tmp_path.resolve() / file


def test_listing_leaves_out_hidden_files_and_symlinks_out_of_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "a.yaml").write_text("")
    (root / ".a.yaml.1234.tmp").write_text("")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "b.yaml").write_text("")
    (outside / "secret.yaml").write_text("")
    (root / "leak.yaml").symlink_to(outside / "secret.yaml")
    (root / "inside.yaml").symlink_to(root / "a.yaml")
    assert sorted(CassetteDir(root).listing()) == ["a.yaml", "inside.yaml"]
