"""Seeds and ids: everything random or unique about a request derives from here.

* A request's canonical form is its JSON body with keys sorted and the fields that do not
  change *what* is generated (``stream``, ``stream_options``, ``user``) left out, so streamed
  and non-streamed twins get the same seed and the same text.
* A request without ``seed`` gets one from a stable hash of the canonical form and the
  server's global seed; choice ``i`` draws from its own generator seeded by ``(seed, i)``.
* Ids (``cmpl-…``, ``chatcmpl-…``) hash the canonical form and the seed, so the same request
  gets the same id on every run and in every process (no ``uuid4``, no global RNG).
* Ids this server minted and a client sends back (Responses' ``previous_response_id`` and the
  ``id`` of each ``input`` item: ``fc_…``, ``msg_…``, ``rs_…``) are left out of the canonical
  form: a stored response's id depends on what the store held when it was made, and the
  model reads none of them, so a rerun of a conversation on a long-lived server hashes as it
  does on a fresh one. What ``previous_response_id`` (or a ``conversation``) stands for, the
  conversation so far, enters the seed instead (:func:`continued_seed`, in the Responses codec).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["canonical", "choice_seed", "continued_seed", "derive_seed", "digest", "make_id"]

# Fields that change how an answer is delivered or attributed, never its content.
_DELIVERY_FIELDS = frozenset({"stream", "stream_options", "user"})

# Ids of the server's own making that a client echoes (see the module's docstring).
_ECHOED_IDS = frozenset({"previous_response_id", "conversation"})

_SEED_MASK = (1 << 63) - 1  # torch.Generator seeds must fit a signed 64-bit integer


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # made once


def canonical(body: Mapping[str, Any]) -> bytes:
    """The body as canonical JSON bytes: sorted keys, delivery-only fields and echoed ids dropped."""
    kept = {k: v for k, v in body.items() if k not in _DELIVERY_FIELDS and k not in _ECHOED_IDS}
    items = kept.get("input")
    if isinstance(items, list) and any(isinstance(item, dict) and "id" in item for item in items):
        kept["input"] = [{k: v for k, v in i.items() if k != "id"} if isinstance(i, dict) else i for i in items]
    text = _CANONICAL.encode(kept)
    # surrogatepass: JSON may carry a lone surrogate ("\\ud800"); the request is still hashed
    # (and then answered with a 400 by whatever cannot read it), never a 500 here.
    return text.encode("utf-8", "surrogatepass")


def digest(*parts: object) -> bytes:
    """SHA-256 of the parts, each tagged with its length so ("ab", "c") ≠ ("a", "bc")."""
    h = hashlib.sha256()
    for part in parts:
        raw = part if isinstance(part, bytes) else repr(part).encode()
        h.update(len(raw).to_bytes(8, "big"))
        h.update(raw)
    return h.digest()


def derive_seed(canonical_body: bytes, global_seed: int) -> int:
    """The seed of a request that gave none."""
    return int.from_bytes(digest(b"seed", global_seed, canonical_body)[:8], "big") & _SEED_MASK


def continued_seed(seed: int, conversation: object) -> int:
    """The seed of a request without one that continues ``conversation`` (the turns a stored
    response stands for): two continuations of different conversations draw differently."""
    return int.from_bytes(digest(b"continued", seed, conversation)[:8], "big") & _SEED_MASK


def choice_seed(seed: int, index: int) -> int:
    """The seed of choice ``index``'s private generator."""
    return int.from_bytes(digest(b"choice", seed, index)[:8], "big") & _SEED_MASK


def make_id(prefix: str, canonical_body: bytes, seed: int) -> str:
    """A stable, unique-looking id such as ``chatcmpl-3f2a…`` (24 hex digits)."""
    return prefix + digest(b"id", prefix, seed, canonical_body).hex()[:24]
