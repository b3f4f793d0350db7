"""Code links: whether a question asks where a paper's code is, and the abstract sentence
that says so.

15 of the 57 seed abstracts give a link to their code or project page (`Paper.links`, found at
ingest) and one more says its code is on a project page without giving it. "Where is FedScar's
code?" is answered with that sentence, without the model (rag/finish.py), and "Which papers
(on X) share their code?" lists the papers whose abstracts offer it (rag/route.py,
rag/assistant.py).
"""

from __future__ import annotations

import re

from rag.chunk import sentence_spans
from rag.evidence import Evidence
from rag.extract import quote
from rag.types import AnswerSentence, Citation, Paper

# "Where can I find FedScar's implementation?", "Give me the repository link for Holmes", "Is
# its code public?": asks where the code is, which an abstract gives as a link or not at all.
# A license is no link ("Under which license is the code released?"). Fitted on dev
# (q644-q648, with q71 and q433 as the near misses a looser list took).
# "source" only as "source code": "Where is the source of its speedup?" asks no link
_CODE = r"(?:code|codes|codebase|source code|implementation|implementations)"
_LINK = re.compile(
    # GitHub as a code host, not its issues ("agents that resolve real GitHub issues", q386)
    r"\b(?:git(?:hub|lab)(?!\s+(?:issues?|stars?|actions?|copilot)\b)|repo|repository|urls?|"
    r"project (?:page|website)|home ?page)\b|"
    rf"\bwhere\b.*\b{_CODE}\b|\b{_CODE}\b.*\bwhere\b|\blinks?\b.*\b{_CODE}\b|"
    rf"\b{_CODE}\b.*\b(?:public|publicly|available|released|open[- ]sourced?|online|"
    r"downloadable)\b|"
    # ... or those words just before it: "release their code", "have public code"
    r"\b(?:public|publicly available|available|open[- ]source[ds]?|release[sd]?|releasing|"
    r"share[sd]?|sharing|publish(?:es|ed)?|provide[sd]?|providing|offer(?:s|ed)?)\s+"
    rf"(?:[\w-]+\s+){{0,2}}{_CODE}\b", re.IGNORECASE)
_LICENSE = re.compile(r"\blicen[cs]", re.IGNORECASE)


def asks_link(question: str) -> bool:
    """Whether `question` (English) asks where a paper's code or project page is."""
    return bool(_LINK.search(question)) and not _LICENSE.search(question)


_CODE_WORD = re.compile(rf"\b{_CODE}\b", re.IGNORECASE)


def names_code(question: str) -> bool:
    """Whether `question` says code ("Does the paper on X have public code?"), not just a
    repository ("From which public repository were the models drawn?" asks for a data source)."""
    return bool(_CODE_WORD.search(question))


# what a code question asks besides the code: its words less the code and availability words
# ("Which papers on video have public code?" -> "papers on video"; "Which papers release their
# code?" -> "papers", no topic)
_LINK_WORDS = re.compile(
    r"\b(?:source code|project (?:page|website)|home ?page|code|codes|codebase|source|"
    r"implementations?|repo|repos|repository|repositories|github|gitlab|urls?|links?|public|"
    r"publicly|available|availability|release|released|releases|open[- ]sourced?|online|"
    r"publish|publishes|published|is there|are there|"
    r"downloadable|where|have|has|give|gives|provide|provides|share|shares|with|their|its)\b",
    re.IGNORECASE)


def link_topic(question: str) -> str:
    """`question` less its code-link words: the topic a list of papers with code is about."""
    return " ".join(_LINK_WORDS.sub(" ", question).split())


# "Code and models are available on the project page.": code offered, with no link written
_CODE_OFFERED = re.compile(r"\b(?:code|codes|implementation|source code)\b.*\b(?:available|"
                           r"released|open[- ]sourced|public)\b", re.IGNORECASE)


def link_sentences(paper: Paper) -> list[tuple[int, int]]:
    """The spans of the abstract's sentences that hold one of its links (`Paper.links`, found
    at ingest) or say that its code is available, in reading order."""
    return [(s, e) for s, e in sentence_spans(paper.clean)
            if any(u in paper.clean[s:e] for u in paper.links) or
            _CODE_OFFERED.search(paper.clean[s:e])]


def listing(papers: list[Paper]) -> tuple[str, tuple[Citation, ...], tuple[AnswerSentence, ...]]:
    """'Label (id): the sentence with its link [n]' for each paper (extract.quote), numbered
    in order, under one lead line when there are several."""
    quoted = [quote(p, [Evidence(p.id, s, e, 1.0) for s, e in link_sentences(p)], n)
              for n, p in enumerate(papers, start=1)]
    if len(quoted) == 1:
        return quoted[0]
    text = "These papers make their code available:\n" + "\n".join(f"- {t}" for t, _, _ in quoted)
    return text, tuple(c for _, cs, _ in quoted for c in cs), \
        tuple(a for _, _, ss in quoted for a in ss)
