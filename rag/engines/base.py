"""What every engine shares: the prompt type, the per-call counters, the stream wrapper and the
Engine protocol that `rag.generate.Generator` drives."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rag.errors import ModelError


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


class ChatPrompt(str):
    """A chat as the engine's prompt text, with its turns kept for engines that take messages
    (llama.cpp's and OpenAI-compatible servers apply their own template to them).

    A `str`, so code that only passes prompts around (the assistant) needs no change."""

    messages: tuple[Message, ...]

    def __new__(cls, text: str, messages: Sequence[Message]) -> ChatPrompt:
        obj = super().__new__(cls, text)
        obj.messages = tuple(messages)
        return obj


def chat_messages(system: str, user: str, history: Sequence[tuple[str, str]] = ()) -> tuple[Message, ...]:
    turns = [Message("system", system)]
    for past_user, past_answer in history:
        turns += [Message("user", past_user), Message("assistant", past_answer)]
    return (*turns, Message("user", user))


@dataclass
class Prefix:
    """A system prompt whose cache the engine keeps: its tokens (a tensor or a count) and the
    cache itself (an engine object; `True` when the engine holds it internally)."""

    ids: Any
    cache: Any = None


@dataclass
class GenerationStats:
    """Counters for one `stream()` call, filled in as it runs; final once the stream ends."""

    prompt_tokens: int = 0
    generated_tokens: int = 0  # includes the end-of-turn token when the model emitted one
    cached_prompt_tokens: int = 0  # prompt tokens whose KV cache was reused, not prefilled
    first_token_seconds: float | None = None  # from the call to the first generated token
    seconds: float = 0.0  # from the call to the end of generation
    finish_reason: str = ""  # "end" (end-of-turn token), "length" (max_new_tokens), "stopped"
    engine_decode_tokens_per_second: float | None = None  # the engine's own timer, where it reports one

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Tokens after the first one, per second after the first one: the decode speed."""
        if self.first_token_seconds is None or self.generated_tokens < 2:
            return None
        span = self.seconds - self.first_token_seconds
        return (self.generated_tokens - 1) / span if span > 0 else None

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Prompt tokens not covered by a reused cache, per second to the first token."""
        if not self.first_token_seconds:
            return None
        return (self.prompt_tokens - self.cached_prompt_tokens) / self.first_token_seconds


class GenerationStream(Iterator[str]):
    """The text pieces of one generation. Closing it (or dropping it) cancels the generation."""

    def __init__(self, pieces: Iterator[str], stats: GenerationStats) -> None:
        self._pieces = pieces
        self.stats = stats

    def __next__(self) -> str:
        return next(self._pieces)

    def close(self) -> None:
        """Stop generating and wait for the worker thread; safe to call twice."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> GenerationStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Engine(Protocol):
    """One way to run the model. `Generator` validates arguments, builds the stats and the
    stream; an engine renders chats, counts tokens and yields pieces."""

    name: str  # for the status line: "llama.cpp (prebuilt wheel)", "transformers", ...
    parallel: int  # generations it runs at once; more callers wait their turn
    prefixes: dict[str, Prefix]  # system prompts whose cache is kept

    @property
    def loaded(self) -> bool: ...

    def load(self) -> None: ...

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text the model sees for these turns (its chat template, generation
        prompt added)."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def warm_up(self, systems: Sequence[str]) -> None:
        """Load, and compute the given system prompts' caches where the engine keeps them."""
        ...

    def pieces(self, prompt: str, limit: int, should_stop: Callable[[], bool],
               stats: GenerationStats, started: float) -> Iterator[str]:
        """Yield the completion of `prompt` (a ChatPrompt or raw text), filling `stats`
        (finish_reason "end" or "length"); end after the token during which `should_stop()`
        turned true; closing the iterator cancels the generation."""
        ...

    def close(self) -> None: ...


_END = object()


def threaded(produce: Callable[[Callable[[str], bool]], None], should_stop: Callable[[], bool],
             name: str) -> Iterator[str]:
    """Run a blocking, callback-driven generation (`produce(emit)`; `emit(piece)` returns True
    to ask it to stop) on a worker thread and yield its pieces here. Closing the iterator
    stops the worker and waits for it; the worker's exception is raised in the caller."""
    out: queue.SimpleQueue[Any] = queue.SimpleQueue()
    cancel = threading.Event()  # set when the caller leaves early
    failure: list[BaseException] = []

    def emit(piece: str) -> bool:
        if piece:
            out.put(piece)
        return cancel.is_set() or should_stop()

    def work() -> None:
        try:
            produce(emit)
        except BaseException as e:  # handed to the caller's thread below
            failure.append(e)
        finally:
            out.put(_END)

    worker = threading.Thread(target=work, name=name, daemon=True)
    worker.start()
    try:
        while (item := out.get()) is not _END:
            yield item
    finally:
        cancel.set()  # a no-op after a normal end; stops the worker if the caller left early
        worker.join()
    if failure:
        raise failure[0]


def elapsed(started: float) -> float:
    return time.perf_counter() - started


def server_error(body: Any, where: str) -> ModelError | None:
    """The error an OpenAI-style response body carries, as a ModelError; None if it has none."""
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    if err is None and "choices" not in body and "message" in body and "code" in body:
        err = body  # llama.cpp's in-process errors come unwrapped
    if err is None:
        return None
    message = err.get("message", err) if isinstance(err, dict) else err
    return ModelError(f"{where} refused the request: {message}")


def account_chunk(chunk: dict[str, Any], stats: GenerationStats, started: float,
                  emit: Callable[[str], bool]) -> bool:
    """Fold one streamed OpenAI-style chunk into `stats` and emit its text; True to stop."""
    usage = chunk.get("usage")
    if usage:
        stats.prompt_tokens = int(usage.get("prompt_tokens", stats.prompt_tokens))
        stats.generated_tokens = int(usage.get("completion_tokens", stats.generated_tokens))
        details = usage.get("prompt_tokens_details") or {}
        stats.cached_prompt_tokens = int(details.get("cached_tokens", 0) or 0)
    timings = chunk.get("timings")  # llama.cpp's servers: decode measured inside the engine
    if isinstance(timings, dict) and timings.get("predicted_per_second"):
        stats.engine_decode_tokens_per_second = float(timings["predicted_per_second"])
    stop = False
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if text:
            if stats.first_token_seconds is None:
                stats.first_token_seconds = time.perf_counter() - started
            if not usage:
                stats.generated_tokens += 1  # one token per chunk; the usage chunk corrects it
            stop = emit(text) or stop
        reason = choice.get("finish_reason")
        if reason:
            stats.finish_reason = "length" if reason == "length" else "end"
    return stop
