"""`rag eval`: runs a question file through the real pipeline, writes rows, prints metrics.

Models load once for the whole file. Comparison rows (a question that parses as a
comparison) are scored on resolution, cell citations and cell numbers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rag.assistant import Assistant
from rag.config import Settings
from rag.evaluate import (
    Row,
    answer_metrics,
    format_table,
    read_rows,
    retrieval_metrics,
    unsupported_numbers,
)
from rag.types import Answer, Turn


def _history(a: Assistant, row: Row) -> list[Turn]:
    return [a.turn(u, ans) for u, ans in row.history]


def answer_row(row: Row, ans: Answer, retrieved: list[str]) -> dict[str, Any]:
    return {
        "id": row.id, "kind": row.kind, "answer": ans.text,
        "citations": [{"paper_id": c.paper_id, "label": c.label, "quote": c.quote,
                       "supported": c.supported} for c in ans.citations],
        "retrieved": retrieved, "abstained": ans.abstained, "reason": ans.reason,
        "seconds": round(ans.seconds, 3),
        "first_token_seconds": None if ans.first_token_seconds is None
        else round(ans.first_token_seconds, 3),
        "prompt_tokens": ans.prompt_tokens, "cached_prompt_tokens": ans.cached_prompt_tokens,
        "generated_tokens": ans.generated_tokens,
        "unsupported": [s.text for s in ans.sentences if not s.supported],
    }


def comparison_checks(row: Row, ans: Answer) -> dict[str, Any]:
    comp = ans.comparison
    got = [s.paper.id if s and s.paper else None for s in (comp.left, comp.right)] if comp \
        else [None, None]
    expect = row.expect or "resolved"
    if expect == "unknown":
        ok = comp is not None and "unknown" in (comp.left.status, comp.right.status)
    elif expect == "same":
        ok = comp is not None and not comp.rows and got[0] == got[1] is not None
    else:
        ok = got == list(row.gold)
    wrong_cells, bad_numbers = 0, 0
    for r in comp.rows if comp else ():
        for cell, side in ((r.left, comp.left), (r.right, comp.right)):  # type: ignore[union-attr]
            if cell.citation and side.paper:
                wrong_cells += cell.citation.paper_id != side.paper.id
                bad_numbers += len(unsupported_numbers(cell.text, [side.paper.clean]))
    return {"resolved": got, "resolved_ok": ok, "cells_wrong_paper": wrong_cells,
            "cell_numbers_missing": bad_numbers}


def run_eval(settings: Settings, questions: Path, out: Path | None, retrieval_only: bool,
             mode: str | None = None, limit: int | None = None, split: str | None = None,
             intent: str | None = None) -> int:
    rows = [r for r in read_rows(questions) if split is None or r.split == split][: limit or None]
    a = Assistant.from_settings(settings)
    if intent:  # the router alone decides, before any answer (no model call)
        rows = [r for r in rows if a.router.route(r.question, _history(a, r)).intent == intent]
    results: dict[str, dict[str, Any]] = {}
    retrieved: dict[str, list[str]] = {}
    compare_rows: list[dict[str, Any]] = []
    compare_file = all(r.answerable is None and len(r.gold) <= 2 and not r.keywords for r in rows)
    if not retrieval_only and rows:  # answered as `rag serve` answers: papers' prompts cached
        run = a.cache_papers()
        print(f"paper cache: {run.skipped or f'{run.sent} prompts in {run.seconds:.0f} s'}",
              flush=True)
    handle = out.open("w", encoding="utf-8") if out else None
    try:
        for i, row in enumerate(rows, start=1):
            history = _history(a, row)
            if retrieval_only:
                if a.router.route(row.question, history).intent == "compare":
                    continue
                t0 = time.perf_counter()
                hits, _, _ = a.retrieve(row.question, history) if mode is None else (
                    a.retriever.search(row.question, k=10, group=True, mode=mode), (), [])
                ids = list(dict.fromkeys(h.chunk.paper_id for h in hits))
                retrieved[row.id] = ids
                rec: dict[str, Any] = {"id": row.id, "retrieved": ids,
                                       "seconds": round(time.perf_counter() - t0, 4)}
            else:
                ans = a.ask(row.question, history)
                ids = list(dict.fromkeys(h.chunk.paper_id for h in ans.hits)) or list(
                    ans.closest)
                retrieved[row.id] = ids
                rec = answer_row(row, ans, ids)
                if ans.comparison is not None or compare_file:  # a misrouted one fails its check
                    rec.update(comparison_checks(row, ans))
                    compare_rows.append(rec)
                else:
                    results[row.id] = rec
                print(f"[{i}/{len(rows)}] {row.id} {rec['seconds']:.1f}s "
                      f"{'ABSTAIN ' if ans.abstained else ''}{ans.text[:90]!r}", flush=True)
            if handle:
                handle.write(json.dumps(rec, ensure_ascii=False) + "\n")
                handle.flush()
    finally:
        if handle:
            handle.close()
    texts = {p.id: p.clean for p in a.papers()}
    if not retrieval_only:
        print(f"\nengine: {a.generator.engine_name}, preset: {settings.generate.preset}")
    for name in sorted({r.split for r in rows}):  # dev and test reported apart
        part = [r for r in rows if r.split == name]
        _report(name or "all", part, retrieved, results,
                [c for c in compare_rows if c["id"] in {r.id for r in part}], texts)
    return 0


def _report(name: str, rows: list[Row], retrieved: dict[str, list[str]],
            results: dict[str, dict[str, Any]], compare_rows: list[dict[str, Any]],
            texts: dict[str, str]) -> None:
    print(f"\n=== split: {name} ({len(rows)} rows) ===")
    plain = [r for r in rows if r.id not in {c["id"] for c in compare_rows}
             and (r.id in results or r.id in retrieved)]
    if plain:
        print("\nretrieval (distinct papers):")
        print(format_table(retrieval_metrics(plain, retrieved)))
    mine = {r.id: results[r.id] for r in plain if r.id in results}
    if mine:
        print("\nanswers:")
        print(format_table(answer_metrics([r for r in plain if r.id in mine], mine, texts)))
    if compare_rows:
        n = len(compare_rows)
        print("\ncomparisons:")
        print(f"  {'n':<22} {n}")
        print(f"  {'both sides right':<22} {sum(r['resolved_ok'] for r in compare_rows)}/{n}")
        print(f"  {'cells wrong paper':<22} {sum(r['cells_wrong_paper'] for r in compare_rows)}")
        print(f"  {'cell numbers missing':<22} "
              f"{sum(r['cell_numbers_missing'] for r in compare_rows)}")
