"""The generation facade: `Generator.stream(prompt)` yields text pieces; the rest builds on it.

The engine behind it (rag/engines/) is chosen by `generate.engine`: llama.cpp on the GGUF
file, transformers on the converted HF folder, or an OpenAI-compatible server; "auto" takes
the one `rag prepare` timed fastest here (`engine_reason` says why). Engines load once,
lazily, on the first call (or `warm_up()`). Every `stream()` call has its own state, so
concurrent callers never share it; up to `parallel` of them generate at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence

from rag.config import Settings
from rag.engines import make_engine
from rag.engines.base import ChatPrompt, Engine, GenerationStats, GenerationStream, Prefix, chat_messages
from rag.engines.choose import resolve
from rag.errors import InputError

__all__ = ["ChatPrompt", "GenerationStats", "GenerationStream", "Generator"]

log = logging.getLogger(__name__)


class Generator:
    """One engine, loaded on first use and shared by all calls."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._gen = settings.generate
        choice = resolve(settings)
        self.engine_kind = choice.engine  # "llama.cpp" | "transformers" | "openai"
        self.engine_reason = choice.reason  # why this engine: for the status line and the log
        self.engine: Engine = make_engine(settings, choice.engine)
        log.info("generation engine: %s (%s)", self.engine.name, choice.reason)

    @property
    def engine_name(self) -> str:
        """E.g. "llama.cpp (prebuilt wheel)", "transformers", "openai http://host:8080"."""
        return self.engine.name

    @property
    def parallel(self) -> int:
        """Generations the engine runs at once: the UI's concurrency limit should follow it."""
        return self.engine.parallel

    @property
    def prompt_lookup_num_tokens(self) -> int:
        """Prompt-lookup draft tokens (the transformers engine's speedup; 0 elsewhere)."""
        return int(getattr(self.engine, "prompt_lookup_num_tokens", 0))

    @property
    def loaded(self) -> bool:
        return self.engine.loaded

    def prefill(self, prompt: str) -> GenerationStats:
        """Run `prompt` for one token, so the engine holds its key/values (rag/paper_cache.py);
        the stats say how much of it was cached already."""
        with self.stream(prompt, 1) as pieces:
            for _ in pieces:
                pass
            return pieces.stats

    @property
    def _prefixes(self) -> dict[str, Prefix]:
        """System prompts whose cache the engine keeps (tests check warm-up filled them)."""
        return self.engine.prefixes

    def warm_up(self, *systems: str) -> None:
        """Load the engine now rather than on the first request, and prefill the given
        system prompts' caches (when `reuse_prefix_cache` is on)."""
        self.engine.load()
        if self._gen.reuse_prefix_cache and systems:
            self.engine.warm_up(systems)

    def format_chat(self, system: str, user: str, history: Sequence[tuple[str, str]] = ()) -> ChatPrompt:
        """The chat as the engine's prompt: its template's text, with the turns kept."""
        messages = chat_messages(system, user, history)
        return ChatPrompt(self.engine.render(messages), messages)

    def count_tokens(self, prompt: str) -> int:
        return self.engine.count_tokens(str(prompt))

    def generate(self, prompt: str, max_new_tokens: int | None = None,
                 stop: threading.Event | None = None) -> str:
        """The whole completion of `prompt`, built on `stream()` (`stop` as there)."""
        with self.stream(prompt, max_new_tokens, stop) as pieces:
            return "".join(pieces)

    def stream(
        self,
        prompt: str,
        max_new_tokens: int | None = None,
        stop: threading.Event | None = None,
    ) -> GenerationStream:
        """Yield the completion of `prompt` (from `format_chat`, or raw text) piece by piece.

        Setting `stop` ends generation after the current token. Errors raised while
        generating are re-raised here, in the caller.
        """
        limit = self._gen.max_new_tokens if max_new_tokens is None else max_new_tokens
        if limit <= 0:
            raise InputError(f"max_new_tokens must be > 0, got {limit}")
        if not prompt:
            raise InputError("prompt must not be empty")
        started = time.perf_counter()
        self.engine.load()
        stats = GenerationStats()
        return GenerationStream(self._run(prompt, limit, stop, stats, started), stats)

    def _run(self, prompt: str, limit: int, stop: threading.Event | None,
             stats: GenerationStats, started: float) -> Iterator[str]:
        stopped = stop.is_set if stop is not None else (lambda: False)
        finished = False
        try:
            yield from self.engine.pieces(prompt, limit, stopped, stats, started)
            finished = True
        finally:
            stats.seconds = time.perf_counter() - started
            if not finished or stopped():
                stats.finish_reason = "stopped"
        log.debug(
            "%s: %d tokens from %d (%d cached) in %.2f s (first token %.2f s)",
            self.engine.name,
            stats.generated_tokens,
            stats.prompt_tokens,
            stats.cached_prompt_tokens,
            stats.seconds,
            stats.first_token_seconds or 0.0,
        )
