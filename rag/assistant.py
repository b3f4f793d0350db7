"""Wires the stages. `stream()` is the primitive: Status*, Sources, Token*, Final.

The sources are yielded before the model starts, so a user sees the evidence within a
second while the CPU model is still reading the prompt. `ask()` consumes `stream()`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

from rag import compare as cmp
from rag import extract
from rag.chunk import sentence_spans
from rag.cite import SentenceIndex, attach, looked_here
from rag.config import Settings
from rag.embed import Embedder
from rag.errors import RagError
from rag.generate import GenerationStats, Generator
from rag.guard import missing_detail
from rag.prompt import (
    COMPARE_SYSTEM,
    NOT_STATED,
    SYSTEM,
    Passage,
    markers_in,
    select_passages,
    strip_markers,
    user_message,
)
from rag.retrieve import Retriever
from rag.store import Store
from rag.types import Answer, Event, Final, Hit, Paper, Sources, Status, Token, Turn

log = logging.getLogger(__name__)

MAX_SENTENCES = 3
RESCUE = 0.38
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\ufeff]")
_ANAPHORA = re.compile(r"\b(it|its|it's|they|them|their|theirs|this|that|these|those|the (?:paper|"
                       r"method|approach|model|framework|authors|work|algorithm|benchmark))\b",
                       re.IGNORECASE)
_NOT_STATED = re.compile(r"(do(?:es)? not|don't|doesn't) (?:state|mention|contain|say|specify|"
                         r"provide|include)|not (?:stated|mentioned|specified|provided)|"
                         r"no information", re.IGNORECASE)


def clean_question(question: str, limit: int) -> tuple[str, str]:
    """(question, notice): control characters removed, whitespace folded, length capped."""
    q = " ".join(_CONTROL.sub(" ", question or "").split())
    if len(q) > limit:
        cut = q[:limit].rsplit(" ", 1)[0] or q[:limit]
        return cut, f"Your question was {len(q):,} characters; only the first {len(cut):,} were used."
    return q, ""


FRAGMENT_CHARS = 60  # "and the speedup?" is a fragment; 2,000 characters of one "word" is not


def is_followup(question: str, named: list[str], history: Sequence[Turn]) -> bool:
    """Refers back to the previous turn: a pronoun and no paper named, or a bare fragment."""
    if not history or not history[-1].paper_ids or named:
        return False
    fragment = len(question.split()) <= 4 and len(question) <= FRAGMENT_CHARS
    return bool(_ANAPHORA.search(question)) or fragment


def resolve_reference(question: str, papers: list[Paper]) -> str:
    """'What speedup does it achieve?' -> 'What speedup does SVOO achieve?' for the model."""
    if not papers:
        return question
    name = papers[0].label if len(papers) == 1 else " and ".join(p.label for p in papers[:3])

    def sub(m: re.Match[str]) -> str:
        word = m.group(0).lower()
        return f"{name}'s" if word in ("its", "their") else name

    return _ANAPHORA.sub(sub, question, count=1)


class MarkerFilter:
    """Strips [n] markers from streamed text exactly as `strip_markers` would on the whole."""

    def __init__(self) -> None:
        self.buf = ""
        self.out: list[str] = []

    def feed(self, piece: str) -> str:
        self.buf += piece
        hold = re.search(r"\s*(\[[\d,;\s]*)?$", self.buf)
        cut = hold.start() if hold else len(self.buf)
        emit, self.buf = strip_markers(self.buf[:cut]), self.buf[cut:]
        self.out.append(emit)
        return emit

    def flush(self) -> str:
        emit, self.buf = strip_markers(self.buf).rstrip(), ""
        self.out.append(emit)
        return emit


class Assistant:
    """One per process: models load once, on first use; every call keeps its own state."""

    def __init__(self, settings: Settings, store: Store, embedder: Embedder,
                 retriever: Retriever, generator: Generator) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.retriever = retriever
        self.generator = generator
        self.sentences = SentenceIndex(embedder)

    @classmethod
    def from_settings(cls, settings: Settings) -> Assistant:
        store = Store(settings.store, settings.paths.data)
        embedder = Embedder(settings.embed)
        return cls(settings, store, embedder, Retriever(settings.retrieve, store, embedder),
                   Generator(settings))

    def warm_up(self) -> None:
        """Load what a first question would (index, embedder, model, the prompts' prefix
        caches), so it is answered as fast as later ones; `rag serve` runs it in the
        background at start."""
        _ = self.retriever.papers
        self.embedder.warm_up()
        self.generator.warm_up(SYSTEM, COMPARE_SYSTEM)

    # ---- papers ---------------------------------------------------------------------------

    def papers(self) -> list[Paper]:
        return sorted(self.retriever.papers.values(), key=lambda p: p.id)

    def paper(self, pid: str) -> Paper | None:
        return self.retriever.papers.get(pid)

    # ---- answers --------------------------------------------------------------------------

    def ask(self, question: str, history: Sequence[Turn] = ()) -> Answer:
        for event in self.stream(question, history):
            if isinstance(event, Final):
                return event.answer
        raise RagError("the answer stream ended without an answer")  # pragma: no cover

    def stream(self, question: str, history: Sequence[Turn] = (),
               stop: threading.Event | None = None) -> Iterator[Event]:
        t0 = time.perf_counter()
        q, notice = clean_question(question, self.settings.answer.max_question_chars)
        if not q:
            yield Final(Answer(question="", text="Please type a question about the ICML 2026 "
                               "papers, e.g. “Which papers use flow policies for RL?”",
                               citations=(), hits=(), abstained=True, reason="empty"))
            return
        request = cmp.parse_request(q)
        if request is not None:
            yield from cmp.stream_comparison(self, q, request, history, stop, t0, notice)
            return
        yield Status("searching", "Searching the abstracts…")
        papers = self.retriever.papers
        if not papers:
            yield Final(Answer(question=q, text="The index is empty: run `rag ingest` (or "
                               "`make run`) to index the seed abstracts, then ask again.",
                               citations=(), hits=(), abstained=True, reason="empty-index",
                               notice=notice))
            return
        hits, context, named = self.retrieve(q, history)
        sources = Sources(tuple(hits), tuple(_distinct_papers(hits, papers)))
        best = self.retriever.best_similarity(q)
        if not named and not context and best < self.settings.answer.offtopic_threshold:
            yield sources
            closest = tuple(p.id for p in sources.papers[:3])
            yield Final(Answer(
                question=q, text="I can only answer questions about the ICML 2026 abstracts "
                "in this collection, and none of them is close to this question.",
                citations=(), hits=tuple(hits), abstained=True, reason="off-topic",
                closest=closest, notice=notice, seconds=time.perf_counter() - t0))
            return
        kind = extract.finding_kind(q)
        if kind is not None:
            yield sources
            yield from self._find(q, kind, hits, named, context, notice, t0)
            return
        a = self.settings.answer
        q_model = resolve_reference(q, [papers[p] for p in context if p in papers]) \
            if context else q
        qvec = self.embedder.embed_one(q_model)

        def rank(paper: Paper) -> list[tuple[int, int]]:
            return [(s, e) for s, e, _ in
                    extract.ranked_sentences(paper, q_model, qvec, self.sentences)]

        if context:  # the user points back at these papers: only they are in the prompt
            passages = select_passages([h for h in hits if h.chunk.paper_id in context],
                                       papers, a.context_tokens, a.max_passages, first=context,
                                       rank=rank)
        else:
            passages = select_passages(hits, papers, a.context_tokens, a.max_passages,
                                       first=tuple(named[:2]), rank=rank)
        yield sources
        target = (context or tuple(named[:1]) or tuple(p.paper_id for p in passages[:1])
                  or ("",))[0]
        detail = missing_detail(q, papers[target]) if target in papers else None
        if detail and (named or context):
            closest = tuple(p.paper_id for p in passages[:3])
            answer = self._not_stated(q, passages, papers, hits, closest, notice, "not-stated",
                                      first=target)
            yield Token(strip_markers(answer.text))
            yield Final(replace(answer, seconds=time.perf_counter() - t0))
            return
        yield Status("writing", "Writing the answer…")
        prompt = self.generator.format_chat(SYSTEM, user_message(q_model, passages))
        raw_text, shown, stats, t_gen = "", "", None, time.perf_counter()
        for out, raw_text, stats in self.generate(prompt, stop):
            if out:
                shown += out
                yield Token(out)
        assert stats is not None
        answer = self._finish(q, raw_text, passages, hits, papers, notice,
                              target if (named or context) else None)
        yield Final(replace(answer, seconds=time.perf_counter() - t0,
                            first_token_seconds=None if stats.first_token_seconds is None
                            else t_gen - t0 + stats.first_token_seconds,
                            prompt_tokens=stats.prompt_tokens,
                            generated_tokens=stats.generated_tokens))

    def compare_stream(self, left: str, right: str, history: Sequence[Turn] = (),
                       stop: threading.Event | None = None) -> Iterator[Event]:
        """Compare two papers named by id, name or description (the UI's pickers)."""
        q = f"Compare {left} and {right}"
        yield from cmp.stream_comparison(self, q, cmp.Request(left, right), history, stop,
                                         time.perf_counter())

    def generate(self, prompt: str, stop: threading.Event | None
                  ) -> Iterator[tuple[str, str, GenerationStats]]:
        """(new plain text, raw text so far, stats): markers filtered out of the stream, and
        the stream cut after MAX_SENTENCES sentences, so what is shown is what is kept."""
        filt = MarkerFilter()
        raw, shown = "", ""
        with self.generator.stream(prompt, stop=stop) as pieces:
            for piece in pieces:
                raw += piece
                out = filt.feed(piece)
                spans = sentence_spans(shown + out)
                if len(spans) > MAX_SENTENCES:  # short answers: stop after three sentences
                    out = (shown + out)[: spans[MAX_SENTENCES - 1][1]][len(shown):]
                    yield out, shown + out, pieces.stats
                    return
                if out:
                    shown += out
                    yield out, raw, pieces.stats
            stats = pieces.stats
        tail = filt.flush()
        yield tail, raw, stats

    def _find(self, q: str, kind: str, hits: list[Hit], named: list[str],
              context: tuple[str, ...], notice: str, t0: float) -> Iterator[Event]:
        """Answer 'which paper(s) ...?' from the index: the papers and their matching
        sentences, with no model call."""
        papers = self.retriever.papers
        wide = self.retriever.search(q, k=10, group=True) if kind == "many" else []
        order = _distinct_papers(hits + wide, papers)
        ranked = extract.paper_scores(order, q, self.sentences)
        chosen = extract.choose(order, ranked, kind, list(context) + named)
        text, citations, sentences = extract.compose(q, chosen, self.sentences)
        yield Token(strip_markers(text))
        yield Final(Answer(question=q, text=text, citations=citations, hits=tuple(hits),
                           abstained=False, sentences=sentences,
                           closest=tuple(p.id for p in order[:3]), notice=notice,
                           seconds=time.perf_counter() - t0,
                           first_token_seconds=time.perf_counter() - t0))

    def retrieve(self, q: str, history: Sequence[Turn] = ()
                 ) -> tuple[list[Hit], tuple[str, ...], list[str]]:
        """(hits, follow-up context paper ids, papers named in q): the answer's retrieval."""
        named = self.retriever.named_papers(q)
        context: tuple[str, ...] = ()
        query = q
        if is_followup(q, named, history):
            context = tuple(history[-1].paper_ids)
            query = f"{history[-1].question} {q}"
        hits = self.retriever.search(query, k=8)
        if context:
            ctx = self.retriever.search(query, k=4, paper_ids=set(context))
            hits = _merge(ctx, hits)
        return hits, context, named

    def turn(self, question: str, answer: str) -> Turn:
        """A history turn from plain text (eval files, pasted chats): its papers are the
        ones named in it, else the best match of its question."""
        named = self.retriever.named_papers(f"{question} {answer}")
        if not named:
            hits = self.retriever.search(question, k=1, group=True) if question.strip() else []
            named = [h.chunk.paper_id for h in hits]
        return Turn(question, answer, tuple(named[:1]))

    def _rescue(self, q: str, target: str | None, papers: dict[str, Paper], hits: list[Hit],
                closest: tuple[str, ...], notice: str) -> Answer | None:
        """A small model often says "not stated" when the abstract does state it. For a
        question about one named paper, answer from its best matching sentences instead when
        they match well (score >= RESCUE, calibrated on eval/questions.jsonl: answerable
        named questions the model declined scored 0.41-0.82, unstated details <= 0.29)."""
        if target is None or target not in papers:
            return None
        paper = papers[target]
        stripped = re.sub(re.escape(paper.label), " ", q, flags=re.IGNORECASE)
        qvec = self.embedder.embed_one(stripped)
        top = extract.ranked_sentences(paper, stripped, qvec, self.sentences)[0][2]
        if not (extract.is_definition(q) or top >= RESCUE):
            return None
        text, citations, sentences = extract.compose(q, [paper], self.sentences)
        return Answer(question=q, text=text, citations=citations, hits=tuple(hits),
                      abstained=False, sentences=sentences, closest=closest, notice=notice,
                      reason="extracted")

    def _finish(self, q: str, raw: str, passages: list[Passage], hits: list[Hit],
                papers: dict[str, Paper], notice: str, target: str | None = None) -> Answer:
        a = self.settings.answer
        closest = tuple(p.paper_id for p in passages[:3])
        plain = strip_markers(raw).strip()
        marked = [passages[n - 1].paper_id for n in markers_in(raw) if 0 < n <= len(passages)]
        if not plain and marked:  # a bare "[1]": the model pointed at a paper, say which
            chosen = [papers[i] for i in dict.fromkeys(marked)][:3]
            text, citations, sentences = extract.compose(q, chosen, self.sentences)
            return Answer(question=q, text=text, citations=citations, hits=tuple(hits),
                          abstained=False, sentences=sentences, closest=closest,
                          notice=notice)
        first = plain.split(".")[0]
        if not plain or _NOT_STATED.search(first) or NOT_STATED.lower() in plain.lower():
            rescued = self._rescue(q, target, papers, hits, closest, notice)
            return rescued or self._not_stated(q, passages, papers, hits, closest, notice,
                                               "not-stated")
        text, citations, sentences = attach(raw, passages, papers, self.sentences,
                                            a.support_threshold, a.unsupported == "drop")
        if not any(s.supported for s in sentences):
            return self._not_stated(q, passages, papers, hits, closest, notice, "unsupported")
        return Answer(question=q, text=text, citations=citations, hits=tuple(hits),
                      abstained=False, sentences=sentences, closest=closest, notice=notice)

    def _not_stated(self, q: str, passages: list[Passage], papers: dict[str, Paper],
                    hits: list[Hit], closest: tuple[str, ...], notice: str,
                    reason: str, first: str | None = None) -> Answer:
        if not passages and first is None:
            return Answer(question=q, text=NOT_STATED, citations=(), hits=tuple(hits),
                          abstained=True, reason=reason, closest=closest, notice=notice)
        top = papers[first or passages[0].paper_id]
        cite = looked_here(top, q, self.sentences)
        text = f"The abstract of {top.label} ({top.id}) does not state this [1]."
        if reason == "unsupported":
            text = (f"I could not find this in the abstracts; the closest is {top.label} "
                    f"({top.id}) [1].")
        return Answer(question=q, text=text, citations=(cite,), hits=tuple(hits),
                      abstained=True, reason=reason, closest=closest, notice=notice)


def _merge(first: list[Hit], rest: list[Hit]) -> list[Hit]:
    seen = {h.chunk.id for h in first}
    merged = list(first) + [h for h in rest if h.chunk.id not in seen]
    top = merged[0].score if merged else 0.0
    return [replace(h, rank=i + 1, score=max(h.score, top) if i < len(first) else h.score)
            for i, h in enumerate(merged)]


def _distinct_papers(hits: list[Hit], papers: dict[str, Paper]) -> list[Paper]:
    ids = list(dict.fromkeys(h.chunk.paper_id for h in hits))
    return [papers[i] for i in ids if i in papers]
