"""Citations the user can trust: every answer sentence is matched to the abstract sentence
that supports it, whatever marker (if any) the model wrote.

Support = the mean of the MiniLM cosine similarity and the share of the answer sentence's
content words found in the source sentence, plus a bonus for shared names and numbers; an
answer sentence with a number the source paper lacks cannot be supported by that paper. The
model's own [n] marker only breaks near-ties in favour of its paper.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

import numpy as np

from rag.chunk import sentence_spans
from rag.embed import Embedder
from rag.evaluate import numbers
from rag.prompt import Passage, markers_in, strip_markers
from rag.retrieve import tokenize
from rag.types import AnswerSentence, Citation, Paper

log = logging.getLogger(__name__)

_NAMEISH = re.compile(r"\b[A-Za-z]*[A-Z][A-Za-z]*[A-Z0-9][\w@-]*\b|\b\w+-\w+\b")
TIE = 0.05  # prefer the model's cited paper when within this of the best score


@dataclass(frozen=True)
class Support:
    paper_id: str
    start: int
    end: int
    score: float


class SentenceIndex:
    """Sentence spans and embeddings of each paper's abstract, computed once per paper."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._cache: dict[str, tuple[list[tuple[int, int]], np.ndarray]] = {}
        self._lock = threading.Lock()

    def get(self, paper: Paper) -> tuple[list[tuple[int, int]], np.ndarray]:
        key = f"{paper.id}:{paper.content_hash}"
        with self._lock:
            if key not in self._cache:
                spans = sentence_spans(paper.clean)
                vecs = self.embedder.embed([paper.clean[s:e] for s, e in spans])
                self._cache[key] = (spans, vecs)
            return self._cache[key]


def _names(text: str) -> set[str]:
    return {m.group().lower() for m in _NAMEISH.finditer(text)}


def best_support(sentence: str, vec: np.ndarray, papers: list[Paper], index: SentenceIndex,
                 prefer: set[str]) -> Support | None:
    """The abstract sentence that best supports `sentence`, over the given papers."""
    nums = numbers(sentence)
    names = _names(sentence)
    words = set(tokenize(sentence))
    best: Support | None = None
    for paper in papers:
        spans, vecs = index.get(paper)
        if not spans:
            continue
        paper_nums = numbers(paper.clean) | {
            m.group() for m in re.finditer(r"\d+(?:\.\d+)?", paper.clean)}
        if nums - paper_nums:  # a number this paper never states: it cannot support it
            continue
        sims = vecs @ vec
        for (s, e), sim in zip(spans, sims, strict=True):
            src = paper.clean[s:e]
            shared = (names & _names(src)) | (nums & numbers(src))
            lexical = len(words & set(tokenize(src))) / len(words) if words else 0.0
            score = 0.5 * float(sim) + 0.5 * lexical + 0.05 * min(len(shared), 3)
            if paper.id in prefer:
                score += TIE
            if best is None or score > best.score:
                best = Support(paper.id, s, e, score)
    return best


def attach(answer: str, passages: list[Passage], papers: dict[str, Paper],
           index: SentenceIndex, threshold: float, drop_unsupported: bool = False,
           fixed: dict[str, int] | None = None
           ) -> tuple[str, tuple[Citation, ...], tuple[AnswerSentence, ...]]:
    """Rewrite `answer` with verified markers; returns (text, citations, sentences).

    Markers are renumbered 1.. over distinct cited papers in order of first use, so an
    out-of-range or misplaced model marker never reaches the user."""
    by_number = {p.number: p.paper_id for p in passages}
    pool = [papers[p.paper_id] for p in passages if p.paper_id in papers]
    raw_sents = [answer[s:e] for s, e in sentence_spans(answer)]
    plain = [strip_markers(x).strip() for x in raw_sents]
    keep = [(raw, txt) for raw, txt in zip(raw_sents, plain, strict=True) if len(txt) > 1]
    if not keep:
        return "", (), ()
    vecs = index.embedder.embed([t for _, t in keep])
    marker_of: dict[str, int] = dict(fixed or {})
    citations: list[Citation] = []
    sentences: list[AnswerSentence] = []
    parts: list[str] = []
    for (raw, text), vec in zip(keep, vecs, strict=True):
        prefer = {by_number[n] for n in markers_in(raw) if n in by_number}
        sup = best_support(text, vec, pool, index, prefer)
        score = (sup.score - (TIE if sup and sup.paper_id in prefer else 0)) if sup else 0.0
        ok = sup is not None and score >= threshold
        if not ok:
            if drop_unsupported:
                continue
            sentences.append(AnswerSentence(text, (), False))
            parts.append(text)
            continue
        assert sup is not None
        marker = marker_of.setdefault(sup.paper_id, max(marker_of.values(), default=0) + 1)
        paper = papers[sup.paper_id]
        citations.append(Citation(marker, paper.id, paper.label, f"{paper.id}#0",
                                  paper.clean[sup.start:sup.end], sup.start, sup.end, True,
                                  round(score, 3)))
        sentences.append(AnswerSentence(text, (marker,), True))
        parts.append(f"{text} [{marker}]")
    return " ".join(parts), tuple(citations), tuple(sentences)


def looked_here(paper: Paper, question: str, index: SentenceIndex, marker: int = 1) -> Citation:
    """For 'not stated' answers: the paper that was searched, with its closest sentence."""
    spans, vecs = index.get(paper)
    q = index.embedder.embed_one(question)
    i = int(np.argmax(vecs @ q)) if len(spans) else 0
    s, e = spans[i] if spans else (0, len(paper.clean))
    return Citation(marker, paper.id, paper.label, f"{paper.id}#0", paper.clean[s:e], s, e,
                    False, 0.0)
