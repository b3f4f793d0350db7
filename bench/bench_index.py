"""Retrieval-side benchmark: ingest speed, no-op re-ingest, warm hybrid search, and scale.

    python bench/bench_index.py            # full: seeds + a >= 20,000-chunk synthetic corpus
    python bench/bench_index.py --quick    # seeds + a ~3,000-chunk corpus, a couple of minutes
    python bench/bench_index.py --titles   # only: what generated titles add to a cold ingest of
                                           # the seeds and to adding one file (results-titles.json)

Everything is written to temporary data folders; the real index under data/ is never
touched. The scale corpus recombines seed sentences across papers (fixed RNG seed), so
its text statistics match the seeds. Ingest throughput is reported as a ratio to plain
sentence-transformers encoding of the same chunk texts: ingest = chunk + embed + upsert.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import BENCH, ROOT, CpuWatch, machine_load, pct, quiet, table, wait_for_idle, write_json

from rag.chunk import chunk_paper, sentences
from rag.config import Settings, load_settings
from rag.corpus import load_corpus, load_file
from rag.embed import Embedder, model_folder
from rag.evaluate import read_rows
from rag.ingest import ingest, plan
from rag.retrieve import Retriever
from rag.store import Store

TARGET_RATIO = 0.8  # ingest chunks/s over raw encode chunks/s
TARGET_P95_MS = 100.0


def settings_for(data: Path, seeds: Path) -> Settings:
    return load_settings(paths={"seeds": str(seeds), "data": str(data)},
                         store={"url": "", "collection": "bench"})


def clock(obj: Any, name: str, acc: dict[str, float]) -> None:
    """Wrap obj.name (an instance attribute shadows the method) to add its seconds to acc."""
    fn: Callable[..., Any] = getattr(obj, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[name] += time.perf_counter() - t

    setattr(obj, name, wrapped)


def timed_ingest(settings: Settings, embedder: Embedder, seeds: Path) -> dict[str, Any]:
    """A cold ingest into settings.paths.data, then a no-op one; seconds split by stage."""
    store = Store(settings.store, settings.paths.data)
    acc: dict[str, float] = defaultdict(float)
    clock(embedder, "embed", acc)
    clock(store, "upsert", acc)
    try:
        cold = ingest(settings, store, embedder, seeds)
        split = dict(acc)
        acc.clear()
        again = ingest(settings, store, embedder, seeds)
    finally:
        del embedder.embed  # drop the instance wrapper: the class method shows through again
    other = cold.seconds - split.get("embed", 0.0) - split.get("upsert", 0.0)
    return {
        "papers": cold.papers, "chunks": cold.chunks_embedded,
        "cold_s": round(cold.seconds, 3),
        "cold_chunks_per_s": round(cold.chunks_embedded / cold.seconds, 1),
        "cold_embed_s": round(split.get("embed", 0.0), 3),
        "cold_upsert_s": round(split.get("upsert", 0.0), 3),
        "cold_other_s": round(other, 3),  # corpus parse + chunking + manifest + deletes
        "noop_s": round(again.seconds, 3), "noop_embedded": again.chunks_embedded,
        "store": store,
    }


def search_latency(retriever: Retriever, questions: list[str], reps: int) -> dict[str, Any]:
    """Warm hybrid search (k=8, as Assistant.retrieve asks) and each side timed alone, in ms."""
    t = time.perf_counter()
    retriever.refresh()  # what the first question of a session pays: BM25 + name index
    refresh_s = time.perf_counter() - t
    for q in questions[:5]:
        retriever.search(q, k=8)
    s = retriever.settings
    sides: dict[str, list[float]] = defaultdict(list)
    for _ in range(reps):
        for q in questions:
            t0 = time.perf_counter()
            retriever.search(q, k=8)
            t1 = time.perf_counter()
            vec = retriever.embedder.embed_one(q)
            t2 = time.perf_counter()
            retriever.store.query(vec, s.dense_k)
            t3 = time.perf_counter()
            retriever.keyword(q, s.bm25_k)
            t4 = time.perf_counter()
            retriever.named_papers(q)
            t5 = time.perf_counter()
            for name, sec in (("hybrid", t1 - t0), ("embed_query", t2 - t1),
                              ("chroma_query", t3 - t2), ("bm25", t4 - t3), ("names", t5 - t4)):
                sides[name].append(1000 * sec)
    out: dict[str, Any] = {"queries": len(questions) * reps, "refresh_s": round(refresh_s, 3)}
    for name, xs in sides.items():
        out[f"{name}_p50_ms"] = round(pct(xs, 50) or 0.0, 2)
        out[f"{name}_p95_ms"] = round(pct(xs, 95) or 0.0, 2)
    return out


def synth_corpus(seeds: Path, folder: Path, target_chunks: int, settings: Settings,
                 seed: int = 2026, per_file: int = 200) -> dict[str, Any]:
    """Copies of the seed files plus synthetic ones whose abstracts are random draws of seed
    sentences (lengths drawn from the seeds' own), until the corpus has >= target chunks."""
    rng = random.Random(seed)
    papers = load_corpus(seeds).papers
    pool = [s for p in papers for s in sentences(p.clean) if len(s.split()) >= 5]
    lengths = [max(3, len(sentences(p.clean))) for p in papers]
    folder.mkdir(parents=True)
    for f in sorted(seeds.glob("*.txt")):
        shutil.copy(f, folder / f.name)
    c = settings.chunk
    n_chunks = sum(len(chunk_paper(p, c.max_words, c.overlap_sentences)) for p in papers)
    n_papers, files = len(papers), 0
    while n_chunks < target_chunks:
        paras = [" ".join(rng.sample(pool, rng.choice(lengths))) for _ in range(per_file)]
        path = folder / f"{100 + files}_synthetic.txt"
        path.write_text("Synthetic ICML 2026 Papers\n\n" + "\n\n".join(paras) + "\n")
        new, _ = load_file(path)
        n_chunks += sum(len(chunk_paper(p, c.max_words, c.overlap_sentences)) for p in new)
        n_papers += len(new)
        files += 1
    return {"papers": n_papers, "chunks": n_chunks, "synthetic_files": files,
            "sentence_pool": len(pool), "rng_seed": seed}


def raw_encode(settings: Settings, texts: list[str], sample: int = 2048, block: int = 256
               ) -> dict[str, Any]:
    """Plain sentence-transformers encode of `texts` in one call (the ceiling for ingest),
    and, on a sample, one call against `block`-sized calls as ingest makes them."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_folder(settings.embed.model)), device="cpu",
                                local_files_only=True)
    bs = settings.embed.batch_size

    def enc(xs: list[str]) -> Any:
        return model.encode(xs, batch_size=bs, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)

    enc(texts[:bs])  # warm the kernels
    t = time.perf_counter()
    vectors = enc(texts)
    total = time.perf_counter() - t
    sub = texts[:sample]  # corpus order, as ingest sees it
    t = time.perf_counter()
    enc(sub)
    one = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(0, len(sub), block):
        enc(sub[i: i + block])
    blocks = time.perf_counter() - t
    return {"seconds": total, "vectors": dict(zip(texts, vectors, strict=True)),
            "sample": len(sub), "sample_one_call_s": round(one, 3),
            "sample_blocks_s": round(blocks, 3), "sample_block": block}


class CachedEmbedder(Embedder):
    """Hands back vectors computed beforehand: an ingest with it costs everything but the
    embedding (corpus, chunking, Chroma upsert and whatever Chroma does in the background)."""

    def __init__(self, base: Embedder, vectors: dict[str, Any]) -> None:
        super().__init__(base.settings)
        self.vectors = vectors

    def embed(self, texts: list[str], progress: bool = False) -> Any:
        import numpy as np

        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


UPLOAD = """ICML 2026 Papers

Long-horizon weather forecasting with learned simulators drifts after a few days. We propose \
ZephyrNet, a spectral state-space model that conserves energy across autoregressive rollouts by \
projecting each step onto a learned invariant manifold. On the ERA5 reanalysis benchmark \
ZephyrNet keeps skilful forecasts for 14 days, two days longer than the strongest baseline, \
while running 3 times faster than a diffusion-based ensemble of the same size.

Tabular foundation models are usually evaluated on small classification tasks. We study how \
in-context learners for tables behave when the number of rows grows to millions, and find that \
their accuracy saturates because the prompt cannot hold enough examples. We introduce a \
retrieval step that selects, for every test row, the most informative training rows, and show \
on 40 datasets that it closes most of the gap to gradient-boosted trees at a fraction of the cost.
"""


def titles_phase(tmp: Path, seeds: Path, embedder: Embedder) -> dict[str, Any]:
    """A cold ingest of the seeds and the upload of one 2-abstract file, with titles on (the
    configured engine) and off: the difference is what titles cost."""
    from rag.generate import Generator
    from rag.uploads import add_files

    out: dict[str, Any] = {}
    for on in (True, False):
        tag = "on" if on else "off"
        s = load_settings(paths={"seeds": str(seeds), "data": str(tmp / f"titles-{tag}")},
                          store={"url": "", "collection": "bench"}, titles={"enabled": on})
        store = Store(s.store, s.paths.data)
        gen = Generator(s) if on else None
        if gen is not None:
            t = time.perf_counter()
            gen.warm_up()
            out["model_load_s"] = round(time.perf_counter() - t, 2)
            out["engine"] = gen.engine_name
        print(f"titles {tag}: cold ingest of the seeds ...", flush=True)
        cold = ingest(s, store, embedder, generator=gen)
        papers = store.papers()
        upload = tmp / f"upload-{tag}" / "one_file.txt"
        upload.parent.mkdir(parents=True, exist_ok=True)
        upload.write_text(UPLOAD, encoding="utf-8")
        print(f"titles {tag}: adding one file ...", flush=True)
        add = add_files(s, store, embedder, gen, [upload])
        out[tag] = {
            "cold_s": round(cold.seconds, 2), "cold_titles_s": round(cold.titles_seconds, 2),
            "cold_titles_generated": cold.titles_generated,
            "cold_titled": sum(p.title_generated for p in papers), "papers": len(papers),
            "cold_atlas_s": round(cold.atlas_seconds, 2),
            "add_file_s": round(add.seconds, 2), "add_file_titles_s": round(add.titles_seconds, 2),
            "add_file_titles_generated": add.titles_generated, "add_file_papers": add.added,
            "titles": {p.id: p.title for p in store.papers()} if on else {},
        }
        noop = ingest(s, store, embedder, generator=gen)
        out[tag]["noop_s"] = round(noop.seconds, 2)
        out[tag]["noop_titles_generated"] = noop.titles_generated
    on, off = out["on"], out["off"]
    out["titles_add_to_cold_ingest_s"] = round(on["cold_s"] - off["cold_s"], 2)
    out["titles_add_to_one_file_s"] = round(on["add_file_s"] - off["add_file_s"], 2)
    out["per_title_s"] = round(on["cold_titles_s"] / max(1, on["cold_titles_generated"]), 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~3,000-chunk scale run, one pass")
    ap.add_argument("--chunks", type=int, help="scale corpus size (default 20000; quick 3000)")
    ap.add_argument("--reps", type=int, help="passes over the eval questions (default 3; quick 1)")
    ap.add_argument("--wait-idle", type=float, default=120.0, metavar="S",
                    help="wait up to S s for a quiet CPU before starting and before each "
                    "phase (default 120)")
    ap.add_argument("--out", type=Path, default=BENCH / "results-index.json")
    ap.add_argument("--titles", action="store_true", help="only the titles phase "
                    "(bench/results-titles.json)")
    args = ap.parse_args()
    if args.titles:
        return main_titles(args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    target = args.chunks or (3000 if args.quick else 20000)
    reps = args.reps or (1 if args.quick else 3)
    seeds = ROOT / "seeds"
    questions = [r.question for r in read_rows(ROOT / "eval" / "questions.jsonl")]
    load_start = wait_for_idle(args.wait_idle) if args.wait_idle else machine_load()
    print(f"machine load at start: {load_start}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-index-"))
    try:
        s_seed = settings_for(tmp / "seeds-data", seeds)
        embedder = Embedder(s_seed.embed)
        t = time.perf_counter()
        embedder.warm_up()
        embed_load_s = time.perf_counter() - t
        print("seeds: cold ingest, no-op ingest, search ...", flush=True)
        others: dict[str, float] = {}  # cores used by other processes during each phase
        quiet(args.wait_idle)
        watch = CpuWatch()
        small = timed_ingest(s_seed, embedder, seeds)
        small_store = small.pop("store")
        small.update(search_latency(Retriever(s_seed.retrieve, small_store, embedder),
                                    questions, reps))
        others["seeds"] = watch.other_cores()

        print(f"scale: building a >= {target:,}-chunk synthetic corpus ...", flush=True)
        corpus_dir = tmp / "scale-seeds"
        s_scale = settings_for(tmp / "scale-data", corpus_dir)
        scale: dict[str, Any] = synth_corpus(seeds, corpus_dir, target, s_scale)
        texts = [c.text for cs in plan(list(load_corpus(corpus_dir).papers), s_scale).values()
                 for c in cs]
        print(f"scale: raw encode of {len(texts):,} chunk texts ...", flush=True)
        quiet(args.wait_idle)
        watch = CpuWatch()
        raw = raw_encode(s_scale, texts)
        raw_s = raw.pop("seconds")
        others["raw_encode"] = watch.other_cores()
        print("scale: ingest ...", flush=True)
        quiet(args.wait_idle)
        watch = CpuWatch()
        big = timed_ingest(s_scale, embedder, corpus_dir)
        others["scale_ingest"] = watch.other_cores()
        print("scale: ingest with precomputed vectors (all but embedding) ...", flush=True)
        quiet(args.wait_idle)
        watch = CpuWatch()
        s_noembed = settings_for(tmp / "scale-noembed", corpus_dir)
        no_embed = ingest(s_noembed, Store(s_noembed.store, s_noembed.paths.data),
                          CachedEmbedder(embedder, raw.pop("vectors")), corpus_dir)
        others["scale_ingest_no_embed"] = watch.other_cores()
        big_store = big.pop("store")
        ratio = (big["chunks"] / big["cold_s"]) / (len(texts) / raw_s)
        scale.update({f"ingest_{k}": v for k, v in big.items()})
        scale.update({"raw_encode_s": round(raw_s, 3),
                      "raw_encode_chunks_per_s": round(len(texts) / raw_s, 1),
                      "ingest_over_raw": round(ratio, 3),
                      "ingest_without_embedding_s": round(no_embed.seconds, 3), **raw})
        print("scale: search ...", flush=True)
        quiet(args.wait_idle)
        watch = CpuWatch()
        scale.update(search_latency(Retriever(s_scale.retrieve, big_store, embedder),
                                    questions, max(1, reps - 1)))
        others["scale_search"] = watch.other_cores()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    load_end = machine_load()
    sides = {k: scale[f"{k}_p95_ms"] for k in ("embed_query", "chroma_query", "bm25", "names")}
    result = {
        "mode": "quick" if args.quick else "full", "embedder_load_s": round(embed_load_s, 3),
        "seeds": small, "scale": scale, "slowest_side_at_scale": max(sides, key=lambda k: sides[k]),
        "targets": {"ingest_over_raw": TARGET_RATIO, "search_p95_ms": TARGET_P95_MS},
        "ok": {"noop_embeds_nothing": small["noop_embedded"] == 0,
               "ingest_over_raw": scale["ingest_over_raw"] >= TARGET_RATIO,
               "search_p95_ms_at_scale": scale["hybrid_p95_ms"] <= TARGET_P95_MS},
        "machine_load": {"start": load_start, "end": load_end},
        "other_processes_cores": others,
    }
    write_json(args.out, result)
    rows = [
        ["embedder load (s)", embed_load_s, None, None, ""],
        ["cold ingest (s)", small["cold_s"], scale["ingest_cold_s"], None, ""],
        ["  chunks", small["chunks"], scale["ingest_chunks"], None, ""],
        ["  chunks/s", small["cold_chunks_per_s"], scale["ingest_cold_chunks_per_s"], None, ""],
        ["  embed / upsert / other (s)",
         f"{small['cold_embed_s']:.1f}/{small['cold_upsert_s']:.1f}/{small['cold_other_s']:.1f}",
         f"{big['cold_embed_s']:.1f}/{big['cold_upsert_s']:.1f}/{big['cold_other_s']:.1f}",
         None, ""],
        ["raw ST encode chunks/s", None, scale["raw_encode_chunks_per_s"], None, ""],
        ["ingest without embedding (s)", None, scale["ingest_without_embedding_s"], None, ""],
        [f"encode {scale['sample']} texts: 1 call / {scale['sample_block']}-blocks (s)", None,
         f"{scale['sample_one_call_s']:.1f} / {scale['sample_blocks_s']:.1f}", None, ""],
        ["ingest / raw encode", None, scale["ingest_over_raw"], f">= {TARGET_RATIO}",
         result["ok"]["ingest_over_raw"]],
        ["no-op re-ingest (s)", small["noop_s"], scale["ingest_noop_s"], None, ""],
        ["  chunks embedded", small["noop_embedded"], scale["ingest_noop_embedded"], "0",
         result["ok"]["noop_embeds_nothing"]],
        ["retriever refresh (s)", small["refresh_s"], scale["refresh_s"], None, ""],
    ]
    for name in ("hybrid", "embed_query", "chroma_query", "bm25", "names"):
        for q in ("p50", "p95"):
            key = f"{name}_{q}_ms"
            tgt = f"<= {TARGET_P95_MS:.0f}" if key == "hybrid_p95_ms" else None
            ok = result["ok"]["search_p95_ms_at_scale"] if tgt else ""
            rows.append([f"search {name} {q} (ms)", small[key], scale[key], tgt, ok])
    print()
    print(table(["metric", f"seeds ({small['chunks']})", f"scale ({scale['chunks']:,})",
                 "target", "ok"], rows))
    busy = (load_start["load1"] >= 1.3 or load_start["contended"]
            or max(others.values()) > 0.3)
    print(f"\nslowest side at scale (p95): {result['slowest_side_at_scale']}; machine load "
          f"start {load_start['load1']} end {load_end['load1']}"
          f"{' (CONTENDED: other processes were using the CPU)' if busy else ''}")
    print(f"cores used by other processes per phase: {others}")
    print(f"wrote {args.out}")
    return 0


def main_titles(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    load_start = machine_load()
    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-titles-"))
    try:
        embedder = Embedder(load_settings().embed)
        embedder.warm_up()
        watch = CpuWatch()
        res = titles_phase(tmp, ROOT / "seeds", embedder)
        res["other_processes_cores"] = watch.other_cores()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["machine_load_start"], res["machine_load_end"] = load_start, machine_load()
    out = BENCH / "results-titles.json"
    write_json(out, res)
    on, off = res["on"], res["off"]
    print()
    print(table(["run", "titles off (s)", "titles on (s)", "titles add (s)", "model calls"], [
        ["cold ingest, 57 seeds", off["cold_s"], on["cold_s"], res["titles_add_to_cold_ingest_s"],
         on["cold_titles_generated"]],
        ["add one file (2 abstracts)", off["add_file_s"], on["add_file_s"],
         res["titles_add_to_one_file_s"], on["add_file_titles_generated"]],
        ["no-op re-ingest", off["noop_s"], on["noop_s"], None, on["noop_titles_generated"]],
    ]))
    print(f"\nengine {res.get('engine')}, model load {res.get('model_load_s')} s (not counted); "
          f"{res['per_title_s']} s per title; {on['cold_titled']}/{on['papers']} seeds got a "
          f"title that passed the check; machine load {load_start['load1']} -> "
          f"{res['machine_load_end']['load1']}, other processes used "
          f"{res['other_processes_cores']} cores")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
