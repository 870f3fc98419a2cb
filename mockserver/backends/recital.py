"""Teacher forcing: a decided :class:`~mockserver.spine.request.Answer` played out token by token.

A scripted reply, a tool call or a structured-output object is not sampled: its text is
tokenized, fed through the model to score every token (the backend does that part), and then
released exactly as sampled tokens would be — text through the stop-string assembler, a
refusal as refusal deltas, each tool call as an opening delta (``id`` and ``name``) followed
by argument fragments. The caller counts produced tokens against ``max_tokens``, so a long
answer is cut with ``finish_reason: "length"`` like any other.

Nothing here touches torch: the backend hands in a ``make`` callback that builds each
:class:`~mockserver.spine.events.Token` with the scores it computed.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Literal

from mockserver.spine.events import ChoiceEvent, Finished, FinishReason, Refusal, TextDelta, Token, ToolCallDelta
from mockserver.spine.request import Answer
from mockserver.spine.stopping import TextAssembler

__all__ = ["Recital", "TokenMaker"]

TokenMaker = Callable[[int], Callable[[str], Token]]  # token id → (its text → the Token)
_PieceKind = Literal["text", "refusal", "name", "arguments"]


# One token of an answer: its id, what it belongs to, which tool call ("name" / "arguments"),
# and whether it is the last token of its span. A tuple, not a dataclass: an answer has as
# many as it has tokens, and they are made on every request.
_Piece = tuple[int, _PieceKind, int, bool]


class Recital:
    """One choice's answer. :attr:`ids` are every token to score, in order; :meth:`advance`
    releases the next one. ``encode`` is the tokenizer's ``str -> ids``, ``raw`` its
    ``id -> bytes``."""

    def __init__(
        self,
        index: int,
        answer: Answer,
        encode: Callable[[str], list[int]],
        raw: Callable[[int], bytes],
        assembler: TextAssembler,
        with_tokens: bool,
    ) -> None:
        self.index = index
        self.answer = answer
        self._raw = raw
        self._assembler = assembler
        self._with_tokens = with_tokens
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[_Piece] = []
        pieces += self._span(encode(answer.text), "text")
        if answer.refusal:
            pieces += self._span(encode(answer.refusal), "refusal")
        for i, call in enumerate(answer.tool_calls):
            pieces += self._span(encode(call.name), "name", i)
            pieces += self._span(encode(call.arguments or ""), "arguments", i)
        self._pieces = pieces
        self._count = len(pieces)
        self.ids = [p[0] for p in pieces]
        self.produced = 0

    @staticmethod
    def _span(ids: list[int], kind: _PieceKind, call: int = 0) -> list[_Piece]:
        last = len(ids) - 1
        return [(t, kind, call, j == last) for j, t in enumerate(ids)]

    @property
    def done(self) -> bool:
        return self.produced >= self._count

    @property
    def reason(self) -> FinishReason:
        """How the answer finishes when it is played to the end."""
        if self.answer.finish_reason is not None:
            return self.answer.finish_reason
        return "tool_calls" if self.answer.tool_calls else "stop"

    def advance(self, make: TokenMaker) -> tuple[list[ChoiceEvent], FinishReason | None, str | None]:
        """Release the next token: its events, and (reason, matched stop) if the choice ends."""
        token_id, kind, call_index, last = self._pieces[self.produced]
        self.produced += 1
        events: list[ChoiceEvent] = []
        if kind == "text":
            released = self._assembler.push(self._raw(token_id), make(token_id))
            if self._assembler.stopped:  # a stop string inside the scripted text ends it there
                self._text(events, released)
                return events, "stop", self._assembler.matched
            if last:
                released += self._assembler.flush()
            self._text(events, released)
        elif kind == "refusal":
            text = self._decoder.decode(self._raw(token_id), final=last)
            if text:
                events.append(Refusal(self.index, text))
        elif kind == "name":
            if last:
                call = self.answer.tool_calls[call_index]
                events.append(ToolCallDelta(self.index, call_index, id=call.id, name=call.name))
        else:
            text = self._decoder.decode(self._raw(token_id), final=last)
            if text:
                events.append(ToolCallDelta(self.index, call_index, arguments=text))
        return events, (self.reason if self.produced >= self._count else None), None

    def step(self, budget: int, make: TokenMaker) -> tuple[list[ChoiceEvent], bool]:
        """Release the next token, within ``budget`` tokens: its events, then the choice's
        :class:`~mockserver.spine.events.Finished` when the answer ends (played out, cut by a
        stop string, or by the budget); and whether it ended."""
        released, reason, matched = self.advance(make)
        if reason is None and self.produced >= budget:
            released.extend(self.cut())
            reason = "length"
        if reason is not None:
            released.append(Finished(self.index, reason, matched))
        return released, reason is not None

    def cut(self) -> list[ChoiceEvent]:
        """The budget ran out mid-answer: release what is held (``finish_reason: length``)."""
        events: list[ChoiceEvent] = []
        self._text(events, self._assembler.flush())
        tail = self._decoder.decode(b"", final=True)
        _, kind, call_index, _ = self._pieces[self.produced - 1]
        if tail and kind == "refusal":
            events.append(Refusal(self.index, tail))
        elif tail:
            events.append(ToolCallDelta(self.index, call_index, arguments=tail))
        return events

    def _text(self, events: list[ChoiceEvent], released: list[Token]) -> None:
        if released:
            text = released[0].text if len(released) == 1 else "".join([t.text for t in released])
            events.append(TextDelta(self.index, text, tuple(released) if self._with_tokens else ()))
