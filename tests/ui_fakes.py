"""A scripted stand-in for rag.assistant.Assistant: same events, no models (UI tests only)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

from rag.errors import InputError
from rag.types import (
    Answer,
    AnswerSentence,
    Cell,
    Chunk,
    Citation,
    Compared,
    Comparison,
    ComparisonRow,
    Event,
    Final,
    Hit,
    Paper,
    Side,
    Sources,
    Status,
    Token,
    Turn,
)


def make_paper(pid: str, label: str, clean: str, links: tuple[str, ...] = ()) -> Paper:
    return Paper(id=pid, label=label, text=clean, clean=clean, source=f"{pid[:3]}_fake.txt",
                 position=int(pid[-2:]), line=3, collection="ICML 2026 Papers", links=links)


PAPERS = [
    make_paper("000-01", "SSL4RL",
               "Vision-language models rely on textual shortcuts. We propose SSL4RL, a framework "
               "that leverages self-supervised learning tasks as a source of verifiable rewards "
               "for RL. Experiments show gains on vision-centric benchmarks.",
               ("https://github.com/PKU-ML/SSL4RL",)),
    make_paper("003-14", "TaRO",
               "Tables are hard for LLMs. We introduce TaRO, which aligns table reasoning with "
               "reinforcement learning. TaRO is evaluated on five table QA datasets.",
               ("https://github.com/oceanflowlab/TaRO",)),
    make_paper("004-09", "<b>leak@k</b>",
               "We study <script>alert('x')</script> leakage in unlearning. Results show leaks.",
               ()),
]
BY_ID = {p.id: p for p in PAPERS}


def cite(pid: str, quote: str, marker: int) -> Citation:
    p = BY_ID[pid]
    s = p.clean.index(quote)
    return Citation(marker, pid, p.label, f"{pid}#1", quote, s, s + len(quote), True, 0.9)


Q_SSL = "We propose SSL4RL, a framework that leverages self-supervised learning tasks as a " \
        "source of verifiable rewards for RL."


class FakeAssistant:
    """Yields the documented event order; `delay` seconds between tokens; honours `stop`."""

    def __init__(self, delay: float = 0.0, pause_before_tokens: float = 0.0) -> None:
        self.delay = delay
        self.pause = pause_before_tokens
        self.calls: list[tuple[str, tuple[Turn, ...]]] = []

    def papers(self) -> list[Paper]:
        return list(PAPERS)

    def paper(self, pid: str) -> Paper | None:
        return BY_ID.get(pid)

    def stream(self, question: str, history: Sequence[Turn] = (),
               stop: threading.Event | None = None) -> Iterator[Event]:
        self.calls.append((question, tuple(history)))
        if question.startswith("boom"):
            raise InputError("the question 'boom' cannot be used: try another")
        if question.startswith("crash"):
            raise ValueError("internal detail that must not leak")
        if question.lower().startswith("compare"):
            yield from self.compare_stream("SSL4RL", "TaRO", history, stop)
            return
        yield Status("searching", "Searching the abstracts…")
        hits = (Hit(Chunk("000-01#1", "000-01", 1, Q_SSL, 0, len(Q_SSL)), 0.9, 1, "SSL4RL"),
                Hit(Chunk("003-14#0", "003-14", 0, BY_ID["003-14"].clean, 0, 10), 0.4, 2))
        yield Sources(hits, (BY_ID["000-01"], BY_ID["003-14"]))
        if question.startswith("weather"):
            yield Final(Answer(question, "I can only answer questions about the abstracts.", (),
                               hits, True, reason="off-topic", closest=("000-01", "003-14")))
            return
        yield Status("writing", "Writing the answer…")
        time.sleep(self.pause)
        pieces = ["SSL4RL uses ", "self-supervised tasks ", "as verifiable rewards", ". ",
                  "It also <i>cures</i> colds", "."]
        for piece in pieces:
            if stop is not None and stop.is_set():
                return
            time.sleep(self.delay)
            yield Token(piece)
        s1 = "SSL4RL uses self-supervised tasks as verifiable rewards [1]."
        s2 = "It also <i>cures</i> colds."
        c = cite("000-01", Q_SSL, 1)
        yield Final(Answer(question, f"{s1} {s2}", (c,), hits, False,
                           sentences=(AnswerSentence(s1, (1,), True),
                                      AnswerSentence(s2, (), False)),
                           seconds=1.5, first_token_seconds=0.5))

    def compare_stream(self, left: str, right: str, history: Sequence[Turn] = (),
                       stop: threading.Event | None = None) -> Iterator[Event]:
        lp = BY_ID.get(left) or next((p for p in PAPERS if p.label == left), None)
        rp = BY_ID.get(right) or next((p for p in PAPERS if p.label == right), None)
        yield Status("searching", "Finding both papers…")
        yield Sources((), tuple(p for p in (lp, rp) if p))
        if lp is None or rp is None:
            comp = Comparison(Side(left, "resolved" if lp else "unknown", lp),
                              Side(right, "resolved" if rp else "unknown", rp),
                              message=f"'{left if lp is None else right}' is not in the corpus")
            yield Compared(comp)
            yield Final(Answer(f"Compare {left} and {right}", comp.message, (), (), True,
                               reason="compare-unknown", comparison=comp))
            return
        cl = cite(lp.id, lp.clean.split(". ")[1] + ".", 1)
        cr = cite(rp.id, rp.clean.split(". ")[1] + ".", 2)
        rows = (ComparisonRow("Problem", Cell("shortcuts", cl), Cell("tables", cr)),
                ComparisonRow("Code", Cell(lp.links[0] if lp.links else "", cl),
                              Cell("not stated in the abstract", None)))
        comp = Comparison(Side(left, "resolved", lp), Side(right, "resolved", rp), rows)
        yield Compared(comp)
        yield Status("writing", "Writing a short synthesis…")
        for piece in ["Both use RL", "."]:
            time.sleep(self.delay)
            yield Token(piece)
        yield Final(Answer(f"Compare {left} and {right}", "Both use RL [1][2].", (cl, cr), (),
                           False, comparison=comp, closest=(lp.id, rp.id), seconds=0.2))
