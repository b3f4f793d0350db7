"""The openai engine: any OpenAI-compatible server by URL (vLLM, llama-server, xllamacpp's
HTTP server, Ollama, TGI), for deployments whose generation runs on other machines.

Chats go to /v1/chat/completions with the turns (the server applies its model's template),
raw prompts to /v1/completions, both streamed as server-sent events. Every failure becomes
one ModelError that says what is wrong and what to change: server down, timeout, wrong API
key, wrong model name (with the names it serves), connection lost mid-answer. Nothing is
kept between calls but a connection pool, so a server that comes back is used again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rag.config import GenerateSettings
from rag.engines.base import ChatPrompt, GenerationStats, Message, Prefix, account_chunk, server_error
from rag.errors import ModelError

log = logging.getLogger(__name__)

DEFAULT_PARALLEL = 4  # requests in flight; the server decides how many it batches


class OpenAIEngine:
    def __init__(self, gen: GenerateSettings) -> None:
        if not gen.openai_url:
            raise ModelError('generate.engine is "openai" but generate.openai_url is empty: set it '
                             "to the server's base URL, e.g. http://127.0.0.1:8080/v1")
        self._gen = gen
        root = gen.openai_url.rstrip("/")
        self._v1 = root if root.endswith("/v1") else f"{root}/v1"
        self.name = f"openai {root}"
        self.parallel = gen.parallel or DEFAULT_PARALLEL
        self.prefixes: dict[str, Prefix] = {}  # the server keeps its own caches
        self._model = gen.openai_model
        self._lock = threading.Lock()
        self._client: Any = None

    @property
    def loaded(self) -> bool:
        return self._client is not None and bool(self._model)

    def _http(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import httpx

                    headers = {"Authorization": f"Bearer {self._gen.openai_api_key}"} \
                        if self._gen.openai_api_key else {}
                    timeout = httpx.Timeout(self._gen.openai_timeout,
                                            connect=self._gen.openai_connect_timeout)
                    self._client = httpx.Client(timeout=timeout, headers=headers)
        return self._client

    def load(self) -> None:
        """Check the server answers; with no openai_model set, take the one it serves."""
        if not self._model:
            served = self._served()
            if not served:
                raise ModelError(f"the server at {self._v1} serves no model")
            self._model = served[0]
            log.info("openai engine: %s serves %s; using %s", self._v1, served, self._model)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _served(self) -> list[str]:
        body = self._request("GET", "/models")
        return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import httpx

        try:
            r = self._http().request(method, self._v1 + path, json=body)
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        if r.status_code != 200:
            raise self._refused(r.status_code, r.text)
        return r.json()

    def _unreachable(self, e: Exception) -> ModelError:
        import httpx

        if isinstance(e, httpx.TimeoutException):
            what = f"did not answer within {self._gen.openai_timeout:g} s"
        elif isinstance(e, httpx.ConnectError):
            what = "is not reachable (connection refused or no route)"
        else:
            what = f"dropped the connection ({type(e).__name__})"
        return ModelError(f"the generation server at {self._v1} {what}: start it, or check "
                          "generate.openai_url; then ask again")

    def _refused(self, status: int, text: str) -> ModelError:
        try:
            body = json.loads(text)
        except ValueError:
            body = {"error": {"message": text[:200]}}
        detail = server_error(body, "") or ModelError(text[:200])
        message = str(detail).removeprefix(" refused the request: ")
        if status == 401:
            return ModelError(f"the generation server at {self._v1} rejected the API key "
                              f"({message}): set generate.openai_api_key")
        if status == 404 or "model" in message.lower():
            try:
                served = ", ".join(self._served()) or "none"
            except ModelError:
                served = "unknown"
            return ModelError(f"the generation server at {self._v1} has no model "
                              f"{self._model!r} ({message}); it serves: {served}. "
                              "Set generate.openai_model")
        return ModelError(f"the generation server at {self._v1} refused the request: HTTP "
                          f"{status} {message}")

    def render(self, messages: Sequence[Message]) -> str:
        """A plain transcript: the server applies the model's real template to the turns."""
        return "".join(f"<|{m.role}|>\n{m.content}\n" for m in messages) + "<|assistant|>\n"

    def count_tokens(self, text: str) -> int:
        """The server's own count where it has llama.cpp's or vLLM's /tokenize; else ~4
        characters a token (Qwen on these abstracts)."""
        import httpx

        root = self._v1.removesuffix("/v1")
        for body in ({"content": text, "add_special": False}, {"prompt": text, "model": self._model}):
            try:
                r = self._http().post(f"{root}/tokenize", json=body)
            except httpx.HTTPError as e:
                raise self._unreachable(e) from None
            if r.status_code == 200:
                data = r.json()
                tokens = data.get("tokens")
                if isinstance(tokens, list):
                    return len(tokens)
                if isinstance(data.get("count"), int):
                    return int(data["count"])
        return max(1, len(text) // 4)

    def warm_up(self, systems: Sequence[str]) -> None:
        self.load()

    def pieces(self, prompt: str, limit: int, should_stop: Callable[[], bool],
               stats: GenerationStats, started: float) -> Iterator[str]:
        import httpx

        self.load()
        body: dict[str, Any] = {
            "model": self._model,
            "stream": True,
            "max_tokens": limit,
            "temperature": self._gen.temperature,
            "seed": 0,
            "stream_options": {"include_usage": True},
        }
        if isinstance(prompt, ChatPrompt):
            path = "/chat/completions"
            body["messages"] = [{"role": m.role, "content": m.content} for m in prompt.messages]
        else:
            path = "/completions"
            body["prompt"] = str(prompt)
        stopped = False
        try:
            with self._http().stream("POST", self._v1 + path, json=body) as r:
                if r.status_code != 200:
                    raise self._refused(r.status_code, r.read().decode("utf-8", "replace"))
                for line in r.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    err = server_error(chunk, f"the generation server at {self._v1}")
                    if err is not None:
                        raise err
                    out: list[str] = []
                    account_chunk(chunk, stats, started, _collect(out))
                    yield from out
                    if should_stop():
                        stopped = True
                        break  # leaving the block closes the connection: the server stops
        except httpx.HTTPError as e:
            raise self._unreachable(e) from None
        finally:
            stats.seconds = time.perf_counter() - started
        if stopped:
            stats.finish_reason = "stopped"


def _collect(out: list[str]) -> Callable[[str], bool]:
    def emit(piece: str) -> bool:
        out.append(piece)
        return False

    return emit
