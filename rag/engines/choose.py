"""`generate.engine = "auto"`: which engine answers fastest on this machine, measured once.

`rag prepare` times each installed local engine on one fixed prompt of typical size (~370
tokens in, the answer system prompt included, 30 out), writes the figures and the choice to
`<models>/<preset>/engines.json` and prints the table. The app reads that file: no timing at
start. Without it (prepare not run yet, or a .gguf path) the app takes llama.cpp when it is
installed (its 4-bit weights are 4x fewer bytes per decoded token than fp32) and says so.

Expected answer time = prompt tokens not in the system-prompt cache / prefill rate + 30 /
decode rate: the user's wait for a typical answer. llama.cpp with the paper cache
(rag/paper_cache.py) has the passages prefilled before its timed run, as a question about one
paper finds its abstract's prompt in the host cache; its build label says "+ paper cache", so
a timing taken without it is re-taken by `rag prepare`. Both engines are loaded at once and take
turns on the prompt (a warm-up, then two runs each), each keeping its faster run: the CPU is
shared, and a burst of load from another process then falls on both, not on one.
"""

from __future__ import annotations

import gc
import json
import logging
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rag.config import Settings
from rag.engines.base import ChatPrompt, Engine, GenerationStats, chat_messages
from rag.models import PRESETS, preset_dir

log = logging.getLogger(__name__)

TIMINGS = "engines.json"
LOCAL = ("llama.cpp", "transformers")
NEW_TOKENS = 30
# A typical prompt: the answer system prompt, three passages, a question (~370 tokens with
# Qwen's template; bench/results.json: prompt_tokens_p50 = 367). Each run puts the passages
# in another order, so only the system prompt is shared between runs, as between questions.
PASSAGES = (
    "SVOO (003-03): Sparse attention is a promising way to cut the quadratic "
    "cost of long-context inference, but existing methods pick one sparsity pattern for every "
    "layer and head. We present SVOO, a training-free method that selects, for each head, the "
    "pattern that best preserves its attention output under a fixed budget. On LongBench and "
    "RULER, SVOO keeps accuracy within 0.4 points of dense attention while computing 18% of "
    "the attention scores, and it achieves a "
    "1.93x end-to-end speedup at 128k tokens on one GPU.\n\n"
    "LARA (011-02): Retrieval-augmented generation often fails when the retrieved "
    "documents disagree. LARA trains a small verifier that scores each passage against the "
    "question and re-weights the generator's attention toward consistent evidence. It improves "
    "exact match by 3.1 points on NaturalQuestions and 2.4 points on TriviaQA.\n\n"
    "HiMe (020-05): HiMe stores an agent's episodes at three time scales and retrieves them "
    "with a learned router. On WebArena it completes 41.2% of tasks, against 35.8% for the "
    "strongest baseline."
)
QUESTIONS = (
    "How does SVOO choose a sparsity pattern, and what speedup does it achieve?",
    "What does LARA train, and by how much does it improve exact match?",
    "How does HiMe store episodes, and how many WebArena tasks does it complete?",
)


def timing_message(shift: int, question: str) -> str:
    """The fixed user message: the three passages rotated by `shift`, then the question."""
    parts = PASSAGES.split("\n\n")
    parts = parts[shift:] + parts[:shift]
    blocks = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(parts, start=1))
    return f"Passages:\n{blocks}\n\nQuestion: {question}"


@dataclass(frozen=True)
class Choice:
    engine: str  # "llama.cpp" | "transformers" | "openai"
    reason: str  # one line a user can read on the status line


def timings_path(settings: Settings) -> Path | None:
    preset = PRESETS.get(settings.generate.preset)
    return preset_dir(settings, preset) / TIMINGS if preset else None


def runs_gguf(settings: Settings) -> bool:
    name = settings.generate.preset
    return name in PRESETS or (name.endswith(".gguf") and Path(name).expanduser().is_file())


def builds(settings: Settings) -> dict[str, str]:
    """The installed local engines and their builds: a timing is valid for these only."""
    from rag.engines.llamacpp import build_label, installed

    out = {"transformers": f"transformers {metadata.version('transformers')}"}
    if installed() and runs_gguf(settings):
        out["llama.cpp"] = build_label(settings.generate.llamacpp_build) + (
            " + paper cache" if paper_cached(settings) else "")
    return out


def paper_cached(settings: Settings) -> bool:
    """Whether llama.cpp here keeps each abstract's prompt prefilled (rag/paper_cache.py): a
    question about one paper then prefills only its own words, which its timing must show."""
    from rag.models import host_cache_mib

    return settings.generate.paper_cache and host_cache_mib(settings.generate) > 0


def read_timings(settings: Settings) -> dict[str, Any] | None:
    path = timings_path(settings)
    try:
        data = json.loads(path.read_text()) if path else None
    except (OSError, ValueError):
        return None
    preset = PRESETS.get(settings.generate.preset)
    ok = isinstance(data, dict) and preset is not None and data.get("sha256") == preset.sha256
    return data if ok else None


def resolve(settings: Settings) -> Choice:
    """The engine to run and why; never loads or times anything."""
    gen = settings.generate
    if gen.engine != "auto":
        return Choice(gen.engine, f"generate.engine = {gen.engine!r}")
    if not runs_gguf(settings):
        return Choice("transformers", "auto: the model is an HF folder or hub id, which only "
                      "transformers runs")
    current = builds(settings)
    data = read_timings(settings)
    if data and data.get("choice") in current:
        stale = {k: v for k, v in current.items() if data.get("builds", {}).get(k) != v}
        note = f" (timed with other builds than {', '.join(stale.values())}: re-run `rag prepare`)" \
            if stale else ""
        return Choice(data["choice"], f"auto: {data['reason']}{note}")
    engine = "llama.cpp" if "llama.cpp" in current else "transformers"
    reason = (f"auto: no engine timing cached yet (run `rag prepare`); {engine} by default"
              + (", 4-bit weights: 4x fewer bytes per token than fp32" if engine == "llama.cpp" else
                 ", xllamacpp is not installed"))
    log.warning("generate.engine %s", reason)
    return Choice(engine, reason)


def measure(engines: dict[str, Engine], new_tokens: int = NEW_TOKENS,
            prefilled: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Time each engine on the fixed prompt: a warm-up run, then two more, the engines taking
    turns (so a burst of load from other processes hits both), keeping each one's faster.
    An engine in `prefilled` first prefills the prompt's passages apart, as the paper cache
    does for a paper's abstract, so its timed run reuses them."""
    from rag.prompt import SYSTEM

    loads: dict[str, float] = {}
    for name, engine in engines.items():
        started = time.perf_counter()
        engine.load()
        engine.warm_up([SYSTEM])
        loads[name] = time.perf_counter() - started
    runs: dict[str, list[GenerationStats]] = {name: [] for name in engines}
    for shift, question in enumerate(QUESTIONS):
        for name, engine in engines.items():
            user = timing_message(shift, question)
            if name in prefilled:
                head = chat_messages(SYSTEM, user.split("\n\nQuestion:")[0])
                for _ in engine.pieces(ChatPrompt(engine.render(head), head), 1, lambda: False,
                                       GenerationStats(), time.perf_counter()):
                    pass
            messages = chat_messages(SYSTEM, user)
            prompt = ChatPrompt(engine.render(messages), messages)
            stats = GenerationStats()
            t0 = time.perf_counter()
            for _ in engine.pieces(prompt, new_tokens, lambda: False, stats, t0):
                pass
            runs[name].append(stats)
    out = {}
    for name, timed in runs.items():
        best: list[dict[str, Any]] = []
        for st in timed[1:]:  # the first run is a warm-up
            prefill, decode = st.prefill_tokens_per_second, st.decode_tokens_per_second
            if not prefill or not decode:
                continue
            expected = (st.prompt_tokens - st.cached_prompt_tokens) / prefill + new_tokens / decode
            best.append({"prompt_tokens": st.prompt_tokens,
                         "cached_prompt_tokens": st.cached_prompt_tokens,
                         "generated_tokens": st.generated_tokens,
                         "ttft_s": round(st.first_token_seconds or 0.0, 3),
                         "prompt_tok_s": round(prefill, 1), "decode_tok_s": round(decode, 1),
                         "expected_answer_s": round(expected, 2)})
        out[name] = ({"name": engines[name].name, "load_s": round(loads[name], 1),
                      **min(best, key=lambda r: r["expected_answer_s"])} if best else
                     {"name": engines[name].name, "error": "no run produced two tokens"})
    return out


def choose_by_timing(settings: Settings, report: Callable[[str], None], progress: bool = True,
                     force: bool = False) -> dict[str, Any]:
    """Time every installed local engine once (cached), pick the fastest, report the table."""
    from rag.engines import make_engine
    from rag.models import prepare_hf

    path = timings_path(settings)
    current = builds(settings)
    data = read_timings(settings)
    if force or not data or data.get("builds") != current:
        results: dict[str, Any] = {}
        engines: dict[str, Engine] = {}
        for name in LOCAL:
            if name not in current:
                continue
            if name == "transformers":
                prepare_hf(settings, progress)  # the HF folder: only this engine needs it
            one = settings.model_copy(update={"generate": settings.generate.model_copy(
                update={"engine": name, "parallel": 1})})
            engines[name] = make_engine(one, name)
        report(f"timing {', '.join(engines)} on a {NEW_TOKENS}-token answer to a ~370-token "
               "prompt, taking turns ...")
        prefilled = frozenset({"llama.cpp"} if paper_cached(settings) else ())
        try:
            results = measure(engines, prefilled=prefilled)
        except Exception as e:  # one engine failing: time the others alone
            results = {}
            for name, engine in engines.items():
                try:
                    results.update(measure({name: engine}, prefilled=prefilled))
                except Exception as e2:  # an engine that cannot run here is not chosen
                    results[name] = {"name": engine.name, "error": f"{type(e2).__name__}: {e2}"}
            log.warning("timing the engines together failed (%s); timed one by one", e)
        finally:
            for engine in engines.values():
                engine.close()
            engines.clear()
            gc.collect()
        timed = {k: v for k, v in results.items() if "expected_answer_s" in v}
        if not timed:
            raise RuntimeError(f"no engine could run: {results}")
        choice = min(timed, key=lambda k: timed[k]["expected_answer_s"])
        others = ", ".join(f"{timed[k]['name']} {timed[k]['expected_answer_s']:.1f} s"
                           for k in timed if k != choice)
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        reason = (f"{timed[choice]['name']} answers fastest here: {timed[choice]['expected_answer_s']:.1f} s"
                  f" expected{' vs ' + others if others else ''} (rag prepare, {when})")
        preset = PRESETS[settings.generate.preset]
        data = {"preset": preset.name, "sha256": preset.sha256, "threads": settings.generate.threads,
                "machine": {"cpu": _cpu_name(), "python": platform.python_version()},
                "new_tokens": NEW_TOKENS, "builds": current, "engines": results,
                "choice": choice, "reason": reason}
        if path is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=2) + "\n")
            tmp.replace(path)
    report(table(data))
    return data


def table(data: dict[str, Any]) -> str:
    cols = ("engine", "prompt tok/s", "decode tok/s", "first token s", "expected answer s")
    rows = []
    for name, r in data["engines"].items():
        if "error" in r:
            rows.append((r.get("name", name), "error", r["error"][:60], "", ""))
        else:
            rows.append((r["name"], f"{r['prompt_tok_s']:.0f}", f"{r['decode_tok_s']:.1f}",
                         f"{r['ttft_s']:.2f}", f"{r['expected_answer_s']:.2f}"))
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows, strict=False)]
    line = lambda row: "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False))  # noqa: E731
    return "\n".join([f"engines for {data['preset']} ({data['threads']} threads):", line(cols),
                      *(line(r) for r in rows), f"choice: {data['choice']}: {data['reason']}"])


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
