"""Abstracts added from the browser: checked with the seed loader's own rules and messages,
saved under `paths.uploads` (never the seeds folder), then ingested incrementally.

The UI calls `check_files` (nothing is written) to show errors and duplicates before
anything is indexed, then `add_files(..., progress=...)`, then `Assistant.refresh()`.
A saved upload is named "u<NNN>_<safe name>.txt"; its papers' ids are "u<NNN>-<position>"
(`corpus.paper_prefix`), so they never collide with the seeds' and never change.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rag.config import Settings
from rag.corpus import UPLOAD_PREFIX, load_file, read_seed_file
from rag.errors import ConfigError, CorpusError
from rag.ingest import IngestReport, ingest, read_corpus
from rag.types import Paper

if TYPE_CHECKING:
    from rag.embed import Embedder
    from rag.generate import Generator
    from rag.store import Store

log = logging.getLogger(__name__)

MAX_BYTES = 2_000_000  # per file; a seed file of 19 abstracts is ~30 kB
_LOCK = threading.Lock()  # one upload ingests at a time in this process


@dataclass(frozen=True)
class UploadCheck:
    ok: bool  # no errors: add_files would accept these files
    errors: tuple[str, ...]  # "<file>: line N: <what is wrong and what to do>", as the CLI says
    new_papers: int  # abstracts that would be added
    duplicates: tuple[str, ...]  # abstracts already present (seeds, earlier uploads, this batch)
    warnings: tuple[str, ...] = ()  # paragraphs the loader skips (too short, repeated in-file)
    papers: tuple[Paper, ...] = ()  # the new papers, with the ids add_files would give them now


@dataclass(frozen=True)
class _FileCheck:
    path: Path
    error: str | None
    new: int
    duplicates: tuple[str, ...]
    warnings: tuple[str, ...]
    papers: tuple[Paper, ...] = ()


def _named(message: str, path: Path) -> str:
    """The loader names files by the path it was given; an upload's temporary path is noise."""
    return path.name + message[len(str(path)):] if message.startswith(str(path)) else message


def _inspect(settings: Settings, files: Sequence[Path]) -> list[_FileCheck]:
    known = {p.content_hash: f"{p.id} ({p.label})" for p in read_corpus(settings).papers}
    out: list[_FileCheck] = []
    for f in files:
        f = Path(f)
        error = None
        if f.suffix.lower() != ".txt":
            error = (f"{f.name}: not a .txt file; upload seed files: a header line, then "
                     "abstracts separated by blank lines, saved as UTF-8 .txt")
        elif not f.is_file():
            error = f"{f.name}: no such file"
        elif f.stat().st_size > MAX_BYTES:
            error = (f"{f.name}: {f.stat().st_size / 1e6:.1f} MB is over the "
                     f"{MAX_BYTES / 1e6:.0f} MB limit for one file; split it")
        if error:
            out.append(_FileCheck(f, error, 0, (), ()))
            continue
        try:
            read_seed_file(f)  # the CLI's rules and messages: UTF-8, empty, header only
            papers, warnings = load_file(f)
        except CorpusError as e:
            out.append(_FileCheck(f, _named(str(e), f), 0, (), ()))
            continue
        fresh, dups = [], []
        for p in papers:
            if p.content_hash in known:
                dups.append(f"{f.name}: line {p.line}: the abstract of {known[p.content_hash]} "
                            "is already present; skipped")
            else:
                fresh.append(p)
                known[p.content_hash] = f"{p.label} in {f.name}"
        out.append(_FileCheck(f, None, len(fresh), tuple(dups),
                              tuple(_named(w, f) for w in warnings), tuple(fresh)))
    return out


def check_files(settings: Settings, files: Sequence[Path]) -> UploadCheck:
    """What adding `files` would do, and what is wrong with them; nothing is written."""
    checks = _inspect(settings, files)
    errors = tuple(c.error for c in checks if c.error)
    if not files:
        errors = ("no files given; choose one or more .txt files in the seed format",)
    n = _next_number(settings.paths.uploads)
    papers: list[Paper] = []
    for c in (c for c in checks if c.new):  # the ids they get: u<n>-<position among the new>
        papers += [replace(p, id=f"u{n:03d}-{i:02d}", position=i)
                   for i, p in enumerate(c.papers, start=1)]
        n += 1
    return UploadCheck(ok=not errors, errors=errors, new_papers=sum(c.new for c in checks),
                       duplicates=tuple(d for c in checks for d in c.duplicates),
                       warnings=tuple(w for c in checks for w in c.warnings),
                       papers=tuple(papers))


def _next_number(folder: Path | None) -> int:
    if folder is None or not folder.is_dir():
        return 1
    used = [int(m.group(1)[1:]) for f in folder.iterdir() if (m := UPLOAD_PREFIX.match(f.name))]
    return max(used, default=0) + 1


def _safe_stem(path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._")
    return stem[:40] or "abstracts"


def _save(folder: Path, source: Path) -> Path:
    """Copy `source` into `folder` as u<NNN>_<safe name>.txt, never over an existing file."""
    folder.mkdir(parents=True, exist_ok=True)
    n = _next_number(folder)
    data = source.read_bytes()
    while True:
        target = folder / f"u{n:03d}_{_safe_stem(source)}.txt"
        try:
            with target.open("xb") as out:  # exclusive: fails rather than overwrite
                out.write(data)
            return target
        except FileExistsError:
            n += 1


def add_files(settings: Settings, store: Store, embedder: Embedder,
              generator: Generator | None, files: Sequence[Path],
              progress: Callable[[str, float], None] | None = None) -> IngestReport:
    """Save the files that bring new abstracts into the uploads folder and ingest them
    (embeddings, titles, map); raises CorpusError, naming each bad file, before any write.
    `progress(stage, fraction)`: stage is "embedding", "titles" or "map"."""
    uploads = settings.paths.uploads
    if uploads is None:  # pragma: no cover - the settings always fill it
        raise ConfigError("paths.uploads is not set")
    seeds = settings.paths.seeds.resolve()
    if uploads.resolve() == seeds or seeds in uploads.resolve().parents:
        raise ConfigError(f"paths.uploads ({uploads}) is inside the seeds folder; uploads "
                          "must go elsewhere (default: <data>/uploads)")
    with _LOCK:
        checks = _inspect(settings, files)
        errors = [c.error for c in checks if c.error]
        if errors or not files:
            raise CorpusError("; ".join(errors) or "no files given")
        saved: list[Path] = []
        try:
            saved = [_save(uploads, c.path) for c in checks if c.new]
            report = ingest(settings, store, embedder, generator=generator,
                            on_progress=progress)
        except BaseException:
            for f in saved:  # nothing half-added stays behind for the next ingest
                f.unlink(missing_ok=True)
            raise
    log.info("uploads: saved %s; %s", [f.name for f in saved], report.summary())
    return replace(report, files=tuple(f.name for f in saved),
                   duplicates=tuple(d for c in checks for d in c.duplicates))
