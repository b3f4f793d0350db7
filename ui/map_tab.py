"""The Map tab: the papers as a Plotly scatter coloured by topic; click (or pick) a paper, then
ask about it or compare it. gr.Plot has no click event: ui/assets.py's script forwards
Plotly's `plotly_click` to a hidden textbox and button (#map-click, #map-click-go)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gradio as gr

from rag.errors import RagError
from ui import render
from ui.atlas_view import figure, summary
from ui.session import ChatSession

if TYPE_CHECKING:
    from ui.shared import Shared

NO_SELECTION = '<p class="hint">Click a point (or pick a paper above) to select it.</p>'


def cited_ids(s: ChatSession | None) -> list[str]:
    """Papers of the session's last answer: cited, or compared."""
    if s is None or not s.answers:
        return []
    a = s.answers[-1]
    ids = [c.paper_id for c in render.all_citations(a)]
    if a.comparison is not None:
        ids += [x.paper.id for x in (a.comparison.left, a.comparison.right) if x.paper]
    return list(dict.fromkeys(ids))


def build_map_tab(shared: Shared, tabs: gr.Tabs, question_box: gr.Textbox,
                  left: gr.Dropdown, session: gr.State, demo: gr.Blocks) -> dict[str, Any]:
    assistant = shared.assistant
    note = gr.Markdown(summary(None), elem_id="map-note")
    plot = gr.Plot(elem_id="map", show_label=False)
    pick = gr.Dropdown(label="…or pick a paper", choices=[], elem_id="map-pick",
                       filterable=True)
    detail = gr.HTML(NO_SELECTION, elem_id="map-detail")
    with gr.Row():
        ask = gr.Button("Ask about this", interactive=False, elem_id="map-ask")
        compare = gr.Button("Compare with…", interactive=False, elem_id="map-compare")
    with gr.Row(elem_classes=["bridge"]):
        clicked = gr.Textbox(elem_id="map-click", show_label=False, container=False)
        go = gr.Button("select", elem_id="map-click-go")

    def draw(s: ChatSession | None = None) -> tuple[Any, ...]:
        atlas = shared.atlas.get()
        try:
            papers = {p.id: p for p in assistant.papers()}
        except RagError:
            papers = {}
        choices = [(render.paper_title(p), p.id) for p in papers.values()]
        fig = figure(atlas, papers, cited_ids(s)) if atlas is not None else None
        return fig, summary(atlas), gr.Dropdown(choices=choices)

    def select(pid: str | None) -> tuple[Any, ...]:
        p = assistant.paper(pid) if pid else None
        if p is None:
            return gr.skip(), NO_SELECTION, *(gr.Button(interactive=False),) * 2
        near = shared.related([p.id]).get(p.id, [])
        card = render.paper_card_html(p, related=near)
        return (gr.Dropdown(value=p.id), f'<div class="sources">{card}</div>',
                *(gr.Button(interactive=True),) * 2)

    def ask_about(pid: str | None) -> tuple[Any, ...]:
        p = assistant.paper(pid) if pid else None
        if p is None:
            return gr.skip(), gr.skip()
        return gr.Tabs(selected="chat"), render.ask_about(p)

    def compare_with(pid: str | None) -> tuple[Any, ...]:
        if not pid:
            return gr.skip(), gr.skip()
        return gr.Tabs(selected="compare"), gr.Dropdown(value=pid)

    private: dict[str, Any] = dict(queue=False, api_visibility="private")
    # drawn when the tab is opened (app.py), not on page load: 8+ pages opening at once on 2
    # cores must not each wait for a figure nobody looks at yet
    sel_out = [pick, detail, ask, compare]
    pick.input(select, [pick], sel_out, **private)
    go.click(select, [clicked], sel_out, **private)
    ask.click(ask_about, [pick], [tabs, question_box], **private)
    compare.click(compare_with, [pick], [tabs, left], **private)
    return {"plot": plot, "note": note, "pick": pick, "draw": draw}
