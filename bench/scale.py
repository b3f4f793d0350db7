"""Scale run: a synthetic corpus of 100,000 abstracts through a real Chroma server.

    nice -n 10 .venv/bin/python bench/scale.py            # 100,000 papers (~450,000 chunks)
    nice -n 10 .venv/bin/python bench/scale.py --quick    # 2,000 papers, a smoke test

The corpus is the 57 seed abstracts plus synthetic ones, each a random draw of seed
sentences (lengths drawn from the seeds' own; fixed RNG seed), written as seed files into a
temporary folder. A `chroma run` server on 127.0.0.1 (telemetry off, its data in the same
temporary folder) holds the index; ingest goes through rag.ingest / rag.store with
`store.url` set, exactly as `rag ingest` does.

Vectors are built cheaply: embedding ~450,000 chunks with MiniLM at ~43 chunks/s would take
~3 h on 2 cores. Every distinct seed sentence is embedded once with the real embedder; a
chunk's vector is the L2-normalised mean of its sentences' cached vectors. Queries are
embedded by the real model. The real embedder's throughput on real chunks is measured
separately.

The app side (start = Retriever.refresh + the first hybrid search, resident memory, warm
search latency) runs in a fresh process, as the app would: its memory is its own. Ingest
ends by writing the retriever's cache (rag/retrieve.py IndexCache), so that start loads it;
the cold start (no cache: read every chunk from the server, derive, save) is timed last, in
the same process, by its parts.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from common import BENCH, ROOT, CpuWatch, machine_load, pct, table, write_json

from rag.chunk import sentences
from rag.config import Settings, load_settings
from rag.corpus import load_corpus, load_file
from rag.embed import Embedder
from rag.evaluate import read_rows

TARGET_P95_MS = 150.0
TARGET_START_S = 30.0
PER_FILE = 500  # synthetic abstracts per seed file


def rss_mb(pid: int | None = None) -> float:
    """Resident set now (VmRSS) of `pid` (default: this process), in MB."""
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mb(pid: int | None = None) -> float:
    """Peak resident set (VmHWM) of `pid` (default: this process), in MB."""
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def settings_for(data: Path, seeds: Path, url: str) -> Settings:
    # The map (rag/atlas.py) is left out: it is not part of search, and at 20,000 papers its
    # related-papers step (an n x n similarity matrix, 1.6 GB) ended the ingest with a
    # segfault in OpenBLAS on this machine (2026-11-30).
    return load_settings(paths={"seeds": str(seeds), "data": str(data)},
                         store={"url": url, "collection": "scale"}, atlas={"enabled": False})


# ---- corpus ---------------------------------------------------------------------------

def synth_corpus(seeds: Path, folder: Path, n_papers: int, seed: int) -> dict[str, Any]:
    """The seed files plus synthetic ones (PER_FILE abstracts each) until the corpus holds
    `n_papers` abstracts; every synthetic abstract is distinct and a random draw of seed
    sentences, its length drawn from the seeds' sentence counts."""
    rng = random.Random(seed)
    papers = load_corpus(seeds).papers
    pool = sorted({s for p in papers for s in sentences(p.clean) if len(s.split()) >= 5})
    lengths = [max(3, len(sentences(p.clean))) for p in papers]
    folder.mkdir(parents=True)
    for f in sorted(seeds.glob("*.txt")):
        shutil.copy(f, folder / f.name)
    seen = {hashlib.sha256(p.text.encode()).hexdigest() for p in papers}
    todo, files = n_papers - len(papers), 0
    while todo > 0:
        paras: list[str] = []
        while len(paras) < min(PER_FILE, todo):
            text = " ".join(rng.sample(pool, rng.choice(lengths)))
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                paras.append(text)
        (folder / f"{100 + files}_synthetic.txt").write_text(
            "Synthetic ICML 2026 Papers\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")
        todo -= len(paras)
        files += 1
    return {"seed_papers": len(papers), "synthetic_files": files, "sentence_pool": len(pool),
            "rng_seed": seed, "papers_per_file": PER_FILE,
            "bytes": sum(f.stat().st_size for f in folder.glob("*.txt"))}


# ---- the cheap embedder ---------------------------------------------------------------

class SentenceMeanEmbedder(Embedder):
    """A chunk's vector = the L2-normalised mean of its sentences' vectors; each distinct
    sentence is embedded once by the real model and cached."""

    def __init__(self, base: Embedder) -> None:
        super().__init__(base.settings)
        self.base = base
        self.cache: dict[str, np.ndarray] = {}
        self.misses = 0  # sentences first seen during ingest (embedded then, by the real model)

    def prime(self, texts: list[str]) -> int:
        new = sorted({s for t in texts for s in sentences(t)} - set(self.cache))
        if new:
            self.cache.update(zip(new, self.base.embed(new), strict=True))
        return len(new)

    def embed(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        split = [sentences(t) or [t] for t in texts]
        new = sorted({s for ss in split for s in ss} - set(self.cache))
        if new:
            self.misses += len(new)
            self.cache.update(zip(new, self.base.embed(new), strict=True))
        out = np.stack([np.mean([self.cache[s] for s in ss], axis=0) for ss in split])
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)


# ---- the Chroma server ----------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_chroma(path: Path, log_file: Path) -> tuple[subprocess.Popen[bytes], str]:
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    with log_file.open("wb") as log:
        proc = subprocess.Popen([exe, "run", "--path", str(path), "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the chroma server did not start; see {log_file}")


# ---- phases run by the parent ---------------------------------------------------------

def embedder_throughput(embedder: Embedder, texts: list[str]) -> dict[str, Any]:
    """The real embedder on real chunk texts, in 256-chunk calls as ingest makes them."""
    embedder.embed(texts[:32])  # warm the kernels
    t = time.perf_counter()
    for i in range(0, len(texts), 256):
        embedder.embed(texts[i: i + 256])
    sec = time.perf_counter() - t
    return {"chunks": len(texts), "seconds": round(sec, 2),
            "chunks_per_s": round(len(texts) / sec, 1),
            "hours_for_the_scale_corpus_at_this_rate": None}


def timed_ingest(settings: Settings, embedder: SentenceMeanEmbedder, corpus: Path
                 ) -> dict[str, Any]:
    from rag.ingest import ingest
    from rag.store import Store

    store = Store(settings.store, settings.paths.data)
    acc: dict[str, float] = defaultdict(float)
    done = [0, 0]  # chunks stored, next progress line at
    upsert, embed = store.upsert, embedder.embed
    t0 = time.perf_counter()

    def timed_upsert(chunks: Any, vectors: Any, papers: Any, hashes: Any) -> None:
        t = time.perf_counter()
        upsert(chunks, vectors, papers, hashes)
        acc["upsert"] += time.perf_counter() - t
        done[0] += len(chunks)
        if done[0] >= done[1]:
            el = time.perf_counter() - t0
            print(f"  {done[0]:,} chunks stored, {el:.0f} s", flush=True)
            done[1] += 50_000

    def timed_embed(texts: list[str], progress: bool = False) -> np.ndarray:
        t = time.perf_counter()
        try:
            return embed(texts)
        finally:
            acc["embed"] += time.perf_counter() - t

    import rag.ingest

    write_cache = rag.ingest.write_index_cache

    def timed_cache(store: Any) -> bool:
        t = time.perf_counter()
        try:
            return write_cache(store)
        finally:
            acc["cache"] += time.perf_counter() - t

    store.upsert = timed_upsert  # type: ignore[method-assign]
    embedder.embed = timed_embed  # type: ignore[method-assign]
    rag.ingest.write_index_cache = timed_cache  # type: ignore[assignment]
    try:
        report = ingest(settings, store, embedder, corpus)
    finally:
        del embedder.embed
        rag.ingest.write_index_cache = write_cache
    sec = report.seconds
    return {"papers": report.papers, "chunks": report.chunks_embedded,
            "chunks_in_index": report.chunks_total, "seconds": round(sec, 1),
            "papers_per_s": round(report.papers / sec, 1),
            "chunks_per_s": round(report.chunks_embedded / sec, 1),
            "upsert_s": round(acc["upsert"], 1), "cheap_embed_s": round(acc["embed"], 1),
            "cache_write_s": round(acc["cache"], 1),  # read back, derive, save the cache
            "other_s": round(sec - acc["upsert"] - acc["embed"] - acc["cache"], 1),  # parse, chunk, manifest
            "cache_mb": round(sum(f.stat().st_size for f in store.cache_dir.rglob("*")
                                  if f.is_file()) / 2**20, 1),
            "warnings": len(report.warnings)}


def queries_for(seed: int, n: int) -> list[str]:
    """The eval questions, topped up to `n` with phrases cut from seed sentences."""
    qs = [r.question for r in read_rows(ROOT / "eval" / "questions.jsonl")]
    rng = random.Random(seed)
    pool = [s for p in load_corpus(ROOT / "seeds").papers for s in sentences(p.clean)]
    while len(qs) < n:
        words = rng.choice(pool).split()
        i = rng.randrange(max(1, len(words) - 6))
        qs.append(" ".join(words[i: i + rng.randint(4, 9)]))
    return qs[:n]


# ---- the app side, in a fresh process -------------------------------------------------

def deep_size(objs: Any) -> int:
    """Bytes of a list of frozen dataclasses (Chunk, Paper) and the strings, tuples and ints
    they hold; strings shared between objects are counted once."""
    seen: set[int] = set()
    total = 0
    for o in objs:
        total += sys.getsizeof(o) + sys.getsizeof(o.__dict__) if hasattr(o, "__dict__") \
            else sys.getsizeof(o)
        for v in (o.__dict__.values() if hasattr(o, "__dict__") else ()):
            items = v if isinstance(v, tuple) else (v,)
            if isinstance(v, tuple):
                total += sys.getsizeof(v)
            for x in items:
                if id(x) not in seen:
                    seen.add(id(x))
                    total += sys.getsizeof(x)
    return total


def bm25_size(bm25: Any) -> int:
    total = 0
    for v in (getattr(bm25, "scores", None) or {}).values():
        total += getattr(v, "nbytes", 0)
    vocab = getattr(bm25, "vocab_dict", None) or {}
    total += sys.getsizeof(vocab) + sum(sys.getsizeof(k) for k in vocab)
    return total


def _server_process(url: str) -> Any:
    """The process listening on the server URL's port (psutil), or None."""
    import psutil

    port = int(url.rsplit(":", 1)[1])
    for conn in psutil.net_connections("tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port \
                and conn.pid:
            return psutil.Process(conn.pid)
    return None


def _cpu_s(proc: Any = None) -> float:
    """User + system CPU seconds of `proc` (a psutil.Process), default this process."""
    if proc is None:
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    t = proc.cpu_times()
    return float(t.user + t.system)


def app_child(args: argparse.Namespace) -> int:
    """The app's start at this size, its memory by part, and warm search latency."""
    from rag.retrieve import Retriever
    from rag.store import Store

    s = settings_for(Path(args.data), Path(args.corpus), args.url)
    queries = json.loads(Path(args.queries).read_text())
    out: dict[str, Any] = {"rss_at_import_mb": round(rss_mb(), 1)}
    embedder = Embedder(s.embed)
    t = time.perf_counter()
    embedder.warm_up()
    embedder.embed_one("warm up")
    out["embedder_load_s"] = round(time.perf_counter() - t, 2)
    gc.collect()
    base = rss_mb()
    out["rss_with_embedder_mb"] = round(base, 1)

    server = _server_process(args.url)
    cpu0, srv0 = _cpu_s(), _cpu_s(server)
    t0 = time.perf_counter()
    store = Store(s.store, s.paths.data)
    retriever = Retriever(s.retrieve, store, embedder)
    retriever.refresh()
    t1 = time.perf_counter()
    # CPU seconds say more than wall seconds on a shared machine: the app's own, the server's
    out["refresh_cpu_s"] = round(_cpu_s() - cpu0, 1)
    out["refresh_server_cpu_s"] = round(_cpu_s(server) - srv0, 1) if server else None
    retriever.search(queries[0], k=8)
    t2 = time.perf_counter()
    out.update({"refresh_s": round(t1 - t0, 2), "first_search_s": round(t2 - t1, 3),
                "start_s": round(t2 - t0, 2)})
    gc.collect()
    out["rss_after_start_mb"] = round(rss_mb(), 1)
    out["retriever_rss_mb"] = round(rss_mb() - base, 1)
    out["peak_rss_mb"] = round(peak_mb(), 1)
    out["chunks"] = len(retriever._chunks)
    out["papers"] = len(retriever._papers)
    out["names"] = len(retriever._names)
    out["size_mb"] = {
        "chunks_list": round(deep_size(retriever._chunks) / 2**20, 1),
        "paper_registry": round(deep_size(list(retriever._papers.values())) / 2**20, 1),
        "bm25": round(bm25_size(retriever._bm25) / 2**20, 1),
        "names": round(sum(sys.getsizeof(k) for k in retriever._names) / 2**20, 1),
    }
    print(f"  start {out['start_s']} s, retriever +{out['retriever_rss_mb']} MB resident",
          flush=True)
    write_json(Path(args.out), out)  # after each phase: what was measured survives a stop

    # Warm search: the hybrid search as Assistant.retrieve asks it (k=8), and each side alone.
    for q in queries[:5]:
        retriever.search(q, k=8)
    sides: dict[str, list[float]] = defaultdict(list)
    for q in queries:
        a = time.perf_counter()
        retriever.search(q, k=8)
        b = time.perf_counter()
        vec = embedder.embed_one(q)
        c = time.perf_counter()
        store.query(vec, s.retrieve.dense_k)
        d = time.perf_counter()
        retriever.keyword(q, s.retrieve.bm25_k)
        e = time.perf_counter()
        retriever.named_papers(q)
        f = time.perf_counter()
        for name, sec in (("hybrid", b - a), ("embed_query", c - b), ("chroma_query", d - c),
                          ("bm25", e - d), ("names", f - e)):
            sides[name].append(1000 * sec)
    out["search"] = {"queries": len(queries), **{
        f"{name}_{q}_ms": round(pct(xs, int(q[1:])) or 0.0, 1)
        for name, xs in sides.items() for q in ("p50", "p95")}}
    print(f"  search p50/p95 {out['search']['hybrid_p50_ms']}/"
          f"{out['search']['hybrid_p95_ms']} ms", flush=True)
    write_json(Path(args.out), out)

    # The app's own question path: the router (language, typo correction against the corpus
    # vocabulary, names by exact and fuzzy match) before the same hybrid search with k=30.
    from rag.evidence import SentenceIndex
    from rag.route import Router

    router = Router(s.route, retriever, SentenceIndex(embedder), lambda text, lang: text,
                    s.answer.max_question_chars)
    t = time.perf_counter()
    router.vocabulary()
    vocab_s = time.perf_counter() - t
    t = time.perf_counter()
    router.warm_up()
    routed: list[float] = []
    for q in queries:
        a = time.perf_counter()
        router.query(q)
        routed.append(1000 * (time.perf_counter() - a))
        if a - t > 90:  # a time cap on a busy machine: the count is reported
            break
    gc.collect()
    out["router"] = {"vocabulary_s": round(vocab_s, 2), "vocabulary_words": len(router.vocabulary()),
                     "language_models_s": round(time.perf_counter() - t - sum(routed) / 1000, 2),
                     "queries": len(routed), "query_p50_ms": round(pct(routed, 50) or 0.0, 1),
                     "query_p95_ms": round(pct(routed, 95) or 0.0, 1),
                     "rss_after_mb": round(rss_mb(), 1)}
    print(f"  router: vocabulary {out['router']['vocabulary_s']} s, question p50/p95 "
          f"{out['router']['query_p50_ms']}/{out['router']['query_p95_ms']} ms", flush=True)
    write_json(Path(args.out), out)

    # The cold start (no cache, or a stale one), by its parts: the same code as
    # rag.retrieve._rebuild. It runs last: it reads every chunk from the server again.
    from rag.retrieve import IndexCache, build_lexical

    split: dict[str, float] = {}
    t = time.perf_counter()
    version = store.version()
    chunks, listed = store.chunks_and_papers()
    split["read_s"] = time.perf_counter() - t
    t = time.perf_counter()
    lex = build_lexical(chunks, listed)
    split["build_s"] = time.perf_counter() - t  # tokenise, BM25, name index
    t = time.perf_counter()
    cache = IndexCache(store.cache_dir / "cold")  # beside the real one, which stays current
    cache.save(lex, version)
    split["save_s"] = time.perf_counter() - t
    t = time.perf_counter()
    again = cache.load(version)
    split["cache_load_s"] = time.perf_counter() - t  # IndexCache.load alone (page cache warm)
    assert again is not None and len(again.chunks) == len(chunks)
    split["cold_start_s"] = split["read_s"] + split["build_s"] + split["save_s"] \
        + out["first_search_s"]
    out["refresh_split"] = {k: round(v, 2) for k, v in split.items()}
    print(f"  cold start (no cache): {out['refresh_split']}", flush=True)
    write_json(Path(args.out), out)
    return 0


class _CachedStore:
    """What Retriever.refresh asks of a Store when its cache is current (no Chroma)."""

    def __init__(self, cache_dir: Path, version: Any) -> None:
        self.cache_dir, self._version = cache_dir, version

    def version(self) -> Any:
        return self._version


def cache_start(n: int, seed: int, out_path: Path) -> int:
    """The cached start alone at `n` papers, without Chroma or an hour of ingest: the 20k
    synthetic corpus is chunked and repeated under new ids up to `n` papers, its keyword side
    derived and saved as ingest would, then a fresh process runs Retriever.refresh on it
    (the page cache is warm: the files were just written) and times keyword searches."""
    from dataclasses import replace as dc_replace

    from rag.ingest import plan
    from rag.retrieve import IndexCache, build_lexical
    from rag.store import IndexVersion

    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-cache-"))
    try:
        base = synth_corpus(ROOT / "seeds", tmp / "corpus", min(n, 20_000), seed)
        s = load_settings(paths={"seeds": str(tmp / "corpus")})
        t = time.perf_counter()
        papers = list(load_corpus(tmp / "corpus").papers)
        planned = plan(papers, s)
        chunks, listed = [], []
        for k in range(-(-n // len(papers))):
            for p in papers:
                if len(listed) == n:
                    break
                pid = p.id if k == 0 else f"{p.id}r{k}"
                listed.append(dc_replace(p, id=pid))
                chunks += [dc_replace(c, id=f"{pid}#{c.ordinal}", paper_id=pid)
                           for c in planned[p.id]]
        prep_s = time.perf_counter() - t
        t = time.perf_counter()
        lex = build_lexical(chunks, sorted(listed, key=lambda p: p.id))
        build_s = time.perf_counter() - t
        version = IndexVersion("synthetic", "stamp", len(chunks))
        t = time.perf_counter()
        IndexCache(tmp / "cache").save(lex, version)
        save_s = time.perf_counter() - t
        del lex, chunks, listed, planned, papers
        gc.collect()
        qfile = tmp / "queries.json"
        qfile.write_text(json.dumps(queries_for(seed, 200)))
        child_out = tmp / "child.json"
        proc = subprocess.run([sys.executable, __file__, "--cache-child", "--data", str(tmp),
                               "--queries-file", str(qfile), "--out", str(child_out),
                               "--papers", str(n)], cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"the cache process exited with {proc.returncode}")
        child = json.loads(child_out.read_text())
        result = {"mode": "cache-start", "command": f"nice -n {os.nice(0)} .venv/bin/python "
                  f"bench/scale.py --cache-start {n}", "corpus": base,
                  "prepare_s": round(prep_s, 1), "derive_s": round(build_s, 1),
                  "save_s": round(save_s, 1),
                  "cache_mb": round(sum(f.stat().st_size for f in (tmp / "cache").rglob("*")
                                        if f.is_file()) / 2**20, 1),
                  "app": child, "machine_load": machine_load()}
        write_json(out_path, result)
        print(json.dumps(result, indent=1))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cache_child(args: argparse.Namespace) -> int:
    from rag.retrieve import Retriever
    from rag.store import IndexVersion

    s = load_settings()
    queries = json.loads(Path(args.queries_path).read_text())
    out: dict[str, Any] = {"rss_at_import_mb": round(rss_mb(), 1)}
    ptr = json.loads((Path(args.data) / "cache" / "current.json").read_text())
    store = _CachedStore(Path(args.data) / "cache", IndexVersion("synthetic", "stamp",
                                                                  ptr["count"]))
    t = time.perf_counter()
    cpu = _cpu_s()
    r = Retriever(s.retrieve, store, None)  # type: ignore[arg-type]
    r.refresh()
    out["refresh_s"] = round(time.perf_counter() - t, 2)
    out["refresh_cpu_s"] = round(_cpu_s() - cpu, 1)
    gc.collect()
    out.update({"chunks": len(r._chunks), "papers": len(r._papers),
                "rss_after_refresh_mb": round(rss_mb(), 1), "peak_rss_mb": round(peak_mb(), 1)})
    lat = []
    for q in queries:
        a = time.perf_counter()
        r.keyword(q, s.retrieve.bm25_k)
        r.named_papers(q)
        lat.append(1000 * (time.perf_counter() - a))
    out["keyword_and_names_p50_ms"] = round(pct(lat, 50) or 0.0, 1)
    out["keyword_and_names_p95_ms"] = round(pct(lat, 95) or 0.0, 1)
    write_json(Path(args.out), out)
    return 0


def rag_papers(settings: Settings) -> dict[str, Any]:
    """`rag papers` (the CLI) against the server: seconds, lines, peak memory."""
    env = {**os.environ, "RAG_STORE__URL": settings.store.url,
           "RAG_STORE__COLLECTION": settings.store.collection,
           "RAG_PATHS__DATA": str(settings.paths.data), "RAG_PATHS__SEEDS": str(settings.paths.seeds)}
    exe = str(Path(sys.executable).parent / "rag")
    t = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", exe, "papers"], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    sec = time.perf_counter() - t
    peak = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    return {"seconds": round(sec, 1), "lines": proc.stdout.count("\n"), "exit": proc.returncode,
            "peak_rss_mb": round(int(peak) / 1024, 1) if peak.isdigit() else None}


def print_table(result: dict[str, Any]) -> None:
    app, ing, through = result["app"], result["ingest"], result["real_embedder"]
    sr = app["search"]
    papers_cli = result["rag_papers"]
    n = ing["papers"]
    load_start = result["machine_load"]["start"]
    sz = app["size_mb"]
    sp = app["refresh_split"]
    rows = [
        ["papers / chunks", f"{ing['papers']:,} / {ing['chunks']:,}", "", ""],
        ["real embedder (chunks/s)", through["chunks_per_s"], "", ""],
        ["  hours to embed the corpus at that rate",
         through["hours_for_the_scale_corpus_at_this_rate"], "", ""],
        ["ingest (s)", ing["seconds"], "", ""],
        ["  papers/s / chunks/s", f"{ing['papers_per_s']} / {ing['chunks_per_s']}", "", ""],
        ["  upsert / cheap embed / cache write / other (s)",
         f"{ing['upsert_s']} / {ing['cheap_embed_s']} / {ing.get('cache_write_s', '-')} / "
         f"{ing['other_s']}", "", ""],
        ["  retriever cache on disk (MB)", ing.get("cache_mb", "-"), "", ""],
        ["app start: refresh + first search (s)", app["start_s"], f"<= {TARGET_START_S:.0f}",
         result["ok"]["start_s"]],
        ["  CPU: the app's / the chroma server's (s)",
         f"{app.get('refresh_cpu_s')} / {app.get('refresh_server_cpu_s')}", "", ""],
        ["  cold start, no cache: read / derive / save (s)" if "read_s" in sp else
         "  read + imports (the rest) / tokenize / bm25 / names (s)",
         f"{sp.get('cold_start_s')}: {sp['read_s']} / {sp['build_s']} / {sp['save_s']}"
         if "read_s" in sp else
         f"{sp.get('load_s', sp['load_chunks_s'] + sp['load_papers_s']):.2f} / "
         f"{sp['tokenize_s']} / {sp['bm25_index_s']} / {sp['name_index_s']}", "", ""],
        ["app resident: with embedder -> after start (MB)",
         f"{app['rss_with_embedder_mb']:.0f} -> {app['rss_after_start_mb']:.0f}", "", ""],
        ["  peak resident (MB)", app["peak_rss_mb"], "", ""],
        ["  chunks list / paper registry / bm25 / names (MB)",
         f"{sz['chunks_list']} / {sz['paper_registry']} / {sz['bm25']} / {sz['names']}", "", ""],
        ["chroma server resident (MB)", app["server_rss_mb"], "", ""],
        ["search hybrid p50 / p95 (ms)", f"{sr['hybrid_p50_ms']} / {sr['hybrid_p95_ms']}",
         f"p95 <= {TARGET_P95_MS:.0f}", result["ok"]["search_p95_ms"]],
    ]
    for name in ("embed_query", "chroma_query", "bm25", "names"):
        rows.append([f"  {name} p50 / p95 (ms)",
                     f"{sr[f'{name}_p50_ms']} / {sr[f'{name}_p95_ms']}", "", ""])
    ro = app["router"]
    rows.append(["app question path: router + search p50 / p95 (ms)",
                 f"{ro['query_p50_ms']} / {ro['query_p95_ms']}", "", ""])
    rows.append(["  router vocabulary build (s, words)",
                 f"{ro['vocabulary_s']}, {ro['vocabulary_words']:,}", "", ""])
    rows.append(["rag papers (s, lines, peak MB)",
                 f"{papers_cli['seconds']}, {papers_cli['lines']:,}, "
                 f"{papers_cli['peak_rss_mb']}", "", ""])
    print()
    print(table(["metric", f"{n:,} papers", "target", "ok"], rows))
    print(f"\n{result['vectors']}")
    print(f"machine load start {load_start['load1']} end {result['machine_load']['end']['load1']};"
          f" other processes' cores: embed {through['other_processes_cores']}, ingest "
          f"{ing['other_processes_cores']}, app {app['other_processes_cores']}")


# ---- main -----------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=100_000, help="corpus size (default 100000)")
    ap.add_argument("--quick", action="store_true", help="2,000 papers: a smoke test")
    ap.add_argument("--queries", type=int, default=200, help="search queries (default 200)")
    ap.add_argument("--embed-sample", type=int, default=512,
                    help="real chunks embedded by the real model for its throughput")
    ap.add_argument("--seed", type=int, default=2026, help="RNG seed of the corpus")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--out", type=Path, help="default bench/results-scale.json "
                    "(quick: bench/results-scale-quick.json)")
    ap.add_argument("--show", type=Path, metavar="JSON", help="print the table of a results file")
    ap.add_argument("--cache-start", type=int, metavar="N", help="only the cached start at N "
                    "papers (no Chroma, no ingest: the 20k corpus repeated; ~10 min at 100k)")
    ap.add_argument("--cache-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--app-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", dest="queries_path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("rag.corpus").setLevel(logging.ERROR)
    if args.show:
        print_table(json.loads(args.show.read_text()))
        return 0
    if args.cache_child:
        return cache_child(args)
    if args.cache_start:
        return cache_start(args.cache_start, args.seed, args.out or BENCH / (
            f"results-scale-cache-{args.cache_start // 1000}k.json"))
    if args.app_child:
        args.queries = args.queries_path
        return app_child(args)
    n = 2000 if args.quick else args.papers
    out_path = args.out or BENCH / ("results-scale-quick.json" if args.quick
                                    else "results-scale.json")
    load_start = machine_load()
    print(f"machine load at start: {load_start}; nice {os.nice(0)}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-scale-"))
    server = None
    try:
        corpus_dir = tmp / "corpus"
        t = time.perf_counter()
        corpus = synth_corpus(ROOT / "seeds", corpus_dir, n, args.seed)
        corpus["generate_s"] = round(time.perf_counter() - t, 1)
        print(f"corpus: {n:,} papers in {corpus['synthetic_files'] + 3} seed files, "
              f"{corpus['bytes'] / 2**20:.0f} MB ({corpus['generate_s']} s)", flush=True)

        base = Embedder(load_settings().embed)
        base.warm_up()
        from rag.ingest import plan

        seed_s = load_settings(paths={"seeds": str(ROOT / "seeds")})
        seed_papers = list(load_corpus(ROOT / "seeds").papers)
        seed_chunks = [c.text for cs in plan(seed_papers, seed_s).values() for c in cs]
        cheap = SentenceMeanEmbedder(base)
        t = time.perf_counter()
        primed = cheap.prime([p.clean for p in seed_papers])
        prime_s = time.perf_counter() - t
        print(f"vectors: each chunk's vector is the normalised mean of its sentences' MiniLM "
              f"vectors; {primed} distinct seed sentences embedded once with the real "
              f"embedder ({prime_s:.1f} s)", flush=True)

        # Real chunk texts of the synthetic corpus, embedded by the real model.
        last = sorted(corpus_dir.glob("*_synthetic.txt"))[-1:]  # (not all 100k parsed twice)
        sample_papers = load_file(last[0])[0][-200:] if last else []
        sample = (seed_chunks + [c.text for cs in plan(sample_papers, seed_s).values()
                                 for c in cs])[: args.embed_sample]
        watch = CpuWatch()
        through = embedder_throughput(base, sample)
        through["other_processes_cores"] = watch.other_cores()
        print(f"real embedder: {through['chunks_per_s']} chunks/s on {len(sample)} real "
              f"chunks", flush=True)

        server, url = start_chroma(tmp / "server", tmp / "chroma.log")
        print(f"chroma server at {url} (data in {tmp / 'server'})", flush=True)
        s = settings_for(tmp / "local", corpus_dir, url)
        watch = CpuWatch()
        ing = timed_ingest(s, cheap, corpus_dir)
        ing["other_processes_cores"] = watch.other_cores()
        ing["sentences_embedded_during_ingest"] = cheap.misses
        through["hours_for_the_scale_corpus_at_this_rate"] = round(
            ing["chunks"] / through["chunks_per_s"] / 3600, 2)
        ing["server_rss_mb"] = round(rss_mb(server.pid), 1)
        ing["server_data_mb"] = round(sum(f.stat().st_size for f in (tmp / "server").rglob("*")
                                          if f.is_file()) / 2**20, 1)
        print(f"ingest: {ing['papers']:,} papers, {ing['chunks']:,} chunks in {ing['seconds']} s "
              f"({ing['papers_per_s']} papers/s, {ing['chunks_per_s']} chunks/s)", flush=True)
        del cheap, base
        gc.collect()

        qfile = tmp / "queries.json"
        qfile.write_text(json.dumps(queries_for(args.seed, args.queries)))
        print("app: start, memory and search in a fresh process ...", flush=True)
        child_out = tmp / "app.json"
        watch = CpuWatch()
        proc = subprocess.run([sys.executable, __file__, "--app-child", "--url", url,
                               "--data", str(tmp / "local"), "--corpus", str(corpus_dir),
                               "--queries-file", str(qfile), "--out", str(child_out)], cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"the app process exited with {proc.returncode}")
        app = json.loads(child_out.read_text())
        app["other_processes_cores"] = watch.other_cores()
        app["server_rss_mb"] = round(rss_mb(server.pid), 1)
        print("rag papers ...", flush=True)
        papers_cli = rag_papers(s)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    sr = app["search"]
    result = {
        "mode": "quick" if args.quick else "full",
        "command": f"nice -n {os.nice(0)} .venv/bin/python bench/scale.py" + (
            " --quick" if args.quick else f" --papers {n}"),
        "corpus": corpus,
        "vectors": ("each chunk's vector is the L2-normalised mean of the cached MiniLM vectors "
                    "of its sentences; every distinct seed sentence embedded once by the real "
                    f"embedder ({primed} sentences, {prime_s:.1f} s); queries embedded by the "
                    "real model"),
        "real_embedder": through, "ingest": ing, "app": app, "rag_papers": papers_cli,
        "targets": {"search_p95_ms": TARGET_P95_MS, "start_s": TARGET_START_S},
        "ok": {"search_p95_ms": sr["hybrid_p95_ms"] <= TARGET_P95_MS,
               "start_s": app["start_s"] <= TARGET_START_S},
        "machine_load": {"start": load_start, "end": machine_load()},
    }
    write_json(out_path, result)
    print_table(result)
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
