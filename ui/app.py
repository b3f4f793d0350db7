"""The browser front end: `create_app(assistant, settings)` builds the Blocks, `serve` launches.

Gradio is imported only in ui/ (here and the tab modules: chat_tab, compare_tab, papers_tab,
map_tab, upload_tab, history_panel). Callbacks keep no state of their own: each browser
session has a `ChatSession` and a `CompareSession` in gr.State (plain data: gradio deep-copies
it), and each request gets its own stop Event (see ui/session.py).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from rag.config import Settings, UISettings, offline_environment

offline_environment()  # GRADIO_ANALYTICS_ENABLED=False etc. must be set before gradio loads

import gradio as gr  # noqa: E402

from rag.errors import ConfigError  # noqa: E402
from ui.assets import CSS, HEAD  # noqa: E402
from ui.auth import LoginGuard, LoginThrottle, exposure_error  # noqa: E402
from ui.chat_tab import TITLE, build_chat_tab, chat_respond, queue_waiting  # noqa: E402
from ui.compare_tab import build_compare_tab  # noqa: E402
from ui.history_panel import build_history_sidebar, wire_history  # noqa: E402
from ui.map_tab import build_map_tab  # noqa: E402
from ui.papers_tab import build_papers_tab  # noqa: E402
from ui.shared import Shared  # noqa: E402
from ui.upload_tab import build_upload_tab  # noqa: E402

__all__ = ["chat_respond", "create_app", "launch_kwargs", "queue_waiting", "serve", "main"]

if TYPE_CHECKING:
    from rag.assistant import Assistant

log = logging.getLogger(__name__)

def create_app(assistant: Assistant, settings: Settings | None = None) -> gr.Blocks:
    """The whole UI, queued per settings.ui; serving is separate (see `serve`)."""
    ui = settings.ui if settings is not None else UISettings()
    shared = Shared.build(assistant, settings)
    # delete_cache: Gradio's copies of downloads older than a day go, checked hourly
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(3600, 86400)) as demo:
        gr.HTML(f'<div class="app-head"><b>{TITLE}</b> <span>answers drawn only from the '
                "paper abstracts, each claim linked to its sentence</span></div>")
        side = build_history_sidebar() if shared.conversations is not None else None
        owner = gr.State("")
        with gr.Tabs() as tabs:
            with gr.Tab("Chat", id="chat"):
                chat = build_chat_tab(shared, demo, ui, owner, side["items"] if side else None)
            with gr.Tab("Compare", id="compare"):
                compare = build_compare_tab(assistant, shared.related_for)
            with gr.Tab("Papers", id="papers"):
                papers = build_papers_tab(shared, tabs, chat["box"], compare["left"],
                                          compare["right"], demo)
            with gr.Tab("Map", id="map") as map_tab:
                atlas = build_map_tab(shared, tabs, chat["box"], compare["left"],
                                      chat["session"], demo)
            with gr.Tab("Add abstracts", id="upload"):
                def after() -> tuple[Any, ...]:
                    return (*papers["load"](), *atlas["draw"]())

                build_upload_tab(shared, after, [papers["table"], papers["count"],
                                                 compare["left"], compare["right"],
                                                 atlas["plot"], atlas["note"], atlas["pick"]])
        map_tab.select(atlas["draw"], [chat["session"]], [atlas["plot"], atlas["note"],
                                                          atlas["pick"]],
                       queue=False, api_visibility="private")
        if side is not None:
            wire_history(shared, demo, side, owner, chat)
    demo.queue(default_concurrency_limit=concurrency(ui, assistant), max_size=ui.max_queue)
    return demo


def concurrency(ui: UISettings, assistant: Any) -> int:
    """Chats served at once: the setting, or (0) as many as the engine runs in parallel."""
    if ui.concurrency_limit:
        return ui.concurrency_limit
    return max(1, int(getattr(getattr(assistant, "generator", None), "parallel", 1) or 1))


def launch_kwargs(ui: UISettings) -> dict[str, Any]:
    """gradio's launch() arguments; raises ConfigError for a host beyond loopback without a
    login (see ui/auth.py). Logins, when set, are throttled per client address."""
    from starlette.middleware import Middleware

    why = exposure_error(ui)
    if why:
        raise ConfigError(why)
    auth = (ui.auth_user, ui.auth_password) if ui.auth_user else None
    kwargs: dict[str, Any] = dict(
        server_name=ui.host, server_port=ui.port, auth=auth, css=CSS, head=HEAD,
        show_error=False, ssr_mode=False, pwa=False, mcp_server=False, footer_links=[],
        favicon_path=None)
    if auth is not None:
        throttle = LoginThrottle(ui.login_failures, ui.login_pause_seconds)
        kwargs["app_kwargs"] = {"middleware": [Middleware(LoginGuard, throttle=throttle)]}
    return kwargs


def serve(app: gr.Blocks, settings: Settings, **overrides: Any) -> Any:
    """Launch on settings.ui host/port/auth; `overrides` (tests: port, prevent_thread_lock)."""
    kwargs = launch_kwargs(settings.ui)
    kwargs.update(overrides)
    return app.launch(**kwargs)


PAPER_CACHE_REFRESH_S = 600.0


def main(settings: Settings | None = None) -> None:
    """`rag serve`: build the assistant, load its models in the background (a question
    asked meanwhile waits for them) and serve the UI."""
    from rag.assistant import Assistant
    from rag.config import load_settings

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = settings or load_settings()
    why = exposure_error(settings.ui)  # before any model loads
    if why:
        raise ConfigError(why)
    assistant = Assistant.from_settings(settings)
    stopping = threading.Event()  # SIGTERM/SIGINT: serving and background titles end

    def warm_up() -> None:
        try:
            assistant.warm_up()
        except Exception as e:  # the first question reports it properly; the server stays up
            log.warning("warm-up failed: %s", e)
            return
        if not settings.titles.enabled or stopping.is_set():
            cache_papers()
            return
        try:  # papers the ingest left untitled (make run: --no-titles), while chat is open;
            # they pause while a question is answered, so the chat is not slowed by them
            from rag.ingest import write_missing_titles

            written = write_missing_titles(settings, assistant.store, assistant.generator,
                                           stopping, assistant.answering)
            if written:
                assistant.refresh()
                log.info("wrote %d paper titles in the background", written)
        except Exception as e:  # titles are a nicety: the labels stay
            log.warning("background titles failed: %s", e)
        cache_papers()

    def cache_papers() -> None:  # after the titles: a prompt starts with its paper's label
        """Fill the paper cache, then keep it filled: the host cache is least-recently-used,
        so other prompts (lists, comparisons, follow-ups) push out papers nobody asked about
        for a while; every `PAPER_CACHE_REFRESH_S` the papers go through again, which costs
        a restore and one token for each one still there."""
        while not stopping.is_set():
            try:
                run = assistant.cache_papers(stopping)
            except Exception as e:  # a speed feature: questions are answered without it
                log.warning("paper cache failed: %s", e)
                return
            if run.skipped:
                log.info("paper cache: not filled (%s)", run.skipped)
                return
            stopping.wait(PAPER_CACHE_REFRESH_S)

    background = threading.Thread(target=warm_up, name="rag-warm-up", daemon=True)
    background.start()
    app = create_app(assistant, settings)
    url = f"http://{settings.ui.host}:{settings.ui.port}"
    log.info("serving on %s (concurrency %d, queue %d)", url, concurrency(settings.ui, assistant),
             settings.ui.max_queue)

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s received: closing the server", signal.Signals(signum).name)
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):  # a service manager's stop is a clean exit
        signal.signal(sig, on_signal)
    serve(app, settings, prevent_thread_lock=True)
    while not stopping.wait(0.5):
        pass
    app.close()  # the index is only read while serving: nothing is left half-written
    # a title call in flight ends after its current token (`stopping`); wait for it, or the
    # interpreter exits under a running torch op and the process aborts ("terminate called
    # without an active exception", seen with the transformers engine)
    background.join(timeout=10)
    loading = background.is_alive()
    if loading:
        log.warning("background work still running at exit (loading the models?)")
    log.info("server closed")
    if loading:
        # still loading the models (a title call would have ended on `stopping`): nothing is
        # being written, but letting the interpreter finalise under a thread inside llama.cpp's
        # loader aborts the process ("FATAL: exception not rethrown", exit -6), so the process
        # ends here without that finalisation
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
