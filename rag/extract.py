"""Extractive answers: "which paper(s) ...?" is answered by retrieval itself, and a
question the model declined is answered by the abstract's own sentence (`quote`).

A paper-finding question needs the matching papers and the sentence of each that matches,
not prose: composing that from the index is instant, exact and always grounded, while a
0.5B model mostly replies with a bare "[1]" to it. The same composer turns such a bare
marker reply into an answer.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from rag import cover
from rag.corpus import method_name
from rag.evidence import Evidence, SentenceIndex
from rag.guard import NAME
from rag.types import Answer, AnswerSentence, Citation, Paper

_DEFINITION = re.compile(r"^\s*(?:what|who)\s+(?:is|are|was)\s+(?:the\s+)?(?:[\w@.-]+\s*){1,4}"
                         r"(?:\s*\([\w-]+\))?\s*\??\s*$|\bstand for\b|\bwhat (?:is|are) .{1,40} used for\b",
                         re.IGNORECASE)


def paper_name(p: Paper) -> str:
    """How an answer names a paper: the method's name when its abstract gives one, else its
    generated title (checked against the abstract at ingest), else the label phrase."""
    return p.label if method_name(p.text) else (p.title or p.label)


# a line's lead as the answers write it: a bullet, then "Name (id): " (the name may hold a
# colon: "... in LDVLMs: A Comprehensive Study (004-11): "); translate keeps it untranslated,
# gloss leaves the name as written
LEAD = re.compile(r"^\s*(?:[-*]\s+)?(?:[^\n()\[\]]{1,120}? \([\w.-]+\):\s+)?")


def names_paper(text: str, p: Paper) -> bool:
    """Whether `text` names paper `p`: its id, label or name, or a coined word of them
    ("DroneDINO" of "DroneDINO: A Unified Framework for ...")."""
    own = {p.id, p.label, paper_name(p)}
    own |= {m.group(0) for x in (p.label, paper_name(p)) for m in NAME.finditer(x)
            if len(m.group(0)) >= 4}
    low = text.lower()
    return any(x and x.lower() in low for x in own)


def name_first(answer: Answer, papers: dict[str, Paper], question: str) -> Answer:
    """An answer drawn from one paper that neither it nor `question` names starts with that
    paper's name and id, as a quoted answer does ("VIA-SD (004-19): ..."): a question that
    describes a paper instead of naming it ("the draft-and-check paper where ...") learns
    which one it is, where the model had written "The paper states that the draft-and-check
    paper ..."."""
    ids = {c.paper_id for c in answer.citations}
    if answer.abstained or len(ids) != 1 or next(iter(ids)) not in papers:
        return answer
    paper = papers[next(iter(ids))]
    # (a technical word of the abstract in the question, "POMDP", "CRPS", "MATH-500", names
    # no paper: counting the coined words that fewer than three abstracts write as its name
    # kept 9 dev rows that describe their paper, q204 and q656 among them, unnamed)
    if names_paper(answer.text, paper) or names_paper(question, paper):
        return answer
    lead = f"{paper_name(paper)} ({paper.id}): "
    sentences = answer.sentences
    if sentences:
        sentences = (AnswerSentence(lead + _capital(sentences[0].text), sentences[0].markers,
                                    sentences[0].supported),) + sentences[1:]
    return replace(answer, text=lead + _capital(answer.text.lstrip()), sentences=sentences)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def is_definition(question: str) -> bool:
    """'What is X?', 'What does X stand for?': answered by what the paper contributes."""
    last = re.split(r"(?<=[.!:;])\s+", question.strip())[-1]  # "Ignore that. Then: what is X?"
    return bool(_DEFINITION.search(last)) or bool(_DEFINITION.search(question.strip()))


SECOND = 0.8  # a second matching sentence is quoted when it scores >= 0.8x the best (dev)
_CONTRIBUTION = re.compile(r"\b(?:we|this (?:paper|work))\s+(?:propose|introduce|present|develop|"
                           r"derive|design|prove|show|study|establish|find)s?\b"
                           # or in the authors' own voice: "Finally, we formalize", "Our method
                           # applies", "This work revisits"
                           r"|^(?:[\w ,-]{0,30},\s*)?(?:we|our|this (?:paper|work))\b",
                           re.IGNORECASE)


def introduces(sentence: str) -> bool:
    """Whether the sentence is the authors' own ("we propose", "our method applies")."""
    return bool(_CONTRIBUTION.search(sentence))


def ranked_sentences(paper: Paper, question: str, qvec: np.ndarray,
                     index: SentenceIndex) -> list[tuple[int, int, float]]:
    """The paper's sentences as (start, end, score) against the question, best first."""
    return [(ev.start, ev.end, ev.score) for ev in index.rank(paper, question, qvec)]


# a paper's topic score: its three best sentences' scores, weighted. An abstract about the
# topic matches it in more than one sentence, a passing mention in one
TOPIC_WEIGHTS = (1.0, 0.5, 0.25)


def paper_scores(papers: list[Paper], question: str, index: SentenceIndex,
                 qvec: np.ndarray | None = None, *weights: tuple[float, ...]
                 ) -> list[list[tuple[Paper, float]]]:
    """For each of `weights`, each paper with the weighted sum of its best sentences'
    scores, best first: (1.0,) is its best sentence's score, TOPIC_WEIGHTS its topic score.
    The sentences are ranked once for all of them."""
    qvec = index.embedder.embed_one(question) if qvec is None else qvec
    ranks = [(p, index.rank(p, question, qvec)) for p in papers]
    return [sorted(((p, sum(w * e.score for w, e in zip(ws, r, strict=False))) for p, r in ranks),
                   key=lambda x: -x[1]) for ws in weights]


def compose(question: str, papers: list[Paper], index: SentenceIndex,
            qvec: np.ndarray | None = None, complement_floor: float = 0.20
            ) -> tuple[str, tuple[Citation, ...], tuple[AnswerSentence, ...]]:
    """'Label (id): matching sentence [n]' for each paper, numbered in the given order."""
    qvec = index.embedder.embed_one(question) if qvec is None else qvec
    parts: list[str] = []
    citations: list[Citation] = []
    sentences: list[AnswerSentence] = []
    for n, p in enumerate(papers, start=1):
        ranked = ranked_sentences(p, question, qvec, index)
        picks = ranked[:1]
        if len(papers) == 1:  # one paper: what it contributes, and the two sentences that
            # match the question best (a description often spans two of them)
            own = [r for r in ranked if introduces(p.clean[r[0]:r[1]])]  # best first
            contribution = own[0] if own else (ranked[1] if len(ranked) > 1 else None)
            # ... and the first sentence in the authors' voice, where the abstract says what
            # the paper does ("This work revisits a policy optimization method with reverse
            # KL ..."), when the best-matching one is another (dev find rows: 99 -> 100 of 117)
            first_own = min(own, default=None)
            picks += [r for r in ranked[1:2] if r[2] >= SECOND * ranked[0][2]]
            for extra in (contribution, first_own):
                if extra and extra not in picks:
                    picks.append(extra)
            said = " ".join(p.clean[s:e] for s, e, _ in picks)
            # the parts of the question those sentences leave out
            picks += [(ev.start, ev.end, ev.score) for ev in cover.complement(
                p, question, said, index, qvec, floor=complement_floor,
                taken=tuple((s, e) for s, e, _ in picks))]
        picks = sorted(picks)
        quote = " ".join(p.clean[s:e] for s, e, _ in picks)
        line = f"{paper_name(p)} ({p.id}): {quote}"
        for s, e, score in picks:
            citations.append(Citation(n, p.id, p.label, f"{p.id}#0", p.clean[s:e], s, e,
                                      True, round(score, 3)))
        sentences.append(AnswerSentence(line, (n,), True))
        parts.append(f"{line} [{n}]")
    sep = "\n" if len(papers) > 1 else ""
    lead = "These papers match:\n" if len(papers) > 1 else ""
    return lead + sep.join(("- " + x if len(papers) > 1 else x) for x in parts), \
        tuple(citations), tuple(sentences)


def quote(paper: Paper, picks: list[Evidence], marker: int = 1
          ) -> tuple[str, tuple[Citation, ...], tuple[AnswerSentence, ...]]:
    """'Label (id): the picked sentences [n]': the abstract answering in its own words."""
    picks = sorted(picks, key=lambda e: e.start)
    line = f"{paper_name(paper)} ({paper.id}): " + " ".join(paper.clean[e.start:e.end] for e in picks)
    citations = tuple(Citation(marker, paper.id, paper.label, f"{paper.id}#0",
                               paper.clean[e.start:e.end], e.start, e.end, True, round(e.score, 3))
                      for e in picks)
    return f"{line} [{marker}]", citations, (AnswerSentence(line, (marker,), True),)


def choose(order: list[Paper], ranked: list[tuple[Paper, float]], kind: str, named: list[str],
           floor: float = 0.15, gap: float = 0.06, most: int = 7,
           topic: list[tuple[Paper, float]] | None = None,
           topic_floor: float = 0.30, topic_gap: float = 0.20,
           topic_relative: float = 0.65) -> list[Paper]:
    """Papers to list: for 'one' the retrieval winner (a named paper first); for 'many',
    named papers, then the best-scoring ones down to the list's knee: of the first `most`
    whose best sentence scores >= floor, the list ends at the largest drop between two
    neighbours when that drop is >= gap, else all of them. A fixed distance from the best
    one cut a topic's third paper when the first matched it very closely. With `topic`
    (the papers' topic scores, best first), the papers over its own knee are added, of
    those scoring >= topic_floor and >= topic_relative x the best one: a paper whose three
    sentences match the topic, under one whose single sentence matched it best (answer.list_*
    in config, fitted on the dev split)."""
    if not order:
        return []
    by_id = {p.id: p for p in order}
    first = [by_id[i] for i in named if i in by_id]
    if kind == "one":
        return first[:1] or order[:1]
    keep = _knee(ranked[:most], floor, gap)
    if topic:
        best = topic[0][1]
        keep += _knee([(p, sc) for p, sc in topic[:most] if sc >= topic_relative * best],
                      topic_floor, topic_gap)
    return list(dict.fromkeys(first + keep))[:most] or order[:1]


def _knee(ranked: list[tuple[Paper, float]], floor: float, gap: float) -> list[Paper]:
    """Of `ranked` (best first) those scoring >= floor, down to the largest drop between
    two neighbours when it is >= gap."""
    scored = [(p, sc) for p, sc in ranked if sc >= floor]
    keep = [p for p, _ in scored]
    if len(scored) > 1:
        drops = [scored[i][1] - scored[i + 1][1] for i in range(len(scored) - 1)]
        at = max(range(len(drops)), key=drops.__getitem__)
        if drops[at] >= gap:
            keep = keep[:at + 1]
    return keep
