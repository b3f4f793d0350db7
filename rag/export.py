"""Markdown exports: one answer, a comparison, a whole conversation, each with references."""

from __future__ import annotations

from collections.abc import Sequence

from rag.types import Answer, Comparison, Paper


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def references(answers: Sequence[Answer], papers: dict[str, Paper]) -> str:
    """A numbered reference list of every paper cited in `answers`, with quotes."""
    seen: dict[str, list[str]] = {}
    for a in answers:
        for c in a.citations:
            quotes = seen.setdefault(c.paper_id, [])
            if c.quote and c.quote not in quotes:
                quotes.append(c.quote)
        if a.comparison:
            for side in (a.comparison.left, a.comparison.right):
                if side.paper:
                    seen.setdefault(side.paper.id, [])
    lines = ["## References", ""]
    for pid, quotes in seen.items():
        p = papers.get(pid)
        head = f"- **{p.label}** ({pid}), {p.source}" if p else f"- {pid}"
        if p and p.links:
            head += " — code: " + ", ".join(p.links)
        lines.append(head)
        lines.extend(f"  > {q}" for q in quotes)
    return "\n".join(lines) + "\n"


def comparison_table(comp: Comparison) -> str:
    if not comp.rows or not comp.left.paper or not comp.right.paper:
        return comp.message + "\n"
    lp, rp = comp.left.paper, comp.right.paper
    lines = [f"| | {_cell(lp.label)} ({lp.id}) | {_cell(rp.label)} ({rp.id}) |",
             "|---|---|---|"]
    for row in comp.rows:
        cells = []
        for cell in (row.left, row.right):
            mark = f" [{cell.citation.marker}]" if cell.citation else ""
            cells.append(_cell(cell.text) + mark)
        lines.append(f"| {row.aspect} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def answer_markdown(answer: Answer) -> str:
    parts = [f"**Q:** {answer.question}", ""]
    if answer.comparison:
        parts += [comparison_table(answer.comparison), ""]
    text = answer.text
    if answer.abstained and answer.closest:
        text += "\n\nClosest papers: " + ", ".join(answer.closest)
    parts += [f"**A:** {text}", ""]
    unsupported = [s.text for s in answer.sentences if not s.supported]
    if unsupported:
        parts += ["*Not supported by the abstracts:* " + " ".join(unsupported), ""]
    return "\n".join(parts)


def comparison_markdown(answer: Answer, papers: dict[str, Paper]) -> str:
    comp = answer.comparison
    title = (f"# {comp.left.paper.label} vs {comp.right.paper.label}\n\n"
             if comp and comp.left.paper and comp.right.paper else "# Comparison\n\n")
    body = comparison_table(comp) if comp else ""
    synthesis = f"\n{answer.text}\n\n" if answer.text and comp and comp.rows else "\n"
    return title + body + synthesis + references([answer], papers)


def conversation_markdown(answers: Sequence[Answer], papers: dict[str, Paper]) -> str:
    body = "\n".join(answer_markdown(a) for a in answers)
    return "# ICML 2026 abstracts: conversation\n\n" + body + "\n" + references(answers, papers)
