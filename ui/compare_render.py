"""Comparison tables as HTML: one column per paper, one row per aspect, cited cells."""

from __future__ import annotations

from rag.types import Cell, Comparison, Side
from ui.render import anchor, display_name, esc, name_html, paper_title

NOT_STATED = "not stated in the abstract"


def _cell_html(cell: Cell, scope: str) -> str:
    c = cell.citation
    if c is None:
        text = cell.text.strip() or NOT_STATED
        return f'<td class="missing" style="color:#888;font-style:italic;">{esc(text)}</td>'
    mark = (f' <a class="cite" href="#{anchor(scope, c.marker)}" data-marker="{c.marker}" '
            f'title="source [{c.marker}]">[{c.marker}]</a>')
    cls = "cell" if c.supported else "cell unsupported"
    return f'<td class="{cls}">{esc(cell.text)}{mark}</td>'


def _side_head(side: Side) -> str:
    if side.paper is None:
        return f"<th>{esc(side.query)}</th>"
    p = side.paper
    return (f'<th data-paper="{esc(p.id)}">{name_html(p, "span")}<br>'
            f'<code class="pid">{esc(p.id)}</code></th>')


def _side_problem(side: Side) -> str:
    if side.status == "unknown":
        return f"<li>“{esc(side.query)}” matches no paper in the collection.</li>"
    if side.status == "ambiguous":
        options = "".join(f"<li><code>{esc(p.id)}</code> {esc(display_name(p))}</li>"
                          for p in side.candidates)
        return (f"<li>“{esc(side.query)}” could mean several papers; pick one:"
                f"<ul>{options}</ul></li>")
    return ""


def comparison_html(comparison: Comparison, scope: str) -> str:
    """The table, or what went wrong when the two sides did not both resolve."""
    if not comparison.rows:
        problems = "".join(_side_problem(s) for s in (comparison.left, comparison.right))
        msg = esc(comparison.message or "The two papers could not be compared.")
        return (f'<div class="comparison failed"><div class="error">{msg}</div>'
                f'{f"<ul>{problems}</ul>" if problems else ""}</div>')
    head = (f'<tr><th class="aspect"></th>{_side_head(comparison.left)}'
            f"{_side_head(comparison.right)}</tr>")
    body = "".join(
        f'<tr><th class="aspect" scope="row">{esc(r.aspect)}</th>'
        f"{_cell_html(r.left, scope)}{_cell_html(r.right, scope)}</tr>"
        for r in comparison.rows)
    title = " vs ".join(paper_title(s.paper) if s.paper else s.query
                        for s in (comparison.left, comparison.right))
    return (f'<div class="comparison"><table class="compare-table" aria-label="{esc(title)}">'
            f"<thead>{head}</thead><tbody>{body}</tbody></table></div>")
