"""The side list of saved conversations: open, rename, delete (the store is ui/history.py).

The owner key is the user's name when a login is on, else a random id the browser keeps in
localStorage (gr.BrowserState, encrypted with a secret kept under data/, so it outlives a
server restart). It is set by a page-load event that never queues.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import gradio as gr

from ui import render
from ui.chat_tab import _bot, _export_button
from ui.history import list_label, owner_key
from ui.session import ChatSession, paper_lookup

if TYPE_CHECKING:
    from ui.shared import Shared

STORAGE_KEY = "icml-rag-browser"
EMPTY = "Finished answers are saved here; they survive a restart and a closed tab."


def list_update(shared: Shared, owner: str, current: str = "") -> Any:
    """The side list's new choices, the open conversation selected."""
    store = shared.conversations
    infos = store.conversations(owner) if store is not None and owner else []
    now = time.time()
    choices = [(list_label(i, now), i.id) for i in infos]
    value = current if any(i.id == current for i in infos) else None
    return gr.Radio(choices=choices, value=value,
                    label=f"Saved conversations ({len(infos)})" if infos else EMPTY)


def build_history_sidebar() -> dict[str, Any]:
    with gr.Sidebar(label="Saved conversations", open=True, width=300, elem_id="history"):
        gr.Markdown("**Saved conversations**")
        items = gr.Radio(choices=[], label=EMPTY, elem_id="conv-list")
        name = gr.Textbox(label="Name of the selected conversation", elem_id="conv-name",
                          max_length=200)
        with gr.Row():
            rename = gr.Button("Rename", size="sm", elem_id="conv-rename", min_width=60)
            delete = gr.Button("Delete", size="sm", variant="stop", elem_id="conv-delete",
                               min_width=60)
    return {"items": items, "name": name, "rename": rename, "delete": delete}


def wire_history(shared: Shared, demo: gr.Blocks, side: dict[str, Any], owner: Any,
                 chat: dict[str, Any]) -> None:
    browser = gr.BrowserState("", storage_key=STORAGE_KEY, secret=shared.browser_secret())
    items, name = side["items"], side["name"]
    session = chat["session"]
    chat_outs = [chat["chatbot"], chat["status"], chat["sources"], chat["export"]]

    def init(bid: str, request: gr.Request) -> tuple[Any, ...]:
        bid = bid if isinstance(bid, str) and len(bid) >= 16 else uuid.uuid4().hex
        who = owner_key(bid, getattr(request, "username", None))
        return bid, who, list_update(shared, who)

    def title_of(who: str, cid: str) -> str:
        store = shared.conversations
        infos = store.conversations(who) if store is not None and who else []
        return next((i.title for i in infos if i.id == cid), "")

    def open_one(cid: str | None, who: str, s: ChatSession) -> tuple[Any, ...]:
        store = shared.conversations
        if not cid or store is None or not who:
            return (gr.skip(),) * 6
        if s.busy:
            gr.Warning("Wait for the current answer, or press Stop, before opening another.")
            return (gr.skip(),) * 6
        answers = store.load(who, cid)
        s.clear()
        s.conversation = cid
        s.answers = list(answers)
        sources: Any = render.empty_sources_html()
        for i, a in enumerate(answers, 1):
            papers = paper_lookup(shared.assistant, {}, a)
            s.messages.append({"role": "user", "content": render.user_html(a.question)})
            s.messages.append(_bot(render.answer_html(a, str(i), papers)))
            if i == len(answers):
                sources = render.sources_html(a, papers, str(i), shared.related_for(a))
        export = (_export_button(shared.assistant, s.answers) if answers
                  else gr.DownloadButton(value=None, interactive=False))
        status = render.status_html("done", None, f"Reopened: {len(answers)} turn"
                                    f"{'s' if len(answers) != 1 else ''}")
        return s.messages, status, sources, export, title_of(who, cid), s.conversation

    def rename(cid: str | None, title: str, who: str, s: ChatSession) -> Any:
        store = shared.conversations
        if not cid or store is None or not who:
            gr.Warning("Select a conversation to rename.")
            return gr.skip()
        if not store.rename(who, cid, title):
            gr.Warning("Give the conversation a name.")
        return list_update(shared, who, cid)

    def delete(cid: str | None, who: str, s: ChatSession) -> tuple[Any, ...]:
        store = shared.conversations
        if not cid or store is None or not who:
            gr.Warning("Select a conversation to delete.")
            return (gr.skip(),) * 6
        store.delete(who, cid)
        if s.conversation == cid and not s.busy:  # the open one: the chat starts afresh
            s.clear()
            return (list_update(shared, who), "", [], render.status_html(""),
                    render.empty_sources_html(), gr.DownloadButton(value=None,
                                                                   interactive=False))
        if s.conversation == cid:
            s.conversation = ""  # a running answer will start a new saved conversation
        return (list_update(shared, who, s.conversation), "", *(gr.skip(),) * 4)

    demo.load(init, [browser], [browser, owner, items], queue=False, api_visibility="private")
    items.input(open_one, [items, owner, session], [*chat_outs, name, items], queue=False,
                api_visibility="private")
    rename_args: dict[str, Any] = dict(fn=rename, inputs=[items, name, owner, session],
                                       outputs=[items], queue=False, api_visibility="private")
    side["rename"].click(**rename_args)
    name.submit(**rename_args)
    chat["clear"].click(lambda who: (list_update(shared, who), ""), [owner], [items, name],
                        queue=False, api_visibility="private")  # nothing open any more
    side["delete"].click(delete, [items, owner, session], [items, name, *chat_outs],
                         queue=False, api_visibility="private")
