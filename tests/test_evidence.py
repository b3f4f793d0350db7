"""The one evidence scorer (rag/evidence.py): abbreviations the collection defines match their
long forms, on the real embedder."""

from __future__ import annotations

from rag.evidence import W_RUN, SentenceIndex, abbreviations, runs, score
from rag.retrieve import tokenize
from rag.types import Paper


def _paper(pid: str, text: str) -> Paper:
    return Paper(id=pid, label=pid, text=text, clean=text, source="t.txt", position=1, line=2,
                 collection="test", content_hash=pid)


DEFINES = _paper("900-01", "Model-based reinforcement learning (RL) plans with a learned model. "
                 "Large language models (LLMs) write code. Our method, RULE (Robust Unlearning "
                 "under Leakage), forgets.")
USES = _paper("900-02", "Offline RL learns goal reaching from a fixed dataset. We use a simple "
              "update rule and report results on navigation.")


def test_abbreviations_are_read_from_definitions_across_the_collection():
    abbr = abbreviations([DEFINES, USES])
    assert abbr["rl"] == (frozenset({"reinforcement", "learning"}),)
    assert abbr["llms"] == abbr["llm"]  # the plural reads as the same abbreviation
    assert "rule" not in abbr  # written as a plain word elsewhere ("update rule")


def test_a_sentence_using_the_abbreviation_has_the_words_of_its_long_form():
    abbr = abbreviations([DEFINES, USES])
    words = set(tokenize("offline reinforcement learning"))
    sentence = "Offline RL learns goal reaching from a fixed dataset."
    assert score(sentence, 0.5, words, set(), set(), abbr) > score(sentence, 0.5, words, set(), set())
    assert score(sentence, 0.0, words, set(), set(), abbr) == 0.5  # all three words found
    # and the other way round: a question's "RL" is found in "reinforcement learning"
    long_form = "Model-based reinforcement learning plans with a learned model."
    assert score(long_form, 0.0, {"rl"}, set(), set(), abbr) == 0.5
    # an ordinary word is never expanded
    assert score("We use a simple update rule.", 0.0, {"robust"}, set(), set(), abbr) == 0.0


def test_ranking_with_the_collection_prefers_the_sentence_that_abbreviates(embedder):
    corpus = {p.id: p for p in (DEFINES, USES)}
    plain, aware = SentenceIndex(embedder), SentenceIndex(embedder, lambda: corpus)
    q = "Which work does offline reinforcement learning?"
    first = plain.rank(USES, q)[0]
    second = aware.rank(USES, q)[0]
    assert USES.clean[second.start:second.end].startswith("Offline RL")
    assert second.score > first.score


def test_a_run_of_four_content_words_in_order_counts_as_copied():
    words = set(tokenize("models suffer from dropped words and degraded punctuation"))
    same_order = "Existing recognizers suffer from dropped words and degraded punctuation."
    shuffled = "Punctuation degraded and words dropped: existing recognizers suffer."
    text_runs = runs("these models suffer from dropped words and degraded punctuation")
    assert score(same_order, 0.5, words, set(), set(), None, text_runs) == \
        score(same_order, 0.5, words, set(), set()) + W_RUN
    assert score(shuffled, 0.5, words, set(), set(), None, text_runs) == \
        score(shuffled, 0.5, words, set(), set())
    # a hyphenated word is one word: "vision-language models" is two words, not a run of four
    assert not runs("vision-language models") & runs("vision-language models")


def test_a_copied_answer_sentence_is_cited_to_the_abstract_it_was_copied_from(embedder):
    """MiniLM puts another paper's opening sentence, which shares the answer's subject words,
    close to an answer sentence; the sentence the answer copied a clause from wins."""
    from rag.cite import best_support

    generic = _paper("900-03", "Vision-language models (VLMs) have shown remarkable abilities by "
                     "integrating large language models with visual inputs. We train one.")
    source = _paper("900-04", "Diffusion captioners are popular. In this work, we show that existing "
                    "captioners suffer from repetitive generation and degraded visual grounding. "
                    "We fix both.")
    corpus = {p.id: p for p in (generic, source)}
    index = SentenceIndex(embedder, lambda: corpus)
    answer = ("Diffusion-style vision-language models start repeating themselves in long image "
              "descriptions because they suffer from repetitive generation and degraded visual "
              "grounding.")
    found = best_support(answer, embedder.embed_one(answer), [generic, source], index, set())
    assert found is not None and found.paper_id == "900-04"
    assert "repetitive generation" in source.clean[found.start:found.end]


def test_a_quote_cut_at_the_token_limit_is_finished_from_the_abstract():
    """The model stops mid-sentence at max_new_tokens; "improves by 51" of "improves by 51.9%"
    misstates the abstract, so the copied sentence is finished from its source."""
    from rag.cite import completed

    p = _paper("900-05", "We cascade a coarse and a fine model. The results indicate that the "
               "detection score improves by 51.9% over the baselines. Code is available.")
    cut = "We cascade models. [1] The results indicate that the detection score improves by 51 [1]"
    assert completed(cut, [p]) == ("We cascade models. [1] The results indicate that the "
                                   "detection score improves by 51.9% over the baselines. [1]")
    # a finished sentence, a short tail and words no sentence starts with stay as written
    ended = "The results indicate that the detection score improves a lot."
    assert completed(ended, [p]) == ended
    assert completed("The results indicate", [p]) == "The results indicate"
    # the model's own start, then a copied run of six or more words: finished from there
    own = "Our cascade shows that the detection score improves by 5"
    assert completed(own, [p]) == ("Our cascade shows that the detection score improves by "
                                   "51.9% over the baselines.")
    other = "The detection score of the cascade improves by 51"
    assert completed(other, [p]) == other


def test_a_link_counts_only_as_what_it_is():
    """FB-PbRL's code link "github.com/rl-bandits-lab/FB-PbRL" is no sentence about bandits:
    the words of a link add nothing to the lexical share; it reads as "code repository link"."""
    words = set(tokenize("Which papers deal with bandits?")) - {"papers", "deal"}
    linked = "Code is available at https://github.com/rl-bandits-lab/FB-PbRL."
    plain = "Code is available."
    stated = "We study neural logistic bandits."
    assert score(linked, 0.2, words, set(), set()) == score(plain, 0.2, words, set(), set())
    assert score(stated, 0.2, words, set(), set()) > score(linked, 0.2, words, set(), set())
    # ... but a link to a code host is what a question about the code asks for
    code = set(tokenize("Where is the code?"))
    hosted = "Our implementation is open-sourced at https://github.com/PKU-ML/SSL4RL."
    assert score(hosted, 0.2, code, set(), set()) > score("Our implementation is open-sourced.",
                                                          0.2, code, set(), set())
