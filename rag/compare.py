"""Two-paper comparison: recognise the request, resolve each side on its own, fill a table
by sentence selection (no model, so it shows within a second). The assistant then writes
and verifies a short synthesis on the same path as any answer (rag/assistant.py).

Each side is resolved separately (an id, then an exact name, then retrieval restricted to
that side's own words), so one paper never crowds the other out of a shared top-k list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag import evidence
from rag.evidence import SentenceIndex
from rag.prompt import Passage, approx_tokens
from rag.retrieve import Retriever, tokenize
from rag.types import Cell, Citation, Comparison, ComparisonRow, Paper, Side, Turn

NOT_STATED_CELL = "not stated in the abstract"
UNVERIFIED = ("The model's synthesis could not be verified against the two abstracts, so it is "
              "not shown; the table above is drawn from them directly.")
ASPECTS = ("Problem", "Approach", "Evaluation", "Key results", "Code")
_PRONOUN = re.compile(r"^(?:that|it|this|this one|that one|this paper|that paper|the paper|"
                      r"the (?:previous|last|above|same) (?:one|paper|method)|the former|"
                      r"the method|they|them)$", re.IGNORECASE)
_ID = re.compile(r"\b\d{3}-\d{2}\b")
_LEADS = [
    r"^(?:and |so |ok,? )?(?:please )?(?:compare|contrast)\s+(?P<rest>.+)$",
    r"^(?:what(?:'s| is| are)? )?(?:the )?(?:main |key )?(?:differences?|comparison|contrast)"
    r"\s+(?:between|of)\s+(?P<rest>.+)$",
]
_SEPARATORS = (" with ", " and ", " versus ", " vs. ", " vs ", " to ", " against ")
_HOW = (r"^(?:and |so )?how (?:does|do|is|are)\s+(?P<a>.+?)\s+(?:differ(?:ent)?|compare|"
        r"relate|contrast|stack up)\s*(?:from|to|with|against)\s+(?P<b>.+)$")
_VS = r"^(?P<a>.+?)\s+(?:vs\.?|versus)\s+(?P<b>.+)$"
# "SVOO or AMNet: which one is about ...?", "Which is faster, SVOO or AMNet?"
_OR = (r"^(?P<a>[^:;,?]+?)\s+or\s+(?P<b>[^:;,?]+?)\s*[:,;]\s*(?:which|what|who)\b.*$",
       r"^(?:which|what)\b[^,:;]*[,:;]\s*(?P<a>[^,:;?]+?)\s+or\s+(?P<b>[^,:;?]+)$")
_STRONG = {
    "Problem": r"\b(however|yet|although|despite|struggle|suffer|lacks?|hinder|fail|remains? "
               r"(?:largely |poorly )?(?:unexplored|unclear|challenging|difficult|understood))",
    "Approach": r"\b((we|this (work|paper))\s+(propose|introduce|present|develop|derive|design)"
                r"|introduces?\b|we (formulate|reformulate|model|prove|study|analy[sz]e|establish|"
                r"characterize|investigate|correct)\b)",
    "Evaluation": r"\b(we evaluate|evaluated on|experiments?\b|benchmarks?\b|datasets?\b|"
                  r"simulat|real-world)",
    "Key results": r"(\d+(?:\.\d+)?\s*(?:%|×|x\b|times)|outperform|state-of-the-art|"
                   r"speedup|surpass|improv|achiev|reduc|we prove|guarantee)",
}
_WEAK = {
    "Problem": r"\b(challenge|problem|limit|difficult|vulnerab|costly|expensive|risk|"
               r"bottleneck|unclear|but)",
    "Approach": r"\b(novel|framework|algorithm|method|approach|architecture|leverag|"
                r"integrat|using)",
    "Evaluation": r"\b(tasks?\b|empirical|across|ablation|evaluat|baselines?)",
    "Key results": r"(\d|faster|gain|bound|show that|demonstrate|results)",
}
_NEEDS_CUE = {"Evaluation", "Key results"}
_PROTOTYPE = {
    "Problem": "the problem or limitation of existing methods that this work addresses",
    "Approach": "we propose a new method or framework that works by",
    "Evaluation": "experiments evaluate the method on benchmarks, datasets and tasks",
    "Key results": "results show the method outperforms baselines, improving accuracy by",
}


def is_pronoun(side: str) -> bool:
    """'that', 'it', 'the previous paper': a side that points back at the last turn."""
    return bool(_PRONOUN.match(side.strip()))


@dataclass(frozen=True)
class Parts:
    """What a comparison reads: the papers and their search, and the sentence scorer."""

    retriever: Retriever
    sentences: SentenceIndex
    unknown_below: float  # a described side whose best match scores below this is not found


@dataclass(frozen=True)
class Request:
    left: str
    right: str


def parse_request(question: str) -> Request | None:
    """A comparison request, recognised without a model call, or None."""
    q = question.strip().rstrip("?.! ")
    pair: tuple[str, str] | None = None
    for lead in _LEADS:
        m = re.match(lead, q, flags=re.IGNORECASE)
        if m:
            rest = m.group("rest")
            for sep in _SEPARATORS:  # the first separator of the highest priority
                i = rest.lower().find(sep)
                if i > 0:
                    pair = (rest[:i], rest[i + len(sep):])
                    break
            break
    if pair is None:
        for pat in (_HOW, _VS, *_OR):
            m = re.match(pat, q, flags=re.IGNORECASE)
            if m:
                pair = (m.group("a"), m.group("b"))
                break
    if pair is None:
        return None
    a, b = _tidy(pair[0]), _tidy(pair[1])
    if a and b and len(a) < 200 and len(b) < 200:
        return Request(a, b)
    return None


def _tidy(side: str) -> str:
    side = re.split(r"\s*(?::|;| - | – | — |, (?:and |but )?(?:how|what|which|why)\b)", side)[0]
    side = re.sub(r"^(?:the (?:paper|method|work) )?(?:on |about |called )?", "", side.strip(),
                  flags=re.IGNORECASE)
    side = re.sub(r"\s+(?:paper|papers)$", "", side, flags=re.IGNORECASE)
    return side.strip(" ,;:\"'“”")


def _looks_like_name(text: str) -> bool:
    words = text.split()
    return len(words) <= 3 and any(
        re.search(r"[A-Z].*[A-Z0-9]|\d", w[1:] if w[:1].isupper() else w) or w.isupper()
        or (w[:1].isupper() and len(words) == 1) for w in words)


def resolve_side(a: Parts, text: str, history: Sequence[Turn]) -> Side:
    papers = a.retriever.papers
    if _PRONOUN.match(text.strip()):
        if history and history[-1].paper_ids and history[-1].paper_ids[0] in papers:
            return Side(text, "resolved", papers[history[-1].paper_ids[0]])
        return Side(text, "unknown")
    ids = [i for i in _ID.findall(text) if i in papers]
    if ids:
        return Side(text, "resolved", papers[ids[0]])
    named = a.retriever.named_papers(text)
    if named:
        return Side(text, "resolved", papers[named[0]])
    for p in papers.values():
        if p.label.lower() == text.lower():
            return Side(text, "resolved", p)
    phrase = re.sub(r"^(?:the|a|an) ", "", text.strip(), flags=re.IGNORECASE).lower()
    verbatim = [p for p in papers.values() if len(phrase) >= 4 and re.search(
        r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", p.clean.lower())]
    if len(verbatim) == 1:
        return Side(text, "resolved", verbatim[0])
    hits = a.retriever.search(text, k=3, group=True)
    if _looks_like_name(text) or not hits:
        return Side(text, "unknown", candidates=tuple(papers[h.chunk.paper_id] for h in hits))
    sims = [a.retriever.dense(text, 1, {h.chunk.paper_id})[0].score for h in hits]
    if sims[0] < a.unknown_below:
        return Side(text, "unknown", candidates=tuple(papers[h.chunk.paper_id] for h in hits))
    order = sorted(range(len(hits)), key=lambda i: -sims[i])
    if len(order) > 1 and sims[order[0]] - sims[order[1]] < 0.02 and hits[0].rank == 1 and \
            order[0] != 0:
        return Side(text, "ambiguous",
                    candidates=tuple(papers[hits[i].chunk.paper_id] for i in order))
    return Side(text, "resolved", papers[hits[0].chunk.paper_id])


def build_rows(a: Parts, left: Paper, right: Paper) -> tuple[ComparisonRow, ...]:
    lc, rc = _column(a, left, 1), _column(a, right, 2)
    return tuple(ComparisonRow(asp, lc[asp], rc[asp]) for asp in ASPECTS)


def _column(a: Parts, paper: Paper, marker: int) -> dict[str, Cell]:
    """Pick one sentence per aspect: cue words first, similarity to a description of the
    aspect second; globally greedy, so an early aspect cannot take a later one's sentence."""
    spans, vecs = a.sentences.get(paper)
    texts = [paper.clean[s:e] for s, e in spans]
    protos = _prototypes(a)
    proto_words = [set(tokenize(t)) for t in _PROTOTYPE.values()]
    n = max(len(texts), 1)
    scores: dict[tuple[str, int], float] = {}
    for k, asp in enumerate(_PROTOTYPE):
        for i, t in enumerate(texts):
            strong = len(re.findall(_STRONG[asp], t, flags=re.IGNORECASE))
            weak = len(re.findall(_WEAK[asp], t, flags=re.IGNORECASE))
            if (strong == 0 and asp in _NEEDS_CUE) or "github.com" in t:
                continue
            match = evidence.score(t, float(vecs[i] @ protos[k]), proto_words[k], set(), set())
            score = match + 0.4 * min(strong, 2) + 0.1 * min(weak, 3)
            if asp == "Problem":
                score += 0.3 * (1 - i / n)
            if asp == "Approach" and paper.label.lower() in t.lower():
                score += 0.2
            if asp in ("Evaluation", "Key results"):
                score += 0.1 * i / n
            scores[(asp, i)] = score
    chosen: dict[str, int] = {}
    used: set[int] = set()
    for (asp, i), sc in sorted(scores.items(), key=lambda kv: -kv[1]):
        if asp in chosen or i in used or sc < 0.3:
            continue
        chosen[asp] = i
        used.add(i)
    for asp in _PROTOTYPE:  # a sentence may serve two aspects when nothing else can
        if asp not in chosen:
            cands = [(sc, i) for (x, i), sc in scores.items() if x == asp and sc >= 0.45]
            if cands:
                chosen[asp] = max(cands)[1]
    cells: dict[str, Cell] = {}
    for asp in _PROTOTYPE:
        if asp not in chosen:
            cells[asp] = Cell(NOT_STATED_CELL, None)
            continue
        i = chosen[asp]
        s, e = spans[i]
        cells[asp] = Cell(_short(texts[i]), Citation(
            marker, paper.id, paper.label, f"{paper.id}#0", texts[i], s, e, True,
            round(scores[(asp, i)], 3)))
    link = next((u for u in paper.links if "github.com" in u), paper.links[0] if paper.links
                else "")
    if link:
        i = next((k for k, t in enumerate(texts) if link in t), len(texts) - 1)
        s, e = spans[i]
        cells["Code"] = Cell(link, Citation(marker, paper.id, paper.label, f"{paper.id}#0",
                                            texts[i], s, e, True, 1.0))
    else:
        cells["Code"] = Cell(NOT_STATED_CELL, None)
    return cells


_PROTO_CACHE: dict[int, np.ndarray] = {}


def _prototypes(a: Parts) -> np.ndarray:
    key = id(a.sentences.embedder)
    if key not in _PROTO_CACHE:
        _PROTO_CACHE[key] = a.sentences.embedder.embed(list(_PROTOTYPE.values()))
    return _PROTO_CACHE[key]


def _short(sentence: str, words: int = 32) -> str:
    w = sentence.split()
    return sentence if len(w) <= words else " ".join(w[:words]).rstrip(",;:") + " …"


def compare(a: Parts, left: str, right: str, history: Sequence[Turn] = ()) -> Comparison:
    """Resolve both sides and fill the table; a message instead of rows when that fails."""
    ls, rs = resolve_side(a, left, history), resolve_side(a, right, history)
    for side in (ls, rs):
        if side.status == "unknown":
            near = ", ".join(f"{p.label} ({p.id})" for p in side.candidates[:3])
            return Comparison(ls, rs, message=f"I could not find “{side.query}” among the "
                              f"{len(a.retriever.papers)} abstracts." +
                              (f" The closest are {near}." if near else ""))
        if side.status == "ambiguous":
            opts = "; ".join(f"{p.label} ({p.id})" for p in side.candidates[:3])
            return Comparison(ls, rs, message=f"“{side.query}” matches several papers: {opts}. "
                              "Which one do you mean? Name it or give its id.")
    assert ls.paper and rs.paper
    if ls.paper.id == rs.paper.id:
        return Comparison(ls, rs, message=f"Both “{ls.query}” and “{rs.query}” are the same "
                          f"paper: {ls.paper.label} ({ls.paper.id}).")
    return Comparison(ls, rs, rows=build_rows(a, ls.paper, rs.paper))


def passages(comp: Comparison) -> list[Passage]:
    """[1] and [2]: each side's table sentences, the model's passages for the synthesis."""
    assert comp.left.paper and comp.right.paper
    return [_passage(1, comp.left.paper, comp, "l"), _passage(2, comp.right.paper, comp, "r")]


def _passage(n: int, paper: Paper, comp: Comparison, side: str) -> Passage:
    """The table's own sentences for this paper, in reading order, as the model's passage."""
    cits = [(r.left if side == "l" else r.right).citation for r in comp.rows]
    spans = sorted({(c.start, c.end) for c in cits if c is not None and c.start < c.end})
    text = " ".join(paper.clean[s:e] for s, e in spans)
    while approx_tokens(text) > 260 and len(spans) > 1:
        spans = spans[:-1]
        text = " ".join(paper.clean[s:e] for s, e in spans)
    return Passage(n, paper.id, paper.label, text, tuple(spans))
