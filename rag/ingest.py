"""Seeds -> chunks -> vectors -> Chroma, incrementally and idempotently.

A paper whose hash (its text, label and the index settings) is unchanged is never embedded
again; an edited one has its chunks replaced; a removed one is deleted. New chunks are
written before stale ones are deleted, so a killed ingest leaves a searchable index.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from rag.chunk import chunk_paper
from rag.config import Settings
from rag.corpus import load_corpus
from rag.embed import Embedder
from rag.errors import InputError
from rag.store import Store
from rag.types import Chunk, Paper

log = logging.getLogger(__name__)

SCHEMA = "4"  # bump when chunk metadata, cleaning or the label algorithm changes: forces a re-embed


@dataclass(frozen=True)
class IngestReport:
    papers: int
    added: int
    updated: int
    removed: int
    unchanged: int
    chunks_embedded: int
    chunks_total: int
    seconds: float
    warnings: tuple[str, ...]

    def summary(self) -> str:
        return (f"{self.papers} papers: {self.added} added, {self.updated} updated, "
                f"{self.removed} removed, {self.unchanged} unchanged; "
                f"{self.chunks_embedded} chunks embedded, {self.chunks_total} in the index "
                f"({self.seconds:.1f} s)")


def fingerprint(settings: Settings) -> str:
    c = settings.chunk
    return f"{SCHEMA}|{settings.embed.model}|{c.max_words}|{c.overlap_sentences}"


def paper_hash(paper: Paper, fp: str) -> str:
    key = "\x1f".join([fp, paper.id, paper.label, paper.source, paper.text])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def plan(papers: list[Paper], settings: Settings) -> dict[str, list[Chunk]]:
    return {p.id: chunk_paper(p, settings.chunk.max_words, settings.chunk.overlap_sentences)
            for p in papers}


def ingest(settings: Settings, store: Store, embedder: Embedder, seeds: Path | None = None,
           progress: bool = False, batch_chunks: int = 256) -> IngestReport:
    """Bring the index in line with the seed folder; raises CorpusError before any write."""
    if batch_chunks <= 0:
        raise InputError(f"batch_chunks must be > 0, got {batch_chunks}")
    t0 = time.perf_counter()
    corpus = load_corpus(seeds or settings.paths.seeds)
    papers = {p.id: p for p in corpus.papers}
    fp = fingerprint(settings)
    hashes = {pid: paper_hash(p, fp) for pid, p in papers.items()}
    chunks = plan(list(papers.values()), settings)

    stored_ids: dict[str, set[str]] = defaultdict(set)
    stored_hashes: dict[str, set[str]] = defaultdict(set)
    for s in store.manifest():
        stored_ids[s.chunk.paper_id].add(s.chunk.id)
        stored_hashes[s.chunk.paper_id].add(s.paper_hash)

    todo = [pid for pid in papers
            if stored_hashes.get(pid) != {hashes[pid]}
            or stored_ids.get(pid) != {c.id for c in chunks[pid]}]
    gone = sorted(set(stored_ids) - set(papers))
    added = sum(1 for pid in todo if pid not in stored_ids)

    pending = [c for pid in todo for c in chunks[pid]]
    bar = tqdm(total=len(pending), unit="chunk", desc="embedding", disable=not progress)
    for i in range(0, len(pending), batch_chunks):
        batch = pending[i: i + batch_chunks]
        vectors = embedder.embed([c.text for c in batch])
        store.upsert(batch, vectors, papers, hashes)
        bar.update(len(batch))
        log.info("stored %d/%d chunks", i + len(batch), len(pending))
    bar.close()
    stale = [cid for pid in todo for cid in stored_ids.get(pid, set())
             if cid not in {c.id for c in chunks[pid]}]
    stale += [cid for pid in gone for cid in stored_ids[pid]]
    store.delete(sorted(stale))
    report = IngestReport(
        papers=len(papers), added=added, updated=len(todo) - added, removed=len(gone),
        unchanged=len(papers) - len(todo), chunks_embedded=len(pending),
        chunks_total=store.count(), seconds=time.perf_counter() - t0,
        warnings=corpus.warnings)
    log.info(report.summary())
    return report


def is_stale(settings: Settings, store: Store, seeds: Path | None = None) -> bool:
    """True when an ingest would change anything (cheap: no embedding)."""
    corpus = load_corpus(seeds or settings.paths.seeds)
    fp = fingerprint(settings)
    want = {p.id: paper_hash(p, fp) for p in corpus.papers}
    have: dict[str, set[str]] = defaultdict(set)
    for s in store.manifest():
        have[s.chunk.paper_id].add(s.paper_hash)
    return set(want) != set(have) or any(have[k] != {v} for k, v in want.items())
