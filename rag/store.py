"""The only module that imports chromadb: an embedded PersistentClient or an HttpClient.

Each chunk's metadata carries what is needed to rebuild its Chunk and Paper without a
second lookup, plus `paper_hash`, which is what makes ingest incremental: the collection
itself is the manifest, so there is nothing to fall out of step with it.

Every write through this module also changes a stamp in the collection's metadata
(`version()`), so what was derived from the collection (the retriever's cache, see
rag/retrieve.py) can tell cheaply whether it still matches.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from rag.config import StoreSettings, offline_environment
from rag.errors import StoreError
from rag.types import Chunk, Paper

log = logging.getLogger(__name__)

_STAMP = "rag_write_stamp"  # collection metadata key: a fresh value after every write


@dataclass(frozen=True)
class StoredChunk:
    chunk: Chunk
    paper_hash: str


@dataclass(frozen=True)
class IndexVersion:
    """What identifies one state of the collection, read without reading its rows."""

    collection: str  # the collection's id: a deleted and re-created collection is another
    stamp: str  # changed by every write through Store (before and after it)
    count: int  # chunks; also catches adds and deletes by writers that bypass Store


@dataclass(frozen=True)
class DenseMatch:
    chunk: Chunk
    similarity: float  # cosine similarity, 1 is identical


class Store:
    """A Chroma collection of chunks with cosine distance; embeddings are always ours."""

    def __init__(self, settings: StoreSettings, data_dir: Path) -> None:
        offline_environment()
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        self.settings = settings
        # where state derived from this collection is kept (the retriever's cache); a
        # server's collection gets its own folder per URL
        where = f"-{hashlib.sha256(settings.url.encode()).hexdigest()[:8]}" if settings.url else ""
        self.cache_dir = data_dir / "index-cache" / f"{settings.collection}{where}"
        try:
            if settings.url:
                u = urlparse(settings.url)
                if not u.hostname:
                    raise StoreError(f"store.url {settings.url!r} is not a URL like "
                                     "http://127.0.0.1:8000")
                self.client: Any = chromadb.HttpClient(
                    host=u.hostname, port=u.port or 8000, ssl=u.scheme == "https",
                    settings=chroma_settings)
                self.client.heartbeat()
                self.where = settings.url
            else:
                data_dir.mkdir(parents=True, exist_ok=True)
                self.client = chromadb.PersistentClient(path=str(data_dir / "chroma"),
                                                        settings=chroma_settings)
                self.where = str(data_dir / "chroma")
            self.collection = self.client.get_or_create_collection(
                settings.collection, embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}})
        except StoreError:
            raise
        except Exception as e:
            target = settings.url or str(data_dir / "chroma")
            raise StoreError(f"cannot open the Chroma index at {target}: {e}. If a server, "
                             "check it is running; if on disk, delete the folder and run "
                             "`rag ingest` to rebuild it") from None

    # ---- writes -------------------------------------------------------------------------

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray, papers: dict[str, Paper],
               paper_hashes: dict[str, str]) -> None:
        if not chunks:
            return
        metas = [_meta(c, papers[c.paper_id], paper_hashes[c.paper_id]) for c in chunks]
        try:
            self._stamp()
            self.collection.upsert(ids=[c.id for c in chunks], embeddings=vectors.tolist(),
                                   documents=[c.text for c in chunks], metadatas=metas)
            self._stamp()
        except Exception as e:
            raise self._write_error(e) from None

    def set_titles(self, titles: Mapping[str, tuple[str, bool]]) -> None:
        """Write (title, generated) into each paper's whole-abstract chunk; no re-embedding."""
        ids = sorted(titles)
        if not ids:
            return
        try:
            self._stamp()
            for i in range(0, len(ids), 500):
                part = ids[i: i + 500]
                self.collection.update(
                    ids=[f"{pid}#0" for pid in part],
                    metadatas=[{"title": titles[pid][0], "title_generated": titles[pid][1]}
                               for pid in part])
            self._stamp()
        except Exception as e:
            raise self._write_error(e) from None

    def delete(self, chunk_ids: list[str]) -> None:
        if not chunk_ids:
            return
        try:
            self._stamp()
            for i in range(0, len(chunk_ids), 500):
                self.collection.delete(ids=chunk_ids[i: i + 500])
            self._stamp()
        except Exception as e:
            raise self._write_error(e) from None

    def _stamp(self) -> str:
        """Give the collection a fresh write stamp (one small request, ~5 ms). Writes stamp
        before and after: a reader that read the stamp before or during a write never sees
        its stamp again, so what it derived is stale, not wrong."""
        stamp = uuid.uuid4().hex
        meta = dict(self.client.get_collection(self.settings.collection).metadata or {})
        meta[_STAMP] = stamp
        self.collection.modify(metadata=meta)
        return stamp

    def _write_error(self, e: Exception) -> StoreError:
        detail = " ".join(str(e).split()) or type(e).__name__
        return StoreError(f"cannot write to the Chroma index at {self.where}: {detail}. Is the "
                          "disk full? Every chunk written before is kept; run `rag ingest` "
                          "again once there is room")

    # ---- reads --------------------------------------------------------------------------

    def count(self) -> int:
        try:
            return int(self.collection.count())
        except Exception as e:
            if self.settings.url:
                detail = " ".join(str(e).split()) or type(e).__name__
                raise StoreError(f"the index is unavailable: the Chroma server at "
                                 f"{self.settings.url} does not answer ({detail[:200]}); "
                                 "ask again once it is back") from None
            raise

    def version(self) -> IndexVersion:
        """The collection's id, write stamp and count, without reading its rows. Read it
        before reading the rows: a write in between makes it stale, never wrong. A collection
        written before stamps existed gets one here."""
        try:
            col = self.client.get_collection(self.settings.collection)  # fresh metadata
            stamp = str((col.metadata or {}).get(_STAMP) or "")
            if not stamp:
                try:
                    stamp = self._stamp()
                except Exception as e:  # e.g. a read-only server: "" is never cached
                    log.warning("cannot stamp the collection at %s (%s); its derived state "
                                "is rebuilt at every start", self.where,
                                " ".join(str(e).split())[:200])
            return IndexVersion(str(col.id), stamp, self.count())
        except StoreError:
            raise
        except Exception as e:
            detail = " ".join(str(e).split()) or type(e).__name__
            raise StoreError(f"cannot read the Chroma index at {self.where}: {detail[:200]}"
                             ) from None

    def manifest(self) -> list[StoredChunk]:
        """Every stored chunk with its paper hash (no embeddings)."""
        out: list[StoredChunk] = []
        for ids, docs, metas in self._all(include=["documents", "metadatas"]):
            out.extend(StoredChunk(_chunk(i, d, m), str(m.get("paper_hash", "")))
                       for i, d, m in zip(ids, docs, metas, strict=True))
        return out

    def papers(self) -> list[Paper]:
        """Papers rebuilt from their whole-abstract chunks (ordinal 0), in id order."""
        out: list[Paper] = []
        for _ids, docs, metas in self._all(include=["documents", "metadatas"],
                                          where={"ordinal": 0}):
            out.extend(_paper(d, m) for d, m in zip(docs, metas, strict=True))
        return sorted(out, key=lambda p: p.id)

    def paper_vectors(self) -> tuple[list[str], np.ndarray]:
        """(paper ids, their whole-abstract chunk vectors, one row each), in id order."""
        ids: list[str] = []
        rows: list[Any] = []
        offset = 0
        while True:
            res = self.collection.get(include=["embeddings", "metadatas"], where={"ordinal": 0},
                                      limit=2000, offset=offset)
            if not res["ids"]:
                break
            ids += [str(m["paper_id"]) for m in res["metadatas"]]
            rows += list(res["embeddings"])
            offset += len(res["ids"])
        order = sorted(range(len(ids)), key=ids.__getitem__)
        vectors = np.asarray([rows[i] for i in order], dtype=np.float32).reshape(len(ids), -1)
        return [ids[i] for i in order], vectors

    def chunks(self) -> list[Chunk]:
        return [s.chunk for s in self.manifest()]

    def chunks_and_papers(self) -> tuple[list[Chunk], list[Paper]]:
        """`chunks()` and `papers()` in one pass over the collection (what a retriever loads
        at start; at 100k papers each pass costs a minute against a server). A paper's
        cleaned text is its whole-abstract chunk's text, the same string, held once."""
        chunks: list[Chunk] = []
        papers: list[Paper] = []
        for ids, docs, metas in self._all(include=["documents", "metadatas"]):
            for i, d, m in zip(ids, docs, metas, strict=True):
                chunks.append(_chunk(i, d, m))
                if chunks[-1].ordinal == 0:
                    papers.append(_paper(d, m))
        return chunks, sorted(papers, key=lambda p: p.id)

    def query(self, vector: np.ndarray, k: int, paper_ids: list[str] | None = None
              ) -> list[DenseMatch]:
        n = self.count()
        if n == 0:
            return []
        where = {"paper_id": {"$in": paper_ids}} if paper_ids else None
        try:
            res = self.collection.query(query_embeddings=[vector.tolist()],
                                        n_results=min(k, n), where=where,
                                        include=["documents", "metadatas", "distances"])
        except Exception as e:
            detail = " ".join(str(e).split()) or type(e).__name__
            if self.settings.url:  # a server that went away usually comes back: say so
                raise StoreError(f"the index is unavailable: the Chroma server at "
                                 f"{self.settings.url} does not answer ({detail[:200]}); "
                                 "ask again once it is back") from None
            raise StoreError(f"search failed in the Chroma index at {self.where}: {detail}; "
                             "run `rag ingest` to rebuild it") from None
        return [DenseMatch(_chunk(i, d, m), 1.0 - float(dist))
                for i, d, m, dist in zip(res["ids"][0], res["documents"][0],
                                         res["metadatas"][0], res["distances"][0], strict=True)]

    def _all(self, include: list[str], where: dict[str, Any] | None = None,
             page: int = 2000) -> Any:
        offset = 0
        while True:
            res = self.collection.get(include=include, where=where, limit=page, offset=offset)
            if not res["ids"]:
                return
            yield res["ids"], res["documents"], res["metadatas"]
            offset += len(res["ids"])


def _meta(c: Chunk, p: Paper, paper_hash: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "paper_id": c.paper_id, "ordinal": c.ordinal, "start": c.start, "end": c.end,
        "label": p.label, "source": p.source, "position": p.position, "line": p.line,
        "collection": p.collection, "links": " ".join(p.links), "paper_hash": paper_hash,
    }
    if c.ordinal == 0:
        meta["raw"] = p.text
        meta["content_hash"] = p.content_hash
        meta["title"] = p.title
        meta["title_generated"] = p.title_generated
    return meta


def _chunk(cid: str, doc: str, m: dict[str, Any]) -> Chunk:
    return Chunk(cid, str(m["paper_id"]), int(m["ordinal"]), doc, int(m["start"]), int(m["end"]))


def _paper(doc: str, m: dict[str, Any]) -> Paper:
    links = str(m.get("links", ""))
    return Paper(id=str(m["paper_id"]), label=str(m["label"]), text=str(m.get("raw", doc)),
                 clean=doc, source=str(m["source"]), position=int(m["position"]),
                 line=int(m.get("line", 0)), collection=str(m.get("collection", "")),
                 links=tuple(links.split()) if links else (),
                 content_hash=str(m.get("content_hash", "")), title=str(m.get("title", "")),
                 title_generated=bool(m.get("title_generated", False)))
