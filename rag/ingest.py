"""Seeds -> chunks -> vectors -> Chroma, incrementally and idempotently.

A paper whose hash (its text, label and the index settings) is unchanged is never embedded
again; an edited one has its chunks replaced; a removed one is deleted. New chunks are
written before stale ones are deleted, so a killed ingest leaves a searchable index.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from rag.chunk import chunk_paper
from rag.config import Settings
from rag.corpus import Corpus, load_corpus
from rag.embed import Embedder
from rag.errors import InputError
from rag.retrieve import write_index_cache
from rag.store import Store
from rag.types import Chunk, Paper

if TYPE_CHECKING:
    from rag.generate import Generator

Progress = Callable[[str, float], None]  # (stage: "embedding" | "titles" | "map", 0..1 done)

log = logging.getLogger(__name__)

SCHEMA = "5"  # bump when chunk metadata, cleaning or the label algorithm changes: forces a re-embed


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
    titles_generated: int = 0  # papers whose title cost a model call in this ingest
    titles_seconds: float = 0.0  # time spent on titles (model calls and the cache)
    atlas_seconds: float = 0.0  # time spent computing the map (0 when it was current)
    added_ids: tuple[str, ...] = ()  # the papers this ingest added
    files: tuple[str, ...] = ()  # uploads: the files saved into the uploads folder
    duplicates: tuple[str, ...] = ()  # uploads: abstracts skipped as already present

    def summary(self) -> str:
        out = (f"{self.papers} papers: {self.added} added, {self.updated} updated, "
               f"{self.removed} removed, {self.unchanged} unchanged; "
               f"{self.chunks_embedded} chunks embedded, {self.chunks_total} in the index "
               f"({self.seconds:.1f} s)")
        if self.titles_generated:
            out += f"; {self.titles_generated} titles written ({self.titles_seconds:.1f} s)"
        if self.atlas_seconds:
            out += f"; map computed ({self.atlas_seconds:.1f} s)"
        return out


def fingerprint(settings: Settings) -> str:
    c = settings.chunk
    return f"{SCHEMA}|{settings.embed.model}|{c.max_words}|{c.overlap_sentences}"


def paper_hash(paper: Paper, fp: str) -> str:
    key = "\x1f".join([fp, paper.id, paper.label, paper.source, paper.text])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def plan(papers: list[Paper], settings: Settings) -> dict[str, list[Chunk]]:
    return {p.id: chunk_paper(p, settings.chunk.max_words, settings.chunk.overlap_sentences)
            for p in papers}


def read_corpus(settings: Settings, seeds: Path | None = None) -> Corpus:
    """The seed folder, then the uploads folder: what an ingest indexes."""
    return load_corpus(seeds or settings.paths.seeds, settings.paths.uploads)


def ingest(settings: Settings, store: Store, embedder: Embedder, seeds: Path | None = None,
           progress: bool = False, batch_chunks: int = 256,
           generator: Generator | None = None, on_progress: Progress | None = None
           ) -> IngestReport:
    """Bring the index in line with the seed and uploads folders; raises CorpusError before
    any write. Titles come from the cache, else from `generator` when given (rag/titles.py);
    the map (rag/atlas.py) is computed again when the papers changed. `progress` draws tqdm
    bars (the CLI); `on_progress(stage, fraction)` reports to a caller (the browser)."""
    if batch_chunks <= 0:
        raise InputError(f"batch_chunks must be > 0, got {batch_chunks}")
    from rag.titles import assign_titles

    t0 = time.perf_counter()
    corpus = read_corpus(settings, seeds)
    papers = {p.id: p for p in corpus.papers}
    fp = fingerprint(settings)
    hashes = {pid: paper_hash(p, fp) for pid, p in papers.items()}
    chunks = plan(list(papers.values()), settings)
    cached = assign_titles(settings, papers.values(), None)  # the cache only: no model call
    papers = {pid: replace(p, title=cached.titles[pid][0], title_generated=cached.titles[pid][1])
              for pid, p in papers.items()}

    stored_ids: dict[str, set[str]] = defaultdict(set)
    stored_hashes: dict[str, set[str]] = defaultdict(set)
    for s in store.manifest():
        stored_ids[s.chunk.paper_id].add(s.chunk.id)
        stored_hashes[s.chunk.paper_id].add(s.paper_hash)

    todo = [pid for pid in papers
            if stored_hashes.get(pid) != {hashes[pid]}
            or stored_ids.get(pid) != {c.id for c in chunks[pid]}]
    gone = sorted(set(stored_ids) - set(papers))
    added_ids = tuple(pid for pid in todo if pid not in stored_ids)

    pending = [c for pid in todo for c in chunks[pid]]
    bar = tqdm(total=len(pending), unit="chunk", desc="embedding", disable=not progress)
    if on_progress:
        on_progress("embedding", 0.0)
    for i in range(0, len(pending), batch_chunks):
        batch = pending[i: i + batch_chunks]
        vectors = embedder.embed([c.text for c in batch])
        store.upsert(batch, vectors, papers, hashes)
        bar.update(len(batch))
        if on_progress:
            on_progress("embedding", (i + len(batch)) / len(pending))
        log.info("stored %d/%d chunks", i + len(batch), len(pending))
    bar.close()
    stale = [cid for pid in todo for cid in stored_ids.get(pid, set())
             if cid not in {c.id for c in chunks[pid]}]
    stale += [cid for pid in gone for cid in stored_ids[pid]]
    store.delete(sorted(stale))

    titles_run, titles_s, _ = _titles(settings, store, papers, generator, progress, on_progress)
    atlas_s = 0.0
    if settings.atlas.enabled:
        if on_progress:
            on_progress("map", 0.0)
        atlas_s = _atlas(settings, store, list(papers.values()))
        if on_progress:
            on_progress("map", 1.0)
    write_index_cache(store)  # the app's next start loads the keyword side instead of rebuilding
    report = IngestReport(
        papers=len(papers), added=len(added_ids), updated=len(todo) - len(added_ids),
        removed=len(gone), unchanged=len(papers) - len(todo), chunks_embedded=len(pending),
        chunks_total=store.count(), seconds=time.perf_counter() - t0,
        warnings=corpus.warnings, titles_generated=titles_run, titles_seconds=titles_s,
        atlas_seconds=atlas_s, added_ids=added_ids)
    log.info(report.summary())
    return report


def _titles(settings: Settings, store: Store, papers: dict[str, Paper],
            generator: Generator | None, progress: bool, on_progress: Progress | None,
            cancel: threading.Event | None = None,
            pause: Callable[[], bool] | None = None) -> tuple[int, float, int]:
    """Write missing titles (model calls), then store every title that changed: (model
    calls, their seconds, titles stored)."""
    from rag.titles import assign_titles

    t0 = time.perf_counter()
    bar = tqdm(unit="title", desc="titles", disable=not progress)

    def step(done: int, total: int) -> None:
        bar.total = total
        bar.update(1)
        if on_progress:
            on_progress("titles", done / total)

    run = assign_titles(settings, papers.values(), generator, step, cancel, pause)
    bar.close()
    if cancel is not None and cancel.is_set():
        return 0, 0.0, 0  # shutting down: the titles written so far are cached for the next run
    have = {p.id: (p.title, p.title_generated) for p in store.papers()}
    changed = {pid: t for pid, t in run.titles.items() if have.get(pid) != t}
    store.set_titles(changed)
    return run.generated, (time.perf_counter() - t0 if run.generated else 0.0), len(changed)


def write_missing_titles(settings: Settings, store: Store, generator: Generator,
                         cancel: threading.Event | None = None,
                         pause: Callable[[], bool] | None = None) -> int:
    """Titles for indexed papers with none stored yet; the number stored. `rag serve` runs it
    after it starts (`make run` ingests with --no-titles), so a fresh install opens the chat
    before the model has titled every abstract; the labels show until then. Titles a stopped
    server had already cached count too: they reach the store (and the chat) on this run,
    with no model call. While `pause()` is true (a chat is being answered) the titles wait."""
    papers = {p.id: p for p in store.papers()}
    _, _, stored = _titles(settings, store, papers, generator, False, None, cancel, pause)
    if stored:
        write_index_cache(store)  # the titles changed the collection: the next start loads
    return stored


def _atlas(settings: Settings, store: Store, papers: list[Paper]) -> float:
    """Compute the map again when the papers changed; seconds spent (0 when current)."""
    from rag.atlas import build_atlas, is_current

    if is_current(settings, papers):
        return 0.0
    t0 = time.perf_counter()
    ids, vectors = store.paper_vectors()
    build_atlas(settings, papers, ids, vectors, force=True)
    return time.perf_counter() - t0


def is_stale(settings: Settings, store: Store, seeds: Path | None = None) -> bool:
    """True when an ingest would change anything (cheap: no embedding)."""
    corpus = read_corpus(settings, seeds)
    fp = fingerprint(settings)
    want = {p.id: paper_hash(p, fp) for p in corpus.papers}
    have: dict[str, set[str]] = defaultdict(set)
    for s in store.manifest():
        have[s.chunk.paper_id].add(s.paper_hash)
    return set(want) != set(have) or any(have[k] != {v} for k, v in want.items())
