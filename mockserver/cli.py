"""``mockserver`` command line. Flags are derived from :class:`Settings`, never written twice:
``--model-threads 4`` is the field ``model_threads`` is the env var ``MOCKSERVER_MODEL_THREADS``.
Flags win over the environment, which wins over the defaults.

One flag is the command's own, not a setting: ``--workers N`` (``MOCKSERVER_WORKERS``), the
processes serving one port. Each worker is a spawned process that rebuilds the app from the
parent's settings (:func:`worker_app`, reading :data:`WORKER_SETTINGS`), so N workers answer as
one process would — given state they share (``--state sqlite:PATH`` or ``redis://``).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import importlib.metadata
import json
import os
import re
import signal
import socket
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from mockserver import __version__
from mockserver.backends import MODEL_EXTRA, model_installed
from mockserver.config import Settings
from mockserver.profiles import PROFILES
from mockserver.state.urls import hidden

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "LOG_LEVELS",
    "WORKER_SETTINGS",
    "banner",
    "build_parser",
    "choices_of",
    "decode_settings",
    "encode_settings",
    "main",
    "settings_from_args",
    "version",
    "worker_app",
]

# The environment variable a worker reads its settings from (the parent's, as JSON).
WORKER_SETTINGS = "MOCKSERVER_WORKER_SETTINGS"

# uvicorn's level names (uvicorn.config.LOG_LEVELS, which lower-cases what it is given), written
# out so the CLI need not import uvicorn to show them; a test keeps the two lists equal.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")

# Settings fields that are plain strings yet take one of a fixed set of names. Settings itself
# checks the profile; the log level it leaves to uvicorn, so the CLI checks that one (see main).
NAMED_CHOICES: dict[str, tuple[str, ...]] = {"profile": tuple(PROFILES), "log_level": LOG_LEVELS}

# Strings with a grammar rather than a list of names: shown as their forms in --help.
FORMS: dict[str, str] = {
    "replay_timing": "{instant,recorded,scaled:X}",
    "state": "{memory,sqlite:PATH,redis[s]://HOST:PORT/DB,redis[s]+cluster://HOST:PORT[,…],redis+sentinel://HOST:PORT/SERVICE}",
    "store": "{memory,sqlite:PATH,redis://HOST:PORT/DB}",
}

# The command's own flags (not settings): name → (default, help). Still an environment
# variable each, as every serve flag is, and a row of the README's options table.
COMMAND_FLAGS: dict[str, tuple[int, str]] = {
    "workers": (
        1,
        "Processes serving the one port (each a whole server; they share what --state shares). "
        "More than one needs --state sqlite:PATH or redis://.",
    ),
}


def _is_bool(annotation: Any) -> bool:
    return annotation is bool


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list


def choices_of(name: str) -> tuple[str, ...]:
    """The values a setting takes, when they are a fixed list of names (else empty)."""
    annotation = Settings.model_fields[name].annotation
    if typing.get_origin(annotation) is Literal:
        return tuple(str(arg) for arg in typing.get_args(annotation))
    return NAMED_CHOICES.get(name, ())


def version() -> str:
    """The installed distribution's version; the package's own in a bare source checkout."""
    try:
        return importlib.metadata.version("mockserver")
    except importlib.metadata.PackageNotFoundError:
        return __version__


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


_BOOL_FLAGS = {
    form
    for name, field in Settings.model_fields.items()
    if _is_bool(field.annotation)
    for form in (_flag(name), "--no-" + name.replace("_", "-"))
}


def _no_value(flag: str, value: str) -> str:
    positive = flag.replace("--no-", "--", 1)
    return f"invalid {flag}: takes no value (got {value}); write {positive} or --no-{positive[2:]}"


def _reword(message: str, argv: Sequence[str]) -> str:
    """argparse's own complaints, reworded to name the flag first as the Settings errors do."""
    extra = re.fullmatch(r"unrecognized arguments: (.*)", message)
    if extra:
        first = extra.group(1).split(" ")[0]
        at = list(argv).index(first) if first in argv else -1
        # `--injector false` reads as a value to a person; to argparse it is a stray word.
        if at > 0 and argv[at - 1] in _BOOL_FLAGS:
            return _no_value(argv[at - 1], repr(first))
        return f"{message} (see --help)"
    argument = re.fullmatch(r"argument (\S+): (.*)", message)
    if not argument:
        return message
    flag, problem = argument.group(1).split("/")[0], argument.group(2)
    if ignored := re.fullmatch(r"ignored explicit argument (.*)", problem):
        return _no_value(flag, ignored.group(1))
    if choice := re.fullmatch(r"invalid choice: (.*) \(choose from (.*)\)", problem):
        names = choice.group(2).replace("'", "")
        if not flag.startswith("-"):  # the subcommand's place (its dest or metavar): a command
            return f"{choice.group(1)} is not a command; choose from {names}"
        return f"invalid {flag}: {choice.group(1)} is not a choice; choose from {names}"
    if problem == "expected one argument":
        return f"invalid {flag}: needs a value"
    return f"invalid {flag}: {problem}"


class Parser(argparse.ArgumentParser):
    """argparse with usage errors in one line that leads with the flag, no usage block above."""

    argv: Sequence[str] = ()  # the command line being parsed, for rewording (set by main)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"mockserver: {_reword(message, self.argv)}\n")


# How `serve --help` groups the flags, by topic. Presentation only: the flags themselves come
# from Settings, and a field missing here still gets its flag, under "other options".
GROUPS: dict[str, tuple[str, ...]] = {
    "server": ("host", "port", "workers", "state", "log_level", "api_keys", "model_threads", "max_batch", "kernel"),
    "models and profiles": (
        "profile",
        "strict",
        "models",
        "context_window",
        "reject_unknown_models",
        "reasoning_models",
        "backend",
        "seed",
        "frozen_time",
    ),
    "cassettes (record and replay)": (
        "cassettes",
        "record_mode",
        "cassette",
        "upstream",
        "on_miss",
        "replay_timing",
        "match_ignore",
    ),
    "faults, latency and rate limits": (
        "injector",
        "faults",
        "latency",
        "time_scale",
        "rate_limit_rpm",
        "rate_limit_tpm",
    ),
    "scripted answers": ("rules",),
    "Responses API and stored completions": (
        "store",
        "store_size",
        "store_ttl",
        "responses_queue_time",
        "responses_tokens_per_second",
    ),
    "admin API and journal": ("admin_token", "admin_remote", "journal_size"),
}


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per Settings field, grouped by topic; unset flags stay ``None`` and defer to
    env/defaults."""
    fields = Settings.model_fields
    groups = {title: parser.add_argument_group(title) for title in GROUPS}
    home = {name: groups[title] for title, names in GROUPS.items() for name in names}
    other = parser.add_argument_group("other options")
    ordered = [name for names in GROUPS.values() for name in names if name in fields or name in COMMAND_FLAGS]
    ordered += [name for name in fields if name not in home]
    for name in ordered:
        if name in COMMAND_FLAGS:
            default, description = COMMAND_FLAGS[name]
            help_text = f"{description} [env MOCKSERVER_{name.upper()}; default: {default}]"
            home[name].add_argument(_flag(name), dest=name, default=None, metavar="N", help=help_text)
            continue
        field = fields[name]
        if "environment only" in (field.description or ""):
            continue  # secrets stay out of argv (and so out of `ps` and shell history)
        group = home.get(name, other)
        flag = _flag(name)
        annotation = field.annotation
        default = field.get_default(call_default_factory=True)
        shown = ",".join(default) if isinstance(default, list) else default
        help_text = f"{field.description} [env MOCKSERVER_{name.upper()}; default: {shown}]"
        if _is_bool(annotation):
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            # Choices shown as argparse shows its own ({a,b}) but checked by Settings, so a
            # flag and its environment variable are held to the same rule and the same message.
            choices = choices_of(name)
            metavar = "{" + ",".join(choices) + "}" if choices else FORMS.get(name, name.upper())
            metavar = "A,B,..." if _is_list(annotation) else metavar
            group.add_argument(flag, dest=name, default=None, metavar=metavar, help=help_text)


# Wrapped by hand (the layout is kept) to fit an 80-column terminal.
DESCRIPTION = """\
mockserver is an OpenAI-compatible test double for LLM inference APIs. Point
an SDK's base_url at it and completions, chat completions, the Responses API
and models answer deterministically and offline: from a tiny CPU reference
model with real logprobs, from recorded cassettes, or from scripted answers,
with seeded faults (errors, rate limits, latency, broken streams) on top.
The same request and seed always get the same bytes."""

EPILOG = """\
examples:
  mockserver serve                     # http://127.0.0.1:4010/v1
  mockserver serve --port 0 --seed 7 --faults 'http.503@p=0.1'
  MOCKSERVER_UPSTREAM_API_KEY=sk-... mockserver serve \\
      --cassettes ./cassettes --record-mode new_episodes \\
      --upstream https://api.openai.com
  mockserver cassettes check ./cassettes     # in CI: secrets recorded?

  then point the app at it:
    OPENAI_BASE_URL=http://127.0.0.1:4010/v1 OPENAI_API_KEY=x python app.py

Every serve flag is also an environment variable: --model-threads 4 is
MOCKSERVER_MODEL_THREADS=4. 'mockserver serve --help' lists them all."""


def build_parser() -> Parser:
    parser = Parser(
        prog="mockserver",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keep the examples' layout
    )
    parser.add_argument("--version", action="version", version=f"mockserver {version()}")
    # The default metavar, {serve,cassettes}: a short one squeezes the summaries' column.
    # Not required: with no command main prints this help (exit 0) rather than an error.
    commands = parser.add_subparsers(dest="command", title="commands")
    serve = commands.add_parser(
        "serve",
        usage="mockserver serve [options]",  # not every flag in one usage line
        help="serve the API (by default on http://127.0.0.1:4010/v1)",
        description="Serve the OpenAI-compatible API. Flags win over MOCKSERVER_* environment "
        "variables, which win over the defaults.",
    )
    add_settings_flags(serve)
    cassettes = commands.add_parser("cassettes", help="check recorded cassettes for secrets before committing")
    cassette_actions = cassettes.add_subparsers(dest="action", metavar="ACTION")
    cassettes.set_defaults(help_of=cassettes)  # `mockserver cassettes` alone prints this help
    check = cassette_actions.add_parser(
        "check",
        help="exit 1 if a secret is present under DIR or a cassette there does not load (for CI)",
        description="Scan every file under DIR for credentials (the patterns redaction removes, "
        "see docs/cassettes.md) and load every cassette as `serve` does. Exit 1 on any secret or "
        "any cassette that does not load whole, 2 if DIR does not exist, else 0.",
    )
    check.add_argument("dir", metavar="DIR", help="a cassette directory (or one file)")
    check.add_argument(
        "--pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="one more secret pattern, a Python regular expression (repeatable); with a capturing "
        "group, the text up to its end is a prefix and not part of the secret",
    )
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    given = {k: v for k, v in vars(args).items() if k in Settings.model_fields and v is not None}
    return Settings(**given)


def banner(settings: Settings, host: str, port: int, workers: int = 1) -> str:
    """What ``serve`` says once it listens: where, as what, and every mode a test author would
    otherwise wonder about. URLs of state are shown with their password hidden."""

    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    strict = " (strict)" if settings.strict else ""
    chain = settings.chain()
    processes = f" ({workers} workers)" if workers > 1 else ""
    lines = [
        f"mockserver {__version__} listening on {url}{processes}",
        f"  base_url   {url}/v1  (or /<profile>/v1 for another dialect; /health, /metrics)",
        f"  backend    {','.join(chain)}, profile {settings.profile}{strict}, seed {settings.seed}",
    ]
    if "reference" not in chain and not model_installed():
        lines.append(f"  model      not installed (free text, logprobs, embeddings): {MODEL_EXTRA}")
    if settings.models:
        lines.append(f"  models     {', '.join(settings.models)}")
    if settings.cassettes:
        upstream = f" from {settings.upstream}" if settings.upstream and settings.record_mode != "none" else ""
        timing = f", timing {settings.replay_timing}" if settings.replay_timing != "instant" else ""
        lines.append(
            f"  cassettes  {settings.cassettes}: record mode {settings.record_mode}{upstream}, "
            f"on miss {settings.on_miss}{timing}"
        )
    if not settings.injector:
        lines.append("  faults     off (no injector: no faults, rate limits or journal)")
    elif settings.faults:
        lines.append(f"  faults     {settings.faults}")
    if settings.latency:
        lines.append(f"  latency    {settings.latency} (time scale {settings.time_scale:g})")
    if settings.rate_limit_rpm or settings.rate_limit_tpm:
        lines.append(
            f"  limits     {settings.rate_limit_rpm} requests/min, {settings.rate_limit_tpm} tokens/min (0: none)"
        )
    if settings.rules:
        lines.append(f"  rules      {settings.rules}")
    if settings.state != "memory":
        lines.append(f"  state      {hidden(settings.state)} (shared)")
    if settings.store and settings.store != settings.state:
        lines.append(f"  store      {hidden(settings.store)}")
    if settings.frozen_time is not None:
        lines.append(f"  clock      frozen at {settings.frozen_time}")
    if settings.api_keys:
        lines.append(f"  auth       {len(settings.api_keys)} accepted API key(s)")
    return "\n".join(lines)


def _settle(app: Any) -> None:
    """Everything made at start-up (the model, once loaded, included) is there for good: moved
    out of the collector's sight, so a full collection no longer walks torch's objects — that
    took tens of milliseconds, a pause any request in flight would wait out."""
    gc.collect()
    gc.freeze()
    model = app.state.ctx.model
    loading = model.warm_up() if model is not None else None
    if loading is not None:
        loading.add_done_callback(lambda _: gc.freeze())


def encode_settings(settings: Settings) -> str:
    """``settings`` as JSON a worker rebuilds them from, secrets included (it is handed to the
    worker in its environment, as the secrets themselves came: never on a command line)."""
    data = settings.model_dump(mode="json")
    key = settings.upstream_api_key
    data["upstream_api_key"] = key.get_secret_value() if key is not None else None
    return json.dumps(data)


def decode_settings(text: str) -> Settings:
    """The settings :func:`encode_settings` wrote. Every field is given, so the worker's own
    environment changes nothing: all workers run the parent's settings."""
    return Settings(**json.loads(text))


def worker_app() -> ASGIApp:
    """The app one ``--workers`` process serves (uvicorn's app factory, imported by string in
    each spawned worker): built from the parent's settings, as one process builds it, and
    settled (:func:`_settle`) once its start-up is done, as one process's is."""
    from mockserver.app import create_app

    app = create_app(decode_settings(os.environ[WORKER_SETTINGS]))

    async def settled(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def started(message: Message) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                _settle(app)

        await app(scope, receive, started)

    return settled


def _reachable(settings: Settings) -> str | None:
    """Why the state cannot be opened, in one line naming its URL (password hidden); None when it
    answers. Checked before any worker starts, so an unreachable Redis is one line and an exit,
    not a traceback from each worker's start-up."""
    if settings.state == "memory":
        return None
    from mockserver.clock import SystemClock
    from mockserver.state.open import open_state

    async def ping() -> None:
        state = open_state(settings.state, SystemClock(), store=settings.store or None)
        try:
            await state.ping()
        finally:
            await state.close()
            await state.records.close()  # the state leaves its records to their owner: here, us

    try:
        asyncio.run(ping())
    except Exception as exc:  # any engine's failure to open, said in one line
        return f"mockserver: cannot open --state {hidden(settings.state)}: {_reason(exc)}"
    return None


def _kernel_usable(settings: Settings) -> str | None:
    """Why the ``--kernel`` named cannot compute here (not built, this CPU lacks its instructions,
    or it failed its check against the definition), in one line; None when it can. Checked at
    start, not when the model first answers: a server that would fail every model request
    should not start."""
    from mockserver.backends import model_installed

    if settings.kernel in ("auto", "numpy") or not model_installed():
        return None
    from mockserver.gpt import kernels

    try:
        kernels.load(settings.kernel)
    except kernels.KernelUnavailable as exc:
        return f"mockserver: cannot use --kernel {settings.kernel}: {exc}"
    return None


def _reason(exc: Exception) -> str:
    """Why opening failed, without the words a client's 503 says around it (the URL, "retry
    shortly"): the banner's line names the URL already, and nothing will retry."""
    from mockserver.state.base import StateUnavailable

    if isinstance(exc, StateUnavailable):
        inner = re.search(r"is unavailable \((.*)\)\. Retry shortly\.$", exc.message)
        if inner is not None:
            return inner.group(1)
    cause = exc.__cause__ or exc
    return " ".join(str(cause).split()) or type(cause).__name__


def _cassettes_ready(settings: Settings) -> str | None:
    """Why ``--cassettes`` cannot be served, in one line; None when it can. A directory that
    does not exist would replay nothing (every request a miss, as ``cassettes check`` on it
    exits 2), so it stops the start, unless the record mode records: then it is created, and
    the recordings go there."""
    if not settings.cassettes:
        return None
    path = Path(settings.cassettes)
    if path.exists():
        return None
    if settings.record_mode == "none":
        return (
            f"mockserver: invalid --cassettes: {settings.cassettes} does not exist (nothing to replay; "
            "create it, or record into it with --record-mode once, new_episodes or all)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"mockserver: invalid --cassettes: cannot create {settings.cassettes} to record into: {exc.strerror}"
    return None


def _bind(settings: Settings) -> socket.socket | str:
    """The listening socket, bound here rather than by uvicorn so that a port in use (or one this
    user may not take) is one line naming ``--port``, not uvicorn's ``[Errno 98]`` log line."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        where = f"--port {settings.port} on --host {settings.host}"
        if exc.errno == errno.EADDRINUSE:
            return f"mockserver: cannot listen on {where}: the port is in use (choose another --port, or --port 0)"
        return f"mockserver: cannot listen on {where}: {(exc.strerror or str(exc)).lower()}"
    sock.set_inheritable(True)  # --workers: the spawned processes serve this socket
    return sock


def serve(settings: Settings, workers: int = 1) -> int:
    serving = _exit_zero_on_term()
    problem = _reachable(settings) or _kernel_usable(settings)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    problem = _cassettes_ready(settings)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    sock = _bind(settings)
    if isinstance(sock, str):
        print(sock, file=sys.stderr)
        return 1
    if workers > 1:
        return _serve_workers(settings, workers, sock)
    import uvicorn

    from mockserver.app import create_app
    from mockserver.cassettes.files import CassetteError
    from mockserver.http.server import uvicorn_config

    class Server(uvicorn.Server):
        """Says where it listens once it does: with ``--port 0`` only the socket knows."""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                print(banner(settings, host, port), file=sys.stderr, flush=True)
                _settle(app)

    try:
        app = create_app(settings)
    except CassetteError as exc:  # a cassette that would replay wrong: one line, not a traceback
        sock.close()
        print(f"mockserver: invalid --cassettes: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    config = uvicorn_config(
        app,
        settings.host,
        settings.port,
        settings.log_level,
        header_timeout=settings.header_timeout,
        max_connections=settings.max_connections,
        body_timeout=settings.body_timeout,
        shutdown_timeout=settings.shutdown_timeout,
    )
    server = Server(config)
    serving(server)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        _interrupted()
    return 0


def _exit_zero_on_term() -> Callable[[Any], None]:
    """SIGTERM is how a supervisor (make, Docker, systemd, a test harness) asks for a stop: once
    uvicorn has stopped gracefully on it, ``serve`` exits 0. uvicorn re-raises the signal it
    stopped on, with the handler that was there before it started: this one, which then lets
    ``run`` return (rather than the default, death by the signal: 143 in a shell, and make's
    ``*** Terminated``). A SIGTERM during the start, before uvicorn listens for it, stops the
    start, also with 0. Returns what tells the handler which server will have started."""
    servers: list[Any] = []

    def on_term(signum: int, frame: Any) -> None:
        if not (servers and servers[0].started):
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    return servers.append


def _interrupted() -> NoReturn:
    # uvicorn re-raises the Ctrl-C it shut down on. The app is shut down by now (its lifespan
    # closed the stores): exit quietly, as 130, without the interpreter's teardown, which with
    # torch loaded costs a third of a second and does nothing for us (SIGTERM skips it too).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def _serve_workers(settings: Settings, workers: int, sock: socket.socket) -> int:
    """``workers`` processes on one socket, under uvicorn's supervisor (which restarts a worker
    that dies). Each worker rebuilds the app from ``settings`` (:func:`worker_app`); the server
    configuration is the one a single process runs."""
    import threading

    from uvicorn.supervisors import Multiprocess

    from mockserver.cassettes.files import CassetteError
    from mockserver.http.server import uvicorn_config

    # A broken cassette directory is found here, in one line, rather than by every worker.
    if settings.cassettes:
        from mockserver.app import create_app

        try:
            create_app(settings)
        except CassetteError as exc:
            sock.close()
            print(f"mockserver: invalid --cassettes: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
    os.environ[WORKER_SETTINGS] = encode_settings(settings)  # spawned workers inherit it
    config = uvicorn_config(
        "mockserver.cli:worker_app",
        settings.host,
        settings.port,
        settings.log_level,
        header_timeout=settings.header_timeout,
        max_connections=settings.max_connections,
        body_timeout=settings.body_timeout,
        shutdown_timeout=settings.shutdown_timeout,
        factory=True,
        workers=workers,
    )
    host, port = sock.getsockname()[:2]

    class Supervisor(Multiprocess):
        """uvicorn's, remembering which signal stopped it (Ctrl-C exits 130, as one process does)."""

        stopped_by: str = ""

        def handle_int(self) -> None:
            self.stopped_by = "int"
            super().handle_int()

        def handle_term(self) -> None:
            self.stopped_by = "term"
            super().handle_term()

    supervisor = Supervisor(config, sockets=[sock])

    def announce() -> None:
        # The socket listens from the start, but only a worker answers: the banner waits for one.
        while not supervisor.should_exit.is_set():
            if _answers(host, port):
                print(banner(settings, host, port, workers), file=sys.stderr, flush=True)
                return
            supervisor.should_exit.wait(0.05)

    threading.Thread(target=announce, name="mockserver-banner", daemon=True).start()
    supervisor.run()
    sock.close()
    if supervisor.stopped_by == "int":
        _interrupted()
    if supervisor.stopped_by == "term":
        return 0  # a graceful stop, as one process's (see _exit_zero_on_term)
    # The supervisor stops by itself only when a worker failed to start (uvicorn logged why).
    print("mockserver: a worker failed to start (see the log above)", file=sys.stderr)
    return 1


def _answers(host: str, port: int) -> bool:
    """Whether ``GET /health`` on ``host:port`` answers at all (any status: a worker is up)."""
    import http.client

    connection = http.client.HTTPConnection(host if host not in ("0.0.0.0", "::") else "127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/health")
        connection.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        connection.close()


def _setting_error(error: ErrorDetails, flags: set[str]) -> str:
    """One pydantic error as one line that names the flag (or the environment variable the
    value came from) and, for a choice, the choices."""
    name = str(error["loc"][0]) if error["loc"] else ""
    where = _flag(name) if name in flags or not name else f"{_flag(name)} (from MOCKSERVER_{name.upper()})"
    given = error.get("input")
    if name in ("state", "store") and isinstance(given, str):
        given = hidden(given)  # a password in the URL is never repeated back
    if error["type"] == "literal_error":
        problem = f"{given!r} is not a choice; choose from {', '.join(choices_of(name))}"
    elif error["type"] == "value_error":  # our validators' messages already name the value
        problem = str(error["msg"]).removeprefix("Value error, ")
        problem += "" if repr(given) in problem or not given else f" (got {given!r})"
    else:
        message = str(error["msg"])
        problem = f"{message[:1].lower()}{message[1:]} (got {given!r})"
    return f"mockserver: invalid {where}: {problem}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser.argv = argv
    args = parser.parse_args(argv)
    # A command line that names no command (or no cassettes action) asks what there is.
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "cassettes":
        if args.action is None:
            args.help_of.print_help()
            return 0
        from mockserver.cassettes.check import check_cassettes  # imported only for this command

        return check_cassettes(args.dir, args.pattern)
    flags = {name for name, value in vars(args).items() if value is not None}
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            print(_setting_error(error, flags), file=sys.stderr)
        return 2
    if settings.log_level.lower() not in LOG_LEVELS:  # uvicorn would end in a KeyError traceback
        where = "--log-level" if "log_level" in flags else "--log-level (from MOCKSERVER_LOG_LEVEL)"
        print(
            f"mockserver: invalid {where}: {settings.log_level!r} is not a choice; choose from {', '.join(LOG_LEVELS)}",
            file=sys.stderr,
        )
        return 2
    workers = _workers(args, flags, settings)
    if isinstance(workers, str):
        print(workers, file=sys.stderr)
        return 2
    return serve(settings, workers)


def _workers(args: argparse.Namespace, flags: set[str], settings: Settings) -> int | str:
    """``--workers`` (else ``MOCKSERVER_WORKERS``, else 1), or the one line saying what is wrong
    with it — a number below one, or several workers each keeping its own state in memory."""
    given = args.workers if "workers" in flags else os.environ.get("MOCKSERVER_WORKERS")
    where = "--workers" if "workers" in flags else "--workers (from MOCKSERVER_WORKERS)"
    if given is None:
        return 1
    try:
        workers = int(given)
    except ValueError:
        return f"mockserver: invalid {where}: a whole number of processes ≥ 1 (got {given!r})"
    if workers < 1:
        return f"mockserver: invalid {where}: a whole number of processes ≥ 1 (got {given!r})"
    if workers > 1 and settings.state == "memory":  # Settings checked the URL: else sqlite or redis
        return (
            f"mockserver: invalid {where}: {workers} workers cannot share --state memory (each would keep its "
            "own rules, journal, limits and responses); use --state sqlite:PATH (one host) or "
            "--state redis://HOST:PORT/DB"
        )
    return workers
