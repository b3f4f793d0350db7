"""The transformers engine: the prepared HF folder (fp32), streamed through `model.generate`.

The stack's reference engine and the only one for an HF folder or a hub id. The model loads
once, lazily; every call gets its own streamer and its own worker thread, and one generation
runs at a time (2 cores: a second one would only halve both).

Prefix reuse: `render` remembers each system prompt it formats. The first prompt that starts
with one prefills it; later prompts get a copy of its key/value cache and prefill only what
follows (greedy output is unchanged; `tests/test_models.py` checks it).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rag.config import GenerateSettings, Settings, offline_environment, threads_sleep
from rag.engines.base import GenerationStats, Message, Prefix
from rag.errors import ModelError
from rag.fastpath import prefill_only_uncached, split_small_matmuls
from rag.models import PRESETS, invalidate, resolve_model

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

FIX = "run `rag prepare` (or `make run`) to prepare it"
MAX_PREFIXES = 8  # distinct system prompts whose caches are kept (each is a few MB)


class TransformersEngine:
    name = "transformers"
    parallel = 1

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._gen: GenerateSettings = settings.generate
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()  # one generation at a time
        self._model: PreTrainedModel | None = None
        self._tokenizer: PreTrainedTokenizerBase | None = None
        self.prefixes: dict[str, Prefix] = {}  # system prompt -> its token prefix and cache

    @property
    def prompt_lookup_num_tokens(self) -> int:
        """Draft tokens for prompt-lookup decoding: the setting, else the preset's choice."""
        if self._gen.prompt_lookup_num_tokens is not None:
            return self._gen.prompt_lookup_num_tokens
        preset = PRESETS.get(self._gen.preset)
        return preset.prompt_lookup_num_tokens if preset else 0

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        self._load()

    def close(self) -> None:
        self._model = self._tokenizer = None
        self.prefixes.clear()

    def warm_up(self, systems: Sequence[str]) -> None:
        import torch

        model, _ = self._load()
        for system in systems if self._gen.reuse_prefix_cache else ():
            self.render([Message("system", system), Message("user", "")])  # remembers its prefix
            prefix = self.prefixes.get(system)
            if prefix is not None:
                with self._generate_lock, torch.inference_mode():
                    self._build(model, prefix)

    def render(self, messages: Sequence[Message]) -> str:
        _, tokenizer = self._load()
        turns = [{"role": m.role, "content": m.content} for m in messages]
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        assert isinstance(text, str)
        system = messages[0].content if messages and messages[0].role == "system" else None
        if system is not None and self._gen.reuse_prefix_cache and system not in self.prefixes:
            self._remember_prefix(system)
        return text

    def _remember_prefix(self, system: str) -> None:
        """Store the token prefix every prompt with this system prompt starts with: the
        common tokens of two different user messages, less one (a BPE merge across the
        boundary could change it)."""
        import torch

        _, tokenizer = self._load()
        a, b = (
            tokenizer.apply_chat_template(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                tokenize=False,
                add_generation_prompt=True,
            )
            for user in ("Passages: a", "Question: z?")
        )
        ids_a, ids_b = (tokenizer(t, add_special_tokens=False)["input_ids"] for t in (a, b))
        common = next(
            (i for i, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
            min(len(ids_a), len(ids_b)),
        )
        if common > 1 and len(self.prefixes) < MAX_PREFIXES:
            self.prefixes[system] = Prefix(torch.tensor(ids_a[: common - 1]))

    def _reused_cache(self, model: PreTrainedModel, ids: Any) -> tuple[int, Any]:
        """(tokens covered, a private copy of their KV cache) for the longest remembered
        prefix `ids` starts with, or (0, None). Builds the cache on first use; call it
        under the generate lock."""
        import torch

        match = max(
            (
                p
                for p in list(self.prefixes.values())
                if ids.shape[1] > p.ids.numel() and torch.equal(ids[0, : p.ids.numel()], p.ids)
            ),
            key=lambda p: p.ids.numel(),
            default=None,
        )
        if match is None:
            return 0, None
        return int(match.ids.numel()), copy.deepcopy(self._build(model, match))

    @staticmethod
    def _build(model: PreTrainedModel, prefix: Prefix) -> Any:
        """The prefix's KV cache, computed on first use; call under the generate lock."""
        if prefix.cache is None:
            prefix.cache = model(prefix.ids[None], use_cache=True).past_key_values
        return prefix.cache

    def count_tokens(self, text: str) -> int:
        _, tokenizer = self._load()
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def pieces(self, prompt: str, limit: int, should_stop: Callable[[], bool],
               stats: GenerationStats, started: float) -> Iterator[str]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        model, tokenizer = self._load()
        inputs = tokenizer(str(prompt), return_tensors="pt", add_special_tokens=False)
        stats.prompt_tokens = int(inputs["input_ids"].shape[1])
        cancel = threading.Event()  # set when the caller closes the stream early

        class Cancelled(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                hit = cancel.is_set() or should_stop()
                return torch.full((input_ids.shape[0],), hit, dtype=torch.bool)

        class Streamer(TextIteratorStreamer):
            def put(self, value: Any) -> None:
                if not self.next_tokens_are_prompt:  # the first put is the prompt itself
                    if stats.first_token_seconds is None:
                        stats.first_token_seconds = time.perf_counter() - started
                    stats.generated_tokens += int(value.numel())
                super().put(value)

        streamer = Streamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
        kwargs: dict[str, Any] = dict(
            inputs,
            max_new_tokens=limit,
            streamer=streamer,
            stopping_criteria=StoppingCriteriaList([Cancelled()]),
            pad_token_id=model.generation_config.pad_token_id,
        )
        if self._gen.temperature > 0:
            kwargs.update(do_sample=True, temperature=self._gen.temperature)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if self.prompt_lookup_num_tokens > 0:
            kwargs["prompt_lookup_num_tokens"] = self.prompt_lookup_num_tokens
        failure: list[BaseException] = []

        def work() -> None:
            try:
                with self._generate_lock, torch.inference_mode():
                    if self._gen.reuse_prefix_cache:
                        covered, cache = self._reused_cache(model, kwargs["input_ids"])
                        if cache is not None:
                            kwargs["past_key_values"] = cache
                            stats.cached_prompt_tokens = covered
                    model.generate(**kwargs)  # type: ignore[operator]
            except BaseException as e:  # handed to the caller's thread below
                failure.append(e)
                streamer.end()
            finally:
                stats.seconds = time.perf_counter() - started

        worker = threading.Thread(target=work, name="rag-generate", daemon=True)
        worker.start()
        try:
            for piece in streamer:
                if piece:
                    yield piece
        finally:
            cancel.set()  # a no-op after a normal end; stops the worker if the caller left early
            worker.join()
        if failure:
            raise failure[0]
        stats.finish_reason = "length" if stats.generated_tokens >= limit else "end"

    def _load(self) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        if self._model is None or self._tokenizer is None:
            with self._load_lock:
                if self._model is None or self._tokenizer is None:
                    self._model, self._tokenizer = self._load_now()
        return self._model, self._tokenizer

    def _load_now(self) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        offline_environment()  # before torch loads, if it has not yet
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        source = resolve_model(self._settings)
        torch.set_num_threads(self._gen.threads)
        started = time.perf_counter()
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(source))
            model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
        except MemoryError:
            raise
        except Exception as e:
            fix = "check generate.preset"
            if self._gen.preset in PRESETS:  # a broken prepared folder: let `prepare` rebuild it
                log.warning("model folder %s failed to load; marked for re-preparation", source)
                invalidate(self._settings)
                fix = FIX
            raise ModelError(f"cannot load the model from {source} ({e}); {fix}") from e
        if not tokenizer.chat_template:
            raise ModelError(f"the tokenizer in {source} has no chat template; {FIX}")
        model.eval()
        prefill_only_uncached(model)
        if self._gen.split_small_matmuls:
            if threads_sleep():
                split_small_matmuls(model, self._gen.threads, lambda: self._gen.split_small_matmuls)
            else:  # spinning OpenMP threads would make the split slower than MKL alone
                log.warning(
                    "generate.split_small_matmuls is off: torch was loaded before "
                    "rag.config.offline_environment() could set OMP_WAIT_POLICY=PASSIVE"
                )
        log.info("loaded %s in %.1f s", source, time.perf_counter() - started)
        return model, tokenizer
