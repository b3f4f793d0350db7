"""Short titles for abstracts, written by the generator at ingest and checked against them.

The seeds carry no titles, and a fifth of the labels are sentence fragments. At ingest the
model writes a 4-10 word title per abstract; it must contain the method's name when the
abstract names one (`corpus.method_name`, the same name the label uses), and it may hold no
name (capitalised or acronym token) or number the abstract lacks. A title that fails is
asked for once more, with the reason; a second failure, or a disabled or failing generator,
leaves the title empty, and every reader shows the label instead.

Titles are cached in `<data>/titles.json`, keyed by the abstract's content hash, the model
preset and the prompt version, so only new or changed abstracts cost a model call; a
rejected title is cached too (as empty), so it is not asked for again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag.config import Settings
from rag.corpus import method_name
from rag.types import Paper

if TYPE_CHECKING:
    from rag.generate import Generator

log = logging.getLogger(__name__)

PROMPT_VERSION = "2"  # bump when the prompt, the check or the repairs change: titles are written again
MIN_WORDS, MAX_WORDS = 4, 10
SYSTEM = ("You write short titles for research paper abstracts. Reply with one title of 4 to "
          "10 words and nothing else: no quotes, no final period, no 'Title:'. Use only "
          "names, acronyms and numbers that appear in the abstract.")
# Words a title may use though the abstract lacks them: they name nothing.
_FREE = {
    "a", "an", "the", "of", "for", "and", "or", "in", "on", "with", "via", "to", "from", "by",
    "towards", "toward", "through", "using", "under", "beyond", "into", "at", "as", "is",
    "are", "its", "their", "when", "how", "what", "why", "new", "novel", "not", "all", "more",
    "less", "than", "vs", "versus", "without", "across", "between", "better", "improving",
}
COMMON_ZIPF = 3.0
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_TOKEN = re.compile(r"[^\s,;:()\[\]{}\"'“”‘’!?]+")


@dataclass(frozen=True)
class TitleResult:
    title: str  # "" when none passed the check
    generated: bool
    attempts: int  # model calls made (0: from the cache)
    rejected: tuple[str, ...] = ()  # why each rejected attempt failed


# ---- the check ---------------------------------------------------------------------------

def normalize(raw: str) -> str:
    """The model's reply as a bare one-line title: no quotes, Markdown, 'Title:' or period."""
    line = next((ln for ln in raw.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^\s*(?:#+\s*|[-*]\s+)?(?:\*\*)?(?:title\s*:\s*)?", "", line, flags=re.I)
    line = line.replace("**", "").replace("`", "")
    line = " ".join(line.split()).strip(" \"'“”‘’*")
    return line.rstrip(".").strip()


def _is_acronym_like(part: str) -> bool:
    """SSL4RL, PaperGuard, DiTs, leak@k: a digit, or a capital after the first letter."""
    return any(c.isdigit() for c in part) or any(c.isupper() for c in part[1:])


def _common(word: str) -> bool:
    """An ordinary English word (wordfreq Zipf >= 3.0: "unifying" 3.15, "enhances" 3.3), which a
    title in Title Case capitalises without it being a name ("Atari" 2.98, "Wasserstein" 1.7)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en") >= COMMON_ZIPF


def check_title(title: str, abstract: str, name: str | None = None) -> str | None:
    """Why `title` fails for this abstract (None when it passes): word count, the method's
    name missing, or a name or number the abstract lacks."""
    words = title.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return f"it has {len(words)} words, not {MIN_WORDS}-{MAX_WORDS}"
    if name and name.lower() not in title.lower():
        return f"it does not contain the method's name {name}"
    have_numbers = set(_NUMBER.findall(abstract))
    for number in _NUMBER.findall(title):
        if number not in have_numbers:
            return f"the number {number} is not in the abstract"
    tokens = {t.strip(".") for t in _TOKEN.findall(abstract)}
    tokens |= {p for t in tokens for p in re.split(r"[-/]", t) if p}
    lower = " " + " ".join(t.lower() for t in tokens)
    for token in _TOKEN.findall(title):
        token = token.strip(".")
        if token in tokens or token.rstrip("s") in tokens or token + "s" in tokens:
            continue
        for part in (p for p in re.split(r"[-/]", token) if any(c.isalpha() for c in p)):
            if part in tokens or part.rstrip("s") in tokens or part + "s" in tokens:
                continue
            if _is_acronym_like(part):
                return f"the name {part} is not in the abstract"
            if part[0].isupper() and part.lower() not in _FREE and not _common(part.lower()):
                stem = part.lower()[:max(4, len(part) - 3)]
                if " " + stem not in lower:  # no word of the abstract starts like it
                    return f"the name {part} is not in the abstract"
    return None


# ---- the cache ---------------------------------------------------------------------------

class TitleCache:
    """`<data>/titles.json`: key -> (title, generated); written atomically after each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.entries: dict[str, tuple[str, bool]] = {}
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            self.entries = {k: (str(v["title"]), bool(v["generated"]))
                            for k, v in raw.get("entries", {}).items()}
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("%s: unreadable (%s); titles will be written again", path, e)

    def get(self, key: str) -> tuple[str, bool] | None:
        return self.entries.get(key)

    def put(self, key: str, title: str, generated: bool) -> None:
        with self._lock:
            self.entries[key] = (title, generated)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            data = {"version": PROMPT_VERSION,
                    "entries": {k: {"title": t, "generated": g}
                                for k, (t, g) in sorted(self.entries.items())}}
            tmp.write_text(json.dumps(data, ensure_ascii=False, indent=0), encoding="utf-8")
            os.replace(tmp, self.path)


def cache_path(settings: Settings) -> Path:
    return settings.paths.data / "titles.json"


def title_key(paper: Paper, model_id: str) -> str:
    content = paper.content_hash or hashlib.sha256(paper.text.encode()).hexdigest()
    return hashlib.sha256(f"{PROMPT_VERSION}|{model_id}|{content}".encode()).hexdigest()[:32]


# ---- writing titles ----------------------------------------------------------------------

def _user(paper: Paper, name: str | None, words: int, rejected: tuple[str, str] | None) -> str:
    abstract = " ".join(paper.clean.split()[:words])
    msg = f"Abstract: {abstract}\n\nWrite a title of 4 to 10 words for this abstract."
    if name:
        msg += f" The title must contain the name {name}."
    if rejected:
        msg += (f" Do not write \"{rejected[0]}\": {rejected[1]}. Use only words, names and "
                "numbers from the abstract.")
    return msg


_FILLER = re.compile(r"\b(?:A|An|The)\s+(?:Novel|New)\s+|\b(?:Novel|New)\s+", re.I)


def _shorter(title: str, name: str | None) -> list[str]:
    """Shorter readings of a title that is too long: without "A Novel", then "NAME: part" for
    each part between colons ("BEXA: Budgeted Exit Actor: A Novel Actor-Critic Architecture
    for ..." -> "BEXA: Budgeted Exit Actor")."""
    out = [_FILLER.sub("", title).strip()]
    parts = [p.strip() for p in title.split(":") if p.strip()]
    if len(parts) > 1:
        rest = [p for p in parts if not name or p.lower() != name.lower()]
        for part in rest:
            has_name = not name or name.lower() in part.lower()
            out.append(part if has_name else f"{name}: {part}")
            out.append(_FILLER.sub("", out[-1]).strip())
    return [t for t in dict.fromkeys(out) if t != title]


def write_title(generator: Generator, paper: Paper, settings: Settings,
                stop: threading.Event | None = None) -> TitleResult:
    """One paper's title from the model: checked, asked again once with the reason, else "".
    Setting `stop` ends the model call after its current token (the caller discards it)."""
    name = method_name(paper.text)
    rejected: list[str] = []
    last: tuple[str, str] | None = None
    for attempt in (1, 2):
        prompt = generator.format_chat(SYSTEM, _user(paper, name, settings.titles.prompt_words,
                                                     last))
        title = normalize(generator.generate(prompt, settings.titles.max_new_tokens, stop))
        if stop is not None and stop.is_set():
            return TitleResult("", False, attempt, tuple(rejected))
        if name and title:
            at = title.lower().find(name.lower())
            if at < 0:
                title = f"{name}: {title}"  # the name first, as titles often read
            else:  # "Prism" for PRISM: the abstract's own spelling
                title = title[:at] + name + title[at + len(name):]
        why = check_title(title, paper.clean, name)
        if why is None:
            return TitleResult(title, True, attempt, tuple(rejected))
        for shorter in _shorter(title, name):  # the model's own words, fewer of them
            if check_title(shorter, paper.clean, name) is None:
                return TitleResult(shorter, True, attempt, tuple(rejected))
        rejected.append(f"{title!r}: {why}")
        last = (title, why)
    log.info("%s: no title passed the check (%s); the label is shown", paper.id,
             "; ".join(rejected))
    return TitleResult("", False, 2, tuple(rejected))


@dataclass(frozen=True)
class TitlesRun:
    titles: Mapping[str, tuple[str, bool]]  # paper id -> (title, generated)
    generated: int  # papers that cost a model call in this run
    seconds: float


class _Halt(threading.Event):
    """The stop flag of one background title call: set when the server shuts down (`cancel`)
    or while a chat is being answered (`pause()`), so the chat gets the model's slots and the
    cores to itself. The generator only asks `is_set()`."""

    def __init__(self, cancel: threading.Event | None, pause: Callable[[], bool] | None) -> None:
        super().__init__()
        self._cancel, self._pause = cancel, pause

    def is_set(self) -> bool:
        return ((self._cancel is not None and self._cancel.is_set())
                or (self._pause is not None and self._pause()))


def assign_titles(settings: Settings, papers: Iterable[Paper], generator: Generator | None,
                  progress: Callable[[int, int], None] | None = None,
                  cancel: threading.Event | None = None,
                  pause: Callable[[], bool] | None = None) -> TitlesRun:
    """Titles for `papers`: from the cache, else from `generator` (when given and titles are
    enabled), else "". `progress(done, total)` is called as model calls finish. Setting
    `cancel` (a server shutting down) ends the model calls in flight and starts no more; what
    they wrote is not cached, so the next run asks again. While `pause()` is true (the server
    is answering a question) no call starts, the calls in flight end after their current
    token, and their papers are asked again once it is false."""
    t0 = time.perf_counter()
    papers = list(papers)
    if not settings.titles.enabled:
        return TitlesRun({p.id: ("", False) for p in papers}, 0, 0.0)
    cache = TitleCache(cache_path(settings))
    model_id = settings.generate.preset
    out: dict[str, tuple[str, bool]] = {}
    todo: list[Paper] = []
    for p in papers:
        hit = cache.get(title_key(p, model_id))
        if hit is not None:
            out[p.id] = hit
        else:
            out[p.id] = ("", False)
            todo.append(p)
    if not todo or generator is None:
        if todo:
            log.debug("%d papers have no cached title and no generator was given", len(todo))
        return TitlesRun(out, 0, time.perf_counter() - t0)

    log.info("writing titles for %d papers with the model", len(todo))
    failed = threading.Event()  # the engine itself failed: stop asking it, keep the labels
    done = 0
    lock = threading.Lock()

    def cancelled() -> bool:
        return cancel is not None and cancel.is_set()

    def one(p: Paper) -> None:
        nonlocal done
        while not failed.is_set() and not cancelled():
            if pause is not None and pause():
                time.sleep(0.2)  # a chat is being answered: wait until it is done
                continue
            halt = _Halt(cancel, pause)
            try:
                r = write_title(generator, p, settings, halt)
            except Exception as e:  # a model that cannot load or run: titles fall back
                if not failed.is_set():
                    log.warning("title generation failed (%s); papers keep their labels", e)
                failed.set()
                break
            if cancelled():
                return
            if halt.is_set():
                continue  # cut short by a chat: asked again after it
            cache.put(title_key(p, model_id), r.title, r.generated)
            out[p.id] = (r.title, r.generated)
            break
        with lock:
            done += 1
            if progress:
                progress(done, len(todo))

    workers = max(1, min(generator.parallel, len(todo)))
    if workers == 1:
        for p in todo:
            one(p)
    else:  # llama.cpp decodes its slots in one batch: several titles for the price of ~one
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, todo))
    return TitlesRun(out, len(todo), time.perf_counter() - t0)
