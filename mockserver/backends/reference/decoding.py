"""One request's generation on the reference model: its choices, and the steps that advance them.

A :class:`Decoding` lives on the model's pool threads only (the backend in
:mod:`mockserver.backends.reference.backend` schedules it): ``__init__`` prefills every prompt and
opens the choices; each :meth:`Decoding.advance` samples one token for every live choice — or
plays the next token of a decided answer (:mod:`mockserver.backends.recital`), or of a
reasoning model's thinking — and returns the events that made.
"""

from __future__ import annotations

import codecs
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from mockserver.backends import prompts
from mockserver.backends.recital import Recital
from mockserver.spine.events import (
    Candidate,
    Event,
    Finished,
    FinishReason,
    PromptLogprobs,
    PromptPosition,
    Reasoning,
    Scored,
    Started,
    TextDelta,
    Token,
    Usage,
)
from mockserver.spine.request import Answer, GenerationRequest
from mockserver.spine.seeding import choice_seed
from mockserver.spine.stopping import TextAssembler

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from mockserver.backends.reference.runtime import Runtime
    from mockserver.backends.reference.sampling import Sampler
    from mockserver.gpt.decoder import Slots

    Logits = npt.NDArray[np.float32]

__all__ = ["SLICE_ALONE", "SLICE_SHARED", "Alone", "Choice", "Decoding", "Stepper"]

SLICE_SHARED = 0.004  # a non-streamed request's pool task, when other work is waiting
SLICE_ALONE = 0.1  # ... and when none is: a lone request finishes in one task


@dataclass(slots=True)
class Choice:
    index: int
    sampler: Sampler
    assembler: TextAssembler
    logits: Logits  # [V] scores for the next token
    slots: Slots  # where its keys are: the request's own, or the batch scheduler's
    slot: int | None  # its slot there; None once it is done and the slot is freed
    budget: int  # tokens it may still sample
    done: bool = False
    thinking: bool = False  # a reasoning model, still thinking (its text goes out as Reasoning)
    thought: int = 0  # reasoning tokens sampled
    recital: Recital | None = None  # a decided answer, played instead of sampling
    scores: Logits | None = None  # [len(recital.ids), V] log-probabilities of that answer's tokens

    reasoning_decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    @property
    def produced(self) -> int:
        return self.recital.produced if self.recital is not None else self.sampler.sampled


class Stepper(Protocol):
    """Runs the model for a choice: after :meth:`step` (or :meth:`feed`), ``choice.logits``
    score the token after ``token_id`` (after ``ids``) — at once, or, for the batch scheduler,
    once the step's batched compute has run (before the choice is advanced again)."""

    def step(self, choice: Choice, token_id: int) -> None: ...

    def feed(self, choice: Choice, ids: list[int]) -> None: ...


class Alone:
    """The single-row :class:`Stepper`: each choice through the model by itself, at once."""

    def __init__(self, runtime: Runtime) -> None:
        self.decoder = runtime.decoder

    def step(self, choice: Choice, token_id: int) -> None:
        assert choice.slot is not None
        choice.logits = self.decoder.step(choice.slots, [(choice.slot, token_id)])[0]

    def feed(self, choice: Choice, ids: list[int]) -> None:
        assert choice.slot is not None
        choice.logits = self.decoder.extend(choice.slots, choice.slot, ids)[0]


class Decoding:
    """One request's state between steps. Runs only on model threads, one step at a time;
    ``stepper`` runs the model for its choices (by default each alone, at once)."""

    def __init__(self, runtime: Runtime, request: GenerationRequest, stepper: Stepper | None = None) -> None:
        from mockserver.backends.reference import sampling

        self._sampling = sampling
        self.runtime = runtime
        self.request = request
        self.stepper: Stepper = stepper if stepper is not None else Alone(runtime)
        tok = runtime.tokenizer
        params = request.sampling
        # Chat replies end at <|im_end|>; any special token ends a reply, since none is text.
        ends = tok.special_ids if request.endpoint == "chat" else frozenset({tok.eos_id})
        self.end_ids = ends
        self.stop_ids = frozenset(params.stop_token_ids)
        self.opening: list[Event] = []
        self.choices: list[Choice] = []
        prepared = prompts.prepare(request, tok)  # every prompt checked before any compute
        self.prompt_tokens = sum(p.size for p in prepared)
        score = (params.echo and params.logprobs is not None) or params.prompt_logprobs is not None
        decoder = runtime.decoder
        self.kernel = decoder.kernel
        # Every choice of every prompt gets a slot of its own, the prompt's keys copied in; room
        # for the longest prompt and a few tokens to begin with (the buffers grow as needed).
        longest = max((max(len(q.ids), 1) for q in prepared), default=1)
        slots = decoder.slots(len(prepared) * request.n, capacity=longest + 32)
        for p, (ids, size, budget) in enumerate((q.ids, q.size, q.budget) for q in prepared):
            # An empty prompt is read as the start of a document (after <|endoftext|>).
            prompt_slot = slots.take()
            logits = decoder.extend(slots, prompt_slot, ids or [tok.eos_id], all_logits=score)
            scores = self.kernel.log_softmax(logits) if score else None
            echo = self._echo(ids, scores) if params.echo else None
            scored = self._prompt_logprobs(ids, scores) if params.prompt_logprobs is not None else None
            for j in range(request.n):
                index = p * request.n + j
                self.opening.append(Started(index, size))
                if scored is not None:
                    self.opening.append(PromptLogprobs(index, scored))
                if echo is not None:
                    self.opening.append(replace(echo, index=index))
                choice = Choice(
                    index=index,
                    sampler=sampling.Sampler(
                        params,
                        random.Random(choice_seed(request.seed, index)),
                        tok.vocab_size,
                        prompt_ids=ids,
                        end_ids=ends | self.stop_ids,
                        kernel=self.kernel,
                    ),
                    assembler=TextAssembler(params.stop, params.keep_stop, armed=params.min_tokens == 0),
                    logits=logits[-1],
                    slots=slots,
                    slot=prompt_slot if j == 0 else slots.copy(slots, prompt_slot),
                    budget=budget,
                    thinking=request.think > 0 and request.endpoint == "chat" and not request.answers,
                )
                self.choices.append(choice)
                answer = request.answers[index] if request.answers else None
                if answer is not None:
                    self._recite(choice, answer)
                if choice.budget == 0:  # max_tokens 0: the prompt (scored, with echo) and nothing else
                    self.opening.extend(self._finish(choice, "length"))
                elif choice.recital is not None and choice.recital.done:  # an empty answer
                    self.opening.extend(self._finish(choice, choice.recital.reason))
        self.done = False
        self.steps = 0  # decoding steps taken
        self.opening.extend(self._usage_if_done())

    # ---- preparation ----------------------------------------------------------------------

    def _recite(self, choice: Choice, answer: Answer) -> None:
        """Prepare a decided answer: tokenized, and scored by the model when logprobs are
        asked (row j scores token j given the prompt and tokens before it)."""
        tok = self.runtime.tokenizer
        params = self.request.sampling
        choice.recital = recital = Recital(
            choice.index, answer, tok.encode, tok.token_bytes, choice.assembler, params.logprobs is not None
        )
        if params.logprobs is not None and recital.ids:
            import numpy as np

            assert choice.slot is not None  # scored while the request opens, before any step
            rows = choice.logits[None]
            if len(recital.ids) > 1:
                after = self.runtime.decoder.score(choice.slots, choice.slot, recital.ids[:-1])
                rows = np.concatenate((rows, after))
            choice.scores = self.kernel.log_softmax(rows)

    def _echo(self, ids: list[int], scores: Logits | None) -> TextDelta:
        """The prompt as completions' ``echo`` returns it, scored when logprobs are asked."""
        with_scores = scores is not None and self.request.sampling.logprobs is not None

        def make(token_id: int, position: int) -> Callable[[str], Token]:
            # Nothing precedes the first prompt token, so it has no logprob (OpenAI: null).
            previous = scores[position - 1] if with_scores and scores is not None and position > 0 else None
            return self._token_maker(token_id, previous)

        return prompts.echo(ids, self.runtime.tokenizer, make, with_scores)

    def _prompt_logprobs(self, ids: list[int], scores: Logits | None) -> tuple[PromptPosition | None, ...]:
        """vLLM's ``prompt_logprobs``: each prompt token's score, rank and top alternatives."""
        assert scores is not None
        tok = self.runtime.tokenizer
        k = self.request.sampling.prompt_logprobs or 0
        positions: list[PromptPosition | None] = [None] if ids else []
        for position in range(1, len(ids)):
            row, token_id = scores[position - 1], ids[position]
            own = Scored(token_id, tok.token_name(token_id), float(row[token_id]), self._sampling.rank(row, token_id))
            top = tuple(
                Scored(i, tok.token_name(i), lp, r)
                for r, (i, lp) in enumerate(self._sampling.top_candidates(row, k), start=1)
            )
            positions.append(PromptPosition(own, top))
        return tuple(positions)

    def _finish(self, choice: Choice, reason: FinishReason, matched: str | int | None = None) -> list[Event]:
        choice.done = True
        return [Finished(choice.index, reason, matched)]

    def _usage_if_done(self) -> list[Event]:
        """The closing Usage event, once every choice has finished."""
        if self.done or not all(c.done for c in self.choices):
            return []
        self.done = True
        made, thought = sum(c.produced for c in self.choices), sum(c.thought for c in self.choices)
        return [Usage(self.prompt_tokens, made, thought)]

    # ---- one step -------------------------------------------------------------------------

    def _token_maker(self, token_id: int, scores: Logits | None) -> Callable[[str], Token]:
        tok = self.runtime.tokenizer
        logprobs = self.request.sampling.logprobs
        if scores is None:
            return lambda text: Token(tok.token_name(token_id), tok.token_bytes(token_id), text, None)
        own = float(scores[token_id])
        top = tuple(
            Candidate(tok.token_name(i), tok.token_bytes(i), lp)
            for i, lp in self._sampling.top_candidates(scores, logprobs or 0)
        )
        return lambda text: Token(tok.token_name(token_id), tok.token_bytes(token_id), text, own, top)

    def advance_slice(self, contended: Callable[[], bool]) -> list[Event]:
        """Steps until done, or until the slice is used up (see the module docstring)."""
        start = time.perf_counter()
        events = self.advance()
        while not self.done:
            elapsed = time.perf_counter() - start
            if elapsed > SLICE_ALONE or (elapsed > SLICE_SHARED and contended()):
                break
            events.extend(self.advance())
        return events

    def advance(self) -> list[Event]:
        """Sample one token for every live choice; returns the events that produced."""
        self.steps += 1
        params = self.request.sampling
        events: list[Event] = []
        for choice in self.choices:
            if choice.done:
                continue
            if choice.recital is not None:
                events.extend(self._recital_step(choice, choice.recital))
                continue
            if choice.thinking:
                events.extend(self._think_step(choice))
                continue
            token_id = choice.sampler.pick(choice.logits)
            reason: FinishReason | None = None
            matched: str | int | None = None
            if token_id in self.end_ids or token_id in self.stop_ids:
                # Ending tokens are not text and are not counted (nor is a stop token id).
                released = choice.assembler.flush()
                reason, matched = "stop", (token_id if token_id in self.stop_ids else None)
            else:
                choice.sampler.observe(token_id)
                if choice.sampler.sampled == params.min_tokens:
                    choice.assembler.arm()
                scores = self.kernel.log_softmax(choice.logits) if params.logprobs is not None else None
                make = self._token_maker(token_id, scores)
                released = choice.assembler.push(self.runtime.tokenizer.token_bytes(token_id), make)
                if choice.assembler.stopped:
                    reason, matched = "stop", choice.assembler.matched
                elif choice.sampler.sampled >= choice.budget:
                    released += choice.assembler.flush()
                    reason = "length"
                else:
                    self.stepper.step(choice, token_id)
            if released:
                text = "".join(t.text for t in released)
                events.append(TextDelta(choice.index, text, tuple(released) if params.logprobs is not None else ()))
            if reason is not None:
                events.extend(self._finish(choice, reason, matched))
        events.extend(self._usage_if_done())
        return events

    def _think_step(self, choice: Choice) -> list[Event]:
        """One reasoning token, or the end of thinking: then the assistant's turn opens."""
        tok = self.runtime.tokenizer
        token_id = None if choice.thought >= self.request.think else choice.sampler.pick(choice.logits)
        if token_id is None or token_id in self.end_ids:
            choice.thinking = False
            tail = choice.reasoning_decoder.decode(b"", final=True)
            turn = [tok.im_end_id, *tok.encode("\n"), tok.im_start_id, *tok.encode("assistant\n")]
            self.stepper.feed(choice, turn)
            return [Reasoning(choice.index, tail)] if tail else []
        choice.sampler.observe(token_id)
        choice.thought += 1
        text = choice.reasoning_decoder.decode(tok.token_bytes(token_id))
        events: list[Event] = [Reasoning(choice.index, text)] if text else []
        if choice.sampler.sampled >= choice.budget:  # the budget ran out while thinking: no answer
            tail = choice.reasoning_decoder.decode(b"", final=True)
            events += [Reasoning(choice.index, tail)] if tail else []
            return events + self._finish(choice, "length")
        self.stepper.step(choice, token_id)
        return events

    def _recital_step(self, choice: Choice, recital: Recital) -> list[Event]:
        """Release the next token of a decided answer (no model compute: it was scored)."""
        scores = choice.scores[recital.produced] if choice.scores is not None else None
        events, choice.done = recital.step(choice.budget, lambda token_id: self._token_maker(token_id, scores))
        return list(events)
