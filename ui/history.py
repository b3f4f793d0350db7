"""Saved conversations: SQLite under settings.paths.data, keyed per browser or per user.

No gradio here (tested directly). Each finished Answer is stored whole, as JSON, so a reopened
conversation rebuilds its bubbles, sources panel and export with the same citations. One
connection per call (sqlite3 connections are not shared between threads) and WAL, so many
sessions read and write at once; a lock serialises writers within this process.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
import types
import typing
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag import types as rtypes
from rag.types import Answer

FILE_NAME = "conversations.sqlite"
TITLE_CHARS = 80

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_owner ON conversations (owner, updated);
CREATE TABLE IF NOT EXISTS turns (
    conversation TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (conversation, ordinal)
);
"""


@dataclass(frozen=True)
class ConversationInfo:
    id: str
    title: str
    created: float  # unix seconds
    updated: float
    turns: int


def title_from(question: str) -> str:
    """The list's title: the first question, on one line, cut at TITLE_CHARS."""
    q = " ".join(question.split())
    return q if len(q) <= TITLE_CHARS else q[: TITLE_CHARS - 1].rstrip() + "…"


# ---- Answer <-> JSON ------------------------------------------------------------------------


def answer_to_json(answer: Answer) -> str:
    return json.dumps(dataclasses.asdict(answer), ensure_ascii=False)


def answer_from_json(text: str) -> Answer:
    value = _decode(Answer, json.loads(text))
    assert isinstance(value, Answer)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, vars(rtypes))
    return _HINTS[cls]


def _decode(tp: Any, value: Any) -> Any:
    """Rebuild a rag.types value from its asdict() form, following the type hints; keys the
    class no longer has are dropped and new fields take their defaults (old rows still load)."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        for opt in options:
            if dataclasses.is_dataclass(opt) and isinstance(value, dict):
                return _decode(opt, value)
        return _decode(options[0], value) if options else value
    if origin is tuple:
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return tuple(_decode(item, v) for v in value)
    if origin is typing.Literal or tp is Any:
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type) and isinstance(value, dict):
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: _decode(hints[k], v) for k, v in value.items() if k in names}
        return tp(**kwargs)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


# ---- the store ------------------------------------------------------------------------------


class ConversationStore:
    """Conversations of many owners; every call names its owner, so no one reads another's."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # writers, within this process
        self._setup_lock = threading.Lock()
        self._ready = False  # the file is created on first use, not when the app is built

    def _setup(self) -> None:
        with self._setup_lock:
            if self._ready:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                db.commit()
            finally:
                db.close()
            self._ready = True

    @classmethod
    def for_data(cls, data: Path) -> ConversationStore:
        return cls(Path(data) / FILE_NAME)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if not self._ready:
            self._setup()
        db = sqlite3.connect(self.path, timeout=30)
        try:
            db.execute("PRAGMA foreign_keys=ON")
            with db:  # one transaction: committed on success, rolled back on error
                yield db
        finally:
            db.close()

    def create(self, owner: str, title: str) -> str:
        cid = uuid.uuid4().hex
        now = time.time()
        with self._lock, self._connect() as db:
            db.execute("INSERT INTO conversations VALUES (?, ?, ?, ?, ?)",
                       (cid, owner, title_from(title) or "Untitled", now, now))
        return cid

    def add(self, owner: str, cid: str, answer: Answer) -> str:
        """Append a finished answer; creates the conversation (titled by its question) when
        `cid` is empty or unknown to this owner. Returns the conversation's id."""
        now = time.time()
        with self._lock, self._connect() as db:
            row = db.execute("SELECT 1 FROM conversations WHERE id = ? AND owner = ?",
                             (cid, owner)).fetchone() if cid else None
            if row is None:
                cid = uuid.uuid4().hex
                db.execute("INSERT INTO conversations VALUES (?, ?, ?, ?, ?)",
                           (cid, owner, title_from(answer.question) or "Untitled", now, now))
            (n,) = db.execute("SELECT COUNT(*) FROM turns WHERE conversation = ?",
                              (cid,)).fetchone()
            db.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?)",
                       (cid, n, answer.question, answer_to_json(answer), now))
            db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, cid))
        return cid

    def conversations(self, owner: str) -> list[ConversationInfo]:
        """The owner's conversations, most recently used first."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT c.id, c.title, c.created, c.updated, COUNT(t.ordinal) FROM "
                "conversations c LEFT JOIN turns t ON t.conversation = c.id WHERE c.owner = ? "
                "GROUP BY c.id ORDER BY c.updated DESC", (owner,)).fetchall()
        return [ConversationInfo(*r) for r in rows]

    def load(self, owner: str, cid: str) -> list[Answer]:
        """The conversation's answers in order; [] when it is not this owner's."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT t.answer FROM turns t JOIN conversations c ON c.id = t.conversation "
                "WHERE c.id = ? AND c.owner = ? ORDER BY t.ordinal", (cid, owner)).fetchall()
        return [answer_from_json(r[0]) for r in rows]

    def rename(self, owner: str, cid: str, title: str) -> bool:
        t = title_from(title)
        if not t:
            return False
        with self._lock, self._connect() as db:
            cur = db.execute("UPDATE conversations SET title = ? WHERE id = ? AND owner = ?",
                             (t, cid, owner))
        return cur.rowcount == 1

    def delete(self, owner: str, cid: str) -> bool:
        """Removes the conversation and every turn of it (the rows, not a flag)."""
        with self._lock, self._connect() as db:
            cur = db.execute("DELETE FROM conversations WHERE id = ? AND owner = ?",
                             (cid, owner))
            if cur.rowcount:
                db.execute("DELETE FROM turns WHERE conversation = ?", (cid,))
        return cur.rowcount == 1


def owner_key(browser_id: str, username: str | None) -> str:
    """Per user when a login is on, else per browser (a random id kept in localStorage)."""
    if username:
        return f"user:{username}"
    return f"browser:{browser_id}" if browser_id else ""


def list_label(info: ConversationInfo, now: float | None = None) -> str:
    """'Which papers use flow policies? · 30 Nov 18:52 · 2 turns'."""
    when = time.strftime("%d %b %H:%M", time.localtime(info.updated))
    if now is not None and now - info.updated < 86400 and time.localtime(now).tm_yday == \
            time.localtime(info.updated).tm_yday:
        when = time.strftime("today %H:%M", time.localtime(info.updated))
    return f"{info.title} · {when} · {info.turns} turn{'s' if info.turns != 1 else ''}"
