"""Serving beyond loopback: no start without a login; a wrong password is refused and, after
repeated failures, throttled (the real app and assistant in Chromium); questions capped in size
and rate per session."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from rag.config import ROOT, load_settings
from rag.errors import ConfigError
from tests.ui_browser import CHROMIUM, chromium_page, page_state, served
from ui.auth import LoginThrottle, exposure_error, is_loopback

USER, PASSWORD = "reader", "correct-horse-battery"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_hosts_need_no_login(host: str) -> None:
    assert is_loopback(host) and exposure_error(load_settings(ui={"host": host}).ui) == ""


@pytest.mark.parametrize("ui,needle", [
    ({"host": "0.0.0.0"}, "RAG_UI__AUTH_PASSWORD"),
    ({"host": "192.168.1.20", "auth_user": USER}, "a login is required"),
    ({"host": "example.org", "auth_password": PASSWORD}, "a login is required"),
    ({"host": "0.0.0.0", "auth_user": USER, "auth_password": "short"}, "at least 8"),
])
def test_beyond_loopback_needs_a_user_and_a_password(ui: dict[str, str], needle: str) -> None:
    from ui.app import launch_kwargs

    settings = load_settings(ui=ui)
    assert needle in exposure_error(settings.ui)
    with pytest.raises(ConfigError, match=needle):
        launch_kwargs(settings.ui)
    ok = load_settings(ui={**ui, "auth_user": USER, "auth_password": PASSWORD}).ui
    assert exposure_error(ok) == "" and launch_kwargs(ok)["auth"] == (USER, PASSWORD)


def test_rag_serve_refuses_to_start_beyond_loopback_in_one_line(tmp_path: Any) -> None:
    env = {**os.environ, "RAG_UI__HOST": "0.0.0.0", "RAG_PATHS__DATA": str(tmp_path)}
    env.pop("RAG_UI__AUTH_USER", None)
    env.pop("RAG_UI__AUTH_PASSWORD", None)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "rag.cli", "serve"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ui.host '0.0.0.0' serves beyond")
    assert "RAG_UI__AUTH_USER" in lines[0] and "RAG_UI__AUTH_PASSWORD" in lines[0]
    assert time.monotonic() - t0 < 120  # refused before loading any model (not asserted tighter)


def test_throttle_blocks_after_repeated_failures_and_doubles() -> None:
    now = [0.0]
    t = LoginThrottle(failures=3, pause=10, clock=lambda: now[0])
    for _ in range(2):
        t.record("1.2.3.4", ok=False)
    assert t.wait("1.2.3.4") == 0
    t.record("1.2.3.4", ok=False)
    assert t.wait("1.2.3.4") == 10 and t.wait("5.6.7.8") == 0  # per address
    now[0] = 10.0
    t.record("1.2.3.4", ok=False)
    assert t.wait("1.2.3.4") == 20  # doubled
    t.record("1.2.3.4", ok=True)
    assert t.wait("1.2.3.4") == 0  # a success clears it


@pytest.fixture()
def login_page(assistant: Any, settings: Any) -> Any:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    pytest.importorskip("playwright.sync_api")
    from ui.app import create_app

    s = settings.model_copy(update={"ui": settings.ui.model_copy(update={
        "auth_user": USER, "auth_password": PASSWORD, "login_failures": 3,
        "login_pause_seconds": 4.0})})
    with served(create_app(assistant, s), s) as url, chromium_page() as page:
        page.goto(url)
        page.wait_for_selector("input[type=password]")
        page.data_dir = s.paths.data
        yield page


def _login(page: Any, password: str) -> int:
    page.locator("input[data-testid=textbox]").fill(USER)
    page.locator("input[type=password]").fill(password)
    with page.expect_response(lambda r: r.url.rstrip("/").endswith("/login")) as resp:
        page.get_by_role("button", name="Login").click()
    return int(resp.value.status)


@pytest.mark.browser
def test_login_in_the_browser_refuses_then_throttles_then_admits(login_page: Any) -> None:
    page = login_page
    assert _login(page, "wrong-password") == 400
    page.wait_for_selector("text=Incorrect Credentials")
    assert page.locator("#chat").count() == 0
    assert [_login(page, f"guess-{i}") for i in range(2)] == [400, 400]
    # three failures: now even the right password is turned away until the pause is over
    assert _login(page, PASSWORD) == 429
    assert page.locator("#chat").count() == 0
    r = page.request.post(page.url.rstrip("/") + "/login",
                          form={"username": USER, "password": PASSWORD})
    assert r.status == 429 and "Too many failed logins" in r.text()
    assert int(r.headers["retry-after"]) >= 1
    page.wait_for_timeout(4500)  # login_pause_seconds
    assert _login(page, PASSWORD) == 200
    page.wait_for_selector("#chat", timeout=30_000)

    # with a login, saved conversations belong to the user, not to the browser
    page.wait_for_selector("#question textarea")
    page.wait_for_timeout(500)  # the page-load event that sets the owner
    page.locator("#question textarea").fill("Which papers study backdoor attacks?")
    page.locator("#send").click()
    page.wait_for_selector("#status .status-done", timeout=120_000)
    page.wait_for_function(
        "document.querySelector('#conv-list').innerText.includes('backdoor attacks')")
    from ui.history import ConversationStore

    store = ConversationStore.for_data(page.data_dir)
    titles = [c.title for c in store.conversations(f"user:{USER}")]
    assert "Which papers study backdoor attacks?" in titles


@pytest.mark.browser
def test_question_size_and_rate_are_capped_per_session(assistant: Any, settings: Any) -> None:
    """Refused in the click handler, before the queue: the real app, the real assistant."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    pytest.importorskip("playwright.sync_api")
    from ui.app import create_app

    s = settings.model_copy(update={
        "ui": settings.ui.model_copy(update={"questions_per_minute": 2}),
        "answer": settings.answer.model_copy(update={"max_question_chars": 80})})
    with served(create_app(assistant, s), s) as url, chromium_page() as page:
        page.goto(url)
        page.wait_for_selector("#question textarea")
        box = page.locator("#question textarea")
        # the box itself stops at 80 characters; a script sending more is refused by the server
        box.fill("Which papers " + "really " * 20 + "study backdoors?")
        assert len(box.input_value()) == 80
        page.evaluate("""() => { const t = document.querySelector('#question textarea');
            t.removeAttribute('maxlength'); }""")
        box.fill("Which papers " + "really " * 20 + "study backdoors?")
        page.locator("#send").click()
        page.wait_for_selector("#status .status-error", timeout=10_000)
        assert "characters long; the limit is 80" in page_state(page)["status_text"]
        for i, q in enumerate(["Which papers study backdoor attacks?",
                               "Which papers enhance low-light videos?"], start=1):
            box.fill(q)
            page.locator("#send").click()
            page.wait_for_function(
                f"document.querySelectorAll('#chat .question').length === {i} && "
                "document.querySelector('#status .status-done') !== null", timeout=120_000)
        box.fill("Which papers use speculative decoding?")
        page.locator("#send").click()
        page.wait_for_selector("#status .status-error", timeout=10_000)
        st = page_state(page)
        assert "Too many questions: at most 2 a minute" in st["status_text"], st
        assert len(st["users"]) == 2  # the third was not queued
