"""Path prefixes that choose a profile per request: ``/fireworks/v1/…`` is answered as
Fireworks, so one server can stand in for several providers at once.

The edge (:class:`Prefixes`) strips a known profile name from the front of the path and records it in the
ASGI scope; everything after it (auth, routing, error bodies) sees an ordinary ``/v1/…``
request that knows its profile. A profile whose server has routes outside ``/v1/`` (vLLM's
``/tokenize``) gets those under its prefix too (``/vllm/tokenize`` → ``/tokenize``).

Azure OpenAI's paths, as ``openai.AzureOpenAI`` calls them, are rewritten here as well and
answered as the ``openai`` profile:

* ``/openai/deployments/{deployment}/chat/completions?api-version=…`` (and the other
  generation paths) → ``/v1/chat/completions``, the deployment being the model
  (:data:`~mockserver.wire.scope.DEPLOYMENT`, read where the body is prepared);
* ``/openai/responses?api-version=…`` (every path that names no deployment) → ``/v1/responses``;
* ``/openai/v1/…``, Azure's v1 API, is the ``openai`` prefix's own path and needs no version.

The first two need ``api-version``: without it Azure answers 404 "Resource not found", and so
do we, naming the parameter. An ``api-key`` header stands for ``Authorization: Bearer`` on
every ``/openai/`` path, as Azure takes either.

Anthropic's Messages paths at the root (``/v1/messages``, ``/v1/messages/count_tokens``) are
answered as the ``anthropic`` profile without a prefix, so their errors are Anthropic's too; on
them and under ``/anthropic/`` an ``x-api-key`` header stands for ``Authorization: Bearer``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.types import Scope

from mockserver.errors import APIError, NotFound
from mockserver.profiles import Profile
from mockserver.wire.scope import PROFILE_KEY

__all__ = ["AZURE_PROFILE", "PROVIDER_ROOTS", "Prefixes", "Routed", "provider_path"]

GEMINI_PROFILE = "gemini"  # Google's paths: /v1beta/… at the root, /gemini/v1beta/… and /gemini/v1/…
GEMINI_ROOT = "v1beta"
# Anthropic's paths: /v1/messages… at the root, everything under /anthropic/v1/…; its key may
# come as x-api-key (older SDKs, curl) or Authorization: Bearer (the 2.x SDK).
ANTHROPIC_PROFILE = "anthropic"
ANTHROPIC_ROOT = "messages"
ANTHROPIC_KEY = b"x-api-key"
AZURE_PROFILE = "openai"  # Azure OpenAI serves OpenAI's models in OpenAI's wire format
API_VERSION = "api-version"
# The roots of the providers' own paths (OpenAI's /v1/; Google's /v1beta/): requests there pass
# the recording guard, the faults and the keys; the admin API and /health do not.
PROVIDER_ROOTS = ("/v1/", "/v1beta/")


def provider_path(path: str) -> bool:
    """Is ``path`` (after its prefix is read) a provider's, not the server's own?"""
    return path.startswith(PROVIDER_ROOTS)


def _missing_version() -> APIError:
    return NotFound(
        "Resource not found: Azure OpenAI paths need the 'api-version' query parameter "
        "(Azure answers 404 without it; AzureOpenAI(api_version=…) sends it).",
        param=API_VERSION,
        code="404",
    )


@dataclass(frozen=True, slots=True)
class Routed:
    """A request after its prefix is read: the scope everything after sees (``/v1/…``, its
    profile named under :data:`~mockserver.wire.scope.PROFILE_KEY`), the Azure deployment its
    path named, and the error it is answered with instead (an Azure path without its version)."""

    scope: Scope
    deployment: str | None = None
    problem: APIError | None = None


class Prefixes:
    """The profiles' path prefixes, read once: :meth:`route` is one dict lookup for a path."""

    def __init__(self, profiles: Mapping[str, Profile]) -> None:
        self.prefixes = {name: name for name in profiles}
        self.roots = {name: profile.root_routes for name, profile in profiles.items()}

    def route(self, scope: Scope) -> Routed:
        """``scope`` as its prefix says (the same dict when it has none: nothing is copied)."""
        path: str = scope["path"]
        head, slash, rest = path[1:].partition("/")
        name = self.prefixes.get(head) if slash else None
        if name is None:
            if head == GEMINI_ROOT:  # Google's own root: its errors are Google's too
                return Routed({**scope, PROFILE_KEY: GEMINI_PROFILE})
            if head == "v1" and (rest == ANTHROPIC_ROOT or rest.startswith(ANTHROPIC_ROOT + "/")):
                # Anthropic's own paths at the root: answered (and errors worded) as Anthropic. The
                # path stays as it is, so the scope is noted in place (a hot path: no copy).
                scope[PROFILE_KEY] = ANTHROPIC_PROFILE
                return Routed(_with_api_key(scope, ANTHROPIC_KEY))
            return Routed(scope)
        if name == GEMINI_PROFILE:
            return _gemini(scope, rest)
        if rest.startswith("v1/") or rest in self.roots[name]:
            scope = {**scope, "path": "/" + rest, "raw_path": ("/" + rest).encode(), PROFILE_KEY: name}
            if name == ANTHROPIC_PROFILE:
                return Routed(_with_api_key(scope, ANTHROPIC_KEY))
            return Routed(_with_api_key(scope) if name == AZURE_PROFILE else scope)
        if name != AZURE_PROFILE:
            return Routed(scope)
        return _azure(scope, rest)


def _gemini(scope: Scope, rest: str) -> Routed:
    """``/gemini/v1beta/…`` and ``/gemini/v1/…`` (google-genai's default version) as Google's
    ``/v1beta/…``: one set of routes serves both versions (and ``/v1/…`` stays OpenAI's)."""
    version, _, tail = rest.partition("/")
    if version not in ("v1", GEMINI_ROOT):
        return Routed({**scope, PROFILE_KEY: GEMINI_PROFILE})  # answered 404, in Google's words
    target = f"/{GEMINI_ROOT}/{tail}"
    return Routed({**scope, "path": target, "raw_path": target.encode(), PROFILE_KEY: GEMINI_PROFILE})


def _azure(scope: Scope, rest: str) -> Routed:
    """An Azure path (``rest``: what follows ``/openai/``) answered as its ``/v1/`` twin."""
    deployment: str | None = None
    if rest.startswith("deployments/"):
        deployment, _, rest = rest[len("deployments/") :].partition("/")
    target = "/v1/" + rest
    scope = _with_api_key({**scope, "path": target, "raw_path": target.encode(), PROFILE_KEY: AZURE_PROFILE})
    if not parse_qs(scope["query_string"].decode("latin-1")).get(API_VERSION):
        return Routed(scope, problem=_missing_version())
    return Routed(scope, deployment=deployment or None)


def _with_api_key(scope: Scope, header: bytes = b"api-key") -> Scope:
    """``api-key: K`` (Azure's; Anthropic's ``x-api-key``) as ``Authorization: Bearer K`` (unless
    an Authorization is sent too), so the bearer check, the journal and recordings see one kind of key."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    key = next((value for name, value in headers if name == header), None)
    if key is None or any(name == b"authorization" for name, _ in headers):
        return scope
    return {**scope, "headers": [*headers, (b"authorization", b"Bearer " + key.strip())]}
