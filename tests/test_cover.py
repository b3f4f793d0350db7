"""Every part of a question answered (rag/cover.py): the parts, the left-out words, and the
abstract sentence that supplies them, on the real embedder and the real assistant."""

from __future__ import annotations

from dataclasses import replace

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


def test_the_clause_that_says_which_paper_is_meant_is_not_asked_for(embedder):
    """'In the paper on X, how many ...?': X describes the paper, so an answer that gives the
    number is complete, and the sentence holding X's words is not added to it."""
    p, index = _paper(), SentenceIndex(embedder)
    assert cover.asked_clause("In the paper on repeated games between two learners, how many "
                              "rounds?") == "how many rounds?"
    assert cover.asked_clause("Is there work on games, where two learners play?") == \
        "Is there work on games, where two learners play?"  # a question already: kept
    # described inside the question: the description goes, the asked words and verb stay
    assert cover.asked_clause("Which datasets does the study about repeated games between two "
                              "learners evaluate on?") == "Which datasets does it evaluate on?"
    assert cover.asked_clause("How does the paper on repeated games compare with the paper on "
                              "auctions?").startswith("How does the paper on repeated games")
    # a trailing "when ..." condition is no question of its own: the whole question asks
    q = "Roughly how much quicker is the learner-level version, when run on ordinary hardware?"
    assert cover.asked_clause(q) == q
    assert cover.asked_clause("For repeated games, where did they get the data?") == \
        "where did they get the data?"
    assert cover.asked_clause("The repeated-games learner: does it need a new network?") == \
        "does it need a new network?"  # a yes/no question after a colon
    assert cover.asked_clause("For the games one, is it robust?") == \
        "For the games one, is it robust?"  # ... but not after a comma
    # statements before the question sentence describe the paper; the question sentence asks,
    # unless it only points back at them
    assert cover.asked_clause("There's a paper where two learners play a repeated game. "
                              "Which board games did they run it on?") == \
        "Which board games did they run it on?"
    q = "There's a paper where two learners play a repeated game. Which one?"
    assert cover.asked_clause(q) == q
    q = "Which papers study noisy labels, i.e. when part of the training annotations are wrong?"
    assert cover.asked_clause(q) == q  # an abbreviation's period ends no statement
    assert cover.asked_clause("It adds one extra ingredient that absorbs noise. What is that "
                              "ingredient?").startswith("It adds one extra ingredient")
    q = "In the work on repeated games between two learners, how many rounds does it need?"
    assert not cover.complement(p, q, "It reaches an equilibrium in 40 rounds.", index)
    # the asked part is still completed when the answer leaves it out
    assert cover.complement(p, "In the work on repeated games, how many rounds does it need, "
                            "and how is it evaluated?", "In 40 rounds.", index)


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


def test_a_how_many_part_takes_the_sentence_with_its_number_however_low_it_scores(assistant):
    """'..., and how many earlier findings survive?': the sentence with "51% of examples in
    previous findings" scores 0.19 against that part, under the complement floor (0.20), and
    had been left out of the answer."""
    answer = assistant.ask("Which paper studies whether LLM judges prefer their own answers, "
                           "and how many earlier findings survive?")
    assert not answer.abstained and "51%" in answer.text
    assert any("51%" in c.quote for c in answer.citations)


def test_a_ratio_said_in_words_answers_how_much_faster(assistant):
    """"Roughly how much does it speed up ...?" of a paper described in a first sentence: the
    abstract says "runs orders of magnitude faster", with no digit. That sentence was no
    answer to a number question, so the model's invented "10 times" left only "could not
    find this"; it is now quoted."""
    answer = assistant.ask("I read about a predictive coding reformulation built on errors "
                           "instead of neuron states. Roughly how much does it speed up "
                           "simulation on standard hardware?")
    paper = next(p for p in assistant.papers() if "orders of magnitude" in p.clean
                 and "predictive coding" in p.clean.lower())
    assert not answer.abstained and "orders of magnitude" in answer.text
    assert any(c.paper_id == paper.id and "orders of magnitude" in c.quote
               for c in answer.citations)


def test_the_sentence_quoted_answers_the_asked_part_not_the_description(assistant):
    """"For <a description of the paper>, what do you have to modify ...?": when only the whole
    question clears the rescue floor, it does so on the sentence its description matches
    ("We propose the Rényi diffusion model ..."), which says which paper is meant; the
    sentence quoted first is the asked part's best one ("... without modifying model
    architectures or sampling procedures"), which had not been quoted at all."""
    answer = assistant.ask("For the diffusion training objective based on Rényi divergence, "
                           "what do you have to modify in the network or in sampling to use it?")
    assert not answer.abstained and answer.citations
    assert "without modifying model architectures" in answer.citations[0].quote


@pytest.mark.parametrize("name,rest", [
    ("DefensiveKV", "which models was it tested on?"),
    ("FedScar", "how does it handle client drift?"),
])
def test_what_is_x_and_then_something_else_also_says_what_x_is(assistant, name, rest):
    """'What is X and …?': the answer says what X is ("X is …") or quotes the sentence where
    the abstract introduces it, besides the second ask; every quote is the abstract's own."""
    import re

    from rag import extract
    from rag.types import Final

    final = next(ev.answer for ev in assistant.stream(f"What is {name} and {rest}")
                 if isinstance(ev, Final))
    paper = next(p for p in assistant.papers() if p.label == name)
    assert not final.abstained and paper.id in {c.paper_id for c in final.citations}
    assert all(c.quote in paper.clean for c in final.citations if c.paper_id == paper.id)
    says_what = re.search(re.escape(name) + r"\W{0,3}\s+(?:is|are|was)\b", final.text)
    quotes_intro = any(extract.introduces(c.quote) for c in final.citations)
    assert says_what or quotes_intro, final.text


def _p(pid: str) -> Paper:
    return replace(_paper(), id=pid, label=pid)


@pytest.mark.parametrize("scores,expected", [
    # one paper far ahead of the rest: it alone
    ([0.80, 0.40, 0.38, 0.35], ["a"]),
    # three close to one another, a drop, then a tail: the three (the earlier cut, within
    # 0.10 of the best, kept only the first two here)
    ([0.73, 0.61, 0.51, 0.25, 0.20], ["a", "b", "c"]),
    # no drop of list_gap anywhere: all of them above the floor
    ([0.45, 0.42, 0.40, 0.38, 0.10], ["a", "b", "c", "d"]),
    # nothing above the floor: the retrieval winner
    ([0.12, 0.11], ["a"]),
])
def test_a_list_ends_at_its_largest_drop(scores, expected):
    from rag.extract import choose

    papers = [_p(x) for x in "abcde"[:len(scores)]]
    ranked = list(zip(papers, scores, strict=True))
    got = choose(papers, ranked, "many", [], floor=0.15, gap=0.06, most=7)
    assert [p.id for p in got] == expected


def test_papers_whose_sentences_match_the_topic_are_added_to_the_list():
    """By best sentence, "a" is far ahead and listed alone; by topic score (three sentences),
    "b" and "c" come close to it and are added; "d" and "e", under 0.65 x a's topic score,
    are not."""
    from rag.extract import choose

    papers = [_p(x) for x in "abcde"]
    ranked = list(zip(papers, [0.80, 0.40, 0.38, 0.35, 0.30], strict=True))
    topic = list(zip(papers, [1.20, 1.05, 0.95, 0.60, 0.50], strict=True))
    assert [p.id for p in choose(papers, ranked, "many", [])] == ["a"]
    got = choose(papers, ranked, "many", [], 0.15, 0.06, 7, topic, 0.30, 0.20, 0.65)
    assert [p.id for p in got] == ["a", "b", "c"]


def test_a_topic_list_has_every_paper_about_the_topic(assistant):
    """Both vision-language-action robot papers (HiMe, LARA) are listed: by its best sentence
    alone, LARA scored 0.2 under HiMe and the list stopped after HiMe; by topic score (three
    sentences about VLA models) it is close to HiMe."""
    final = assistant.ask("Which papers build robot policies on vision-language-action models?")
    assert final.intent == "find" and not final.abstained
    cited = {c.paper_id for c in final.citations}
    assert {"000-03", "004-10"} <= cited, final.text


def test_a_named_paper_leads_the_list_and_one_means_one():
    from rag.extract import choose

    papers = [_p(x) for x in "abc"]
    ranked = list(zip(papers, [0.7, 0.6, 0.2], strict=True))
    assert [p.id for p in choose(papers, ranked, "many", ["c"], 0.15, 0.06, 7)] == ["c", "a", "b"]
    assert [p.id for p in choose(papers, ranked, "one", [], 0.15, 0.06, 7)] == ["a"]
    flat = list(zip(papers, [0.7, 0.68, 0.66], strict=True))
    assert [p.id for p in choose(papers, flat, "many", [], 0.15, 0.06, 2)] == ["a", "b"]


def test_coverage_weighs_the_question_words_an_abstract_has_by_their_rarity():
    paper = _paper("Protein language models detect repeats in protein data.", label="PLM")
    assert cover.coverage("Which papers look at proteins?", paper) == 1.0  # plural, framing
    folding = cover.coverage("Which papers model protein folding?", paper)
    assert 0.0 < folding < 1.0
    # a rare word missing costs more than a common one: "folding" vs "data"
    assert cover.coverage("Which papers use protein data?", paper) == 1.0
    assert cover.coverage("Which papers use protein weather?", paper) < 1.0
    assert cover.coverage("Which papers?", paper) == 0.0  # no content words at all


def test_a_one_paper_answer_quotes_where_the_authors_say_what_the_paper_does(embedder):
    """'Which paper ...?' answered by one paper quotes its best-matching sentence and, when
    that is another, the abstract's first sentence in the authors' voice: the one that says
    what the paper does (here the only one that names the KL regularization)."""
    from rag import extract

    text = ("Two-player board games are classic benchmarks for reinforcement learning. This "
            "work revisits a policy optimization method with reverse Kullback-Leibler "
            "regularization. Board games are also played by people for fun. From a theoretical "
            "perspective, we investigate the stability of the policy update rule in two "
            "settings. We validate the algorithm on five board games: Go, Hex and Othello.")
    paper = _paper(text, label="Board-game RL")
    index = SentenceIndex(embedder)
    answer, citations, _ = extract.compose(
        "Which paper investigates how stable the policy update rule is?", [paper], index)
    quotes = [c.quote for c in citations]
    assert any(q.startswith("From a theoretical perspective") for q in quotes)
    assert any("Kullback-Leibler" in q for q in quotes)
    assert "Kullback-Leibler" in answer
    assert not any(q.startswith("Board games are also") for q in quotes)


LOOPING = ("Long captions from diffusion captioners loop. We trace the looping to two causes. "
           "These looping failures admit a simple fix that needs no extra training. "
           "Concretely, we propose a training-free fix, introducing Prior Damping and Monotone "
           "RoPE Stretching to stop the drift.")


def test_introduces_name_is_where_the_abstract_first_writes_a_coined_name():
    p = _paper(LOOPING, "looping captioners")
    spans = [(m.start(), m.end()) for m in __import__("re").finditer(r"[^.]+\.", p.clean)]
    said = [cover.introduces_name(p, s, e, "What fix was proposed?") for s, e in spans]
    assert said == [False, False, False, True]  # "RoPE" first appears in the last sentence
    s, e = spans[-1]
    assert not cover.introduces_name(p, s, e, "What does RoPE Stretching do?")  # the question's own


def test_a_what_part_is_answered_by_the_sentence_that_names_what_was_proposed(embedder):
    """'..., and what no-training fix was proposed?': the sentence introducing the fix by name,
    not the one that only says a fix needs no training."""
    p, index = _paper(LOOPING, "looping captioners"), SentenceIndex(embedder)
    found = cover.complement(p, "Why do diffusion captioners loop, and what no-training fix was "
                             "proposed?", "They loop because of two causes.", index)
    assert [p.clean[e.start:e.end] for e in found][-1].startswith("Concretely, we propose")


def test_a_list_for_a_coined_name_is_the_papers_that_write_it(assistant):
    """"Which works use GRPO somewhere ...?": the two abstracts that write GRPO
    (MotionGRPO's post-training, Bi-NAC's baseline), not seven papers about RL in general."""
    from rag.prompt import strip_markers
    answer = assistant.ask("Which works use GRPO somewhere, to train their model or as a "
                           "baseline to compare with?")
    assert not answer.abstained, answer.text
    assert {c.paper_id for c in answer.citations if c.supported} == {"000-17", "004-12"}, \
        strip_markers(answer.text)
    # a field-wide word (RL, in 3 or more abstracts) does not narrow a list
    rl = assistant.ask("Which papers use RL to fine-tune a generative model?")
    assert len({c.paper_id for c in rl.citations}) >= 2, rl.text
