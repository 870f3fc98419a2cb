"""No pattern or structure a user supplies holds the event loop (issue 34, item 2).

Each case against a real server process, with ``/health`` probed on its own connection
meanwhile (its p99 is a figure, never asserted) and a normal request answered afterwards:

* a replay server redacts every request body (and query) to match it: bodies and query names
  of runs that made the redaction patterns backtrack quadratically (``awsaws…``,
  ``secret-secret-…``, ``tokentoken…!``) are answered (the cassette miss) in linear time;
* a scripted rule's ``match`` that backtracks without bound is refused when defined (400 from
  the admin API naming ``match``, a one-line start-up error from ``--rules``), and one that
  slips past the probes is searched with a time bound;
* a fault spec of thousands of terms is a 400 naming the limit (header, admin rule) or a
  start-up error (``--faults``);
* a ``--rules`` YAML alias bomb is a one-line start-up error, not a 70 MB string.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from mockserver.cassettes.files import save
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse
from tests.reliability.conftest import Budget
from tests.reliability.harness import HealthProbe, child_server, error_envelope, proc_status
from tests.support.live import ROOT, free_port

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


def _scripted(tmp_path: Path, rules: str = "- text: Hello there.\n") -> list[str]:
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    return ["--backend", "script", "--rules", str(path)]


def _refused_at_start(args: list[str], env: dict[str, str] | None = None) -> str:
    """``serve`` with ``args`` (and ``env``) must stop at once, exit 2, with one line saying why."""
    command = [sys.executable, "-m", "mockserver", "serve", "--port", str(free_port()), *args]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return lines[0]


def test_hostile_bodies_are_redacted_in_linear_time_on_a_replay_server(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    directory = tmp_path / "cassettes"
    body = b'{"model":"m","messages":[{"role":"user","content":"recorded"}]}'
    answer = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}'
    request = RecordedRequest("POST", "https://api.openai.com/v1/chat/completions", (), body)
    response = RecordedResponse(200, (("content-type", "application/json"),), answer, "OK", None, 0.01)
    save(directory / "one.yaml", [Interaction(request, response)])
    size = 256 * 1024 if budget.name == "full" else 24 * 1024  # the 24 KB froze clients ~20 s
    runs = ["aws", "secret-", "secret", '"a-token":', "?token=", "%41"]
    with child_server(["--cassettes", str(directory), "--backend", "replay"], tmp_path / "server.log") as server:
        with HealthProbe(server.url) as probe, httpx.Client(timeout=120) as client:
            for i in probe.rounds(len(runs)):
                run = runs[i % len(runs)]
                text = (run * (size // len(run) + 1))[:size]
                got = client.post(
                    server.base_url + "/chat/completions",
                    json={**CHAT, "messages": [{"role": "user", "content": text}]},
                )
                assert got.status_code == 404 and got.headers["x-should-retry"] == "false", got.text[:300]
                assert error_envelope(got.json())["code"] == "cassette_miss"
                # A query parameter's name of credential words (~16 KB, within the head limit).
                name = ("token", "secret-", "http")[i % 3] * 2400
                query = f"?{name[:16_000]}!=1&u=https://a{'b' * 4000}://x:y@z"
                got = client.post(server.base_url + "/chat/completions" + query, json=CHAT)
                assert got.status_code == 404 and error_envelope(got.json())["code"] == "cassette_miss"
        probe.check()
        again = httpx.post(
            server.base_url + "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        assert again.status_code == 200 and again.headers["x-mockserver-source"] == "replay"
        figures[f"/health while {size >> 10} KB hostile bodies were matched"] = probe.figures()


def test_a_pathological_match_is_refused_and_a_slow_one_is_bounded(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    line = _refused_at_start(_scripted(tmp_path, "- {match: '(a+)+$', text: x}\n"))
    assert "invalid --rules" in line and "'match'" in line and "backtracks" in line
    with child_server([*_scripted(tmp_path), "--context-window", "200000"], tmp_path / "server.log") as server:
        admin = server.url + "/__mockserver/answers"
        for pattern in ("(a+)+$", "(x+x+)+y", "(a|aa)+$"):
            refused = httpx.post(admin, json={"match": pattern, "text": "never"}, timeout=30)
            assert refused.status_code == 400, refused.text
            error = error_envelope(refused.json())
            assert error["param"] == "match" and "backtracks" in error["message"]
        assert httpx.get(admin, timeout=30).json()["rules"][0]["text"] == "Hello there."  # nothing added
        # Passes the probes (the regex module's own guards), yet is slow on a crafted text: bounded.
        added = httpx.post(admin, json={"match": r"^(\w+\s?)*$", "text": "slow one"}, timeout=30)
        assert added.status_code == 200, added.text
        length = 50_000 if budget.name == "full" else 5_000
        prompt = {**CHAT, "messages": [{"role": "user", "content": "a" * length + "!"}]}
        with HealthProbe(server.url) as probe, httpx.Client(timeout=60) as client:
            for _ in probe.rounds(10, samples=30):
                got = client.post(server.base_url + "/chat/completions", json=prompt)
                assert got.status_code == 200 and got.json()["choices"][0]["message"]["content"] == "Hello there."
        probe.check()
        figures[f"/health while a bounded match searched {length} characters"] = probe.figures()


def test_fault_specs_are_bounded_in_terms(tmp_path: Path, budget: Budget, figures: dict[str, Any]) -> None:
    terms = 10_000 if budget.name == "full" else 2_000
    spec = "; ".join(f"latency.ttft={i % 50}" for i in range(terms))
    compact = ";".join(["http.500"] * terms)  # the same count of terms, within what one argument may be
    line = _refused_at_start([*_scripted(tmp_path), "--faults", compact])
    assert "invalid --faults" in line and "MAX_SPEC_CHARS" in line
    header = "; ".join(f"latency.ttft={i % 50}" for i in range(2_000))  # ~33 KB: under the head limit
    few = "; ".join(["http.500@p=0"] * 33)  # short, but one term too many
    with child_server(_scripted(tmp_path), tmp_path / "server.log") as server:
        too_big = httpx.post(server.base_url + "/chat/completions", json=CHAT, headers={"x-mockserver-fault": spec * 3})
        assert too_big.status_code == 431  # ~100 KB of header: the head's own limit answers
        with HealthProbe(server.url) as probe, httpx.Client(timeout=60) as client:
            for _ in probe.rounds(5, samples=30):
                for sent, limit in ((header, "MAX_SPEC_CHARS"), (few, "MAX_TERMS")):
                    got = client.post(
                        server.base_url + "/chat/completions", json=CHAT, headers={"x-mockserver-fault": sent}
                    )
                    assert got.status_code == 400, got.text[:300]
                    error = error_envelope(got.json())
                    assert error["param"] == "x-mockserver-fault" and limit in error["message"], error
                rule = client.post(server.url + "/__mockserver/faults", json={"faults": spec})
                assert rule.status_code == 400 and error_envelope(rule.json())["param"] == "faults"
                assert (
                    "MAX_SPEC_CHARS" in rule.json()["error"]["message"]
                    or "MAX_TERMS" in rule.json()["error"]["message"]
                )
        probe.check()
        assert httpx.get(server.url + "/__mockserver/rules", timeout=30).json()["rules"] == []
        served = httpx.post(
            server.base_url + "/chat/completions", json=CHAT, headers={"x-mockserver-fault": "latency.ttft=1"}
        )
        assert served.status_code == 200 and len(served.headers.get("x-mockserver-faults", "")) < 100
        figures[f"/health while {terms}-term fault specs were refused"] = probe.figures()


def test_a_yaml_alias_bomb_is_refused_at_start(tmp_path: Path) -> None:
    levels = ["- a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i, name in enumerate("bcdefgh"):
        previous = "abcdefgh"[i]
        levels.append(f"  {name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    levels.append("  text: *h")
    bomb = "\n".join(levels) + "\n"
    assert len(bomb) < 1000  # 9^8 ≈ 43 million strings once expanded
    line = _refused_at_start(_scripted(tmp_path, bomb))
    assert "alias" in line and "100,000" in line
    line = _refused_at_start(_scripted(tmp_path, "- &x [*x]\n"))
    assert "recursive alias" in line
    # Aliases that share a little are fine.
    with child_server(
        _scripted(tmp_path, "- {match: Hi, text: &t Shared.}\n- {match: Yo, text: *t}\n"), tmp_path / "s.log"
    ) as server:
        got = httpx.post(server.base_url + "/chat/completions", json=CHAT, timeout=30)
        assert got.json()["choices"][0]["message"]["content"] == "Shared."
        assert proc_status(server.pid, "VmRSS") < 1024 * 1024  # kB: nowhere near the bomb's size
