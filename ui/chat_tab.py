"""The Chat tab: the conversation, its sources panel, export, and the saved-conversation list.

Callbacks keep no state of their own: each browser session has a `ChatSession` in gr.State
(plain data: gradio deep-copies it), and each request gets its own stop Event (in
`session.STOPS`, keyed by a random request id), stream and worker thread (see ui/session.py).
Questions are admitted before they are queued: too long, too many from one session, or a full
queue is said at once. A finished answer is saved (ui/history.py) under the browser's id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gradio as gr

from rag.config import AnswerSettings, UISettings
from rag.types import Answer, Comparison, Paper, Sources
from ui import render
from ui.session import (
    STOPS,
    ChatSession,
    export_conversation,
    paper_lookup,
    pump,
    refusal,
)

if TYPE_CHECKING:
    from rag.assistant import Assistant
    from ui.shared import Shared

log = logging.getLogger(__name__)

TITLE = "ICML 2026 abstracts assistant"
EXAMPLES = [
    "What does SSL4RL use as a reward signal?",
    "Which papers study unlearning or privacy leakage in LLMs?",
    "Compare SSL4RL and TaRO",
    "What problem does DefensiveKV address?",
]
PLACEHOLDER = (f"### {TITLE}\nAsk about the ICML 2026 papers in the collection. Answers come "
               "only from the abstracts, and every claim links to the sentence behind it.")


def _outputs(chat: Any = None, status: Any = None, sources: Any = None, export: Any = None,
             send: Any = None, stop: Any = None) -> tuple[Any, ...]:
    """One value per chat output, gr.skip() where nothing changes (less to stream)."""
    return tuple(gr.skip() if v is None else v for v in (chat, status, sources, export, send,
                                                         stop))


def _finish(**values: Any) -> tuple[Any, ...]:
    """The last update of a request: re-enable Send, disable Stop."""
    return _outputs(**values, send=gr.Button(interactive=True), stop=gr.Button(interactive=False))


Related = Callable[[Answer], Mapping[str, Sequence[Paper]]]


def chat_respond(assistant: Assistant, session: ChatSession,
                 save: Callable[[Answer], None] | None = None,
                 related: Related | None = None) -> Iterator[tuple[Any, ...]]:
    """Stream one answer into the session's last message; the generator behind Send.
    `save` stores the finished answer (never fails the answer); `related` gives each shown
    paper's nearest papers."""
    question, epoch = session.pending, session.epoch
    if not question:  # a second trigger (Send while busy, empty box): nothing to do
        yield _outputs()
        return
    rid, stop = session.request, session.stop
    session.pending = ""
    messages = session.messages
    idx = len(messages) - 1
    if stop.is_set():  # Stop pressed while waiting in the queue: never start the model
        messages[idx] = _bot(render.streaming_html("", "(stopped before it started)"))
        session.busy = False
        STOPS.close(rid)
        yield _finish(chat=messages, status=render.status_html("stopped", None, "Stopped"))
        return
    scope = str(len(session.answers) + 1)
    history = session.turns()
    known: dict[str, Paper] = {}
    retrieved: Sources | None = None
    comparison: Comparison | None = None

    def halted(hint: str) -> Any:  # the panel once no answer will come
        return (render.retrieved_html(retrieved.hits, retrieved.papers, hint)
                if retrieved is not None and retrieved.hits else None)

    run = pump(lambda: assistant.stream(question, history, stop), stop)
    try:
        for pr in run:
            if session.epoch != epoch:  # "New conversation" was pressed meanwhile
                yield _finish()
                return
            if pr.kind in ("tick", "status"):
                yield _outputs(status=render.status_html(pr.stage, pr.elapsed))
            elif pr.kind == "sources" and pr.sources is not None:
                known = {p.id: p for p in pr.sources.papers}
                retrieved = pr.sources
                yield _outputs(status=render.status_html(pr.stage, pr.elapsed),
                               sources=render.retrieved_html(pr.sources.hits,
                                                             pr.sources.papers))
            elif pr.kind == "compared" and pr.comparison is not None:
                comparison = pr.comparison
                messages[idx] = _bot(render.comparison_streaming_html(comparison, scope))
                yield _outputs(chat=messages,
                               sources=render.comparison_sources_html(comparison, question,
                                                                      scope))
            elif pr.kind == "token":
                bubble = (render.comparison_streaming_html(comparison, scope, pr.text)
                          if comparison is not None else render.streaming_html(pr.text))
                messages[idx] = _bot(bubble)
                yield _outputs(chat=messages,
                               status=render.status_html("writing", pr.elapsed))
            elif pr.kind == "final" and pr.answer is not None:
                answer = pr.answer
                session.answers.append(answer)
                if save is not None:
                    try:
                        save(answer)
                    except Exception:  # saving is a convenience: the answer is shown anyway
                        log.exception("saving the conversation failed")
                papers = paper_lookup(assistant, known, answer)
                near = related(answer) if related is not None else None
                messages[idx] = _bot(render.answer_html(answer, scope, papers))
                status = render.done_status_html(answer)
                if stop.is_set():
                    status = render.status_html("stopped", None, "Stopped; partial answer kept")
                yield _finish(chat=messages, status=status,
                              sources=render.sources_html(answer, papers, scope, near),
                              export=_export_button(assistant, session.answers))
                return
            elif pr.kind == "stopped":
                messages[idx] = _bot(
                    render.comparison_streaming_html(comparison, scope, pr.text, "(stopped)")
                    if comparison is not None else render.streaming_html(pr.text, "(stopped)"))
                yield _finish(chat=messages, status=render.status_html("stopped", None, "Stopped"),
                              sources=halted("Stopped before the answer was finished."))
                return
            elif pr.kind == "error":
                messages[idx] = _bot(render.error_html(pr.error))
                yield _finish(chat=messages, status=render.status_html("error", None, "Failed"),
                              sources=halted("No answer: see the message in the chat."))
                return
        yield _finish()
    finally:
        if session.epoch == epoch:  # after a clear, a newer request may own the flag
            session.busy = False
        run.wait()  # a stopped model may still be in its prefill: keep the queue slot till then
        STOPS.close(rid)


def _bot(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def _export_button(assistant: Assistant, answers: list[Answer]) -> Any:
    """The download, ready before the click (a DownloadButton serves its current value)."""
    try:
        papers = {p.id: p for p in assistant.papers()}
        path = export_conversation(answers, papers)
    except Exception:  # the export is a convenience; never let it break the answer
        log.exception("conversation export failed")
        return gr.DownloadButton(interactive=False)
    return gr.DownloadButton(value=str(path), interactive=True)


def queue_waiting(demo: gr.Blocks) -> tuple[int, int | None]:
    """(events waiting in the app's queue, its max size); (0, None) before it is set up."""
    q = getattr(demo, "_queue", None)
    if q is None:
        return 0, None
    return len(q), q.max_size


def build_chat_tab(shared: Shared, demo: gr.Blocks, ui: UISettings, owner: Any = None,
                   conv_list: Any = None) -> dict[str, Any]:
    """The chat; with `owner` (a gr.State holding the saved-conversation key) and `conv_list`
    (the side list, ui/history_panel.py), finished answers are saved and listed."""
    assistant = shared.assistant
    # one cap for a question, the library's: longer ones are refused here, before the queue
    answer = shared.settings.answer if shared.settings is not None else AnswerSettings()
    max_chars = answer.max_question_chars
    # A plain, deep-copyable default: gradio copies it for each new browser session. (A
    # factory would also add a queued load event that can overwrite a session after its first
    # question was taken.)
    session = gr.State(ChatSession(), delete_callback=lambda s: STOPS.stop(s.request))
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            chatbot = gr.Chatbot(
                elem_id="chat", height=600, placeholder=PLACEHOLDER,
                examples=[{"text": q} for q in EXAMPLES], latex_delimiters=[],
                feedback_options=None, group_consecutive_messages=False, buttons=["copy"],
                show_label=False)
            status = gr.HTML(render.status_html(""), elem_id="status")
            with gr.Row():
                box = gr.Textbox(placeholder="Ask about the ICML 2026 papers…", show_label=False,
                                 scale=6, elem_id="question", autofocus=True,
                                 max_length=max_chars)
                send = gr.Button("Send", variant="primary", scale=1, min_width=80,
                                 elem_id="send")
                stop = gr.Button("Stop", variant="stop", scale=1, min_width=80,
                                 interactive=False, elem_id="stop")
            with gr.Row():
                export = gr.DownloadButton("Export conversation (Markdown)", size="sm",
                                           interactive=False, elem_id="export-chat")
                clear = gr.Button("New conversation", size="sm", elem_id="clear")
        with gr.Column(scale=2):
            sources = gr.HTML(render.empty_sources_html(), elem_id="sources")

    def submit(question: str, s: ChatSession) -> tuple[Any, ...]:
        q = (question or "").strip()
        skip = (gr.skip(),) * 5
        if s.busy:
            gr.Warning("Wait for the current answer, or press Stop.")
            return skip
        waiting, max_queue = queue_waiting(demo)
        why = refusal(s, q, time.monotonic(), max_chars, ui.questions_per_minute,
                      waiting, max_queue)
        if why:  # told at once; the question stays in the box to retry
            gr.Warning(why)
            return (gr.skip(), gr.skip(), render.status_html("error", None, why), gr.skip(),
                    gr.skip())
        s.asked.append(time.monotonic())
        s.start(q)
        s.messages.append({"role": "user", "content": render.user_html(q)})
        s.messages.append(_bot(render.streaming_html("")))
        return ("", s.messages, render.status_html("waiting", None, "Waiting for a free slot"),
                gr.Button(interactive=False), gr.Button(interactive=True))

    def respond(s: ChatSession, who: str = "") -> Iterator[tuple[Any, ...]]:
        store = shared.conversations

        def save(answer: Answer) -> None:
            if store is not None and who:
                s.conversation = store.add(who, s.conversation, answer)

        yield from chat_respond(assistant, s, save, shared.related_for)

    def recover(s: ChatSession) -> tuple[Any, ...]:
        """After `respond` failed: the queue turned it away (full) or it crashed."""
        if s.busy and s.pending:  # never started: the queue was full when it arrived
            s.pending, s.busy = "", False
            STOPS.close(s.request)
            why = "The server is busy and could not take the question. Send it again."
            if s.messages:
                s.messages[-1] = _bot(render.error_html(why))
            return _finish(chat=s.messages, status=render.status_html("error", None, why))
        return _finish()

    def stop_now(s: ChatSession) -> Any:
        """Sets the request's stop flag. The status line is the answer's own stream's to write
        ("Stopping…", then "Stopped"): this direct reply can reach the page after the stream's
        last update, and a status here would overwrite the final one."""
        STOPS.stop(s.request)
        return gr.Button(interactive=False)

    def clear_all(s: ChatSession) -> tuple[Any, ...]:
        s.clear()
        return ([], render.status_html(""), render.empty_sources_html(),
                gr.DownloadButton(value=None, interactive=False))

    def example(evt: gr.SelectData) -> str:
        value = evt.value
        return str(value.get("text", "")) if isinstance(value, dict) else str(value)

    outs = [chatbot, status, sources, export, send, stop]
    pre: dict[str, Any] = dict(fn=submit, inputs=[box, session],
                               outputs=[box, chatbot, status, send, stop], queue=False,
                               api_visibility="private")
    run: dict[str, Any] = dict(fn=respond, inputs=[session] + ([owner] if owner else []),
                               outputs=outs, show_progress="full",
                               show_progress_on=[status], api_visibility="private")
    failed: dict[str, Any] = dict(fn=recover, inputs=[session], outputs=outs, queue=False,
                                  api_visibility="private")
    answered = [box.submit(**pre).then(**run), send.click(**pre).then(**run),
                chatbot.example_select(example, None, box, queue=False).then(**pre).then(**run)]
    for dep in answered:
        dep.failure(**failed)
    if owner is not None and conv_list is not None:
        from ui.history_panel import list_update

        for dep in answered:
            dep.then(lambda who, s: list_update(shared, who, s.conversation), [owner, session],
                     [conv_list], queue=False, api_visibility="private")
    stop.click(stop_now, [session], [stop], queue=False, api_visibility="private")
    clear.click(clear_all, [session], [chatbot, status, sources, export], queue=False,
                api_visibility="private")
    chatbot.clear(clear_all, [session], [chatbot, status, sources, export], queue=False,
                  api_visibility="private")
    return {"box": box, "chatbot": chatbot, "session": session, "status": status,
            "sources": sources, "export": export, "clear": clear}


