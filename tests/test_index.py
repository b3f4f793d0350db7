"""Ingest into a real embedded Chroma: incremental, idempotent, crash-safe; hybrid search."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rag.errors import CorpusError, InputError
from rag.ingest import ingest
from rag.store import Store
from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parent.parent
NO_TITLES = {"RAG_TITLES__ENABLED": "false"}  # a real `rag ingest` would ask the model for 57 titles


def test_whole_corpus_is_indexed(settings, retriever):
    papers = retriever.papers
    assert len(papers) == 57
    assert papers["000-01"].label == "SSL4RL"
    ids = [c.id for c in retriever.store.chunks()]
    assert len(ids) == len(set(ids)) == retriever.store.count()


def test_incremental_ingest(tmp_path, mini_seeds, embedder):
    s = make_settings(tmp_path / "data", mini_seeds)
    store = Store(s.store, s.paths.data)
    first = ingest(s, store, embedder)
    assert (first.added, first.chunks_embedded) == (4, first.chunks_total)
    again = ingest(s, store, embedder)
    assert (again.unchanged, again.chunks_embedded) == (4, 0)

    f = mini_seeds / "010_mini.txt"
    f.write_text(f.read_text().replace("MuJoCo", "MuJoCo and Atari"), encoding="utf-8")
    edited = ingest(s, store, embedder)
    assert (edited.updated, edited.unchanged) == (1, 3)
    texts = [c.text for c in store.chunks() if c.paper_id == "010-01"]
    assert any("Atari" in t for t in texts) and len(texts) == len(set(texts))

    (mini_seeds / "011_more.txt").unlink()
    removed = ingest(s, store, embedder)
    assert removed.removed == 1 and not [c for c in store.chunks() if c.paper_id == "011-01"]
    ids = [c.id for c in store.chunks()]
    assert len(ids) == len(set(ids))


def test_bad_seed_file_leaves_the_index_untouched(tmp_path, mini_seeds, embedder):
    s = make_settings(tmp_path / "data", mini_seeds)
    store = Store(s.store, s.paths.data)
    ingest(s, store, embedder)
    before = sorted(c.id for c in store.chunks())
    (mini_seeds / "012_broken.txt").write_bytes(b"Header\n\n\xff\xfe broken")
    with pytest.raises(CorpusError, match="012_broken.txt: line 3"):
        ingest(s, store, embedder)
    assert sorted(c.id for c in store.chunks()) == before


def test_killed_ingest_leaves_a_usable_index(tmp_path):
    """SIGKILL a real `rag ingest` between two of its writes (proved: the index holds some of
    the 271 seed chunks, not all, and the process died of the signal); the index must open,
    search, and the next ingest heal it, keeping what was written."""
    env = {**os.environ, "RAG_PATHS__DATA": str(tmp_path / "data"),
           "RAG_PATHS__SEEDS": str(ROOT / "seeds"), **NO_TITLES}
    cmd = [sys.executable, "-m", "rag.cli", "-v", "ingest", "--quiet", "--batch", "8"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    stored = 0
    assert proc.stderr is not None
    for line in proc.stderr:  # "INFO rag.ingest: stored 16/271 chunks", one per write
        m = re.search(r"stored (\d+)/(\d+) chunks", line)
        if m and 0 < int(m.group(1)) < int(m.group(2)):
            stored, total = int(m.group(1)), int(m.group(2))
            if stored >= 24:  # a few writes in, well before the last
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "ingest ended before the kill"
    assert 0 < stored < total
    s = make_settings(tmp_path / "data")
    left = Store(s.store, s.paths.data).count()
    assert stored <= left < total, (stored, left, total)  # killed mid-ingest, nothing lost
    del s
    out = subprocess.run([sys.executable, "-m", "rag.cli", "search", "early exit actor critic",
                          "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)  # searchable, though partial
    healed = subprocess.run(cmd[:3] + cmd[4:], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert healed.returncode == 0, healed.stderr
    assert "57 papers" in healed.stdout
    embedded = int(re.search(r"(\d+) chunks embedded, (\d+) in the index", healed.stdout)[1])
    assert total - left <= embedded < total, healed.stdout  # the missing part, not all again


@pytest.mark.parametrize("query,paper", [
    ("SVOO", "003-03"),                      # an exact name, through the keyword side
    ("1.93", "003-03"),                      # an exact number
    ("Self-RedTeam", "003-07"),
    ("making an agent's controller skip layers to save inference compute under a budget",
     "003-01"),                              # a paraphrase, through the dense side
    ("defending peer review against manipulated figures", "003-06"),
])
def test_hybrid_search_finds_names_numbers_and_paraphrases(retriever, query, paper):
    hits = retriever.search(query, k=5, group=True)
    assert hits[0].chunk.paper_id == paper, [(h.chunk.paper_id, h.label) for h in hits]


def test_keyword_and_dense_sides_each_matter(retriever):
    assert retriever.search("1.93", k=1, mode="bm25")[0].chunk.paper_id == "003-03"
    dense = retriever.search("robots that remember what they saw long ago", k=3, group=True,
                             mode="dense")
    assert "000-03" in [h.chunk.paper_id for h in dense]


def test_grouping_and_restriction(retriever):
    hits = retriever.search("reinforcement learning policies", k=10, group=True)
    assert len({h.chunk.paper_id for h in hits}) == len(hits)
    only = retriever.search("reinforcement learning", k=5, paper_ids={"003-01"})
    assert {h.chunk.paper_id for h in only} == {"003-01"}
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_search_validates_arguments(retriever):
    with pytest.raises(InputError, match="k must be > 0, got 0"):
        retriever.search("x", k=0)
    with pytest.raises(InputError, match="empty"):
        retriever.search("   ")


def test_cli_search_json(settings):
    env = {**os.environ, "RAG_PATHS__DATA": str(settings.paths.data)}
    out = subprocess.run([sys.executable, "-m", "rag.cli", "search", "SSL4RL rewards", "--k",
                          "3", "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == 3 and rows[0]["paper_id"] == "000-01"
    assert set(rows[0]) == {"paper_id", "label", "score", "chunk_id", "text"}
    assert rows[0]["score"] >= rows[1]["score"] >= rows[2]["score"]


def test_cli_reports_a_broken_index_in_one_line(tmp_path):
    data = tmp_path / "data"
    (data / "chroma").mkdir(parents=True)
    (data / "chroma" / "chroma.sqlite3").write_bytes(b"this is not a database")
    env = {**os.environ, "RAG_PATHS__DATA": str(data)}
    out = subprocess.run([sys.executable, "-m", "rag.cli", "search", "x"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert out.stderr.startswith("error: cannot open the Chroma index")
    assert "Traceback" not in out.stderr


MANIFEST = ("import json; from rag.config import load_settings; from rag.store import Store; "
            "s = load_settings(); print(json.dumps(sorted([m.chunk.id, m.paper_hash] "
            "for m in Store(s.store, s.paths.data).manifest())))")


def test_disk_full_during_ingest_keeps_the_index_and_the_next_ingest_heals(tmp_path, mini_seeds,
                                                                            embedder):
    """A file-size limit on a real `rag ingest` (writes fail with EFBIG, as on a full disk):
    a one-line error, the index keeps every chunk it had, and the next ingest heals it."""
    import resource
    import shutil

    data = tmp_path / "data"
    s = make_settings(data, mini_seeds)
    ingest(s, Store(s.store, s.paths.data), embedder)  # the previous state: 4 papers
    env = {**os.environ, "RAG_PATHS__DATA": str(data), **NO_TITLES}
    manifest = [sys.executable, "-c", MANIFEST]
    before = json.loads(subprocess.run(manifest, env=env, cwd=ROOT, capture_output=True,
                                       text=True, check=True, timeout=300).stdout)
    both = tmp_path / "both"
    shutil.copytree(mini_seeds, both)
    for f in (ROOT / "seeds").glob("*.txt"):
        shutil.copy(f, both)
    limit = max(f.stat().st_size for f in data.rglob("*") if f.is_file()) + 16 * 1024

    def full_disk() -> None:  # in the child: writes past `limit` bytes fail instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    cmd = [sys.executable, "-m", "rag.cli", "ingest", "--seeds", str(both), "--quiet"]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
                         preexec_fn=full_disk)
    assert out.returncode == 2, (out.returncode, out.stderr[-3000:])
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and lines[0] == out.stderr.splitlines()[-1], out.stderr[-3000:]
    assert lines[0].startswith("error: cannot write to the Chroma index"), lines[0]
    assert "disk" in lines[0] and "Traceback" not in out.stderr
    after = json.loads(subprocess.run(manifest, env=env, cwd=ROOT, capture_output=True,
                                      text=True, check=True, timeout=300).stdout)
    assert set(map(tuple, before)) <= set(map(tuple, after))  # nothing it had was lost
    search = subprocess.run([sys.executable, "-m", "rag.cli", "search", "BEXA early exit",
                             "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert search.returncode == 0 and json.loads(search.stdout)[0]["paper_id"] == "010-01"
    healed = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert healed.returncode == 0, healed.stderr[-3000:]
    assert "57 papers" in healed.stdout, healed.stdout  # (the mini abstracts repeat seeds)


def test_a_name_that_is_an_everyday_word_names_its_paper_only_with_capitals(retriever):
    """SLIM is a paper; "a slim verifier" is VIA-SD's phrase and names no paper. A rarer word
    (PRISM) still names its paper in lower case."""
    assert retriever.named_papers("What does the slim verifier check?") == []
    assert retriever.named_papers("How does SLIM protect the weights?") == ["004-07"]
    assert retriever.named_papers("Slim vs SecFid") == ["004-07", "000-07"]
    assert retriever.named_papers("what does prism audit?") == ["003-12"]
