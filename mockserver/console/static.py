"""The page's own files, shipped in the package (``static/``), read once and served from memory.

Three hand-written files and no more: the page has no build step and fetches nothing from
elsewhere (its Content-Security-Policy says so), so an installed wheel serves it as it is.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["FILES", "file"]

FILES = {
    "console.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


@cache
def file(name: str) -> bytes:
    """One of :data:`FILES`, as shipped."""
    return resources.files("mockserver.console").joinpath("static", name).read_bytes()
