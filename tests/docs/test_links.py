"""Every relative link in README.md and docs/ leads somewhere: the file exists and, when the
link names a section (``#anchor``), a heading of that file has that anchor as GitHub makes it.
Links to the web are not followed (the suite stays offline)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without fenced blocks: a `# comment` in a code block is not a heading."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores
    kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor of a page, repeated headings numbered as GitHub numbers them (-1, -2…)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_prose(page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def links(page: Path) -> list[str]:
    prose = _CODE.sub("", _prose(page.read_text()))
    return [target for target in _LINK.findall(prose) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


CASES = [(page, target) for page in PAGES for target in links(page)]


def test_the_checker_sees_links_and_anchors() -> None:
    assert len(CASES) > 20  # a regex that matched nothing would pass every page
    assert "options" in anchors(ROOT / "README.md")
    assert slug("`bench/spine.py`: what one answer costs") == "benchspinepy-what-one-answer-costs"


@pytest.mark.parametrize(
    ("page", "target"), CASES, ids=[f"{page.relative_to(ROOT)}->{target}" for page, target in CASES]
)
def test_relative_link_resolves(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / unquote(path)).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(ROOT)} links {target}: no file {path}"
    if anchor:
        assert dest.suffix == ".md", f"{target}: an anchor into a file that is not markdown"
        assert unquote(anchor) in anchors(dest), (
            f"{page.relative_to(ROOT)} links {target}: {dest.name} has no such heading; "
            f"its anchors: {sorted(anchors(dest))}"
        )
