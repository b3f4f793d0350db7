"""Pure renderers: answers, sources and status as HTML strings (no gradio, tested directly).

Everything that comes from an abstract, a question or a model answer passes through `esc`.
Chat HTML is emitted on one line: the chatbot runs Markdown first, and a one-line block that
starts with <div> is passed through as HTML, so `*`, `_` and `$` in abstracts stay literal.
Anchors are scoped per turn ("src-3-1": turn 3, marker 1) so old turns never collide.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence

from rag.evidence import CODE_HOSTS
from rag.types import Answer, Citation, Comparison, Hit, Paper

_MARKERS = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_SAFE_URL = re.compile(r"^https?://[^\s\"'<>]+$")
# a URL in answer text: it ends at a bracket ("[GitHub](https://...)." in Bi-NAC's abstract)
_URL_IN_TEXT = re.compile(r"https?://[^\s\"'<>()\[\]{}]+")

STAGES = {"searching": "Searching the abstracts", "writing": "Writing the answer",
          "loading": "Loading the model", "comparing": "Comparing", "stopping": "Stopping"}
REASONS = {
    "off-topic": "the question does not match any ICML 2026 abstract in the collection",
    "not-stated": "the retrieved abstracts do not state this",
    "empty": "the question is empty",
    "unsupported": "no sentence of the answer could be backed by an abstract",
    "stopped": "generation was stopped",
}
# a fixed message that says more than its reason (rag/messages.py keys)
MESSAGES = {"no-link": "the abstract gives no link to its code"}
UNSUPPORTED_TITLE = "unsupported: no sentence in the cited abstracts backs this"


def esc(text: object) -> str:
    """HTML-escape anything shown to the user, quotes included (safe inside attributes)."""
    return html.escape(str(text), quote=True)


def anchor(scope: str, marker: int) -> str:
    return f"src-{scope}-{marker}"


def one_line(fragment: str) -> str:
    """Chat HTML must contain no newline (see module docstring)."""
    return fragment.replace("\r", "").replace("\n", " ")


def link_markers(escaped: str, markers: Iterable[int], scope: str) -> str:
    """`[n]` -> a link to the sources panel, for verified markers; others stay plain text."""
    valid = set(markers)

    def sub(m: re.Match[str]) -> str:
        nums = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
        if not any(n in valid for n in nums):
            return m.group(0)
        return "".join(
            f'<a class="cite" href="#{anchor(scope, n)}" data-marker="{n}" '
            f'title="source [{n}]">[{n}]</a>' if n in valid else f"[{n}]" for n in nums)

    return _MARKERS.sub(sub, escaped)


def linked(text: str) -> str:
    """Escaped `text` with each http(s) URL in it a link that opens in a new tab (a code
    link an answer quotes is one click away); a sentence's closing stop is no part of it."""
    out, pos = [], 0
    for m in _URL_IN_TEXT.finditer(text):
        url = m.group(0).rstrip(".,;:!?")
        if "script:" in url.lower():  # "http://x/t.png)javascript:..." stays text
            continue
        out.append(esc(text[pos:m.start()]))
        out.append(f'<a class="ext" href="{esc(url)}" target="_blank" '
                   f'rel="noopener noreferrer">{esc(url)}</a>')
        pos = m.start() + len(url)
    out.append(esc(text[pos:]))
    return "".join(out)


def _text_html(text: str, markers: Iterable[int], scope: str) -> str:
    return link_markers(linked(text), markers, scope).replace("\n", "<br>")


def _unsupported(inner: str) -> str:
    return (f'<span class="unsupported" title="{esc(UNSUPPORTED_TITLE)}" '
            f'style="text-decoration: underline dotted #b45309;">{inner}</span>')


def answer_body_html(answer: Answer, scope: str) -> str:
    """The answer text with linked markers and unsupported sentences marked."""
    markers = {c.marker for c in answer.citations}
    text = answer.text
    if not answer.sentences:
        return _text_html(text, markers, scope)
    out: list[str] = []
    pos = 0
    for s in answer.sentences:
        i = text.find(s.text, pos) if s.text else -1
        if i < 0:
            continue
        out.append(_text_html(text[pos:i], markers, scope))
        inner = _text_html(s.text, markers, scope)
        out.append(inner if s.supported else _unsupported(inner))
        pos = i + len(s.text)
    out.append(_text_html(text[pos:], markers, scope))
    return "".join(out)


def first_sentence(text: str, limit: int = 220) -> str:
    s = _SENTENCE_END.split(text.strip(), maxsplit=1)[0] if text.strip() else ""
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def display_name(p: Paper) -> str:
    """The name a person reads: the paper's title (generated at ingest), else its label."""
    return str(getattr(p, "title", "") or "") or p.label


def is_generated(p: Paper) -> bool:
    return bool(getattr(p, "title", "")) and bool(getattr(p, "title_generated", False))


GENERATED_HINT = "generated title: written by the local model from the abstract"


def name_html(p: Paper, tag: str = "b", cls: str = "label") -> str:
    """The paper's name, with a small marker and a hover hint when the title was generated."""
    if not is_generated(p):
        return f'<{tag} class="{cls}">{esc(display_name(p))}</{tag}>'
    hint = f"{GENERATED_HINT} (label: {p.label})"
    return (f'<{tag} class="{cls}" title="{esc(hint)}">{esc(display_name(p))}</{tag}>'
            f'<span class="gen" title="{esc(GENERATED_HINT)}">gen</span>')


def paper_title(p: Paper) -> str:
    return f"{p.id} · {display_name(p)}"


def related_html(related: Sequence[Paper]) -> str:
    """'Related: A · B · C', each a link that opens that paper (ui/assets.py's script)."""
    if not related:
        return ""
    links = " · ".join(
        f'<a class="open-paper" href="#paper-{esc(r.id)}" data-paper="{esc(r.id)}" '
        f'title="{esc(paper_title(r))}">{esc(display_name(r))}</a>' for r in related)
    return f'<div class="related"><span>Related:</span> {links}</div>'


def _paper_ref(pid: str, papers: Mapping[str, Paper]) -> str:
    p = papers.get(pid)
    return (f'{name_html(p)} <code>{esc(p.id)}</code>' if p
            else f"<code>{esc(pid)}</code>")


def abstention_html(answer: Answer, papers: Mapping[str, Paper], scope: str = "") -> str:
    reason = MESSAGES.get(answer.message) or REASONS.get(answer.reason, answer.reason)
    parts = ['<div class="abstained"><div class="abstain-head">No answer from the abstracts'
             + (f" — {esc(reason)}" if reason else "") + "</div>"]
    if answer.text.strip():
        body = _text_html(answer.text, {c.marker for c in answer.citations}, scope)
        parts.append(f'<div class="abstain-text">{body}</div>')
    if answer.closest:
        items = "".join(
            f"<li>{_paper_ref(pid, papers)}"
            + (f' — <span class="first">{esc(first_sentence(papers[pid].clean, 160))}</span>'
               if pid in papers else "") + "</li>" for pid in answer.closest)
        parts.append(f'<div class="closest">Closest papers:<ul>{items}</ul></div>')
    parts.append("</div>")
    return "".join(parts)


def answer_html(answer: Answer, scope: str, papers: Mapping[str, Paper]) -> str:
    """The chat bubble of a finished answer: text, comparison table or abstention."""
    from ui.compare_render import comparison_html

    parts = ['<div class="answer">']
    if answer.notice:
        parts.append(f'<div class="notice">{esc(answer.notice)}</div>')
    if answer.comparison is not None:
        parts.append(comparison_html(answer.comparison, scope))
        if answer.comparison.rows and answer.text.strip():
            parts.append(f'<div class="synthesis">{answer_body_html(answer, scope)}</div>')
    elif answer.abstained:
        parts.append(abstention_html(answer, papers, scope))
    else:
        parts.append(f'<div class="answer-text">{answer_body_html(answer, scope)}</div>')
    parts.append("</div>")
    return one_line("".join(parts))


def streaming_html(text: str, note: str = "") -> str:
    """The bubble while tokens arrive: plain escaped text and a cursor."""
    body = esc(text).replace("\n", "<br>")
    extra = f' <span class="note">{esc(note)}</span>' if note else '<span class="cursor">▍</span>'
    return one_line(f'<div class="answer streaming">{body}{extra}</div>')


def comparison_streaming_html(comparison: Comparison, scope: str, text: str = "",
                              note: str = "") -> str:
    """The bubble of a comparison whose table is ready and whose synthesis is being written."""
    from ui.compare_render import comparison_html

    body = esc(text).replace("\n", "<br>")
    extra = f' <span class="note">{esc(note)}</span>' if note else '<span class="cursor">▍</span>'
    return one_line(f'<div class="answer">{comparison_html(comparison, scope)}'
                    f'<div class="synthesis streaming">{body}{extra}</div></div>')


def comparison_sources_html(comparison: Comparison, question: str, scope: str) -> str:
    """The sources panel as soon as the table is ready: both papers, cell quotes marked."""
    return sources_html(Answer(question=question, text="", citations=(), hits=(),
                               abstained=False, comparison=comparison), {}, scope)


def error_html(message: str) -> str:
    return one_line(f'<div class="error" role="alert">⚠ {esc(message)}</div>')


def user_html(question: str) -> str:
    return one_line(f'<div class="question">{esc(question)}</div>')


def status_html(stage: str, seconds: float | None = None, message: str = "") -> str:
    """The line under the chat: "Searching the abstracts… 3 s"."""
    if not stage:
        return '<div class="status idle"></div>'
    text = message or STAGES.get(stage, stage.capitalize())
    busy = stage not in ("done", "stopped", "error")
    tail = "…" if busy and not text.endswith("…") else ""
    secs = f" {seconds:.0f} s" if seconds is not None else ""
    return (f'<div class="status status-{esc(re.sub(r"[^a-z-]", "", stage.lower()))}">'
            f"{esc(text)}{tail}{secs}</div>")


def done_status_html(answer: Answer) -> str:
    bits = [f"answered in {answer.seconds:.1f} s"]
    if answer.first_token_seconds is not None:
        bits.append(f"first token after {answer.first_token_seconds:.1f} s")
    n = len({c.paper_id for c in answer.citations})
    if n:
        bits.append(f"{n} cited paper{'s' if n != 1 else ''}")
    if answer.abstained:
        bits[0] = f"declined in {answer.seconds:.1f} s"
    return f'<div class="status status-done">{esc(" · ".join(bits))}</div>'


# ---- sources panel ------------------------------------------------------------------------


def _spans(clean: str, cites: Sequence[Citation]) -> list[tuple[int, int, int]]:
    """Valid (start, end, marker) spans of the quotes, searched for when offsets are stale."""
    out = []
    for c in cites:
        s, e = c.start, c.end
        if not (0 <= s < e <= len(clean)) or (c.quote and clean[s:e] != c.quote):
            s = clean.find(c.quote) if c.quote else -1
            e = s + len(c.quote)
        if s >= 0 and e > s:
            out.append((s, e, c.marker))
    return sorted(out)


def highlight(clean: str, cites: Sequence[Citation]) -> str:
    """The escaped abstract with each supporting sentence in <mark> (overlaps merged)."""
    merged: list[list[int]] = []
    for s, e, m in _spans(clean, cites):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e, m])
    out, pos = [], 0
    for s, e, m in merged:
        out.append(esc(clean[pos:s]))
        out.append(f'<mark title="supports [{m}]">{esc(clean[s:e])}</mark>')
        pos = e
    out.append(esc(clean[pos:]))
    return "".join(out)


def links_html(links: Sequence[str]) -> str:
    items = []
    for url in links:
        if not _SAFE_URL.match(url):
            continue
        kind = "code" if any(h in url for h in CODE_HOSTS) else "link"
        items.append(f'<a class="ext {kind}" href="{esc(url)}" target="_blank" '
                     f'rel="noopener noreferrer">{kind}: {esc(url)}</a>')
    return " ".join(items)


def paper_card_html(p: Paper, cites: Sequence[Citation] = (), anchors: Sequence[str] = (),
                    markers: Sequence[int] = (), related: Sequence[Paper] = ()) -> str:
    """One paper: name, id, source file and line, links, its abstract (highlighted) and its
    nearest papers."""
    ids = list(anchors)
    head_id = f' id="{esc(ids[0])}"' if ids else ""
    extra = "".join(f'<span id="{esc(a)}"></span>' for a in ids[1:])
    tag = "".join(f"[{m}]" for m in markers)
    tag_html = f'<span class="marker">{tag}</span> ' if tag else ""
    links = links_html(p.links)
    return (f'<section class="src"{head_id} data-paper="{esc(p.id)}">{extra}'
            f'<div class="src-head">{tag_html}{name_html(p)} '
            f'<code class="pid">{esc(p.id)}</code></div>'
            f'<div class="src-meta">{esc(p.source)}, line {p.line}'
            f'{" · " + links if links else ""}</div>'
            f'<p class="abstract">{highlight(p.clean, cites)}</p>{related_html(related)}'
            '</section>')


def cited_groups(citations: Iterable[Citation]) -> list[tuple[str, list[int], list[Citation]]]:
    """(paper id, its markers, its citations), in marker order."""
    groups: dict[str, tuple[list[int], list[Citation]]] = {}
    for c in sorted(citations, key=lambda c: c.marker):
        ms, cs = groups.setdefault(c.paper_id, ([], []))
        if c.marker not in ms:
            ms.append(c.marker)
        cs.append(c)
    return [(pid, ms, cs) for pid, (ms, cs) in groups.items()]


def all_citations(answer: Answer) -> list[Citation]:
    cites = list(answer.citations)
    if answer.comparison is not None:
        for row in answer.comparison.rows:
            for cell in (row.left, row.right):
                if cell.citation is not None and cell.citation not in cites:
                    cites.append(cell.citation)
    return cites


def sources_html(answer: Answer, papers: Mapping[str, Paper], scope: str,
                 related: Mapping[str, Sequence[Paper]] | None = None) -> str:
    """The sources panel after an answer: cited papers with highlights (and each one's nearest
    papers, from `related`), then the rest."""
    near = related or {}
    if answer.comparison is not None:
        sides = (answer.comparison.left, answer.comparison.right)
        papers = {**{s.paper.id: s.paper for s in sides if s.paper}, **papers}
    parts = ['<div class="sources">']
    groups = cited_groups(all_citations(answer))
    cited = {pid for pid, _, _ in groups}
    if groups:
        parts.append('<h3>Cited sources</h3>')
        for pid, ms, cs in groups:
            p = papers.get(pid)
            if p is None:
                parts.append(f'<section class="src missing" id="{anchor(scope, ms[0])}">'
                             f"[{ms[0]}] <code>{esc(pid)}</code> (not in the index)</section>")
                continue
            parts.append(paper_card_html(p, cs, [anchor(scope, m) for m in ms], ms,
                                         near.get(pid, ())))
    elif answer.abstained and answer.closest:
        parts.append('<h3>Closest papers (not an answer)</h3>')
        parts.extend(paper_card_html(papers[pid], related=near.get(pid, ()))
                     for pid in answer.closest if pid in papers)
    elif answer.comparison is not None:
        for side in (answer.comparison.left, answer.comparison.right):
            if side.paper is not None:
                parts.append(paper_card_html(side.paper, related=near.get(side.paper.id, ())))
    else:
        parts.append('<p class="empty">No abstract was cited.</p>')
    rest = [h for h in answer.hits if h.chunk.paper_id not in cited]
    if rest and not answer.abstained:
        parts.append(f'<h4>Also retrieved</h4>{retrieved_list(rest, papers)}')
    parts.append("</div>")
    return "".join(parts)


def retrieved_list(hits: Sequence[Hit], papers: Mapping[str, Paper], snippet: int = 160) -> str:
    seen: set[str] = set()
    items = []
    for h in sorted(hits, key=lambda h: h.rank):
        pid = h.chunk.paper_id
        if pid in seen:
            continue
        seen.add(pid)
        label = display_name(papers[pid]) if pid in papers else h.label or pid
        text = h.chunk.text if len(h.chunk.text) <= snippet else h.chunk.text[: snippet - 1] + "…"
        items.append(f'<li data-paper="{esc(pid)}"><b>{esc(label)}</b> <code>{esc(pid)}</code>'
                     f'<div class="snip">{esc(text)}</div></li>')
    return f'<ol class="retrieved">{"".join(items)}</ol>'


def retrieved_html(hits: Sequence[Hit], papers: Iterable[Paper],
                   hint: str = "The answer is being written from these abstracts.") -> str:
    """The panel as soon as retrieval is done, before the model writes anything."""
    by_id = {p.id: p for p in papers}
    if not hits:
        return '<div class="sources"><p class="empty">No passage matched.</p></div>'
    return ('<div class="sources"><h3>Retrieved passages</h3>'
            f'<p class="hint">{esc(hint)}</p>{retrieved_list(hits, by_id)}</div>')


def empty_sources_html() -> str:
    return ('<div class="sources"><p class="empty">Sources appear here: the abstracts an '
            "answer is drawn from, with the supporting sentences highlighted.</p></div>")


# ---- papers tab -------------------------------------------------------------------------


def paper_rows(papers: Iterable[Paper], query: str = "") -> list[list[str]]:
    """[id, label, first sentence] for papers matching every word of `query`."""
    words = query.lower().split()
    rows = []
    for p in papers:
        hay = f"{p.id} {p.label} {display_name(p)} {p.clean} {p.source}".lower()
        if all(w in hay for w in words):
            mark = " ✦" if is_generated(p) else ""
            rows.append([p.id, display_name(p) + mark, first_sentence(p.clean)])
    return rows


def paper_choices(papers: Iterable[Paper]) -> list[tuple[str, str]]:
    """Dropdown choices: ("000-01 · SSL4RL", "000-01")."""
    return [(paper_title(p), p.id) for p in papers]


def ask_about(p: Paper) -> str:
    return f"What does {p.label} propose, and how is it evaluated?"
