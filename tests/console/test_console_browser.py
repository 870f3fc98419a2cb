"""The console in a real browser: Debian's headless Chromium under selenium, one for the module.

A server of its own (so the list holds only this module's requests), requests made by the
official SDK during each test, and the page asked what a person would see: the rows, one
opened, a stream's timeline, the session filter, and a new request appearing without a reload.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support import chromium
from tests.support.live import FROZEN, Live, serve_in_thread

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytest.importorskip("selenium", reason="selenium drives the browser: pip install -e '.[test]'")
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

HOSTILE = 'Say hi <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        yield live


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if chromium.binaries() is None:
        pytest.skip(f"no headless Chromium with chromedriver: {chromium.INSTALL}")
    with chromium.browser() as driver:
        yield driver


def client(live: Live, session: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=live.base_url, api_key="sk-test", max_retries=0, default_headers={"x-mockserver-session": session}
    )


def wait(driver: WebDriver, what: Any, timeout: float = 10.0) -> Any:
    waiting = WebDriverWait(driver, timeout, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,))
    return waiting.until(what)


def texts(driver: WebDriver, css: str, attribute: str | None = None) -> list[str]:
    """The text (or an attribute) of every element ``css`` finds, read in one script: atomic,
    where elements found one call and read the next may have been re-drawn in between."""
    found: list[str] = driver.execute_script(
        "const [css, name] = arguments;"
        "return [...document.querySelectorAll(css)].map(e => name ? e.getAttribute(name) : e.textContent)",
        css,
        attribute,
    )
    return found


def row_ids(driver: WebDriver) -> list[int]:
    return [int(i) for i in texts(driver, "#rows tbody tr", "data-id")]


def click_row(driver: WebDriver, entry_id: int) -> None:
    """Click a row (found again if the live list re-drew it in between)."""

    def clicked(d: WebDriver) -> bool:
        d.find_element(By.CSS_SELECTOR, f'#rows tr[data-id="{entry_id}"]').click()
        return True

    WebDriverWait(driver, 10, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)).until(clicked)


def open_console(driver: WebDriver, live: Live) -> None:
    driver.get(live.url + "/__mockserver/console")
    wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")


def test_lists_opens_escapes_and_draws_a_streams_timeline(server: Live, browser: WebDriver) -> None:
    with client(server, "alpha") as sdk:
        plain = sdk.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": HOSTILE}], max_tokens=4, seed=3
        )
        chunks = list(
            sdk.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Stream it"}], max_tokens=9, stream=True
            )
        )
    journal = httpx.get(server.url + "/__mockserver/journal?session=alpha").json()["entries"]
    first, streamed = journal[-2], journal[-1]
    open_console(browser, server)
    wait(browser, lambda d: {first["id"], streamed["id"]} <= set(row_ids(d)))

    click_row(browser, first["id"])
    (body,) = wait(browser, lambda d: texts(d, "#detail pre.request-body"))
    assert json.dumps(HOSTILE) in body  # shown as the text it is (in its JSON)
    assert texts(browser, f'#rows tr[data-id="{first["id"]}"] .preview') == [HOSTILE]
    assert texts(browser, "#detail pre.answer-text") == [plain.choices[0].message.content]
    assert browser.execute_script("return window.__pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "#detail script, #detail img")

    click_row(browser, streamed["id"])
    marks = wait(browser, lambda d: texts(d, "#detail svg.timeline line.mark", "data-t"))
    events = sum(1 for c in chunks)  # the SDK's chunks: one per data event
    assert len(marks) == streamed["events"] == events
    times = [float(t) for t in marks]
    assert times == sorted(times) and times[-1] <= streamed["duration"]
    streamed_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert texts(browser, "#detail pre.answer-text") == [streamed_text]


def test_filters_by_session(server: Live, browser: WebDriver) -> None:
    for session in ("beta", "gamma"):
        with client(server, session) as sdk:
            sdk.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": session}], max_tokens=2
            )
    journal = httpx.get(server.url + "/__mockserver/journal").json()["entries"]
    beta = {e["id"] for e in journal if e["session"] == "beta"}
    open_console(browser, server)
    wait(browser, lambda d: len(row_ids(d)) == len(journal))
    field = browser.find_element(By.CSS_SELECTOR, "#filters input[name=session]")
    field.clear()
    field.send_keys("beta")
    browser.find_element(By.CSS_SELECTOR, "#filters button[type=submit]").click()
    wait(browser, lambda d: set(row_ids(d)) == beta)
    assert set(texts(browser, "#rows tbody td:nth-child(4)")) == {"beta"}

    browser.find_element(By.CSS_SELECTOR, 'nav [data-tab="trajectory"]').click()
    wait(browser, lambda d: {int(i) for i in texts(d, "#trajectory .turn", "data-id")} == beta)
    browser.find_element(By.CSS_SELECTOR, 'nav [data-tab="server"]').click()
    wait(browser, lambda d: {"beta", "gamma"} <= set(texts(d, "#server .card td:first-child")))  # the sessions card
    browser.find_element(By.CSS_SELECTOR, 'nav [data-tab="requests"]').click()


def test_updates_live_without_a_reload(server: Live, browser: WebDriver) -> None:
    open_console(browser, server)
    browser.execute_script("window.__same_page = true")
    before = set(row_ids(browser))
    with client(server, "delta") as sdk:
        sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "new"}], max_tokens=2)
    newest = httpx.get(server.url + "/__mockserver/journal?session=delta").json()["entries"][-1]["id"]
    assert newest not in before
    wait(browser, lambda d: newest in row_ids(d))
    assert row_ids(browser)[0] == newest  # newest first
    assert browser.execute_script("return window.__same_page === true")  # no reload happened


def test_resets_a_session_from_the_page(server: Live, browser: WebDriver) -> None:
    for session in ("epsilon", "zeta"):
        with client(server, session) as sdk:
            sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    open_console(browser, server)
    field = browser.find_element(By.CSS_SELECTOR, "#filters input[name=session]")
    field.clear()
    field.send_keys("epsilon")
    browser.find_element(By.CSS_SELECTOR, "#filters button[type=submit]").click()
    wait(browser, lambda d: len(row_ids(d)) == 1)
    browser.execute_script("window.confirm = () => true")  # the page asks first
    browser.find_element(By.ID, "reset-session").click()
    wait(browser, lambda d: row_ids(d) == [])
    assert httpx.get(server.url + "/__mockserver/journal?session=epsilon").json()["entries"] == []
    assert httpx.get(server.url + "/__mockserver/journal?session=zeta").json()["entries"]  # others stay
