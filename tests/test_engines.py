"""The generation engines end to end: llama.cpp (the xllamacpp wheel, in process) through the
real Assistant, transformers on a cited answer, the openai engine against a real
OpenAI-compatible server started here (xllamacpp's HTTP server on the 0.5B file, in a
subprocess, killed and restarted mid-session), `auto`, and two chats at once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag.assistant import Assistant
from rag.config import ROOT, Settings
from rag.engines import choose
from rag.errors import ModelError
from rag.generate import Generator
from rag.prompt import strip_markers
from rag.types import Final, Token, Turn
from tests.conftest import make_settings

pytestmark = pytest.mark.model

GGUF = Path(os.path.expanduser("~/.cache/icml-rag/models/qwen2.5-0.5b/model.gguf"))


def with_generate(settings: Settings, **generate: object) -> Settings:
    return settings.model_copy(update={"generate": settings.generate.model_copy(update=generate)})


def run(assistant: Assistant, question: str, history=(), stop: threading.Event | None = None):
    events = list(assistant.stream(question, history, stop=stop))
    final = events[-1]
    assert isinstance(final, Final)
    return "".join(e.text for e in events if isinstance(e, Token)), final.answer


def assert_cited_answer(assistant: Assistant) -> None:
    tokens, a = run(assistant, "What speedup does SVOO achieve?")
    assert not a.abstained, a.text
    assert "1.93" in a.text
    assert "003-03" in {c.paper_id for c in a.citations if c.supported}
    markers = {int(m) for m in re.findall(r"\[(\d+)\]", a.text)}
    assert markers <= {c.marker for c in a.citations}
    # what streamed is what the final answer says (markers become citations)
    assert " ".join(strip_markers(a.text).split()) == " ".join(tokens.split())
    assert a.first_token_seconds is not None and 0 < a.first_token_seconds < a.seconds
    assert a.prompt_tokens > 100 and a.generated_tokens > 0


@pytest.fixture(scope="session")
def llama_assistant(settings, embedder, retriever) -> Assistant:
    s = with_generate(settings, engine="llama.cpp", parallel=2)
    return Assistant(s, retriever.store, embedder, retriever, Generator(s))


# --- llama.cpp, the prebuilt wheel, through the real assistant ---------------------------


def test_llamacpp_names_itself_and_runs_slots_in_parallel(llama_assistant):
    g = llama_assistant.generator
    assert g.engine_kind == "llama.cpp" and g.engine_name.startswith("llama.cpp (")
    assert g.engine_reason == "generate.engine = 'llama.cpp'"
    assert g.parallel == 2


def test_llamacpp_cited_answer_streams_its_final_text(llama_assistant):
    assert_cited_answer(llama_assistant)


def test_llamacpp_abstains(llama_assistant):
    # declined before the model (the detail-missing decline is the guard's, engine-free: test_assistant)
    tokens, off = run(llama_assistant, "What is the capital of France?")
    assert off.abstained and off.reason == "off-topic" and tokens == ""


def test_llamacpp_follow_up(llama_assistant):
    first = llama_assistant.ask("Is there a training-free sparse attention method for video "
                                "diffusion transformers?")
    cited = tuple(dict.fromkeys(c.paper_id for c in first.citations)) or first.closest
    assert "003-03" in cited
    _, a = run(llama_assistant, "What speedup does it achieve?", [Turn(first.question, first.text, cited)])
    assert a.hits[0].chunk.paper_id == "003-03"
    assert not a.abstained and "1.93" in a.text


def test_llamacpp_stop_ends_the_answer_and_frees_the_slot(llama_assistant):
    stop = threading.Event()
    final = None
    for ev in llama_assistant.stream("Explain how BEXA decides when to exit early.", stop=stop):
        if isinstance(ev, Token) and ev.text.strip():
            stop.set()
        if isinstance(ev, Final):
            final = ev.answer
    assert final is not None and 0 < final.generated_tokens <= 4
    g = llama_assistant.generator
    with g.stream(g.format_chat("You are terse.", "Say hi."), max_new_tokens=4) as s:
        assert "".join(s).strip()  # the next request runs: the stopped one left no busy slot
    assert s.stats.finish_reason in ("end", "length")


def test_llamacpp_generator_contract(llama_assistant):
    g = llama_assistant.generator
    prompt = g.format_chat("You are terse.", "Name three primary colours.")
    assert prompt.rstrip().endswith("assistant") and prompt.messages[-1].content.startswith("Name")
    with g.stream(prompt, max_new_tokens=12) as s:
        text = "".join(s)
    assert text == g.generate(prompt, max_new_tokens=12)  # greedy, same slot state or not
    assert s.stats.prompt_tokens == g.count_tokens(prompt)
    assert 0 < s.stats.generated_tokens <= 12 and s.stats.first_token_seconds is not None
    g.warm_up("A fixed system prompt that is long enough to be worth caching, surely.")
    assert g._prefixes["A fixed system prompt that is long enough to be worth caching, surely."].cache


def test_two_chats_at_once_each_get_their_own_answer(llama_assistant):
    questions = {"003-03": "What speedup does SVOO achieve?",
                 "000-01": "What does SSL4RL use as rewards for reinforcement learning?"}
    answers: dict[str, object] = {}

    def ask(pid: str) -> None:
        answers[pid] = run(llama_assistant, questions[pid])[1]

    threads = [threading.Thread(target=ask, args=(pid,)) for pid in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for pid, a in answers.items():
        assert not a.abstained and pid in {c.paper_id for c in a.citations}, (pid, a.text)


def test_parallel_slots_generate_at_the_same_time(llama_assistant):
    """Two long generations started together both produce a token before either ends."""
    g = llama_assistant.generator
    times: dict[int, list[float]] = {}

    def count(i: int) -> None:
        prompt = g.format_chat("You are terse.", f"Count from {i} to {i + 60}, one per line.")
        with g.stream(prompt, max_new_tokens=60) as s:
            for _ in s:
                times.setdefault(i, []).append(time.perf_counter())

    threads = [threading.Thread(target=count, args=(i,)) for i in (1, 100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(ts[0] for ts in times.values()) < min(ts[-1] for ts in times.values())


# --- llama.cpp speculative decoding: lossless under greedy verification -------------------

SPEC_PASSAGE = (
    "[1] SVOO: Training-free sparse attention for video diffusion transformers. We present SVOO, "
    "a training-free sparse attention method for video diffusion transformers that prunes "
    "attention blocks offline and reuses the sparsity pattern online. SVOO achieves up to 1.93x "
    "end-to-end speedup on HunyuanVideo while preserving generation quality.")


def speculate(settings: Settings, **generate: object) -> tuple[str, dict]:
    """One greedy answer quoting its passage on a fresh llama.cpp engine (0.5B file), with the
    server's own draft counters of that generation."""
    import rag.engines.llamacpp as L
    from rag.engines import make_engine
    from rag.engines.base import ChatPrompt, GenerationStats, Message

    s = with_generate(settings, engine="llama.cpp", preset="qwen2.5-0.5b", parallel=1, **generate)
    engine = make_engine(s, "llama.cpp")
    system = "Answer from the passage only, quoting its words."
    prompt = ChatPrompt(system, (Message("system", system), Message(
        "user", f"{SPEC_PASSAGE}\n\nQuestion: What is SVOO and what speedup does it achieve?")))
    timings: dict = {}
    account = L.account_chunk

    def keep(chunk, *args):
        timings.update(chunk.get("timings") or {})
        return account(chunk, *args)

    L.account_chunk = keep
    try:
        stats = GenerationStats()
        text = "".join(engine.pieces(prompt, 48, lambda: False, stats, time.perf_counter()))
    finally:
        L.account_chunk = account
        engine.close()
    assert stats.generated_tokens > 10, text
    return text, {**timings, "speculation": engine.speculation}


def test_llamacpp_speculative_decoding_keeps_the_greedy_text(tmp_path):
    """n-gram speculation (each preset's shipped setting and the measured best, 3 -> 8) and a
    draft model start, really draft (the server counts proposed tokens), and keep this text."""
    from rag.models import PRESETS

    settings = make_settings(tmp_path / "data")
    plain, t = speculate(settings, ngram_draft_tokens=0)
    assert t["speculation"] == "" and not t.get("draft_n")
    shipped = {p.llamacpp_ngram_tokens for p in PRESETS.values() if p.llamacpp_ngram_tokens}
    for tokens in sorted(shipped | {8}):
        text, t = speculate(settings, ngram_draft_tokens=tokens, ngram_size=3)
        assert t["speculation"].startswith("n-gram simple") and t["draft_n"] > 0, t
        assert t["draft_n_accepted"] > 0  # the answer quotes its passage
        assert text == plain
    # a draft model (the 0.5B drafting for itself: nearly every proposal is accepted) is used, not
    # just loaded: the draft path alone left llama.cpp's speculative.types at [none]
    text, t = speculate(settings, ngram_draft_tokens=0, draft_preset="qwen2.5-0.5b", draft_tokens=4)
    assert t["speculation"] == "draft qwen2.5-0.5b (4)" and t["draft_n"] > 0, t
    assert t["draft_n_accepted"] >= 0.8 * t["draft_n"]  # batched verification may round apart
    assert text == plain


def test_llamacpp_q8_key_value_cache_gives_a_cited_answer(settings, embedder, retriever):
    """generate.kv_cache_type = "q8_0" (a quantized cache, with flash attention) really runs."""
    s = with_generate(settings, engine="llama.cpp", parallel=1, kv_cache_type="q8_0",
                      host_cache_mib=0)
    gen = Generator(s)
    try:
        assert_cited_answer(Assistant(s, retriever.store, embedder, retriever, gen))
    finally:
        gen.engine.close()  # type: ignore[attr-defined]


# --- transformers --------------------------------------------------------------------------


def test_transformers_engine_gives_a_cited_answer(settings, embedder, retriever):
    s = with_generate(settings, engine="transformers")
    a = Assistant(s, retriever.store, embedder, retriever, Generator(s))
    assert a.generator.engine_name == "transformers" and a.generator.parallel == 1
    assert_cited_answer(a)
    a.generator.engine.close()


# --- openai: a real OpenAI-compatible server, killed and restarted --------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """xllamacpp's OpenAI-compatible HTTP server on the 0.5B file, in a subprocess."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rag.engines.llamacpp", str(GGUF), "--port", str(self.port),
             "--api-key", self.key, "--parallel", "2"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # printed once the model is loaded
        assert line.startswith("listening"), line

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
            self.proc = None


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer(_free_port(), "test-key-" + os.urandom(8).hex())
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


@pytest.fixture(scope="module")
def openai_assistant(server, settings, embedder, retriever) -> Assistant:
    s = with_generate(settings, engine="openai", openai_url=f"http://127.0.0.1:{server.port}/v1",
                      openai_api_key=server.key, openai_timeout=60.0)
    return Assistant(s, retriever.store, embedder, retriever, Generator(s))


def test_openai_engine_answers_and_survives_a_server_restart(server, openai_assistant):
    assert openai_assistant.generator.engine_name == f"openai http://127.0.0.1:{server.port}/v1"
    assert_cited_answer(openai_assistant)
    # killed mid-answer: one clear message, no traceback from the HTTP library
    with pytest.raises(ModelError, match=r"generation server at .* (dropped|not reachable)"):
        for ev in openai_assistant.stream("Explain how BEXA decides when to exit early."):
            if isinstance(ev, Token) and ev.text.strip():
                server.kill()
    # down: the next question says so at once
    started = time.perf_counter()
    with pytest.raises(ModelError, match=r"not reachable .* start it"):
        run(openai_assistant, "What speedup does SVOO achieve?")
    assert time.perf_counter() - started < 10
    # back: the same assistant answers again
    server.start()
    assert_cited_answer(openai_assistant)


def test_openai_engine_names_a_wrong_model_or_key(server, settings):
    url = f"http://127.0.0.1:{server.port}/v1"
    wrong_key = Generator(with_generate(settings, engine="openai", openai_url=url, openai_api_key="nope"))
    with pytest.raises(ModelError, match="rejected the API key"):
        wrong_key.generate(wrong_key.format_chat("You are terse.", "Hi."), max_new_tokens=2)
    wrong_model = Generator(with_generate(settings, engine="openai", openai_url=url,
                                          openai_api_key=server.key, openai_model="no-such-model"))
    try:
        text = wrong_model.generate(wrong_model.format_chat("You are terse.", "Hi."), max_new_tokens=2)
    except ModelError as e:  # a server that checks the name says which it serves
        assert "no-such-model" in str(e) and "generate.openai_model" in str(e)
    else:  # llama.cpp's server answers with its one model whatever the name: still an answer
        assert text.strip()
    with pytest.raises(ModelError, match="openai_url is empty"):
        Generator(with_generate(settings, engine="openai", openai_url=""))


def test_openai_engine_says_when_a_slow_server_does_not_answer_in_time(settings):
    """A real listener that takes the request and never replies (a server that hangs): the
    read timeout ends the wait with one message naming the server and the setting."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)  # read nothing back, answer nothing

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    try:
        slow = Generator(with_generate(settings, engine="openai", openai_url=url,
                                       openai_api_key="k", openai_timeout=1.5))
        started = time.perf_counter()
        with pytest.raises(ModelError, match=r"generation server at .* did not answer within 1.5 s"):
            slow.generate(slow.format_chat("You are terse.", "Hi."), max_new_tokens=2)
        assert time.perf_counter() - started < 15
    finally:
        listener.close()
        for c in held:
            c.close()


# --- auto ----------------------------------------------------------------------------------


def test_auto_without_a_timing_falls_back_and_says_so(tmp_path):
    s = make_settings(tmp_path / "data")
    s = s.model_copy(update={"paths": s.paths.model_copy(update={"models": tmp_path}),
                             "generate": s.generate.model_copy(update={"engine": "auto"})})
    c = choose.resolve(s)
    assert c.engine == "llama.cpp" and "no engine timing cached" in c.reason
    folder = with_generate(s, preset=str(tmp_path))
    assert choose.resolve(folder).engine == "transformers"  # an HF folder: only transformers
    # a cached timing decides (pure logic: the file `rag prepare` writes)
    (tmp_path / "qwen2.5-0.5b").mkdir()
    from rag.models import PRESETS

    cached = {"sha256": PRESETS["qwen2.5-0.5b"].sha256, "builds": choose.builds(s),
              "choice": "transformers", "reason": "transformers answers fastest here: 1.0 s"}
    (tmp_path / "qwen2.5-0.5b" / choose.TIMINGS).write_text(json.dumps(cached))
    c = choose.resolve(s)
    assert c == choose.Choice("transformers", "auto: transformers answers fastest here: 1.0 s")


def test_auto_prepare_times_the_engines_and_records_why(tmp_path, settings):
    """`rag prepare` with engine auto on the real prepared files (linked, not copied)."""
    from rag import models

    real = settings.paths.models / "qwen2.5-0.5b"
    assert models.is_prepared(with_generate(settings, preset="qwen2.5-0.5b"))
    (tmp_path / "qwen2.5-0.5b").mkdir()
    for name in ("model.gguf", "hf", models.MARKER):
        (tmp_path / "qwen2.5-0.5b" / name).symlink_to(real / name)
    s = settings.model_copy(update={"paths": settings.paths.model_copy(update={"models": tmp_path})})
    s = with_generate(s, engine="auto", preset="qwen2.5-0.5b")
    lines: list[str] = []
    models.prepare(s, progress=False, report=lines.append)
    data = json.loads((tmp_path / "qwen2.5-0.5b" / choose.TIMINGS).read_text())
    assert set(data["engines"]) == {"llama.cpp", "transformers"}
    for r in data["engines"].values():
        assert r["prompt_tokens"] > 300 and r["generated_tokens"] >= 2, r
        assert r["cached_prompt_tokens"] > 50  # the system prompt was reused, as in the app
        assert r["decode_tok_s"] > 0 and r["prompt_tok_s"] > 0
    # llama.cpp is timed as the app runs it: the passages found in its host cache, as a
    # paper's abstract is (rag/paper_cache.py); transformers keeps only the system prompt
    cached = {k: r["cached_prompt_tokens"] for k, r in data["engines"].items()}
    assert cached["llama.cpp"] > cached["transformers"] + 150, cached
    assert data["builds"]["llama.cpp"].endswith("+ paper cache")
    assert data["choice"] in data["engines"] and "expected" in data["reason"]
    assert "choice:" in lines[-1] and "decode tok/s" in lines[-1]
    g = Generator(s)
    assert g.engine_kind == data["choice"] and g.engine_reason == f"auto: {data['reason']}"
    before = (tmp_path / "qwen2.5-0.5b" / choose.TIMINGS).stat().st_mtime_ns
    models.prepare(s, progress=False, report=lines.append)  # cached: not timed again
    assert (tmp_path / "qwen2.5-0.5b" / choose.TIMINGS).stat().st_mtime_ns == before
