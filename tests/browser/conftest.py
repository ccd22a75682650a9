"""Browser fixtures: headless Debian Chromium driven by Playwright (gateways come from tests/conftest.py).

The tests skip only when Chromium is not installed at ``/usr/bin/chromium`` (CI installs it
with ``apt-get install chromium``). When it is installed, any failure to start it is an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium's own connections fail on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless Chromium per test module (module scope keeps Playwright's loop out of other modules)."""
    if not CHROMIUM.exists():
        pytest.skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium: Browser) -> Iterator[Page]:
    """A fresh page in its own browser context; console errors are collected in ``page.errors``."""
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, locale="en-GB", timezone_id="UTC")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors  # type: ignore[attr-defined]
    yield page
    context.close()


def page_events(page: Page) -> list[dict[str, Any]]:
    """The events the page's EventSource delivered, oldest first (the page keeps them in window.sluiceEvents)."""
    return page.evaluate("window.sluiceEvents || []")
