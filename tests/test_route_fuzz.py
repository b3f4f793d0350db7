"""Fuzzing the question-handling pure functions with hypothesis: cleaning, paper-finding cues,
comparison parsing, what-is-asked and acronym expansion never raise, and keep their contracts."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rag import compare as cmp
from rag.acronyms import expansion
from rag.corpus import load_corpus
from rag.guard import asked, missing_detail
from rag.phrases import CONTROL as _CONTROL
from rag.route import clean_question, finding_kind

PAPERS = list(load_corpus(Path(__file__).resolve().parent.parent / "seeds").by_id().values())
WORDS = st.sampled_from(["compare", "vs", "versus", "which", "papers", "paper", "is", "there",
                         "how", "does", "differ", "from", "and", "with", "SSL4RL", "TaRO", "the",
                         "what", "stand", "for", "many", "GPUs", "?", "work", "here", "x" * 50])
QUESTIONS = st.one_of(st.text(max_size=300), st.lists(WORDS, max_size=25).map(" ".join))


@settings(max_examples=300, deadline=None)
@given(QUESTIONS, st.integers(min_value=11, max_value=400))
def test_cleaning_caps_and_strips(text, limit):
    q, notice = clean_question(text, limit)
    assert len(q) <= limit and q == q.strip() and "\x00" not in q and "\u202e" not in q
    cleaned = " ".join(_CONTROL.sub(" ", text).split())
    assert bool(notice) == (len(cleaned) > limit)  # a cut is always said


@settings(max_examples=300, deadline=None)
@given(QUESTIONS)
def test_parsers_never_raise(text):
    assert finding_kind(text) in (None, "one", "many")
    request = cmp.parse_request(text)
    if request is not None:  # both sides present and bounded
        assert request.left and request.right and len(request.left) < 200 and len(request.right) < 200
    a = asked(text)
    assert a.kind in ("number", "expansion", "other") and len(a.head.split()) <= 3


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PAPERS), QUESTIONS, st.floats(0, 1))
def test_detail_and_expansion_never_raise(paper, text, similarity):
    found = expansion(text.strip()[:12] or "X", paper)
    if found is not None:
        long_form, start, end = found
        assert paper.clean[start:end] == long_form
    detail = missing_detail(text, paper, similarity, 0.45)
    assert detail is None or all(w in text.lower() for w in detail.split())  # words it asked


_NAMES = st.sampled_from(["Go", "Elo", "LLaVA", "CLIP", "RDP-to-f-DP", "e.g.", "(", ")", "or",
                          "such as", "SYSTEM", "OVERRIDE", "Wan 2.1", "ResNet-50", ",", "KCA"])
NAMED = st.one_of(QUESTIONS, st.lists(st.one_of(WORDS, _NAMES), max_size=25).map(" ".join))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PAPERS), NAMED)
def test_name_checks_never_raise_and_name_only_what_the_text_has(paper, text):
    from rag.names import absent_names, common_names, invented_names, paper_mentions

    by_id = {p.id: p for p in PAPERS}
    absent = absent_names(text, paper_mentions(paper), common_names(by_id))
    assert all(n in text for n in absent)  # words of the question, as written
    made_up = invented_names(text, [paper], common_names(by_id))
    assert all(n in text for n in made_up)
    assert invented_names(paper.clean[:300], [paper], common_names(by_id)) == []  # its own words
