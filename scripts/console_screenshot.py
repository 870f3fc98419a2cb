"""Make docs/console.png: the console over a real run, as Chromium draws it.

    python scripts/console_screenshot.py [--out docs/console.png]

Starts ``mockserver serve`` (a child process on a free port), plays a small
session against it with the official ``openai`` SDK — an agent's tool call and its answer
(scripted), a model-written stream with a delay between tokens, one cut short by a stream
fault, one answered 429 — then opens the console in Debian's headless Chromium
(:mod:`tests.support.chromium`: ``make test`` installs it), filters by the session, opens the
streamed request and saves the window. Nothing of it is drawn by hand: rerun it after a change
to the page and commit the image.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402

from tests.support import chromium  # noqa: E402

SESSION = "checkout-agent"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look an order up by its id.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def play(url: str) -> None:
    """The run the picture shows."""
    httpx.post(
        url + "/__mockserver/answers",
        json=[
            {
                "match": "where is my order",
                "nth": 1,
                "tool_calls": [{"name": "get_order", "arguments": {"order_id": "A-1042"}}],
            },
            {
                "match": "where is my order",
                "nth": 2,
                "text": "Order A-1042 left the warehouse today; it arrives Thursday.",
            },
        ],
        headers={"x-mockserver-session": SESSION},
    ).raise_for_status()
    client = openai.OpenAI(
        base_url=url + "/v1", api_key="sk-demo", max_retries=0, default_headers={"x-mockserver-session": SESSION}
    )
    messages: list[dict[str, object]] = [{"role": "user", "content": "Hi, where is my order A-1042?"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"status": "shipped", "eta": "Thursday"})},
    ]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    slow = client.with_options(
        default_headers={"x-mockserver-session": SESSION, "x-mockserver-fault": "latency.ttft=120; latency.itl=25"}
    )
    for _ in slow.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Write a haiku about parcels."}],
        max_tokens=18,
        stream=True,
        seed=7,
    ):
        pass
    cut = client.with_options(
        default_headers={"x-mockserver-session": SESSION, "x-mockserver-fault": "stream.cut_after=4"}
    )
    for _ in cut.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Summarise the order."}], max_tokens=12, stream=True
    ):
        pass
    with contextlib.suppress(openai.RateLimitError):
        client.with_options(
            default_headers={"x-mockserver-session": SESSION, "x-mockserver-fault": "http.429"}
        ).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Again?"}])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console.png")
    args = parser.parse_args(argv)
    chromium.ensure()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "mockserver", "serve", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("mockserver did not start")
            time.sleep(0.1)
        play(url)
        entries = httpx.get(url + "/__mockserver/journal", params={"session": SESSION}).json()["entries"]
        streamed = next(e for e in entries if e["body"].get("stream") and e["ended"] == "done")
        with chromium.browser(width=1480, height=900) as browser:
            from selenium.webdriver.common.by import By
            from selenium.webdriver.support.ui import WebDriverWait

            browser.get(url + "/__mockserver/console")
            wait = WebDriverWait(browser, 10)
            field = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#filters input[name=session]"))
            field.send_keys(SESSION)
            browser.find_element(By.CSS_SELECTOR, "#filters button[type=submit]").click()
            wait.until(lambda d: d.find_element(By.ID, "live").text == "live")
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#rows tr[data-id="{streamed["id"]}"]'))
            browser.execute_script(f"document.querySelector('#rows tr[data-id=\"{streamed['id']}\"]').click()")
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#detail svg.timeline line.mark"))
            time.sleep(1.3)  # the fresh rows' highlight fades
            args.out.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(args.out))
        print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
