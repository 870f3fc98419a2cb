"""All configuration, in one pydantic ``Settings`` (environment prefix ``MOCKSERVER_``).

Configuration flows one way: ``Settings`` → ``create_app(settings)`` → constructor
arguments. Nothing below this module reads the environment, and the CLI derives its flags
from these fields (see :mod:`mockserver.cli`), so each option is written once, here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mockserver.answers.reasoning import DEFAULT_PATTERNS
from mockserver.profiles import PROFILES, profile_named

__all__ = ["Settings"]


class Settings(BaseSettings):
    """Server settings. Every field is also a ``mockserver serve`` flag and an env var."""

    model_config = SettingsConfigDict(env_prefix="MOCKSERVER_", frozen=True, extra="forbid")

    host: str = Field("127.0.0.1", description="Interface to listen on.")
    port: int = Field(4010, ge=0, le=65535, description="Port to listen on (0 picks a free one).")
    models: list[str] = Field(
        default_factory=list,
        description="Model ids to list (every profile); 'id@N' declares a context window of N tokens. "
        "Default: each profile lists its provider's ids.",
    )
    profile: str = Field("openai", description=f"Dialect of unprefixed paths: {', '.join(PROFILES)}.")
    strict: bool = Field(False, description="Reject (or ignore) what the profile's provider does not document.")
    cassettes: str = Field("", description="Cassette directory: replay (and record) provider traffic (empty: off).")
    record_mode: Literal["none", "once", "new_episodes", "all"] = Field(
        "none",
        description="none: replay only; once: record when the cassette is new; new_episodes: "
        "record misses; all: record everything.",
    )
    cassette: str = Field("mockserver.yaml", description="Cassette recordings go to (x-mockserver-cassette overrides).")
    upstream: str = Field("", description="Base URL recordings are fetched from, e.g. https://api.openai.com.")
    upstream_api_key: SecretStr | None = Field(
        None, description="Key sent upstream; environment only (MOCKSERVER_UPSTREAM_API_KEY), never written."
    )
    on_miss: Literal["error", "reference"] = Field(
        "error", description="A replay miss: a 404 naming the closest recording, or the reference model's answer."
    )
    replay_timing: str = Field("instant", description="instant, recorded, or scaled:X (recorded gaps × X).")
    match_ignore: list[str] = Field(
        default_factory=list, description="Body fields (dotted paths) left out when matching recordings."
    )
    context_window: int = Field(8192, ge=16, description="Context window of models that declare none.")
    reject_unknown_models: bool = Field(False, description="Answer 404 model_not_found for unlisted models.")
    api_keys: list[str] = Field(
        default_factory=list, description="Accepted bearer tokens; empty accepts any (or none)."
    )
    seed: int = Field(0, description="Global seed mixed into every request that sends no seed.")
    backend: str = Field(
        "",
        description="The backends that answer, tried in order: script, replay, record, reference "
        "(e.g. 'script,replay'). Default: script,reference; with --cassettes script,replay,record "
        "(then reference with --on-miss reference).",
    )
    model_threads: int = Field(2, ge=1, le=64, description="Threads running model compute.")
    max_batch: int = Field(
        64,
        ge=0,
        le=1024,
        description="Rows (choices) the reference model advances in one batched step; more wait their turn "
        "(0: each request decodes alone). Answers are the same bytes either way.",
    )
    kernel: Literal["auto", "numpy", "native", "native-avx512", "native-avx2", "native-base"] = Field(
        "auto",
        description="What computes the reference model: the C kernel built with the package (auto, when it "
        "passes its check at start), or its NumPy definition. Every choice gives the same bytes on every machine.",
    )
    frozen_time: float | None = Field(
        None, description="Fixed 'created' timestamp (seconds), for byte-identical answers."
    )
    log_level: str = Field("warning", description="uvicorn log level.")
    injector: bool = Field(
        True, description="Fault injection, rate limits and the journal (off: provider paths bypass them)."
    )
    faults: str = Field("", description="Faults every request gets, e.g. 'http.503@p=0.1' (docs/faults.md).")
    rules: str = Field("", description="YAML file of scripted answers (docs/tools.md).")
    mcp: str = Field("", description="YAML or JSON file of the tools, resources and prompts /mcp serves (docs/mcp.md).")
    mcp_allow_host: list[str] = Field(
        default_factory=list,
        description="Hosts a Responses mcp tool's server_url may name besides loopback (no request forgery).",
    )
    latency: str = Field("", description="Latency timeline, e.g. 'ttft=lognormal:200:800; itl=20' (docs/faults.md).")
    time_scale: float = Field(1.0, ge=0, description="Multiplies every latency delay (0.01 for fast CI).")
    rate_limit_rpm: int = Field(0, ge=0, description="Requests per minute per API key and model (0: no limit).")
    rate_limit_tpm: int = Field(0, ge=0, description="Tokens per minute per API key and model (0: no limit).")
    journal_size: int = Field(10_000, ge=1, description="Requests the journal keeps (oldest dropped first).")
    admin_token: str = Field("", description="Bearer token the /__mockserver/ admin API requires (empty: none).")
    admin_remote: bool = Field(False, description="Serve the admin API to non-loopback clients too.")
    # Where every piece of mutable state lives (mockserver.state): rules, counts, buckets, the
    # journal, replay places, the clock, images and stored responses.
    state: str = Field(
        "memory",
        description="Where the server's state lives: 'memory' (this process), 'sqlite:PATH' (processes on one "
        "host) or Redis (any number of hosts): 'redis://HOST:PORT/DB' (rediss:// for TLS), a Redis Cluster "
        "'redis+cluster://HOST:PORT[,HOST:PORT...]' (rediss+cluster:// for TLS), or the primary Sentinels name "
        "'redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE[/DB]'.",
    )
    # The Responses API: where responses are kept, and how long background runs take.
    store: str = Field(
        "",
        description="Where stored responses live, when not with the rest of the state (--state): "
        "'memory', 'sqlite:PATH' or a redis:// URL.",
    )
    store_size: int = Field(10_000, ge=1, description="Responses the in-memory store keeps (oldest dropped first).")
    store_ttl: float = Field(2_592_000.0, gt=0, description="Seconds (server clock) a stored response is kept.")
    responses_queue_time: float = Field(
        0.0, ge=0, description="Seconds (server clock) a background response stays queued."
    )
    responses_tokens_per_second: float = Field(
        0.0, ge=0, description="Pace of background responses on the server clock (0: as fast as the model)."
    )
    batch_step_time: float = Field(
        0.5,
        ge=0,
        description="Seconds (server clock) a batch spends at least in validating, in_progress and finalizing "
        "(on --frozen-time it moves only as the clock moves).",
    )
    batch_concurrency: int = Field(
        1, ge=1, le=64, description="Batch lines run at once, over every batch (interactive requests go between)."
    )
    reasoning_models: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PATTERNS),
        description="Model ids (shell patterns) that think before answering (docs/tools.md).",
    )
    # Limits: what one request (or connection) may ask of the server. Beyond each, a 4xx in the
    # envelope naming what is too big (or a 503 for connections), never unbounded work.
    max_body_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Largest request body in bytes (413 beyond, before it is read whole)."
    )
    max_file_bytes: int = Field(
        512 * 1024 * 1024,
        ge=1,
        description="Largest file (/v1/files, a completed upload) in bytes (400 beyond); one request's body "
        "is still bounded by --max-body-bytes: larger files go up in parts (/v1/uploads).",
    )
    max_json_depth: int = Field(64, ge=2, le=1000, description="Deepest nesting of a JSON body (400 beyond).")
    max_choices: int = Field(
        256, ge=1, description="Choices one request may ask for: prompts × n × best_of (400 beyond)."
    )
    max_list: int = Field(
        1024, ge=1, description="Entries of logit_bias, stop_token_ids and other per-request lists (400 beyond)."
    )
    max_connections: int = Field(1000, ge=1, description="Connections served at once (503 beyond).")
    header_timeout: float = Field(
        10.0, gt=0, description="Seconds a connection may take to send a whole request head (closed beyond)."
    )
    body_timeout: float = Field(
        30.0, gt=0, description="Seconds a request may take to send its whole body after its head (408 beyond)."
    )
    shutdown_timeout: float = Field(1.0, ge=0, description="Seconds a shutdown waits for answers in flight.")

    @field_validator("state", "store")
    @classmethod
    def _state_url(cls, value: str) -> str:
        from mockserver.state.urls import kind_of

        if value:
            kind_of(value)  # a StateURLError (a ValueError) says what would do, the password hidden
        return value

    @field_validator("backend")
    @classmethod
    def _chain_runs(cls, value: str, info: ValidationInfo) -> str:
        from mockserver.backends import chain_names, check_names

        # A ValueError in one line naming the backend and the choices (cassettes and on_miss
        # are declared before backend, so they are read here).
        cassettes = bool(info.data.get("cassettes"))
        check_names(chain_names(value, cassettes, info.data.get("on_miss", "error")), cassettes)
        return value

    def chain(self) -> tuple[str, ...]:
        """The backends that answer, in order (see :mod:`mockserver.backends`)."""
        from mockserver.backends import chain_names

        return chain_names(self.backend, bool(self.cassettes), self.on_miss)

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        return profile_named(value).name

    @field_validator("faults")
    @classmethod
    def _faults_parse(cls, value: str) -> str:
        from mockserver.faults.catalogue import parse

        parse(value)  # a FaultError (a ValueError) names what is wrong
        return value

    @field_validator("rules")
    @classmethod
    def _rules_load(cls, value: str) -> str:
        if value:
            from mockserver.answers.scripted import Script

            # Loaded once here to fail at start-up: a RuleError (a ValueError) names the file,
            # the rule's position and the field; create_app loads the file again for real.
            Script().load_file(value)
        return value

    @field_validator("mcp")
    @classmethod
    def _mcp_loads(cls, value: str) -> str:
        if value:
            from mockserver.mcp_fakes.store import load_file

            load_file(value)  # a ValueError naming the file and the field, at start-up
        return value

    @field_validator("latency")
    @classmethod
    def _latency_parses(cls, value: str) -> str:
        from mockserver.faults.latency import Timeline

        Timeline.parse(value)
        return value

    @field_validator("replay_timing")
    @classmethod
    def _timing(cls, value: str) -> str:
        kind, _, factor = value.partition(":")
        if kind in ("instant", "recorded") and not factor:
            return value
        if kind == "scaled" and factor.replace(".", "", 1).isdigit():
            return value
        raise ValueError("replay timing is instant, recorded, or scaled:X with X ≥ 0")

    @field_validator("models", "api_keys", "match_ignore", "mcp_allow_host", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        # Env vars and flags give "a,b"; pydantic-settings would otherwise want JSON.
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    def model_windows(self) -> dict[str, int]:
        """Listed model id → its context window."""
        windows: dict[str, int] = {}
        for entry in self.models:
            name, _, size = entry.rpartition("@") if "@" in entry else (entry, "", "")
            windows[name] = int(size) if size.isdigit() else self.context_window
        return windows
