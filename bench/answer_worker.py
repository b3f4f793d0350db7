"""One preset on one engine in a fresh process (so runs never share memory): bench.py runs this.

    python bench/answer_worker.py --preset qwen2.5-0.5b --engine llama.cpp \
        --questions q29,q31 --concurrency 1,4,8 --out res.json
    python bench/answer_worker.py --preset qwen2.5-0.5b --engine transformers --variants baseline,split ...

It builds a throwaway index of seeds/, loads the engine (timed), then
- asks each question through Assistant.stream one at a time: event timings, the generator's
  counters (the app's decode: tokens after the first / time after the first, as streamed),
  the engine's own decode on the same generation (llama.cpp reports it; for transformers the
  same prompts are replayed through model.generate without the streamer), the answer row;
- asks 4 and 8 questions at once (threads, as the UI's concurrent sessions): answers per
  minute and each question's wait from submission to its final answer;
- with --variants (transformers only): the speedup variants of bench/speedups.py.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import BUSY, ROOT, CpuWatch, pct, peak_rss_mb, quiet, write_json

SLOW_ABORT = 1.5  # a variant whose first two answers take > 1.5x baseline's is stopped early
TRIES = 3  # a question measured while other processes used the CPU is measured again


def measured(fn: Any, wait_s: float) -> dict[str, Any]:
    """fn() after waiting for a quiet CPU; measured again (up to TRIES) when another process
    started during it, but not when the machine stayed busy throughout the wait."""
    waited = 0.0
    for attempt in range(TRIES):
        w, calm = quiet(wait_s) if wait_s > 0 else (0.0, False)
        waited += w
        rec: dict[str, Any] = fn()
        if rec["other_cores"] <= BUSY or not calm:
            break
    rec.update(attempts=attempt + 1, waited_s=round(waited, 1))
    return rec


class Capture:
    """Wraps Generator.stream to keep each call's prompt and stats, per thread."""

    def __init__(self, gen: Any) -> None:
        self.local = threading.local()
        stream = gen.stream

        def recording(prompt: str, *args: Any, **kwargs: Any) -> Any:
            s = stream(prompt, *args, **kwargs)
            self.calls.append((prompt, s.stats))
            return s

        gen.stream = recording

    @property
    def calls(self) -> list[Any]:
        if not hasattr(self.local, "calls"):
            self.local.calls = []
        return self.local.calls  # type: ignore[no-any-return]


def ask(a: Any, row: Any, cap: Capture) -> dict[str, Any]:
    """One question through the real stream: when each event arrived, and the answer row."""
    from rag.eval_run import answer_row
    from rag.types import Final, Sources, Token

    cap.calls.clear()
    watch = CpuWatch()
    t0 = time.perf_counter()
    sources_s = first_visible_s = None
    answer = None
    for ev in a.stream(row.question):
        now = time.perf_counter() - t0
        if isinstance(ev, Sources) and sources_s is None:
            sources_s = now
        elif isinstance(ev, Token) and first_visible_s is None and ev.text.strip():
            first_visible_s = now
        elif isinstance(ev, Final):
            answer = ev.answer
    total = time.perf_counter() - t0
    assert answer is not None
    ids = list(dict.fromkeys(h.chunk.paper_id for h in answer.hits)) or list(answer.closest)
    rec = answer_row(row, answer, ids)
    rec.update(sources_s=sources_s, first_visible_s=first_visible_s, total_s=total,
               ttft_s=answer.first_token_seconds, model=bool(cap.calls),
               other_cores=watch.other_cores())
    if cap.calls:
        prompt, st = cap.calls[-1]
        rec.update(prompt=str(prompt), chat=[[m.role, m.content] for m in getattr(prompt, "messages", ())],
                   prompt_tokens=st.prompt_tokens, cached_prompt_tokens=st.cached_prompt_tokens,
                   generated_tokens=st.generated_tokens, prefill_s=st.first_token_seconds,
                   gen_s=st.seconds, decode_tok_s=st.decode_tokens_per_second,
                   engine_decode_tok_s=st.engine_decode_tokens_per_second, finish=st.finish_reason)
    return rec


def raw_transformers_decode(gen: Any, recs: list[dict[str, Any]]) -> None:
    """The transformers engine's decode without the app: each recorded prompt through
    model.generate (no streamer, no worker thread), N tokens forced, timed against 1."""
    import torch

    model, tokenizer = gen.engine._load()
    lookup = gen.prompt_lookup_num_tokens
    for r in recs:
        if not r.get("model") or (r.get("generated_tokens") or 0) < 4:
            continue
        ids = tokenizer(r["prompt"], return_tensors="pt", add_special_tokens=False)
        n = int(r["generated_tokens"])

        def timed(k: int, ids: Any = ids) -> float:
            kw: dict[str, Any] = dict(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False,
                                      temperature=None, top_p=None, top_k=None,
                                      pad_token_id=model.generation_config.pad_token_id)
            if lookup and k > 1:
                kw["prompt_lookup_num_tokens"] = lookup
            t = time.perf_counter()
            with torch.inference_mode():
                model.generate(**kw)
            return time.perf_counter() - t

        one, full = timed(1), timed(n)
        r["engine_decode_tok_s"] = (n - 1) / (full - one) if full > one else None


def concurrent(a: Any, rows: list[Any], k: int, cap: Capture) -> dict[str, Any]:
    """k questions submitted at once (one thread each): answers/min and waits."""
    waits: list[float] = [0.0] * k
    errors: list[str] = []

    def one(i: int) -> None:
        t = time.perf_counter()
        try:
            ask(a, rows[i % len(rows)], cap)
        except Exception as e:  # reported, not fatal to the bench
            errors.append(f"{type(e).__name__}: {e}")
        waits[i] = time.perf_counter() - t

    watch = CpuWatch()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"questions": k, "wall_s": round(wall, 2), "answers_per_min": round(60 * k / wall, 2),
            "wait_p50_s": round(pct(waits, 50) or 0, 2), "wait_p95_s": round(pct(waits, 95) or 0, 2),
            "errors": errors, "other_cores": watch.other_cores()}


def run_variant(name: str, a: Any, rows: list[Any], cap: Capture, texts: dict[str, str],
                args: argparse.Namespace, base: dict[str, Any] | None) -> dict[str, Any]:
    """Every question under one transformers variant; one > SLOW_ABORT x slower stops early."""
    from speedups import variant

    from rag.evaluate import answer_metrics

    recs: list[dict[str, Any]] = []
    with variant(name, a, args.lookup_tokens) as notes:
        for i, row in enumerate(rows):
            recs.append(measured(lambda r=row: ask(a, r, cap), args.wait_idle))
            print(f"  [{args.preset} {name}] {row.id} {recs[-1]['total_s']:.1f}s "
                  f"{recs[-1]['answer'][:70]!r}", flush=True)
            if base and i == 1 and sum(r["total_s"] for r in recs) > SLOW_ABORT * sum(
                    r["total_s"] for r in base["records"][:2]):
                notes["aborted"] = (f"stopped after {len(recs)} questions: answers took "
                                    f"> {SLOW_ABORT}x baseline's")
                break
    done = [r for r in rows if r.id in {x["id"] for x in recs}]
    return {"records": recs, "notes": notes,
            "metrics": answer_metrics(done, {r["id"]: r for r in recs}, texts)}


def gguf_read_bytes(path: Path) -> dict[str, Any]:
    """Bytes of weights a decode step reads from the GGUF file: every tensor, less the token
    embedding table when a separate output matrix exists (then only one row of it is read)."""
    from gguf import GGUFReader

    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(str(path)).tensors}
    total = sum(tensors.values())
    tied = "output.weight" not in tensors
    read = total if tied else total - tensors.get("token_embd.weight", 0)
    return {"gguf_tensor_bytes": total, "gguf_read_bytes_per_token": read, "tied_embeddings": tied}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--engine", required=True, choices=["llama.cpp", "transformers"])
    ap.add_argument("--build", default="auto", choices=["auto", "prebuilt", "native"])
    ap.add_argument("--questions", default="q29,q31,q36,q41,q43")
    ap.add_argument("--concurrency", default="4,8")
    ap.add_argument("--spare", default="", help="questions for the concurrent runs, first")
    ap.add_argument("--parallel", type=int, default=0, help="slots (0: the engine's)")
    ap.add_argument("--variants", default="", help="transformers only: bench/speedups.py variants")
    ap.add_argument("--lookup-tokens", type=int, default=10)
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="S",
                    help="before each question wait up to S s for other processes to go quiet")
    ap.add_argument("--paper-cache", default="on", choices=["on", "off"],
                    help="llama.cpp: prefill each abstract's prompt first, as `rag serve` does")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("torchao").setLevel(logging.ERROR)

    from rag.config import offline_environment

    offline_environment()  # as the app does, before torch loads
    t = time.perf_counter()
    import torch  # noqa: F401  (imports timed apart from the load itself)

    from rag import models
    from rag.assistant import Assistant
    from rag.config import load_settings
    from rag.embed import Embedder
    from rag.evaluate import answer_metrics, read_rows
    from rag.generate import Generator
    from rag.ingest import ingest
    from rag.models import PRESETS, preset_dir
    from rag.retrieve import Retriever
    from rag.store import Store

    import_s = time.perf_counter() - t
    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-answers-"))
    try:
        settings = load_settings(paths={"data": str(tmp)}, store={"url": ""},
                                 generate={"preset": args.preset, "engine": args.engine,
                                           "parallel": args.parallel, "llamacpp_build": args.build,
                                           "paper_cache": args.paper_cache == "on"})
        store, embedder = Store(settings.store, tmp), Embedder(settings.embed)
        ingest(settings, store, embedder)
        embedder.warm_up()
        rss_before = peak_rss_mb()
        gen = Generator(settings)
        t = time.perf_counter()
        gen.warm_up()
        load_s = time.perf_counter() - t
        rss_after_load = peak_rss_mb()
        a = Assistant(settings, store, embedder, Retriever(settings.retrieve, store, embedder), gen)
        cap = Capture(gen)
        by_id = {r.id: r for r in read_rows(ROOT / "eval" / "questions.jsonl")}
        rows = [by_id[q] for q in args.questions.split(",")]
        # other questions for the warm-up and the concurrent runs: a repeated question would
        # find its whole prompt in llama.cpp's prompt cache and skip its prefill
        # (and that reach the model: the bench's own list first, then lookups the router sends
        # to the model; a paper-finding question is answered from the index in ~0.1 s)
        a.warm_up()  # index, embedder, the system prompts' caches, as `rag serve` does
        t = time.perf_counter()
        papers = a.cache_papers()  # each abstract's prompt, as `rag serve` does in the background
        paper_cache = {"sent": papers.sent, "seconds": round(time.perf_counter() - t, 1),
                       "skipped": papers.skipped, "rss_after_mb": peak_rss_mb()}
        print(f"  [{args.preset}] paper cache: {paper_cache}", flush=True)
        route = getattr(getattr(a, "router", None), "route", None)
        spare = [by_id[q] for q in args.spare.split(",") if q and by_id[q] not in rows] + [
            r for r in by_id.values() if r.kind in ("name", "paraphrase") and r not in rows
            and r.id not in args.spare.split(",") and route is not None
            and route(r.question, []).intent == "ask"]
        ask(a, spare.pop(), cap)  # first-call allocations and lazy loads
        texts = {p.id: p.clean for p in a.papers()}
        recs = []
        for row in rows:
            recs.append(measured(lambda r=row: ask(a, r, cap), args.wait_idle))
            r = recs[-1]
            print(f"  [{args.preset} {gen.engine_name}] {row.id} ttft {r['ttft_s'] or 0:.2f}s "
                  f"total {r['total_s']:.1f}s decode {r.get('decode_tok_s') or 0:.1f} tok/s "
                  f"{r['answer'][:60]!r}", flush=True)
        peak_single = peak_rss_mb()
        if args.engine == "transformers":
            raw_transformers_decode(gen, recs)
        out: dict[str, Any] = {
            "preset": args.preset, "engine": args.engine, "engine_name": gen.engine_name,
            "build": getattr(gen.engine, "build", "transformers"),
            "version": getattr(gen.engine, "version", ""), "parallel": gen.parallel,
            "import_s": import_s, "load_s": load_s, "rss_before_engine_mb": rss_before,
            "rss_after_load_mb": rss_after_load, "peak_rss_mb": peak_single,
            "threads": settings.generate.threads, "max_new_tokens": settings.generate.max_new_tokens,
            "context_tokens": models.context_tokens(settings), "records": recs,
            "paper_cache": paper_cache,
            "metrics": answer_metrics(rows, {r["id"]: r for r in recs}, texts),
            "concurrency": {},
        }
        if args.preset in PRESETS:
            out.update(gguf_read_bytes(preset_dir(settings, PRESETS[args.preset]) / "model.gguf"))
        for k in [int(x) for x in args.concurrency.split(",") if x]:
            quiet(args.wait_idle) if args.wait_idle else None
            batch, spare = (spare[:k], spare[k:]) if len(spare) >= k else (rows, spare)
            out["concurrency"][str(k)] = c = concurrent(a, batch, k, cap)
            print(f"  [{args.preset} {gen.engine_name}] {k} at once: {c['answers_per_min']} "
                  f"answers/min, wait p95 {c['wait_p95_s']} s", flush=True)
        out["peak_rss_concurrent_mb"] = peak_rss_mb()
        if args.variants and args.engine == "transformers":
            out["variants"] = {}
            for name in args.variants.split(","):
                out["variants"][name] = run_variant(name, a, rows, cap, texts, args,
                                                    out["variants"].get("baseline"))
        write_json(args.out, out)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
