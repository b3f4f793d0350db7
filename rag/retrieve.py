"""Hybrid search: dense (Chroma, cosine) + keyword (BM25 via bm25s), fused by reciprocal rank.

Exact names and numbers ("SVOO", "1.93") are found by the keyword side, paraphrases by the
dense side. The BM25 index is built in memory from the store's own documents, so an
embedded index and a Chroma server behave the same.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.config import RetrieveSettings
from rag.embed import Embedder
from rag.errors import InputError
from rag.store import Store
from rag.types import Chunk, Hit, Paper

log = logging.getLogger(__name__)

_STOP = frozenset("""a an and are as at be by can do does did for from how in into is it its
of on or that the their them these this those to was were what when where which who why with
we our paper papers use uses used using about any there than then they does do has have had
not no yes also more most such via vs versus me my i you your tell show give list find""".split())
_TOKEN = re.compile(r"\d+(?:\.\d+)+|[a-z0-9]+(?:[-@][a-z0-9]+)*")


def tokenize(text: str) -> list[str]:
    """Lowercased word, name and number tokens; hyphenated names also yield their parts."""
    return [tok for word in text.split() for tok in _word_tokens(word)]


@functools.lru_cache(maxsize=1 << 18)
def _word_tokens(word: str) -> tuple[str, ...]:
    """The tokens of one whitespace-free word (no token spans whitespace, and lowercasing
    is per word), cached: a 100k-paper corpus repeats its words ~40 million times."""
    out: list[str] = []
    for tok in _TOKEN.findall(word.lower()):
        if tok in _STOP:
            continue
        out.append(tok)
        if "-" in tok or "@" in tok:
            out.extend(p for p in re.split(r"[-@]", tok) if p and p not in _STOP)
    return tuple(out)


_RUN = re.compile(r"[\w@-]+")  # the maximal runs a name's own boundaries (?<![\w@-]) cut at


def _first_run(name: str) -> str:
    """The run a name starts with, or "" when it starts with another character: wherever the
    name occurs between boundaries, this run occurs as a whole run of the text."""
    m = _RUN.match(name)
    return m.group() if m else ""


_COINED = re.compile(r"(?<![\w@-])[A-Za-z][\w@]*(?:-[\w@]+)*(?![\w@-])")


def coined_names(paper: Paper) -> set[str]:
    """Name-like tokens of a paper: its label and words like SSL4RL, DroneDINO, leak@k."""
    names = {paper.label} if len(paper.label.split()) <= 3 else set()
    for tok in _COINED.findall(paper.clean):
        inner = tok[1:]
        if len(tok) < 3 or inner.islower():  # no capital after the first letter: a plain word
            continue
        caps = sum(c.isupper() for c in tok)
        if len(tok) >= 3 and (caps >= 2 or any(c.isdigit() for c in inner) or "@" in tok) \
                and not tok.isdigit() and any(c.isupper() for c in inner):
            names.add(tok)
    return names


def name_index(papers: list[Paper]) -> dict[str, str]:
    """lowercased name -> paper id, for names that occur in exactly one paper."""
    owners: dict[str, set[str]] = defaultdict(set)
    for p in papers:
        for n in coined_names(p):
            owners[n.lower()].add(p.id)
    # A distinctive name can still be mentioned in passing elsewhere. Only names with one
    # owner can still be dropped, and a name can only occur where its first run is a run of
    # the text: look those up instead of trying every name on every paper.
    by_run: dict[str, list[str]] = defaultdict(list)
    for n, ids in owners.items():
        if len(ids) == 1:
            by_run[_first_run(n)].append(n)
    for p in papers:
        low = p.clean.lower()
        for run in {*_RUN.findall(low), ""}:
            for n in by_run.get(run, ()):
                ids = owners[n]
                if p.id not in ids and len(ids) == 1 and re.search(
                        r"(?<![\w@-])" + re.escape(n) + r"(?![\w@-])", low):
                    ids.add(p.id)
    index = {n: next(iter(ids)) for n, ids in owners.items() if len(ids) == 1}
    labels: dict[str, list[str]] = defaultdict(list)
    for p in papers:  # a paper's own label names it, even where others mention it in passing
        if len(p.label.split()) <= 3:
            labels[p.label.lower()].append(p.id)
    index.update({n: ids[0] for n, ids in labels.items() if len(ids) == 1})
    return index


_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+")  # a query's 1.93 is stated where this finds 1.93


@dataclass(frozen=True)
class Scored:
    chunk: Chunk
    rank: int
    score: float


class Retriever:
    """Searches one store; call `refresh()` after an ingest to pick up new chunks."""

    def __init__(self, settings: RetrieveSettings, store: Store, embedder: Embedder) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self._lock = threading.Lock()
        self._loaded = False
        self._chunks: list[Chunk] = []
        self._papers: dict[str, Paper] = {}
        self._bm25: Any = None
        self._names: dict[str, str] = {}
        self._names_by_run: dict[str, list[str]] = {}
        self._numbers: dict[str, set[str]] = {}  # decimal number -> the papers that state it
        self._wholes: dict[str, Chunk] = {}  # paper id -> its whole-abstract chunk
        self._rows: dict[str, list[int]] = {}  # paper id -> its chunks' rows in the BM25 index

    def refresh(self) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it forces DEBUG on import

        with self._lock:
            chunks, listed = self.store.chunks_and_papers()  # one pass over the collection
            papers = {p.id: p for p in listed}
            bm25 = bm25s.BM25()
            if chunks:  # token ids as they come (a token string per word would be ~1 GB at 100k)
                vocab: dict[str, int] = {}
                ids = [[vocab.setdefault(t, len(vocab)) for t in tokenize(
                    f"{papers[c.paper_id].label if c.paper_id in papers else ''} {c.text}")
                    or ["_"]] for c in chunks]
                bm25.index((ids, vocab), show_progress=False)
                del ids
            rows: dict[str, list[int]] = defaultdict(list)
            for i, c in enumerate(chunks):
                rows[c.paper_id].append(i)
            numbers: dict[str, set[str]] = defaultdict(set)
            for p in papers.values():
                for num in _DECIMAL.findall(p.clean):
                    numbers[num].add(p.id)
            names = name_index(list(papers.values()))
            by_run: dict[str, list[str]] = defaultdict(list)
            for n in names:
                by_run[_first_run(n)].append(n)
            self._chunks, self._papers, self._bm25 = chunks, papers, bm25
            self._wholes = {c.paper_id: c for c in chunks if c.ordinal == 0}
            self._rows, self._numbers = dict(rows), dict(numbers)
            self._names, self._names_by_run = names, dict(by_run)
            self._loaded = True
            log.info("retriever loaded %d chunks of %d papers", len(chunks), len(papers))

    def _ensure(self) -> None:
        if not self._loaded:
            self.refresh()

    @property
    def papers(self) -> dict[str, Paper]:
        self._ensure()
        return self._papers

    @property
    def names(self) -> dict[str, str]:
        """Lowercased distinctive name -> paper id (see `name_index`)."""
        self._ensure()
        return self._names

    def named_papers(self, text: str) -> list[str]:
        """Paper ids whose distinctive names (or exact decimal numbers, like 1.93) occur in
        `text`, in order of appearance."""
        self._ensure()
        found: list[tuple[int, str]] = []
        low = text.lower()
        for m in re.finditer(r"(?<![\w.])\d+\.\d+(?![\d])", low):
            owners = self._numbers.get(m.group(), set())  # (a paper's whole number, see refresh)
            if len(owners) == 1:
                found.append((m.start(), next(iter(owners))))
        for run in {*_RUN.findall(low), ""}:  # only names whose first run the text has
            for name in self._names_by_run.get(run, ()):
                hit = re.search(r"(?<![\w@-])" + re.escape(name) + r"(?![\w@-])", low)
                if hit:
                    found.append((hit.start(), self._names[name]))
        return list(dict.fromkeys(pid for _, pid in sorted(found)))

    def keyword(self, query: str, k: int, paper_ids: set[str] | None = None) -> list[Scored]:
        self._ensure()
        toks = tokenize(query)
        if not toks or not self._chunks:
            return []
        scores = np.asarray(self._bm25.get_scores(toks))
        if paper_ids is None:
            rows = np.flatnonzero(scores > 0)
        else:
            rows = np.asarray(sorted(r for pid in paper_ids for r in self._rows.get(pid, ())),
                              dtype=np.int64)
            rows = rows[scores[rows] > 0]
        if len(rows) > k:  # only the top k need sorting (ties at the k-th score all kept)
            kth = np.partition(scores[rows], len(rows) - k)[len(rows) - k]
            rows = rows[scores[rows] >= kth]
        rows = rows[np.lexsort((rows, -scores[rows]))][:k]  # best first, ties by index
        return [Scored(self._chunks[int(i)], n + 1, float(scores[i]))
                for n, i in enumerate(rows)]

    def dense(self, query: str, k: int, paper_ids: set[str] | None = None,
              vector: np.ndarray | None = None) -> list[Scored]:
        self._ensure()
        vec = self.embedder.embed_one(query) if vector is None else vector
        matches = self.store.query(vec, k, sorted(paper_ids) if paper_ids else None)
        return [Scored(m.chunk, i + 1, m.similarity) for i, m in enumerate(matches)]

    def search(self, query: str, k: int | None = None, group: bool = False,
               paper_ids: set[str] | None = None, mode: str | None = None,
               vector: np.ndarray | None = None) -> list[Hit]:
        """Top `k` chunks (or papers, with `group`), best first, fused by reciprocal rank;
        `vector` is the query's embedding when the caller has it already."""
        k = self.settings.k if k is None else k
        if k <= 0:
            raise InputError(f"k must be > 0, got {k}")
        if not query.strip():
            raise InputError("the query is empty; type some words to search for")
        mode = mode or self.settings.mode
        if mode not in ("hybrid", "dense", "bm25"):
            raise InputError(f"mode must be hybrid, dense or bm25, got {mode!r}")
        s = self.settings
        dense = self.dense(query, s.dense_k, paper_ids, vector) if mode != "bm25" else []
        keyword = self.keyword(query, s.bm25_k, paper_ids) if mode != "dense" else []
        fused: dict[str, float] = defaultdict(float)
        chunk_of: dict[str, Chunk] = {}
        dense_sim = {d.chunk.id: d.score for d in dense}
        bm25_rank = {b.chunk.id: b.rank for b in keyword}
        for lst, w in ((dense, s.dense_weight), (keyword, s.bm25_weight)):
            for item in lst:
                fused[item.chunk.id] += w / (s.rrf_k + item.rank)
                chunk_of[item.chunk.id] = item.chunk
        if mode == "hybrid":  # an exact name in the query outranks everything else
            wholes = self._wholes
            for i, pid in enumerate(self.named_papers(query)):
                if pid in wholes and (paper_ids is None or pid in paper_ids):
                    c = next((cid for cid in sorted(fused, key=lambda x: -fused[x])
                              if chunk_of[cid].paper_id == pid), wholes[pid].id)
                    chunk_of.setdefault(c, wholes[pid])
                    fused[c] += s.name_weight / (s.rrf_k + i + 1)
        ranked = sorted(fused, key=lambda cid: (-fused[cid], cid))
        if group:
            seen: set[str] = set()
            best = []
            for cid in ranked:
                pid = chunk_of[cid].paper_id
                if pid not in seen:
                    seen.add(pid)
                    best.append(cid)
            ranked = best
        papers = self.papers
        return [Hit(chunk=chunk_of[cid], score=fused[cid], rank=i + 1,
                    label=papers[chunk_of[cid].paper_id].label
                    if chunk_of[cid].paper_id in papers else "",
                    dense_score=dense_sim.get(cid), bm25_rank=bm25_rank.get(cid))
                for i, cid in enumerate(ranked[:k])]

    def best_similarity(self, query: str) -> float:
        """Cosine similarity of the closest chunk: the off-topic signal."""
        d = self.dense(query, 1)
        return d[0].score if d else 0.0
