"""Citations the user can trust: every answer sentence is matched to the abstract sentence
that supports it (rag.evidence's scorer), whatever marker (if any) the model wrote.

An answer sentence with a number the source paper lacks cannot be supported by that paper.
The model's own [n] marker only breaks near-ties in favour of its paper.
"""

from __future__ import annotations

import logging
import re

import numpy as np

from rag.chunk import sentence_spans
from rag.evidence import Evidence, SentenceIndex
from rag.names import flat_words, invented_names
from rag.prompt import Passage, markers_in, strip_markers
from rag.types import AnswerSentence, Citation, Paper

log = logging.getLogger(__name__)

TIE = 0.05  # prefer the model's cited paper when within this of the best score
CUT_MIN_WORDS = 6  # a shorter unfinished tail is too little to tell which sentence it copies
_LEADING_MARKERS = re.compile(r"\s*(?:\[\d+\]\s*)*")
_TRAILING_MARKERS = re.compile(r"(?:\s*\[\d+\])*\s*$")
_ENDED = re.compile(r"""[.!?\u3002\uff01\uff1f\u2026:;)\]"'\u201d\u2019]$""")

def best_support(sentence: str, vec: np.ndarray, papers: list[Paper], index: SentenceIndex,
                 prefer: set[str]) -> Evidence | None:
    """The abstract sentence that best supports `sentence`, over the given papers; a paper
    the model cited wins a near-tie (its score is reported without the bonus)."""
    best: Evidence | None = None
    best_key = -1.0
    for paper in papers:
        top = index.best([paper], sentence, vec)
        if top is None:
            continue
        key = top.score + (TIE if paper.id in prefer else 0.0)
        if key > best_key:
            best, best_key = top, key
    return best


def completed(answer: str, papers: list[Paper]) -> str:
    """`answer` with an unfinished last sentence finished from the abstract sentence it was
    copying: one of `papers`' sentences holds its last CUT_MIN_WORDS or more words in order,
    and its rest is appended. The model stops mid-sentence at its token limit, and a quote cut
    there can misstate the abstract: "the detection score improves by 51" of "... improves
    by 51.9%". Any other tail is left as written (and verified like every sentence)."""
    spans = sentence_spans(answer)
    if not spans:
        return answer
    start, end = spans[-1]
    tail = answer[start:end]
    lead = _LEADING_MARKERS.match(tail)  # the previous sentence's marker, when it was spaced
    start += lead.end() if lead else 0
    tail = answer[start:end]
    body = _TRAILING_MARKERS.sub("", tail)  # the marker the model (or a header fix) put last
    words = body.split()
    if markers_in(body) or _ENDED.search(body) or len(words) < CUT_MIN_WORDS:
        return answer
    sources = [" ".join(paper.clean[s:e].split())
               for paper in papers for s, e in sentence_spans(paper.clean)]
    for n in range(len(words), CUT_MIN_WORDS - 1, -1):  # the longest copied run first
        run = " ".join(words[-n:])
        for whole in sources:
            at = whole.find(run)
            if at >= 0 and at + len(run) < len(whole):
                return answer[:start] + body + whole[at + len(run):] + tail[len(body):] + \
                    answer[end:]
    return answer


def citation(marker: int, paper: Paper, ev: Evidence, supported: bool = True) -> Citation:
    return Citation(marker, paper.id, paper.label, f"{paper.id}#0", paper.clean[ev.start:ev.end],
                    ev.start, ev.end, supported, round(ev.score, 3))


def attach(answer: str, passages: list[Passage], papers: dict[str, Paper],
           index: SentenceIndex, threshold: float, drop_unsupported: bool = False,
           fixed: dict[str, int] | None = None, allowed: frozenset[str] = frozenset()
           ) -> tuple[str, tuple[Citation, ...], tuple[AnswerSentence, ...]]:
    """Rewrite `answer` with verified markers; returns (text, citations, sentences).

    Markers are renumbered 1.. over distinct cited papers in order of first use, so an
    out-of-range or misplaced model marker never reaches the user. A sentence naming what
    no passage's abstract writes is unsupported, unless the name is `allowed` (flattened:
    the question's own names and field-wide acronyms, rag/names.py)."""
    by_number = {p.number: p.paper_id for p in passages}
    pool = [papers[p.paper_id] for p in passages if p.paper_id in papers]
    answer = completed(answer, pool)
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
    pair = [papers[i] for i in (fixed or {}) if i in papers]
    for (raw, text), vec in zip(keep, vecs, strict=True):
        prefer = {by_number[n] for n in markers_in(raw) if n in by_number}
        sup = best_support(text, vec, pool, index, prefer)
        # a name no source abstract writes ("the KCA similarity measure") is made up
        ok = sup is not None and sup.score >= threshold and not invented_names(
            text, pool, allowed)
        also: list[tuple[Paper, Evidence]] = []
        said = joint_claim(text, (pair[0].label, pair[1].label)) if len(pair) == 2 else None
        if ok and said is not None and sup is not None:
            # "They both propose RACO [1]": a claim about both papers needs a sentence of each,
            # and each abstract must write the names it gives them (their own labels are no
            # longer the question's to allow: RACO is not FB-PbRL's)
            other = next(p for p in pair if p.id != sup.paper_id)
            second = index.best([other], text, vec)
            own = allowed - flat_words(" ".join(p.label for p in pair))
            ok = second is not None and second.score >= threshold and not any(
                invented_names(said, [p], own) for p in pair)
            also = [(other, second)] if ok and second is not None else []
        if not ok:
            if drop_unsupported:
                continue
            sentences.append(AnswerSentence(text, (), False))
            parts.append(text)
            continue
        assert sup is not None
        marker = marker_of.setdefault(sup.paper_id, max(marker_of.values(), default=0) + 1)
        paper = papers[sup.paper_id]
        citations.append(citation(marker, paper, sup))
        markers = [marker]
        for other, ev in also:
            markers.append(marker_of.setdefault(other.id, max(marker_of.values(), default=0) + 1))
            citations.append(citation(markers[-1], other, ev))
        sentences.append(AnswerSentence(text, tuple(markers), True))
        parts.append(f"{text} " + "".join(f"[{m}]" for m in markers))
    return " ".join(parts), tuple(citations), tuple(sentences)


# a sentence about both compared papers ("Both papers ...", "They both ...", "RFM and PQL
# are ...") that contrasts nothing: each paper must state it
_CONTRAST = re.compile(r"\b(?:differ\w*|whereas|while|unlike|contrast|but|however|instead|"
                       r"rather|other hand|respectively|than)\b", re.IGNORECASE)


def joint_claim(text: str, labels: tuple[str, str]) -> str | None:
    """What `text` says of both papers `labels` (the sentence after its subject), or None when
    it is no such claim: its subject is "both", "they", "the two ..." or the two names joined
    by "and", and it contrasts nothing."""
    a, b = (re.escape(x) for x in labels)
    subject = re.match(r"\s*(?:(?:both|the two|these two|they|each)\b|(?:the\s+)?(?:" + a + r")"
                       r"(?:\s*\([^)]*\))?\s+and\s+(?:" + b + r")\b|(?:the\s+)?(?:" + b + r")"
                       r"(?:\s*\([^)]*\))?\s+and\s+(?:" + a + r")\b)", text, re.IGNORECASE)
    # "both" of the papers, not of two things one paper does ("on both vision-centric and
    # vision-language benchmarks")
    shared = re.search(r"\bboth\s+(?:papers|works|studies|methods|approaches|frameworks|models|"
                       r"pipelines|systems|techniques|algorithms|of them)\b|\b(?:they|which|that|"
                       r"are|do|can|were)\s+both\b", text, re.IGNORECASE)
    if not (subject or shared) or _CONTRAST.search(text):
        return None
    return text[subject.end():] if subject else text


def looked_here(paper: Paper, question: str, index: SentenceIndex, marker: int = 1) -> Citation:
    """For 'not stated' answers: the paper that was searched, with its closest sentence."""
    return citation(marker, paper, index.rank(paper, question)[0], supported=False)
