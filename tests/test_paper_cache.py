"""The paper cache (rag/paper_cache.py): each abstract's prompt prefilled once into llama.cpp's
host prompt cache, so a question about that paper prefills only its own words. Real engine
(the prebuilt wheel on the 0.5B file), real index; the questions are this file's own."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from rag import paper_cache
from rag.assistant import Assistant
from rag.chunk import sentence_spans
from rag.generate import Generator
from rag.prompt import paper_prefix, select_passages, user_message
from tests.test_engines import with_generate

pytestmark = pytest.mark.model


def test_a_paper_prefix_starts_every_prompt_that_holds_its_whole_abstract(retriever):
    """What is prefilled is byte for byte how the answer path's user message begins."""
    papers = retriever.papers
    for paper in papers.values():
        passages = select_passages([], papers, 10_000, 3, first=(paper.id,),
                                   rank=lambda p: sentence_spans(p.clean)[::-1])
        assert user_message("Which datasets?", passages).startswith(paper_prefix(paper) + "\n\n")


@pytest.fixture(scope="module")
def cached(settings, embedder, retriever) -> Iterator[Assistant]:
    s = with_generate(settings, engine="llama.cpp", preset="qwen2.5-0.5b", parallel=2)
    gen = Generator(s)
    yield Assistant(s, retriever.store, embedder, retriever, gen)
    gen.engine.close()  # type: ignore[attr-defined]


def _paper(a: Assistant, label: str):
    return next(p for p in a.papers() if p.label.startswith(label))


def test_a_question_about_a_cached_paper_prefills_only_its_own_words(cached):
    ssl, bexa = _paper(cached, "SSL4RL"), _paper(cached, "BEXA")
    run = paper_cache.warm(cached.settings, cached.generator, [ssl, bexa])
    assert (run.sent, run.skipped) == (2, "")
    again = paper_cache.warm(cached.settings, cached.generator, [ssl])
    assert again.cached == 1  # restored from the host cache, not prefilled again

    hit = cached.ask("In SSL4RL, which kinds of self-supervised tasks end up as reward signals?")
    assert ssl.id in {c.paper_id for c in hit.citations if c.supported}, hit.text
    assert hit.prompt_tokens - hit.cached_prompt_tokens <= 40, (hit.prompt_tokens,
                                                                  hit.cached_prompt_tokens)
    # a paper whose prompt was not cached shares only the system prompt with the cache
    miss = cached.ask("How does Holmes treat the similarity between a video and a query?")
    assert miss.prompt_tokens - miss.cached_prompt_tokens > 150, (miss.prompt_tokens,
                                                                    miss.cached_prompt_tokens)


def test_the_cache_takes_what_fits_and_is_not_filled_when_off_or_cancelled(cached):
    papers = cached.papers()
    gen = cached.generator
    # a host cache too small for all: the first papers that fit, and how to fit the rest
    run = paper_cache.warm(with_generate(cached.settings, host_cache_mib=16), gen, papers)
    assert 0 < run.sent < 5 and "raise it to >=" in run.note, run
    assert "raise it to >=" in paper_cache.warm(
        with_generate(cached.settings, host_cache_mib=2), gen, papers).skipped
    # the 1.5B's 200-token passage budget cuts every seed abstract to the question's sentences
    cut = cached.settings.model_copy(update={"answer": cached.settings.answer.model_copy(
        update={"context_tokens": 200})})
    assert "no abstract fits whole" in paper_cache.warm(cut, gen, papers).skipped
    off = paper_cache.warm(with_generate(cached.settings, paper_cache=False), gen, papers)
    assert off.sent == 0 and "paper_cache is off" in off.skipped
    stop = threading.Event()
    stop.set()
    assert paper_cache.warm(cached.settings, gen, papers, cancel=stop).sent == 0
