"""The ``script`` backend: answers decided by scripted rules, played without the model.

A rule that matches the request (:mod:`mockserver.answers.scripted`) decides its answer; any
other request is declined, for the next backend of the chain. The answer is tokenized with
the shipped tokenizer and released token by token exactly as the reference backend releases a
decided answer (:mod:`mockserver.backends.recital`): the same chunks, ``usage``, ``max_tokens``
cut and stop strings — and no torch. Only a request that asks for scores (``logprobs``, a
scored ``echo``, ``prompt_logprobs``) hands its decided answer to the model, which scores it
token by token (teacher forcing) and is loaded for that on first use. A request with a long
prompt is played in a thread (its size checked first: see :mod:`mockserver.backends.prompts`).

An answer is made all at once (:class:`~mockserver.spine.backend.Played`: nothing in it waits),
and remembered by its request: the handler hands back the same frozen request for the same
body, so a request asked again with the same decided answers is not tokenized and played again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mockserver.answers import director
from mockserver.answers.scripted import Script
from mockserver.backends import ModelNotInstalled, model_installed, prompts
from mockserver.backends.recital import Recital
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.spine.backend import Ask, BackendBase, Declined, Model, Played, Role
from mockserver.spine.events import Event, Finished, Refusal, Started, TextDelta, ToolCallDelta, Usage
from mockserver.spine.request import Answer, GenerationRequest
from mockserver.spine.stopping import TextAssembler

if TYPE_CHECKING:
    from mockserver.backends import Parts

__all__ = ["ScriptBackend", "from_parts", "play"]


class ScriptBackend(BackendBase):
    """Backend over a :class:`~mockserver.answers.scripted.Script`; ``scorer`` gives the model
    that scores an answer when logprobs are asked for (the reference model)."""

    role: Role = "script"

    def __init__(
        self,
        script: Script,
        scorer: Callable[[], Model] | None = None,
        tokenizer: Callable[[], Tokenizer] = Tokenizer.shipped,
    ) -> None:
        self.script = script
        self._scorer = scorer
        self._tokenizer = tokenizer
        # By the request's identity (checked: the same object, the same answers), its events:
        # a request is played once, however often it is asked (they are frozen, and shared).
        self._played: dict[int, tuple[GenerationRequest, tuple[Answer | None, ...], tuple[Event, ...]]] = {}

    @property
    def idle(self) -> bool:
        """No rule at all: the chain passes by without building the request."""
        return self.script.empty

    @property
    def version(self) -> int:
        """The rules' changes: while they stand, a request no counting rule sees is answered
        (or declined) the same way again."""
        return self.script.changes

    def answer(self, ask: Ask) -> AsyncIterator[Event]:
        return Played(lambda: self._play(ask))

    async def _play(self, ask: Ask) -> Sequence[Event] | AsyncIterator[Event]:
        """The answer's events, made at once (the model's stream, when it scores them)."""
        if self.script.empty:
            raise Declined()
        if self.script.counts(ask.source.session):
            ask.steady = False
        request = ask.request
        chosen = await self.script.choose(request, request.surface, request.session)
        if chosen is None:
            raise Declined()
        rule, answer = chosen
        ask.origin = f"rule {rule.id} ({rule.source})" if rule.source else f"rule {rule.id}"
        if _scored(request) and self._scorer is not None:
            if not model_installed():  # the model scores a scripted answer's tokens
                raise ModelNotInstalled("Logprobs (or a scored echo) of a scripted answer")
            return self._scorer().generate(director.scripted(request, answer))
        answers = director.scripted_answers(request, answer)
        known = self._played.get(id(request))
        if known is not None and known[0] is request and known[1] == answers:
            return known[2]
        if prompts.heavy(request):  # much to tokenize: in a thread, so other requests go on meanwhile
            events = await asyncio.to_thread(lambda: tuple(play(request, self._tokenizer(), answers)))
        else:
            events = tuple(play(request, self._tokenizer(), answers))
        self._played[id(request)] = (request, answers, events)
        if len(self._played) > PLAYED:
            del self._played[next(iter(self._played))]  # the oldest
        return events


# Answers remembered (see ScriptBackend): an identical request (the handler hands back the same
# frozen request for the same body) with the same decided answers gets the same events.
PLAYED = 512


def _scored(request: GenerationRequest) -> bool:
    params = request.sampling
    return params.logprobs is not None or params.prompt_logprobs is not None


def play(
    request: GenerationRequest, tok: Tokenizer, answers: tuple[Answer | None, ...] | None = None
) -> Iterator[Event]:
    """The events of ``request``'s decided answers (one per choice), unscored: the very events
    the reference backend makes of them, in its order — every choice opens, then each step
    releases the next token of every live choice — so streams are chunked alike. A request
    that is not streamed gets each choice's consecutive text as one delta (its body is the
    same fold, for less work)."""
    params = request.sampling
    answers = request.answers if answers is None else answers
    prepared = prompts.prepare(request, tok, decided=True)
    if not request.stream and not request.paced:
        whole = _whole(request, tok, prepared, answers)
        if whole is not None:
            return iter(whole)
    make = prompts.plain_token(tok)
    live: list[tuple[Recital, int]] = []
    produced: list[Recital] = []
    opening: list[Event] = []
    for p, prompt in enumerate(prepared):
        echo = prompts.echo(prompt.ids, tok, make, False) if params.echo else None
        for j in range(request.n):
            index = p * request.n + j
            opening.append(Started(index, prompt.size))
            if echo is not None:
                opening.append(replace(echo, index=index))
            # The stop strings are armed only where the reference backend arms them: it arms
            # them after ``min_tokens`` sampled tokens, and a decided answer samples none.
            assembler = TextAssembler(params.stop, params.keep_stop, armed=params.min_tokens == 0)
            answer = answers[index] if answers else None
            recital = Recital(index, answer or Answer(), tok.encode, tok.token_bytes, assembler, False)
            produced.append(recital)
            if prompt.budget == 0:  # max_tokens 0: the prompt (with echo) and nothing else
                opening.append(Finished(index, "length"))
            elif recital.done:  # an empty answer
                opening.append(Finished(index, recital.reason))
            else:
                live.append((recital, prompt.budget))
    events = opening
    while live:
        still: list[tuple[Recital, int]] = []
        for recital, budget in live:
            released, ended = recital.step(budget, lambda token_id: make(token_id, 0))
            events.extend(released)
            if not ended:
                still.append((recital, budget))
        live = still
    events.append(Usage(sum(p.size for p in prepared), sum(r.produced for r in produced)))
    return iter(events if request.stream or request.paced else _joined(events))


def _whole(
    request: GenerationRequest, tok: Tokenizer, prepared: list[prompts.PromptIds], answers: tuple[Answer | None, ...]
) -> list[Event] | None:
    """The events of a request that is not streamed, made answer by answer instead of token by
    token: its body is the same fold. None when a stop string could cut an answer, or the budget
    does (then the token loop decides where)."""
    params = request.sampling
    if params.stop and params.min_tokens == 0:  # armed stop strings (see play)
        return None
    events: list[Event] = []
    made = 0
    for p, prompt in enumerate(prepared):
        echo = prompts.echo(prompt.ids, tok, prompts.plain_token(tok), False) if params.echo else None
        for j in range(request.n):
            index = p * request.n + j
            events.append(Started(index, prompt.size))
            if echo is not None:
                events.append(replace(echo, index=index))
            if prompt.budget == 0:
                events.append(Finished(index, "length"))
                continue
            answer = (answers[index] if answers else None) or Answer()
            text, refusal = tok.encode(answer.text), tok.encode(answer.refusal) if answer.refusal else []
            calls = [(call, tok.encode(call.name), tok.encode(call.arguments or "")) for call in answer.tool_calls]
            count = len(text) + len(refusal) + sum(len(name) + len(arguments) for _, name, arguments in calls)
            if count > prompt.budget:
                return None
            made += count
            if text:
                events.append(TextDelta(index, _said(answer.text, text, tok)))
            if refusal:
                events.append(Refusal(index, _said(answer.refusal or "", refusal, tok)))
            for k, (call, name, arguments) in enumerate(calls):
                if name:
                    events.append(ToolCallDelta(index, k, id=call.id, name=call.name))
                if arguments:
                    events.append(ToolCallDelta(index, k, arguments=tok.decode(arguments)))
            reason = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
            events.append(Finished(index, reason))
    events.append(Usage(sum(p.size for p in prepared), made))
    return events


def _said(text: str, ids: list[int], tok: Tokenizer) -> str:
    """What ``text``'s tokens say: the text itself, but where it names a special token
    (``<|im_end|>``), which is no text."""
    return tok.decode(ids) if "<|" in text else text


def _joined(events: list[Event]) -> list[Event]:
    """Consecutive text (and tool-call argument) deltas of one choice joined into one."""
    out: list[Event] = []
    for event in events:
        last = out[-1] if out else None
        if (
            isinstance(event, TextDelta)
            and isinstance(last, TextDelta)
            and (last.index, last.echo) == (event.index, event.echo)
        ):
            out[-1] = TextDelta(event.index, last.text + event.text, last.tokens + event.tokens, event.echo)
        elif (
            isinstance(event, ToolCallDelta)
            and isinstance(last, ToolCallDelta)
            and (last.index, last.call_index) == (event.index, event.call_index)
            and event.id is None
            and event.name is None
        ):
            out[-1] = replace(last, arguments=last.arguments + event.arguments)
        else:
            out.append(event)
    return out


def from_parts(parts: Parts) -> ScriptBackend:
    """The registry's factory (see :mod:`mockserver.backends`)."""
    return ScriptBackend(parts.script, scorer=parts.reference)
