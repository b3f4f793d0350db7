"""What the tabs share: the assistant, the settings, saved conversations and the atlas."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.types import Answer, Paper
from ui.atlas_view import AtlasCache, related_papers
from ui.history import ConversationStore
from ui.render import all_citations

SECRET_FILE = "browser-secret"  # under paths.data: the browser id survives a server restart


@dataclass
class Shared:
    assistant: Any
    settings: Any  # rag.config.Settings, or None (tests with a scripted assistant)
    conversations: ConversationStore | None
    atlas: AtlasCache

    @classmethod
    def build(cls, assistant: Any, settings: Any) -> Shared:
        store = (ConversationStore.for_data(settings.paths.data) if settings is not None
                 else None)
        return cls(assistant, settings, store, AtlasCache(settings))

    def related(self, pids: Iterable[str]) -> dict[str, list[Paper]]:
        return related_papers(self.atlas, pids, self.assistant.paper)

    def related_for(self, answer: Answer) -> dict[str, list[Paper]]:
        """Nearest papers of every paper the sources panel shows a card for."""
        pids = [c.paper_id for c in all_citations(answer)] + list(answer.closest)
        if answer.comparison is not None:
            pids += [s.paper.id for s in (answer.comparison.left, answer.comparison.right)
                     if s.paper is not None]
        return self.related(dict.fromkeys(pids))

    def browser_secret(self) -> str:
        """The key gradio encrypts the browser id with in localStorage; kept under data/ so a
        restarted server still reads the ids it gave out (a fresh one per process otherwise)."""
        if self.settings is None:
            return secrets.token_hex(16)
        path = Path(self.settings.paths.data) / SECRET_FILE
        try:
            text = path.read_text(encoding="utf-8").strip()
            if len(text) >= 16:
                return text
        except OSError:
            pass
        text = secrets.token_hex(16)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o600)
        return text
