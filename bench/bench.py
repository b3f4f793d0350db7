"""Answer-side benchmark (issue "Speed"): latency, throughput against the machine's bounds,
a llama.cpp peer on the same GGUF, and speedup variants checked against answer accuracy.

    python bench/bench.py --quick      # 5 questions: baseline, default, llama.cpp; both presets
    python bench/bench.py              # 15 questions, every variant, both presets
    python bench/bench.py --presets qwen2.5-0.5b --variants lookup,prefixkv,ctx,int8

"baseline" is plain greedy transformers decoding: the figures against the bounds and
llama.cpp are its. "default" is the shipped settings (prompt lookup, prefix-cache reuse,
split one-token matmuls):
the first-token, full-answer and accuracy figures a user sees are its.

Each preset runs in its own process (bench/answer_worker.py), so load time and peak RSS
are its own; llama.cpp gets another process. The machine's fp32 matmul rate and memory
read bandwidth are measured in this process first, with the same thread count.
Bounds: decode reads every weight once per token (fp32: 4 bytes each) -> bandwidth /
bytes; prefill multiplies every weight twice (a FLOP pair) per prompt token -> FLOP/s /
(2 x weights).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from importlib.util import find_spec
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
QUICK = "q29,q31,q36,q41,q43"  # "What/How" about a named paper: all reach the model
FULL = QUICK + ",q32,q33,q34,q35,q37,q38,q39,q40,q42,q44"
# int8 is opt-in (needs torchao)
ALL_VARIANTS = "baseline,default,lookup,prefixkv,split,lookup+prefixkv,lookup+split,ctx"
TARGETS = {"ttft_p50_s": 5.0, "answer_p50_s": 15.0, "sources_p50_s": 1.0,
           "decode_pct_of_bound": 80.0, "decode_vs_llamacpp": 0.8}
MAX_ACC_DROP = 0.02  # a speedup may cost at most 2 points of answer accuracy


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
    check sha256, convert to an HF folder), timed in its own process."""
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


def summarize(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency percentiles over the questions that reached the model."""
    m = [r for r in recs if r.get("model")]
    col = lambda k: [r[k] for r in m if r.get(k) is not None]  # noqa: E731
    prefill = [r["prompt_tokens"] / r["prefill_s"] for r in m if r.get("prefill_s")]
    return {
        "questions": len(recs), "reached_model": len(m),
        "sources_p50_s": median(col("sources_s")), "sources_p95_s": pct(col("sources_s"), 95),
        "ttft_p50_s": median(col("ttft_s")), "ttft_p95_s": pct(col("ttft_s"), 95),
        "first_visible_p50_s": median(col("first_visible_s")),
        "answer_p50_s": median(col("total_s")), "answer_p95_s": pct(col("total_s"), 95),
        "decode_tok_s": median(col("decode_tok_s")), "prefill_tok_s": median(prefill),
        "prompt_tokens_p50": median(col("prompt_tokens")),
        "generated_tokens_p50": median(col("generated_tokens")),
        # questions during which other processes used > 0.3 cores: their timings are suspect
        "contended_questions": sum((r.get("other_cores") or 0) > BUSY for r in recs),
    }


def preset_result(hf: dict[str, Any], llama: dict[str, Any] | None,
                  machine: dict[str, Any]) -> dict[str, Any]:
    base = hf["variants"]["baseline"]
    shipped = hf["variants"].get("default", base)
    s = summarize(base["records"])
    d = summarize(shipped["records"])
    read, prefill_w = hf["params_read_per_token"], hf["params_prefill"]
    dec_bound = machine["bandwidth_gbs"] * 1e9 / (4 * read)
    pre_bound = machine["matmul_gflops"] * 1e9 / (2 * prefill_w)
    out: dict[str, Any] = {
        # what a user sees: the shipped settings
        **{k: _r(v) for k, v in d.items()},
        "effective_decode_tok_s": _r(d["decode_tok_s"]),  # generated tokens / decode time
        # plain decoding, the quantities the bounds and llama.cpp are compared with
        "decode_tok_s": _r(s["decode_tok_s"]), "prefill_tok_s": _r(s["prefill_tok_s"]),
        "baseline_ttft_p50_s": _r(s["ttft_p50_s"]), "baseline_answer_p50_s": _r(s["answer_p50_s"]),
        "load_s": _r(hf["load_s"]),
        "import_s": _r(hf["import_s"]), "peak_rss_mb": round(hf["peak_rss_mb"]),
        "params": hf["params"], "params_read_per_token": read, "params_prefill": prefill_w,
        "decode_bound_tok_s": _r(dec_bound), "prefill_bound_tok_s": _r(pre_bound),
        # the literal formula (every parameter, embeddings included), for reference
        "decode_bound_allparams_tok_s": _r(machine["bandwidth_gbs"] * 1e9 / (4 * hf["params"])),
        "prefill_bound_allparams_tok_s": _r(machine["matmul_gflops"] * 1e9 / (2 * hf["params"])),
        "decode_pct_of_bound": _r(100 * (s["decode_tok_s"] or 0) / dec_bound),
        "prefill_pct_of_bound": _r(100 * (s["prefill_tok_s"] or 0) / pre_bound),
        "eval_answer_accuracy": shipped["metrics"]["answer_accuracy"],
        "citation_precision": shipped["metrics"]["citation_precision"],
        "baseline_eval_answer_accuracy": base["metrics"]["answer_accuracy"],
        "settings": "default" if "default" in hf["variants"] else "baseline",
        "context_tokens": hf["context_tokens"], "max_new_tokens": hf["max_new_tokens"],
        "llamacpp_decode_tok_s": None, "llamacpp_ttft_s": None,
    }
    if llama and not llama.get("error"):
        lr = llama["records"]
        out.update({
            "llamacpp_version": llama["version"], "llamacpp_load_s": _r(llama["load_s"]),
            "llamacpp_peak_rss_mb": round(llama["peak_rss_mb"]),
            "llamacpp_decode_tok_s": _r(median([r["decode_tok_s"] for r in lr if r["decode_tok_s"]])),
            "llamacpp_ttft_s": _r(median([r["ttft_s"] for r in lr])),
            "llamacpp_prompt_tokens_p50": median([r["prompt_tokens"] for r in lr]),
            "llamacpp_contended_questions": sum(r["other_cores"] > BUSY for r in lr),
        })
        out["ttft_ratio_hf_over_llamacpp"] = _r(s["ttft_p50_s"] / out["llamacpp_ttft_s"])
        out["decode_ratio_hf_over_llamacpp"] = _r(out["decode_tok_s"] / out["llamacpp_decode_tok_s"])
    elif llama:
        out["llamacpp_error"] = llama["error"]
    out["variants"] = variant_rows(hf)
    out["variants_failed"] = hf.get("failed", {})
    return out


def variant_rows(hf: dict[str, Any]) -> dict[str, Any]:
    """Each variant against the baseline on the same questions (an aborted one: its first)."""
    base = hf["variants"]["baseline"]
    out = {}
    for name, v in hf["variants"].items():
        ids = [r["id"] for r in v["records"]]
        same = [r for r in base["records"] if r["id"] in ids]
        s, b = summarize(v["records"]), summarize(same)
        texts = {r["id"]: r["answer"] for r in same}
        acc, bacc = v["metrics"]["answer_accuracy"], _acc(same)
        out[name] = {
            **{k: _r(s[k]) for k in ("ttft_p50_s", "answer_p50_s", "decode_tok_s",
                                    "prefill_tok_s", "prompt_tokens_p50", "contended_questions")},
            "questions": len(ids), "eval_answer_accuracy": acc, "baseline_accuracy": bacc,
            "accuracy_delta_points": round(100 * (acc - bacc), 1),
            "same_text_as_baseline": sum(r["answer"] == texts.get(r["id"]) for r in v["records"]),
            "ttft_speedup": _r(b["ttft_p50_s"] / s["ttft_p50_s"]) if s["ttft_p50_s"] else None,
            "answer_speedup": _r(b["answer_p50_s"] / s["answer_p50_s"]) if s["answer_p50_s"] else None,
            "notes": v["notes"],
        }
        r = out[name]
        r["acceptable"] = (name != "baseline" and "aborted" not in v["notes"]
                           and (r["answer_speedup"] or 0) > 1.0 and acc >= bacc - MAX_ACC_DROP)
    return out


def _acc(recs: list[dict[str, Any]]) -> float:
    from rag.evaluate import answer_metrics, read_rows

    rows = [r for r in read_rows(ROOT / "eval" / "questions.jsonl") if r.id in
            {x["id"] for x in recs}]
    texts = _texts()
    return float(answer_metrics(rows, {x["id"]: x for x in recs}, texts)["answer_accuracy"])


_TEXTS: dict[str, str] = {}


def _texts() -> dict[str, str]:
    if not _TEXTS:
        from rag.corpus import load_corpus

        _TEXTS.update({p.id: p.clean for p in load_corpus(ROOT / "seeds").papers})
    return _TEXTS


def _r(v: Any, digits: int = 3) -> Any:
    return round(v, digits) if isinstance(v, float) else v


def print_tables(res: dict[str, Any]) -> None:
    m = res["machine"]
    print(f"\nmachine: fp32 matmul {m['matmul_gflops']} GFLOP/s, read bandwidth "
          f"{m['bandwidth_gbs']} GB/s ({m['threads']} threads); load at start "
          f"{res['machine_load']['start']['load1']}, end {res['machine_load']['end']['load1']}"
          f"{'  [CONTENDED]' if res['contended'] else ''}")
    keys = [("settings", "settings"), ("prepare_s", "first preparation (s)"),
            ("load_s", "model load, later starts (s)"),
            ("sources_p50_s", "sources p50 (s)"),
            ("ttft_p50_s", "first token p50 (s)"), ("ttft_p95_s", "first token p95 (s)"),
            ("answer_p50_s", "full answer p50 (s)"), ("answer_p95_s", "full answer p95 (s)"),
            ("prompt_tokens_p50", "prompt tokens p50"), ("generated_tokens_p50", "generated p50"),
            ("effective_decode_tok_s", "effective decode tok/s"),
            ("baseline_ttft_p50_s", "plain decoding: first token p50"),
            ("baseline_answer_p50_s", "  full answer p50"),
            ("decode_tok_s", "  decode tok/s"), ("decode_bound_tok_s", "  bandwidth bound"),
            ("decode_pct_of_bound", "  % of bound"), ("prefill_tok_s", "prefill tok/s"),
            ("prefill_bound_tok_s", "  compute bound"), ("prefill_pct_of_bound", "  % of bound"),
            ("peak_rss_mb", "peak RSS (MB)"), ("eval_answer_accuracy", "answer accuracy"),
            ("baseline_eval_answer_accuracy", "  plain decoding"),
            ("llamacpp_ttft_s", "llama.cpp first token (s)"),
            ("llamacpp_decode_tok_s", "llama.cpp decode tok/s"),
            ("ttft_ratio_hf_over_llamacpp", "  ttft hf/llama.cpp"),
            ("decode_ratio_hf_over_llamacpp", "  decode hf/llama.cpp"),
            ("llamacpp_peak_rss_mb", "llama.cpp peak RSS (MB)"),
            ("contended_questions", "contended questions"),
            ("llamacpp_contended_questions", "  llama.cpp")]
    names = list(res["presets"])
    print()
    print(table(["", *names], [[label, *(res["presets"][n].get(k) for n in names)]
                                       for k, label in keys]))
    rows = []
    for n in names:
        for v, r in res["presets"][n]["variants"].items():
            rows.append([f"{n} {v}", r["questions"], r["ttft_p50_s"], r["answer_p50_s"],
                         r["decode_tok_s"], r["prefill_tok_s"], r["prompt_tokens_p50"],
                         r["ttft_speedup"], r["answer_speedup"], r["eval_answer_accuracy"],
                         r["accuracy_delta_points"], r["same_text_as_baseline"],
                         r["contended_questions"],
                         "" if v == "baseline" else r["acceptable"]])
    print()
    print(table(["variant", "n", "ttft p50", "answer p50", "decode t/s", "prefill t/s",
                 "prompt tok", "ttft x", "answer x", "acc", "d acc pts", "same text", "busy",
                 "ok"],
                rows))
    for n in names:
        for v, r in res["presets"][n]["variants"].items():
            if r["notes"]:
                print(f"  {n} {v}: {json.dumps(r['notes'])}")
        for v, err in res["presets"][n].get("variants_failed", {}).items():
            print(f"  {n} {v}: FAILED {err}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"questions {QUICK}; baseline and default only")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--questions", help=f"comma-separated ids (default: full {FULL})")
    ap.add_argument("--variants", help=f"subset of {ALL_VARIANTS}; ctx = the other of "
                    "context_tokens 450/700, or ctxN (default: quick baseline, full all)")
    ap.add_argument("--lookup-tokens", type=int, default=10)
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--prepare", action="store_true",
                    help="also time a first start: `rag prepare` into an empty folder (minutes)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wait-idle", type=float, default=120.0, metavar="S",
                    help="wait up to S s for a quiet CPU before starting and before each "
                    "question; a question measured under contention is retried (default 120)")
    ap.add_argument("--out", type=Path, default=BENCH / "results.json")
    ap.add_argument("--update", action="store_true",
                    help="keep the other presets already in --out; replace only those run now")
    args = ap.parse_args()
    questions = args.questions or (QUICK if args.quick else FULL)
    variants = args.variants or ("baseline,default" if args.quick else ALL_VARIANTS)
    llama_ok = find_spec("llama_cpp") is not None and not args.no_llamacpp
    load_start = wait_for_idle(args.wait_idle) if args.wait_idle else machine_load()
    print(f"machine load at start: {load_start}", flush=True)
    quiet(args.wait_idle)
    machine = measure_machine(args.threads)
    print(f"machine: {machine}", flush=True)
    worker = str(BENCH / "answer_worker.py")
    res: dict[str, Any] = {"mode": "quick" if args.quick else "full", "questions": questions,
                           "machine": machine, "presets": {}, "targets": TARGETS,
                           "llamacpp_installed": find_spec("llama_cpp") is not None}
    if args.update and args.out.is_file():
        res["presets"] = json.loads(args.out.read_text()).get("presets", {})
    for n, preset in enumerate(args.presets.split(",")):
        if n:  # re-measured next to each preset's run: the bandwidth moved 42 -> 74 GB/s
            machine = measure_machine(args.threads)  # between runs on this VM
            print(f"machine: {machine}", flush=True)
        print(f"\n== {preset}: transformers ({variants}) ==", flush=True)
        hf = run_child([worker, "hf", "--preset", preset, "--questions", questions,
                        "--variants", variants, "--lookup-tokens", str(args.lookup_tokens),
                        "--wait-idle", str(args.wait_idle)])
        if "error" in hf:
            res["presets"][preset] = {"error": hf["error"]}
            continue
        llama = None
        if llama_ok:
            print(f"== {preset}: llama.cpp ==", flush=True)
            jobs = [{"id": r["id"], "prompt": r["prompt"],
                     "max_tokens": max(8, r["generated_tokens"])}
                    for r in hf["variants"]["baseline"]["records"] if r.get("model")]
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(jobs, f)
            llama = run_child([worker, "llamacpp", "--preset", preset, "--prompts", f.name,
                               "--wait-idle", str(args.wait_idle)])
            Path(f.name).unlink(missing_ok=True)
        res["presets"][preset] = preset_result(hf, llama, machine)
        if args.prepare:
            print(f"== {preset}: first preparation ==", flush=True)
            res["presets"][preset].update(measure_prepare(preset))
        res["presets"][preset].update(machine=machine, questions=questions,
                                      mode="quick" if args.quick else "full")
        res["presets"][preset]["raw"] = {k: v for k, v in hf.items() if k != "variants"}
        res["presets"][preset]["answers"] = {
            v: [{k: r.get(k) for k in ("id", "answer", "ttft_s", "total_s", "prompt_tokens",
                                       "generated_tokens", "decode_tok_s", "finish")}
                for r in d["records"]] for v, d in hf["variants"].items()}
        write_json(args.out, res)  # after each preset: a later failure keeps this one
    res["machine_load"] = {"start": load_start, "end": machine_load()}
    res["contended"] = (load_start["load1"] >= LOAD_LIMIT or load_start["contended"]
                        or res["machine_load"]["end"]["contended"] or any(
                            p.get("contended_questions") for p in res["presets"].values()))
    write_json(args.out, res)
    ok = [n for n in res["presets"] if "error" not in res["presets"][n]]
    print_tables({**res, "presets": {n: res["presets"][n] for n in ok}})
    for n in set(res["presets"]) - set(ok):
        print(f"  {n}: {res['presets'][n]['error']}")
    print(f"\nwrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
