"""Model-only figures, run as its own process: ``python -m bench.modelbench [--assets DIR]``.

Times the reference model without any HTTP: one decoding step, a 50-token prefill, the
sampler, and a whole 16-token generation (prefill + 16 × (pick + step)), which is the floor
under the served 16-token figure, with the kernel the server would choose (``--kernel``).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.stats import summarize

__all__ = ["measure"]


def _time(fn: Callable[[], object], reps: int, budget: float) -> list[float]:
    """Durations of up to ``reps`` calls, stopping early after ``budget`` seconds."""
    for _ in range(min(20, reps)):  # warm-up: allocator, caches, lazy init
        fn()
    samples: list[float] = []
    deadline = time.perf_counter() + budget
    while len(samples) < reps and time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def measure(assets: Path, reps: int, budget: float, kernel: str = "auto") -> dict[str, Any]:
    from safetensors.numpy import load_file

    from mockserver.backends.reference import sampling
    from mockserver.gpt import kernels
    from mockserver.gpt.checkpoint import read_config
    from mockserver.gpt.decoder import Decoder, Slots

    start = time.perf_counter()
    decoder = Decoder.read(assets, kernels.load(kernel))  # as the server reads it: NumPy, no torch
    load_s = time.perf_counter() - start
    cfg = read_config(assets)
    parameters = sum(array.size for array in load_file(str(assets / "model.safetensors")).values())
    picker = decoder.kernel  # sampling.pick takes the kernel whose pick (and exp) it runs
    # Ordinary (non-special) token ids; their values do not change the cost.
    prompt = [3 + (i * 37) % (cfg.vocab_size - 3) for i in range(50)]
    logits, at_50 = decoder.prefill(prompt)
    _, full = decoder.prefill([3 + (i * 53) % (cfg.vocab_size - 3) for i in range(cfg.window - 1)])
    rng = random.Random(0)
    row = logits[-1]

    def step(slots: Slots) -> None:  # one token, then back: every call steps the same length
        decoder.step(slots, [(0, prompt[-1])])
        slots.end[0] -= 1
        slots.position[0] -= 1
        slots.start[0] = max(0, slots.end[0] - slots.keep)

    def generate_16() -> None:
        scores, state = decoder.prefill(prompt)
        vector = scores[-1]
        for _ in range(16):
            token = sampling.pick(vector, 1.0, 0, 1.0, rng, picker)
            vector = decoder.step(state, [(0, token)])[0]

    figures = {
        "prefill_50": _time(lambda: decoder.prefill(prompt), reps, budget),
        "step_at_50": _time(lambda: step(at_50), reps, budget),
        f"step_at_{cfg.window - 1}": _time(lambda: step(full), reps, budget),
        "pick_greedy": _time(lambda: sampling.pick(row, 0.0, 0, 1.0, rng, picker), reps, budget),
        "pick_t1": _time(lambda: sampling.pick(row, 1.0, 0, 1.0, rng, picker), reps, budget),
        "pick_t1_top_p": _time(lambda: sampling.pick(row, 1.0, 0, 0.9, rng, picker), reps, budget),
        "generate_16_after_50": _time(generate_16, max(1, reps // 10), budget),
    }
    return {
        "assets": str(assets),
        "config": {
            "vocab_size": cfg.vocab_size,
            "n_layer": cfg.n_layer,
            "n_head": cfg.n_head,
            "n_embd": cfg.n_embd,
            "window": cfg.window,
        },
        "parameters": parameters,
        "kernel": decoder.kernel.name,
        "load_s": load_s,
        "ms": {name: summarize(samples) for name, samples in figures.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--assets", type=Path, default=None, help="weights directory (default: the shipped ones)")
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per figure, at most")
    parser.add_argument("--kernel", default="auto", help="which kernel computes (mockserver serve --kernel)")
    args = parser.parse_args()
    if args.assets is None:
        from mockserver.gpt.tokenizer import ASSETS

        args.assets = ASSETS
    print(json.dumps(measure(args.assets, args.reps, args.budget, args.kernel)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
