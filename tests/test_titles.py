"""Generated titles: the check against the abstract, the cache, and the real model."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rag.corpus import load_corpus, method_name
from rag.ingest import ingest
from rag.store import Store
from rag.titles import TitleCache, cache_path, check_title, normalize, title_key
from tests.conftest import DATA, SEEDS, make_settings

SVOO = load_corpus(SEEDS).by_id()["003-03"]


def test_a_good_title_passes():
    assert check_title("SVOO: Training-Free Sparse Attention for Fast Video Generation",
                       SVOO.clean, "SVOO") is None


@pytest.mark.parametrize("title,why", [
    ("SVOO: Sparse Attention Gives 3.5x Faster Video Generation", "number 3.5"),
    ("SVOO: Sparse Attention for Video Generation in 2026", "number 2026"),
    ("SVOO: Sparse Attention for FlashVideo Generation", "name FlashVideo"),
    ("SVOO Beats Sora at Sparse Video Attention", "name Sora"),
    ("Sparse Attention for Fast Video Generation", "name SVOO"),
    ("SVOO: Sparse Attention", "3 words"),
    ("SVOO: a very long title that keeps going on and on without end", "13 words"),
])
def test_a_title_with_what_the_abstract_lacks_is_rejected(title, why):
    reason = check_title(title, SVOO.clean, "SVOO")
    assert reason is not None and why in reason, reason


def test_title_case_words_are_not_names_but_numbers_from_the_abstract_are_fine():
    assert check_title("Unifying Sparse Attention Profiles Delivers 1.93× Speedup",
                       SVOO.clean) is None  # "Unifying": common English; 1.93: in the abstract


def test_normalize_strips_what_small_models_add():
    assert normalize('Title: "SVOO: Fast Sparse Video Attention."\nExplanation: ...') == \
        "SVOO: Fast Sparse Video Attention"
    assert normalize("**SVOO for fast video**") == "SVOO for fast video"


class NoModel:
    """Stands in for the generator where no model call may happen."""

    parallel = 1
    calls = 0

    def format_chat(self, *a: Any, **k: Any) -> str:
        raise AssertionError("a cached title must not cost a model call")

    def generate(self, *a: Any, **k: Any) -> str:
        raise AssertionError("a cached title must not cost a model call")


def test_cached_titles_reach_the_store_without_a_model_call(tmp_path, mini_seeds, embedder):
    s = make_settings(tmp_path / "data", mini_seeds, atlas={"enabled": False})
    papers = load_corpus(mini_seeds).papers
    cache = TitleCache(cache_path(s))
    for p in papers:
        cache.put(title_key(p, s.generate.preset), f"Cached title for {p.label} here", True)
    store = Store(s.store, s.paths.data)
    report = ingest(s, store, embedder, generator=NoModel())  # type: ignore[arg-type]
    assert report.titles_generated == 0
    got = {p.id: (p.title, p.title_generated) for p in store.papers()}
    assert got == {p.id: (f"Cached title for {p.label} here", True) for p in papers}
    off = make_settings(tmp_path / "data", mini_seeds, titles={"enabled": False},
                        atlas={"enabled": False})
    ingest(off, store, embedder, generator=NoModel())  # type: ignore[arg-type]
    assert {(p.title, p.title_generated) for p in store.papers()} == {("", False)}


class Counting:
    """The real generator, counting its calls."""

    def __init__(self, generator: Any) -> None:
        self.generator, self.calls = generator, 0
        self.parallel = generator.parallel

    def format_chat(self, *a: Any, **k: Any) -> Any:
        return self.generator.format_chat(*a, **k)

    def generate(self, *a: Any, **k: Any) -> str:
        self.calls += 1
        return str(self.generator.generate(*a, **k))


@pytest.mark.model
def test_real_model_titles_name_the_method_and_a_reingest_costs_no_call(tmp_path, embedder):
    from rag.config import load_settings
    from rag.generate import Generator

    seeds = tmp_path / "seeds"
    shutil.copytree(DATA / "titles", seeds)
    s = make_settings(tmp_path / "data", seeds, atlas={"enabled": False})
    store = Store(s.store, s.paths.data)
    gen = Counting(Generator(load_settings()))  # the configured engine, as `rag ingest` uses
    first = ingest(s, store, embedder, generator=gen)  # type: ignore[arg-type]
    assert first.titles_generated == 2 and 2 <= gen.calls <= 4  # one retry each at most
    papers = store.papers()
    for p in papers:
        if p.title_generated:
            assert check_title(p.title, p.clean, method_name(p.text)) is None, p.title
        else:
            assert p.title == ""  # the fallback: the UI shows the label
    assert any(p.title_generated for p in papers), [p.title for p in papers]
    svoo = next(p for p in papers if method_name(p.text) == "SVOO")
    assert not svoo.title_generated or "SVOO" in svoo.title
    print({p.id: p.title for p in papers})

    calls = gen.calls
    again = ingest(s, store, embedder, generator=gen)  # type: ignore[arg-type]
    assert gen.calls == calls and again.titles_generated == 0
    assert [(p.title, p.title_generated) for p in store.papers()] == \
        [(p.title, p.title_generated) for p in papers]
    assert Path(cache_path(s)).is_file()


def test_a_long_title_is_read_shorter_in_its_own_words():
    from rag.titles import _shorter

    bexa = load_corpus(SEEDS).by_id()["003-01"]
    long = "BEXA: Budgeted Exit Actor: A Novel Actor-Critic Architecture for Efficient Control"
    assert check_title(long, bexa.clean, "BEXA") is not None  # 11 words
    passing = [t for t in _shorter(long, "BEXA") if check_title(t, bexa.clean, "BEXA") is None]
    assert passing[0] == "BEXA: Budgeted Exit Actor: Actor-Critic Architecture for Efficient Control"
    assert all("BEXA" in t for t in _shorter(long, "BEXA"))


@pytest.mark.model
def test_the_server_titles_papers_the_ingest_left_untitled(tmp_path, embedder):
    """`make run` ingests with --no-titles; `rag serve` then writes the missing titles in the
    background (rag.ingest.write_missing_titles) with the real model, once."""
    from rag.config import load_settings
    from rag.generate import Generator
    from rag.ingest import write_missing_titles

    seeds = tmp_path / "seeds"
    shutil.copytree(DATA / "titles", seeds)
    s = make_settings(tmp_path / "data", seeds, atlas={"enabled": False})
    store = Store(s.store, s.paths.data)
    ingest(s, store, embedder)  # no generator: labels only
    assert not any(p.title for p in store.papers())
    gen = Counting(Generator(load_settings()))
    assert write_missing_titles(s, store, gen) == 2  # type: ignore[arg-type]
    titled = [p for p in store.papers() if p.title_generated]
    assert titled and all(check_title(p.title, p.clean, method_name(p.text)) is None
                          for p in titled)
    calls = gen.calls
    assert write_missing_titles(s, store, gen) == 0 and gen.calls == calls  # type: ignore[arg-type]


def test_titles_a_stopped_server_had_cached_reach_the_store_on_the_next_start(tmp_path, embedder):
    """SIGTERM can land after the last title was cached but before the store was written:
    the next start has nothing to generate, yet must still store those titles (and count
    them, so `rag serve` refreshes the chat and the index cache)."""
    from rag.ingest import write_missing_titles

    seeds = tmp_path / "seeds"
    shutil.copytree(DATA / "titles", seeds)
    s = make_settings(tmp_path / "data", seeds, atlas={"enabled": False})
    store = Store(s.store, s.paths.data)
    ingest(s, store, embedder)  # no generator: labels only
    papers = store.papers()
    cache = TitleCache(cache_path(s))
    for p in papers:  # what the stopped run left behind
        cache.put(title_key(p, s.generate.preset), f"Cached Title of {p.label}", True)
    assert write_missing_titles(s, store, None) == len(papers)  # type: ignore[arg-type]
    assert {p.title for p in store.papers()} == {f"Cached Title of {p.label}" for p in papers}
    assert write_missing_titles(s, store, None) == 0  # type: ignore[arg-type]


@pytest.mark.model
def test_background_titles_pause_while_a_question_is_answered(tmp_path):
    """`rag serve` titles papers while the chat is open; while a question is answered
    (`pause()` true) the calls in flight end and no call starts, so the chat has the model to
    itself; afterwards every paper is titled, the cut calls asked again."""
    import threading
    import time

    from rag.config import load_settings
    from rag.generate import Generator
    from rag.titles import assign_titles

    papers = list(load_corpus(SEEDS).by_id().values())[:6]
    s = make_settings(tmp_path / "data", atlas={"enabled": False})
    gen = Counting(Generator(load_settings()))
    answering, asked = threading.Event(), threading.Event()

    def progress(done: int, total: int) -> None:
        if not asked.is_set():  # a question arrives after the first whole title
            asked.set()
            answering.set()

    runs: list[Any] = []
    worker = threading.Thread(target=lambda: runs.append(
        assign_titles(s, papers, gen, progress, None, answering.is_set)))  # type: ignore[arg-type]
    worker.start()
    assert asked.wait(300), "no title finished"
    time.sleep(2)  # the calls in flight end after their current token
    calls, cached = gen.calls, len(TitleCache(cache_path(s)).entries)
    time.sleep(6)
    assert gen.calls == calls, "a title call started while a question was being answered"
    assert len(TitleCache(cache_path(s)).entries) == cached < len(papers)
    answering.clear()  # the answer is done: the titles go on
    worker.join(600)
    assert runs and not worker.is_alive()
    assert len(TitleCache(cache_path(s)).entries) == len(papers)
    assert sum(1 for t, _ in runs[0].titles.values() if t) >= len(papers) - 1


@pytest.mark.model
def test_cancelled_titles_end_the_calls_in_flight_and_are_not_cached(tmp_path):
    """`rag serve` titles papers in worker threads; its SIGTERM sets `cancel`. The calls in
    flight end after their current token, none starts after, and a title cut short is not
    cached (the next run asks again)."""
    import threading
    import time

    from rag.config import load_settings
    from rag.generate import Generator
    from rag.titles import assign_titles

    papers = list(load_corpus(SEEDS).by_id().values())[:12]
    s = make_settings(tmp_path / "data", atlas={"enabled": False})
    gen = Generator(load_settings())
    cancel = threading.Event()
    at: list[float] = []

    def progress(done: int, total: int) -> None:
        if not cancel.is_set():
            at.append(time.perf_counter())
            cancel.set()  # after the first whole title

    run = assign_titles(s, papers, gen, progress, cancel)
    ended = time.perf_counter()
    assert at, "no title finished"
    assert ended - at[0] < 15, f"{ended - at[0]:.1f} s to end the calls in flight"
    cached = TitleCache(cache_path(s)).entries
    assert 1 <= len(cached) <= gen.parallel < len(papers)  # only the first wave's whole titles
    assert sum(1 for t, _ in run.titles.values() if t) <= len(cached)
    again = assign_titles(s, papers, None)  # what a restart reads from the cache
    assert sum(1 for t, g in again.titles.values() if t or g) == \
        sum(1 for t, g in cached.values() if t or g)
