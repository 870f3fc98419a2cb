"""The report's later sections (reference model, start-up, cassette lookup, memory) and the
small formatting helpers every section shares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "error",
    "lookup_section",
    "memory_section",
    "model_section",
    "num",
    "other",
    "pct",
    "startup_section",
    "table",
    "tokens_per_s",
    "under_load",
]


def num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{max(0.0, value) * 100:.0f}%"


def verdict(value: float, target: float) -> str:
    return f"target ≤ {target:g}: **{'met' if value <= target else 'MISSED'}**"


def other(result: dict[str, Any]) -> float:
    """CPU used by everything but the server and this load generator (noise)."""
    return float(result["system_cpu"] - result["server_cpu"] - result["client_cpu"])


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def error(section: dict[str, Any]) -> list[str]:
    return [f"Not measured: `{section['error']}`", ""] if "error" in section else []


def tokens_per_s(result: dict[str, Any]) -> float | None:
    """Generated tokens per second over all streams: req/s (Little's law) × tokens per request."""
    tokens = result.get("completion_tokens_mean")
    return float(result["requests_per_s"] * tokens) if tokens else None


def _prompt50(section: dict[str, Any], model: dict[str, Any]) -> list[str]:
    out = ["### 16-token chat completion after a ~50-token prompt, concurrency 1", "", *error(section)]
    if "result" not in section:
        return out
    res = section["result"]
    lat = res["latency_ms"]
    out += [
        f"Prompt: {section['note']}; measured prompt_tokens {num(res['prompt_tokens_mean'])}, "
        f"completion_tokens {num(res['completion_tokens_mean'])} (mean over {lat['n']} requests).",
        "",
        f"- p50 **{num(lat['p50'], 2)} ms** ({verdict(lat['p50'], 15)}); p90 {num(lat['p90'], 2)} ms, "
        f"p99 {num(lat['p99'], 2)} ms; {num(res['requests_per_s'])} req/s; server CPU {pct(res['server_cpu'])}, "
        f"other CPU {pct(other(res))}",
    ]
    floor = model.get("ms", {}).get("generate_16_after_50")
    if floor:
        extra = lat["p50"] - floor["p50"]
        why = (
            "(HTTP, JSON, hand-offs to the model thread, and the event loop and load generator "
            "sharing the cores with the model)"
            if extra >= 0
            else "— negative: the two runs were disturbed differently (see the other-CPU figures)"
        )
        out.append(
            f"- the same work without HTTP (model only, below: prefill 50 + 16 × (sample + step)): p50 "
            f"{num(floor['p50'], 2)} ms, so serving adds {num(extra, 2)} ms {why}"
        )
    return [*out, ""]


def _streams(section: dict[str, Any]) -> list[str]:
    out = ["### Streams: tokens per second and time to first token", "", *error(section)]
    if "one" not in section:
        return out
    n = section["streams"]
    out += [
        f"Streamed chat, prompt {section['prompt']!r}, `max_tokens` {section['tokens']} with `ignore_eos` "
        f"(every stream makes {section['tokens']} tokens), greedy; closed loop: each stream restarts when done. "
        f"With {n} streams, `GET /health` is probed at 50 Hz from another process meanwhile.",
        "",
    ]
    rows = []
    for label, res in (("1 stream", section["one"]), (f"{n} streams", section["many"])):
        total = tokens_per_s(res)
        streams = 1 if res is section["one"] else n
        rows.append(
            [
                label,
                num(total, 0),
                num(total / streams if total else None, 1),
                num(res["first_token_ms"]["p50"], 1),
                num(res["first_token_ms"]["p99"], 1),
                num(res["first_chunk_ms"]["p50"], 1),
                num(res["latency_ms"]["p50"], 0),
                num(res["completion_tokens_mean"]),
                pct(res["server_cpu"]),
                str(res["errors"]),
            ]
        )
    header = ["streams", "tokens/s total", "tokens/s per stream", "TTFT p50 ms", "TTFT p99 ms"]
    out += table([*header, "1st frame p50 ms", "whole stream p50 ms", "tokens", "server CPU", "errors"], rows)
    probe = section["probe"]
    lat = probe["latency_ms"]
    out += [
        "",
        f"`/health` while {n} streams generate: p50 {num(lat['p50'], 2)} ms, p99 **{num(lat['p99'], 2)} ms** "
        f"({verdict(lat['p99'], 20)}), max {num(lat['max'], 2)} ms, {lat['n']} probes, {probe['errors']} errors.",
        "",
    ]
    return out


def _model_only(section: dict[str, Any]) -> list[str]:
    out = [f"### Model only (no HTTP), the {section.get('kernel', 'default')} kernel", "", *error(section)]
    if "ms" not in section:
        return out
    cfg = section["config"]
    out += [
        f"{section['parameters']:,} parameters ({', '.join(f'{k} {v}' for k, v in cfg.items())}); "
        f"load {section['load_s'] * 1000:.0f} ms.",
        "",
    ]
    labels = {
        "prefill_50": "prefill, 50 tokens",
        "step_at_50": "one decoding step (after 50 tokens)",
        "pick_greedy": "sampler: greedy",
        "pick_t1": "sampler: temperature 1",
        "pick_t1_top_p": "sampler: temperature 1, top_p 0.9",
        "generate_16_after_50": "prefill 50 + 16 × (sample + step)",
    }
    rows = [
        [
            labels.get(name, name.replace("step_at_", "one decoding step (after ") + " tokens)"),
            num(s["p50"], 3),
            num(s["p90"], 3),
            num(s["p99"], 3),
            str(s["n"]),
        ]
        for name, s in section["ms"].items()
    ]
    return [*out, *table(["operation", "p50 ms", "p90 ms", "p99 ms", "n"], rows), ""]


def model_section(results: dict[str, Any]) -> list[str]:
    model = results.get("model", {"error": "not run"})
    out = ["## 2. The reference model", ""]
    out += _prompt50(results.get("prompt50", {"error": "not run"}), model)
    out += _streams(results.get("streams", {"error": "not run"}))
    return [*out, *_model_only(model)]


def startup_section(section: dict[str, Any], imports: dict[str, Any]) -> list[str]:
    out = ["## 3. Start-up", "", *error(section)]
    if "health_s" in section:
        runs = ", ".join(f"{s:.2f}" for s in section["health_all_s"])
        out += [
            f"- `mockserver serve` to the first 200 on `/health`, median of {section['runs']} spawns: "
            f"**{section['health_s']:.2f} s** ({verdict(section['health_s'], 3)}); runs {runs} s",
            f"- spawn to the first chat completion (the model loads in the background once the server "
            f"listens): median {section['first_completion_s']:.2f} s",
            "",
        ]
    out += error(imports)
    if "net_ms" in imports:
        out += [
            f"Import time: median of {imports['runs']} fresh interpreters minus `python -c pass` "
            f"({imports['baseline_ms']:.0f} ms); torch check with `python -X importtime`.",
            "",
        ]
        rows = [
            [f"`{stmt}`", f"{max(ms, 0.0):.0f}", "yes" if imports["torch"][stmt] else "no"]
            for stmt, ms in imports["net_ms"].items()
        ]
        out += table(["statement", "net ms", "imports torch"], rows)
        first = next(iter(imports["net_ms"]))
        out += ["", f"`{first}`: {verdict(imports['net_ms'][first], 300)}"]
    return [*out, ""]


def lookup_section(section: dict[str, Any]) -> list[str]:
    out = ["## 4. Cassette lookup", "", *error(section)]
    if "sizes" not in section:
        return out
    out += [
        f"One lookup = redact, parse, canonical JSON, SHA-256, dict probe, for a {section['body_bytes']}-byte "
        f"chat body; median of {section['rounds']} rounds of 1,000 lookups (no HTTP).",
        "",
    ]
    base = section["sizes"][0]["lookup_us"]
    rows = [
        [f"{s['interactions']:,}", num(s["build_ms"], 1), num(s["lookup_us"], 1), f"{s['lookup_us'] / base:.2f}×"]
        for s in section["sizes"]
    ]
    out += table(["interactions", "index build ms", "lookup µs", "vs the smallest"], rows)
    io = section.get("io")
    if io:
        out += [
            "",
            f"A {io['interactions']:,}-interaction cassette file ({io['bytes'] / 1e6:.1f} MB of YAML): "
            f"save {io['save_s']:.2f} s, load {io['load_s']:.2f} s.",
        ]
    return [*out, ""]


def under_load(results: dict[str, Any]) -> dict[str, float]:
    """Each server's largest RSS sampled at the end of a measured window (load still on)."""
    found: dict[str, float] = {}
    for row in results.get("throughput", {}).get("rows", []):
        rss = row["result"].get("server_rss_mb") or 0.0
        found[row["backend"]] = max(found.get(row["backend"], 0.0), rss)
    streams = results.get("streams", {})
    for key in ("one", "many"):
        if key in streams:
            rss = streams[key].get("server_rss_mb") or 0.0
            found["reference"] = max(found.get("reference", 0.0), rss)
    return found


def memory_section(results: dict[str, Any]) -> list[str]:
    out = ["## 5. Memory", ""]
    mem = results.get("memory", {"error": "not run"})
    out += error(mem)
    if "journal" in mem:
        journal, store = mem["journal"], mem["store"]
        plain, background = store["plain"], store["background_stream"]
        per_entry = journal["bytes_per_entry"]
        out += [
            f"- journal: **{per_entry / 1024:.2f} KiB per entry** for a {journal['body_bytes']}-byte chat body "
            f"({journal['entries']:,} entries; a full default journal of 10,000 ≈ "
            f"{per_entry * 10_000 / 2**20:.0f} MiB)",
            f"- Responses store, per stored response ({store['stored']:,} copies of a real 16-token answer "
            f"with logprobs): plain **{plain['bytes_per_response'] / 1024:.1f} KiB** ({plain['json_bytes']:,} bytes "
            f"as JSON); background stream with its {background['events']} events kept for resuming "
            f"**{background['bytes_per_response'] / 1024:.1f} KiB** ({background['events_json_bytes']:,} bytes of "
            f"events as JSON); a full default store of 10,000 ≈ {plain['bytes_per_response'] * 10_000 / 2**20:.0f} "
            f"MiB plain, {background['bytes_per_response'] * 10_000 / 2**20:.0f} MiB background streams",
            "",
        ]
    rss = results.get("rss", {})
    if "rest" in rss:
        loaded = under_load(results)
        rows = [
            [
                name,
                num(rest.get("rss"), 0),
                num(loaded.get(name), 0),
                num(rss.get("after", {}).get(name, {}).get("hwm"), 0),
                num(rss.get("after", {}).get(name, {}).get("rss"), 0),
            ]
            for name, rest in rss["rest"].items()
        ]
        out += [
            "Resident memory (MiB) of each server process: at rest (after start-up, the model loaded and the "
            "set-up requests answered), under load (the largest sample at the end of a measured window), its "
            "peak (`VmHWM`) and after all the load sections.",
            "",
            *table(["server", "at rest", "under load", "peak", "after"], rows),
            "",
        ]
    return out
