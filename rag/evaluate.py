"""The eval harness: question files in, result rows and a metrics table out.

Retrieval: recall@1, recall@5 and MRR over distinct papers. Answers: keyword accuracy,
citation precision/recall against gold papers, abstention accuracy, numbers in the answer
missing from every cited abstract, and p50 timings. Comparisons: both sides resolved,
cells cited to the wrong paper, numbers in cells missing from that paper's abstract.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.errors import InputError


@dataclass(frozen=True)
class Row:
    id: str
    question: str
    gold: tuple[str, ...] = ()
    keywords: tuple[tuple[str, ...], ...] = ()
    history: tuple[tuple[str, str], ...] = ()
    kind: str = ""
    answerable: bool | None = None
    expect: str = ""
    # the eval split the row is in, a label and not a fitted value: "dev" (rows the settings
    # were fitted on) or "test" (held out, reported)
    split: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def read_rows(path: Path) -> list[Row]:
    if not path.is_file():
        raise InputError(f"{path}: no such question file")
    rows: list[Row] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            rows.append(Row(
                id=str(d["id"]), question=str(d["question"]),
                gold=tuple(d.get("gold") or ()),
                keywords=tuple(tuple(g) for g in d.get("keywords") or ()),
                history=tuple((str(u), str(a)) for u, a in d.get("history") or ()),
                kind=str(d.get("kind", "")), answerable=d.get("answerable"),
                expect=str(d.get("expect", "")), split=str(d.get("split", "")), extra=d))
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{path}: line {n}: not a question row ({e}); expected JSON "
                             'like {"id": "q1", "question": "...", "gold": ["000-01"]}') from None
    return rows


# ---- retrieval ----------------------------------------------------------------------------

def retrieval_metrics(rows: list[Row], retrieved: dict[str, list[str]]) -> dict[str, float]:
    """recall@1, recall@5 (fraction of gold found, averaged) and MRR of the first gold hit."""
    scored = [r for r in rows if r.gold]
    if not scored:
        return {"n": 0, "recall@1": 0.0, "recall@5": 0.0, "mrr": 0.0}
    r1, r5, mrr = [], [], []
    for r in scored:
        got = retrieved.get(r.id, [])
        gold = set(r.gold)
        r1.append(len(gold & set(got[:1])) / min(len(gold), 1))
        r5.append(len(gold & set(got[:5])) / min(len(gold), 5))
        rank = next((i + 1 for i, p in enumerate(got) if p in gold), None)
        mrr.append(1.0 / rank if rank else 0.0)
    return {"n": len(scored), "recall@1": statistics.mean(r1), "recall@5": statistics.mean(r5),
            "mrr": statistics.mean(mrr)}


# ---- answers ------------------------------------------------------------------------------

_NUM = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?")


def numbers(text: str) -> set[str]:
    """Numbers that carry a claim: multi-digit or decimal (not list markers like [1] or 2)."""
    out = set()
    text = re.sub(r"\[\d+\]|\b\d{3}-\d{2}\b|https?://\S+", " ", text)  # markers, ids, URLs
    for m in _NUM.finditer(text):
        n = m.group().rstrip("%").replace(",", "")
        if "." in n or len(n) >= 2:
            out.add(n)
    return out


def unsupported_numbers(answer: str, sources: list[str]) -> set[str]:
    """Numbers in `answer` that appear in none of the `sources` texts."""
    have: set[str] = set()
    for s in sources:
        have |= numbers(s)
        have |= {m.group().replace(",", "") for m in re.finditer(r"\d+(?:[.,]\d+)*", s)}
    return {n for n in numbers(answer) if n not in have}


def keyword_hit(answer: str, groups: tuple[tuple[str, ...], ...]) -> bool:
    a = answer.lower()
    return all(any(alt.lower() in a for alt in g) for g in groups)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def p50(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def answer_metrics(rows: list[Row], results: dict[str, dict[str, Any]],
                   texts: dict[str, str]) -> dict[str, Any]:
    """`results[id]` is an output row; `texts` maps paper id -> cleaned abstract."""
    answerable = [r for r in rows if r.answerable is not False and r.gold]
    unanswerable = [r for r in rows if r.answerable is False]
    acc, prec, rec, abst_ok, false_abst, num_defects = [], [], [], [], [], 0
    by_kind: dict[str, list[bool]] = {}
    secs, firsts = [], []
    for r in rows:
        out = results.get(r.id)
        if out is None:
            continue
        secs.append(out["seconds"])
        if out.get("first_token_seconds") is not None:
            firsts.append(out["first_token_seconds"])
        cited = {c["paper_id"] for c in out["citations"] if c.get("supported", True)}
        if not out["abstained"]:  # a decline makes no claim ("ICML 2026" is not a result)
            bad = unsupported_numbers(out["answer"], [texts[p] for p in cited if p in texts])
            num_defects += len(bad)
        if r in answerable:
            ok = (not out["abstained"]) and keyword_hit(out["answer"], r.keywords) and bool(
                cited & set(r.gold))
            acc.append(ok)
            by_kind.setdefault(r.kind, []).append(ok)
            false_abst.append(out["abstained"])
            if cited:
                prec.append(len(cited & set(r.gold)) / len(cited))
            rec.append(len(cited & set(r.gold)) / len(set(r.gold)))
        elif r in unanswerable:
            abst_ok.append(out["abstained"])
    mean = statistics.mean
    return {
        "n": len(results), "answer_accuracy": mean(acc) if acc else 0.0,
        "citation_precision": mean(prec) if prec else 0.0,
        "citation_recall": mean(rec) if rec else 0.0,
        "abstention_accuracy": mean(abst_ok) if abst_ok else 0.0,
        "false_abstentions": sum(false_abst),
        "answerable_declined": mean(false_abst) if false_abst else 0.0,
        "unsupported_numbers": num_defects,
        "seconds_p50": p50(secs), "first_token_p50": p50(firsts),
        **{f"accuracy[{k}]": f"{sum(v)}/{len(v)}" for k, v in sorted(by_kind.items())},
    }


def format_table(metrics: dict[str, Any]) -> str:
    lines = []
    for k, v in metrics.items():
        if isinstance(v, bool) or (isinstance(v, int) and k.endswith("accuracy")):
            v = float(v)
        if isinstance(v, float) and k not in ("seconds_p50", "first_token_p50") and v <= 1:
            v = pct(v) if k != "mrr" else f"{v:.3f}"
        elif isinstance(v, float):
            v = f"{v:.2f}"
        lines.append(f"  {k:<22} {v}")
    return "\n".join(lines)
