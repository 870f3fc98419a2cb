"""From sampled token bytes to released text: UTF-8 boundaries and stop strings.

Two rules, both about what a *stream* may send before it knows more:

* A token can end in the middle of a multi-byte character. An incremental UTF-8 decoder
  holds those bytes back, so no delta ever carries half a character.
* Stop strings match on characters, not tokens: ``"\\n\\n"`` stops generation whether it
  arrives as one token or two. Text that could still be the start of a stop string is held
  back until the next token settles it; when a stop matches, the earliest match wins and the
  text is cut before it (or, with ``keep_stop``, just after it: some providers return the
  stop string). Before ``min_tokens`` tokens exist the assembler is not yet *armed*: as in
  vLLM, no stop string can end a choice that is still below its minimum length.

Text is released in whole tokens (each carrying its own logprobs); only the token in which a
stop match begins is cut short. Non-streaming answers fold the very same releases, so both
kinds of answer return identical text.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import replace

from mockserver.spine.events import Token

__all__ = ["TextAssembler"]


class TextAssembler:
    """Feed tokens in with :meth:`push`; get back the tokens that may be sent now."""

    def __init__(self, stops: tuple[str, ...], keep_stop: bool = False, armed: bool = True) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._all_stops = tuple(s for s in stops if s)
        self._stops = self._all_stops if armed else ()
        self._keep = keep_stop
        self._pending: list[Token] = []
        self._pending_text = ""
        self.stopped = False
        self.matched: str | None = None  # the stop string that ended generation

    def arm(self) -> None:
        """From now on, stop strings end the choice (text already released is not searched)."""
        self._stops = self._all_stops

    def push(self, raw: bytes, make: Callable[[str], Token]) -> list[Token]:
        """Add a token's bytes; ``make(text)`` builds the Token once its text is known.

        Returns the tokens released by this push (possibly none). After a stop string
        matched, :attr:`stopped` is true and the returned tokens end just before it.
        """
        text = self._decoder.decode(raw)
        if not self._stops:  # no stop string to watch for: only characters split by a token wait
            return self._release_characters(make(text), text)
        self._pending.append(make(text))
        self._pending_text += text
        match = self._earliest_match()
        if match is not None:
            self.stopped = True
            at, self.matched = match
            return self._release_cut(at + len(self.matched) if self._keep else at)
        # A token that ends inside a character stays pending, so that if generation ends
        # right here the replacement character still has a token to travel with.
        in_character = bool(self._decoder.getstate()[0])
        return self._release_whole(len(self._pending_text) - self._held_back(), keep_last=in_character)

    def _release_characters(self, token: Token, text: str) -> list[Token]:
        """What :meth:`push` releases with no stop strings armed (the same, for less work):
        everything held and this token — but a token that ends inside a character waits."""
        if self._decoder.getstate()[0]:
            released, self._pending, self._pending_text = self._pending, [token], text
            return released
        if self._pending:
            released = [*self._pending, token]
            self._pending, self._pending_text = [], ""
            return released
        return [token]

    def flush(self) -> list[Token]:
        """Release everything held (generation ended without a stop string)."""
        tail = self._decoder.decode(b"", final=True)  # a dangling partial character → U+FFFD
        if tail and self._pending:
            last = self._pending[-1]
            self._pending[-1] = replace(last, text=last.text + tail)
        released, self._pending, self._pending_text = self._pending, [], ""
        return released

    def _earliest_match(self) -> tuple[int, str] | None:
        """Where the earliest stop string starts, and which (the first listed on a tie)."""
        found = [(at, stop) for stop in self._stops if (at := self._pending_text.find(stop)) >= 0]
        return min(found, key=lambda hit: hit[0]) if found else None

    def _held_back(self) -> int:
        """Length of the longest suffix of the pending text that begins some stop string."""
        text = self._pending_text
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:size]):
                    longest = size
                    break
        return longest

    def _release_whole(self, end: int, keep_last: bool) -> list[Token]:
        """Release the whole tokens that end by character ``end``."""
        count = position = 0
        limit = len(self._pending) - 1 if keep_last else len(self._pending)
        for token in self._pending[:limit]:
            if position + len(token.text) > end:
                break
            position += len(token.text)
            count += 1
        released = self._pending[:count]
        self._pending = self._pending[count:]
        self._pending_text = self._pending_text[position:]
        return released

    def _release_cut(self, end: int) -> list[Token]:
        """A stop matched: release the text before ``end``, the straddling token cut short;
        tokens wholly after it (an empty partial-character one included) are dropped."""
        released: list[Token] = []
        position = 0
        for token in self._pending:
            if position >= end:
                break
            token_end = position + len(token.text)
            released.append(token if token_end <= end else replace(token, text=token.text[: end - position]))
            position = token_end
        self._pending, self._pending_text = [], ""
        return released
