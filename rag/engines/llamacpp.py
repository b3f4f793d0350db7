"""The llama.cpp engine: xllamacpp's in-process server on the sha-checked GGUF file itself.

No conversion: the 4-bit file is what runs (a decode step reads 0.49 GB for the 0.5B model,
1.12 GB for the 1.5B, against 1.98 / 6.2 GB in fp32). The server batches `parallel` slots
continuously, so several chats generate at once; each slot keeps its last prompt's KV cache
and a small host-RAM cache keeps others, so the fixed system prompt is prefilled once.

Its HTTP listener cannot be turned off: it binds 127.0.0.1 on a random port and demands a
random API key, so no other local user can drive the model. This module uses it only for
/apply-template and /tokenize (the in-process API has neither); generation is in process.

Only this module (and `serve` below) imports xllamacpp.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rag.config import GenerateSettings
from rag.engines.base import (
    ChatPrompt,
    GenerationStats,
    Message,
    Prefix,
    account_chunk,
    server_error,
    threaded,
)
from rag.errors import ModelError
from rag.heap import trim_heap
from rag.models import host_cache_mib

log = logging.getLogger(__name__)

DEFAULT_PARALLEL = 4  # slots: 4 questions at once gave 2.2x one-at-a-time answers/min (bench)
NATIVE_DIR = Path(os.path.expanduser("~/.cache/icml-rag/native"))  # `make native` installs here
NATIVE_MARKER = "native.json"  # written by bench/native.py after a smoke inference passed


def native_build() -> dict[str, Any] | None:
    """The native build's record when `make native` built one that passed its smoke test."""
    try:
        info = json.loads((NATIVE_DIR / NATIVE_MARKER).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(info, dict) and info.get("smoke") == "ok"
    return info if ok and (NATIVE_DIR / "xllamacpp").is_dir() else None


def import_xllamacpp(build: str = "auto") -> tuple[Any, str]:
    """(the xllamacpp module, "prebuilt wheel" | "native build (<flags>)").

    `build`: "auto" takes the native build when one passed its smoke test, "native" requires
    it, "prebuilt" never takes it. Decided once per process, at the first import."""
    native = native_build() if build != "prebuilt" else None
    if build == "native" and native is None:
        raise ModelError(
            f"generate.llamacpp_build is 'native' but no working native build is in {NATIVE_DIR}: "
            "run `make native` (or set it to 'auto')"
        )
    if "xllamacpp" not in sys.modules and native is not None:
        sys.path.insert(0, str(NATIVE_DIR))
    try:
        import xllamacpp
    except ImportError as e:
        raise ModelError(
            f"the llama.cpp engine needs xllamacpp ({e}): run `pip install xllamacpp==2026.10.11549` "
            "(and `apt-get install libgomp1`), or set generate.engine = \"transformers\""
        ) from e
    is_native = Path(xllamacpp.__file__).resolve().is_relative_to(NATIVE_DIR.resolve())
    kind = f"native build ({(native or {}).get('isa', '?')})" if is_native else "prebuilt wheel"
    return xllamacpp, kind


def build_label(build: str = "auto") -> str:
    """"prebuilt wheel <version>" or "native build (<isa>) <version>", without importing it."""
    from importlib import metadata

    native = native_build() if build != "prebuilt" else None
    if native is not None:
        return f"native build ({native.get('isa', '?')}) {native.get('version', '?')}"
    try:
        return f"prebuilt wheel {metadata.version('xllamacpp')}"
    except metadata.PackageNotFoundError:
        return "not installed"


def installed() -> bool:
    from importlib.util import find_spec

    return find_spec("xllamacpp") is not None or native_build() is not None


@contextlib.contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """Keep the process's SIGINT/SIGTERM handlers: the server installs its own while it
    starts (Ctrl+C would then stop the model, not the app). Done with sigaction via libc,
    because `signal.signal` only works on the main thread and warm-up runs on another."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # not a POSIX libc: nothing to keep
        yield
        return
    saved = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        old = ctypes.create_string_buffer(256)  # >= sizeof(struct sigaction) (152 on x86-64)
        if libc.sigaction(int(sig), None, old) == 0:
            saved.append((sig, old))
    try:
        yield
    finally:
        for sig, old in saved:
            libc.sigaction(int(sig), old, None)


def server_params(xlc: Any, gguf: Path, gen: GenerateSettings, parallel: int, port: int = 0,
                  api_key: str = "", draft: Path | None = None) -> Any:
    p = xlc.CommonParams()
    p.model.path = str(gguf)
    # read the weights into the engine's own buffers instead of mapping the file: on CPUs
    # where llama.cpp repacks the 4-bit weights (AVX2/AVX-512) the mapped pages were read to
    # repack them and then stayed resident beside the repacked copy (1.5B: ~590 MB of RSS for
    # nothing; bench/memory.py). Same kernels, same weights: the same tokens.
    p.load_mode = xlc.llama_load_mode.LLAMA_LOAD_MODE_NONE
    p.n_parallel = parallel
    p.kv_unified = False  # each slot owns context_size tokens: a long prompt cannot starve others
    p.n_ctx = parallel * gen.context_size
    p.cpuparams.n_threads = gen.threads
    p.cpuparams_batch.n_threads = gen.threads
    p.cache_ram_mib = host_cache_mib(gen)
    if gen.kv_cache_type == "q8_0":  # a quantized V cache needs llama.cpp's flash attention
        p.cache_type_k = p.cache_type_v = xlc.ggml_type.GGML_TYPE_Q8_0
        p.flash_attn_type = xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED
    p.hostnames = ["127.0.0.1"]  # loopback only
    p.port = port  # 0: a random free port
    p.api_keys = [api_key or secrets.token_urlsafe(24)]
    p.ui = False  # no web UI on the listener
    p.n_threads_http = 2
    p.verbosity = 0 if log.isEnabledFor(logging.DEBUG) else -1
    types = []
    ngram = gen.ngram_draft_tokens or 0  # None (the preset's choice) is resolved by make_engine
    if ngram > 0:  # n-gram speculation: llama.cpp tries it before a draft model
        kind = xlc.common_speculative_type
        types.append(kind.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE if gen.ngram_kind == "simple"
                     else kind.COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K)
        m = p.speculative.ngram_simple if gen.ngram_kind == "simple" else p.speculative.ngram_map_k
        m.size_n = gen.ngram_size
        m.size_m = ngram
        m.min_hits = 1
    if draft is not None:
        # the draft model is used only when its type is listed: the path alone loads it and
        # leaves it idle (llama.cpp's CLI infers the type; its in-process API does not)
        types.append(xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE)
        p.speculative.draft.mparams.path = str(draft)
        p.speculative.draft.n_max = gen.draft_tokens
        p.speculative.draft.cpuparams.n_threads = gen.threads
        p.speculative.draft.cpuparams_batch.n_threads = gen.threads
    if types:
        p.speculative.types = types
    return p


def speculation(gen: GenerateSettings, draft: bool) -> str:
    """What the engine speculates with, for its log line: "", "n-gram simple (3 -> 8)", ..."""
    parts = []
    if gen.ngram_draft_tokens:
        parts.append(f"n-gram {gen.ngram_kind} ({gen.ngram_size} -> {gen.ngram_draft_tokens})")
    if draft:
        parts.append(f"draft {gen.draft_preset} ({gen.draft_tokens})")
    return ", ".join(parts)


class LlamaCppEngine:
    def __init__(self, gen: GenerateSettings, gguf: Callable[[], Path], parallel: int | None = None,
                 draft: Callable[[], Path | None] | None = None) -> None:
        self._gen = gen
        self._locate = gguf  # resolved at load: constructing an engine never fails on files
        self._locate_draft = draft
        self.parallel = parallel or gen.parallel or DEFAULT_PARALLEL
        self.prefixes: dict[str, Prefix] = {}
        self._server: Any = None
        self._url = ""
        self._key = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self.version = ""
        self.speculation = ""  # set at load: see `speculation`
        self.build = build_label(gen.llamacpp_build).rsplit(" ", 1)[0]
        self.name = f"llama.cpp ({self.build})"

    @property
    def loaded(self) -> bool:
        return self._server is not None

    def load(self) -> None:
        if self._server is None:
            with self._lock:
                if self._server is None:
                    self._start()

    def _start(self) -> None:
        gguf = self._locate()
        draft = self._locate_draft() if self._locate_draft else None
        xlc, self.build = import_xllamacpp(self._gen.llamacpp_build)
        self.version = str(getattr(xlc, "__version__", ""))
        self.name = f"llama.cpp ({self.build})"
        params = server_params(xlc, gguf, self._gen, self.parallel, api_key=self._key, draft=draft)
        started = time.perf_counter()
        try:
            with _own_signal_handlers():
                server = xlc.Server(params)
        except Exception as e:
            raise ModelError(f"llama.cpp could not load {gguf} ({e}); run `rag prepare` "
                             "to re-check the file, or set generate.engine = \"transformers\"") from e
        self._url = str(server.listening_address).rstrip("/")
        self._server = server
        trim_heap()  # the loader's read buffers
        self.speculation = speculation(self._gen, draft is not None)
        log.info("llama.cpp (%s %s) loaded %s in %.1f s: %d slots, %d threads%s", self.build,
                 self.version, gguf.name, time.perf_counter() - started, self.parallel,
                 self._gen.threads, f", speculative: {self.speculation}" if self.speculation else "")

    def close(self) -> None:
        with self._lock:
            server, self._server = self._server, None
            self.prefixes.clear()
            del server  # the destructor stops the server loop and frees the model

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        """A call to the server's loopback listener (stdlib: ~1 ms, nothing logged per call)."""
        import urllib.error
        import urllib.request

        self.load()
        request = urllib.request.Request(
            self._url + path, data=json.dumps(body).encode(), method="POST",
            headers={"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise ModelError(f"llama.cpp {path} failed on {self._url}: {e}") from e

    def render(self, messages: Sequence[Message]) -> str:
        turns = [{"role": m.role, "content": m.content} for m in messages]
        return str(self._post("/apply-template", {"messages": turns})["prompt"])

    def count_tokens(self, text: str) -> int:
        return len(self._post("/tokenize", {"content": text, "add_special": False})["tokens"])

    def warm_up(self, systems: Sequence[str]) -> None:
        self.load()
        for system in systems:
            stats = GenerationStats()
            prompt = ChatPrompt(system, (Message("system", system), Message("user", "Hi.")))
            for _ in self.pieces(prompt, 1, lambda: False, stats, time.perf_counter()):
                pass
            self.prefixes[system] = Prefix(stats.prompt_tokens, cache=True)

    def pieces(self, prompt: str, limit: int, should_stop: Callable[[], bool],
               stats: GenerationStats, started: float) -> Iterator[str]:
        self.load()
        server = self._server
        stats.prompt_tokens = self.count_tokens(str(prompt))  # ~2 ms; known even if stopped early
        body: dict[str, Any] = {
            "stream": True,
            "max_tokens": limit,
            "temperature": self._gen.temperature,
            "seed": 0,
            "cache_prompt": True,
            "stream_options": {"include_usage": True},
        }
        chat = isinstance(prompt, ChatPrompt)
        if isinstance(prompt, ChatPrompt):
            body["messages"] = [{"role": m.role, "content": m.content} for m in prompt.messages]
        else:
            body["prompt"] = str(prompt)
        errors: list[ModelError] = []

        def produce(emit: Callable[[str], bool]) -> None:
            def on_chunk(chunk: Any) -> bool:
                err = server_error(chunk, "llama.cpp")
                if err is not None:
                    errors.append(err)
                    return True
                return account_chunk(chunk, stats, started, emit)

            call = server.handle_chat_completions if chat else server.handle_completions
            call(body, on_chunk)

        yield from threaded(produce, should_stop, "rag-llamacpp")
        stats.seconds = time.perf_counter() - started
        if errors:
            raise errors[0]


def serve(gguf: Path, gen: GenerateSettings, port: int, api_key: str, parallel: int) -> None:
    """Run the OpenAI-compatible HTTP server on 127.0.0.1:`port` until SIGTERM/SIGINT
    (`python -m rag.engines.llamacpp`): the `openai` engine's server, e.g. in tests."""
    xlc, build = import_xllamacpp(gen.llamacpp_build)
    done = threading.Event()
    if not api_key:
        api_key = secrets.token_urlsafe(24)
        print(f"api key: {api_key}", flush=True)
    server = xlc.Server(server_params(xlc, gguf, gen, parallel, port=port, api_key=api_key))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print(f"listening {server.listening_address} ({build})", flush=True)
    done.wait()


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from rag.config import load_settings, offline_environment

    offline_environment()
    ap = argparse.ArgumentParser(description="Serve a GGUF file over llama.cpp's OpenAI-compatible "
                                 "HTTP API on 127.0.0.1")
    ap.add_argument("gguf", type=Path)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--api-key", default=os.environ.get("RAG_SERVE_API_KEY", ""))
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args(argv)
    serve(args.gguf, load_settings().generate, args.port, args.api_key, args.parallel)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
