"""How much llama.cpp's parallel slots add on this machine, without the app: k generations at once.

    python bench/batch_decode.py [--preset qwen2.5-0.5b] [--tokens 48] [--out bench/results-batch-decode.json]

One engine with 4 slots (the app's) on the preset's GGUF file, 2 threads. Each run sends k
chats at once (threads, as concurrent users), each the answer system prompt, one abstract
prompt of a different paper (prefilled beforehand, as the paper cache does, so the runs time
decode and the few question tokens, not the abstract), a question, and a forced answer length.
It prints generated tokens per second over all k and the ratio to k = 1: the ceiling on "4
questions at once give N x the answers per minute of one at a time" that batching can reach
here, whatever the app does around it.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any

from common import BENCH, CpuWatch, machine_load, table, wait_for_idle, write_json


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen2.5-0.5b")
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--ks", default="1,2,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=BENCH / "results-batch-decode.json")
    args = ap.parse_args()

    from rag.config import load_settings, offline_environment

    offline_environment()
    from rag.embed import Embedder
    from rag.engines.base import ChatPrompt, GenerationStats, chat_messages
    from rag.generate import Generator
    from rag.prompt import SYSTEM, paper_prefix
    from rag.retrieve import Retriever
    from rag.store import Store

    start_load = wait_for_idle(60)
    s = load_settings(generate={"preset": args.preset, "engine": "llama.cpp", "parallel": 4,
                                "max_new_tokens": args.tokens, "temperature": 0.0})
    papers = sorted(Retriever(s.retrieve, Store(s.store, s.paths.data),
                              Embedder(s.embed)).papers.values(), key=lambda p: p.id)
    gen = Generator(s)
    gen.warm_up(SYSTEM)
    engine: Any = gen.engine
    ks = [int(k) for k in args.ks.split(",")]
    need = max(ks) * args.rounds * len(ks)
    prompts = []
    for i, paper in enumerate(papers[:need]):
        gen.prefill(gen.format_chat(SYSTEM, paper_prefix(paper)))
        user = paper_prefix(paper) + "\n\nQuestion: Summarise the method and its results in detail."
        messages = chat_messages(SYSTEM, user)
        prompts.append(ChatPrompt(engine.render(messages), messages))
    results: dict[str, Any] = {}
    used = 0
    for k in ks:
        rates, waits = [], []
        for _ in range(args.rounds):
            batch, used = prompts[used:used + k], used + k
            stats = [GenerationStats() for _ in batch]

            def one(i: int, batch: list[ChatPrompt] = batch,
                    stats: list[GenerationStats] = stats) -> None:
                t = time.perf_counter()
                for _ in engine.pieces(batch[i], args.tokens, lambda: False, stats[i], t):
                    pass

            watch = CpuWatch()
            t0 = time.perf_counter()
            threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            rates.append(sum(st.generated_tokens for st in stats) / wall)
            waits.append(wall)
            print(f"  k={k}: {rates[-1]:.1f} tok/s over {wall:.2f} s "
                  f"(uncached prompt tokens {[st.prompt_tokens - st.cached_prompt_tokens for st in stats]}, "
                  f"other cores {watch.other_cores():.2f})", flush=True)
        results[str(k)] = {"tok_s": max(rates), "tok_s_runs": [round(r, 2) for r in rates],
                           "wall_s_runs": [round(w, 2) for w in waits]}
    base = results["1"]["tok_s"] if "1" in results else None
    for r in results.values():
        r["over_1"] = round(r["tok_s"] / base, 3) if base else None
    out = {"preset": args.preset, "engine": gen.engine_name, "tokens": args.tokens,
           "rounds": args.rounds, "machine_load": {"start": start_load, "end": machine_load()},
           "k": results}
    print(table(["at once", "generated tok/s (best of rounds)", "x one at a time"],
                [[k, round(r["tok_s"], 1), r["over_1"]] for k, r in results.items()]))
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
