"""Record a real MCP server, replay it offline: a session's MCP messages proxied to an upstream
and kept in a cassette, or answered from one.

``POST /__mockserver/mcp/proxy {"url", "cassette", "mode": "record" | "replay"}`` sets it for
a session (kept in the state, so a fleet shares it). The cassette is a JSON file under the
server's ``--cassettes`` directory (a bare file name: nothing is written anywhere else)::

    {"mcp_cassette": 1, "server": "<upstream URL>", "interactions": [
        {"method": "tools/call", "params": {...}, "result": {...}}  # or "error": {"code", "message"}
    ]}

Recording forwards each request with the official ``mcp`` client (on the hosts the server
allows: :func:`mockserver.mcp_fakes.remote.host_problem`) and keeps the answer, a JSON-RPC
error included; the same request recorded again replaces the older answer. Replaying matches
method and params exactly (``_meta`` left out); a miss is JSON-RPC error -32602 that names the
closest recording, so drift fails loudly. vcrpy's format is HTTP's, and an MCP exchange is
JSON-RPC over a session of several HTTP requests (ids and session ids differ every run): this
module keeps what identifies a request instead — no library keeps that.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mockserver.mcp_fakes.answers import INVALID_PARAMS, McpProblem

__all__ = ["Cassettes", "Proxy", "parse_proxy"]

MODES = ("record", "replay")


@dataclass(frozen=True, slots=True)
class Proxy:
    url: str
    cassette: str  # a file name under --cassettes
    mode: str  # record or replay

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "cassette": self.cassette, "mode": self.mode}


def parse_proxy(data: object, problem_of_url: Any) -> Proxy:
    """The admin body as a :class:`Proxy`; ``ValueError(field, message)`` when wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("", 'Send {"url", "cassette", "mode": "record" | "replay"}.')
    url, cassette, mode = data.get("url"), data.get("cassette"), data.get("mode", "replay")
    if mode not in MODES:
        raise ValueError("mode", f"mode is record or replay, not {mode!r}.")
    if not isinstance(url, str) or not url:
        raise ValueError("url", "url names the MCP server to record (its Streamable HTTP endpoint).")
    problem = problem_of_url(url)
    if problem is not None:
        raise ValueError("url", problem)
    if not isinstance(cassette, str) or not cassette.endswith(".json") or Path(cassette).name != cassette:
        raise ValueError("cassette", "cassette is a file name ending .json, under the server's --cassettes directory.")
    return Proxy(url, cassette, str(mode))


def _key(method: str, params: Mapping[str, Any] | None) -> str:
    kept = {k: v for k, v in (params or {}).items() if k != "_meta"}
    return json.dumps([method, kept], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Cassettes:
    """The MCP cassettes of one ``--cassettes`` directory, read once and written whole on each
    recording (to a temporary file first: a crash never leaves half a cassette)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory) if directory else None
        self._loaded: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _path(self, name: str) -> Path:
        if self.directory is None:
            raise McpProblem(INVALID_PARAMS, "This server has no cassettes: start it with --cassettes DIR.")
        return self.directory / name

    def _read(self, proxy: Proxy) -> dict[str, Any]:
        found = self._loaded.get(proxy.cassette)
        if found is None:
            path = self._path(proxy.cassette)
            if path.exists():
                found = json.loads(path.read_text(encoding="utf-8"))
            else:
                found = {"mcp_cassette": 1, "server": proxy.url, "interactions": []}
            self._loaded[proxy.cassette] = found
        return found

    def replay(self, proxy: Proxy, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The recorded answer (a JSON-RPC error recorded is raised as one)."""
        with self._lock:
            if proxy.mode == "replay" and not self._path(proxy.cassette).exists():
                raise McpProblem(INVALID_PARAMS, f"No MCP cassette {proxy.cassette!r} to replay.")
            interactions = list(self._read(proxy)["interactions"])
        wanted = _key(method, params)
        for item in reversed(interactions):
            if _key(item["method"], item.get("params")) == wanted:
                if "error" in item:
                    raise McpProblem(int(item["error"]["code"]), str(item["error"]["message"]))
                result: dict[str, Any] = item["result"]
                return result
        same = [_key(i["method"], i.get("params")) for i in interactions if i["method"] == method]
        closest = difflib.get_close_matches(wanted, same, n=1, cutoff=0.0)
        hint = f"; the closest recorded: {closest[0]}" if closest else f"; no {method} was recorded"
        raise McpProblem(INVALID_PARAMS, f"No recording of {wanted} in {proxy.cassette!r}{hint}.")

    def record(self, proxy: Proxy, method: str, params: Mapping[str, Any] | None, answer: dict[str, Any]) -> None:
        """Keep ``answer`` (``{"result": …}`` or ``{"error": …}``) for the request, replacing an older one."""
        key = _key(method, params)
        kept = {k: v for k, v in (params or {}).items() if k != "_meta"}
        with self._lock:
            cassette = self._read(proxy)
            items = [i for i in cassette["interactions"] if _key(i["method"], i.get("params")) != key]
            items.append({"method": method, "params": kept, **answer})
            cassette["interactions"] = items
            cassette["server"] = proxy.url
            path = self._path(proxy.cassette)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(cassette, f, indent=1, ensure_ascii=False)
            os.replace(temporary, path)
