"""Typo correction (rag/spelling.py): pure logic over a small vocabulary, plus the real
router correcting towards the indexed abstracts (tests/test_route.py has the real question)."""

from __future__ import annotations

import pytest

from rag import spelling

VOCAB = spelling.vocabulary(["Two papers: we decouple the experiments from the policies and incorporate "
                             "reinforcement learning into training."])


def test_misspelt_corpus_words_are_corrected():
    text, fixes = spelling.correct("wich papres trian polcies with reinforcment?", VOCAB)
    assert dict(fixes) == {"wich": "which", "papres": "papers", "polcies": "policies",
                           "reinforcment": "reinforcement"}
    assert text == "which papers trian policies with reinforcement?"  # "trian": no near word


@pytest.mark.parametrize("word", ["decompile", "experienc", "coporate"])
def test_a_word_nearer_to_english_the_corpus_lacks_is_left_alone(word):
    # each is within the ratio of a corpus word (decouple, experiments, incorporate) ...
    assert spelling.correct(word, VOCAB, english_zipf=0)[1], word
    # ... but nearer to "compile", "experience", "corporate", which the abstracts never use
    assert spelling.correct(f"Any work that can {word} it?", VOCAB) == (
        f"Any work that can {word} it?", ())


def test_names_short_words_and_common_words_are_never_touched():
    text = "Does SSL4RL use RoPE or Adam to train on grids?"
    assert spelling.correct(text, VOCAB) == (text, ())
