"""The second look (Finisher.second_look): when the model declines, it is asked again over
only the paper's best-matching sentences, on the real model; kept only when the abstract
backs the answer."""

from __future__ import annotations

import pytest

from rag import guard
from rag.finish import Case
from rag.prompt import strip_markers


def test_a_fact_the_abstract_states_is_found_in_the_focused_passage(assistant):
    papers = assistant.retriever.papers
    q = "On how many datasets was the DefensiveKV selection algorithm evaluated?"
    answer = assistant.finisher.second_look(Case(q, papers, closest=("000-19",)), "000-19")
    assert answer is not None and not answer.abstained and answer.reason == "second-look"
    assert "29" in strip_markers(answer.text), answer.text
    assert {c.paper_id for c in answer.citations} == {"000-19"}
    assert all(c.supported for c in answer.citations)


def test_nothing_without_a_known_paper(assistant):
    papers = assistant.retriever.papers
    assert assistant.finisher.second_look(Case("How many datasets?", papers), None) is None
    assert assistant.finisher.second_look(Case("How many datasets?", papers), "999-99") is None


def test_a_detail_no_abstract_states_is_still_declined(assistant):
    """The guard and the second look together: a GPU count DefensiveKV never gives is not
    answered with another number of its abstract (three LLMs, 29 datasets)."""
    answer = assistant.ask("How many GPUs were used for the DefensiveKV experiments?")
    assert answer.abstained, answer.text


def test_a_question_answered_by_names_gets_the_names(assistant):
    """"Which two architectures" is answered by the abstract's names (LLaMA-7B, Swin
    Transformer), however the first draft went: copied passage, label, or prose."""
    answer = assistant.ask("On which two architectures did the CGC experiments run?")
    text = strip_markers(answer.text)
    assert not answer.abstained, answer.text
    assert "LLaMA" in text and "Swin" in text, answer.text
    assert "000-18" in {c.paper_id for c in answer.citations if c.supported}


def test_benchmarks_an_abstract_never_names_are_not_stated(assistant):
    """TaRO's abstract speaks of "VTG benchmarks" but names none: the category word is no
    benchmark's name, so the question is declined rather than answered with it. (A draft of
    the bare acronym, "VTG [1]", still passes for a name: a known gap.)"""
    answer = assistant.ask("Which benchmarks does TaRO evaluate on?")
    assert answer.abstained, answer.text


def test_a_quoted_answer_is_the_sentence_that_names_what_was_asked(assistant):
    """The rescue quotes, of the sentences scoring nearly as well as the best, the one that
    names the asked thing: the hypergraph paper's introduction sentence scores a hair above
    the one giving its "variational inference algorithm"."""
    papers = assistant.retriever.papers
    q = ("What sort of inference algorithm lets the Bayesian hypergraph disease framework "
         "scale to big EHR data?")
    answer = assistant.finisher.rescue(Case(q, papers, closest=("000-14",)), "000-14")
    assert answer is not None and answer.reason == "extracted"
    assert "variational inference algorithm" in answer.text, answer.text


def test_the_names_the_abstract_lists_are_quoted(assistant):
    """When a draft names none of what was asked and the abstract lists them
    (Finisher.member, on the real sentence index): "which games" is answered by the
    sentence listing them, not by one that only says "games"."""
    papers = assistant.retriever.papers
    q = "Which games did the agent of the reverse-KL policy optimisation paper learn to play?"
    member = assistant.finisher.member(Case(q, papers, closest=("004-05",)), papers["004-05"])
    assert member is not None and "Othello" in member.text, member
    assert {c.paper_id for c in member.citations} == {"004-05"}
    # nothing listed beside the asked noun: no quote
    fedscar = Case("Which method does FedScar propose?", papers, closest=("004-16",))
    assert assistant.finisher.member(fedscar, papers["004-16"]) is None


def test_the_members_an_abstract_lists_after_the_asked_phrase_are_quoted(assistant):
    """The rescue of a low-light video question: the abstract's best sentence only says
    "auxiliary modalities may be unavailable"; the one listing them ("..., such as event
    streams and infrared images") is quoted instead."""
    papers = assistant.retriever.papers
    q = "What auxiliary modalities does AMNet's dark-video work name as examples?"
    answer = assistant.finisher.rescue(Case(q, papers, closest=("000-16",)), "000-16")
    assert answer is not None and not answer.abstained, answer
    text = strip_markers(answer.text)
    assert "event streams" in text and "infrared" in text, answer.text
    assert {c.paper_id for c in answer.citations} == {"000-16"}


def test_bare_markers_for_a_detail_are_answered_from_the_first_pointed_paper(assistant):
    """A draft of bare markers ("[1] [2]") to a detail question is the model pointing: the
    answer is the first pointed paper's sentence with the asked number, not a list of the
    pointed papers (a list answers "which papers", not "what speedup")."""
    from rag.prompt import Passage

    papers = assistant.retriever.papers
    q = ("What speedup does the sparse attention method that profiles each layer of a video "
         "diffusion transformer offline reach at most?")
    passages = [Passage(n, pid, papers[pid].label, papers[pid].clean[:400], ((0, 400),))
                for n, pid in enumerate(("003-03", "000-19"), start=1)]
    answer = assistant.finisher.finish(Case(q, papers), "[1] [2]", passages)
    assert {c.paper_id for c in answer.citations} == {"003-03"}, answer.text
    assert not answer.abstained and "1.93" in strip_markers(answer.text), answer.text


def test_a_number_the_question_gave_is_not_its_answer(assistant):
    """DeltaStack's abstract gives its 760M-parameter scale and no batch size: an answer
    whose only number is the question's "760M" is declined."""
    answer = assistant.ask("What batch size trained DeltaStack's 760M-parameter language model?")
    assert answer.abstained, answer.text


def test_a_draft_copied_from_a_neighbouring_passage_is_redone_over_the_best_paper(assistant):
    """A question naming no paper, drafted from the second passage's abstract (the small
    model copies a neighbour): the model is asked again over the best retrieved paper's own
    sentences, and the answer cites that paper, not the one the draft copied."""
    from rag.prompt import Passage

    papers = assistant.retriever.papers
    best, other = papers["000-19"], papers["004-07"]
    passages = [Passage(n, p.id, p.label, p.clean, ((0, len(p.clean)),))
                for n, p in ((1, best), (2, other))]
    q = "On how many datasets was the KV cache entry selection algorithm evaluated?"
    copied = next(s for s in other.clean.split(". ") if "speedup" in s)
    answer = assistant.finisher.finish(Case(q, papers), copied + ". [2]", passages)
    assert {c.paper_id for c in answer.citations} == {"000-19"}, answer.text
    assert answer.reason == "second-look" and "SLIM" not in answer.text, answer.text
    # the draft from the best passage itself is kept as it is
    kept = assistant.finisher.finish(Case(q, papers), "It was evaluated on 29 datasets. [1]", passages)
    assert kept.reason != "second-look" and "29" in kept.text


def test_a_name_question_quotes_the_sentence_naming_it_below_the_best(assistant):
    """"On what datasets ...": the continual-learning paper's best sentences name no dataset;
    the one that does ("a sequence of XOR-cluster datasets") ranks fifth, under the rescue
    floor for a plain sentence, and is what the rescue quotes (and the whole answer says). A
    name the abstract never gives beside the asked noun ("which LLMs") is still not stated."""
    papers = assistant.retriever.papers
    q = "On what datasets does the continual learning forgetting theory train its networks?"
    rescued = assistant.finisher.rescue(Case(q, papers, closest=("003-15",)), "003-15")
    assert rescued is not None and not rescued.abstained
    assert "XOR-cluster" in strip_markers(rescued.text), rescued.text
    assert {c.paper_id for c in rescued.citations if c.supported} == {"003-15"}
    answer = assistant.ask(q)
    assert "XOR-cluster" in strip_markers(answer.text), answer.text
    llms = "Which LLMs does the continual learning forgetting theory evaluate?"
    assert assistant.finisher.rescue(Case(llms, papers, closest=("003-15",)), "003-15") is None


def test_a_plural_name_question_quotes_the_sentence_listing_them_all(assistant):
    """"On what benchmarks": of the sentences that name a benchmark, the one listing three
    beside the word ("three widely adopted benchmarks, TOFU, MUSE, and WMDP") is quoted, not
    the one naming only TOFU."""
    papers = assistant.retriever.papers
    answer = assistant.finisher.rescue(
        Case("On what benchmarks is RULE evaluated?", papers, closest=("004-09",)), "004-09")
    assert answer is not None and answer.reason == "extracted", answer
    text = strip_markers(answer.text)
    assert all(b in text for b in ("TOFU", "MUSE", "WMDP")), answer.text
    # a singular head is answered by one name: the list is not preferred there
    one = assistant.finisher.rescue(
        Case("On which benchmark does RULE leak nothing?", papers, closest=("004-09",)),
        "004-09")
    assert one is None or "WMDP" not in strip_markers(one.text), one


def test_a_second_look_that_says_the_question_back_is_no_answer(assistant):
    """Asked for a VLM the abstract never names, the 0.5B's second look wrote "The exact VLM
    plays the auditor in the data-free backdoor defense. [1]": the question said back, which
    the abstract "supports" word for word. It is dropped like a decline."""
    papers = assistant.retriever.papers
    q = "Which exact VLM plays the auditor in the data-free backdoor defense?"
    answer = assistant.finisher.second_look(Case(q, papers, closest=("003-12",)), "003-12")
    assert answer is None, answer.text


def test_a_counted_question_quotes_the_sentence_listing_that_many_names(assistant):
    """"Which two remedies ...": the sentence that introduces two names ("Mask Prior
    Suppression and Monotonic RoPE Scaling") is quoted, not the better-scoring one about the
    experiments; the count is the evidence, wherever that sentence ranks."""
    papers = assistant.retriever.papers
    q = ("Which two remedies applied while decoding does the study of looping, ungrounded "
         "diffusion vision-language models put forward?")
    answer = assistant.finisher.rescue(Case(q, papers, closest=("004-11",)), "004-11")
    assert answer is not None and answer.reason == "extracted", answer
    text = strip_markers(answer.text)
    assert "Mask Prior Suppression" in text and "Monotonic RoPE Scaling" in text, answer.text


@pytest.mark.parametrize("question,n", [
    ("Which two models was it tested on?", 2),
    ("Into which three groups does it split its experts?", 3),
    ("What are the two components?", 2),
    ("What four datasets?", 4),
    ("Which paper reports a 2x speedup?", 0),  # a number in the question, not a count
    ("What is the 3% gain due to?", 0),
    ("How does it work?", 0),
])
def test_counted_reads_how_many_things_a_question_asks_for(question, n):
    assert guard.counted(question) == n


@pytest.mark.parametrize("sentence,n,ok", [
    ("Experiments on LLaMA-7B and Swin Transformer show gains.", 2, True),
    ("Using three widely adopted benchmarks, TOFU, MUSE, and WMDP, we test it.", 3, True),
    ("Using three widely adopted benchmarks, TOFU, MUSE, and WMDP, we test it.", 2, False),
    ("We evaluate on poker and on auctions.", 2, False),  # nothing capitalized or coined
    ("Experiments show that it works.", 2, False),  # a sentence's capital first word is no item
    ("It beats GPT-4 and Claude on CGC tasks.", 2, True),
])
def test_lists_count_finds_a_series_of_that_many_names(sentence, n, ok):
    assert guard.lists_count(sentence, n, "which ones?") is ok
    # names the question already gives are not what it asks for
    assert not guard.lists_count("Experiments on LLaMA-7B and Swin Transformer.", 2,
                                 "Besides LLaMA-7B and Swin Transformer, which two models?")


def test_states_count_is_the_count_beside_the_asked_noun():
    """A sentence that says "two ... families" answers "which two families" in its own words
    (it goes on to name them, lower-case), so the count does not move the rescue off it."""
    assert guard.states_count("Two seemingly distinct families of methods exist: a noise "
                              "family and a gradient family.", 2, "families")
    assert guard.states_count("we propose 3 simple tricks", 3, "tricks")
    assert not guard.states_count("Experiments on LLaMA-7B and Swin Transformer.", 2, "models")
    assert not guard.states_count("two families of methods", 3, "families")
    assert not guard.states_count("two families of methods", 2, "")


def test_the_method_s_own_bracketed_short_name_is_no_answer_to_which_llm():
    """"(AV Filter)" is how the abstract abbreviates its own filter: "AV" is no LLM, so a
    sentence whose only new name it is does not answer "which LLM" (as "(NPAS)" did not)."""
    src = ("Leveraging attention weights, we introduce the Normalized Passage Attention Score "
           "(NPAS) and a lightweight Attention-Variance Filter (AV Filter) that flags "
           "anomalous passages. We test it with Llama-3-8B as the generator.")
    first = src.split(". ")[0] + "."
    q = "Which LLM is the generator when the Attention-Variance Filter is tested?"
    assert not guard.answers_head(q, first, ("NPAS",), src)
    assert guard.answers_head(q, "We test it with Llama-3-8B as the generator.", ("NPAS",), src)



def test_the_second_look_ranks_by_what_is_asked_not_by_which_paper_is_meant(assistant):
    """"In the work that keeps KV cache entries by ..., which benchmark suites were used?":
    the fronted clause's words match the sentences that describe DefensiveKV; ranked by the
    asked part, the sentence naming Ruler and LongBench is the first of the three the second
    look reads (ranked by the whole question it is not among the first four)."""
    from rag.finish import _asked
    paper = assistant.retriever.papers["000-19"]
    q = ("In the work that keeps KV cache entries by bounding how much the attention output "
         "can be perturbed, which benchmark suites were used?")
    best = assistant.sentences.rank(paper, _asked(q, paper.label))[0]
    assert "LongBench" in paper.clean[best.start:best.end]
    looked = assistant.finisher.second_look(Case(q, assistant.retriever.papers,
                                                 closest=("000-19",)), "000-19")
    assert looked is None or "LongBench" in strip_markers(looked.text) or \
        "Ruler" in strip_markers(looked.text), looked.text


@pytest.mark.parametrize("q, pid, said", [
    # the description inside the question ("the paper on early exits in actor networks")
    # matches BEXA's introduction; the asked part matches its evaluation sentence
    ("Which datasets does the paper on early exits in actor networks evaluate on?", "003-01",
     "MuJoCo"),
    ("In the study on continual learning's limits in a tractable setting, what kind of neural "
     "networks are analyzed?", "003-15", "quadratic"),
])
def test_the_rescue_quotes_the_sentence_for_what_is_asked(assistant, q, pid, said):
    """The rescue ranks the paper's sentences by the asked part when its best clears the
    rescue floor: the sentence that says which paper is meant is no answer (the BEXA question
    had quoted its introduction; the continual-learning one put the quadratic networks second)."""
    rescued = assistant.finisher.rescue(Case(q, assistant.retriever.papers, closest=(pid,)), pid)
    assert rescued is not None and rescued.reason == "extracted"
    assert [c.paper_id for c in rescued.citations][:1] == [pid]
    assert said in rescued.citations[0].quote, rescued.text
    answer = assistant.ask(q)
    assert not answer.abstained and said in strip_markers(answer.text), answer.text


def test_a_property_asked_for_is_answered_in_the_abstracts_own_words(assistant):
    """'What characteristic of LLMs does SLIM exploit?': the abstract never writes
    "characteristic" ("exploits the iterative structure of LLMs"), so the head-noun guard
    had declared it not stated and rejected the second look that found it."""
    assert not guard.asks_detail("What property of LLMs does SLIM exploit?", ("SLIM",))
    assert guard.asks_detail("Which robot arm does HiMe use?", ("HiMe",)) == "robot arm"
    answer = assistant.ask("What characteristic of LLMs does SLIM exploit?")
    assert not answer.abstained, answer.text
    assert "iterative structure" in strip_markers(answer.text)
    assert any(c.paper_id == "004-07" and c.supported for c in answer.citations)
