"""The Papers tab: every paper, filterable, a page of rows at a time (ui/paging.py: only the
page shown goes to the browser, 100k papers or not); ask about one or pick it for a
comparison. Each paper's card lists its nearest papers; their links (anywhere on the page) open
them here, via the hidden #open-paper textbox and button that ui/assets.py's script fills and
clicks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from rag.errors import RagError
from ui import paging, render
from ui.compare_tab import picked, picker_choices

if TYPE_CHECKING:
    from ui.shared import Shared

HEADERS = ["id", "title (✦ generated)", "first sentence"]


def build_papers_tab(shared: Shared, tabs: gr.Tabs, question_box: gr.Textbox,
                     left: gr.Dropdown, right: gr.Dropdown, demo: gr.Blocks) -> dict[str, Any]:
    assistant = shared.assistant
    with gr.Row():
        query = gr.Textbox(label="Filter", placeholder="words in the id, name or abstract",
                           scale=4, elem_id="paper-filter")
        count = gr.Markdown("", elem_id="paper-count")
    with gr.Row():
        prev = gr.Button("← previous", size="sm", elem_id="paper-prev")
        nxt = gr.Button("next →", size="sm", elem_id="paper-next")
    table = gr.Dataframe(headers=HEADERS, datatype=["str", "str", "str"], interactive=False,
                         wrap=True, column_widths=["90px", "200px", "auto"], max_height=420,
                         elem_id="papers-table")
    selected = gr.State("")
    detail = gr.HTML('<p class="hint">Select a paper to see its abstract.</p>',
                     elem_id="paper-detail")
    with gr.Row():
        ask = gr.Button("Ask about it", interactive=False, elem_id="paper-ask")
        as_left = gr.Button("Compare: first paper", interactive=False, elem_id="paper-left")
        as_right = gr.Button("Compare: second paper", interactive=False, elem_id="paper-right")
    with gr.Row(elem_classes=["bridge"]):
        opened = gr.Textbox(elem_id="open-paper", show_label=False, container=False)
        go = gr.Button("open", elem_id="open-paper-go")

    catalog = paging.catalog(assistant)

    def rows(q: str, page: int = 1) -> tuple[Any, str]:
        """Page `page` of the papers matching `q`: only its rows are sent."""
        try:
            pg, corpus = catalog.page(q or "", page)
        except RagError as e:
            return [], f"⚠ {e}"
        return render.paper_rows(pg.rows), paging.count_line(pg, corpus)

    def step(q: str, shown: str, by: int) -> tuple[Any, str]:
        return rows(q, paging.shown_page(shown) + by)

    def load() -> tuple[Any, ...]:
        found, text = rows("")
        try:
            choices = picker_choices(assistant)
        except RagError:
            choices = gr.Dropdown(choices=[])
        return found, text, choices, choices

    def show(pid: str) -> tuple[Any, ...]:
        p = assistant.paper(pid) if pid else None
        if p is None:
            return "", '<p class="hint">Select a paper to see its abstract.</p>', *(
                gr.Button(interactive=False),) * 3
        card = render.paper_card_html(p, related=shared.related([p.id]).get(p.id, []))
        return (pid, f'<div class="sources">{card}</div>', *(gr.Button(interactive=True),) * 3)

    def pick(evt: gr.SelectData) -> tuple[Any, ...]:
        row = evt.row_value or []
        return show(str(row[0]) if row else "")

    def open_paper(pid: str) -> tuple[Any, ...]:
        pid = (pid or "").strip()
        if assistant.paper(pid) is None:
            return (gr.skip(),) * 6
        return (gr.Tabs(selected="papers"), *show(pid))

    def ask_about(pid: str) -> tuple[Any, ...]:
        p = assistant.paper(pid) if pid else None
        if p is None:
            return gr.skip(), gr.skip()
        return gr.Tabs(selected="chat"), render.ask_about(p)

    def pick_for(pid: str) -> tuple[Any, ...]:
        if not pid:
            return gr.skip(), gr.skip()
        return gr.Tabs(selected="compare"), picked(assistant, pid)

    demo.load(load, None, [table, count, left, right], api_visibility="private")
    query.change(rows, [query], [table, count], queue=False, trigger_mode="always_last",
                 api_visibility="private")
    prev.click(lambda q, shown: step(q, shown, -1), [query, count], [table, count], queue=False,
               api_visibility="private")
    nxt.click(lambda q, shown: step(q, shown, 1), [query, count], [table, count], queue=False,
              api_visibility="private")
    table.select(pick, None, [selected, detail, ask, as_left, as_right], queue=False,
                 api_visibility="private")
    go.click(open_paper, [opened], [tabs, selected, detail, ask, as_left, as_right],
             queue=False, api_visibility="private")
    ask.click(ask_about, [selected], [tabs, question_box], queue=False, api_visibility="private")
    as_left.click(pick_for, [selected], [tabs, left], queue=False, api_visibility="private")
    as_right.click(pick_for, [selected], [tabs, right], queue=False, api_visibility="private")
    return {"table": table, "count": count, "load": load, "prev": prev, "next": nxt}
