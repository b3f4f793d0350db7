"""Each abstract's prompt, prefilled once into the engine's host-RAM prompt cache.

A question about one paper reaches the model as the system prompt, then
"Passages:\\n[1] label (id): <abstract>", then "\\n\\nQuestion: ...". Everything before the
question depends on the paper alone when its abstract fits the passage budget
(`rag.prompt.paper_prefix`). llama.cpp's server keeps finished prompts' key/values in host
RAM (`generate.host_cache_mib`) and, for a new prompt, restores the one that shares the
longest start with it. A restored state leaves the cache and goes back in at the end when its
slot moves on, so the cache is least-recently-used. With every abstract's prompt in it, such a
question prefills only its own words and the template's few tokens instead of ~250 tokens.

`warm` prefills the papers' prompts one at a time, pausing while a question is answered, so
`rag serve` runs it in the background with the chat open. A prompt already cached costs one
restore and one token. Only abstracts that fit the passage budget whole are prefilled (a longer
one is cut to the question's best sentences, so its prompt varies), and only as many as the
host cache holds with room to spare (their key/values estimated from the preset; prefilling
more would evict the earlier ones). It does nothing when the engine has no host cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag.config import Settings
from rag.generate import Generator
from rag.models import context_tokens, host_cache_mib, kv_bytes_per_token
from rag.prompt import SYSTEM, approx_tokens, paper_prefix, whole_passage
from rag.types import Paper

log = logging.getLogger(__name__)

ANSWER_ROOM = 100  # tokens a paper's state grows by once a question and its answer follow it
FILL = 0.8  # share of the host cache the papers may take; the rest keeps other prompts


@dataclass(frozen=True)
class WarmRun:
    sent: int = 0  # papers whose prompt was run
    cached: int = 0  # of those, already in the cache (restored, not prefilled)
    seconds: float = 0.0
    skipped: str = ""  # why no prompt was sent
    note: str = ""  # why some papers were left out (the host cache holds only the first ones)


def estimate_mib(settings: Settings, prompts: Sequence[str]) -> float:
    """Host cache the prompts' key/values take once each has had an answer; 0 when unknown."""
    per_token = kv_bytes_per_token(settings.generate)
    return sum(approx_tokens(p) + ANSWER_ROOM for p in prompts) * per_token / 2**20


def warm(settings: Settings, generator: Generator, papers: Sequence[Paper],
         cancel: threading.Event | None = None,
         pause: Callable[[], bool] | None = None) -> WarmRun:
    """Prefill each paper's prompt prefix into the engine's host cache (see the module doc).
    While `pause()` is true (a question is being answered) no prompt starts; setting `cancel`
    ends the run after the prompt in flight."""
    started = time.perf_counter()
    # llama.cpp's host cache (the openai engine's server may keep one too, but not ours to size)
    room = host_cache_mib(settings.generate) if generator.engine_kind == "llama.cpp" else 0
    if not settings.generate.paper_cache:
        return WarmRun(skipped="generate.paper_cache is off")
    if room <= 0:
        return WarmRun(skipped=f"the {generator.engine_kind} engine keeps no host prompt cache "
                       "here (generate.host_cache_mib)")
    # only a whole abstract starts a question's prompt the same way every time: one longer
    # than the passage budget is cut to the question's best sentences (the 1.5B's 200 tokens
    # fit none of the seeds, the 0.5B's 450 fit 55 of 57)
    budget = context_tokens(settings)
    fits = [p for p in papers if approx_tokens(whole_passage(p).text) <= budget]
    if not fits:
        return WarmRun(skipped=f"no abstract fits whole in the {budget}-token passage budget "
                       "(answer.context_tokens)" if papers else "no papers")
    prompts = [generator.format_chat(SYSTEM, paper_prefix(p)) for p in fits]
    sizes = [estimate_mib(settings, [str(p)]) for p in prompts]
    need, keep, taken = sum(sizes), 0, 0.0
    while keep < len(sizes) and taken + sizes[keep] <= FILL * room:  # the first that fit
        taken += sizes[keep]
        keep += 1
    note = "" if keep == len(prompts) else (
        f"{len(prompts) - keep} of {len(prompts)} papers' prompts left out: they need ~{need:.0f} "
        f"MiB of host cache and generate.host_cache_mib is {room}: raise it to >= "
        f"{need / FILL:.0f} to cache them all")
    if not keep:
        return WarmRun(skipped=note)
    if note:
        log.warning("paper cache: %s", note)
    prompts = prompts[:keep]
    log.info("paper cache: prefilling %d papers' prompts (~%.0f of %d MiB of host cache)",
             len(prompts), taken, room)
    sent = cached = 0
    for prompt in prompts:
        while pause is not None and pause() and not (cancel is not None and cancel.is_set()):
            time.sleep(0.2)
        if cancel is not None and cancel.is_set():
            break
        stats = generator.prefill(prompt)
        sent += 1
        cached += stats.prompt_tokens - stats.cached_prompt_tokens <= 2  # restore re-runs the last
    run = WarmRun(sent, cached, time.perf_counter() - started, note=note)
    say = log.debug if cached == sent else log.info  # a refresh that found all: quiet
    say("paper cache: %d of %d papers' prompts prefilled (%d were cached) in %.1f s, ~%.0f of "
        "%d MiB", sent - cached, len(prompts), cached, run.seconds, taken, room)
    return run
