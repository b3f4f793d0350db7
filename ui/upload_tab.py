"""The Add abstracts tab: upload .txt files in the seed format; they are checked with the CLI's
rules before anything is indexed, then ingested with visible progress and, without a restart,
searchable (assistant.refresh()), mapped and titled (the atlas is re-read)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from rag.errors import RagError
from ui import render
from ui.render import esc

if TYPE_CHECKING:
    from ui.shared import Shared

log = logging.getLogger(__name__)


def _cache_papers(assistant: Any, ids: Sequence[str]) -> None:
    try:
        assistant.cache_papers(only=ids)
    except Exception as e:  # a speed feature: questions are answered without it
        log.warning("paper cache after the upload failed: %s", e)
PROGRESS = gr.Progress()  # gradio fills in a per-call tracker for a parameter defaulting to it

HELP = ("Add abstracts as `.txt` files in the seed format: a header line, then one abstract per "
        "blank-line-separated paragraph. They are checked first (nothing is indexed if a file "
        "is refused), stored under `data/`, never over the shipped seeds, and are searchable "
        "as soon as they are added.")


def _uploads() -> Any:
    try:
        from rag import uploads  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return None
    return uploads


def _item(x: Any) -> str:
    """A paper (or whatever the library reports) as 'id · title'."""
    if hasattr(x, "id") and hasattr(x, "label"):
        return render.paper_title(x)
    return str(x)


def _list(items: Sequence[Any]) -> str:
    return "".join(f"<li>{esc(_item(x))}</li>" for x in items)


STAGES = {"embedding": "Embedding the new abstracts", "titles": "Writing their titles",
          "map": "Placing them on the map"}


def check_html(check: Any) -> str:
    """What the check found (rag.uploads.UploadCheck), before anything is indexed."""
    errors = list(getattr(check, "errors", ()) or ())
    new = list(getattr(check, "papers", ()) or ()) or (
        [f"{check.new_papers} new abstracts"] if getattr(check, "new_papers", 0) else [])
    dup = list(getattr(check, "duplicates", ()) or ())
    warnings = list(getattr(check, "warnings", ()) or ())
    parts = ['<div class="upload-check">']
    if errors:
        parts.append('<div class="error" role="alert"><b>Refused; nothing was added.</b>'
                     f"<ul>{_list(errors)}</ul></div>")
    if new:
        parts.append(f"<p><b>{len(new)} new paper{'s' if len(new) != 1 else ''}</b> ready to "
                     f"add:</p><ul>{_list(new)}</ul>")
    if dup:
        parts.append(f"<p>{len(dup)} already in the collection (will be skipped):</p>"
                     f"<ul>{_list(dup)}</ul>")
    if warnings:
        parts.append(f'<p class="hint">Skipped paragraphs:</p><ul>{_list(warnings)}</ul>')
    if not errors and not new:
        parts.append("<p>Nothing new to add.</p>")
    parts.append("</div>")
    return "".join(parts)


def report_html(report: Any, dup: Sequence[Any], new_ids: Sequence[str],
                lookup: Callable[[str], Any]) -> str:
    summary = report.summary() if hasattr(report, "summary") else str(report)
    added = [lookup(pid) for pid in new_ids]
    items = "".join(
        f'<li><a class="open-paper" href="#paper-{esc(p.id)}" data-paper="{esc(p.id)}">'
        f"{esc(render.paper_title(p))}</a></li>" for p in added if p is not None)
    warnings = list(getattr(report, "warnings", ()) or ())
    return ('<div class="upload-done"><p><b>Added.</b> ' + esc(summary) + "</p>"
            + (f"<p>New papers (searchable now):</p><ul>{items}</ul>" if items else "")
            + (f"<p>Skipped as duplicates:</p><ul>{_list(dup)}</ul>" if dup else "")
            + (f'<p class="hint">Warnings:</p><ul>{_list(warnings)}</ul>' if warnings else "")
            + "</div>")


def _paths(files: Any) -> list[Path]:
    if not files:
        return []
    items = files if isinstance(files, list) else [files]
    return [Path(str(getattr(f, "name", f))) for f in items]


def build_upload_tab(shared: Shared, after: Callable[[], tuple[Any, ...]],
                     after_outputs: list[Any]) -> None:
    """`after()` refreshes the other tabs (paper table, pickers, map) once papers are added."""
    uploads = _uploads()
    gr.Markdown(HELP)
    files = gr.File(label="Abstract files (.txt)", file_count="multiple", file_types=[".txt"],
                    type="filepath", elem_id="upload-files",
                    interactive=uploads is not None and shared.settings is not None)
    add = gr.Button("Add to the collection", variant="primary", interactive=False,
                    elem_id="upload-add")
    report = gr.HTML("" if uploads is not None else
                     '<p class="hint">Uploads are not available in this version.</p>',
                     elem_id="upload-report")

    def check(paths_in: Any) -> tuple[Any, ...]:
        paths = _paths(paths_in)
        if not paths or uploads is None:
            return "", gr.Button(interactive=False)
        try:
            result = uploads.check_files(shared.settings, paths)
        except RagError as e:
            return (f'<div class="error" role="alert">{esc(e)}</div>',
                    gr.Button(interactive=False))
        ok = bool(result.ok) and result.new_papers > 0
        return check_html(result), gr.Button(interactive=ok)

    def ingest(paths_in: Any, progress: gr.Progress = PROGRESS) -> tuple[Any, ...]:
        paths = _paths(paths_in)
        a = shared.assistant
        if not paths or uploads is None:
            return ("", gr.Button(interactive=False), *after())
        result = uploads.check_files(shared.settings, paths)  # again: files may have changed
        if not result.ok:
            return (check_html(result), gr.Button(interactive=False), *after())
        before = {p.id for p in a.papers()}
        progress(0.0, desc="Checking")

        def step(stage: str, fraction: float) -> None:
            progress(max(0.0, min(1.0, float(fraction))), desc=STAGES.get(stage, stage))

        try:
            rep = uploads.add_files(shared.settings, a.store, a.embedder, a.generator, paths,
                                    progress=step)
        except RagError as e:
            return (f'<div class="error" role="alert">{esc(e)}</div>',
                    gr.Button(interactive=True), *after())
        progress(0.95, desc="Refreshing search and the map")
        a.refresh()
        shared.atlas.reload()
        new_ids = sorted({p.id for p in a.papers()} - before)
        if new_ids:  # their prompts into the engine's host cache (~1.3 s each on the 0.5B),
            # here rather than in a thread of its own that could outlive the app
            progress(0.97, desc="Preparing the new papers for questions")
            _cache_papers(a, new_ids)
        dup = list(getattr(rep, "duplicates", ()) or result.duplicates or ())
        html = report_html(rep, dup, new_ids, a.paper)
        return (html, gr.Button(interactive=False), *after())

    files.change(check, [files], [report, add], queue=False, api_visibility="private")
    add.click(ingest, [files], [report, add, *after_outputs], concurrency_limit=1,
              concurrency_id="ingest", show_progress="full", show_progress_on=[report],
              api_visibility="private")
