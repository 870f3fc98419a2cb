"""The pytest plugin: one mockserver per test session, and each test its own session on it.

Fixtures: ``mockserver`` (a :class:`mockserver.testing.handle.MockServer`), ``openai_client`` and
``async_openai_client`` pointed at it, and ``mockserver_config`` (override it in a conftest or
module for defaults). Marker: ``@pytest.mark.mockserver(cassette=..., record_mode=...,
upstream=..., rules=..., faults=..., profile=..., inprocess=..., settings=...)``. Options:
``--mockserver-record-mode`` (default ``none``) and ``--mockserver-upstream``. Each setting is
decided by :func:`resolve`: command line > marker > ``mockserver_config`` > default. See
docs/pytest.md.

Each test sends its own ``x-mockserver-session`` (its node id), so its fault rules, scripted
answers, journal and cassette replay positions are its own, even with xdist workers sharing
one server; the session is reset before and after the test. A test with a cassette sends its
cassette and record mode per request too, so servers differ only by what cannot vary per
request (:mod:`mockserver.testing.servers`). Failures inside the server (exceptions that
escaped it, and cassette misses) fail the test that caused them, after it ran.

Every pytest run in an environment with mockserver installed loads this module: it imports
pytest and the standard library only. The handle (:mod:`mockserver.testing.handle`) and the servers
(Starlette, and torch if a test generates) load when a test first asks for a fixture; tests
that ask for none see no difference.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import openai

    from mockserver.testing.handle import MockServer, ServerFailure
    from mockserver.testing.servers import Servers

__all__ = ["DEFAULTS", "MockServer", "ServerFailure", "cassette_name", "resolve", "resolve_all", "session_id"]

# Every setting and its default. ``settings`` holds other Settings fields: server-wide, so each
# distinct set (with the cassette directory and upstream) gets a server of its own; the record
# mode is sent per request, so tests with different record modes share a server.
DEFAULTS: Mapping[str, Any] = {
    "cassette": None,  # True: <cassette_dir>/<module>/<test>.yaml; a string: that name; None/False: none
    "cassette_dir": "cassettes",  # relative to the test file's directory
    "record_mode": "none",  # none, once, new_episodes, all
    "upstream": "",  # where recordings come from, e.g. https://api.openai.com
    "rules": None,  # scripted answers: a YAML file (relative to the test file) or a list of rules
    "faults": None,  # a fault spec for every request of the test, or a list of specs / rule mappings
    "profile": None,  # answer as this provider: its path prefix (/fireworks/v1/...)
    "inprocess": False,  # clients reach the app through ASGI, not a socket
    "settings": {},
}
RECORD_MODES = ("none", "once", "new_episodes", "all")
OPTIONS = {"record_mode": "--mockserver-record-mode", "upstream": "--mockserver-upstream"}
_HANDLE = pytest.StashKey["MockServer"]()


def __getattr__(name: str) -> Any:
    """``MockServer`` and ``ServerFailure`` live in :mod:`mockserver.testing.handle`, loaded on demand."""
    if name in ("MockServer", "ServerFailure"):
        from mockserver.testing import handle as testing

        return getattr(testing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve(option: Any, marker: Any, fixture: Any, default: Any) -> Any:
    """One setting: the command line's, else the marker's, else the ``mockserver_config``
    fixture's, else the default. ``None`` is "not given" at every level — so an option must
    default to None, not to its documented default, or it would always win."""
    for given in (option, marker, fixture):
        if given is not None:
            return given
    return default


def resolve_all(option: Mapping[str, Any], marker: Mapping[str, Any], fixture: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting of :data:`DEFAULTS` through :func:`resolve`; ``ValueError`` for unknown names."""
    for where, given in (("@pytest.mark.mockserver", marker), ("the mockserver_config fixture", fixture)):
        unknown = sorted(set(given) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"{where}: unknown setting {', '.join(unknown)} (known: {', '.join(DEFAULTS)})")
    return {name: resolve(option.get(name), marker.get(name), fixture.get(name), d) for name, d in DEFAULTS.items()}


def session_id(nodeid: str) -> str:
    """The test's session: its node id, printable ASCII (it travels in a header). Stable from
    run to run, so seeded fault draws, which mix in the session, are too."""
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode() for c in nodeid)


def cassette_name(item: pytest.Item) -> str:
    """``<module>/<test>.yaml``; a method is ``Class.test``, parameters stay in brackets."""
    test = re.sub(r"[^\w.\[\]=,+-]", "_", ".".join(item.nodeid.split("::")[1:]) or item.name)
    return f"{item.path.stem}/{test}.yaml"


# ---- pytest hooks and fixtures ---------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mockserver")
    group.addoption(
        OPTIONS["record_mode"],
        choices=RECORD_MODES,
        default=None,  # None, not "none": an option not given must not beat the marker (see resolve)
        help="cassette record mode for tests with a cassette (default: the marker's, else none)",
    )
    group.addoption(OPTIONS["upstream"], default=None, help="base URL recordings are fetched from")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mockserver(cassette, cassette_dir, record_mode, upstream, rules, faults, profile, inprocess, settings): "
        "configure the mockserver fixture for this test (docs/pytest.md)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Failures inside the server fail the test that caused them, once it has run."""
    __tracebackhide__ = True
    handle = item.stash.get(_HANDLE, None)
    if handle is None:
        return (yield)
    try:
        result = yield
    except Exception as exc:  # the test failed anyway: say what the server saw too
        try:
            found = handle.take_failures()
        except Exception:  # a server that cannot answer: the test's own error says enough
            found = []
        if found:
            from mockserver.testing.handle import describe  # loaded already: the handle is its

            exc.add_note(describe(found))
        raise
    handle.check()
    return result


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller (or a run without xdist) stops the servers its workers shared."""
    if hasattr(session.config, "workerinput"):
        return
    # Private, and read defensively: only a run that already made its temp directory can
    # have shared servers in it, and this hook must not make one.
    base = getattr(getattr(session.config, "_tmp_path_factory", None), "_basetemp", None)
    if base is not None and any(Path(base).glob("mockserver-*.json")):
        from mockserver.testing.shared import stop_shared

        stop_shared(Path(base))


@pytest.fixture(scope="session")
def _mockserver_servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    try:
        from mockserver.testing.servers import Servers
    except ModuleNotFoundError as exc:  # the plugin is installed with the package; its clients are an extra
        if exc.name != "httpx2":
            raise
        from mockserver.testing import PYTEST_EXTRA

        pytest.fail(f"the mockserver fixtures need httpx2, which comes with {PYTEST_EXTRA}", pytrace=False)

    worker = hasattr(request.config, "workerinput")
    # An xdist worker's temp directory sits in the run's: the directory every worker shares.
    shared = tmp_path_factory.getbasetemp().parent if worker else None
    servers = Servers(shared, watch=os.getppid() if worker else os.getpid())
    yield servers
    servers.close()


@pytest.fixture
def mockserver_config() -> dict[str, Any]:
    """Settings for the tests in this fixture's scope, below the marker and the command line.
    Override it in a conftest.py or a module: ``return {"cassette": True, "profile": "together"}``."""
    return {}


@pytest.fixture
def mockserver(
    request: pytest.FixtureRequest, mockserver_config: Mapping[str, Any], _mockserver_servers: Servers
) -> Iterator[MockServer]:
    """This test's :class:`MockServer`: its session reset, the marker's rules and faults set."""
    from mockserver.testing.handle import MockServer, ServerFailure, describe

    item = request.node
    marker: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers("mockserver"))):  # the closest (the test's own) last: it wins
        if mark.args:
            pytest.fail("@pytest.mark.mockserver takes keyword arguments only", pytrace=False)
        marker.update(mark.kwargs)
    option = {name: request.config.getoption(flag) for name, flag in OPTIONS.items()}
    try:
        chosen = resolve_all(option, marker, mockserver_config)
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
    if chosen["record_mode"] not in RECORD_MODES:  # the server would answer every request with a 400
        pytest.fail(f"mockserver: record_mode must be one of {', '.join(RECORD_MODES)}", pytrace=False)
    here = item.path.parent
    # A server's settings: what cannot vary per request. The record mode can: it is a header.
    settings = dict(chosen["settings"])
    cassette = None
    if chosen["cassette"]:
        cassette = cassette_name(item) if chosen["cassette"] is True else str(chosen["cassette"])
        settings |= {"cassettes": str(here / chosen["cassette_dir"])}
        # The server's --record-mode is the ceiling a request's own mode may not pass: with an
        # upstream, "all", so every test's mode (a header the handle always sends) is allowed.
        settings |= {"upstream": chosen["upstream"], "record_mode": "all"} if chosen["upstream"] else {}
    server = _mockserver_servers.get(settings, inprocess=bool(chosen["inprocess"]))
    handle = MockServer(
        server,
        session=session_id(item.nodeid),
        cassette=cassette,
        record_mode=chosen["record_mode"],
        profile=chosen["profile"],
        inprocess=bool(chosen["inprocess"]),
    )
    try:
        handle.reset()  # a rerun of the same test starts clean, its replays at the first recording
        _arrange(handle, chosen, here)
        item.stash[_HANDLE] = handle
        yield handle
    finally:
        if _HANDLE in item.stash:
            del item.stash[_HANDLE]
        late = handle.take_failures()  # e.g. a stream the test left half-read failed afterwards
        handle.reset()  # the server keeps no rules of finished tests: each request checks them all
        handle.close()
    if late:
        raise ServerFailure(describe(late))


def _arrange(handle: MockServer, chosen: Mapping[str, Any], here: Path) -> None:
    """The marker's (or config's) scripted answers and faults, as this test's own."""
    rules = chosen["rules"]
    if isinstance(rules, str | os.PathLike):
        import yaml

        path = here / rules
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        rules = loaded["rules"] if isinstance(loaded, dict) and list(loaded) == ["rules"] else loaded
    try:
        if rules:
            handle.admin("POST", "answers", {"rules": list(rules)})
        faults = chosen["faults"]
        for fault in [faults] if isinstance(faults, str) else faults or ():
            handle.admin("POST", "rules", dict(fault) if isinstance(fault, Mapping) else {"faults": fault})
    except ValueError as exc:
        pytest.fail(f"@pytest.mark.mockserver: {exc}", pytrace=False)


@pytest.fixture
def openai_client(mockserver: MockServer) -> openai.OpenAI:
    """``openai.OpenAI`` on the test's server, with its session (and cassette, record mode) headers."""
    return mockserver.client()


@pytest.fixture
def async_openai_client(mockserver: MockServer) -> openai.AsyncOpenAI:
    """``openai.AsyncOpenAI`` on the test's server; works from whatever loop the test runs on."""
    return mockserver.async_client()
