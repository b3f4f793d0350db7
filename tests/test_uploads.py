"""Adding abstracts from the browser: real Chroma, real embedder, real search afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.atlas import load_atlas
from rag.errors import CorpusError
from rag.ingest import ingest
from rag.retrieve import Retriever
from rag.store import Store
from rag.uploads import add_files, check_files
from tests.conftest import make_settings

NEW = ("Long-horizon weather forecasting with learned simulators drifts after a few days. We "
       "propose ZephyrNet, a spectral state-space model that conserves energy across "
       "autoregressive rollouts by projecting each step onto a learned invariant manifold. "
       "On the ERA5 reanalysis benchmark ZephyrNet keeps skilful forecasts for 14 days, two "
       "days longer than the strongest baseline, while running 3 times faster.")


@pytest.fixture()
def indexed(tmp_path, mini_seeds, embedder):
    s = make_settings(tmp_path / "data", mini_seeds)
    store = Store(s.store, s.paths.data)
    ingest(s, store, embedder)
    return s, store


def _file(folder: Path, name: str, body: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / name
    f.write_bytes(body if isinstance(body, bytes) else body.encode())
    return f


def test_a_bad_upload_is_refused_with_the_loaders_message_and_nothing_is_written(
        tmp_path, indexed, embedder):
    s, store = indexed
    before = sorted(c.id for c in store.chunks())
    seeds_before = sorted(f.name for f in s.paths.seeds.iterdir())
    up = tmp_path / "browser"
    bad = _file(up, "007_bad.txt", b"ICML 2026\n\nabc \xff\xfe def\n")
    empty = _file(up, "empty.txt", "\n\n")
    pdf = _file(up, "paper.pdf", "%PDF-1.4")
    good = _file(up, "good.txt", f"Mine\n\n{NEW}\n")
    check = check_files(s, [bad, empty, pdf, good])
    assert not check.ok and check.new_papers == 1
    assert check.errors[0] == ("007_bad.txt: line 3: not UTF-8 (byte 0xff); re-save the file "
                               "as UTF-8")  # the CLI's message, named by the file's own name
    assert check.errors[1].startswith("empty.txt: line 1: the file is empty")
    assert check.errors[2].startswith("paper.pdf: not a .txt file")
    with pytest.raises(CorpusError, match="007_bad.txt: line 3: not UTF-8"):
        add_files(s, store, embedder, None, [bad, empty, pdf, good])
    assert s.paths.uploads is not None and not s.paths.uploads.exists()
    assert sorted(c.id for c in store.chunks()) == before
    assert sorted(f.name for f in s.paths.seeds.iterdir()) == seeds_before


def test_duplicates_are_skipped_and_a_new_paper_is_searchable_mapped_and_stable(
        tmp_path, indexed, embedder, mini_seeds):
    s, store = indexed
    retriever = Retriever(s.retrieve, store, embedder)
    assert "u001-01" not in retriever.papers
    bexa = next(p for p in store.papers() if p.label == "BEXA")
    up = tmp_path / "browser"
    f = _file(up, "../my new: abstracts!.txt", f"Mine\n\n{bexa.text}\n\n{NEW}\n")
    check = check_files(s, [f])
    assert check.ok and check.new_papers == 1
    assert [(p.id, p.label) for p in check.papers] == [("u001-01", "ZephyrNet")]
    assert len(check.duplicates) == 1 and "010-01 (BEXA)" in check.duplicates[0]
    assert s.paths.uploads is not None and not s.paths.uploads.exists()  # a check writes nothing

    stages: list[tuple[str, float]] = []
    report = add_files(s, store, embedder, None, [f], progress=lambda st, x: stages.append((st, x)))
    assert report.files == ("u001_my-new-abstracts.txt",) and report.added_ids == ("u001-01",)
    assert report.added == 1 and len(report.duplicates) == 1
    assert (s.paths.uploads / "u001_my-new-abstracts.txt").read_bytes() == f.read_bytes()
    assert not any(p.name.startswith("u001") for p in mini_seeds.iterdir())
    assert {st for st, _ in stages} >= {"embedding", "map"} and stages[-1] == ("map", 1.0)

    retriever.refresh()  # what Assistant.refresh() does: no restart
    hits = retriever.search("ZephyrNet weather forecasting", k=3, group=True)
    assert hits[0].chunk.paper_id == "u001-01"
    assert retriever.papers["u001-01"].label == "ZephyrNet"
    atlas = load_atlas(s)
    assert atlas is not None and "u001-01" in {p.paper_id for p in atlas.points}
    assert len(atlas.related["u001-01"]) == 3

    again = check_files(s, [f])  # now everything in it is present
    assert again.ok and again.new_papers == 0 and len(again.duplicates) == 2
    second = add_files(s, store, embedder, None, [f])
    assert second.files == () and second.added == 0
    other = _file(up, "more.txt", f"More\n\n{NEW.replace('ZephyrNet', 'BoreasNet')}\n")
    third = add_files(s, store, embedder, None, [other])
    assert third.files == ("u002_more.txt",) and third.added_ids == ("u002-01",)
    assert ingest(s, store, embedder).unchanged == 6  # `rag ingest` keeps the uploads, same ids
