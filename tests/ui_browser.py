"""Helpers for the browser tests: serve an app on a free port, drive the system Chromium.

Playwright's own browser download cannot work offline, so we always launch Debian's
/usr/bin/chromium; `playwright install` is never needed.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(app: Any, settings: Any, port: int | None = None) -> Iterator[str]:
    """Launch `app` in a background thread on `port` (default: a free one); yields its URL;
    closes after. (The same port again is the same origin: the browser's localStorage.)"""
    from ui.app import serve

    port = port or free_port()
    serve(app, settings, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
          quiet=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read(100)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        for t in threading.enumerate():  # a stopped answer may still be in its prefill
            if t.name == "ui-stream":
                t.join(150)
        app.close()


@contextmanager
def chromium() -> Iterator[Any]:
    """One headless browser; callers open as many contexts (independent sessions) as needed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def chromium_page(width: int = 1280, height: int = 900) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": width, "height": height},
                                          accept_downloads=True)
            page = context.new_page()
            yield page
        finally:
            browser.close()


def shot(page: Any, name: str, full_page: bool = False) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=full_page)
    return path


def ask(page: Any, question: str) -> None:
    page.locator("#question textarea").fill(question)
    page.locator("#send").click()


def last_bot_message(page: Any) -> Any:
    return page.locator("#chat .message.bot, #chat [data-testid='bot']").last


# What a page shows, read in one round trip: the status line, the chat's bubbles, cited cards.
PAGE_STATE_JS = """() => {
  const st = document.querySelector('#status .status');
  const q = (sel) => Array.from(document.querySelectorAll(sel));
  return {
    status: st ? st.className : '', status_text: st ? st.innerText : '',
    users: q('#chat .question').map(e => e.innerText),
    bots: q('#chat [data-testid="bot"]').length,
    answer: q('#chat .answer').map(e => e.innerText).pop() || '',
    cited: q('#sources section.src[id]').map(e => e.getAttribute('data-paper')),
    links: q('#chat a.cite').length,
  };
}"""


def page_state(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(PAGE_STATE_JS))
