"""The map of the papers: a 2-D layout of the abstract embeddings, topic clusters named by
their most characteristic words, and each paper's nearest papers. Computed at ingest, cached
in `<data>/atlas.json`, read by `load_atlas` (no model, no scikit-learn) on page views.

Layout: PCA to at most 50 dimensions, then t-SNE (perplexity scaled to the collection; PCA
alone above `atlas.tsne_max_papers`, t-SNE being quadratic), scaled to [-1, 1]. Clusters:
KMeans on the unit vectors (cosine), k chosen by silhouette in [min_clusters, max_clusters].
Names: c-TF-IDF (each cluster's abstracts as one document; a word's frequency in the cluster
against its frequency in all clusters), English stop words and the words every abstract uses
("propose", "results") left out. Everything takes a fixed random_state: same input, same map.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.config import Settings
from rag.types import Atlas, Cluster, MapPoint, Paper

log = logging.getLogger(__name__)

VERSION = "1"  # bump when the layout, clustering or naming changes
# Words that say nothing about a topic in ML abstracts (on top of sklearn's English list).
_GENERIC = {
    "propose", "proposed", "proposes", "method", "methods", "approach", "approaches", "paper",
    "work", "results", "result", "show", "shows", "novel", "new", "existing", "based", "using",
    "achieve", "achieves", "performance", "state", "art", "demonstrate", "experiments",
    "extensive", "framework", "introduce", "problem", "problems", "prior", "significantly",
    "key", "code", "available", "github", "https", "com", "task", "tasks", "study", "furthermore",
    "specifically", "address", "challenge", "challenges", "improve", "improves", "model",
    "models", "learning", "data", "training", "however", "various", "effective", "efficient",
}


def cache_path(settings: Settings) -> Path:
    return settings.paths.data / "atlas.json"


def atlas_key(settings: Settings, papers: Sequence[Paper]) -> str:
    """Changes with any paper's content, the set of papers, the embedder or the settings."""
    a = settings.atlas
    parts = [VERSION, settings.embed.model, str(a.min_clusters), str(a.max_clusters),
             str(a.cluster_words), str(a.related), str(a.tsne_max_papers), str(a.seed)]
    parts += sorted(f"{p.id}:{p.content_hash}" for p in papers)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def load_atlas(settings: Settings) -> Atlas | None:
    """The cached map, or None when no ingest has computed one (or it is unreadable)."""
    data = _read(cache_path(settings))
    if data is None:
        return None
    try:
        return Atlas(
            points=tuple(MapPoint(str(p["paper_id"]), float(p["x"]), float(p["y"]),
                                  int(p["cluster"])) for p in data["points"]),
            clusters=tuple(Cluster(int(c["id"]), str(c["name"]), tuple(map(str, c["words"])))
                           for c in data["clusters"]),
            related={str(k): tuple(map(str, v)) for k, v in data["related"].items()})
    except (KeyError, TypeError, ValueError) as e:
        log.warning("%s: unreadable (%s); run `rag ingest` to compute the map again",
                    cache_path(settings), e)
        return None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as e:
        log.warning("%s: unreadable (%s)", path, e)
        return None
    return data if isinstance(data, dict) else None


def is_current(settings: Settings, papers: Sequence[Paper]) -> bool:
    data = _read(cache_path(settings))
    return data is not None and data.get("key") == atlas_key(settings, papers)


def build_atlas(settings: Settings, papers: Sequence[Paper], ids: Sequence[str],
                vectors: np.ndarray, force: bool = False) -> Atlas:
    """Compute the map of `papers` from their whole-abstract vectors (rows of `vectors`, in
    the order of `ids`) and cache it; a cache for the same input is returned as is."""
    if not force and is_current(settings, papers):
        cached = load_atlas(settings)
        if cached is not None:
            return cached
    by_id = {p.id: p for p in papers}
    rows = [i for i, pid in enumerate(ids) if pid in by_id]
    ids = [ids[i] for i in rows]
    x = np.asarray(vectors, dtype=np.float64)[rows] if rows else np.zeros((0, 1))
    atlas = compute(settings, ids, x, [by_id[pid].clean for pid in ids])
    _write(cache_path(settings), atlas, atlas_key(settings, papers))
    return atlas


def compute(settings: Settings, ids: Sequence[str], vectors: np.ndarray,
            texts: Sequence[str]) -> Atlas:
    """The map itself (pure: nothing read or written)."""
    n = len(ids)
    if n == 0:
        return Atlas((), (), {})
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    xy = _layout(unit, settings.atlas.seed, settings.atlas.tsne_max_papers)
    labels = _clusters(unit, settings)
    k = int(labels.max()) + 1
    words = _cluster_words(texts, labels, k, settings.atlas.cluster_words)
    clusters = tuple(Cluster(c, ", ".join(words[c][:3]) or f"topic {c + 1}", tuple(words[c]))
                     for c in range(k))
    points = tuple(MapPoint(pid, round(float(xy[i, 0]), 4), round(float(xy[i, 1]), 4),
                            int(labels[i])) for i, pid in enumerate(ids))
    return Atlas(points, clusters, _related(unit, ids, settings.atlas.related))


def _related(unit: np.ndarray, ids: Sequence[str], k: int, block: int = 512
             ) -> dict[str, tuple[str, ...]]:
    """Each paper's k nearest others by cosine (ties by id), a block of rows at a time: the
    full n x n matrix would be 1.6 GB at 20k papers."""
    n = len(ids)
    related: dict[str, tuple[str, ...]] = {}
    take = min(n - 1, k + 8)  # a few spare candidates so ties at the cut sort by id
    for lo in range(0, n, block):
        sims = unit[lo:lo + block] @ unit.T
        for r in range(sims.shape[0]):
            i = lo + r
            row = sims[r]
            row[i] = -np.inf
            cand = np.argpartition(-row, take - 1)[:take] if 0 < take < n else \
                np.array([j for j in range(n) if j != i], dtype=int)
            order = sorted(cand.tolist(), key=lambda j: (-row[j], ids[j]))
            related[ids[i]] = tuple(ids[j] for j in order[:k] if j != i)
    return related


def _layout(unit: np.ndarray, seed: int, tsne_max: int) -> np.ndarray:
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    n = unit.shape[0]
    if n == 1:
        return np.zeros((1, 2))
    dims = min(50, n, unit.shape[1])
    reduced = PCA(n_components=dims, random_state=seed).fit_transform(unit) if dims >= 2 else \
        np.hstack([unit[:, :1], np.zeros((n, 1))])
    if n >= 8 and n <= tsne_max:
        perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))
        xy = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed,
                  metric="cosine", n_jobs=1).fit_transform(reduced)
    else:
        xy = reduced[:, :2]
    xy = xy - xy.mean(axis=0)
    scale = np.abs(xy).max(axis=0)
    return np.asarray(xy / np.where(scale > 0, scale, 1.0))


def _clusters(unit: np.ndarray, settings: Settings) -> np.ndarray:
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = unit.shape[0]
    a = settings.atlas
    ks = [k for k in range(a.min_clusters, a.max_clusters + 1) if k < n]
    if not ks:
        return np.zeros(n, dtype=int)
    best: tuple[float, np.ndarray] | None = None
    for k in ks:
        labels = KMeans(n_clusters=k, n_init=10, random_state=a.seed).fit_predict(unit)
        if len(set(labels.tolist())) < 2:
            continue
        # sampled beyond 2,000 papers: the exact score is quadratic in time and memory
        score = float(silhouette_score(unit, labels, metric="cosine",
                                       sample_size=min(n, 2000), random_state=a.seed))
        if best is None or score > best[0] + 1e-9:
            best = (score, labels)
    if best is None:
        return np.zeros(n, dtype=int)
    return _renumber(best[1])


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Cluster ids in order of first appearance (papers are in id order): stable names."""
    order: dict[int, int] = {}
    for lab in labels.tolist():
        order.setdefault(int(lab), len(order))
    return np.array([order[int(lab)] for lab in labels.tolist()], dtype=int)


def _cluster_words(texts: Sequence[str], labels: np.ndarray, k: int, top: int
                   ) -> list[list[str]]:
    """c-TF-IDF: weight(w, c) = tf(w, c) / words(c) * log(1 + mean words per cluster / f(w)),
    f(w) the word's count over all clusters (BERTopic's class-based TF-IDF)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

    docs = [" ".join(t for t, lab in zip(texts, labels.tolist(), strict=True) if lab == c)
            for c in range(k)]
    stop = sorted(set(ENGLISH_STOP_WORDS) | _GENERIC)
    try:
        vec = CountVectorizer(stop_words=stop, token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z\-]{2,}\b",
                              lowercase=True)
        counts = vec.fit_transform(docs).toarray().astype(np.float64)
    except ValueError:  # nothing but stop words
        return [[] for _ in range(k)]
    vocab = vec.get_feature_names_out()
    per_class = counts.sum(axis=1, keepdims=True)
    tf = counts / np.maximum(per_class, 1.0)
    idf = np.log1p(per_class.mean() / np.maximum(counts.sum(axis=0), 1.0))
    weights = tf * idf
    out: list[list[str]] = []
    for c in range(k):
        order = sorted(range(len(vocab)), key=lambda j: (-weights[c, j], vocab[j]))
        order = [j for j in order if counts[c, j] >= 2] or order  # one mention names nothing
        words: list[str] = []
        for j in order:
            w = str(vocab[j])
            if not any(w in kept or kept in w for kept in words):  # no "policy" next to "policies"
                words.append(w)
            if len(words) == top:
                break
        out.append(words)
    return out


def _write(path: Path, atlas: Atlas, key: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "version": VERSION, "key": key,
        "points": [{"paper_id": p.paper_id, "x": p.x, "y": p.y, "cluster": p.cluster}
                   for p in atlas.points],
        "clusters": [{"id": c.id, "name": c.name, "words": list(c.words)}
                     for c in atlas.clusters],
        "related": {k: list(v) for k, v in atlas.related.items()},
    }
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
