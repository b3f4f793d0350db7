"""The keyword side's cache (rag/retrieve.py IndexCache): a start with a current cache reads
no chunk back from Chroma and searches exactly as a rebuild does; a changed collection, a
foreign write and a damaged cache are each detected, logged and rebuilt, never crashed on.
Real embedded Chroma, real embedder."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest

from rag.ingest import ingest
from rag.retrieve import IndexCache, Retriever
from rag.store import Store
from tests.conftest import make_settings

QUERIES = ["self-supervised reinforcement learning", "BEXA", "MuJoCo", "drone detection",
           "what does the method improve"]
NEW = ("Long-horizon weather forecasting with learned simulators drifts after a few days. We "
       "propose ZorblaxNet, a spectral state-space model that conserves energy across "
       "autoregressive rollouts by projecting each step onto a learned invariant manifold. "
       "On the ERA5 reanalysis benchmark ZorblaxNet keeps skilful forecasts for 14 days, two "
       "days longer than the strongest baseline, while running 3 times faster.")


@pytest.fixture()
def indexed(tmp_path, mini_seeds, embedder):
    s = make_settings(tmp_path / "data", mini_seeds, atlas={"enabled": False})
    store = Store(s.store, s.paths.data)
    ingest(s, store, embedder)
    return s, store


def retriever_of(s, embedder) -> Retriever:
    """A retriever in a fresh Store, as a new process would open it."""
    return Retriever(s.retrieve, Store(s.store, s.paths.data), embedder)


def reads(monkeypatch) -> list[int]:
    """Counts the retriever's full reads of the collection (what a rebuild does)."""
    calls: list[int] = []
    real = Store.chunks_and_papers

    def counted(self):
        calls.append(1)
        return real(self)

    monkeypatch.setattr(Store, "chunks_and_papers", counted)
    return calls


def snapshot(r: Retriever) -> dict:
    out = {"papers": r.papers, "names": r.names,
           "chunks": [(c.id, c.text) for c in r._chunks], "numbers": r._numbers}
    for q in QUERIES:
        for mode in ("bm25", "hybrid"):
            out[q, mode] = [(h.chunk.id, round(h.score, 9), h.bm25_rank, h.label)
                            for h in r.search(q, k=8, mode=mode)]
        out[q, "named"] = r.named_papers(q)
        scores = np.asarray(r._bm25.get_scores([t for t in q.lower().split()]))
        out[q, "scores"] = scores.round(6).tolist()
    return out


def test_ingest_writes_the_cache_and_a_start_loads_it_without_reading_chunks(
        indexed, embedder, monkeypatch, caplog):
    s, store = indexed
    assert (store.cache_dir / "current.json").exists()
    calls = reads(monkeypatch)
    caplog.set_level(logging.INFO, logger="rag.retrieve")
    cached = retriever_of(s, embedder)
    cached.refresh()
    assert calls == [], "a start with a current cache read every chunk back"
    assert "loaded from" in caplog.text
    assert len(cached.papers) == 4 and len(cached._chunks) == store.count()

    # the same answers as a rebuild from the collection
    for d in store.cache_dir.iterdir():
        shutil.rmtree(d) if d.is_dir() else d.unlink()
    rebuilt = retriever_of(s, embedder)
    rebuilt.refresh()
    assert calls == [1]
    assert snapshot(cached) == snapshot(rebuilt)
    assert any(snapshot(rebuilt)[q, "bm25"] for q in QUERIES)  # the comparison compares hits


def test_a_changed_collection_is_detected_and_rebuilt(indexed, embedder, monkeypatch, caplog):
    s, store = indexed
    r = retriever_of(s, embedder)
    r.refresh()
    calls = reads(monkeypatch)
    caplog.set_level(logging.INFO, logger="rag.retrieve")

    # a write through Store that nothing re-cached (titles here): stale by its stamp
    pid = sorted(r.papers)[0]
    store.set_titles({pid: ("A brand new title", True)})
    r.refresh()
    assert calls == [1] and "is stale" in caplog.text
    assert r.papers[pid].title == "A brand new title"
    r2 = retriever_of(s, embedder)  # ... and the rebuild was cached again
    r2.refresh()
    assert calls == [1] and r2.papers[pid].title == "A brand new title"

    # a writer that bypasses Store (no stamp): caught by the count
    gone = [c.id for c in r2._chunks if c.paper_id == pid]
    Store(s.store, s.paths.data).collection.delete(ids=gone)
    caplog.clear()
    r3 = retriever_of(s, embedder)
    r3.refresh()
    assert calls == [1, 1] and "count" in caplog.text
    assert pid not in r3.papers and not {c.id for c in r3._chunks} & set(gone)


def test_incremental_upload_refreshes_the_cache(indexed, embedder, tmp_path, monkeypatch):
    from rag.uploads import add_files

    s, store = indexed
    r = Retriever(s.retrieve, store, embedder)
    r.refresh()
    before = set(r.papers)
    up = tmp_path / "upload.txt"
    up.write_text("Uploaded\n\n" + NEW + "\n", encoding="utf-8")
    assert add_files(s, store, embedder, None, [up]).added == 1
    calls = reads(monkeypatch)
    r.refresh()  # what Assistant.refresh() does after an upload
    new = set(r.papers) - before
    assert len(new) == 1 and r.named_papers("what is ZorblaxNet?") == sorted(new)
    assert calls == [], "ingest should have cached the new collection"
    assert r.search("ZorblaxNet", k=1)[0].chunk.paper_id in new


@pytest.mark.parametrize("damage", ["pointer", "chunks", "bm25", "papers", "missing dir"])
def test_a_damaged_cache_is_rebuilt_with_a_warning(indexed, embedder, monkeypatch, caplog,
                                                   damage):
    s, store = indexed
    good = retriever_of(s, embedder)
    good.refresh()
    expect = snapshot(good)
    ptr = json.loads((store.cache_dir / "current.json").read_text())
    d = store.cache_dir / ptr["dir"]
    if damage == "pointer":
        (store.cache_dir / "current.json").write_text('{"format": 1, "stamp')
    elif damage == "chunks":  # a truncated file still parses: the counts catch it
        lines = (d / "chunks.jsonl").read_text().splitlines(keepends=True)
        (d / "chunks.jsonl").write_text("".join(lines[:-1]))
    elif damage == "bm25":
        next((d / "bm25").glob("data*.npy")).write_bytes(b"\x93NUMPY garbage")
    elif damage == "papers":
        (d / "papers.jsonl").write_text("[1, 2]\n")
    else:
        shutil.rmtree(d)
    calls = reads(monkeypatch)
    caplog.set_level(logging.INFO, logger="rag.retrieve")
    r = retriever_of(s, embedder)
    r.refresh()
    assert calls == [1]
    assert any(rec.levelno == logging.WARNING and "unreadable" in rec.getMessage()
               for rec in caplog.records), caplog.text
    assert snapshot(r) == expect
    again = retriever_of(s, embedder)  # the rebuild wrote a good cache
    again.refresh()
    assert calls == [1]
    assert [p.name for p in store.cache_dir.iterdir() if p.name.startswith("v-")] != [ptr["dir"]]


def test_an_unwritable_cache_is_logged_and_search_still_works(indexed, embedder, caplog,
                                                              monkeypatch):
    s, store = indexed

    def refuse(self, lex, version):
        raise OSError("No space left on device")

    monkeypatch.setattr(IndexCache, "save", refuse)
    (store.cache_dir / "current.json").unlink()
    caplog.set_level(logging.INFO, logger="rag.retrieve")
    r = retriever_of(s, embedder)
    r.refresh()
    assert "cannot write the index cache" in caplog.text
    assert r.search("SSL4RL", k=1)


def test_an_unstampable_collection_is_searched_but_never_cached(indexed, embedder, caplog,
                                                                monkeypatch):
    s, store = indexed

    def read_only(self):
        raise PermissionError("the server is read-only")

    col = store.client.get_collection(s.store.collection)
    col.modify(metadata={"other": 1})  # a collection from before stamps
    monkeypatch.setattr(Store, "_stamp", read_only)
    calls = reads(monkeypatch)
    caplog.set_level(logging.INFO)
    for _ in range(2):
        r = retriever_of(s, embedder)
        r.refresh()
        assert r.search("BEXA", k=1)
    assert calls == [1, 1] and "cannot stamp the collection" in caplog.text
