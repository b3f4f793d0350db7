"""The one evidence scorer (rag/evidence.py): abbreviations the collection defines match their
long forms, on the real embedder."""

from __future__ import annotations

from rag.evidence import SentenceIndex, abbreviations, score
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
