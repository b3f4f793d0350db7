"""Acronyms spelled out once, as the cited abstract defines them (rag/gloss.py, acronyms.defined):
the definition finder, the first-use gloss, and the real assistant's answers."""

from __future__ import annotations

import re

import pytest

from rag import acronyms
from rag.gloss import definitions, gloss, gloss_text
from rag.types import Answer, AnswerSentence, Citation, Paper

ABSTRACT = ("Multi-modal Large Language Models (MLLMs) struggle with charts. We train them with "
            "self-supervised learning (SSL) and reinforcement learning (RL). Our method, "
            "ChartRL, uses RL with SSL rewards; the GPU budget (GPU) is small. See also the "
            "XYZ benchmark (XYZ).")


def _paper(text: str = ABSTRACT) -> Paper:
    return Paper(id="900-02", label="ChartRL", text=text, clean=text, source="t.txt",
                 position=1, line=2, collection="test", content_hash="y")


@pytest.mark.parametrize("acronym,long_form", [
    ("SSL", "self-supervised learning"),  # hyphenated parts give one letter each
    ("MLLMs", "Multi-modal Large Language Models"),  # plural, a hyphenated first word
    ("RL", "reinforcement learning"),
    ("GPU", None),  # "(GPU)" after words that do not spell it: no definition
    ("XYZ", None),
    ("ChartRL", None),
])
def test_defined_finds_only_definitions_in_so_many_words(acronym, long_form):
    found = acronyms.defined(acronym, _paper())
    assert (found[0] if found else None) == long_form
    if found:
        assert ABSTRACT[found[1]:found[2]] == long_form


@pytest.mark.parametrize("acronym,long_form", [
    ("FIRE-BENCH", "Full-cycle Insight Rediscovery Evaluation"),  # the part before the hyphen
    ("TaRO", "Temporal-Aware Reasoning Optimization"),
    ("QBench", None),  # parentheses after it that do not spell it
])
def test_defined_reads_a_long_form_in_parentheses_after_the_name(acronym, long_form):
    text = ("We introduce FIRE-BENCH (Full-cycle Insight Rediscovery Evaluation), a benchmark, "
            "and TaRO (Temporal-Aware Reasoning Optimization), a method. QBench (see Table 2) "
            "is older.")
    found = acronyms.defined(acronym, _paper(text))
    assert (found[0] if found else None) == long_form
    if found:
        assert text[found[1]:found[2]] == long_form


def test_a_definition_before_the_acronym_wins_over_parentheses_after_it():
    text = "Predictive Coding (PC) is old. Our PC (Parallel Circuit) variant is new."
    assert acronyms.defined("PC", _paper(text))[0] == "Predictive Coding"


def test_gloss_text_spells_out_the_first_use_only():
    defined = definitions([_paper()])
    assert set(defined) == {"MLLM", "SSL", "RL"}
    out = gloss_text("ChartRL turns SSL objectives into RL rewards; RL then trains MLLMs. "
                     "SSL4RL is another method.", defined, set())
    assert out == ("ChartRL turns SSL (self-supervised learning) objectives into RL "
                   "(reinforcement learning) rewards; RL then trains MLLMs (Multi-modal Large "
                   "Language Models). SSL4RL is another method.")
    # already explained in parentheses: left alone
    assert gloss_text("RL (the learner) helps.", defined, set()) == "RL (the learner) helps."


def test_a_paper_name_leading_a_line_is_left_as_written():
    """"Name (id): ..." leads a quoted answer's line: the name is a title, glossed it read
    "Context in LDVLMs (Large ...): A Study (004-11)"; the quote after it is glossed."""
    defined = definitions([_paper()])
    out = gloss_text("Charts for MLLMs: A Study (900-02): MLLMs fail on charts. [1]\n"
                     "- RL Tricks (900-03): RL helps.", defined, set())
    assert out == ("Charts for MLLMs: A Study (900-02): MLLMs (Multi-modal Large Language "
                   "Models) fail on charts. [1]\n- RL Tricks (900-03): RL (reinforcement "
                   "learning) helps.")


def _answer(text: str, sentences: tuple[AnswerSentence, ...]) -> Answer:
    cite = Citation(1, "900-02", "ChartRL", "900-02#0", "q", 0, 10, True, 0.9)
    return Answer(question="q", text=text, citations=(cite,), hits=(), abstained=False,
                  sentences=sentences)


def test_gloss_keeps_text_and_sentences_in_step():
    s1, s2 = "ChartRL uses SSL rewards.", "SSL and RL are combined."
    a = gloss(_answer(f"{s1} [1] {s2} [1]", (AnswerSentence(s1, (1,), True),
                                              AnswerSentence(s2, (1,), True))),
              {"900-02": _paper()})
    assert a.text == ("ChartRL uses SSL (self-supervised learning) rewards. [1] SSL and RL "
                      "(reinforcement learning) are combined. [1]")
    pos = 0  # every sentence is found, in order, in the text (the renderer relies on it)
    for s in a.sentences:
        pos = a.text.index(s.text, pos) + len(s.text)
    # spelled out already: nothing added; an abstained answer is never touched
    done = _answer("Self-supervised learning (SSL) helps.", ())
    assert gloss(done, {"900-02": _paper()}).text == done.text


def test_real_answers_spell_out_the_acronyms_their_abstracts_define(assistant):
    """Whatever the model writes, each acronym a cited abstract defines comes with its long
    form; before rag/gloss.py, "SSL objectives" reached the user unexplained."""
    answer = assistant.ask("Which kind of signal does SSL4RL turn into rewards for its "
                           "vision-language model?")
    assert not answer.abstained and "000-01" in {c.paper_id for c in answer.citations}
    cited = [assistant.retriever.papers[c.paper_id] for c in answer.citations]
    defined = definitions(cited)
    used = {a for a in defined if re.search(rf"(?<![\w-]){a}s?(?![\w-])", answer.text)}
    assert used, answer.text  # the answer uses at least one (SSL, RL or VLM)
    for a in used:
        assert defined[a].lower() in answer.text.lower(), (a, answer.text)
