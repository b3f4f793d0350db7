"""Hybrid search: dense (Chroma, cosine) + keyword (BM25 via bm25s), fused by reciprocal rank.

Exact names and numbers ("SVOO", "1.93") are found by the keyword side, paraphrases by the
dense side. The keyword side (chunks, paper registry, BM25, name index) is derived from the
store's own documents, so an embedded index and a Chroma server behave the same. Deriving it
means reading every chunk back (~4 min at 100k papers against a server), so it is saved
beside the collection (`IndexCache`, written by ingest and by any rebuild) under the
collection's write stamp, and loaded at start while that stamp still matches.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from rag.acronyms import defined
from rag.config import RetrieveSettings
from rag.embed import Embedder
from rag.errors import InputError
from rag.store import IndexVersion, Store
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


def content_words(text: str) -> list[str]:
    """Lowercased words in order, stop words left out; a hyphenated name stays one word."""
    return [t for word in text.split() for t in _TOKEN.findall(word.lower()) if t not in _STOP]


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


# A name's characters: ASCII letters, digits, "_", "@" and "-". A name ends where another
# character starts, so "Self-RedTeam은" (Korean particle attached) still names Self-RedTeam.
_NC = "0-9A-Za-z_@-"
_RUN = re.compile(f"[{_NC}]+")  # the maximal runs a name's own boundaries cut at
_BEFORE, _AFTER = f"(?<![{_NC}])", f"(?![{_NC}])"


def _first_run(name: str) -> str:
    """The run a name starts with, or "" when it starts with another character: wherever the
    name occurs between boundaries, this run occurs as a whole run of the text."""
    m = _RUN.match(name)
    return m.group() if m else ""


_COINED = re.compile(r"(?<![\w@-])[A-Za-z][\w@]*(?:-[\w@]+)*(?![\w@-])")


@functools.lru_cache(maxsize=4096)
def label_long_form(paper: Paper) -> str:
    """The long form the abstract defines for a one-word label ("reverse flow matching" for
    RFM), of two words or more, or ""."""
    if len(paper.label.split()) != 1:
        return ""
    found = defined(paper.label, paper)
    return found[0] if found and len(found[0].split()) >= 2 else ""


def coined_names(paper: Paper) -> set[str]:
    """Name-like tokens of a paper: its label, the long form its abstract defines for a
    one-word label ("reverse flow matching (RFM)"), and words like SSL4RL, DroneDINO, leak@k."""
    names = {paper.label} if len(paper.label.split()) <= 3 else set()
    long = label_long_form(paper)
    if long:
        names.add(long)
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
                        _BEFORE + re.escape(n) + _AFTER, low):
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
        """Load the keyword side: from the cache when it matches the collection's current
        version, else rebuilt from the collection (and the cache written again)."""
        with self._lock:
            lex = load_or_build(self.store)
            chunks, papers = lex.chunks, lex.papers
            rows: dict[str, list[int]] = defaultdict(list)
            for i, c in enumerate(chunks):
                rows[c.paper_id].append(i)
            numbers: dict[str, set[str]] = defaultdict(set)
            for p in papers.values():
                for num in _DECIMAL.findall(p.clean):
                    numbers[num].add(p.id)
            by_run: dict[str, list[str]] = defaultdict(list)
            for n in lex.names:
                by_run[_first_run(n)].append(n)
            self._chunks, self._papers, self._bm25 = chunks, papers, lex.bm25
            self._wholes = {c.paper_id: c for c in chunks if c.ordinal == 0}
            self._rows, self._numbers = dict(rows), dict(numbers)
            self._names, self._names_by_run = lex.names, dict(by_run)
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
        `text`: those named by their own label first, then the rest, each in order of
        appearance. In "CLIP or LLaVA: which does PRISM use?" CLIP names only a paper that
        mentions it in passing; PRISM names the paper asked about."""
        self._ensure()
        found: list[tuple[int, int, str]] = []  # (0 for a paper's own label, position, id)
        low = text.lower()
        for m in re.finditer(r"(?<![\w.])\d+\.\d+(?![\d])", low):
            owners = self._numbers.get(m.group(), set())  # (a paper's whole number, see refresh)
            if len(owners) == 1:
                found.append((1, m.start(), next(iter(owners))))
        same_length = len(low) == len(text)  # (lower() can lengthen a few letters: "İ")
        for run in {*_RUN.findall(low), ""}:  # only names whose first run the text has
            for name in self._names_by_run.get(run, ()):
                hit = re.search(_BEFORE + re.escape(name) + _AFTER, low)
                if hit and same_length and text[hit.start():hit.end()].islower() and \
                        self._everyday_word(name):
                    continue  # "a slim verifier" does not name SLIM
                if hit:
                    pid = self._names[name]
                    p = self._papers.get(pid)
                    own = p is not None and name in (p.label.lower(), label_long_form(p).lower())
                    found.append((0 if own else 1, hit.start(), pid))
        return list(dict.fromkeys(pid for *_, pid in sorted(found)))

    def _everyday_word(self, name: str) -> bool:
        """A name of letters only that English also uses as a common word (see
        retrieve.name_word_zipf)."""
        limit = self.settings.name_word_zipf
        if limit <= 0 or not name.isalpha():
            return False
        from wordfreq import zipf_frequency

        return zipf_frequency(name, "en") >= limit

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


# ---- the keyword side, and its cache --------------------------------------------------

@dataclass
class Lexical:
    """What the keyword side derives from the collection; rows of `bm25` are `chunks`."""

    chunks: list[Chunk]
    papers: dict[str, Paper]
    bm25: Any  # bm25s.BM25
    names: dict[str, str]  # see name_index


def build_lexical(chunks: list[Chunk], listed: list[Paper]) -> Lexical:
    """Tokenise, index BM25 and find the distinctive names (the minutes of a cold start)."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it forces DEBUG on import
    papers = {p.id: p for p in listed}
    bm25 = bm25s.BM25()
    if chunks:  # token ids as they come (a token string per word would be ~1 GB at 100k)
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in tokenize(
            f"{papers[c.paper_id].label if c.paper_id in papers else ''} {c.text}")
            or ["_"]] for c in chunks]
        bm25.index((ids, vocab), show_progress=False)
        del ids
    return Lexical(chunks, papers, bm25, name_index(listed))


_PAPER_FIELDS = tuple(f.name for f in fields(Paper) if f.name != "clean")


class IndexCache:
    """`Lexical` saved in a folder beside the collection (Store.cache_dir):

        current.json    {format, collection, stamp, count, chunks, papers, dir}
        v-<id>/bm25/    bm25s's own save format (memory-mapped on load)
        v-<id>/chunks.jsonl, papers.jsonl, names.json

    A version folder is written under a temporary name and renamed when complete; then
    current.json is replaced atomically (temp file + os.replace), so a reader sees the old
    cache or the new one, never half of one. It is valid only for the collection version
    it names (id, write stamp, count); anything else (missing, stale, unreadable,
    inconsistent) is a miss, logged, and the caller rebuilds."""

    FORMAT = 3  # 2: name boundaries are ASCII name characters (rag/retrieve.py _NC); 3: a
    # one-word label's defined long form names its paper

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pointer = folder / "current.json"

    def _current(self, version: IndexVersion) -> dict[str, Any] | None:
        """The pointer when it names `version`, else None (logged with the reason)."""
        if not version.stamp:
            log.info("the collection has no write stamp: not using the index cache")
            return None
        if not self.pointer.exists():
            log.info("no index cache at %s: building it from the collection", self.folder)
            return None
        ptr = json.loads(self.pointer.read_text(encoding="utf-8"))
        want = {"format": self.FORMAT, "collection": version.collection,
                "stamp": version.stamp, "count": version.count}
        diff = {k: (ptr.get(k), v) for k, v in want.items() if ptr.get(k) != v}
        if diff:
            log.info("index cache at %s is stale (%s): rebuilding it from the collection",
                     self.folder, ", ".join(f"{k} {a!r} != {b!r}" for k, (a, b) in diff.items()))
            return None
        return dict(ptr)

    def is_current(self, version: IndexVersion) -> bool:
        try:
            return self._current(version) is not None
        except Exception:
            return False

    def load(self, version: IndexVersion) -> Lexical | None:
        """The cached keyword side for `version`, or None (logged) when there is none."""
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        try:
            ptr = self._current(version)
            if ptr is None:
                return None
            d = self.folder / str(ptr["dir"])
            chunks: list[Chunk] = []
            with open(d / "chunks.jsonl", encoding="utf-8") as f:
                for line in f:
                    cid, pid, ordinal, start, end, text = json.loads(line)
                    chunks.append(Chunk(cid, pid, int(ordinal), text, int(start), int(end)))
            wholes = {c.paper_id: c.text for c in chunks if c.ordinal == 0}
            papers: dict[str, Paper] = {}
            with open(d / "papers.jsonl", encoding="utf-8") as f:
                for line in f:
                    row = dict(zip(_PAPER_FIELDS, json.loads(line), strict=True))
                    row["links"] = tuple(row["links"])
                    papers[row["id"]] = Paper(**row, clean=wholes[row["id"]])
            names = json.loads((d / "names.json").read_text(encoding="utf-8"))
            if chunks:
                bm25 = bm25s.BM25.load(d / "bm25", mmap=True, show_progress=False)
                rows = int(bm25.scores.get("num_docs", -1))
            else:  # an empty collection: nothing was indexed, nothing saved
                bm25, rows = bm25s.BM25(), 0
            counts = (len(chunks), len(papers), rows)
            if counts != (ptr["chunks"], ptr["papers"], ptr["chunks"]) \
                    or len(chunks) != version.count or not isinstance(names, dict):
                raise ValueError(f"chunks, papers and BM25 rows {counts} do not match "
                                 f"{ptr['chunks']} chunks, {ptr['papers']} papers")
            return Lexical(chunks, dict(sorted(papers.items())), bm25, names)
        except Exception as e:
            detail = " ".join(str(e).split())[:200] or type(e).__name__
            log.warning("index cache at %s is unreadable (%s: %s): rebuilding it from the "
                        "collection", self.folder, type(e).__name__, detail)
            return None

    def save(self, lex: Lexical, version: IndexVersion) -> None:
        """Write `lex` as the cache of `version` (the version read before reading its rows)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=self.folder))
        try:
            if lex.chunks:
                lex.bm25.save(tmp / "bm25", show_progress=False)
            with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as f:
                for c in lex.chunks:
                    f.write(json.dumps([c.id, c.paper_id, c.ordinal, c.start, c.end, c.text],
                                       ensure_ascii=False) + "\n")
            with open(tmp / "papers.jsonl", "w", encoding="utf-8") as f:
                for p in lex.papers.values():
                    f.write(json.dumps([getattr(p, k) for k in _PAPER_FIELDS],
                                       ensure_ascii=False) + "\n")
            (tmp / "names.json").write_text(json.dumps(lex.names, ensure_ascii=False),
                                            encoding="utf-8")
            final = self.folder / f"v-{uuid.uuid4().hex[:12]}"
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        ptr = {"format": self.FORMAT, "collection": version.collection, "stamp": version.stamp,
               "count": version.count, "chunks": len(lex.chunks), "papers": len(lex.papers),
               "dir": final.name, "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        part = self.pointer.with_name(f".current-{uuid.uuid4().hex[:8]}.json")
        part.write_text(json.dumps(ptr, indent=1), encoding="utf-8")
        os.replace(part, self.pointer)
        self._clean(keep=final.name)

    def _clean(self, keep: str) -> None:
        """Remove older versions; another process's unfinished tmp-* only once it is an hour
        old (a folder still being written is never taken from under its writer)."""
        now = time.time()
        for d in self.folder.iterdir():
            try:
                old = d.name.startswith("v-") and d.name != keep
                stuck = d.name.startswith(("tmp-", ".current-")) and now - d.stat().st_mtime > 3600
                if old or stuck:
                    shutil.rmtree(d) if d.is_dir() else d.unlink()
            except OSError:
                pass


def load_or_build(store: Store) -> Lexical:
    """The keyword side of `store`: its cache when current, else rebuilt and cached again."""
    version = store.version()  # before reading rows: a write meanwhile makes it stale
    cache = IndexCache(store.cache_dir)
    t0 = time.perf_counter()
    lex = cache.load(version)
    if lex is not None:
        log.info("keyword index loaded from %s (%d chunks, %.1f s)", cache.folder,
                 len(lex.chunks), time.perf_counter() - t0)
        return lex
    return _rebuild(store, cache, version)


def write_index_cache(store: Store) -> bool:
    """Bring the cache in line with the collection (ingest calls it last, so the app's next
    start loads instead of rebuilding); True when it was rebuilt."""
    version = store.version()
    cache = IndexCache(store.cache_dir)
    if cache.is_current(version):
        return False
    _rebuild(store, cache, version)
    return True


def _rebuild(store: Store, cache: IndexCache, version: IndexVersion) -> Lexical:
    """Read every chunk, derive the keyword side, save it. A cache that cannot be written
    is logged, not raised: search works, and the next start rebuilds again."""
    t0 = time.perf_counter()
    lex = build_lexical(*store.chunks_and_papers())
    t1 = time.perf_counter()
    if not version.stamp:  # unversioned: a cache could never be told stale
        return lex
    try:
        cache.save(lex, version)
        log.info("keyword index rebuilt from the collection (%d chunks, %.1f s) and cached "
                 "in %s (%.1f s)", len(lex.chunks), t1 - t0, cache.folder,
                 time.perf_counter() - t1)
    except Exception as e:
        log.warning("cannot write the index cache at %s (%s); the next start rebuilds it "
                    "again", cache.folder, " ".join(str(e).split())[:200] or type(e).__name__)
    return lex
