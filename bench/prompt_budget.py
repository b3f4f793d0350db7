"""Where the 1.5B's prompt tokens go, and what a smaller passage budget buys.

    nice -n 19 .venv/bin/python bench/prompt_budget.py

The real assistant (Assistant.from_settings over the app's index, preset qwen2.5-1.5b on
llama.cpp, the native build when `make native` passed) answers 12 questions of this script's
own (7 naming a paper, 5 describing one), each under every configuration
(answer.context_tokens x answer.max_passages; default 450x3, 300x3, 200x3, 300x2), the order
rotated per question (A,B,C,D / B,C,D,A ...) so a load change on the shared machine hits every
configuration alike. Compare the ratios; seconds move with the machine's load.

1. Tokens: every prompt the answer step sends the model is split into system prompt (its KV
   cache is prefilled once at warm-up and reused), passages (their "[n] label (id): " headers
   and their sentences), the question ("\n\nQuestion: ..."), and the chat template's own tokens
   (the rest of the engine's token count).
2. Time: first token and full answer as the app reports them (Answer.first_token_seconds,
   Answer.seconds: from the question to the first token / the final answer, retrieval,
   second looks and checks included), p50 / p95 per configuration and the median per-question
   ratio to the first configuration.
3. Quality: per question, whether the answer text equals the first configuration's and whether
   its citations still name the expected paper (written for each question from seeds/).

Cache fairness: one slot (parallel = 1) and llama.cpp's host-RAM prompt cache off, and after
each answer the slot is reset to the system prompt (warm-up's "Hi." turn), so each prompt finds
exactly the system prompt cached, as a new question does in the app, and never the same
question's prompt under another budget.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

from common import BENCH, CpuWatch, machine_load, median, pct, table, write_json

# (question, expected paper id); none is copied from eval/questions.jsonl
QUESTIONS: list[tuple[str, str]] = [
    ("What rewards does SSL4RL use to train vision-language models?", "000-01"),
    ("How many examples and configurations does the SecFid benchmark cover?", "000-07"),
    ("What speedup does SVOO reach on Wan2.1?", "003-03"),
    ("Up to how many parameters was DeltaStack scaled in the experiments?", "003-17"),
    ("Which off-policy algorithms was BEXA combined with in its experiments?", "003-01"),
    ("By what factor does Blend-ASC cut the number of samples compared with plain "
     "self-consistency?", "004-03"),
    ("By how much does VIA-SD reduce rejection rates?", "004-19"),
    ("How do protein language models detect approximate repeats in protein sequences?", "000-12"),
    ("Besides attention weights, what matters when choosing which KV cache entries to keep, "
     "according to the work on attention output perturbation?", "000-19"),
    ("How does the attention-based defense against poisoned passages in retrieval-augmented "
     "generation flag anomalous passages?", "004-06"),
    ("What reward is used to post-train the diffusion model that recovers full-body motion "
     "from head-mounted device signals?", "004-12"),
    ("What stabilization tricks are proposed for off-policy finetuning of generative control "
     "policies?", "003-19"),
]


def parse_config(s: str) -> tuple[int, int]:
    budget, _, passages = s.partition("x")
    return int(budget), int(passages or 3)


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "kernel": platform.release()}


def breakdown(engine: Any, prompt: Any) -> dict[str, int]:
    """The prompt's tokens by part (engine tokenizer; parts tokenized alone, the template's
    share is what the whole has beyond them)."""
    msgs = {m.role: m.content for m in prompt.messages}
    system, user = msgs.get("system", ""), msgs.get("user", "")
    total = engine.count_tokens(str(prompt))
    head, sep, question = user.rpartition("\n\nQuestion: ")
    if not sep:
        head, question = "", user
    blocks = [b for b in head.removeprefix("Passages:\n").split("\n\n") if b]
    headers = sum(engine.count_tokens(b.split(": ", 1)[0] + ": ") for b in blocks)
    passages = engine.count_tokens(head) if head else 0
    sys_t = engine.count_tokens(system)
    q_t = engine.count_tokens(sep + question)
    return {"total": total, "system": sys_t, "passages": passages, "passage_headers": headers,
            "passage_text": passages - headers, "question": q_t,
            "template": total - sys_t - passages - q_t, "passage_count": len(blocks)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen2.5-1.5b")
    ap.add_argument("--configs", default="450x3,300x3,200x3,300x2",
                    help="context_tokens x max_passages; the first is the reference")
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions")
    ap.add_argument("--out", type=Path, default=BENCH / "results-prompt-budget-1.5b.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from rag.config import load_settings, offline_environment

    offline_environment()
    from rag.assistant import Assistant
    from rag.prompt import SYSTEM

    configs = [parse_config(c) for c in args.configs.split(",")]
    names = [f"{b}x{p}" for b, p in configs]
    questions = QUESTIONS[: args.limit or None]
    # no host-RAM prompt cache: see the module docstring
    settings = load_settings(generate={"preset": args.preset, "engine": "llama.cpp",
                                       "parallel": 1, "host_cache_mib": 0})
    load_start = machine_load()
    a = Assistant.from_settings(settings)
    t = time.perf_counter()
    a.warm_up()
    engine = a.generator.engine
    engine.warm_up([SYSTEM])  # warm-up ends on the comparison prompt; the slot holds SYSTEM now
    print(f"{a.generator.engine_name}, {args.preset}: warm-up {time.perf_counter() - t:.1f} s; "
          f"load {load_start}", flush=True)

    calls: list[tuple[Any, Any]] = []
    stream = a.generator.stream

    def recording(prompt: Any, *rest: Any, **kw: Any) -> Any:
        s = stream(prompt, *rest, **kw)
        calls.append((prompt, s.stats))
        return s

    a.generator.stream = recording  # type: ignore[method-assign]

    recs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for i, (q, expected) in enumerate(questions):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            budget, passages = configs[names.index(name)]
            a.settings = settings.model_copy(update={"answer": settings.answer.model_copy(
                update={"context_tokens": budget, "max_passages": passages})})
            calls.clear()
            watch = CpuWatch()
            ans = a.ask(q)
            other = watch.other_cores()
            engine.warm_up([SYSTEM])  # back to "only the system prompt cached"
            model = [(p, s) for p, s in calls if hasattr(p, "messages")]
            first = model[0] if model else None
            cited = sorted({c.paper_id for c in ans.citations})
            recs[name].append({
                "question": q, "expected": expected, "text": ans.text, "cited": cited,
                "expected_cited": expected in cited, "abstained": ans.abstained,
                "reason": ans.reason, "model_calls": len(model),
                "ttft_s": ans.first_token_seconds, "answer_s": ans.seconds,
                "prompt_tokens": first[1].prompt_tokens if first else 0,
                "cached_prompt_tokens": first[1].cached_prompt_tokens if first else 0,
                "prompt_tokens_all_calls": sum(s.prompt_tokens for _, s in model),
                "generated_tokens": sum(s.generated_tokens for _, s in model),
                "tokens": breakdown(engine, first[0]) if first else None,
                "other_cores": other,
            })
        row = "  ".join(f"{n} {recs[n][-1]['answer_s']:.1f}s/{recs[n][-1]['prompt_tokens']}t"
                        f"{'' if recs[n][-1]['expected_cited'] else ' MISS'}"
                        f"{'' if recs[n][-1]['text'] == recs[names[0]][-1]['text'] else ' DIFF'}"
                        for n in names)
        print(f"  q{i + 1} {expected}: {row}", flush=True)
    load_end = machine_load()

    ref = recs[names[0]]
    timed = [j for j in range(len(questions)) if all(recs[n][j]["model_calls"] for n in names)]

    def summary(name: str) -> dict[str, Any]:
        rs = recs[name]
        col = lambda key: [rs[j][key] for j in timed if rs[j][key] is not None]  # noqa: E731
        ratio = lambda key: median([rs[j][key] / ref[j][key] for j in timed  # noqa: E731
                                    if rs[j][key] and ref[j][key]])
        parts = ["total", "system", "passages", "passage_headers", "passage_text", "question",
                 "template", "passage_count"]
        toks = {p: median([rs[j]["tokens"][p] for j in timed]) for p in parts}
        return {
            "context_tokens": configs[names.index(name)][0],
            "max_passages": configs[names.index(name)][1],
            "prompt_tokens_p50": median(col("prompt_tokens")),
            "cached_prompt_tokens_p50": median(col("cached_prompt_tokens")),
            "uncached_prompt_tokens_p50": median([rs[j]["prompt_tokens"] - rs[j]["cached_prompt_tokens"]
                                                  for j in timed]),
            "tokens_p50": toks,
            "ttft_p50_s": median(col("ttft_s")), "ttft_p95_s": pct(col("ttft_s"), 95),
            "answer_p50_s": median(col("answer_s")), "answer_p95_s": pct(col("answer_s"), 95),
            "ttft_ratio_p50": ratio("ttft_s"), "answer_ratio_p50": ratio("answer_s"),
            "prompt_ratio_p50": ratio("prompt_tokens"),
            "expected_cited": f"{sum(r['expected_cited'] for r in rs)}/{len(rs)}",
            # an abstention cites its closest paper too: answered = not abstained, expected cited
            "answered_expected":
                f"{sum(r['expected_cited'] and not r['abstained'] for r in rs)}/{len(rs)}",
            "same_text_as_ref":
                f"{sum(r['text'] == f['text'] for r, f in zip(rs, ref, strict=True))}/{len(rs)}",
            "abstained": sum(r["abstained"] for r in rs),
            "contended": sum(r["other_cores"] > 0.3 for r in rs),
        }

    res: dict[str, Any] = {
        "preset": args.preset, "engine": a.generator.engine_name,
        "threads": settings.generate.threads, "parallel": 1, "host_prompt_cache_mib": 0,
        "machine": machine(), "load": {"start": load_start, "end": load_end},
        "note": ("configurations interleaved per question (order rotated); ratios are medians of "
                 "per-question ratios to the first configuration; timings over the questions "
                 "where every configuration called the model"),
        "timed_questions": len(timed), "configs": {n: summary(n) for n in names},
        "questions": [{"question": q, "expected": e,
                       **{n: {k: recs[n][j][k] for k in ("text", "cited", "expected_cited",
                                                         "abstained", "prompt_tokens", "ttft_s",
                                                         "answer_s", "model_calls", "other_cores")}
                          | {"same_text_as_ref": recs[n][j]["text"] == ref[j]["text"]}
                          for n in names}}
                      for j, (q, e) in enumerate(questions)],
        "records": recs,
    }
    write_json(args.out, res)
    keys = ["prompt_tokens_p50", "uncached_prompt_tokens_p50", "ttft_p50_s", "ttft_p95_s",
            "answer_p50_s", "answer_p95_s", "prompt_ratio_p50", "ttft_ratio_p50",
            "answer_ratio_p50", "expected_cited", "answered_expected", "same_text_as_ref",
            "abstained", "contended"]
    print(f"\n{args.preset} on {res['engine']}, {len(questions)} questions ({len(timed)} timed); "
          f"load {load_start} -> {load_end}")
    print(table(["", *names], [[k, *(res["configs"][n][k] for n in names)] for k in keys]))
    parts = ["total", "system", "passages", "passage_headers", "passage_text", "question",
             "template", "passage_count"]
    print("\nprompt tokens p50 by part\n" + table(
        ["", *names], [[p, *(res["configs"][n]["tokens_p50"][p] for n in names)] for p in parts]))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
