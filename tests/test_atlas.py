"""The map of the papers, computed at ingest from the real index: shape, related, determinism."""

from __future__ import annotations

import json

import numpy as np

from rag.atlas import build_atlas, cache_path, compute, load_atlas
from tests.conftest import make_settings


def test_the_seed_map_is_cached_at_ingest(settings, retriever):
    atlas = load_atlas(settings)
    assert atlas is not None
    papers = retriever.papers
    assert [p.paper_id for p in atlas.points] == sorted(papers)
    assert all(-1.0 <= p.x <= 1.0 and -1.0 <= p.y <= 1.0 for p in atlas.points)
    assert len({(p.x, p.y) for p in atlas.points}) == len(atlas.points)
    ids = {c.id for c in atlas.clusters}
    assert 2 <= len(ids) <= settings.atlas.max_clusters
    assert {p.cluster for p in atlas.points} == ids == set(range(len(ids)))
    for c in atlas.clusters:
        assert c.name and 1 <= len(c.words) <= settings.atlas.cluster_words, c
        assert all(w.isascii() and w == w.lower() and "http" not in w for w in c.words), c
        assert len(set(c.words)) == len(c.words)


def test_related_papers_are_the_three_nearest_by_cosine(settings, retriever):
    atlas = load_atlas(settings)
    assert atlas is not None
    ids, vectors = retriever.store.paper_vectors()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    assert set(atlas.related) == set(ids)
    for i, pid in enumerate(ids):
        rel = atlas.related[pid]
        assert len(rel) == 3 and pid not in rel and len(set(rel)) == 3
        nearest = [ids[j] for j in np.argsort(-sims[i]) if ids[j] != pid][:3]
        assert list(rel) == nearest
    # the two unlearning-leakage papers and the two early-exit / SVOO-type pairs are not
    # guaranteed neighbours, but a paper's nearest neighbour shares its cluster most of the time
    cluster = {p.paper_id: p.cluster for p in atlas.points}
    same = sum(cluster[pid] == cluster[rel[0]] for pid, rel in atlas.related.items())
    assert same / len(ids) >= 0.7


def test_the_map_is_deterministic_and_recomputed_only_when_papers_change(settings, retriever,
                                                                         tmp_path):
    papers = list(retriever.papers.values())
    ids, vectors = retriever.store.paper_vectors()
    other = make_settings(tmp_path)
    a = build_atlas(other, papers, ids, vectors)
    assert a == load_atlas(settings)  # same input, same map as the ingest computed
    stamp = cache_path(other).stat().st_mtime_ns
    assert build_atlas(other, papers, ids, vectors) == a  # current: read, not recomputed
    assert cache_path(other).stat().st_mtime_ns == stamp
    fewer = build_atlas(other, papers[:-1], ids, vectors)
    assert len(fewer.points) == len(papers) - 1 and papers[-1].id not in fewer.related
    assert json.loads(cache_path(other).read_text())["points"][0]["paper_id"] == ids[0]


def test_tiny_collections_still_get_a_map(settings):
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5):
        ids = [f"t-{i:02d}" for i in range(n)]
        atlas = compute(settings, ids, rng.normal(size=(n, 8)), ["alpha beta gamma"] * n)
        assert len(atlas.points) == n and all(len(r) == min(3, n - 1)
                                              for r in atlas.related.values())
    assert compute(settings, [], np.zeros((0, 8)), []).points == ()


def test_no_map_before_an_ingest(tmp_path):
    assert load_atlas(make_settings(tmp_path)) is None
    cache_path(make_settings(tmp_path)).write_text("{not json", encoding="utf-8")
    assert load_atlas(make_settings(tmp_path)) is None


def test_related_papers_blockwise_equal_the_full_matrix():
    """The nearest papers are computed a block of rows at a time (the scale bench crashed on
    the 20k x 20k matrix); they must equal the full matrix's answer, ties broken by id."""
    import numpy as np

    from rag.atlas import _related

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 16))
    x[7] = x[3]  # an exact tie
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    ids = [f"900-{i:02d}" for i in range(60)]
    sims = unit @ unit.T
    want = {pid: tuple(ids[j] for j in sorted((j for j in range(60) if j != i),
                                              key=lambda j: (-sims[i, j], ids[j]))[:3])
            for i, pid in enumerate(ids)}
    assert _related(unit, ids, 3, block=7) == want
    assert _related(unit[:2], ids[:2], 3) == {ids[0]: (ids[1],), ids[1]: (ids[0],)}
