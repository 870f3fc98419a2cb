"""Debian's headless Chromium for the console's browser tests: found, installed when missing, driven by selenium.

``make test`` runs ``python -m tests.support.chromium`` before pytest, as it does for
``redis-server`` (:mod:`tests.support.redis_server`): it finds ``chromium`` and ``chromedriver``
on the PATH, else installs Debian's ``chromium`` and ``chromium-driver`` packages (as root,
with apt). There is no wheel to fall back on (a browser is not a Python package), so where
neither is possible — no root, no apt — the browser tests skip, naming the command that
installs them. :func:`browser` starts one headless Chromium (a test module shares it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

__all__ = ["INSTALL", "binaries", "browser", "ensure"]

INSTALL = "make test (or, as root: apt-get install chromium chromium-driver)"


def binaries() -> tuple[str, str] | None:
    """``(chromium, chromedriver)`` from the PATH (Debian's package puts both in /usr/bin)."""
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser_path, driver) if browser_path and driver else None


def ensure() -> tuple[str, str]:
    """Find or install Chromium and its driver; their paths. RuntimeError saying what failed."""
    found = binaries()
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("chromium: not on PATH; installing Debian's chromium and chromium-driver (apt-get, as root)", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, **quiet)  # type: ignore[call-overload]
        install = ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]
        subprocess.run(install, check=False, env=env, **quiet)  # type: ignore[call-overload]
        found = binaries()
        if found:
            return found
        raise RuntimeError("apt-get could not install chromium and chromium-driver")
    raise RuntimeError(f"no chromium and chromedriver on PATH, and no root with apt-get to install them: {INSTALL}")


@contextmanager
def browser(width: int = 1400, height: int = 900) -> Iterator[WebDriver]:
    """One headless Chromium under selenium, closed after (its profile in a temporary folder)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = binaries()
    if found is None:
        raise FileNotFoundError(f"no chromium and chromedriver: run {INSTALL}")
    chromium, driver = found
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    with tempfile.TemporaryDirectory(prefix="mockserver-chromium-") as profile:
        for flag in (
            "--headless=new",
            "--no-sandbox",  # as root in a container
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",  # nothing fetched from outside, by the browser either
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
        ):
            options.add_argument(flag)
        driver_ = webdriver.Chrome(service=Service(executable_path=driver), options=options)
        try:
            yield driver_
        finally:
            driver_.quit()


if __name__ == "__main__":
    try:
        print("chromium:", " and ".join(ensure()))
    except RuntimeError as exc:  # make test goes on: the browser tests skip, saying why
        print(f"chromium: {exc}; the console's browser tests will skip", file=sys.stderr)
