"""The Compare tab: two paper pickers, the table with per-cell citations, Markdown export.

Up to paging.PICKER_LIMIT papers each picker lists every paper, as a filterable dropdown.
Above it (a large corpus) no paper list is sent: a picker takes what is typed (an id, a name or
a description, resolved by the comparison as `rag compare` does) or the paper the Papers or
Map tab hands it. (Choices recomputed on each key, via Dropdown.key_up, were tried: Gradio
6.31's dropdown then sometimes kept an earlier key's list, or showed one row's label on
another, so a click could pick a paper other than the one it read.)"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gradio as gr

from rag.types import Answer, Comparison, Paper
from ui import paging, render
from ui.session import STOPS, CompareSession, export_comparison, paper_lookup, pump

if TYPE_CHECKING:
    from rag.assistant import Assistant

log = logging.getLogger(__name__)
SCOPE = "cmp"  # anchor prefix of this tab's citations: never collides with chat turns


def compare_respond(assistant: Assistant, cs: CompareSession, left: str, right: str,
                    related: Callable[[Answer], Mapping[str, Sequence[Paper]]] | None = None
                    ) -> Iterator[tuple[Any, ...]]:
    """(status, table, sources, export, run, stop) updates for one comparison; `related`
    gives each shown paper's nearest papers."""
    skip = gr.skip()
    rid, stop = cs.request, cs.stop
    known: dict[str, Paper] = {}
    synthesis = ""
    comparison: Comparison | None = None

    def finish(status: str, table: Any = skip, sources: Any = skip,
               export: Any = skip) -> tuple[Any, ...]:
        return (status, table, sources, export, gr.Button(interactive=True),
                gr.Button(interactive=False))

    if stop.is_set():  # Stop pressed while waiting in the queue
        STOPS.close(rid)
        yield finish(render.status_html("stopped", None, "Stopped"))
        return
    run = pump(lambda: assistant.compare_stream(left, right, (), stop), stop)
    try:
        for pr in run:
            if pr.kind in ("tick", "status"):
                yield (render.status_html(pr.stage, pr.elapsed), skip, skip, skip, skip, skip)
            elif pr.kind == "sources" and pr.sources is not None:
                known = {p.id: p for p in pr.sources.papers}
                yield (render.status_html(pr.stage, pr.elapsed), skip,
                       render.retrieved_html(pr.sources.hits, pr.sources.papers), skip, skip, skip)
            elif pr.kind == "compared" and pr.comparison is not None:
                comparison = pr.comparison
                yield (skip, render.comparison_streaming_html(comparison, SCOPE),
                       render.comparison_sources_html(comparison, "", SCOPE), skip, skip, skip)
            elif pr.kind == "token":
                synthesis = pr.text
                table = (render.comparison_streaming_html(comparison, SCOPE, synthesis)
                         if comparison is not None else render.streaming_html(synthesis))
                yield (render.status_html("writing", pr.elapsed), table, skip, skip, skip, skip)
            elif pr.kind == "final" and pr.answer is not None:
                answer = pr.answer
                cs.answer = answer
                papers = paper_lookup(assistant, known, answer)
                yield finish(render.done_status_html(answer),
                             render.answer_html(answer, SCOPE, papers),
                             render.sources_html(answer, papers, SCOPE,
                                                 related(answer) if related else None),
                             _export_button(assistant, answer))
                return
            elif pr.kind == "stopped":
                note = "(stopped)"
                table = (render.comparison_streaming_html(comparison, SCOPE, synthesis, note)
                         if comparison is not None else render.streaming_html(synthesis, note))
                yield finish(render.status_html("stopped", None, "Stopped"), table)
                return
            elif pr.kind == "error":
                yield finish(render.status_html("error", None, "Failed"),
                             render.error_html(pr.error))
                return
        yield finish(render.status_html(""))
    finally:
        run.wait()  # hold the queue slot until a stopped model has really finished
        STOPS.close(rid)


def _export_button(assistant: Assistant, answer: Answer) -> Any:
    try:
        path = export_comparison(answer, {p.id: p for p in assistant.papers()})
    except Exception:  # a convenience: never let it break the comparison
        log.exception("comparison export failed")
        return gr.DownloadButton(interactive=False)
    return gr.DownloadButton(value=str(path), interactive=True)


def large(assistant: Assistant) -> bool:
    return len(paging.catalog(assistant).papers()) > paging.PICKER_LIMIT


def picker_choices(assistant: Assistant) -> Any:
    """The pickers' update when the papers are (re)loaded: every paper as a choice, or, for a
    large corpus, none and free text."""
    papers = paging.catalog(assistant).papers()
    if len(papers) <= paging.PICKER_LIMIT:
        return gr.Dropdown(choices=render.paper_choices(papers), allow_custom_value=False)
    return gr.Dropdown(choices=[], allow_custom_value=True,
                       info=f"{len(papers):,} papers: type an id, name or description, or "
                            "pick one in the Papers tab")


def picked(assistant: Assistant, pid: str) -> Any:
    """A picker set to paper `pid` (from the Papers tab): with a large corpus its one choice
    is that paper, so the picker shows its title and not a bare id."""
    p = assistant.paper(pid)
    if p is None or not large(assistant):
        return gr.Dropdown(value=pid)
    return gr.Dropdown(choices=render.paper_choices([p]), value=pid)


def build_compare_tab(assistant: Assistant,
                      related: Callable[[Answer], Mapping[str, Sequence[Paper]]] | None = None
                      ) -> dict[str, Any]:
    cs = gr.State(CompareSession(), delete_callback=lambda s: STOPS.stop(s.request))
    gr.Markdown("Pick two papers. Each cell quotes its own abstract; "
                "greyed cells are not stated there.")
    with gr.Row():
        left = gr.Dropdown(label="First paper", choices=[], elem_id="left", filterable=True)
        right = gr.Dropdown(label="Second paper", choices=[], elem_id="right", filterable=True)
    with gr.Row():
        run = gr.Button("Compare", variant="primary", elem_id="compare-run")
        stop = gr.Button("Stop", variant="stop", interactive=False, elem_id="compare-stop")
        export = gr.DownloadButton("Export comparison (Markdown)", interactive=False,
                                   elem_id="export-compare")
    status = gr.HTML(render.status_html(""), elem_id="compare-status")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            table = gr.HTML("", elem_id="compare-table")
        with gr.Column(scale=2):
            sources = gr.HTML(render.empty_sources_html(), elem_id="compare-sources")

    def start(a: str | None, b: str | None, s: CompareSession) -> tuple[Any, ...]:
        if not a or not b:
            raise gr.Error("Pick two papers to compare.")
        if a == b:
            raise gr.Error("Pick two different papers.")
        s.start()
        return (render.status_html("waiting", None, "Waiting for a free slot"),
                gr.Button(interactive=False), gr.Button(interactive=True))

    def respond(a: str, b: str, s: CompareSession) -> Iterator[tuple[Any, ...]]:
        yield from compare_respond(assistant, s, a, b, related)

    def stop_now(s: CompareSession) -> Any:
        """Sets the stop flag; the status is the stream's to write (see chat_tab.stop_now)."""
        STOPS.stop(s.request)
        return gr.Button(interactive=False)

    def recover(s: CompareSession) -> tuple[Any, ...]:
        """After `respond` failed (the queue was full, or it crashed): buttons back."""
        STOPS.close(s.request)
        why = "The comparison could not run (the server may be busy). Press Compare again."
        return (render.status_html("error", None, why), gr.Button(interactive=True),
                gr.Button(interactive=False))

    run.click(start, [left, right, cs], [status, run, stop], queue=False,
              api_visibility="private").success(
        respond, [left, right, cs], [status, table, sources, export, run, stop],
        show_progress="full", show_progress_on=[status], api_visibility="private").failure(
        recover, [cs], [status, run, stop], queue=False, api_visibility="private")
    stop.click(stop_now, [cs], [stop], queue=False, api_visibility="private")

    return {"left": left, "right": right}
