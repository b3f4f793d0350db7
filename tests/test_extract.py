"""Pure logic of the extractive answers (rag/extract.py): how an answer names its paper."""

from __future__ import annotations

from rag.extract import name_first, names_paper
from rag.types import Answer, AnswerSentence, Citation, Paper

TEXT = ("We propose SlimVerify, a speculative decoding scheme. SlimVerify-2 routes tokens to "
        "a smaller verifier and cuts rejections by 0.2.")


def _paper(pid: str = "900-01", label: str = "SlimVerify", text: str = TEXT) -> Paper:
    return Paper(id=pid, label=label, text=text, clean=text, source="t.txt", position=1,
                 line=2, collection="test", content_hash=pid)


PAPERS = {"900-01": _paper(), "900-02": _paper("900-02", "Other work", "We study other things.")}


def _answer(text: str, *ids: str, abstained: bool = False) -> Answer:
    cites = tuple(Citation(1, i, PAPERS[i].label, f"{i}#0", "q", 0, 5, True, 0.9) for i in ids)
    return Answer(question="q", text=text, citations=cites, hits=(), abstained=abstained,
                  sentences=(AnswerSentence(text.replace(" [1]", ""), (1,), True),))


def test_an_answer_that_never_names_its_one_paper_starts_with_its_name():
    a = name_first(_answer("the scheme cuts rejections by 0.2. [1]", "900-01"), PAPERS,
                   "How much does the speculative decoding paper cut rejections?")
    assert a.text == "SlimVerify (900-01): The scheme cuts rejections by 0.2. [1]"
    assert a.sentences[0].text == "SlimVerify (900-01): The scheme cuts rejections by 0.2."


def test_a_named_paper_several_papers_or_a_decline_are_left_alone():
    said = _answer("SlimVerify cuts rejections by 0.2. [1]", "900-01")
    assert name_first(said, PAPERS, "How much?") == said  # the answer names it
    asked = _answer("It cuts rejections by 0.2. [1]", "900-01")
    assert name_first(asked, PAPERS, "How much does slimverify cut?") == asked  # the question
    # a technical word the abstract writes names no paper: the answer still says which one
    labelled = {**PAPERS, "900-01": _paper(label="Speculative decoding scheme")}
    coined = _answer("They cut rejections by 0.2. [1]", "900-01")
    assert name_first(coined, labelled, "How much does the SlimVerify-2 variant cut?").text \
        .startswith("Speculative decoding scheme (900-01): They cut")
    two = _answer("Both do. [1]", "900-01", "900-02")
    assert name_first(two, PAPERS, "Which ones?") == two
    no = _answer("The abstract does not state this [1].", "900-01", abstained=True)
    assert name_first(no, PAPERS, "How much?") == no


def test_names_paper_reads_the_id_label_and_coined_words_of_the_name():
    p = _paper(label="Task-aware routing strategy")
    assert names_paper("see 900-01", p) and names_paper("the task-aware routing strategy", p)
    assert not names_paper("a routing scheme", p)
