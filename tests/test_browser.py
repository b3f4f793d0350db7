"""End to end in headless Chromium: the real app, the real assistant, the real models.

The index is the whole seed corpus ingested into a private temp folder (conftest `settings`),
the generator is the configured preset; one answer takes ~20-30 s on 2 CPU cores, so waits
are generous. Screenshots go to test-artifacts/; the README screenshot to
docs/screenshot.png when RAG_UPDATE_SCREENSHOT=1 is set.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui_browser import ARTIFACTS, CHROMIUM, ROOT, ask, chromium_page, served, shot

pytestmark = [pytest.mark.browser, pytest.mark.model]
pytest.importorskip("playwright.sync_api")

ANSWER_MS = 180_000  # model load on first use + prefill + 96 new tokens, with headroom
LOOKUP = "What does SSL4RL use as a reward signal?"
COMPARE = "Compare SSL4RL and TaRO"


@pytest.fixture(scope="module")
def page(settings: Any) -> Iterator[Any]:
    """The served app (real Assistant from the isolated settings) in one browser page."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    from rag.assistant import Assistant
    from ui.app import create_app

    app = create_app(Assistant.from_settings(settings), settings)
    with served(app, settings) as url, chromium_page(1280, 900) as p:
        errors: list[str] = []
        p.on("pageerror", lambda e: errors.append(str(e)))
        p.goto(url)
        p.wait_for_selector("#chat")
        p.page_errors = errors  # type: ignore[attr-defined]
        yield p


def wait_done(page: Any, status: str = "#status") -> None:
    page.wait_for_selector(f"{status} .status-done", timeout=ANSWER_MS)


def test_an_empty_question_is_told_what_to_type(page: Any) -> None:
    before = page.locator("#chat .message, #chat [data-testid='user']").count()
    ask(page, "   ")
    page.wait_for_selector("#status .status-error", timeout=10_000)
    assert "Type a question first" in page.locator("#status").inner_text()
    assert page.locator("#chat .message, #chat [data-testid='user']").count() == before
    assert page.locator("#send").is_enabled()


def test_lookup_answer_cites_ssl4rl_and_exports(page: Any, tmp_path: Any) -> None:
    ask(page, LOOKUP)
    page.wait_for_selector("#sources .retrieved", timeout=30_000)
    assert page.locator("#status .status-done").count() == 0  # sources came before the answer
    assert "000-01" in page.locator("#sources").inner_text()
    shot(page, "real-1-sources-before-answer.png")
    wait_done(page)

    links = page.locator("#chat a.cite")
    assert links.count() >= 1, page.locator("#chat").inner_text()
    targets = {}
    for i in range(links.count()):
        href = links.nth(i).get_attribute("href")
        assert href and href.startswith("#src-1-")
        card = page.locator(f"#sources {href}")
        assert card.count() == 1, f"{href} does not resolve in the sources panel"
        targets[href] = card.get_attribute("data-paper")
    assert "000-01" in targets.values(), targets
    href = next(h for h, pid in targets.items() if pid == "000-01")
    assert page.locator(f"#sources {href} mark").count() >= 1  # the supporting sentence
    page.locator(f"#chat a.cite[href='{href}']").first.click()
    page.wait_for_selector(f"{href}.flash", timeout=5_000)
    page.wait_for_timeout(1800)  # let the flash fade before the README screenshot
    shot(page, "real-2-answer.png")
    if os.environ.get("RAG_UPDATE_SCREENSHOT"):  # refresh the README's picture on request only
        docs = ROOT / "docs"
        docs.mkdir(exist_ok=True)
        shutil.copyfile(ARTIFACTS / "real-2-answer.png", docs / "screenshot.png")

    with page.expect_download(timeout=30_000) as dl:
        page.locator("#export-chat").click()
    path = tmp_path / "conversation.md"
    dl.value.save_as(path)
    shutil.copyfile(path, ARTIFACTS / "real-conversation.md")
    text = path.read_text(encoding="utf-8")
    assert LOOKUP in text and "000-01" in text
    assert page.page_errors == []  # type: ignore[attr-defined]


def test_chat_comparison_table_has_both_papers(page: Any) -> None:
    ask(page, COMPARE)
    table = page.locator("#chat .compare-table").last
    table.wait_for(timeout=60_000)  # the table comes before the synthesis
    heads = table.locator("thead").inner_text()
    assert "000-01" in heads and "003-14" in heads
    assert [t.strip() for t in table.locator("tbody th").all_inner_texts()] == [
        "Problem", "Approach", "Evaluation", "Key results", "Code"]
    wait_done(page)
    panel = page.locator("#sources").inner_text()
    assert "000-01" in panel and "003-14" in panel
    for href in page.locator("#chat .compare-table").last.locator("a.cite").evaluate_all(
            "els => els.map(e => e.getAttribute('href'))"):
        assert page.locator(f"#sources {href}").count() == 1
    shot(page, "real-3-comparison.png")


def test_a_greeting_and_the_collection_s_size_get_plain_replies(page: Any) -> None:
    """"Hello!" and "How many papers are in the collection?" are answered without the model
    and without citations, as plain bubbles (not declines). (After the lookup test, which
    checks that no finished status is showing when its sources arrive.)"""
    bots = "#chat .message.bot, #chat [data-testid='bot']"
    for question, expected in (("Hello!", "every claim cites"),
                               ("How many papers are in the collection?", "57 ICML 2026 abstracts")):
        ask(page, question)
        page.wait_for_function(
            "([sel, text]) => { const b = document.querySelectorAll(sel);"
            " return b.length && b[b.length - 1].innerText.includes(text); }",
            arg=[bots, expected], timeout=ANSWER_MS)
        wait_done(page)
        bubble = page.locator(bots).last
        assert expected in bubble.inner_text(), bubble.inner_text()
        assert bubble.locator(".abstained").count() == 0 and bubble.locator("a.cite").count() == 0



def test_a_code_link_in_an_answer_is_a_link_that_opens_in_a_new_tab(page: Any) -> None:
    """"Where is X's code?" quotes the abstract's sentence with the link; in the chat the link
    survives Gradio's HTML sanitizer as one that opens a new tab."""
    # Earlier answers hold links too (the comparison's Code row links SSL4RL's page; a
    # clean-clone CI run read that one), so wait for this answer's bubble and read its links.
    bots = "#chat .message.bot, #chat [data-testid='bot']"
    before = page.locator(bots).count()
    ask(page, "Where can I get DefensiveKV's code?")
    page.wait_for_function(
        "([sel, n]) => { const b = document.querySelectorAll(sel);"
        " return b.length > n && b[b.length - 1].querySelector('a.ext'); }",
        arg=[bots, before], timeout=ANSWER_MS)
    wait_done(page)
    link = page.locator(bots).last.locator("a.ext").first
    assert link.get_attribute("href") == "https://github.com/FFY0/DefensiveKV"
    assert link.get_attribute("target") == "_blank"
    assert "noopener" in (link.get_attribute("rel") or "")
    assert page.locator(bots).last.locator("a.cite").count() >= 1

# Delays the responses of the page's direct (queue=False) calls, such as Stop's, while
# window.__slowRun is set: under load Stop's own reply can reach the page after the answer's
# last update, and it must not turn a finished "Stopped" back into "Stopping" (a clean-clone
# CI run had the stopped session of tests/test_load.py end in no state that way).
SLOW_RUN = """
if (!window.__fetch) {
  window.__fetch = window.fetch;
  window.fetch = async (url, init) => {
    const r = await window.__fetch(url, init);
    if (window.__slowRun && String(url).includes('/run/')) {
      await new Promise(ok => setTimeout(ok, 6000));
    }
    return r;
  };
}
"""


def test_stop_button_ends_generation(page: Any) -> None:
    page.evaluate(SLOW_RUN)
    ask(page, "How does TaRO use reinforcement learning for tables?")
    page.wait_for_selector("#status .status-writing", timeout=60_000)
    page.evaluate("() => { window.__slowRun = true; }")
    try:
        page.locator("#stop").click()
        page.wait_for_selector("#status .status-stopped", timeout=30_000)
        page.wait_for_timeout(8_000)  # Stop's own (delayed) reply has arrived by now
        assert page.locator("#status .status-stopped").count() == 1, \
            page.locator("#status").inner_text()
    finally:
        page.evaluate("() => { window.__slowRun = false; }")
    shot(page, "real-4-stopped.png")
    assert page.locator("#send").is_enabled()
