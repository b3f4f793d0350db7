"""Pure logic: which questions ask for a detail an abstract never states."""

from pathlib import Path

import pytest

from rag.corpus import load_corpus
from rag.extract import finding_kind, is_definition
from rag.guard import missing_detail

PAPERS = load_corpus(Path(__file__).resolve().parent.parent / "seeds").by_id()


@pytest.mark.parametrize("pid,question,detail", [
    ("000-01", "What learning rate did SSL4RL use?", "learning rate"),
    ("003-01", "How many GPUs were used to train BEXA?", "gpus"),
    ("000-06", "Under which license is the SplAttN code released?", "license"),
    ("003-03", "What speedup does SVOO achieve?", None),
    ("003-01", "Which benchmarks was BEXA evaluated on?", None),
])
def test_missing_detail(pid, question, detail):
    assert missing_detail(question, PAPERS[pid]) == detail


@pytest.mark.parametrize("question,kind", [
    ("Which paper reports a 1.93x speedup?", "one"),
    ("Which papers use flow policies for RL?", "many"),
    ("Is there a paper on unlearning leakage?", "one"),
    ("Are there any papers about robot memory?", "many"),
    ("A theory paper on forgetting - which is it?", "one"),
    ("What speedup does SVOO achieve?", None),
    ("What methods are used in SVOO?", None),
])
def test_finding_questions(question, kind):
    assert finding_kind(question) == kind


def test_definition_questions():
    assert is_definition("What is CapImagine?") and is_definition("What does PIAA stand for?")
    assert not is_definition("What speedup does SVOO achieve?")
