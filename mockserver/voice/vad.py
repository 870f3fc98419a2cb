"""Server voice activity detection over the input buffer: when a turn starts and when it ends.

An energy detector over 20 ms frames of 24 kHz PCM: a frame is speech when its RMS passes the
threshold (``threshold`` 0–1 scaled to 0.1 of full scale at 1); the turn ends after
``silence_duration_ms`` of frames below it. Deterministic: the same audio gives the same turns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Detector"]

FRAME = 480  # samples: 20 ms at 24 kHz


@dataclass
class Detector:
    threshold: float = 0.5
    silence_ms: int = 500
    pending: bytes = b""
    at: int = 0  # samples seen
    speaking: bool = False
    started: int = 0  # sample where the turn began
    quiet: int = 0  # samples of silence since the last speech

    def feed(self, pcm: bytes) -> list[tuple[str, int]]:
        """What ``pcm`` (16-bit, 24 kHz) changes: ``("started", ms)`` and ``("stopped", ms)``."""
        data = self.pending + pcm
        whole = len(data) // (2 * FRAME) * 2 * FRAME
        self.pending = data[whole:]
        if not whole:
            return []
        frames = np.frombuffer(data[:whole], dtype="<i2").astype(np.float32).reshape(-1, FRAME) / 32768.0
        loud = np.sqrt((frames**2).mean(axis=1)) > 0.1 * self.threshold
        changes: list[tuple[str, int]] = []
        for is_loud in loud.tolist():
            if is_loud:
                if not self.speaking:
                    self.speaking, self.started = True, self.at
                    changes.append(("started", self.at // 24))
                self.quiet = 0
            elif self.speaking:
                self.quiet += FRAME
                if self.quiet * 1000 >= self.silence_ms * 24000:
                    self.speaking = False
                    changes.append(("stopped", (self.at + FRAME) // 24))
            self.at += FRAME
        return changes

    def reset(self) -> None:
        self.pending, self.speaking, self.quiet = b"", False, 0
