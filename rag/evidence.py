"""One evidence scorer: how well an abstract sentence supports or answers a piece of text.

score = 0.5 * MiniLM cosine + 0.5 * share of the text's content words found in the
sentence + 0.05 per shared name or number (at most 3) + 0.10 when the two share a run of
four content words in order: text copied from the sentence. (MiniLM put another paper's
"Vision-language models (VLMs) have shown ..." above the sentence an answer had copied
"suffer from repetitive generation and degraded visual grounding" from.) An abbreviation
the collection defines ("reinforcement learning (RL)") matches its long form either way:
"offline RL" in a sentence has the words of "offline reinforcement learning". Extractive
answers (rank a paper's sentences against a question), citation checking (find the sentence
behind an answer sentence) and the comparison table (sentences against a description of an
aspect) all use it, so one threshold means the same thing everywhere. A number the paper
never states vetoes that paper as support for a claim containing it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from rag.acronyms import defined
from rag.chunk import sentence_spans
from rag.embed import Embedder
from rag.evaluate import numbers
from rag.retrieve import content_words, tokenize
from rag.types import Paper

W_SEMANTIC = 0.5
W_LEXICAL = 0.5
W_SHARED = 0.05  # per shared name or number, at most MAX_SHARED of them
MAX_SHARED = 3
# for a shared run of RUN content words in order (stop words left out). Not fitted: twice a
# shared name; replayed over the stop-34 dev answers (445 sentences, first 227 dev rows) it
# moved 1 citation, to the gold paper
W_RUN = 0.10
RUN = 4

# abbreviation (lowercased, as tokenize gives it) -> the token sets of its long forms
Abbreviations = Mapping[str, tuple[frozenset[str], ...]]
_DEFINES = re.compile(r"\(\s*([A-Za-z][\w-]*[A-Z][\w-]*)\s*[),;]")

# a link's words are no content: "rl-bandits-lab" in FB-PbRL's code link is not a word about
# bandits, "models hosted on https://huggingface.co/..." names no model. What a link is, is:
# one to a code host reads as "code repository link" ("Where is the code for SSL4RL?" is
# answered by "Our implementation is open-sourced at https://github.com/..."), any other as "link"
_URL = re.compile(r"\b(?:https?://|www\.)\S+")
CODE_HOSTS = ("github.com", "gitlab.com", "bitbucket.org", "codeberg.org")


def _link_words(m: re.Match[str]) -> str:
    return " code repository link " if any(h in m.group(0).lower() for h in CODE_HOSTS) \
        else " link "

_NAMEISH = re.compile(r"\b[A-Za-z]*[A-Z][A-Za-z]*[A-Z0-9][\w@-]*\b|\b\w+-\w+\b")


@dataclass(frozen=True)
class Evidence:
    """One sentence of one paper and how well it matches the text it was scored against."""

    paper_id: str
    start: int  # offsets in Paper.clean
    end: int
    score: float


def names(text: str) -> set[str]:
    """Name-like tokens (SSL4RL, leak@k, flow-matching), lowercased."""
    return {m.group().lower() for m in _NAMEISH.finditer(text)}


def paper_numbers(paper: Paper) -> set[str]:
    return numbers(paper.clean) | {m.group() for m in re.finditer(r"\d+(?:\.\d+)?", paper.clean)}


def abbreviations(papers: Iterable[Paper]) -> dict[str, tuple[frozenset[str], ...]]:
    """The abbreviations the abstracts define, "long form (ABBR)" (acronyms.defined), with the
    tokens of each long form; not one an abstract also writes in lower case as a word
    ("RULE" beside "update rule")."""
    papers = list(papers)
    lower = {w for p in papers for w in re.findall(r"(?<![\w-])[a-z][a-z0-9]*(?![\w-])", p.clean)}
    found: dict[str, set[frozenset[str]]] = {}
    for p in papers:
        for m in _DEFINES.finditer(p.clean):
            short = m.group(1)
            core = short[:-1] if short.endswith("s") and short[:-1].isupper() else short
            key = core.lower()
            if key in lower:
                continue
            long_form = defined(core, p)
            words = frozenset(tokenize(long_form[0])) - {key} if long_form else frozenset()
            if words:
                found.setdefault(key, set()).add(words)
    out = {k: tuple(sorted(v, key=sorted)) for k, v in found.items()}
    return out | {k + "s": v for k, v in out.items() if not k.endswith("s")}  # "LLMs"


class SentenceIndex:
    """Sentence spans and embeddings of each paper's abstract, computed once per paper, and
    the scorer over them. `corpus` gives the indexed papers, whose abbreviations the scorer
    reads (none without it)."""

    def __init__(self, embedder: Embedder,
                 corpus: Callable[[], Mapping[str, Paper]] | None = None) -> None:
        self.embedder = embedder
        self.corpus = corpus
        self._cache: dict[str, tuple[list[tuple[int, int]], np.ndarray]] = {}
        self._lock = threading.Lock()
        self._abbr: tuple[object, Abbreviations] = (None, {})

    def abbreviations(self) -> Abbreviations:
        """The corpus's abbreviations, read again when its paper map changes (an upload)."""
        if self.corpus is None:
            return {}
        papers = self.corpus()
        key = (id(papers), len(papers))
        if self._abbr[0] != key:
            self._abbr = (key, abbreviations(papers.values()))
        return self._abbr[1]

    def get(self, paper: Paper) -> tuple[list[tuple[int, int]], np.ndarray]:
        key = f"{paper.id}:{paper.content_hash}"
        with self._lock:
            if key not in self._cache:
                spans = sentence_spans(paper.clean)
                vecs = self.embedder.embed([paper.clean[s:e] for s, e in spans])
                self._cache[key] = (spans, vecs)
            return self._cache[key]

    def rank(self, paper: Paper, text: str, vec: np.ndarray | None = None) -> list[Evidence]:
        """The paper's sentences scored against `text`, best first (never empty)."""
        vec = self.embedder.embed_one(text) if vec is None else vec
        spans, vecs = self.get(paper)
        words, nm, nums, grams = set(tokenize(text)), names(text), numbers(text), runs(text)
        abbr = self.abbreviations()
        out = [Evidence(paper.id, s, e, score(paper.clean[s:e], float(sim), words, nm, nums, abbr,
                                              grams))
               for (s, e), sim in zip(spans, vecs @ vec, strict=True)]
        return sorted(out, key=lambda x: -x.score) or [Evidence(paper.id, 0, len(paper.clean), 0.0)]

    def best(self, papers: list[Paper], text: str, vec: np.ndarray | None = None,
             veto_numbers: bool = True) -> Evidence | None:
        """The best sentence for `text` over `papers`; with `veto_numbers`, a paper that lacks
        a number `text` states cannot supply it."""
        nums = numbers(text)
        vec = self.embedder.embed_one(text) if vec is None else vec
        best: Evidence | None = None
        for paper in papers:
            if veto_numbers and nums - paper_numbers(paper):
                continue
            top = self.rank(paper, text, vec)[0]
            if best is None or top.score > best.score:
                best = top
        return best


def runs(text: str) -> frozenset[tuple[str, ...]]:
    """The runs of RUN consecutive content words of `text` (stop words left out, a hyphenated
    word one word: "vision-language models" is two, not the four tokens tokenize gives)."""
    words = content_words(text)
    return frozenset(tuple(words[i:i + RUN]) for i in range(len(words) - RUN + 1))


def score(sentence: str, similarity: float, words: set[str], text_names: set[str],
          text_numbers: set[str], abbr: Abbreviations | None = None,
          text_runs: frozenset[tuple[str, ...]] = frozenset()) -> float:
    """The shared formula (see the module docstring); `words` are the text's content words.
    With `abbr`, a text word is also found when it is an abbreviation whose long form the
    sentence writes out, or a word of the long form of an abbreviation the sentence uses.
    A link in the sentence counts only as what it is (_link_words)."""
    sentence = _URL.sub(_link_words, sentence)
    said = set(tokenize(sentence))
    copied = bool(text_runs) and not text_runs.isdisjoint(runs(sentence))
    if abbr:
        seen = said | {w for t in said for form in abbr.get(t, ()) for w in form}
        hits = sum(1 for w in words if w in seen or any(f <= said for f in abbr.get(w, ())))
    else:
        hits = len(words & said)
    lexical = hits / len(words) if words else 0.0
    shared = (text_names & names(sentence)) | (text_numbers & numbers(sentence))
    return W_SEMANTIC * similarity + W_LEXICAL * lexical + \
        W_SHARED * min(len(shared), MAX_SHARED) + W_RUN * copied
