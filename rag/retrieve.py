"""Hybrid search: dense (Chroma, cosine) + keyword (BM25 via bm25s), fused by reciprocal rank.

Exact names and numbers ("SVOO", "1.93") are found by the keyword side, paraphrases by the
dense side. The BM25 index is built in memory from the store's own documents, so an
embedded index and a Chroma server behave the same.
"""

from __future__ import annotations

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
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        if tok in _STOP:
            continue
        out.append(tok)
        if "-" in tok or "@" in tok:
            out.extend(p for p in re.split(r"[-@]", tok) if p and p not in _STOP)
    return out


_COINED = re.compile(r"(?<![\w@-])[A-Za-z][\w@]*(?:-[\w@]+)*(?![\w@-])")


def coined_names(paper: Paper) -> set[str]:
    """Name-like tokens of a paper: its label and words like SSL4RL, DroneDINO, leak@k."""
    names = {paper.label} if len(paper.label.split()) <= 3 else set()
    for tok in _COINED.findall(paper.clean):
        inner = tok[1:]
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
    for p in papers:  # a distinctive name can still be mentioned in passing elsewhere
        low = p.clean.lower()
        for n, ids in owners.items():
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

    def refresh(self) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it forces DEBUG on import

        with self._lock:
            chunks = self.store.chunks()
            papers = {p.id: p for p in self.store.papers()}
            bm25 = bm25s.BM25()
            if chunks:
                docs = [tokenize(f"{papers[c.paper_id].label if c.paper_id in papers else ''} "
                                 f"{c.text}") or ["_"] for c in chunks]
                bm25.index(docs, show_progress=False)
            self._chunks, self._papers, self._bm25 = chunks, papers, bm25
            self._names = name_index(list(papers.values()))
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
            owners = [p.id for p in self._papers.values()
                      if re.search(r"(?<![\w.])" + re.escape(m.group()) + r"(?!\d)", p.clean)]
            if len(owners) == 1:
                found.append((m.start(), owners[0]))
        for name, pid in self._names.items():
            hit = re.search(r"(?<![\w@-])" + re.escape(name) + r"(?![\w@-])", low)
            if hit:
                found.append((hit.start(), pid))
        return list(dict.fromkeys(pid for _, pid in sorted(found)))

    def keyword(self, query: str, k: int, paper_ids: set[str] | None = None) -> list[Scored]:
        self._ensure()
        toks = tokenize(query)
        if not toks or not self._chunks:
            return []
        scores = np.asarray(self._bm25.get_scores(toks))
        order = np.argsort(-scores, kind="stable")
        out: list[Scored] = []
        for i in order:
            if scores[i] <= 0 or len(out) >= k:
                break
            c = self._chunks[int(i)]
            if paper_ids is None or c.paper_id in paper_ids:
                out.append(Scored(c, len(out) + 1, float(scores[i])))
        return out

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
            wholes = {c.paper_id: c for c in self._chunks if c.ordinal == 0}
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
