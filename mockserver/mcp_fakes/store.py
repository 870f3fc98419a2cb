"""Where the fake MCP server's catalogs live: in the State, so a fleet serves the same tools.

Three layers, the upper replacing a definition of the same name (or uri) below it: the
``--mcp`` file's (configuration every process has, never written, outliving resets), the admin
API's without a session, and a session's own. Each written layer is one JSON value in the state
(``mcp:c:<session>``), read on every MCP message — MCP is not the hot path, and a read is what
keeps every process of a fleet in step. A tool's scripted sequence is played per calling session
with a counter (``mcp:n:<session>:<tool>``), so parallel tests each start at its first result.

Open MCP sessions that listed something register here to hear that it changed
(``notifications/*/list_changed``, sent by ``tell``, which the SDK's side injects); they are held
by their ``mcp-session-id`` until the client ends the session (or a notice fails to reach it),
at most :data:`LISTENERS` per mockserver session, and they are this process's only. On a shared
state another process may change a catalog: while sessions listen here, a watcher looks at their
catalogs every :data:`WATCH` seconds and tells them when one changed (a fleet's definitions are
heard by every process's sessions; a change made here is told at once, and only once).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mockserver.mcp_fakes.cassette import Proxy
from mockserver.mcp_fakes.catalog import Catalog
from mockserver.mcp_fakes.parse import parse_catalog
from mockserver.state.sync import Bridge, safe

__all__ = ["McpStore", "Tell", "load_file"]

PREFIX = "mcp:"
CATALOGS = "mcp:c:"
COUNTS = "mcp:n:"
PROXIES = "mcp:p:"
LISTENERS = 64  # open MCP sessions one mockserver session keeps informed (the newest)
WATCH = 0.5  # seconds between looks at a shared state's catalogs while MCP sessions listen

Tell = Callable[[Any], Awaitable[None]]  # tells one open MCP session its lists changed

log = logging.getLogger("mockserver")


class McpStore:
    """The catalogs (see the module docstring); ``pinned`` is the ``--mcp`` file's."""

    def __init__(self, bridge: Bridge, pinned: Catalog | None = None) -> None:
        self.bridge = bridge
        self.pinned = pinned or Catalog()
        self.tell: Tell | None = None
        self._listeners: dict[str | None, dict[str, Any]] = {}
        self._seen: dict[str | None, tuple[bytes | None, ...]] = {}  # each listened session's catalogs, as last told
        self._watching: asyncio.Task[None] | None = None

    async def catalog(self, session: str | None) -> Catalog:
        """What ``session`` is offered: its own definitions over the global ones over the file's."""
        state = self.bridge.state
        keys = [f"{CATALOGS}{safe(None)}"] + ([f"{CATALOGS}{safe(session)}"] if session is not None else [])
        found = await asyncio.gather(*(state.get(key) for key in keys))
        if session in self._listeners:  # what a listening session was given: a later change is news
            self._seen[session] = tuple(found)
        catalog = self.pinned
        for raw in found:
            if raw is not None:
                catalog = parse_catalog(json.loads(raw)).over(catalog)
        return catalog

    async def own(self, session: str | None) -> Catalog:
        """The definitions written for ``session`` alone (None: the global ones)."""
        raw = await self.bridge.state.get(f"{CATALOGS}{safe(session)}")
        return parse_catalog(json.loads(raw)) if raw is not None else Catalog()

    async def add(self, session: str | None, added: Catalog) -> Catalog:
        """``added`` over the session's own definitions; the lists of its open sessions changed."""
        merged = added.over(await self.own(session))
        text = json.dumps(merged.to_json(), separators=(",", ":"), ensure_ascii=False)
        await self.bridge.state.put(f"{CATALOGS}{safe(session)}", text.encode())
        await self._forget_counts(session, [t.name for t in added.tools])
        await self.changed(session)
        await self._note()
        return merged

    async def clear(self, session: str | None) -> None:
        """The session's own definitions and counts (None: every session's; the file's stay)."""
        state = self.bridge.state
        if session is None:
            await state.forget(PREFIX)
        else:
            await state.delete(f"{CATALOGS}{safe(session)}")
            await state.delete(f"{PROXIES}{safe(session)}")
            await state.forget(f"{COUNTS}{safe(session)}:")
        await self.changed(session)
        await self._note()

    async def set_proxy(self, session: str | None, proxy: Proxy | None) -> None:
        """Record or replay ``session``'s MCP messages (None: answer from the catalog again)."""
        key = f"{PROXIES}{safe(session)}"
        if proxy is None:
            await self.bridge.state.delete(key)
        else:
            await self.bridge.state.put(key, json.dumps(proxy.to_json()).encode())

    async def proxy_of(self, session: str | None) -> Proxy | None:
        """The session's proxy, else the global one."""
        state = self.bridge.state
        for owner in ([session] if session is not None else []) + [None]:
            raw = await state.get(f"{PROXIES}{safe(owner)}")
            if raw is not None:
                return Proxy(**json.loads(raw))
        return None

    async def next_call(self, session: str | None, tool: str) -> int:
        """The calling session's call number of ``tool`` (1 for its first)."""
        return await self.bridge.state.add(f"{COUNTS}{safe(session)}:{tool.encode().hex()}")

    async def _forget_counts(self, session: str | None, tools: list[str]) -> None:
        """A redefined tool plays its sequence from the start again (for the session writing it)."""
        for name in tools:
            await self.bridge.state.delete(f"{COUNTS}{safe(session)}:{name.encode().hex()}")

    def listen(self, session: str | None, sid: str, target: Any) -> None:
        """``target`` (the open MCP session ``sid``) hears when ``session``'s lists change."""
        listening = self._listeners.setdefault(session, {})
        listening.pop(sid, None)
        listening[sid] = target  # the newest last: the oldest go first past LISTENERS
        while len(listening) > LISTENERS:
            del listening[next(iter(listening))]
        if self.bridge.state.shared and (self._watching is None or self._watching.done()):
            self._watching = asyncio.ensure_future(self._watch())

    async def _catalogs(self, owner: str | None) -> tuple[bytes | None, ...]:
        """The stored catalogs ``owner``'s lists are made of (the global one, its own)."""
        keys = dict.fromkeys([f"{CATALOGS}{safe(None)}", f"{CATALOGS}{safe(owner)}"])
        return tuple(await asyncio.gather(*(self.bridge.state.get(key) for key in keys)))

    async def _note(self) -> None:
        """What the listened sessions' catalogs are now: a change this process made and told
        is not told again by the watcher."""
        if self._watching is not None and not self._watching.done():
            for owner in list(self._listeners):
                self._seen[owner] = await self._catalogs(owner)

    async def _watch(self) -> None:
        """Tell listening sessions of a change another process made (see the module docstring)."""
        try:
            while self._listeners:
                for owner in list(self._listeners):
                    now = await self._catalogs(owner)
                    before = self._seen.get(owner)
                    self._seen[owner] = now
                    if before is not None and before != now:
                        await self._tell(list(self._listeners.get(owner, {}).items()))
                await asyncio.sleep(WATCH)
        except Exception as exc:  # a state that is down: the next listener starts a new watch
            log.debug("mcp: watching the catalogs stopped (%s)", exc)
        finally:
            self._seen.clear()

    async def close(self) -> None:
        """Stop watching (the app's shutdown)."""
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
            self._watching = None

    def forget(self, sid: str) -> None:
        """The MCP session ``sid`` ended."""
        for owner, listening in list(self._listeners.items()):
            listening.pop(sid, None)
            if not listening:
                del self._listeners[owner]

    async def changed(self, session: str | None) -> None:
        """Tell the open MCP sessions that see ``session``'s lists (all of them for None)."""
        if self.tell is None:
            return
        targets = [
            (sid, target)
            for owner, listening in list(self._listeners.items())
            if session is None or owner == session
            for sid, target in list(listening.items())
        ]
        await self._tell(targets)

    async def _tell(self, targets: list[tuple[str, Any]]) -> None:
        if self.tell is None:
            return
        for sid, target in targets:
            try:
                await self.tell(target)
            except Exception as exc:  # a closed connection: it hears nothing more
                log.debug("mcp: list_changed not delivered (%s)", exc)
                self.forget(sid)


def load_file(path: str) -> Catalog:
    """The ``--mcp`` file's catalog (YAML or JSON, the admin API's shape); a ``ValueError``
    naming the file and the field when it is wrong."""
    import yaml

    from mockserver.mcp_fakes.parse import CatalogError

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    try:
        return parse_catalog(data if data is not None else {})
    except CatalogError as exc:
        raise ValueError(f"{path}: {exc}") from None  # the message names the field
