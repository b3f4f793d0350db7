"""ui/paging.py: the Papers tab's pages and filter (pure
logic, no browser, no models); and the compare pickers' updates at a large corpus."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.ui_fakes import PAPERS, FakeAssistant, make_paper
from ui import paging, render


def synthetic(n: int) -> list[Any]:
    return [make_paper(f"{100 + i // 100:03d}-{i % 100:02d}", f"Method{i}",
                       f"Abstract {i}. We study topic{i % 7} with care.") for i in range(n)]


@given(st.integers(0, 300), st.integers(-5, 20), st.integers(1, 60))
def test_page_of_partitions_rows(n: int, page: int, size: int) -> None:
    rows = list(range(n))
    pg = paging.page_of(rows, page, size)
    assert pg.total == n and pg.pages >= 1 and 1 <= pg.page <= pg.pages
    assert len(pg.rows) <= size
    assert pg.pages == max(1, -(-n // size))
    if page < 1:
        assert pg.page == 1
    if page > pg.pages:
        assert pg.page == pg.pages
    # every row is on exactly one page, in order
    seen = [r for p in range(1, pg.pages + 1) for r in paging.page_of(rows, p, size).rows]
    assert seen == rows


def test_page_of_examples() -> None:
    rows = list(range(120))
    assert paging.page_of(rows, 1, 50).rows == list(range(50))
    last = paging.page_of(rows, 3, 50)
    assert (last.rows, last.page, last.pages, last.total) == (list(range(100, 120)), 3, 3, 120)
    assert paging.page_of(rows, 99, 50).page == 3
    empty = paging.page_of([], 4, 50)
    assert (empty.rows, empty.page, empty.pages, empty.total) == ([], 1, 1, 0)


def test_filter_matches_id_label_title_and_abstract_case_insensitive() -> None:
    found = paging.filter_papers(PAPERS, "taro DATASETS")  # label + abstract words
    assert [p.id for p in found] == ["003-14"]
    assert [p.id for p in paging.filter_papers(PAPERS, "000-01")] == ["000-01"]
    assert [p.id for p in paging.filter_papers(PAPERS, "LEAKAGE")] == ["004-09"]
    assert paging.filter_papers(PAPERS, "nothing-like-this") == []
    assert paging.filter_papers(PAPERS, "   ") == PAPERS
    # the same papers as the table's previous filter (render.paper_rows)
    for q in ("rl", "table", "we", "fake", "leak@k", "xyz"):
        assert [p.id for p in paging.filter_papers(PAPERS, q)] == \
            [r[0] for r in render.paper_rows(PAPERS, q)]


@given(st.text(alphabet="abcdeMtopic0123456789- ", max_size=12), st.integers(1, 9))
def test_page_papers_is_filter_then_page(query: str, page: int) -> None:
    papers = synthetic(230)
    pg = paging.page_papers(papers, query, page, 25)
    found = paging.filter_papers(papers, query)
    assert pg.total == len(found)
    assert pg.rows == found[(pg.page - 1) * 25: pg.page * 25]
    words = query.lower().split()
    for p in pg.rows:
        hay = f"{p.id} {p.label} {p.source} {p.clean}".lower()
        assert all(w in hay for w in words)


def test_count_line_round_trips_the_page() -> None:
    pg = paging.page_of(list(range(120)), 2, 50)
    line = paging.count_line(pg, 1000)
    assert line == "120 of 1000 papers · page 2 of 3"
    assert paging.shown_page(line) == 2
    assert paging.shown_page("") == 1 and paging.shown_page(None) == 1
    assert paging.shown_page("⚠ the index is missing") == 1


class Counting:
    def __init__(self, papers: list[Any]) -> None:
        self.list = papers
        self.calls = 0

    def __call__(self) -> list[Any]:
        self.calls += 1
        return list(self.list)


def test_catalog_rebuilds_when_the_registry_changes_and_remembers_filters() -> None:
    src = Counting(synthetic(300))
    cat = paging.Catalog(src)
    pg, corpus = cat.page("topic3", 2, 10)
    assert corpus == 300 and pg.page == 2
    assert pg.rows == paging.page_papers(src.list, "topic3", 2, 10).rows
    first, _ = cat.filter("topic3")
    again, _ = cat.filter("TOPIC3 ")
    assert again is first  # remembered: turning a page does not filter again
    src.list = [*src.list, make_paper("999-99", "Zebra", "A new paper about topic3.")]
    after, corpus = cat.filter("topic3")
    assert corpus == 301 and after[-1].id == "999-99"  # not the remembered list


def test_catalog_is_one_per_assistant() -> None:
    a, b = FakeAssistant(), FakeAssistant()
    assert paging.catalog(a) is paging.catalog(a)
    assert paging.catalog(a) is not paging.catalog(b)
    assert [p.id for p in paging.catalog(a).papers()] == [p.id for p in PAPERS]


class Large(FakeAssistant):
    """The scripted assistant with `n` papers."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.many = PAPERS + synthetic(n - len(PAPERS))
        self.by_id = {p.id: p for p in self.many}

    def papers(self) -> list[Any]:
        return sorted(self.many, key=lambda p: p.id)

    def paper(self, pid: str) -> Any:
        return self.by_id.get(pid)


def test_pickers_list_every_paper_only_for_a_small_corpus() -> None:
    from ui.compare_tab import picked, picker_choices

    small = FakeAssistant()
    d = picker_choices(small)
    assert len(d.choices) == len(PAPERS) and not d.allow_custom_value
    assert picked(small, "003-14").value == "003-14"
    at_limit = Large(paging.PICKER_LIMIT)
    assert len(picker_choices(at_limit).choices) == paging.PICKER_LIMIT
    big = Large(paging.PICKER_LIMIT + 1)
    d = picker_choices(big)
    assert d.choices == [] and d.allow_custom_value  # free text: no paper list is sent
    assert f"{paging.PICKER_LIMIT + 1} papers" in d.info
    p = picked(big, "003-14")
    assert p.value == "003-14" and p.choices == [("003-14 · TaRO", "003-14")]
    assert picked(big, "nope").value == "nope"
