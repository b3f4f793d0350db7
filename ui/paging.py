"""Paging and filtering the paper list, so that at 100k papers only one page of rows of the
Papers tab goes to the browser (and the compare pickers know when the corpus is too large to
list). Pure logic, no
Gradio: ui/papers_tab.py and ui/compare_tab.py call it, tests/test_ui_paging.py tests it.

`Catalog` keeps the registry in id order with each paper's lowercase search keys, rebuilt only
when the assistant's registry changes (an ingest or upload replaces its Paper objects), and
remembers the last few filters, so turning pages does not filter 100k papers again.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rag.types import Paper
from ui import render

T = TypeVar("T")

PAGE_SIZE = 50  # rows of the Papers tab sent at once
PICKER_LIMIT = 500  # up to this many papers, each compare picker lists them all (as before)


@dataclass(frozen=True)
class Page(Generic[T]):
    rows: list[T]  # the rows of this page only
    page: int  # 1-based, clamped to 1..pages
    pages: int  # >= 1 (an empty list is one empty page)
    total: int  # rows matched, on all pages


def page_of(rows: Sequence[T], page: int, size: int = PAGE_SIZE) -> Page[T]:
    """Page `page` (1-based; out of range is clamped to the first or last) of `rows`."""
    size = max(1, int(size))
    total = len(rows)
    pages = max(1, math.ceil(total / size))
    page = min(max(1, int(page)), pages)
    start = (page - 1) * size
    return Page(list(rows[start:start + size]), page, pages, total)


def short_key(p: Paper) -> str:
    """What a paper is found by when typing a name: id, label, title (lowercase)."""
    return f"{p.id} {p.label} {render.display_name(p)}".lower()


def matches(p: Paper, words: Sequence[str], key: str | None = None) -> bool:
    """Every word (lowercase) in the paper's id, label, title, file name or abstract; the
    abstract, the long part, is lowered only when the short key lacks a word."""
    key = short_key(p) if key is None else key
    rest: str | None = None
    for w in words:
        if w in key:
            continue
        if rest is None:
            rest = f"{p.source} {p.clean}".lower()
        if w not in rest:
            return False
    return True


def filter_papers(papers: Sequence[Paper], query: str) -> list[Paper]:
    words = (query or "").lower().split()
    if not words:
        return list(papers)
    return [p for p in papers if matches(p, words)]


def page_papers(papers: Sequence[Paper], query: str, page: int,
                size: int = PAGE_SIZE) -> Page[Paper]:
    """The papers matching every word of `query`, and page `page` of them."""
    return page_of(filter_papers(papers, query), page, size)


def count_line(pg: Page[Any], corpus: int) -> str:
    """'3 of 57 papers · page 1 of 1': read back by `shown_page`."""
    return f"{pg.total} of {corpus} papers · page {pg.page} of {pg.pages}"


_PAGE = re.compile(r"· page (\d+) of \d+\s*$")


def shown_page(count: str | None) -> int:
    """The page a count line says is shown (1 when it says none). The Papers tab keeps no
    page state of its own: whatever refreshes the table (start, an upload) writes this line
    too, so the previous/next buttons always step from the page on screen."""
    m = _PAGE.search(count or "")
    return int(m.group(1)) if m else 1


class Catalog:
    """The assistant's papers in id order with their short keys; shared by every session."""

    def __init__(self, source: Callable[[], Sequence[Paper]], remember: int = 8) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._papers: list[Paper] = []
        self._keys: list[str] = []
        self._found: OrderedDict[str, list[Paper]] = OrderedDict()
        self._remember = remember

    def _snapshot(self) -> tuple[list[Paper], list[str]]:
        """The current registry and its keys (rebuilt when the registry changed)."""
        fresh = list(self._source())
        with self._lock:
            same = len(fresh) == len(self._papers) and all(
                a is b for a, b in zip(fresh, self._papers, strict=True))
            if not same:
                self._papers, self._keys = fresh, [short_key(p) for p in fresh]
                self._found.clear()
            return self._papers, self._keys

    def papers(self) -> list[Paper]:
        return self._snapshot()[0]

    def filter(self, query: str) -> tuple[list[Paper], int]:
        """(papers matching every word of `query`, size of the corpus)."""
        papers, keys = self._snapshot()
        words = (query or "").lower().split()
        if not words:
            return papers, len(papers)
        key = " ".join(words)
        with self._lock:
            if self._papers is papers and key in self._found:
                self._found.move_to_end(key)
                return self._found[key], len(papers)
        found = [p for p, k in zip(papers, keys, strict=True) if matches(p, words, k)]
        with self._lock:
            if self._papers is papers:
                self._found[key] = found
                while len(self._found) > self._remember:
                    self._found.popitem(last=False)
        return found, len(papers)

    def page(self, query: str, page: int, size: int = PAGE_SIZE) -> tuple[Page[Paper], int]:
        """(page `page` of the papers matching `query`, size of the corpus)."""
        found, corpus = self.filter(query)
        return page_of(found, page, size), corpus


_CATALOGS: weakref.WeakKeyDictionary[Any, Catalog] = weakref.WeakKeyDictionary()
_CATALOGS_LOCK = threading.Lock()


def catalog(assistant: Any) -> Catalog:
    """The one Catalog of `assistant` (its `papers()` in id order)."""
    with _CATALOGS_LOCK:
        c = _CATALOGS.get(assistant)
        if c is None:
            ref = weakref.ref(assistant)  # the catalog must not keep its assistant alive

            def source() -> Sequence[Paper]:
                a = ref()
                return a.papers() if a is not None else []

            c = _CATALOGS[assistant] = Catalog(source)
        return c
