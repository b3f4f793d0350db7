"""llama.cpp speculative decoding, measured on the answer prompts the app sends.

    nice -n 19 python bench/speculative.py --preset qwen2.5-1.5b \
        --variants plain,draft4,draft8,ngram3x8,ngram2x16 --out bench/results-speculative-1.5b.json

1. A throwaway index of seeds/ and the real Assistant on the plain llama.cpp engine ask each
   question once; every prompt it sends the generator (answer, second look, ...) is kept with
   its token limit. That engine is then closed: its prompt cache must not help anyone.
2. One engine per variant is loaded (one slot each; the GGUF is memory-mapped, so they share
   the weights), and each warms up on the system prompts, as the app does.
3. Each prompt goes to every variant in turn, the order rotated per prompt (A,B,C / B,C,A ...),
   so a load change on the machine hits all variants alike; every engine sees each prompt once.

Variants: plain; draft<N> (the 0.5B preset drafting N tokens); ngram<n>x<m> (llama.cpp's
ngram_simple: the last n tokens matched earlier in prompt + answer, up to m following tokens
verified in one batch); mapk<n>x<m> (ngram_map_k, the same keyed by n-gram).
Per variant: first token and answer p50, app decode tok/s (tokens after the first per second)
and the engine's own decode, draft tokens proposed / accepted, the per-prompt answer-time
ratio to plain (median), and whether each text is identical to plain greedy decoding.
Compare ratios within one run; seconds move with the machine's load.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, CpuWatch, machine_load, median, table, write_json

FULL = "q29,q31,q36,q41,q43,q32,q33,q34,q35,q37,q38,q39,q40,q42,q44"  # bench.py's FULL


def variant_generate(gen: Any, name: str) -> Any:
    """The GenerateSettings of variant `name` (speculation off unless it names one)."""
    upd: dict[str, Any] = {"ngram_draft_tokens": 0, "draft_preset": ""}
    if name == "plain":
        pass
    elif m := re.fullmatch(r"draft(\d+)", name):
        upd.update(draft_preset="qwen2.5-0.5b", draft_tokens=int(m[1]))
    elif m := re.fullmatch(r"(ngram|mapk)(\d+)x(\d+)", name):
        upd.update(ngram_kind="simple" if m[1] == "ngram" else "map_k", ngram_size=int(m[2]),
                   ngram_draft_tokens=int(m[3]))
    else:
        raise ValueError(f"unknown variant {name!r}: plain, draft<N>, ngram<n>x<m>, mapk<n>x<m>")
    return gen.model_copy(update=upd)


def capture_prompts(settings: Any, tmp: Path, questions: list[str]) -> tuple[list[Any], list[str]]:
    """[(prompt, limit)] the app sends for `questions` on plain decoding, and the system prompts."""
    from rag.assistant import Assistant
    from rag.embed import Embedder
    from rag.evaluate import read_rows
    from rag.generate import Generator
    from rag.ingest import ingest
    from rag.retrieve import Retriever
    from rag.store import Store

    store, embedder = Store(settings.store, tmp), Embedder(settings.embed)
    ingest(settings, store, embedder)
    gen = Generator(settings)
    a = Assistant(settings, store, embedder, Retriever(settings.retrieve, store, embedder), gen)
    calls: list[Any] = []
    stream = gen.stream

    def recording(prompt: Any, max_new_tokens: int | None = None, *args: Any, **kw: Any) -> Any:
        calls.append((prompt, max_new_tokens or settings.generate.max_new_tokens))
        return stream(prompt, max_new_tokens, *args, **kw)

    gen.stream = recording  # type: ignore[method-assign]
    by_id = {r.id: r for r in read_rows(ROOT / "eval" / "questions.jsonl")}
    for q in questions:
        for _ in a.stream(by_id[q].question):
            pass
    systems = sorted({p.system for p, _ in calls if hasattr(p, "system")})
    gen.engine.close()
    return calls, systems


def one(engine: Any, prompt: Any, limit: int) -> dict[str, Any]:
    """One generation through the engine's own streaming path (as Generator.stream runs it)."""
    import rag.engines.llamacpp as L
    from rag.engines.base import GenerationStats

    timings: dict[str, Any] = {}
    account = L.account_chunk

    def keep(chunk: dict[str, Any], *args: Any) -> bool:
        if isinstance(chunk.get("timings"), dict):
            timings.update(chunk["timings"])
        return account(chunk, *args)

    L.account_chunk = keep  # type: ignore[assignment]
    stats, watch = GenerationStats(), CpuWatch()
    started = time.perf_counter()
    try:
        text = "".join(engine.pieces(prompt, limit, lambda: False, stats, started))
    finally:
        L.account_chunk = account  # type: ignore[assignment]
    return {"text": text, "ttft_s": stats.first_token_seconds, "total_s": stats.seconds,
            "prompt_tokens": stats.prompt_tokens, "cached_prompt_tokens": stats.cached_prompt_tokens,
            "generated_tokens": stats.generated_tokens, "decode_tok_s": stats.decode_tokens_per_second,
            "engine_decode_tok_s": stats.engine_decode_tokens_per_second,
            "draft_n": timings.get("draft_n"), "draft_accepted": timings.get("draft_n_accepted"),
            "other_cores": watch.other_cores()}


def summary(recs: list[dict[str, Any]], plain: list[dict[str, Any]]) -> dict[str, Any]:
    col = lambda k: [r[k] for r in recs if r.get(k) is not None]  # noqa: E731
    ratios = [p["total_s"] / r["total_s"] for r, p in zip(recs, plain, strict=True) if r["total_s"]]
    ttft_ratios = [p["ttft_s"] / r["ttft_s"] for r, p in zip(recs, plain, strict=True)
                   if r.get("ttft_s") and p.get("ttft_s")]
    same = sum(r["text"] == p["text"] for r, p in zip(recs, plain, strict=True))
    drafted, accepted = sum(col("draft_n")), sum(col("draft_accepted"))
    return {
        "ttft_p50_s": median(col("ttft_s")), "answer_p50_s": median(col("total_s")),
        "answer_sum_s": sum(col("total_s")),
        "decode_tok_s_p50": median(col("decode_tok_s")),
        "engine_decode_tok_s_p50": median(col("engine_decode_tok_s")),
        "answer_speedup_p50": median(ratios), "ttft_speedup_p50": median(ttft_ratios),
        "answer_speedup_sum": sum(col("total_s")) and sum(p["total_s"] for p in plain) / sum(col("total_s")),
        "generated_tokens_sum": sum(col("generated_tokens")),
        "draft_tokens": drafted, "draft_accepted": accepted,
        "acceptance": accepted / drafted if drafted else None,
        "identical_text": f"{same}/{len(recs)}",
        "contended": sum((r.get("other_cores") or 0) > 0.3 for r in recs),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen2.5-1.5b")
    ap.add_argument("--variants", default="plain,draft4,draft8,ngram3x8,ngram2x16")
    ap.add_argument("--questions", default=FULL)
    ap.add_argument("--build", default="auto", choices=["auto", "prebuilt", "native"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from rag.config import load_settings, offline_environment

    offline_environment()
    from rag.engines.llamacpp import LlamaCppEngine
    from rag.models import resolve_gguf

    names = args.variants.split(",")
    assert names[0] == "plain", "the first variant is the reference: plain"
    load_start = machine_load()
    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-spec-"))
    try:
        settings = load_settings(paths={"data": str(tmp)}, store={"url": ""},
                                 generate={"preset": args.preset, "engine": "llama.cpp",
                                           "parallel": 1, "llamacpp_build": args.build,
                                           "ngram_draft_tokens": 0, "draft_preset": ""})
        t = time.perf_counter()
        prompts, systems = capture_prompts(settings, tmp, args.questions.split(","))
        print(f"{len(prompts)} prompts from {len(args.questions.split(','))} questions "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
        engines: dict[str, Any] = {}
        for name in names:
            gen = variant_generate(settings.generate, name)
            s = settings.model_copy(update={"generate": gen})
            draft = None
            if gen.draft_preset:
                dg = gen.model_copy(update={"preset": gen.draft_preset})
                ds = settings.model_copy(update={"generate": dg})
                draft = lambda ds=ds: resolve_gguf(ds)  # noqa: E731
            e = LlamaCppEngine(gen, lambda s=s: resolve_gguf(s), parallel=1, draft=draft)
            t = time.perf_counter()
            e.warm_up(systems)
            print(f"  loaded {name}: {e.name} {e.speculation or 'no speculation'} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
            engines[name] = e
        recs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for i, (prompt, limit) in enumerate(prompts):
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                recs[name].append(one(engines[name], prompt, limit))
            p = recs["plain"][-1]
            print(f"  prompt {i}: " + "  ".join(
                f"{n} {recs[n][-1]['total_s']:.2f}s{'' if recs[n][-1]['text'] == p['text'] else ' DIFF'}"
                for n in names), flush=True)
        build = engines["plain"].name
        for e in engines.values():
            e.close()
        res: dict[str, Any] = {
            "preset": args.preset, "engine": build, "questions": args.questions,
            "prompts": len(prompts), "threads": settings.generate.threads,
            "load": {"start": load_start, "end": machine_load()},
            "variants": {n: {"settings": {k: getattr(variant_generate(settings.generate, n), k)
                                          for k in ("draft_preset", "draft_tokens", "ngram_kind",
                                                    "ngram_size", "ngram_draft_tokens")},
                             **summary(recs[n], recs["plain"])} for n in names},
            "records": recs,
        }
        write_json(args.out, res)
        keys = ["ttft_p50_s", "answer_p50_s", "decode_tok_s_p50", "engine_decode_tok_s_p50",
                "answer_speedup_p50", "answer_speedup_sum", "ttft_speedup_p50", "acceptance",
                "identical_text", "contended"]
        print(f"\n{args.preset} on {build}, {len(prompts)} prompts; load {load_start} -> "
              f"{res['load']['end']}")
        print(table(["", *names], [[k, *(res["variants"][n][k] for n in names)] for k in keys]))
        for n in names[1:]:
            for j, (r, p) in enumerate(zip(recs[n], recs["plain"], strict=True)):
                if r["text"] != p["text"]:
                    print(f"\n{n} prompt {j} differs:\n  plain: {p['text']!r}\n  {n}: {r['text']!r}")
        print(f"\nwrote {args.out}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
