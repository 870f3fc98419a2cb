"""Train the reference model from scratch: ``python -m training.train``.

Steps: generate the corpus (:mod:`.corpus`), train a byte-level BPE on it, tokenize it
(plain documents + ``<|endoftext|>``; dialogues through :meth:`Tokenizer.render_chat`, then
``<|endoftext|>``), train :class:`GPT` with AdamW and a warmup + cosine schedule, write
``tokenizer.json``, ``model.safetensors`` and ``config.json`` into the assets directory,
and check the result by sampling chats. About ten minutes on two CPU cores.

Deterministic: the corpus and the tokenizer are byte-identical from run to run, and the
weights are too as far as single-process CPU torch allows (fixed thread count,
deterministic algorithms, one explicit generator for batches).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from mockserver.gpt import kernels
from mockserver.gpt.decoder import Decoder
from mockserver.gpt.model import GPT, GPTConfig, save_model
from mockserver.gpt.tokenizer import ASSETS, SPECIAL_TOKENS, Tokenizer

from .corpus import Chat, CorpusWriter, Document, training_text

SEED = 1234
DOCS = 90_000  # ≈ 6M tokens, more than training reads: windows are (nearly) all fresh text
VAL_DOCS = 1_000
TOKENIZER_DOCS = 40_000  # a subset is plenty to learn 2,048 merges
STEPS = 2_400
BATCH = 8  # windows of cfg.window + 1 tokens; 8 × 256 was the fastest per token on 2 cores
PEAK_LR, MIN_LR, WARMUP = 3e-3, 3e-4, 100
WEIGHT_DECAY = 0.1

# Varied prompts for the end-of-training check, most of them unlike the corpus templates.
EVAL_PROMPTS = (
    "Hello!", "What is the capital of France?", "Tell me about Marie Curie.", "Write a haiku about the sea.",
    "How do I bake bread?", "What is 7 + 5?", "Give me three tips for sleeping better.",
    "Explain quantum computing in simple terms.", "What's the weather like in Berlin?", "Who are you?",
    "Translate 'good morning' to Spanish.", "Name 3 colors.", "Count to 5.",
    "Summarize this: The meeting was moved to Friday. Everyone agreed.", "Write a sentence about a cat.",
    "What does Acme Corp do?", "Can you recommend a book?", "Why is the sky blue?", "Say something in French.",
    "What is the capital of Japan?", "Tell me a joke.", "What is a dog?", "Describe a house.",
    "Is it cold in Oslo today?", "Give me an emoji for happiness.", "How are you today?", "What time is it?",
    "Write a short poem about rain.", "List some fruits.", "What is machine learning?",
    "Repeat after me: the quick brown fox.", "Who is José García?", "Where does Anna Müller live?",
    "Capital of Brazil?", "Thanks!", "Please write a limerick.", "What should I cook for dinner?",
    "How many legs does a spider have?", "Give me a random fact.", "What is your favorite color?",
    "Help me write an email to my boss.", "What is 12 * 3?", "Explain photosynthesis.", "Tell me about Paris.",
    "What are the benefits of exercise?", "Suggest a name for my dog.", "What is the meaning of life?",
    "Describe the ocean.", "Write a tweet about coffee ☕.", "Good morning!",
)  # fmt: skip
COMPLETION_PROMPTS = (
    "Once upon a time", "The history of the city", "Dear Maria,", "Shopping list:", "Scientists have found",
    "My favourite food is", "Paris is", "The company announced", "In the morning", "Many people believe",
)  # fmt: skip


def train_tokenizer(docs: list[Document], vocab_size: int) -> HFTokenizer:
    """Byte-level BPE with the special tokens at ids 0, 1, 2 and all 256 bytes in the vocab."""
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator((training_text(d) for d in docs), trainer=trainer)
    return hf


def encode_corpus(docs: list[Document], tok: Tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """One token stream (int64) and the offset where each document starts in it."""
    stream: list[int] = []
    starts: list[int] = []
    for doc in docs:
        starts.append(len(stream))
        if isinstance(doc, Chat):
            stream += tok.render_chat(doc.messages, generation_prompt=False)
        else:
            stream += tok.encode(doc)
        stream.append(tok.eos_id)
    return torch.tensor(stream, dtype=torch.long), torch.tensor(starts, dtype=torch.long)


def batches(tokens: torch.Tensor, starts: torch.Tensor, span: int, gen: torch.Generator) -> torch.Tensor:
    """[BATCH, span] windows that each begin at a document start.

    Starting at a document boundary matches serving, where a prompt sits at position 0 with
    nothing before it; the rest of the window packs the following documents.
    """
    usable = starts[starts + span <= tokens.numel()]
    picks = usable[torch.randint(usable.numel(), (BATCH,), generator=gen)]
    return tokens[picks.unsqueeze(1) + torch.arange(span)]


def lr_at(step: int, steps: int) -> float:
    """Linear warmup, then cosine decay from PEAK_LR to MIN_LR."""
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, steps - WARMUP)
    return MIN_LR + 0.5 * (PEAK_LR - MIN_LR) * (1 + math.cos(math.pi * progress))


def loss_of(model: GPT, batch: torch.Tensor) -> torch.Tensor:
    logits = model(batch[:, :-1])  # [B, T, V]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))


def train_model(model: GPT, tokens: torch.Tensor, starts: torch.Tensor, steps: int, gen: torch.Generator) -> float:
    """AdamW over ``steps`` batches; returns the mean loss of the last 100 steps."""
    span = model.cfg.window + 1
    matrices = [p for n, p in model.named_parameters() if p.dim() == 2]
    norms = [p for n, p in model.named_parameters() if p.dim() < 2]  # norm gains: no decay
    groups = [{"params": matrices, "weight_decay": WEIGHT_DECAY}, {"params": norms, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=PEAK_LR, betas=(0.9, 0.95))
    model.train()
    recent: list[float] = []
    started = time.monotonic()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps)
        loss = loss_of(model, batches(tokens, starts, span, gen))
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)  # typed, unlike Tensor.backward
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        recent = [*recent, loss.item()][-100:]
        if step % 100 == 0 or step == steps - 1:
            elapsed = time.monotonic() - started
            print(
                f"step {step:5d}  loss {statistics.fmean(recent):.3f}  lr {lr_at(step, steps):.2e}  {elapsed:.0f}s",
                flush=True,
            )
    return statistics.fmean(recent)


@torch.no_grad()
def validation_loss(model: GPT, tokens: torch.Tensor, starts: torch.Tensor, gen: torch.Generator) -> float:
    model.eval()
    losses = [loss_of(model, batches(tokens, starts, model.cfg.window + 1, gen)).item() for _ in range(10)]
    return statistics.fmean(losses)


def sample(
    decoder: Decoder,
    prompt: list[int],
    stops: set[int],
    limit: int,
    gen: torch.Generator,
    temperature: float,
    top_p: float,
) -> list[int]:
    """Tokens after ``prompt`` until a stop token (included) or ``limit`` tokens, decoded as the
    server decodes (the model's kernel), sampled here with torch."""
    logits, slots = decoder.prefill(prompt)
    row = torch.from_numpy(logits[-1])
    out: list[int] = []
    while len(out) < limit:
        probs, order = torch.softmax(row / temperature, -1).sort(descending=True)
        probs[(probs.cumsum(0) - probs) >= top_p] = 0.0  # nucleus: keep the head reaching top_p
        token = int(order[torch.multinomial(probs, 1, generator=gen)])
        out.append(token)
        if token in stops:
            break
        row = torch.from_numpy(decoder.step(slots, [(0, token)])[0])
    return out


def evaluate(decoder: Decoder, tok: Tokenizer, gen: torch.Generator) -> None:
    """Sample every eval prompt at temperature 1.0, top-p 0.95; print lengths and samples."""
    lengths, ended = [], 0
    for i, prompt in enumerate(EVAL_PROMPTS):
        messages = ([("system", "You are a helpful assistant.")] if i % 3 == 0 else []) + [("user", prompt)]
        reply = sample(decoder, tok.render_chat(messages), {tok.im_end_id}, 200, gen, 1.0, 0.95)
        ended += reply[-1] == tok.im_end_id
        lengths.append(len(reply))
        if i < 3:
            print(f"  chat {prompt!r} -> {tok.decode(reply)!r} ({len(reply)} tokens)")
    print(f"chat: median reply {statistics.median(lengths)} tokens, {ended}/{len(lengths)} end with <|im_end|>")
    lengths, ended = [], 0
    for i, prompt in enumerate(COMPLETION_PROMPTS):
        out = sample(decoder, tok.encode(prompt), {tok.eos_id}, 300, gen, 0.8, 1.0)
        ended += out[-1] == tok.eos_id
        lengths.append(len(out))
        if i < 2:
            print(f"  completion {prompt!r} -> {tok.decode(out)!r} ({len(out)} tokens)")
    print(f"completions: median {statistics.median(lengths)} tokens, {ended}/{len(lengths)} end with <|endoftext|>")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ASSETS, help="where to write the assets")
    parser.add_argument("--docs", type=int, default=DOCS)
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args()
    started = time.monotonic()
    torch.set_num_threads(2)  # fixed, since reduction order (and so the weights) can depend on it
    torch.use_deterministic_algorithms(True)
    # GPT.__init__ draws its initial weights with nn.init from torch's default generator, so
    # this one script (never library code) seeds it; batches use their own generator below.
    torch.manual_seed(SEED)

    docs = list(CorpusWriter(SEED).documents(args.docs))
    val_docs = list(CorpusWriter(SEED + 1).documents(VAL_DOCS))
    print(f"corpus: {len(docs)} documents in {time.monotonic() - started:.0f}s", flush=True)

    cfg = GPTConfig()
    args.out.mkdir(parents=True, exist_ok=True)
    train_tokenizer(docs[:TOKENIZER_DOCS], cfg.vocab_size).save(str(args.out / "tokenizer.json"))
    tok = Tokenizer.from_file(args.out / "tokenizer.json")
    assert tok.vocab_size == cfg.vocab_size, tok.vocab_size
    assert (tok.eos_id, tok.im_start_id, tok.im_end_id) == (0, 1, 2)
    tokens, starts = encode_corpus(docs, tok)
    val_tokens, val_starts = encode_corpus(val_docs, tok)
    print(f"tokens: {tokens.numel():,} train, {val_tokens.numel():,} validation ({time.monotonic() - started:.0f}s)")

    model = GPT(cfg)
    gen = torch.Generator().manual_seed(SEED)
    final = train_model(model, tokens, starts, args.steps, gen)
    val = validation_loss(model, val_tokens, val_starts, gen)
    save_model(model, args.out)
    print(f"final train loss {final:.3f}, validation loss {val:.3f}; wall time {time.monotonic() - started:.0f}s")

    # The files as the server reads them (NumPy, the kernels: no torch), not the module in memory.
    evaluate(Decoder.read(args.out, kernels.load()), tok, torch.Generator().manual_seed(SEED))
    print(f"total wall time incl. check: {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
