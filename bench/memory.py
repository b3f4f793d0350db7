"""Where the app's memory goes: RSS after each import and load, in one process, as the app
starts and answers one question (the quick bench's setup: a throwaway index of seeds/).

    nice -n 19 python bench/memory.py                          # 1.5B on llama.cpp
    nice -n 19 python bench/memory.py --preset qwen2.5-0.5b --engine transformers
    nice -n 19 python bench/memory.py --ui                     # also import the Gradio UI

Per step: RSS now (psutil), its anonymous and file-backed parts (/proc/self/smaps_rollup:
the GGUF file is mapped, so llama.cpp's weights are file-backed), the peak so far
(ru_maxrss) and what the step added. At the end: the largest mappings by resident size.
Writes bench/results-memory.json.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil
from common import BENCH, ROOT, table, write_json

PROC = psutil.Process()
QUICK = "q29,q31,q36,q41,q43"  # bench.py's quick questions: all reach the model


def rollup() -> dict[str, float]:
    """MB of Rss, Anonymous and file-backed resident memory (Linux smaps_rollup)."""
    out: dict[str, float] = {}
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("Rss", "Anonymous", "Pss"):
                out[k] = int(v.split()[0]) / 1024
    except OSError:
        pass
    out["file"] = out.get("Rss", 0) - out.get("Anonymous", 0)
    return out


def top_mappings(n: int = 15) -> list[dict[str, Any]]:
    """The mappings holding the most resident memory, grouped by file ([anon] for the heap)."""
    rss: dict[str, float] = defaultdict(float)
    name = "[anon]"
    try:
        for line in Path("/proc/self/smaps").read_text().splitlines():
            parts = line.split()
            if parts and "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                name = parts[5] if len(parts) >= 6 else "[anon]"
            elif parts and parts[0] == "Rss:":
                rss[name] += int(parts[1]) / 1024
    except OSError:
        return []
    top = sorted(rss.items(), key=lambda kv: -kv[1])[:n]
    return [{"mapping": portable(k), "rss_mb": round(v, 1)} for k, v in top]


def portable(path: str) -> str:
    """A mapped file's path without this machine's folders: '<site-packages>/torch/...',
    '<models>/qwen2.5-1.5b/model.gguf' (results are committed and read elsewhere)."""
    from rag.config import load_settings

    for prefix, tag in ((sysconfig.get_paths()["purelib"], "<site-packages>"),
                        (str(load_settings().paths.models), "<models>"), (str(ROOT), "<repo>"),
                        (str(Path.home()), "~")):
        if path.startswith(prefix.rstrip("/") + "/"):
            return tag + path[len(prefix.rstrip("/")):]
    return re.sub(r"^/tmp/[^/]+", "<tmp>", path)


class Steps:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.last = PROC.memory_info().rss / 2**20

    def mark(self, step: str, seconds: float = 0.0) -> None:
        now = PROC.memory_info().rss / 2**20
        r = rollup()
        row = {"step": step, "rss_mb": round(now, 1), "delta_mb": round(now - self.last, 1),
               "anon_mb": round(r.get("Anonymous", 0), 1), "file_mb": round(r["file"], 1),
               "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               "threads": PROC.num_threads(), "seconds": round(seconds, 2)}
        self.rows.append(row)
        self.last = now
        print(f"  {step:<44} rss {now:7.1f} MB  (+{row['delta_mb']:7.1f})  peak "
              f"{row['peak_mb']:7.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen2.5-1.5b")
    ap.add_argument("--engine", default="llama.cpp")
    ap.add_argument("--build", default="auto", choices=["auto", "prebuilt", "native"])
    ap.add_argument("--ui", action="store_true", help="also import the Gradio UI (rag serve does)")
    ap.add_argument("--questions", default=QUICK, help=f"eval ids answered in turn (default {QUICK})")
    ap.add_argument("--out", type=Path, default=BENCH / "results-memory.json")
    args = ap.parse_args()
    steps = Steps()
    steps.mark("python, psutil")

    def timed(step: str, fn: Any) -> Any:
        t = time.perf_counter()
        v = fn()
        steps.mark(step, time.perf_counter() - t)
        return v

    from rag.config import load_settings, offline_environment

    offline_environment()
    steps.mark("rag.config (offline environment)")
    timed("import torch", lambda: __import__("torch"))
    timed("import sentence_transformers (+transformers)",
          lambda: __import__("sentence_transformers"))
    timed("import chromadb", lambda: __import__("chromadb"))
    timed("import lingua", lambda: __import__("lingua"))

    def import_rag() -> None:
        import rag.assistant  # noqa: F401
        import rag.ingest  # noqa: F401

    timed("import rag.assistant, rag.ingest (the rest)", import_rag)
    if args.ui:
        timed("import ui.app (gradio)", lambda: __import__("ui.app"))

    from rag.assistant import Assistant
    from rag.embed import Embedder
    from rag.generate import Generator
    from rag.ingest import ingest
    from rag.retrieve import Retriever
    from rag.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-memory-"))
    try:
        settings = load_settings(paths={"data": str(tmp)}, store={"url": ""},
                                 generate={"preset": args.preset, "engine": args.engine,
                                           "llamacpp_build": args.build})
        embedder = Embedder(settings.embed)
        timed("embedder load (MiniLM)", embedder.warm_up)
        store = timed("chroma client + collection", lambda: Store(settings.store, tmp))
        timed("ingest seeds/ (embed, map) into a temp index",
              lambda: ingest(settings, store, embedder))
        gen = timed("Generator (engine chosen, not loaded)", lambda: Generator(settings))
        a = timed("Assistant", lambda: Assistant(settings, store, embedder,
                                                 Retriever(settings.retrieve, store, embedder), gen))
        timed("retriever papers + BM25", lambda: a.retriever.papers)

        def lingua() -> None:
            from rag import language

            language.warm_up()

        timed("lingua detector (30 languages, low accuracy; high accuracy per question)", lingua)
        timed("router rest (wordfreq, vocabulary)", lambda: a.router.correct("warm up the tpyo list"))

        def engine() -> None:
            from rag.assistant import COMPARE_SYSTEM, SYSTEM

            gen.warm_up(SYSTEM, COMPARE_SYSTEM)

        timed(f"engine load ({gen.engine_name}) + prefix caches", engine)

        def answer(q: str) -> None:
            for _ in a.stream(q):
                pass

        from rag.evaluate import read_rows

        by_id = {r.id: r for r in read_rows(ROOT / "eval" / "questions.jsonl")}
        for i, q in enumerate(args.questions.split(",")):
            timed(f"answer {i + 1} ({q})", lambda q=q: answer(by_id[q].question))
        top = top_mappings()
        res = {"preset": args.preset, "engine": gen.engine_name, "python": sys.version.split()[0],
               "steps": steps.rows, "top_mappings": top,
               "peak_rss_mb": steps.rows[-1]["peak_mb"], "final_rss_mb": steps.rows[-1]["rss_mb"]}
        print()
        cols = ["step", "rss_mb", "delta_mb", "anon_mb", "file_mb", "peak_mb", "threads", "seconds"]
        print(table(cols, [[r[c] for c in cols] for r in steps.rows]))
        print()
        print(table(["mapping", "rss_mb"], [[t["mapping"][-70:], t["rss_mb"]] for t in top]))
        write_json(args.out, res)
        print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
