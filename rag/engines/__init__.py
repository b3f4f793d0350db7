"""Generation engines behind one protocol (`base.Engine`): llama.cpp (xllamacpp, in process),
transformers (the reference), and any OpenAI-compatible server. `rag.generate.Generator`
picks one by `generate.engine`; "auto" reads the timing `rag prepare` cached (`choose`)."""

from __future__ import annotations

from rag.config import Settings
from rag.engines.base import Engine

NAMES = ("llama.cpp", "transformers", "openai")


def make_engine(settings: Settings, name: str) -> Engine:
    """An engine, not loaded yet; only the openai engine checks its settings here."""
    if name == "transformers":
        from rag.engines.hf import TransformersEngine

        return TransformersEngine(settings)
    if name == "llama.cpp":
        from rag.engines.llamacpp import LlamaCppEngine
        from rag.models import PRESETS, resolve_gguf

        gen = settings.generate
        if gen.ngram_draft_tokens is None:  # the preset's measured choice (bench/speculative.py)
            preset = PRESETS.get(gen.preset)
            gen = gen.model_copy(update={"ngram_draft_tokens": preset.llamacpp_ngram_tokens
                                         if preset else 0})
        draft = None
        if gen.draft_preset:
            draft_settings = settings.model_copy(update={"generate": gen.model_copy(
                update={"preset": gen.draft_preset})})
            draft = lambda: resolve_gguf(draft_settings)  # noqa: E731
        return LlamaCppEngine(gen, lambda: resolve_gguf(settings), draft=draft)
    if name == "openai":
        from rag.engines.remote import OpenAIEngine

        return OpenAIEngine(settings.generate)
    raise ValueError(f"unknown engine {name!r}; one of {', '.join(NAMES)}")
