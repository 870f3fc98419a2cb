"""Who runs a batch, whether that process is still there, and who takes it up if not.

A batch is run by the process that created it (or took it up). That process writes itself as
the batch's owner — :class:`~mockserver.state.owners.Owner`: pid, where the pid means
something, its start time, a heartbeat renewed as the batch goes — so another process sharing
the State can tell when the owner is gone (:func:`~mockserver.state.owners.alive`: the process
table on one host, the heartbeat's lease elsewhere). Taking one up is a *claim*: a counter per
owner generation, counted atomically by the State, so of all the processes that saw the same
orphan exactly one gets 1 and resumes it.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict

from mockserver.batches.record import KEYS
from mockserver.state.base import State
from mockserver.state.owners import LIVE, Owner, alive, place, process_start

__all__ = ["LEASE", "Owners"]

LEASE = 30.0  # real seconds without a heartbeat before an owner on another host counts as gone


class Owners:
    """This process's side of batch ownership (one token per server)."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.token = secrets.token_hex(8)

    def open(self) -> None:
        LIVE.add(self.token)  # an owner in this process is alive while its server is

    def close(self) -> None:
        LIVE.discard(self.token)

    async def heartbeat(self, batch_id: str) -> None:
        """Write this process as ``batch_id``'s owner, as of now."""
        owner = Owner(self.token, os.getpid(), place(), process_start(), time.time())
        await self.state.put(KEYS.owner(batch_id), json.dumps(asdict(owner)).encode())

    async def orphaned(self, batch_id: str, running_here: bool) -> bool:
        """Is ``batch_id``'s owner gone? (``running_here``: this process runs it now.)"""
        if running_here:
            return False
        raw = await self.state.get(KEYS.owner(batch_id))
        if raw is None:
            return True
        owner = Owner(**json.loads(raw))
        if owner.token == self.token:
            return True  # ours, yet no task runs it: its task is gone
        return not alive(owner, time.time(), LEASE)

    async def claim(self, batch_id: str, generation: int) -> bool:
        """Claim an orphan of owner generation ``generation``: True for exactly one claimer."""
        return await self.state.add(KEYS.claim(batch_id, generation)) == 1
