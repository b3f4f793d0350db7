"""Comparison with the real pipeline: both sides resolved, every cell cited to its column."""

from __future__ import annotations

import re

import pytest

from rag import compare as cmp
from rag.evaluate import unsupported_numbers
from rag.export import comparison_markdown
from rag.types import Compared, Final, Sources, Token, Turn


@pytest.mark.parametrize("question,left,right", [
    ("Compare SSL4RL and TaRO", "SSL4RL", "TaRO"),
    ("How does BEXA differ from OGPO?", "BEXA", "OGPO"),
    ("HiMe vs LARA", "HiMe", "LARA"),
    ("What is the difference between PQL and RFM?", "PQL", "RFM"),
    ("Compare the attention-based defense against RAG poisoning with PaperGuard",
     "the attention-based defense against RAG poisoning", "PaperGuard"),
    ("and how does that compare with BEXA?", "that", "BEXA"),
])
def test_requests_are_recognised_without_a_model(question, left, right):
    assert cmp.parse_request(question) == cmp.Request(left, right)


@pytest.mark.parametrize("question", ["What is SSL4RL?", "Which papers use flow policies?",
                                      "How does BEXA decide when to exit?"])
def test_ordinary_questions_are_not_comparisons(question):
    assert cmp.parse_request(question) is None


def check_table(comp, left_id, right_id):
    assert comp.left.paper.id == left_id and comp.right.paper.id == right_id
    assert [r.aspect for r in comp.rows] == list(cmp.ASPECTS)
    for row in comp.rows:
        for cell, side in ((row.left, comp.left), (row.right, comp.right)):
            if cell.citation is None:
                assert cell.text == cmp.NOT_STATED_CELL
                continue
            assert cell.citation.paper_id == side.paper.id
            p = side.paper
            assert p.clean[cell.citation.start:cell.citation.end] == cell.citation.quote
            assert not unsupported_numbers(cell.text, [p.clean])
    filled = sum(c.citation is not None for r in comp.rows for c in (r.left, r.right))
    assert filled >= 6


def test_name_vs_name_table_without_the_model(assistant):
    comp = cmp.compare(assistant.parts, "SSL4RL", "TaRO")
    check_table(comp, "000-01", "003-14")
    code = comp.rows[-1]
    assert code.left.text == "https://github.com/PKU-ML/SSL4RL"


def test_description_vs_name(assistant):
    comp = cmp.compare(assistant.parts, "the attention-based defense against RAG poisoning",
                       "PaperGuard")
    check_table(comp, "004-06", "003-06")


def test_follow_up_comparison_uses_the_previous_paper(assistant):
    history = [Turn("What is OGPO?", "OGPO finetunes generative control policies [1].",
                    ("003-19",))]
    comp = cmp.compare(assistant.parts, "that", "BEXA", history)
    check_table(comp, "003-19", "003-01")


def test_unknown_ambiguous_and_same_sides(assistant):
    unknown = cmp.compare(assistant.parts, "SSL4RL", "AlphaFold")
    assert not unknown.rows and "AlphaFold" in unknown.message and "not find" in unknown.message
    same = cmp.compare(assistant.parts, "Budgeted EXit Actor", "BEXA")
    assert not same.rows and "same paper" in same.message and "003-01" in same.message
    nothing = cmp.compare(assistant.parts, "that", "BEXA", [])
    assert not nothing.rows


@pytest.mark.model
def test_streamed_comparison_with_synthesis_and_export(assistant):
    events = list(assistant.stream("Compare SSL4RL and TaRO"))
    kinds = [type(e) for e in events]
    assert kinds.index(Sources) < kinds.index(Compared) < kinds.index(Final)
    table_at = kinds.index(Compared)
    assert all(k is not Token for k in kinds[:table_at])  # the table comes before the model
    answer = events[-1].answer
    assert isinstance(events[-1], Final) and answer.comparison and not answer.abstained
    check_table(answer.comparison, "000-01", "003-14")
    for m in map(int, re.findall(r"\[(\d+)\]", answer.text)):
        assert m in (1, 2)
    md = comparison_markdown(answer, {p.id: p for p in assistant.papers()})
    assert "000-01" in md and "003-14" in md and "| Problem |" in md
    for c in answer.citations:
        assert c.quote in md


def test_unknown_side_in_chat_is_a_clear_message(assistant):
    events = list(assistant.stream("Compare SSL4RL with AlphaFold"))
    answer = events[-1].answer
    assert answer.abstained and answer.reason == "compare-unknown"
    assert "AlphaFold" in answer.text


@pytest.mark.parametrize("text,joint", [
    ("They both propose a reward-free alignment framework.", True),
    ("Both papers learn from pairwise preferences.", True),
    ("RACO and FB-PbRL are offline methods.", True),
    ("The two papers share a goal.", True),
    ("RACO aligns LLMs, while FB-PbRL trains control policies.", False),
    ("They differ in what they align.", False),
    ("FB-PbRL learns a forward-backward representation.", False),
    ("RACO improves results on both summarization and safety benchmarks.", False),
    ("RACO and FB-PbRL both learn from preferences.", True),
])
def test_a_claim_about_both_papers_is_recognised(text, joint):
    from rag.cite import joint_claim

    assert (joint_claim(text, ("RACO", "FB-PbRL")) is not None) is joint


def test_a_synthesis_claim_about_both_papers_needs_each_papers_sentence(assistant):
    """"They both propose RACO" was verified against RACO's abstract alone: a claim about both
    compared papers is supported only when each abstract has a sentence for it, and then it
    cites both."""
    from rag.cite import attach
    from rag.prompt import Passage

    papers = assistant.retriever.papers
    left, right = papers["000-09"], papers["004-18"]
    passages = [Passage(i, p.id, p.label, p.clean, ((0, len(p.clean)),))
                for i, p in ((1, left), (2, right))]
    fixed = {left.id: 1, right.id: 2}
    wrong = ("They both propose a Reward-free Alignment framework for Conflicted Objectives "
             "(RACO) that leverages pairwise preference data [1].")
    _, _, sents = attach(wrong, passages, papers, assistant.sentences, 0.45, fixed=fixed)
    assert not sents[0].supported
    alone = "RACO directly leverages pairwise preference data [1]."
    _, cites, sents = attach(alone, passages, papers, assistant.sentences, 0.45, fixed=fixed)
    assert sents[0].supported and {c.paper_id for c in cites} == {"000-09"}
    shared = "Both papers learn from pairwise preference data [1][2]."
    text, cites, sents = attach(shared, passages, papers, assistant.sentences, 0.45, fixed=fixed)
    assert sents[0].supported and sents[0].markers == (1, 2), text
    assert {c.paper_id for c in cites} == {"000-09", "004-18"}
