"""The Papers tab's pages and the compare pickers' free text in headless Chromium, against
the scripted assistant with 1,200 papers (above paging.PICKER_LIMIT): fast, no models."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import make_settings
from tests.test_ui_paging import Large
from tests.ui_browser import CHROMIUM, chromium_page, served, shot
from ui import paging
from ui.app import create_app

pytestmark = pytest.mark.browser
pytest.importorskip("playwright.sync_api")

N = 1200
COUNT = "document.querySelector('#paper-count').innerText"


@pytest.fixture(scope="module")
def page(tmp_path_factory: Any) -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    settings = make_settings(tmp_path_factory.mktemp("paged-ui"))
    app = create_app(Large(N), settings)
    with served(app, settings) as url, chromium_page() as p:
        p.goto(url)
        p.wait_for_selector("#chat")
        yield p


def wait_count(page: Any, text: str) -> None:
    page.wait_for_function(f"{COUNT}.trim() === {json.dumps(text)}", timeout=10_000)


def table_ids(page: Any) -> list[str]:
    """The ids in the table's cells (those rendered)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '#papers-table [role=gridcell]')).map(c => c.innerText.trim())
        .filter(s => /^\\d{3}-\\d{2}$/.test(s))""")


def test_papers_tab_pages(page: Any) -> None:
    papers = Large(N).papers()
    pages = -(-N // paging.PAGE_SIZE)
    page.get_by_role("tab", name="Papers").click()
    wait_count(page, f"{N} of {N} papers · page 1 of {pages}")
    ids = table_ids(page)
    assert ids and ids[0] == papers[0].id
    assert set(ids) <= {p.id for p in papers[:paging.PAGE_SIZE]}  # only page 1 was sent
    page.locator("#paper-next").click()
    wait_count(page, f"{N} of {N} papers · page 2 of {pages}")
    page.wait_for_function("document.querySelector('#papers-table').innerText.includes("
                           f"{json.dumps(papers[paging.PAGE_SIZE].id)})")
    assert set(table_ids(page)) <= {p.id for p in papers[paging.PAGE_SIZE:2 * paging.PAGE_SIZE]}
    page.locator("#paper-prev").click()
    wait_count(page, f"{N} of {N} papers · page 1 of {pages}")
    page.locator("#paper-prev").click()  # the first page stays the first
    page.wait_for_timeout(300)
    wait_count(page, f"{N} of {N} papers · page 1 of {pages}")

    page.locator("#paper-filter textarea, #paper-filter input").first.fill("topic3")
    found = paging.filter_papers(papers, "topic3")
    fpages = -(-len(found) // paging.PAGE_SIZE)
    wait_count(page, f"{len(found)} of {N} papers · page 1 of {fpages}")
    for _ in range(fpages + 1):  # past the last page: stays on it
        page.locator("#paper-next").click()
    wait_count(page, f"{len(found)} of {N} papers · page {fpages} of {fpages}")
    last = found[(fpages - 1) * paging.PAGE_SIZE:]
    page.wait_for_function("document.querySelector('#papers-table').innerText.includes("
                           f"{json.dumps(last[-1].id)})")
    shot(page, "paged-papers.png")

    # a row of a later page still opens, and still goes to the compare tab
    page.locator("#papers-table [role=gridcell]").filter(has_text=last[-1].id).first.click()
    page.wait_for_selector(f"#paper-detail section[data-paper='{last[-1].id}']")
    page.locator("#paper-left").click()
    page.wait_for_selector("#compare-run")
    page.wait_for_function("document.querySelector('#left input').value.startsWith("
                           f"{json.dumps(last[-1].id + ' · ' + last[-1].label)})")


def test_compare_picker_takes_free_text(page: Any) -> None:
    """No paper list at 1,200 papers: a name typed in the first picker reaches the comparison
    (the second was set from the Papers tab by the test above)."""
    page.get_by_role("tab", name="Compare").click()
    assert page.locator("#left [role=option]").count() == 0
    assert f"{N:,} papers: type an id, name or description" in page.locator("#left").inner_text()
    box = page.locator("#left input")
    box.click()
    box.fill("SSL4RL")
    page.locator("#right input").click()  # leaving the box keeps the text as its value
    box = page.locator("#right input")
    box.fill("")
    box.fill("TaRO")
    page.locator("#compare-run").click()
    page.wait_for_selector("#compare-status .status-done", timeout=20_000)
    table = page.locator("#compare-table .compare-table").inner_text()
    assert "000-01" in table and "003-14" in table
    shot(page, "paged-compare.png")
