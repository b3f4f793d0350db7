"""The real UI in headless Chromium against a scripted assistant (fast: no models).

Checks what only a browser shows: the chat's HTML sanitizer keeps our links, citations
scroll to the sources panel, downloads work, tabs hand values to each other, and nothing from
an abstract is executed. tests/test_browser.py does the same against the real assistant.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_settings
from tests.ui_browser import CHROMIUM, ask, chromium_page, served, shot
from tests.ui_fakes import FakeAssistant
from ui.app import create_app

pytestmark = pytest.mark.browser
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def page(tmp_path_factory: Any) -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    settings = make_settings(tmp_path_factory.mktemp("fake-ui"))  # saved chats land there
    app = create_app(FakeAssistant(delay=0.15), settings)
    with served(app, settings) as url, chromium_page() as p:
        dialogs: list[str] = []
        p.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        p.goto(url)
        p.wait_for_selector("#chat")
        p.dialogs = dialogs  # type: ignore[attr-defined]
        yield p


def test_chat_streams_cites_and_exports(page: Any, tmp_path: Any) -> None:
    ask(page, "What does SSL4RL use as a reward signal?")
    page.wait_for_selector("#sources .retrieved", timeout=10_000)  # sources before the answer
    page.wait_for_selector("#status .status-done", timeout=20_000)
    shot(page, "fake-chat.png")
    link = page.locator("#chat a.cite").first
    href = link.get_attribute("href")
    assert href == "#src-1-1"
    target = page.locator(f"#sources {href}")
    assert target.get_attribute("data-paper") == "000-01"
    assert "We propose SSL4RL" in target.locator("mark").first.inner_text()
    link.click()
    page.wait_for_selector(f"{href}.flash", timeout=3_000)
    assert page.locator("#chat .unsupported").count() == 1
    assert "<i>cures</i>" in page.locator("#chat").inner_text()  # shown as text, not markup

    with page.expect_download(timeout=10_000) as dl:
        page.locator("#export-chat").click()
    path = tmp_path / "chat.md"
    dl.value.save_as(path)
    text = path.read_text()
    assert "What does SSL4RL use as a reward signal?" in text and "000-01" in text


def test_chat_comparison_and_follow_up(page: Any) -> None:
    ask(page, "Compare SSL4RL and TaRO")
    page.wait_for_selector("#chat .compare-table", timeout=10_000)
    page.wait_for_selector("#status .status-done", timeout=20_000)
    heads = page.locator("#chat .compare-table thead").last.inner_text()
    assert "000-01" in heads and "003-14" in heads
    assert page.locator("#sources #src-2-2").count() == 1
    shot(page, "fake-chat-compare.png")


def test_stop_button(page: Any) -> None:
    ask(page, "What does SSL4RL propose?")
    page.wait_for_selector("#chat .streaming", timeout=10_000)
    page.wait_for_function("document.querySelector('#stop button, button#stop') "
                           "&& !document.querySelector('#stop button, button#stop').disabled")
    page.locator("#stop").click()
    page.wait_for_selector("#status .status-stopped", timeout=10_000)
    assert "(stopped)" in page.locator("#chat").inner_text()


def test_papers_tab_to_chat_and_compare(page: Any) -> None:
    page.get_by_role("tab", name="Papers").click()
    page.wait_for_selector("#papers-table")
    page.locator("#paper-filter textarea, #paper-filter input").first.fill("leakage")
    page.wait_for_function("document.querySelector('#paper-count').innerText.startsWith('1 of')")
    assert "<b>leak@k</b>" in page.locator("#papers-table").inner_text()  # escaped label
    page.locator("#papers-table [role=gridcell]").filter(has_text="004-09").first.click()
    page.wait_for_selector("#paper-detail .src")
    assert "<script>" in page.locator("#paper-detail").inner_text()  # text, never run
    shot(page, "fake-papers.png")
    page.locator("#paper-ask").click()
    page.wait_for_function(
        "document.querySelector('#question textarea').value.includes('leak@k')")

    page.get_by_role("tab", name="Papers").click()
    page.locator("#paper-filter textarea, #paper-filter input").first.fill("")
    page.locator("#papers-table [role=gridcell]").filter(has_text="003-14").first.click()
    page.wait_for_selector("#paper-detail section[data-paper='003-14']")
    page.locator("#paper-right").click()
    page.wait_for_selector("#compare-run")
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_compare_tab(page: Any, tmp_path: Any) -> None:
    page.get_by_role("tab", name="Compare").click()
    left = page.locator("#left input")
    left.click()
    left.fill("000-01")
    page.get_by_role("option", name="000-01 · SSL4RL").click()
    right_value = page.locator("#right input").input_value()
    assert right_value.startswith("003-14")  # picked from the Papers tab
    page.locator("#compare-run").click()
    page.wait_for_selector("#compare-status .status-done", timeout=20_000)
    table = page.locator("#compare-table .compare-table")
    assert "000-01" in table.inner_text() and "003-14" in table.inner_text()
    assert table.locator("td.missing").count() == 1
    assert page.locator("#compare-sources #src-cmp-1").count() == 1
    shot(page, "fake-compare.png")
    with page.expect_download(timeout=10_000) as dl:
        page.locator("#export-compare").click()
    path = tmp_path / "cmp.md"
    dl.value.save_as(path)
    assert path.read_text().strip()
