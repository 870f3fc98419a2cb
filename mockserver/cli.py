"""``mockserver`` command line. Flags are derived from :class:`Settings`, never written twice:
``--model-threads 4`` is the field ``model_threads`` is the env var ``MOCKSERVER_MODEL_THREADS``.
Flags win over the environment, which wins over the defaults.
"""

from __future__ import annotations

import argparse
import sys
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from mockserver.config import Settings

__all__ = ["build_parser", "main", "settings_from_args"]


def _is_bool(annotation: Any) -> bool:
    return annotation is bool


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per Settings field; unset flags stay ``None`` and defer to env/defaults."""
    for name, field in Settings.model_fields.items():
        if "environment only" in (field.description or ""):
            continue  # secrets stay out of argv (and so out of `ps` and shell history)
        flag = "--" + name.replace("_", "-")
        annotation = field.annotation
        default = field.get_default(call_default_factory=True)
        shown = ",".join(default) if isinstance(default, list) else default
        help_text = f"{field.description} [env MOCKSERVER_{name.upper()}; default: {shown}]"
        if _is_bool(annotation):
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        else:
            metavar = "A,B,..." if _is_list(annotation) else name.upper()
            parser.add_argument(flag, dest=name, default=None, metavar=metavar, help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mockserver",
        description="An OpenAI-compatible test double for LLM inference APIs, deterministic and offline.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve the API (default 127.0.0.1:4010, reference model)")
    add_settings_flags(serve)
    cassettes = commands.add_parser("cassettes", help="work with recorded cassettes")
    cassette_actions = cassettes.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = cassette_actions.add_parser("check", help="exit 1 if a secret pattern is present under DIR (for CI)")
    check.add_argument("dir", metavar="DIR", help="a cassette directory (or one file)")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    given = {k: v for k, v in vars(args).items() if k in Settings.model_fields and v is not None}
    return Settings(**given)


def serve(settings: Settings) -> None:
    import uvicorn

    from mockserver.app import create_app

    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,  # a test double answers thousands of calls; logging each costs
        loop="auto",
        http="auto",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    print(
        f"mockserver listening on http://{settings.host}:{settings.port} "
        f"(backend {settings.backend}, profile {settings.profile}{' strict' if settings.strict else ''}, "
        f"seed {settings.seed}; other profiles under /<name>/v1/)",
        flush=True,
    )
    server.run()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "cassettes":
        from mockserver.redact import check

        return check(args.dir)
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            where = ".".join(str(p) for p in error["loc"])
            print(f"mockserver: invalid --{where.replace('_', '-')}: {error['msg']}", file=sys.stderr)
        return 2
    if args.command == "serve":
        serve(settings)
    return 0
