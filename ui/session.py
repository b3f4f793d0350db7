"""Per-browser-session state and the stream pump (no gradio: tested with a fake assistant).

`pump` runs one `Assistant.stream` call in its own worker thread and turns its events into
`Progress` updates, with a tick every second so the status line can count while the model is
silent (prefill on 2 CPU cores takes seconds). Every call gets its own queue, thread and stop
Event; nothing is shared between users.
"""

from __future__ import annotations

import atexit
import logging
import queue
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from rag.errors import RagError
from rag.types import (
    Answer,
    Compared,
    Comparison,
    Event,
    Final,
    Paper,
    Sources,
    Status,
    Token,
    Turn,
)

log = logging.getLogger(__name__)

Kind = Literal["tick", "status", "sources", "compared", "token", "final", "error", "stopped"]
_DONE = object()
STOP_GRACE_SECONDS = 3.0  # after Stop, wait this long for the library's own partial Final
LINGER_SECONDS = 120.0  # longest a stopped prefill may still hold its queue slot


@dataclass(frozen=True)
class Progress:
    kind: Kind
    stage: str
    elapsed: float  # seconds since the call started
    text: str = ""  # all tokens so far
    sources: Sources | None = None
    comparison: Comparison | None = None  # the table, before the synthesis is written
    answer: Answer | None = None
    error: str = ""


def user_message(exc: BaseException) -> str:
    """A one-line message for the chat: the library's own text, never a stack trace."""
    if isinstance(exc, RagError):
        return str(exc) or type(exc).__name__
    return f"Something went wrong ({type(exc).__name__}); the details are in the server log."


class Pump:
    """Progress updates for one stream call (iterate it); stops promptly once `stop` is set.

    The user sees "stopped" within STOP_GRACE_SECONDS even when the model is in the middle of
    a prefill it cannot interrupt; `wait()` then holds the caller (and so its queue slot) until
    the model has really finished, so a stopped answer never runs alongside the next one.
    """

    def __init__(self, events: Callable[[], Iterator[Event]], stop: threading.Event,
                 tick: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.events, self.stop, self.tick, self.clock = events, stop, tick, clock
        self.queue: queue.Queue[object] = queue.Queue()
        self.worker = threading.Thread(target=self._work, name="ui-stream", daemon=True)

    def _work(self) -> None:
        it = None
        try:
            it = self.events()
            stopped_at = None
            for ev in it:
                self.queue.put(ev)
                if self.stop.is_set():  # read on briefly: the library may send a partial Final
                    stopped_at = self.clock() if stopped_at is None else stopped_at
                    if self.clock() - stopped_at > STOP_GRACE_SECONDS:
                        break
        except BaseException as e:  # noqa: BLE001 - reported to the user, logged here
            if not isinstance(e, RagError):
                log.exception("stream failed")
            self.queue.put(e)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
            self.queue.put(_DONE)

    def wait(self, timeout: float | None = LINGER_SECONDS) -> bool:
        """Block until the stream call has returned (True) or `timeout` seconds passed."""
        if self.worker.ident is not None:
            self.worker.join(timeout)
        return not self.worker.is_alive()

    def __iter__(self) -> Iterator[Progress]:
        clock, stop, q = self.clock, self.stop, self.queue
        t0 = clock()
        self.worker.start()
        stage, text, deadline = "searching", "", None
        try:
            while True:
                if stop.is_set() and deadline is None:
                    deadline = clock() + STOP_GRACE_SECONDS
                    stage = "stopping"  # told through this stream, so it never comes after the end
                    yield Progress("status", stage, clock() - t0, text)
                timeout = self.tick if deadline is None else max(
                    0.0, min(self.tick, deadline - clock()))
                try:
                    item = q.get(timeout=timeout)
                except queue.Empty:
                    if deadline is not None and clock() >= deadline:
                        yield Progress("stopped", "stopped", clock() - t0, text)
                        return
                    yield Progress("tick", stage, clock() - t0, text)
                    continue
                now = clock() - t0
                if item is _DONE:
                    if stop.is_set():
                        yield Progress("stopped", "stopped", now, text)
                    else:
                        yield Progress("error", "error", now, text,
                                       error="The assistant ended without an answer.")
                    return
                if isinstance(item, BaseException):
                    yield Progress("error", "error", now, text, error=user_message(item))
                    return
                if isinstance(item, Status):
                    if deadline is None:
                        stage = item.stage
                        yield Progress("status", stage, now, text)
                elif isinstance(item, Sources):
                    yield Progress("sources", stage, now, text, sources=item)
                elif isinstance(item, Compared):
                    yield Progress("compared", stage, now, text, comparison=item.comparison)
                elif isinstance(item, Token):
                    text += item.text
                    if deadline is None:
                        stage = "writing"
                        yield Progress("token", stage, now, text)
                elif isinstance(item, Final):
                    yield Progress("final", "done", now, text, answer=item.answer)
                    return
        finally:
            stop.set()  # the browser went away or we are done: let the worker finish early


def pump(events: Callable[[], Iterator[Event]], stop: threading.Event, tick: float = 1.0,
         clock: Callable[[], float] = time.monotonic) -> Pump:
    return Pump(events, stop, tick, clock)


def paper_lookup(assistant: Any, known: Mapping[str, Paper], answer: Answer) -> dict[str, Paper]:
    """Papers an answer mentions: the retrieved ones, plus any cited or closest not among them."""
    from ui.render import all_citations

    papers = dict(known)
    wanted = {c.paper_id for c in all_citations(answer)} | set(answer.closest)
    for pid in sorted(wanted - set(papers)):
        p = assistant.paper(pid)
        if p is not None:
            papers[pid] = p
    return papers


def turn_of(answer: Answer) -> Turn:
    """The history item for a finished answer: the papers it cited or compared."""
    ids = [c.paper_id for c in sorted(answer.citations, key=lambda c: c.marker)]
    if answer.comparison is not None:
        ids += [s.paper.id for s in (answer.comparison.left, answer.comparison.right)
                if s.paper is not None]
    return Turn(answer.question, answer.text, tuple(dict.fromkeys(ids)))


class StopRegistry:
    """Stop Events of requests, keyed by a random request id.

    gradio deep-copies a session's gr.State when it first reads it, and an Event holds a lock,
    which cannot be copied (`TypeError: cannot pickle '_thread.lock' object`: 2 of 8 sessions
    asking at once got "Error"). So sessions keep only the id, and the Events live here.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}

    def open(self) -> str:
        rid = uuid.uuid4().hex
        with self._lock:
            self._events[rid] = threading.Event()
        return rid

    def event(self, rid: str) -> threading.Event:
        """The request's Event; an unknown (finished or never opened) request is stopped."""
        with self._lock:
            ev = self._events.get(rid)
        if ev is None:
            ev = threading.Event()
            ev.set()
        return ev

    def stop(self, rid: str) -> None:
        with self._lock:
            ev = self._events.get(rid)
        if ev is not None:
            ev.set()

    def close(self, rid: str) -> None:
        with self._lock:
            self._events.pop(rid, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)


STOPS = StopRegistry()  # one per process: request ids are random, so sessions never collide


@dataclass
class ChatSession:
    """One browser session's conversation; lives in a gr.State, so one per user.

    Plain data only, so gradio can deep-copy it: the stop Event of the running request is in
    STOPS under `request`.
    """

    answers: list[Answer] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    request: str = ""  # id of the latest request in STOPS; "" before the first one
    pending: str = ""
    busy: bool = False
    epoch: int = 0  # bumped by clear(): a running answer of an older epoch is dropped
    asked: list[float] = field(default_factory=list)  # monotonic times of recent questions
    conversation: str = ""  # id of the saved conversation (ui/history.py); "" until saved

    @property
    def stop(self) -> threading.Event:
        return STOPS.event(self.request)

    def start(self, question: str) -> threading.Event:
        self.request = STOPS.open()
        self.pending = question
        self.busy = True
        return self.stop

    def turns(self) -> tuple[Turn, ...]:
        return tuple(turn_of(a) for a in self.answers)

    def clear(self) -> None:
        STOPS.stop(self.request)
        self.epoch += 1
        self.conversation = ""
        self.answers = []
        self.messages = []
        self.pending = ""
        self.busy = False


@dataclass
class CompareSession:
    """The Compare tab's state: plain data, like ChatSession."""

    request: str = ""
    answer: Answer | None = None

    @property
    def stop(self) -> threading.Event:
        return STOPS.event(self.request)

    def start(self) -> threading.Event:
        self.request = STOPS.open()
        return self.stop


RATE_WINDOW_SECONDS = 60.0


EMPTY_QUESTION = ("Type a question first, e.g. “Which papers use flow policies for RL?” "
                  "or “Compare SSL4RL and TaRO”.")


def refusal(session: ChatSession, question: str, now: float, max_chars: int, per_minute: int,
            waiting: int, max_queue: int | None) -> str:
    """Why `question` cannot be taken now ("" when it can), checked before it is queued:
    an empty box, its size, the session's rate (`per_minute` in RATE_WINDOW_SECONDS) and a
    full queue."""
    if not question.strip():
        return EMPTY_QUESTION
    if len(question) > max_chars:
        return (f"The question is {len(question):,} characters long; the limit is "
                f"{max_chars:,}. Shorten it and send it again.")
    recent = [t for t in session.asked if now - t < RATE_WINDOW_SECONDS]
    session.asked = recent
    if len(recent) >= per_minute:
        wait = max(1, int(RATE_WINDOW_SECONDS - (now - recent[0]) + 0.999))
        return (f"Too many questions: at most {per_minute} a minute per session. "
                f"Try again in {wait} s.")
    if max_queue is not None and waiting >= max_queue:
        return (f"The server is busy: {waiting} questions are already waiting, the most it "
                "takes. Try again in a minute.")
    return ""


EXPORT_MAX_AGE_SECONDS = 3600.0  # Gradio copies a download into its own cache at once
_exports: Path | None = None
_exports_lock = threading.Lock()


def _export_root() -> Path:
    """This process's one export folder, removed when it exits (a long-running server used to
    leave one temp folder per answer behind)."""
    global _exports
    with _exports_lock:
        if _exports is None or not _exports.is_dir():
            _exports = Path(tempfile.mkdtemp(prefix="icml-rag-exports-"))
            atexit.register(shutil.rmtree, _exports, True)
        return _exports


def prune_exports(root: Path, now: float, max_age: float = EXPORT_MAX_AGE_SECONDS) -> int:
    """Remove the export folders in `root` older than `max_age` seconds; how many went."""
    gone = 0
    for folder in root.iterdir():
        try:
            if folder.is_dir() and now - folder.stat().st_mtime > max_age:
                shutil.rmtree(folder)
                gone += 1
        except OSError:  # another session pruned it first
            continue
    return gone


def write_export(markdown: str, name: str) -> Path:
    """The Markdown in a fresh folder (one per export, so sessions never clash) under this
    process's export folder, whose exports older than an hour are pruned first."""
    root = _export_root()
    prune_exports(root, time.time())
    folder = Path(tempfile.mkdtemp(prefix="export-", dir=root))
    path = folder / name
    path.write_text(markdown, encoding="utf-8")
    return path


def titled(p: Paper) -> Paper:
    """The paper as exports should name it: rag.export prints `label`, so the title (marked
    when the model wrote it, with the label kept) takes its place."""
    from ui.render import display_name, is_generated

    name = display_name(p)
    if name == p.label:
        return p
    return replace(p, label=f"{name} ({p.label}; generated title)" if is_generated(p) else name)


def titled_answer(a: Answer) -> Answer:
    c = a.comparison
    if c is None:
        return a
    left, right = (replace(s, paper=titled(s.paper)) if s.paper is not None else s
                   for s in (c.left, c.right))
    return replace(a, comparison=replace(c, left=left, right=right))


def export_conversation(answers: list[Answer], papers: Mapping[str, Paper]) -> Path:
    from rag.export import conversation_markdown

    named = {pid: titled(p) for pid, p in papers.items()}
    return write_export(conversation_markdown([titled_answer(a) for a in answers], named),
                        "icml-rag-conversation.md")


def export_comparison(answer: Answer, papers: Mapping[str, Paper]) -> Path:
    from rag.export import comparison_markdown

    named = {pid: titled(p) for pid, p in papers.items()}
    return write_export(comparison_markdown(titled_answer(answer), named),
                        "icml-rag-comparison.md")
