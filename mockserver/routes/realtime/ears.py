"""A Realtime socket's input audio: ``input_audio_buffer.append`` / ``commit`` / ``clear``, the
server's VAD, audio content in created items, and their transcripts.

Appended audio is in the session's ``audio.input.format`` (24 kHz PCM, or G.711 μ-law / A-law at
8 kHz, turned into 24 kHz PCM as it comes: :class:`mockserver.voice.g711.Listener`), so the VAD
and the hearing always read 24 kHz PCM. Speech mockserver made carries its text and is heard at
once; other audio is transcribed by the engine (:mod:`.hearing`) in a task a response waits for.

A transcription session (``session.type: "transcription"``) only listens: each committed turn's
transcript streams as ``conversation.item.input_audio_transcription.delta`` events (the engine's
tokens, scripted rules and faults included; with ``include: ["item.input_audio_transcription.logprobs"]``
each carries its tokens' logprobs) and then ``…completed``; no response is made.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from mockserver.routes.realtime import hearing
from mockserver.routes.realtime.port import Port
from mockserver.voice import formats, g711, modem
from mockserver.voice.transcribe import Heard, hear
from mockserver.voice.vad import Detector

__all__ = ["Ears"]

_LOGPROBS = "item.input_audio_transcription.logprobs"  # what a transcription session's include may ask


class Ears:
    def __init__(self, rt: Port) -> None:
        self.rt = rt
        self.detector = Detector()
        self.listener = g711.Listener()

    @property
    def _input(self) -> dict[str, Any]:
        found: dict[str, Any] = self.rt.session.config["audio"]["input"]
        return found

    @property
    def transcribing_only(self) -> bool:
        return bool(self.rt.session.config.get("type") == "transcription")

    def configure(self) -> None:
        """Follow the session's config (after ``session.update``): the VAD's settings, the input format."""
        detection = self._input.get("turn_detection") or {}
        self.detector.threshold = float(detection.get("threshold", 0.5))
        self.detector.silence_ms = int(detection.get("silence_duration_ms", 500))
        kind = str((self._input.get("format") or {}).get("type") or "audio/pcm")
        if kind != self.listener.kind:  # a new format: what the old one held is dropped with it
            self.listener = g711.Listener(kind)

    def pcm_of(self, audio: bytes) -> bytes:
        """A whole clip in the input format (an item's audio content) as 24 kHz PCM."""
        listener = g711.Listener(self.listener.kind)
        return listener.feed(audio) + listener.flush()

    def append(self, event: dict[str, Any]) -> None:
        pcm = self.listener.feed(base64.b64decode(event["audio"], validate=True))
        rt = self.rt
        rt.session.audio += pcm
        detection = self._input.get("turn_detection")
        if not detection:
            return
        for change, ms in self.detector.feed(pcm):
            pending = f"item_{rt.session.config['id'][5:17]}{rt.session.counter + 1:06d}"
            if change == "started":
                rt.send({"type": "input_audio_buffer.speech_started", "audio_start_ms": ms, "item_id": pending})
                continue
            rt.send({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": ms, "item_id": pending})
            self.commit(None)
            if detection.get("create_response", True) and not self.transcribing_only:
                rt.respond({})

    def commit(self, event: dict[str, Any] | None) -> None:
        rt = self.rt
        rt.session.audio += self.listener.flush()
        if not rt.session.audio:
            rt.error(
                "Error committing input audio buffer: the buffer is empty.",
                (event or {}).get("event_id"),
                code="input_audio_buffer_commit_empty",
            )
            return
        pcm = bytes(rt.session.audio)
        rt.session.audio.clear()
        self.detector.reset()
        heard = hear(formats.from_pcm16(pcm), modem.RATE)
        transcript = heard.spoken.text if heard.spoken is not None and not self.transcribing_only else None
        item = {
            "id": rt.session.next_id("item"),
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": transcript}],
        }
        previous = rt.session.add(item)
        rt.send({"type": "input_audio_buffer.committed", "item_id": item["id"], "previous_item_id": previous})
        rt.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        if transcript is not None:
            self.transcribed(item, transcript, heard)
        else:  # audio mockserver did not speak, or a transcription session's: the engine hears it
            self.listen(item, pcm, heard, 0)
        rt.send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def clear(self, event: dict[str, Any]) -> None:
        self.rt.session.audio.clear()
        self.listener.flush()
        self.detector.reset()
        self.rt.send({"type": "input_audio_buffer.cleared"})

    def item_audio(self, item: dict[str, Any]) -> None:
        """A created message's audio parts heard: mockserver's speech gives its text at once."""
        content = []
        for index, part in enumerate(item.get("content") or ()):
            if isinstance(part, dict) and part.get("type") == "input_audio" and part.get("transcript") is None:
                pcm = self.pcm_of(base64.b64decode(part.get("audio") or "", validate=True))
                heard = hear(formats.from_pcm16(pcm), modem.RATE) if pcm else None
                spoken = heard.spoken if heard is not None else None
                part = {**part, "transcript": spoken.text if spoken is not None else None}
                if heard is not None and spoken is None:  # other audio: the engine hears it
                    self.listen(item, pcm, heard, index)
            content.append(part)
        item["content"] = content

    def listen(self, item: dict[str, Any], pcm: bytes, heard: Heard, index: int) -> None:
        task = asyncio.ensure_future(self.hear(item, pcm, heard, index))
        self.rt.pending.add(task)
        task.add_done_callback(self.rt.pending.discard)

    async def hear(self, item: dict[str, Any], pcm: bytes, heard: Heard, index: int) -> None:
        asked = self._input.get("transcription") or {}
        model = str((asked.get("model") if isinstance(asked, dict) else None) or hearing.MODEL)
        logprobs: list[dict[str, Any]] | None = None
        if self.transcribing_only:  # streamed: the deltas as the engine makes them
            said: list[str] = []
            scored = _LOGPROBS in (self.rt.session.config.get("include") or ())
            logprobs = [] if scored else None
            made = hearing.deltas(self.rt.ctx, pcm, heard, model, self.rt.session_header, scored)
            async for delta, scores in made:
                said.append(delta)
                event = {"item_id": item["id"], "content_index": index, "delta": delta}
                if logprobs is not None:
                    event["logprobs"] = scores
                    logprobs += scores
                self.rt.send({"type": "conversation.item.input_audio_transcription.delta", **event})
            text = "".join(said).strip()
        else:
            text = await hearing.transcript(self.rt.ctx, pcm, heard, model, self.rt.session_header)
        item["content"][index]["transcript"] = text
        self.transcribed(item, text, heard, index, logprobs)

    def transcribed(
        self,
        item: dict[str, Any],
        transcript: str,
        heard: Heard,
        index: int = 0,
        logprobs: list[dict[str, Any]] | None = None,
    ) -> None:
        """The item's audio is heard: said, when the session asked for its transcription."""
        if self._input.get("transcription") or self.transcribing_only:
            event = {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item["id"],
                "content_index": index,
                "transcript": transcript,
                "usage": {"type": "duration", "seconds": heard.seconds},
            }
            if logprobs is not None:
                event["logprobs"] = logprobs
            self.rt.send(event)
