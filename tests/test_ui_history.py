"""The conversation store: JSON round trip of whole answers, owners kept apart, delete is real,
many threads at once (pure logic; the browser test checks the same through the app)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from rag.types import Answer
from tests.ui_fakes import FakeAssistant
from ui.history import ConversationStore, answer_from_json, answer_to_json, list_label, title_from


def _answers() -> list[Answer]:
    fake = FakeAssistant()
    out = []
    for q in ("What does SSL4RL use?", "Compare SSL4RL and TaRO", "weather today?"):
        finals = [e for e in fake.stream(q) if type(e).__name__ == "Final"]
        out.append(finals[-1].answer)  # type: ignore[attr-defined]
    return out


def test_answers_round_trip_exactly() -> None:
    for a in _answers():
        assert answer_from_json(answer_to_json(a)) == a


def test_owners_rename_delete_for_real(tmp_path: Path) -> None:
    store = ConversationStore.for_data(tmp_path)
    a, b, c = _answers()
    cid = store.add("browser:x", "", a)
    assert store.add("browser:x", cid, b) == cid
    other = store.add("browser:y", "", c)
    [info] = store.conversations("browser:x")
    assert (info.id, info.title, info.turns) == (cid, a.question, 2)
    assert store.load("browser:x", cid) == [a, b]
    assert store.load("browser:y", cid) == []  # another browser never reads it
    assert not store.rename("browser:y", cid, "stolen") and not store.delete("browser:y", cid)
    assert store.rename("browser:x", cid, "  My  SSL4RL notes ")
    assert store.conversations("browser:x")[0].title == "My SSL4RL notes"
    assert "2 turns" in list_label(store.conversations("browser:x")[0])
    assert store.delete("browser:x", cid)
    db = sqlite3.connect(tmp_path / "conversations.sqlite")
    assert db.execute("SELECT COUNT(*) FROM turns WHERE conversation = ?", (cid,)).fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM conversations WHERE id = ?", (cid,)).fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM turns").fetchone() == (1,)  # y's is kept
    assert store.conversations("browser:y")[0].id == other


def test_many_threads_at_once(tmp_path: Path) -> None:
    store = ConversationStore.for_data(tmp_path)
    a = _answers()[0]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            cid = ""
            for _ in range(5):
                cid = store.add(f"browser:{i}", cid, a)
            assert len(store.load(f"browser:{i}", cid)) == 5
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(store.conversations(f"browser:{i}")[0].turns == 5 for i in range(12))


def test_title_from_first_question() -> None:
    assert title_from("  a\nb  ") == "a b"
    assert len(title_from("x" * 200)) == 80
