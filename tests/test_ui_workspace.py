"""Issue 13 in headless Chromium with the real app and the real assistant: titles, saved
conversations across a server restart, the map, uploads, related papers and a 390 px screen.

The index is a private copy of the session's seed index (uploads change it). Questions are
paper-finding ones where possible (answered from the index, no model call, < 1 s), so the
module stays quick; one comparison reaches the model and is stopped once its table is shown.
Screenshots go to test-artifacts/, and to docs/ with RAG_UPDATE_SCREENSHOT=1.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings
from tests.ui_browser import (
    CHROMIUM,
    ROOT,
    ask,
    chromium,
    free_port,
    served,
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.model]
pytest.importorskip("playwright.sync_api")

FIND = "Which papers use flow policies for reinforcement learning?"
NEW_PAPER = """ICML 2026 Papers (uploaded)

We introduce QuokkaCount, a detector that counts small marsupials in thermal drone imagery \
of dense scrubland at night. QuokkaCount pairs a heat-signature prior with a tiny \
transformer head and counts quokkas 3.1x faster than manual survey teams. On 412 survey \
flights it reaches a counting error of 4.2 percent.
"""
NEW_QUESTION = "Which papers count marsupials in thermal drone imagery?"
WAIT_MS = 120_000
UPLOAD_MS = 300_000


def readme_shot(page: Any, name: str, full_page: bool = False) -> Path:
    path = shot(page, name, full_page)
    if os.environ.get("RAG_UPDATE_SCREENSHOT"):
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(path, ROOT / "docs" / name)
    return path


@pytest.fixture(scope="module")
def workspace(index_dir: Path, tmp_path_factory: Any) -> Any:
    """Settings over a private copy of the seed index (uploads and conversations land here).

    The session's index was built without a generator, so its papers have no titles; their
    title cache entries are set to "none" (what the library caches for a rejected title), so
    an upload costs one model call for its own paper, as it does after `rag ingest`, instead
    of titling all 57 seeds (5+ minutes here)."""
    from rag.corpus import load_corpus
    from rag.titles import TitleCache, cache_path, title_key

    data = tmp_path_factory.mktemp("workspace")
    shutil.copytree(index_dir, data, dirs_exist_ok=True)
    settings = make_settings(data)
    cache = TitleCache(cache_path(settings))
    for p in load_corpus(settings.paths.seeds).papers:
        key = title_key(p, settings.generate.preset)
        if cache.get(key) is None:
            cache.put(key, "", False)
    return settings


TITLED = "000-01"  # SSL4RL: the 0.5B model's title for it passes the library's check


@pytest.fixture(scope="module")
def assistant(workspace: Any) -> Any:
    """The real assistant; one seed gets its title from the real model, as `rag ingest` would
    give every seed (written to the title cache, then into the index by a no-op ingest)."""
    from rag.assistant import Assistant
    from rag.corpus import load_corpus
    from rag.ingest import ingest
    from rag.titles import TitleCache, cache_path, title_key, write_title

    a = Assistant.from_settings(workspace)
    paper = load_corpus(workspace.paths.seeds).by_id()[TITLED]
    result = write_title(a.generator, paper, workspace)
    TitleCache(cache_path(workspace)).put(title_key(paper, workspace.generate.preset),
                                          result.title, result.generated)
    ingest(workspace, a.store, a.embedder)
    a.refresh()
    return a


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def server(workspace: Any, assistant: Any) -> Iterator[str]:
    from ui.app import create_app

    with served(create_app(assistant, workspace), workspace) as url:
        yield url


def open_page(browser: Any, url: str, width: int = 1280, height: int = 900) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height},
                                  accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.page_errors = errors
    page.goto(url)
    page.wait_for_selector("#chat")
    return page


def wait_done(page: Any) -> None:
    page.wait_for_selector("#status .status-done", timeout=WAIT_MS)


def conversation_rows(data: Path) -> tuple[int, int]:
    db = sqlite3.connect(data / "conversations.sqlite")
    try:
        return (db.execute("SELECT COUNT(*) FROM conversations").fetchone()[0],
                db.execute("SELECT COUNT(*) FROM turns").fetchone()[0])
    finally:
        db.close()


# ---- titles and related papers ----------------------------------------------------------------


def test_titles_and_related_papers(browser: Any, server: str, assistant: Any) -> None:
    from ui.render import display_name

    papers = assistant.papers()
    page = open_page(browser, server)
    page.get_by_role("tab", name="Papers").click()
    page.wait_for_selector("#papers-table [role=gridcell]")
    table = page.locator("#papers-table").inner_text()
    titled = [p for p in papers if getattr(p, "title", "")]
    for p in titled[:5]:
        assert display_name(p) in table, p.id
    page.locator("#papers-table [role=gridcell]").filter(has_text=papers[0].id).first.click()
    card = page.locator(f"#paper-detail section[data-paper='{papers[0].id}']")
    card.wait_for()
    assert card.locator(".label").inner_text() == display_name(papers[0])
    if getattr(papers[0], "title_generated", False):
        assert "generated title" in (card.locator(".label").get_attribute("title") or "")
        assert card.locator(".gen").count() == 1
    related = page.locator("#paper-detail .related a.open-paper")
    if related.count():  # the atlas lists the 3 nearest; a link opens that paper here
        assert related.count() == 3
        target = related.first.get_attribute("data-paper")
        related.first.click()
        page.wait_for_selector(f"#paper-detail section.src[data-paper='{target}']")
    shot(page, "titles-papers.png")

    # the generated title: in the table, and in the sources panel marked as generated
    ssl = assistant.paper(TITLED)
    assert ssl.title and ssl.title_generated, "the model's title for SSL4RL was rejected"
    assert ssl.title in page.locator("#papers-table").inner_text()
    page.get_by_role("tab", name="Chat").click()
    ask(page, "What does SSL4RL use as a reward signal?")
    wait_done(page)
    card = page.locator(f"#sources section.src[data-paper='{TITLED}']").first
    assert card.locator(".label").inner_text() == ssl.title
    assert "SSL4RL" in (card.locator(".label").get_attribute("title") or "")  # label on hover
    assert card.locator(".gen").count() == 1
    readme_shot(page, "titles.png")
    assert page.page_errors == []


# ---- saved conversations ----------------------------------------------------------------------


def test_conversation_survives_restart_and_is_deleted_for_real(
        browser: Any, workspace: Any, assistant: Any, tmp_path: Path) -> None:
    from ui.app import create_app

    data = Path(workspace.paths.data)
    rows = conversation_rows(data) if (data / "conversations.sqlite").exists() else (0, 0)
    port = free_port()
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  accept_downloads=True)
    page = context.new_page()
    with served(create_app(assistant, workspace), workspace, port) as url:
        page.goto(url)
        page.wait_for_selector("#chat")
        ask(page, FIND)
        wait_done(page)
        page.wait_for_function(
            "document.querySelector('#conv-list').innerText.includes('flow policies')")
        cited = page.locator("#sources section.src[data-paper]").first.get_attribute(
            "data-paper")
        assert cited
    assert conversation_rows(data) == (rows[0] + 1, rows[1] + 1)

    # a new server process (same data folder, same origin), the tab reloaded
    with served(create_app(assistant, workspace), workspace, port) as url:
        page.goto(url)
        page.wait_for_selector("#chat")
        item = page.locator("#conv-list label").filter(has_text="flow policies")
        item.wait_for(timeout=30_000)
        assert "1 turn" in item.inner_text()
        item.click()
        page.wait_for_selector("#chat .question")
        assert FIND in page.locator("#chat .question").first.inner_text()
        page.wait_for_selector(f"#sources section.src[data-paper='{cited}']")
        for href in page.locator("#chat a.cite").evaluate_all(
                "els => els.map(e => e.getAttribute('href'))"):
            assert page.locator(f"#sources {href}").count() == 1
        readme_shot(page, "conversations.png")
        with page.expect_download(timeout=30_000) as dl:
            page.locator("#export-chat").click()
        path = tmp_path / "reopened.md"
        dl.value.save_as(path)
        text = path.read_text(encoding="utf-8")
        assert FIND in text and cited in text and "## References" in text

        page.locator("#conv-name input, #conv-name textarea").first.fill("Flow policy papers")
        page.locator("#conv-rename").click()
        page.wait_for_function(
            "document.querySelector('#conv-list').innerText.includes('Flow policy papers')")
        page.locator("#conv-list label").filter(has_text="Flow policy papers").click()
        page.locator("#conv-delete").click()
        page.wait_for_function(
            "!document.querySelector('#conv-list').innerText.includes('Flow policy')")
        assert page.locator("#chat .question").count() == 0
    assert conversation_rows(data) == rows  # the rows are gone, not hidden
    context.close()


# ---- the map --------------------------------------------------------------------------------


def test_map_renders_and_a_click_selects_a_paper(browser: Any, server: str,
                                                 assistant: Any) -> None:
    pytest.importorskip("rag.atlas")
    page = open_page(browser, server)
    ask(page, FIND)
    wait_done(page)
    cited = page.locator("#sources section.src[data-paper]").first.get_attribute("data-paper")
    page.get_by_role("tab", name="Map").click()
    page.wait_for_selector("#map .js-plotly-plot .scatterlayer path.point", timeout=30_000)
    n = len(assistant.papers())
    page.wait_for_function(
        "document.querySelectorAll('#map .scatterlayer .trace').length >= 2")
    points = page.locator("#map .scatterlayer path.point")
    assert points.count() >= n  # every paper, plus the rings of the cited ones
    legend = page.locator("#map .legend").first.text_content() or ""
    assert "cited in the current answer" in legend
    assert cited

    box = points.nth(0).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.wait_for_selector("#map .hoverlayer .hovertext", timeout=5_000)  # the title on hover
    page.mouse.click(x, y)
    page.wait_for_selector("#map-detail section.src[data-paper]", timeout=10_000)
    pid = page.locator("#map-detail section.src").get_attribute("data-paper")
    assert page.locator("#map-pick input").input_value().startswith(pid)
    readme_shot(page, "map.png")
    page.locator("#map-ask").click()
    page.wait_for_function("document.querySelector('#question textarea').value.length > 0")
    assert page.page_errors == []


# ---- the narrow screen --------------------------------------------------------------------------


def test_390px_has_no_horizontal_page_scroll(browser: Any, server: str) -> None:
    page = open_page(browser, server, 390, 844)
    no_scroll = "document.documentElement.scrollWidth <= window.innerWidth"
    assert page.evaluate(no_scroll)
    ask(page, FIND)
    wait_done(page)
    assert page.evaluate(no_scroll)
    ask(page, "Compare SSL4RL and TaRO")
    page.locator("#chat .compare-table").last.wait_for(timeout=WAIT_MS)
    page.locator("#stop").click()  # the table is what we look at; skip the synthesis
    page.wait_for_selector("#status .status-stopped, #status .status-done", timeout=WAIT_MS)
    assert page.evaluate(no_scroll), page.evaluate(
        "[document.documentElement.scrollWidth, window.innerWidth]")
    table_box = page.locator("#chat .comparison").last.bounding_box()
    assert table_box["x"] >= 0 and table_box["x"] + table_box["width"] <= 390 + 1
    page.locator("#chat .compare-table thead").last.evaluate(
        "e => e.scrollIntoView({block: 'start'})")
    page.evaluate("window.scrollTo(0, 0)")
    readme_shot(page, "mobile.png")
    page.locator("#sources").scroll_into_view_if_needed()
    assert page.evaluate(no_scroll)
    assert page.page_errors == []


# ---- uploads (last: they change the index) -----------------------------------------------------


def test_bad_upload_shows_its_error_and_changes_nothing(browser: Any, server: str,
                                                        assistant: Any, workspace: Any,
                                                        tmp_path: Path) -> None:
    pytest.importorskip("rag.uploads")
    before = [p.id for p in assistant.papers()]
    bad = tmp_path / "broken.txt"
    bad.write_bytes(b"ICML 2026 Papers\n\nAn abstract with a bad byte \xff here.\n")
    page = open_page(browser, server)
    page.get_by_role("tab", name="Add abstracts").click()
    page.locator("#upload-files input[type=file]").set_input_files(str(bad))
    page.wait_for_selector("#upload-report .error", timeout=30_000)
    text = page.locator("#upload-report").inner_text()
    assert "broken.txt" in text and "nothing was added" in text.lower()
    assert page.locator("#upload-add").is_disabled()
    assert [p.id for p in assistant.papers()] == before
    uploads = Path(workspace.paths.data) / "uploads"
    assert not uploads.exists() or not any(uploads.glob("*.txt"))


def test_upload_makes_a_new_paper_answerable_in_the_same_session(
        browser: Any, server: str, assistant: Any, tmp_path: Path) -> None:
    pytest.importorskip("rag.uploads")
    from ui.render import display_name

    before = {p.id for p in assistant.papers()}
    new = tmp_path / "quokka.txt"
    new.write_text(NEW_PAPER, encoding="utf-8")
    page = open_page(browser, server)
    page.get_by_role("tab", name="Add abstracts").click()
    page.locator("#upload-files input[type=file]").set_input_files(str(new))
    page.wait_for_function("!document.querySelector('#upload-add button, button#upload-add')"
                           ".disabled", timeout=30_000)
    assert "1 new paper" in page.locator("#upload-report").inner_text()
    page.locator("#upload-add").click()
    try:  # embedding, a title from the model (loaded on first use), the map
        page.wait_for_selector("#upload-report .upload-done", timeout=UPLOAD_MS)
    finally:
        shot(page, "upload-progress.png")
    added = sorted({p.id for p in assistant.papers()} - before)
    assert len(added) == 1, added
    if assistant.generator.engine_kind == "llama.cpp":  # the upload prefilled its prompt
        again = assistant.cache_papers(only=added)  # (rag/paper_cache.py): restored, not redone
        assert (again.sent, again.cached) == (1, 1), again
    paper = assistant.paper(added[0])
    report = page.locator("#upload-report").inner_text()
    assert display_name(paper) in report  # titled at ingest (the label when the model's failed)
    readme_shot(page, "upload.png")

    page.get_by_role("tab", name="Chat").click()
    ask(page, NEW_QUESTION)
    wait_done(page)
    card = page.locator(f"#sources section.src[data-paper='{added[0]}']").first
    assert card.count() == 1, page.locator("#sources").inner_text()
    assert card.locator(".label").inner_text() == display_name(paper)
    if paper.title_generated:  # the title shown as generated, the label on hover
        assert card.locator(".gen").count() == 1
        assert paper.label in (card.locator(".label").get_attribute("title") or "")
    shot(page, "upload-answered.png")

    page.get_by_role("tab", name="Map").click()  # mapped without a restart
    page.wait_for_function(
        f"document.querySelectorAll('#map .scatterlayer path.point').length >= {len(before) + 1}",
        timeout=30_000)

    # uploading the same file again: reported as a duplicate, nothing to add
    page.get_by_role("tab", name="Add abstracts").click()
    page.locator("#upload-files input[type=file]").set_input_files(str(new))
    page.wait_for_function("document.querySelector('#upload-report').innerText"
                           ".includes('already in the collection')", timeout=30_000)
    assert page.locator("#upload-add").is_disabled()
    assert page.page_errors == []
