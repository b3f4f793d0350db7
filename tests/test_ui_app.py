"""The app's callbacks against a scripted assistant: order of updates, stop, errors, sessions."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import gradio as gr
import pytest

from rag.config import load_settings
from rag.types import Final, Sources, Status, Token
from tests.ui_fakes import FakeAssistant
from ui.app import chat_respond, create_app, launch_kwargs
from ui.compare_tab import compare_respond
from ui.session import STOPS, ChatSession, CompareSession, pump, refusal, turn_of


def start(session: ChatSession, q: str) -> None:
    """What the Send handler does before the queued generator runs."""
    session.start(q)
    session.messages += [{"role": "user", "content": q}, {"role": "assistant", "content": ""}]


def run(assistant: Any, session: ChatSession) -> list[tuple[Any, ...]]:
    return list(chat_respond(assistant, session))


def changed(update: tuple[Any, ...], i: int) -> bool:
    return not isinstance(update[i], type(gr.skip())) and update[i] is not None and not (
        isinstance(update[i], dict) and update[i].get("__type__") == "update" and len(
            update[i]) == 1)


def test_create_app_builds_with_queue_settings() -> None:
    settings = load_settings(ui={"concurrency_limit": 2, "max_queue": 7})
    app = create_app(FakeAssistant(), settings)
    assert isinstance(app, gr.Blocks)
    assert app._queue.max_size == 7 and app._queue.default_concurrency_limit == 2
    kw = launch_kwargs(settings.ui)
    assert kw["server_name"] == "127.0.0.1" and kw["server_port"] == 7860 and kw["auth"] is None
    auth = launch_kwargs(load_settings(ui={"auth_user": "u", "auth_password": "p"}).ui)["auth"]
    assert auth == ("u", "p")


def test_chat_sources_arrive_before_tokens_and_final_is_rendered() -> None:
    s = ChatSession()
    start(s, "What does SSL4RL use as a reward signal?")
    ups = run(FakeAssistant(), s)
    first_sources = next(i for i, u in enumerate(ups) if changed(u, 2))
    first_chat = next(i for i, u in enumerate(ups) if changed(u, 0))
    assert first_sources < first_chat
    assert "Retrieved passages" in ups[first_sources][2]
    last = ups[-1]
    bubble = s.messages[-1]["content"]
    assert 'href="#src-1-1"' in bubble and 'class="unsupported"' in bubble
    assert "&lt;i&gt;cures&lt;/i&gt;" in bubble and "<i>" not in bubble
    assert 'id="src-1-1"' in last[2] and "<mark" in last[2]
    assert len(s.answers) == 1 and not s.busy
    export = last[3]
    path = export.value["path"] if isinstance(export.value, dict) else export.value
    text = open(path, encoding="utf-8").read()
    assert "What does SSL4RL use as a reward signal?" in text and "000-01" in text


def test_history_is_passed_and_anchors_are_scoped_per_turn() -> None:
    fake, s = FakeAssistant(), ChatSession()
    start(s, "What does SSL4RL use?")
    run(fake, s)
    start(s, "What does it evaluate on?")
    run(fake, s)
    assert fake.calls[1][1] == (turn_of(s.answers[0]),)
    assert fake.calls[1][1][0].paper_ids == ("000-01",)
    assert 'href="#src-2-1"' in s.messages[-1]["content"]


def test_stop_ends_the_stream_and_keeps_partial_text() -> None:
    fake, s = FakeAssistant(delay=0.3), ChatSession()
    start(s, "What does SSL4RL use?")
    ups = []
    for u in chat_respond(fake, s):
        ups.append(u)
        if changed(u, 0):
            s.stop.set()
    assert "(stopped)" in s.messages[-1]["content"]
    assert "Stopped" in ups[-1][1] and not s.answers and not s.busy


def test_library_error_is_a_message_not_a_traceback() -> None:
    s = ChatSession()
    start(s, "boom")
    run(FakeAssistant(), s)
    assert "cannot be used" in s.messages[-1]["content"] and "Traceback" not in str(s.messages)
    start(s, "crash")
    run(FakeAssistant(), s)
    msg = s.messages[-1]["content"]
    assert "ValueError" in msg and "internal detail" not in msg


def test_abstention_and_chat_comparison() -> None:
    s = ChatSession()
    start(s, "weather in Paris?")
    run(FakeAssistant(), s)
    assert "No answer from the abstracts" in s.messages[-1]["content"]
    start(s, "Compare SSL4RL and TaRO")
    ups = run(FakeAssistant(), s)
    bubble = s.messages[-1]["content"]
    assert 'data-paper="000-01"' in bubble and 'data-paper="003-14"' in bubble
    assert 'id="src-2-2"' in ups[-1][2]
    assert turn_of(s.answers[-1]).paper_ids == ("000-01", "003-14")


def test_compare_tab_flow_and_unknown_side() -> None:
    cs = CompareSession()
    cs.start()
    ups = list(compare_respond(FakeAssistant(), cs, "000-01", "003-14"))
    table, panel = ups[-1][1], ups[-1][2]
    assert "compare-table" in table and 'href="#src-cmp-1"' in table
    assert 'id="src-cmp-2"' in panel
    cs.start()
    ups = list(compare_respond(FakeAssistant(), cs, "000-01", "XYZ"))
    assert "not in the corpus" in ups[-1][1]


def test_pump_ticks_while_the_model_is_silent() -> None:
    fake = FakeAssistant(pause_before_tokens=0.35)
    stop = threading.Event()
    kinds = [p.kind for p in pump(lambda: fake.stream("q", (), stop), stop, tick=0.1)]
    assert "tick" in kinds and kinds[-1] == "final"
    assert kinds.index("sources") < kinds.index("token")


def test_pump_gives_up_on_a_stream_that_ignores_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.session

    monkeypatch.setattr(ui.session, "STOP_GRACE_SECONDS", 0.2)

    def stubborn():  # type: ignore[no-untyped-def]
        yield Status("writing")
        while True:
            time.sleep(0.05)
            yield Token("x")

    stop = threading.Event()
    t0 = time.monotonic()
    out = []
    for p in pump(stubborn, stop, tick=0.05):
        out.append(p)
        if p.kind == "token":
            stop.set()
    assert out[-1].kind == "stopped" and time.monotonic() - t0 < 2
    # the stream, not Stop's direct reply, says "Stopping" (that reply may reach the page after
    # the stream's last update and must not overwrite "Stopped"), and never "writing" again
    after = out[[p.kind for p in out].index("token") + 1:]
    assert after[0].kind == "status" and after[0].stage == "stopping"
    assert all(p.stage in ("stopping", "stopped") for p in after), [p.stage for p in after]


def test_sessions_do_not_share_state() -> None:
    fake = FakeAssistant(delay=0.05)
    a, b = ChatSession(), ChatSession()
    start(a, "What does SSL4RL use?")
    start(b, "weather today")
    ta = threading.Thread(target=run, args=(fake, a))
    tb = threading.Thread(target=run, args=(fake, b))
    ta.start(), tb.start()
    ta.join(10), tb.join(10)
    assert a.request != b.request
    assert not a.answers[0].abstained and b.answers[0].abstained
    assert len(a.messages) == len(b.messages) == 2


def test_event_types_are_the_library_ones() -> None:
    evs = list(FakeAssistant().stream("What does SSL4RL use?"))
    assert isinstance(evs[0], Status) and isinstance(evs[1], Sources)
    assert isinstance(evs[-1], Final)


def test_second_trigger_while_busy_changes_nothing() -> None:
    s = ChatSession()
    start(s, "What does SSL4RL use?")
    first = chat_respond(FakeAssistant(delay=0.05), s)
    next(first)  # the first request is running and has consumed the question
    assert list(chat_respond(FakeAssistant(), s)) == [tuple(gr.skip() for _ in range(6))]
    list(first)
    assert len(s.answers) == 1


def test_new_conversation_drops_the_running_answer() -> None:
    s = ChatSession()
    start(s, "What does SSL4RL use?")
    gen = chat_respond(FakeAssistant(delay=0.2), s)
    next(gen)
    s.clear()
    list(gen)
    assert s.answers == [] and s.messages == [] and not s.busy


def test_stopped_pump_reports_at_once_but_wait_holds_until_the_model_returns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.session

    monkeypatch.setattr(ui.session, "STOP_GRACE_SECONDS", 0.1)

    def prefill():  # type: ignore[no-untyped-def]
        yield Status("writing")
        time.sleep(1.0)  # an uninterruptible forward pass
        yield Token("late")

    stop = threading.Event()
    run = pump(prefill, stop, tick=0.05)
    t0 = time.monotonic()
    for p in run:
        if p.kind == "status":
            stop.set()
        last = p
    assert last.kind == "stopped" and time.monotonic() - t0 < 0.8
    assert run.wait(5) and time.monotonic() - t0 >= 0.9


def test_sessions_are_deep_copyable_before_during_and_after_an_answer() -> None:
    """gradio deep-copies a session's gr.State; an Event (a lock) in it failed 2 of 8 users."""
    s = ChatSession()
    copy.deepcopy(s)
    start(s, "What does SSL4RL use?")
    gen = chat_respond(FakeAssistant(delay=0.05), s)
    next(gen)
    running = copy.deepcopy(s)
    assert running.stop is s.stop  # a copy refers to the same request, not a new lock
    list(gen)
    assert len(copy.deepcopy(s).answers) == 1
    cs = CompareSession()
    cs.start()
    copy.deepcopy(cs)


def test_each_request_has_its_own_stop_and_the_registry_empties() -> None:
    before = len(STOPS)
    a, b = ChatSession(), ChatSession()
    start(a, "What does SSL4RL use?")
    start(b, "What does SSL4RL use?")
    STOPS.stop(a.request)
    assert a.stop.is_set() and not b.stop.is_set()
    run(FakeAssistant(), a)
    run(FakeAssistant(), b)
    assert "(stopped before it started)" in a.messages[-1]["content"] and not a.answers
    assert len(b.answers) == 1
    assert len(STOPS) == before  # closed when each request ended
    assert a.stop.is_set()  # a finished request reads as stopped


def test_refusal_caps_size_rate_and_a_full_queue() -> None:
    s = ChatSession()
    assert refusal(s, "q", 100.0, 10, 2, 0, 5) == ""
    assert "11 characters long; the limit is 10" in refusal(s, "x" * 11, 100.0, 10, 2, 0, 5)
    s.asked = [90.0, 95.0]
    msg = refusal(s, "q", 100.0, 10, 2, 0, 5)
    assert msg.startswith("Too many questions: at most 2 a minute") and "Try again in 50 s" in msg
    assert refusal(s, "q", 151.0, 10, 2, 0, 5) == ""  # the window moved on
    assert s.asked == [95.0]
    assert "The server is busy: 5 questions" in refusal(ChatSession(), "q", 0.0, 10, 2, 5, 5)
    assert refusal(ChatSession(), "q", 0.0, 10, 2, 5, None) == ""
    empty = ChatSession()
    assert "Type a question first" in refusal(empty, " \n ", 0.0, 10, 2, 0, 5)
    assert empty.asked == []  # an empty box is not counted against the rate
