"""The command line's manners: help when no command is given, ``--version``, a bad value as one
line naming the flag and its choices (exit 2, never a traceback), the choices in ``--help``, and
the README's options table checked against the real flags."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mockserver import __version__
from mockserver.cli import COMMAND_FLAGS, LOG_LEVELS, build_parser, choices_of, main, version
from mockserver.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def _serve_parser() -> argparse.ArgumentParser:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            serve: argparse.ArgumentParser = action.choices["serve"]
            return serve
    raise AssertionError("no subcommands")


def _exit(argv: list[str]) -> int:
    """main's exit code, whether it returns it or argparse raises it."""
    try:
        return main(argv)
    except SystemExit as exited:
        return int(exited.code or 0)


# --- no command, --version -----------------------------------------------------------------


def test_no_command_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    # Exit 0, as `git` or `pip` alone do: asking what there is, not a mistake.
    assert _exit([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: mockserver")
    assert "serve" in out and "cassettes" in out and "examples:" in out
    assert "required" not in out + err and err == ""


def test_cassettes_alone_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["cassettes"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: mockserver cassettes")
    assert "check" in out and err == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["--version"]) == 0
    assert capsys.readouterr().out == f"mockserver {version()}\n"
    try:
        assert version() == importlib.metadata.version("mockserver")
    except importlib.metadata.PackageNotFoundError:
        assert version() == __version__


# --- bad values: one line, the flag first, the choices, exit 2 ------------------------------

BAD = [
    pytest.param(["--backend", "foo"], "--backend", ["'foo'", "script, replay, record, reference"], id="backend"),
    pytest.param(["--on-miss", "x"], "--on-miss", ["'x'", "error, reference"], id="on-miss"),
    pytest.param(["--record-mode", "x"], "--record-mode", ["'x'", "none, once, new_episodes, all"], id="record-mode"),
    pytest.param(["--replay-timing", "x"], "--replay-timing", ["'x'", "instant, recorded, or scaled:X"], id="timing"),
    pytest.param(["--profile", "x"], "--profile", ["'x'", "openai, fireworks"], id="profile"),
    pytest.param(["--log-level", "loud"], "--log-level", ["'loud'", ", ".join(LOG_LEVELS)], id="log-level"),
    pytest.param(["--injector", "false"], "--injector", ["'false'", "--injector or --no-injector"], id="bool-word"),
    pytest.param(["--strict=1"], "--strict", ["'1'", "--strict or --no-strict"], id="bool-equals"),
    pytest.param(["--port", "70000"], "--port", ["65535", "'70000'"], id="port-range"),
    pytest.param(["--seed", "seven"], "--seed", ["integer", "'seven'"], id="int"),
    pytest.param(["--port"], "--port", ["needs a value"], id="missing-value"),
    pytest.param(
        ["--state", "mysql://u:hunter2@db/0"],
        "--state",
        ["'mysql://u:***@db/0'", "'memory', 'sqlite:PATH' or 'redis://HOST:PORT/DB'"],
        id="state",
    ),
    pytest.param(["--store", "foo"], "--store", ["'foo'", "'memory', 'sqlite:PATH'"], id="store"),
    pytest.param(["--max-batch", "-1"], "--max-batch", ["greater than or equal to 0", "'-1'"], id="max-batch"),
    pytest.param(["--kernel", "fast"], "--kernel", ["'fast'", "auto, numpy, native, native-avx512"], id="kernel"),
]


@pytest.mark.parametrize(("argv", "flag", "says"), BAD)
def test_a_bad_value_is_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, says: list[str]
) -> None:
    assert _exit(["serve", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err  # one line, no usage block above it
    assert err.startswith(f"mockserver: invalid {flag}: "), err
    for part in says:
        assert part in err, (part, err)
    assert "hunter2" not in err  # a password in a state URL is never shown


def test_a_kernel_that_cannot_run_here_stops_the_start_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named on a machine whose CPU lacks it (or a build without it): the server does not start
    to fail every model request; it says so, once."""
    from mockserver.gpt import kernels

    def unavailable(choice: str = "auto") -> kernels.Kernel:
        raise kernels.KernelUnavailable(f"this CPU does not run the {choice} kernel")

    monkeypatch.setattr(kernels, "load", unavailable)
    assert _exit(["serve", "--kernel", "native-avx512", "--port", "0"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "mockserver: cannot use --kernel native-avx512: this CPU does not run the native-avx512 kernel\n"


def test_an_unknown_command_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mockserver", "sevre"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr == "mockserver: 'sevre' is not a command; choose from serve, cassettes\n"


def test_a_bad_environment_value_names_the_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCKSERVER_ON_MISS", "sometimes")
    monkeypatch.setenv("MOCKSERVER_LOG_LEVEL", "loud")
    assert _exit(["serve"]) == 2
    assert capsys.readouterr().err == (
        "mockserver: invalid --on-miss (from MOCKSERVER_ON_MISS): 'sometimes' is not a choice; "
        "choose from error, reference\n"
    )
    monkeypatch.delenv("MOCKSERVER_ON_MISS")
    assert _exit(["serve"]) == 2
    assert "invalid --log-level (from MOCKSERVER_LOG_LEVEL): 'loud'" in capsys.readouterr().err


def test_no_traceback_from_the_real_command() -> None:
    # The process as users run it: `--backend foo` and `--log-level loud` once ended in tracebacks.
    for argv in (["--backend", "foo"], ["--log-level", "loud"]):
        done = subprocess.run(
            [sys.executable, "-m", "mockserver", "serve", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_log_levels_are_uvicorns() -> None:
    from uvicorn.config import LOG_LEVELS as UVICORN

    assert set(LOG_LEVELS) == set(UVICORN)


# --- --help lists the choices ------------------------------------------------------------------


def test_help_lists_the_choices_of_every_enum_setting() -> None:
    help_text = _serve_parser().format_help()
    enums = [name for name in Settings.model_fields if choices_of(name)]
    assert {"record_mode", "on_miss", "profile", "log_level"} <= set(enums)
    for name in enums:
        shown = "{" + ",".join(choices_of(name)) + "}"
        assert f"--{name.replace('_', '-')} {shown}" in help_text, name


# --- the README's options table is the flags ---------------------------------------------------


def _options_table() -> list[tuple[list[str], str]]:
    """(flags, default cell) for each row of the README's Options table."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `--"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows.append((re.findall(r"`(--[a-z][a-z-]*)", cells[0]), cells[1]))
    return rows


def _serve_flags() -> dict[str, str]:
    """Every positive serve flag → its Settings field."""
    flags = {}
    for action in _serve_parser()._actions:
        for option in action.option_strings:
            if option.startswith("--") and not option.startswith("--no-") and option != "--help":
                flags[option] = action.dest
    return flags


def _agrees(stated: str, name: str) -> bool:
    """Whether a default as the table states it is the setting's default. Prose ("30 days",
    "each profile's own ids") states nothing checkable and passes."""
    if name in COMMAND_FLAGS:  # the command's own flags (--workers) are not settings
        default: object = COMMAND_FLAGS[name][0]
    else:
        default = Settings.model_fields[name].get_default(call_default_factory=True)
    if name == "backend":
        default = ",".join(Settings().chain())  # the table gives the chain the empty default means
    code = re.search(r"`([^`]*)`", stated)
    if code is None:
        word = stated.split(" ")[0]
        return {"off": not default, "none": not default, "on": default is True}.get(word, True)
    value = code.group(1)
    if isinstance(default, bool):
        return False  # a boolean is on or off, not a literal
    if isinstance(default, int | float):
        return float(value) == default
    shown = ",".join(default) if isinstance(default, list) else str(default)
    return shown.startswith(value.removesuffix("…")) if value.endswith("…") else shown == value


def test_every_flag_is_in_the_readme_table_and_no_other() -> None:
    documented = [flag for flags, _ in _options_table() for flag in flags]
    assert len(documented) == len(set(documented)), "a flag in two rows"
    real = _serve_flags()
    assert sorted(set(real) - set(documented)) == [], "flags missing from README's Options table"
    assert sorted(set(documented) - set(real)) == [], "README documents flags that do not exist"


def test_the_readme_table_states_the_real_defaults() -> None:
    real = _serve_flags()
    for flags, cell in _options_table():
        stated = re.findall(r"(?:`[^`]*`|[^,`])+", cell)  # commas inside backticks do not split
        assert len(stated) in (1, len(flags)), f"{flags}: {len(stated)} defaults for {len(flags)} flags"
        for flag, value in zip(flags, stated * len(flags) if len(stated) == 1 else stated, strict=True):
            assert _agrees(value.strip(), real[flag]), f"README says {flag} defaults to {value.strip()!r}"


def test_the_table_check_can_fail() -> None:
    assert not _agrees("`4011`", "port") and not _agrees("on", "strict") and not _agrees("`script`", "backend")
    assert _agrees("`o1*,o3*,…`", "reasoning_models") and _agrees("none", "upstream")
    assert _agrees("`1`", "workers") and not _agrees("`2`", "workers")


def test_a_broken_cassette_at_start_up_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("interactions:\n- request: {method: POST\n")
    done = subprocess.run(
        [sys.executable, "-m", "mockserver", "serve", "--cassettes", str(tmp_path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mockserver: invalid --cassettes: ") and "broken.yaml" in lines[0]


# --- --workers and --state ---------------------------------------------------------------------


def test_a_worker_rebuilds_exactly_the_parents_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from mockserver.cli import decode_settings, encode_settings

    given = Settings(
        models=["a", "b@100"], upstream_api_key="sk-upstream", frozen_time=5.5, state="sqlite:/tmp/x.db", seed=3
    )
    monkeypatch.setenv("MOCKSERVER_SEED", "99")  # the worker's own environment changes nothing
    rebuilt = decode_settings(encode_settings(given))
    assert rebuilt == given
    assert rebuilt.upstream_api_key is not None and rebuilt.upstream_api_key.get_secret_value() == "sk-upstream"


def test_the_bounded_protocol_reaches_a_worker_with_its_bounds() -> None:
    # uvicorn pickles its config into each spawned worker: the protocol class must survive it.
    import pickle

    from mockserver.http.server import uvicorn_config

    config = uvicorn_config(
        "mockserver.cli:worker_app", header_timeout=3.5, max_connections=7, body_timeout=4.5, factory=True, workers=2
    )
    copy = pickle.loads(pickle.dumps(config))
    assert copy.http is not config.http and copy.http.parameters == (3.5, 7, 4.5)
    assert copy.http.__mro__[1] is config.http.__mro__[1]  # type: ignore[union-attr]


def test_the_banner_hides_the_state_password() -> None:
    from mockserver.cli import banner

    shown = banner(Settings(state="redis://:pa55word@cache:6379/2"), "127.0.0.1", 4010, workers=3)
    assert "pa55word" not in shown
    assert "(3 workers)" in shown and "state      redis://:***@cache:6379/2 (shared)" in shown
    assert "store" not in banner(Settings(), "127.0.0.1", 4010)  # records with the state: nothing to say


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_workers_value_is_one_line(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert _exit(["serve", "--workers", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mockserver: invalid --workers: "), err
    assert repr(value) in err
