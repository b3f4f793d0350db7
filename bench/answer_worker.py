"""One preset in a fresh process (so presets never share memory): bench.py runs this.

    python bench/answer_worker.py hf --preset qwen2.5-0.5b --questions q29,q31 \
        --variants baseline,lookup --out res.json
    python bench/answer_worker.py llamacpp --preset qwen2.5-0.5b --prompts p.json --out res.json

`hf` builds a throwaway index of seeds/, loads the prepared HF folder (timed), asks each
question through Assistant.stream per variant and records event timings, the generator's
own counters and the answer-accuracy row; `llamacpp` replays the exact chat-formatted
prompts through llama-cpp-python on the preset's GGUF with the same thread count.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from common import BUSY, ROOT, CpuWatch, peak_rss_mb, quiet, write_json

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


def ask(a: Any, row: Any, captured: list[Any]) -> dict[str, Any]:
    """One question through the real stream: when each event arrived, and the answer row."""
    from rag.eval_run import answer_row
    from rag.types import Final, Sources, Token

    captured.clear()
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
               ttft_s=answer.first_token_seconds, model=bool(captured),
               other_cores=watch.other_cores())
    if captured:
        prompt, st = captured[-1]
        rec.update(prompt=prompt, prompt_tokens=st.prompt_tokens,
                   cached_prompt_tokens=st.cached_prompt_tokens,
                   generated_tokens=st.generated_tokens, prefill_s=st.first_token_seconds,
                   gen_s=st.seconds, decode_tok_s=st.decode_tokens_per_second,
                   finish=st.finish_reason)
    return rec


def weight_counts(model: Any) -> dict[str, Any]:
    """Weights a decode step reads (all but the input embedding table, unless it is tied to
    lm_head) and weights a prefill token multiplies (those, less lm_head: generate() applies
    lm_head to the last prompt position only)."""
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    total = int(model.num_parameters())
    tied = emb.data_ptr() == head.data_ptr()
    read = total if tied else total - emb.numel()
    return {"params_read_per_token": read, "params_prefill": read - head.numel(),
            "tied_embeddings": tied}


def run_variant(name: str, a: Any, rows: list[Any], captured: list[Any], texts: dict[str, str],
                args: argparse.Namespace, base: dict[str, Any] | None) -> dict[str, Any]:
    """Every question under one variant; one that is > SLOW_ABORT x slower stops early."""
    from speedups import variant

    from rag.evaluate import answer_metrics

    recs: list[dict[str, Any]] = []
    with variant(name, a, args.lookup_tokens) as notes:
        for i, row in enumerate(rows):
            recs.append(measured(lambda r=row: ask(a, r, captured), args.wait_idle))
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


def run_hf(args: argparse.Namespace) -> dict[str, Any]:
    from rag.config import offline_environment

    offline_environment()  # as the app does, before torch loads
    t = time.perf_counter()
    import torch  # noqa: F401  (imports timed apart from the load itself)
    import transformers  # noqa: F401
    from speedups import order_key

    from rag.assistant import Assistant
    from rag.config import load_settings
    from rag.embed import Embedder
    from rag.evaluate import read_rows
    from rag.generate import Generator
    from rag.ingest import ingest
    from rag.retrieve import Retriever
    from rag.store import Store

    import_s = time.perf_counter() - t
    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-answers-"))
    try:
        settings = load_settings(paths={"data": str(tmp)}, store={"url": ""},
                                 generate={"preset": args.preset})
        store, embedder = Store(settings.store, tmp), Embedder(settings.embed)
        ingest(settings, store, embedder)
        gen = Generator(settings)
        t = time.perf_counter()
        gen.warm_up()  # tokenizer + from_pretrained(float32) of the prepared HF folder
        load_s = time.perf_counter() - t
        rss_after_load = peak_rss_mb()
        model, _ = gen._load()
        a = Assistant(settings, store, embedder, Retriever(settings.retrieve, store, embedder),
                      gen)
        captured: list[Any] = []
        stream = gen.stream

        def recording(prompt: str, *args_: Any, **kwargs: Any) -> Any:
            s = stream(prompt, *args_, **kwargs)
            captured.append((prompt, s.stats))
            return s

        gen.stream = recording  # type: ignore[method-assign]
        by_id = {r.id: r for r in read_rows(ROOT / "eval" / "questions.jsonl")}
        rows = [by_id[q] for q in args.questions.split(",")]
        ask(a, rows[0], captured)  # warm-up: first-call allocations and lazy loads
        texts = {p.id: p.clean for p in a.papers()}
        out: dict[str, Any] = {
            "preset": args.preset, "import_s": import_s, "load_s": load_s,
            "rss_after_load_mb": rss_after_load, "params": int(model.num_parameters()),
            **weight_counts(model),
            "threads": settings.generate.threads, "torch_threads": torch.get_num_threads(),
            "max_new_tokens": settings.generate.max_new_tokens,
            "context_tokens": settings.answer.context_tokens, "variants": {}}
        alt = 700 if settings.answer.context_tokens <= 450 else 450  # "ctx": the other budget
        names = sorted({"baseline", *(f"ctx{alt}" if v == "ctx" else v
                                      for v in args.variants.split(","))}, key=order_key)
        for name in names:
            try:
                out["variants"][name] = run_variant(name, a, rows, captured, texts, args,
                                                    out["variants"].get("baseline"))
            except Exception as e:  # e.g. torchao missing or failing: report, go on
                out.setdefault("failed", {})[name] = f"{type(e).__name__}: {e}"
                print(f"  [{args.preset} {name}] failed: {e}", flush=True)
            if name == "baseline":
                out["peak_rss_mb"] = peak_rss_mb()  # before any variant can add memory
        out["peak_rss_end_mb"] = peak_rss_mb()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_llamacpp(args: argparse.Namespace) -> dict[str, Any]:
    from llama_cpp import Llama, __version__

    from rag.config import load_settings
    from rag.models import PRESETS, preset_dir

    settings = load_settings(generate={"preset": args.preset})
    gguf = preset_dir(settings, PRESETS[args.preset]) / "model.gguf"
    jobs = json.loads(Path(args.prompts).read_text())
    threads = settings.generate.threads
    t = time.perf_counter()
    llm = Llama(model_path=str(gguf), n_threads=threads, n_threads_batch=threads, n_ctx=4096,
                n_batch=512, verbose=False)
    load_s = time.perf_counter() - t

    def one(job: dict[str, Any]) -> dict[str, Any]:
        llm.reset()  # no reuse of the previous prompt's KV: a cold prefill, as transformers
        n_prompt = len(llm.tokenize(job["prompt"].encode(), add_bos=False, special=True))
        watch = CpuWatch()
        t0 = time.perf_counter()
        first, pieces, text = None, 0, ""
        for chunk in llm.create_completion(job["prompt"], max_tokens=job["max_tokens"],
                                           temperature=0.0, stream=True):
            if first is None:
                first = time.perf_counter() - t0
            pieces += 1
            text += chunk["choices"][0]["text"]
        total = time.perf_counter() - t0
        decode = (pieces - 1) / (total - first) if first is not None and pieces > 1 else None
        return {"id": job["id"], "prompt_tokens": n_prompt, "ttft_s": first, "tokens": pieces,
                "total_s": total, "decode_tok_s": decode, "text": text,
                "other_cores": watch.other_cores()}

    one(jobs[0])  # warm-up
    recs = []
    for job in jobs:
        recs.append(measured(lambda j=job: one(j), args.wait_idle))
        r = recs[-1]
        print(f"  [{args.preset} llama.cpp] {job['id']} ttft {r['ttft_s']:.2f}s "
              f"{r['decode_tok_s'] or 0:.1f} tok/s", flush=True)
    return {"version": __version__, "gguf": str(gguf), "threads": threads, "load_s": load_s,
            "peak_rss_mb": peak_rss_mb(), "records": recs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=["hf", "llamacpp"])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--questions", default="q29,q31,q36,q41,q43")
    ap.add_argument("--variants", default="baseline")
    ap.add_argument("--lookup-tokens", type=int, default=10)
    ap.add_argument("--prompts", help="llamacpp: JSON list of {id, prompt, max_tokens}")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="S",
                    help="before each question wait up to S s for other processes to go quiet")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("torchao").setLevel(logging.ERROR)  # CUDA-only extension load notices
    write_json(args.out, run_hf(args) if args.engine == "hf" else run_llamacpp(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
