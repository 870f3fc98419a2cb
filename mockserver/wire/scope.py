"""Every key mockserver leaves in a request's ASGI scope, named once.

The edge writes most of them before the app runs; handlers and the layers inside read them.
Defined here, in the leaf, so a reader never imports whoever writes its key (which is how
floors knot). What each holds is said beside it; the types live with their owners.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = [
    "APPLIED_KEY",
    "BATCH_KEY",
    "BODY_KEY",
    "DEPLOYMENT",
    "NOTE_KEY",
    "PLAN_KEY",
    "PROFILE_KEY",
    "REPEAT_KEY",
    "REQUEST_ID_KEY",
    "SYNCED_KEY",
    "TALLY_KEY",
]

BODY_KEY = "mockserver.body"  # (raw bytes, parsed JSON or None): read and parsed once, at the edge
PROFILE_KEY = "mockserver.profile"  # the profile named by the path prefix (absent: the server's own)
REQUEST_ID_KEY = "mockserver.request_id"  # the request's running hash (its x-request-id)
PLAN_KEY = "mockserver.faults"  # tuple[Fault, ...]: the faults decided at the edge
APPLIED_KEY = "mockserver.applied"  # list[Fault]: applied so far (shared by copies of the scope)
TALLY_KEY = "mockserver.tally"  # the request's journal entry
BATCH_KEY = "mockserver.batch"  # a batch line's {"id", "custom_id", "line"} (the journal shows it)
REPEAT_KEY = "mockserver.repeat"  # a spine.repeat.Promise: the edge may remember this request's answer
SYNCED_KEY = "mockserver.synced"  # set once a request has paid its first look at a shared state (its journal id, or 0)
# A callable ``(what) -> None`` a test harness leaves in the scope to hear of failures a test
# should see (a cassette miss): the error handler calls it, so nobody reads the answer's body.
NOTE_KEY = "mockserver.note"

# Azure's deployment named in the path (``/openai/deployments/{deployment}/…``): the model of
# the request. A context variable, not a scope key: it is read where the body is prepared,
# which sees the body, not the scope.
DEPLOYMENT: ContextVar[str | None] = ContextVar("mockserver.deployment", default=None)
