"""The markdown report: one function per section, each from the plain dicts the runs return."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["render"]


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{max(0.0, value) * 100:.0f}%"


def _verdict(value: float, target: float) -> str:
    return f"target ≤ {target:g}: **{'met' if value <= target else 'MISSED'}**"


def _other(result: dict[str, Any]) -> float:
    """CPU used by everything but the server and this load generator (noise)."""
    return float(result["system_cpu"] - result["server_cpu"] - result["client_cpu"])


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _error(section: dict[str, Any]) -> list[str]:
    return [f"Not measured: `{section['error']}`", ""] if "error" in section else []


def _environment(meta: dict[str, Any]) -> list[str]:
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    busy = meta.get("busy_before", 0.0)
    warning = (
        f"- **Warning: the machine was already {busy * 100:.0f}% busy (of one core) before the benchmark "
        "started; other processes compete with the servers, so treat the figures as pessimistic.**"
        if busy > 0.25
        else f"- machine idle before start ({busy * 100:.0f}% of one core busy)"
    )
    lines = [
        f"- date {meta['date']}, commit `{meta['commit']}`",
        f"- machine: {meta['cores']} cores ({meta['cpu']}); load average {meta['load_before']} before, "
        f"{meta.get('load_after', '?')} after",
        warning,
        f"- {versions}",
        f"- mockserver started as `{meta['server_command']}`; {meta['loop_note']}",
        f"- ceiling started as `{meta['ceiling_command']}`",
        f"- model assets: {meta['assets']}",
        f"- cells: {meta['warmup']} s warm-up, then {meta['duration']} s measured; load generator: {meta['client']}",
        "- **Client and servers share the same cores.** The load generator is a separate process, but "
        "every CPU-second it spends is taken from the server; the CPU columns show the split "
        "(100% = one core; *other* = everything else on the machine, i.e. noise).",
    ]
    return [*lines, ""]


def _throughput(section: dict[str, Any]) -> list[str]:
    out = ["## 1. Throughput and latency, side by side", "", *_error(section)]
    if "rows" not in section:
        return out
    out += [f"Chat request: {section['chat_note']}.", ""]
    ceilings = {r["concurrency"]: r["result"]["requests_per_s"] for r in section["rows"] if r["name"] == "ceiling"}
    rows = []
    for row in section["rows"]:
        res = row["result"]
        ceiling = ceilings.get(row["concurrency"])
        ratio = res["requests_per_s"] / ceiling if ceiling else None
        other = _other(res)
        rows.append(
            [
                row["label"],
                str(row["concurrency"]),
                _num(res["requests_per_s"]),
                _num(ratio, 3),
                _num(res["latency_ms"]["p50"], 2),
                _num(res["latency_ms"]["p99"], 2),
                _num(res["first_chunk_ms"]["p50"], 2) if row["name"] == "stream" else "",
                _num(res["completion_tokens_mean"]),
                _pct(res["server_cpu"]),
                _pct(res["client_cpu"]),
                _pct(other),
                str(res["errors"]),
            ]
        )
    header = [
        "endpoint",
        "conc.",
        "req/s",
        "× ceiling",
        "p50 ms",
        "p99 ms",
        "1st frame p50 ms",
        "tokens/req",
        "server CPU",
        "client CPU",
        "other CPU",
        "errors",
    ]
    out += _table(header, rows)
    ceiling_rows = [r for r in section["rows"] if r["name"] == "ceiling"]
    if ceiling_rows:
        cpu = ", ".join(f"{_pct(r['result']['server_cpu'])} at {r['concurrency']}" for r in ceiling_rows)
        out += [
            "",
            f"Ceiling server CPU: {cpu}. One uvicorn worker is one event loop, so near 100% the ceiling is "
            "bound by the server, not by the load generator.",
        ]
    check = section.get("client_check")
    if check:
        out += ["", "Client check (the ceiling app, same cell settings, half the duration):", ""]
        out += _table(
            ["client", "conc.", "req/s", "p50 ms", "client CPU", "server CPU", "other CPU"],
            [
                [
                    c["client"],
                    str(c["concurrency"]),
                    _num(c["result"]["requests_per_s"]),
                    _num(c["result"]["latency_ms"]["p50"], 2),
                    _pct(c["result"]["client_cpu"]),
                    _pct(c["result"]["server_cpu"]),
                    _pct(_other(c["result"])),
                ]
                for c in check
            ],
        )
    return [*out, ""]


def _prompt50(section: dict[str, Any], model: dict[str, Any]) -> list[str]:
    out = ["## 2. 16-token chat completion after a ~50-token prompt, concurrency 1", "", *_error(section)]
    if "result" not in section:
        return out
    res = section["result"]
    lat = res["latency_ms"]
    out += [
        f"Prompt: {section['note']}; measured prompt_tokens {_num(res['prompt_tokens_mean'])}, "
        f"completion_tokens {_num(res['completion_tokens_mean'])} (mean over {lat['n']} requests).",
        "",
        f"- p50 **{_num(lat['p50'], 2)} ms** ({_verdict(lat['p50'], 15)}); p90 {_num(lat['p90'], 2)} ms, "
        f"p99 {_num(lat['p99'], 2)} ms; {_num(res['requests_per_s'])} req/s; server CPU {_pct(res['server_cpu'])}, "
        f"other CPU {_pct(_other(res))}",
    ]
    floor = model.get("ms", {}).get("generate_16_after_50")
    if floor:
        extra = lat["p50"] - floor["p50"]
        why = (
            "(HTTP, JSON, 17 hand-offs to the model thread, and the event loop and load generator "
            "sharing the cores with the model)"
            if extra >= 0
            else "— negative: the two runs were disturbed differently (see the other-CPU figures)"
        )
        out.append(
            f"- the same work without HTTP (section 6, prefill 50 + 16 × (sample + step)): p50 "
            f"{_num(floor['p50'], 2)} ms, so serving adds {_num(extra, 2)} ms {why}"
        )
    return [*out, ""]


def _health(section: dict[str, Any]) -> list[str]:
    out = ["## 3. `/health` while 32 chat streams generate", "", *_error(section)]
    if "probe" not in section:
        return out
    probe, streams = section["probe"], section["streams"]
    lat = probe["latency_ms"]
    out += [
        f"32 concurrent streams ({section['note']}, max_tokens 200, each restarted when done), "
        f"`GET /health` probed at 50 Hz from a separate process on its own keep-alive connection.",
        "",
        f"- probe p50 {_num(lat['p50'], 2)} ms, p99 **{_num(lat['p99'], 2)} ms** ({_verdict(lat['p99'], 20)}), "
        f"max {_num(lat['max'], 2)} ms, {lat['n']} probes, {probe['errors']} errors",
        f"- streams: {_num(streams['chunks_per_s'], 0)} SSE frames/s in total (≈ tokens/s: one frame per "
        f"token, plus 2–3 per stream); {streams['completed']} streams finished in the window "
        f"({_num(streams['completion_tokens_mean'])} tokens each, p50 {_num(streams['latency_ms']['p50'], 0)} ms, "
        f"first frame p50 {_num(streams['first_chunk_ms']['p50'], 1)} ms); server CPU {_pct(streams['server_cpu'])}, "
        f"other CPU {_pct(_other(streams) - probe['client_cpu'])}",
        "",
    ]
    return out


def _startup(section: dict[str, Any], imports: dict[str, Any]) -> list[str]:
    out = ["## 4. `mockserver serve` to the first 200 on `/health`", "", *_error(section)]
    if "health_s" in section:
        runs = ", ".join(f"{s:.2f}" for s in section["health_all_s"])
        out += [
            f"- median of {section['runs']} runs: **{section['health_s']:.2f} s** "
            f"({_verdict(section['health_s'], 3)}); runs {runs} s",
            f"- spawn to the first chat completion (the model loads in the background after the "
            f"server listens): median {section['first_completion_s']:.2f} s",
        ]
    out += ["", "## 5. Import time", "", *_error(imports)]
    if "net_ms" in imports:
        out += [
            f"Median of {imports['runs']} fresh interpreters minus `python -c pass` "
            f"({imports['baseline_ms']:.0f} ms); torch check with `python -X importtime`.",
            "",
        ]
        rows = [
            [f"`{stmt}`", f"{ms:.0f}", "yes" if imports["torch"][stmt] else "no"]
            for stmt, ms in imports["net_ms"].items()
        ]
        out += _table(["statement", "net ms", "imports torch"], rows)
        first = next(iter(imports["net_ms"]))
        out += ["", f"`{first}`: {_verdict(imports['net_ms'][first], 300)}"]
    return [*out, ""]


def _model(section: dict[str, Any]) -> list[str]:
    out = ["## 6. Model only (no HTTP), one torch thread", "", *_error(section)]
    if "ms" not in section:
        return out
    cfg = section["config"]
    out += [
        f"Assets `{section['assets']}`: {section['parameters']:,} parameters ({cfg}); "
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
            _num(s["p50"], 3),
            _num(s["p90"], 3),
            _num(s["p99"], 3),
            str(s["n"]),
        ]
        for name, s in section["ms"].items()
    ]
    return [*out, *_table(["operation", "p50 ms", "p90 ms", "p99 ms", "n"], rows), ""]


def render(results: dict[str, Any]) -> str:
    """The whole report as markdown."""
    lines = ["# mockserver serving benchmark", "", *_environment(results["meta"])]
    lines += _throughput(results.get("throughput", {"error": "not run"}))
    lines += _prompt50(results.get("prompt50", {"error": "not run"}), results.get("model", {}))
    lines += _health(results.get("health", {"error": "not run"}))
    lines += _startup(results.get("startup", {"error": "not run"}), results.get("imports", {"error": "not run"}))
    lines += _model(results.get("model", {"error": "not run"}))
    return "\n".join(lines).rstrip() + "\n"
