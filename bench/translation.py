"""Which model should translate a non-English question into English: quality and time.

    nice -n 19 .venv/bin/python bench/translation.py [--out bench/results-translation.json]

Every eval row with an `en` field (a faithful English rendering, written with the row) is
translated by each candidate, the way the app does it (`Translator.to_english`: the same
prompt and worked examples). The candidates take turns per question (A,B / B,A ...), so a load
change on the shared machine hits both alike; compare ratios, not seconds.

- quality: MiniLM cosine between the translation and the reference, mean and p10; and how
  often a quantity question ("how many", "by how much", ...) stays one;
- time: seconds per translation, p50 / p95 (the first call of each model, its load, apart).

These rows belong to the eval's dev split: the choice they inform is fitted there, and the
answers it changes are reported on the test split (README, Evaluation).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, machine_load, pct  # noqa: E402

QTY = re.compile(r"\bhow (?:many|much|large|big|fast|often|long)\b|\bby what (?:factor|margin)|"
                 r"\bwhat (?:percentage|fraction|speedup|number)", re.IGNORECASE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", default=str(ROOT / "eval" / "questions.jsonl"))
    ap.add_argument("--presets", default="qwen2.5-0.5b,qwen2.5-1.5b",
                    help="comma-separated presets; the first runs on the configured engine, "
                         "the others on llama.cpp, as translate.preset does")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results-translation.json"))
    args = ap.parse_args()

    from rag.config import load_settings, offline_environment

    offline_environment()
    from rag import language
    from rag.embed import Embedder
    from rag.evaluate import read_rows
    from rag.generate import Generator
    from rag.translate import Translator

    rows = [r for r in read_rows(Path(args.questions)) if r.extra.get("en")]
    if not rows:
        print("no rows with an 'en' reference", file=sys.stderr)
        return 2
    settings = load_settings()
    embedder = Embedder(settings.embed)
    names = args.presets.split(",")
    translators = {}
    for i, name in enumerate(names):
        gen = settings.generate.model_copy(update={"preset": name} if i == 0 else {
            "preset": name, "engine": "llama.cpp", "draft_preset": "", "ngram_draft_tokens": None})
        g = Generator(settings.model_copy(update={"generate": gen}))
        translators[name] = (Translator(g), g.engine_name)
    load_s = {}
    for name, (tr, _) in translators.items():  # load and warm each model once
        t = time.perf_counter()
        tr.to_english("¿Qué método propone?", "es")
        load_s[name] = round(time.perf_counter() - t, 2)
    before = machine_load()
    out: dict[str, dict[str, list]] = {n: {"cos": [], "qty": [], "s": []} for n in names}
    per_row = []
    for k, r in enumerate(rows):
        lang = language.detect(r.question, settings.route.language_confidence,
                               settings.route.language_sure, settings.route.language_candidates)
        ref = str(r.extra["en"])
        ref_vec = embedder.embed_one(ref)
        order = names[k % len(names):] + names[:k % len(names)]
        line = {"id": r.id, "lang": lang, "ref": ref}
        for name in order:
            tr = translators[name][0]
            t = time.perf_counter()
            text = tr.to_english(r.question, lang)
            sec = time.perf_counter() - t
            cos = float(embedder.embed_one(text) @ ref_vec)
            kept = bool(QTY.search(text)) == bool(QTY.search(ref))
            out[name]["cos"].append(cos)
            out[name]["qty"].append(kept)
            out[name]["s"].append(sec)
            line[name] = {"text": text, "cos": round(cos, 3), "seconds": round(sec, 2)}
        per_row.append(line)
        print(json.dumps(line, ensure_ascii=False), flush=True)
    after = machine_load()
    summary = {}
    for name in names:
        o = out[name]
        summary[name] = {
            "engine": translators[name][1], "rows": len(o["cos"]),
            "cosine_mean": round(sum(o["cos"]) / len(o["cos"]), 3),
            "cosine_p10": round(pct(o["cos"], 10) or 0, 3),
            "quantity_form_kept": f"{sum(o['qty'])}/{len(o['qty'])}",
            "seconds_p50": round(pct(o["s"], 50) or 0, 2), "seconds_p95": round(pct(o["s"], 95) or 0, 2),
            "first_call_with_load_s": load_s[name]}
    base = names[0]
    for name in names[1:]:
        ratios = sorted(b / a for a, b in zip(out[base]["s"], out[name]["s"], strict=True) if a > 0)
        summary[name]["seconds_ratio_to_" + base + "_p50"] = round(pct(ratios, 50) or 0, 2)
    result = {"summary": summary, "load_before": before, "load_after": after, "rows": per_row}
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print("\n| model (engine) | rows | cosine mean | cosine p10 | quantity form kept | s p50 | s p95 |")
    print("|---|---|---|---|---|---|---|")
    for name, s in summary.items():
        print(f"| {name} ({s['engine']}) | {s['rows']} | {s['cosine_mean']} | {s['cosine_p10']} | "
              f"{s['quantity_form_kept']} | {s['seconds_p50']} | {s['seconds_p95']} |")
    for name in names[1:]:
        print(f"{name} / {base} seconds per question, p50 of ratios: "
              f"{summary[name]['seconds_ratio_to_' + base + '_p50']}")
    print(f"load average before / after: {before} / {after}; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
