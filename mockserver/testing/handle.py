"""One test's handle on its mockserver: the ``mockserver`` fixture's value.

A :class:`MockServer` is a session on a server shared with other tests: every request it (or
a client it made) sends carries ``x-mockserver-session``, plus ``x-mockserver-cassette`` and
``x-mockserver-record-mode`` for a test with a cassette, so the test's journal, scripted
answers, fault rules, replay positions and record mode are its own. It reaches the server
over the admin API (``/__mockserver/...``), whether the server runs in this process or not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mockserver.wire import headers as h

if TYPE_CHECKING:
    import httpx2
    import openai

    from mockserver.faults.journal import Entry
    from mockserver.testing.failures import Failure
    from mockserver.testing.servers import Server

__all__ = ["INPROCESS_URL", "Faults", "MockServer", "ServerFailure", "describe"]

INPROCESS_URL = "http://mockserver.invalid"  # never resolved: in-process clients have an ASGI transport


class ServerFailure(Exception):
    """Something failed inside the server during the test (chained to the server's exception)."""


class Faults:
    """``mockserver.faults.catalogue``: fault rules for this test's requests (see :mod:`mockserver.faults.rules`)."""

    def __init__(self, server: MockServer) -> None:
        self._server = server

    def add(self, spec: str, **filters: Any) -> dict[str, Any]:
        """A rule: ``add("http.429,retry_after=0.01", times=1)``; filters are ``path``, ``model``,
        ``stream``, ``tools``, ``retry_attempt``, ``nth``, ``times``. Returns the rule."""
        rule: dict[str, Any] = self._server.admin("POST", "rules", {"faults": spec, **filters})
        return rule

    def list(self) -> list[dict[str, Any]]:
        rules: list[dict[str, Any]] = self._server.admin("GET", "rules")["rules"]
        return rules

    def clear(self) -> None:
        self._server.admin("DELETE", "rules")


class MockServer:
    """One test's handle on its server: addresses, clients, and its own session's journal,
    scripted answers and fault rules (over the admin API, in-process or not)."""

    def __init__(
        self,
        server: Server,
        *,
        session: str,
        cassette: str | None = None,
        record_mode: str = "none",
        profile: str | None = None,
        inprocess: bool = False,
    ) -> None:
        self.session = session
        self.cassette = cassette  # the name requests ask for, under the server's cassette directory
        self.record_mode = record_mode  # sent with each request: the server's own is only a default
        self.inprocess = inprocess
        self.app = server.app  # the Starlette app, when it runs in this process
        self.url = INPROCESS_URL if inprocess else server.url  # the root: /health, /__mockserver/...
        self.base_url = f"{self.url}/{profile}/v1" if profile else f"{self.url}/v1"
        self.headers = {h.name(h.SESSION): session}
        if cassette:
            self.headers |= {h.name(h.CASSETTE): cassette, h.name(h.RECORD_MODE): record_mode}
        self.faults = Faults(self)
        self._server = server
        self._closers: list[Callable[[], None]] = []
        self._seen: set[int] = set()  # journal entries already reported as failures
        token = server.settings.admin_token
        self._api_key = next(iter(server.settings.api_keys), "sk-mockserver")  # one the server accepts
        self._admin = self.http_client(headers={"authorization": f"Bearer {token}"} if token else {}, timeout=30)
        if server.asgi is not None:  # a server in this process: requests naming no session are this test's
            server.asgi.claim(self.headers)

    # -- clients

    def http_client(self, **kwargs: Any) -> httpx2.Client:
        """An ``httpx2.Client`` on :attr:`url` sending this test's headers (closed after the test)."""
        import httpx2

        headers = {**self.headers, **kwargs.pop("headers", {})}
        transport = self._server.transport(self.inprocess)
        client = httpx2.Client(base_url=self.url, headers=headers, transport=transport, trust_env=False, **kwargs)
        self._closers.append(client.close)
        return client

    def async_http_client(self, **kwargs: Any) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient`` usable from any event loop (closed after the test)."""
        import httpx2

        headers = {**self.headers, **kwargs.pop("headers", {})}
        transport = self._server.async_transport(self.inprocess)
        client = httpx2.AsyncClient(base_url=self.url, headers=headers, transport=transport, trust_env=False, **kwargs)
        self._closers.append(transport.close_now)
        return client

    def client(self, **kwargs: Any) -> openai.OpenAI:
        """An ``openai.OpenAI`` on :attr:`base_url`; keyword arguments go to it (``max_retries``...)."""
        sdk = _openai()

        kwargs["default_headers"] = {**self.headers, **kwargs.get("default_headers", {})}
        kwargs.setdefault("api_key", self._api_key)
        if "http_client" not in kwargs:
            kwargs["http_client"] = self.http_client()
        made: openai.OpenAI = sdk.OpenAI(base_url=self.base_url, **kwargs)
        return made

    def async_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """An ``openai.AsyncOpenAI`` on :attr:`base_url`, usable from any event loop."""
        sdk = _openai()

        kwargs["default_headers"] = {**self.headers, **kwargs.get("default_headers", {})}
        kwargs.setdefault("api_key", self._api_key)
        if "http_client" not in kwargs:
            kwargs["http_client"] = self.async_http_client()
        made: openai.AsyncOpenAI = sdk.AsyncOpenAI(base_url=self.base_url, **kwargs)
        return made

    # -- the session on the server

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        """Call ``/__mockserver/<path>`` as this test's session; ``ValueError`` on a 4xx/5xx."""
        response = self._admin.request(method, f"/__mockserver/{path}", json=body)
        data = response.json()
        if response.status_code >= 400:
            raise ValueError(data.get("error", {}).get("message", response.text))
        return data

    @property
    def calls(self) -> list[Entry]:
        """This test's requests, as the server's journal has them, oldest first."""
        from mockserver.faults.journal import Entry

        return [Entry(**e) for e in self.admin("GET", "journal")["entries"]]

    @property
    def verdicts(self) -> dict[str, Any]:
        """The journal's judgement of this test's retries (retry-after honoured, backoff...)."""
        verdicts: dict[str, Any] = self.admin("GET", "journal")["verdicts"]
        return verdicts

    def respond(self, rule: Mapping[str, Any] | None = None, /, **fields: Any) -> dict[str, Any]:
        """Script an answer for this test's matching requests (:meth:`mockserver.answers.scripted.Script.add`):
        ``respond(text="Sunny.", match="weather")``, ``respond(tool_calls=[{"name": "f"}])``."""
        added: dict[str, Any] = self.admin("POST", "answers", {**(rule or {}), **fields})["rules"][0]
        return added

    @property
    def mcp_url(self) -> str:
        """This test's fake MCP server (``/mcp/<session>``): what an MCP client connects to."""
        from urllib.parse import quote

        return f"{self.url}/mcp/{quote(self.session, safe='')}"

    def mcp_tool(
        self,
        name: str,
        description: str = "",
        input_schema: Mapping[str, Any] | None = None,
        *,
        result: Any = None,
        output_schema: Mapping[str, Any] | None = None,
        fault: str | None = None,
    ) -> dict[str, Any]:
        """Offer a tool on this test's MCP server (docs/mcp.md): ``result`` is a ``CallToolResult``
        (or a list of them, played in order), a plain string becoming its one text part; without
        one, ``structuredContent`` is drawn from ``output_schema``. Returns the session's catalog."""
        tool: dict[str, Any] = {"name": name, "description": description}
        tool["inputSchema"] = dict(input_schema) if input_schema is not None else {"type": "object"}
        if output_schema is not None:
            tool["outputSchema"] = dict(output_schema)
        if result is not None:
            texts = result if isinstance(result, list) else [result]
            played = [{"content": [{"type": "text", "text": r}]} if isinstance(r, str) else r for r in texts]
            tool["result"] = played if isinstance(result, list) else played[0]
        if fault is not None:
            tool["fault"] = fault
        catalog: dict[str, Any] = self.admin("POST", "mcp", {"tools": [tool]})
        return catalog

    @property
    def trajectory(self) -> list[tuple[str, str]]:
        """This test's calls in order, as ``(kind, what)``: ``("model", "/v1/chat/completions")``
        or ``("mcp", "tools/call get_weather")`` — one timeline of an agent's model and tool calls."""
        steps: list[tuple[str, str]] = []
        for entry in self.calls:
            body = entry.body if isinstance(entry.body, dict) else {}
            if entry.kind == "mcp":
                params = body.get("params") if isinstance(body.get("params"), dict) else {}
                named = params.get("name") if isinstance(params, dict) else None
                steps.append(("mcp", f"{body.get('method')}" + (f" {named}" if named else "")))
            else:
                steps.append((entry.kind, entry.path))
        return steps

    def reset(self) -> None:
        """Forget this session's rules, scripted answers, journal and cassette replay positions
        (so its replays start again at each cassette's first recording)."""
        self.admin("POST", "reset")

    # -- failures inside the server

    def take_failures(self) -> list[Failure]:
        """Failures in the server since the last look (so they are not reported again)."""
        from mockserver.testing.failures import Failure

        if self._server.failures is not None:
            return self._server.failures.take(self.session)
        # Another process: its journal tells what a trap would have caught, bar the tracebacks.
        # An exception that escaped the app leaves its entry unfinished ("error"); faults asked
        # for are not failures.
        log = f"its log: {self._server.log}" if self._server.log is not None else "see its log"
        found = []
        for entry in self.calls:
            if entry.id not in self._seen and not entry.faults and (entry.ended == "error" or entry.status == 500):
                self._seen.add(entry.id)
                found.append(Failure(self.session, f"{entry.method} {entry.path} failed in the server ({log})"))
        return found

    def check(self) -> None:
        """Raise :class:`ServerFailure` for failures in the server since the last look."""
        __tracebackhide__ = True
        found = self.take_failures()
        if found:
            raise ServerFailure(describe(found)) from next((f.error for f in found if f.error is not None), None)

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self._closers.clear()
        if self._server.asgi is not None:
            self._server.asgi.release(self.session)


def describe(failures: list[Failure]) -> str:
    return "the server failed during this test:\n" + "\n".join(f"  - {f.what}" for f in failures)


def _openai() -> Any:
    """The ``openai`` SDK, which mockserver itself does not need: the ``[pytest]`` extra brings it."""
    try:
        import openai
    except ModuleNotFoundError as exc:
        from mockserver.testing import PYTEST_EXTRA

        raise ModuleNotFoundError(
            f"the openai_client fixtures need the OpenAI SDK, which comes with {PYTEST_EXTRA} (or pip install openai)",
            name=exc.name,
        ) from None
    return openai
