"""Every part of a question answered (rag/cover.py): the parts, the left-out words, and the
abstract sentence that supplies them, on the real embedder and the real assistant."""

from __future__ import annotations

import pytest

from rag import cover
from rag.evidence import SentenceIndex
from rag.types import Paper

ABSTRACT = ("We study repeated games between two learners. Our method, TwinPlay, reaches an "
            "equilibrium in 40 rounds. It is evaluated on poker and on auctions.")


def _paper(text: str = ABSTRACT, label: str = "TwinPlay") -> Paper:
    return Paper(id="900-01", label=label, text=text, clean=text, source="t.txt", position=1,
                 line=2, collection="test", content_hash="x")


@pytest.mark.parametrize("question,n", [
    ("What is TwinPlay and how is it evaluated?", 2),
    ("Why does it fail, and what fix was proposed?", 2),
    ("What is TwinPlay? Where is it tested?", 2),
    ("How much compression and throughput gain does it report?", 1),  # one question, two nouns
    ("What does TwinPlay do?", 1),
])
def test_parts_split_questions_not_noun_phrases(question, n):
    assert len(cover.parts(question)) == n


def test_stems_match_word_forms_and_skip_framing_words():
    assert cover.stems("measurable rewards") == cover.stems("measure reward")
    assert not cover.stems("the paper proposes a method")


def test_left_out_counts_only_words_the_abstract_has():
    p = _paper()
    # "evaluated" is in the abstract and not in the answer; "latency" is in neither abstract nor answer
    assert cover.left_out("How is TwinPlay evaluated, and what is its latency?",
                          "TwinPlay reaches an equilibrium.", p) == cover.stems("evaluated")
    assert not cover.left_out("How fast is TwinPlay?", "In 40 rounds.", p)  # its own name never counts


def test_complement_finds_the_sentence_for_the_part_left_out(embedder):
    p, index = _paper(), SentenceIndex(embedder)
    found = cover.complement(p, "How many rounds does TwinPlay need, and how is it evaluated?",
                             "TwinPlay reaches an equilibrium in 40 rounds.", index)
    assert [p.clean[e.start:e.end] for e in found] == ["It is evaluated on poker and on auctions."]
    # nothing left out: nothing added
    assert not cover.complement(p, "How many rounds does TwinPlay need?",
                                "TwinPlay reaches an equilibrium in 40 rounds.", index)


def test_paper_finding_answer_also_answers_the_second_part(assistant):
    """'Which paper …, and how many …?' is answered from the index (no model): the paper, its
    matching sentences, and the sentence for the second ask; all quoted, all cited."""
    from rag.prompt import strip_markers
    from rag.types import Final, Token

    q = ("Which paper measures whether prompt-injection defenses still preserve untrusted text, "
         "and how many configurations did it test?")
    streamed, final = "", None
    for ev in assistant.stream(q):
        if isinstance(ev, Token):
            streamed += ev.text
        elif isinstance(ev, Final):
            final = ev.answer
    assert final is not None and final.intent == "find" and not final.abstained
    paper = next(p for p in assistant.papers() if p.label == "SecFid")
    assert {c.paper_id for c in final.citations} == {paper.id}
    assert all(c.quote in paper.clean for c in final.citations)
    assert "48 configurations" in final.text
    assert strip_markers(final.text).strip() == streamed.strip()
