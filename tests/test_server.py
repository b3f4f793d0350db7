"""Server mode for real: `chroma run` on 127.0.0.1, ingest and search through HttpClient."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.ingest import ingest
from rag.retrieve import Retriever
from rag.store import Store
from tests.conftest import make_settings

pytestmark = pytest.mark.server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def chroma_server(tmp_path):
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = _free_port()
    proc = subprocess.Popen([exe, "run", "--path", str(tmp_path / "server"), "--host",
                             "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("chroma server did not start")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def test_ingest_and_search_through_a_chroma_server(tmp_path, chroma_server, mini_seeds,
                                                   embedder):
    s = make_settings(tmp_path / "local", mini_seeds, store={"url": chroma_server})
    store = Store(s.store, s.paths.data)
    assert store.where == chroma_server
    report = ingest(s, store, embedder)
    assert report.added == 4 and store.count() == report.chunks_total
    assert ingest(s, store, embedder).chunks_embedded == 0
    hits = Retriever(s.retrieve, store, embedder).search("BEXA early exit", k=3, group=True)
    assert hits[0].chunk.paper_id == "010-01" and hits[0].label == "BEXA"
    assert not (tmp_path / "local" / "chroma").exists()  # nothing written locally


def test_unreachable_server_is_a_clear_error(tmp_path):
    from rag.errors import StoreError

    s = make_settings(tmp_path, store={"url": f"http://127.0.0.1:{_free_port()}"})
    with pytest.raises(StoreError, match="cannot open the Chroma index at http://127.0.0.1"):
        Store(s.store, s.paths.data)


def _start(path: Path, port: int) -> subprocess.Popen:
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    proc = subprocess.Popen([exe, "run", "--path", str(path), "--host", "127.0.0.1", "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    pytest.fail("chroma server did not start")


def test_chroma_server_killed_mid_session_then_back(tmp_path, mini_seeds, embedder):
    """The chat (the UI's callback, the real assistant) says the index is unavailable while
    the server is down, and answers again once it is back on the same port: no restart."""
    from rag.assistant import Assistant
    from ui.app import chat_respond
    from ui.session import ChatSession

    port, path = _free_port(), tmp_path / "server"
    proc = _start(path, port)
    try:
        s = make_settings(tmp_path / "local", mini_seeds,
                          store={"url": f"http://127.0.0.1:{port}"})
        ingest(s, Store(s.store, s.paths.data), embedder)
        assistant = Assistant.from_settings(s)
        session = ChatSession()

        def ask(q: str) -> str:
            session.start(q)
            session.messages += [{"role": "user", "content": q},
                                 {"role": "assistant", "content": ""}]
            list(chat_respond(assistant, session))
            return session.messages[-1]["content"]

        question = "Which papers use early exits in reinforcement learning?"
        assert 'data-paper="010-01"' in ask(question) or "BEXA" in session.messages[-1]["content"]
        proc.kill()
        proc.wait()
        down = ask(question)
        assert "the index is unavailable" in down and "Traceback" not in down, down
        assert not session.busy
        proc = _start(path, port)
        back = ask(question)
        assert "BEXA" in back and "unavailable" not in back, back
        assert len(session.answers) == 2  # the failed turn left no answer behind
    finally:
        proc.kill()
        proc.wait()
