"""Wires the stages. `stream()` is the primitive: Status*, Sources, [Compared], Token*, Final.

The router decides what the question is (rag/route.py); the sources are yielded before
the model starts, so a user sees the evidence within a second while the CPU model is still
reading the prompt; a one-paper draft is verified and repaired from the abstracts
(rag/finish.py), a comparison's against its two papers (rag/cite.py); a question in another
language is answered in English first, verified, then translated (rag/translate.py). `ask()`
consumes `stream()`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import replace

from rag import compare as cmp
from rag import extract, links, messages, models, names, paper_cache, rewrite
from rag.chunk import sentence_spans
from rag.cite import attach
from rag.config import Settings
from rag.embed import Embedder
from rag.errors import RagError
from rag.evidence import SentenceIndex
from rag.finish import Case, Finisher
from rag.generate import GenerationStats, Generator
from rag.gloss import gloss
from rag.phrases import FAREWELL, THANKS, asks_for_more, more_about
from rag.prompt import (
    COMPARE_SYSTEM,
    SYSTEM,
    Passage,
    select_passages,
    strip_markers,
    user_message,
)
from rag.retrieve import Retriever
from rag.route import Route, Router, clean_question, finding_kind
from rag.store import Store
from rag.translate import Translator, translation_settings
from rag.types import (
    Answer,
    Compared,
    Event,
    Final,
    Hit,
    Paper,
    Sources,
    Status,
    Token,
    Turn,
)

log = logging.getLogger(__name__)

MAX_SENTENCES = 3
_ANAPHORA = re.compile(r"\b(it|its|it's|they|them|their|theirs|this|that|these|those|the (?:paper|"
                       r"method|approach|model|framework|authors|work|algorithm|benchmark))\b",
                       re.IGNORECASE)
__all__ = ["Assistant", "MarkerFilter", "clean_question", "resolve_reference"]


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
                 retriever: Retriever, generator: Generator,
                 translation: Generator | None = None) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.retriever = retriever
        self.generator = generator
        self.sentences = SentenceIndex(embedder, lambda: retriever.papers)
        # questions into English by the translation model when one is configured apart
        self.translator = Translator(generator, translation)
        self.router = Router(settings.route, retriever, self.sentences,
                             self.translator.to_english, settings.answer.max_question_chars,
                             expand=lambda text: rewrite.search_terms(generator, text))
        self.finisher = Finisher(settings, self.sentences, embedder, self._redraft)
        self._asking = 0  # questions being answered now (background work waits for them)
        self._asking_lock = threading.Lock()
        self._caching = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Assistant:
        store = Store(settings.store, settings.paths.data)
        embedder = Embedder(settings.embed)
        tsettings = translation_settings(settings)
        return cls(settings, store, embedder, Retriever(settings.retrieve, store, embedder),
                   Generator(settings), Generator(tsettings) if tsettings else None)

    def warm_up(self) -> None:
        """Load what a first question would (index, embedder, language models, the model,
        the prompts' prefix caches), so it is answered as fast as later ones; `rag serve`
        runs it in the background at start."""
        _ = self.retriever.papers
        self.embedder.warm_up()
        self.router.warm_up()
        self.sentences.abbreviations()  # 22 ms for 57 abstracts, linear in them
        self.generator.warm_up(SYSTEM, COMPARE_SYSTEM)

    def cache_papers(self, cancel: threading.Event | None = None,
                     only: Collection[str] | None = None) -> paper_cache.WarmRun:
        """Prefill every paper's prompt (or `only` these papers') into the engine's host
        cache (rag/paper_cache.py), so a question about one paper prefills only its own
        words; it pauses while a question is answered. `rag serve` runs it in the background;
        an upload runs it for the new papers."""
        papers = [p for p in self.papers() if only is None or p.id in only]
        with self._caching:  # one run at a time: an upload's waits for the start's
            return paper_cache.warm(self.settings, self.generator, papers, cancel, self.answering)

    def refresh(self) -> None:
        """Re-read the index after an ingest (uploads): search, names and the typo vocabulary."""
        self.retriever.refresh()
        self.router.refresh()

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

    def answering(self) -> bool:
        """True while a question or comparison is being answered: `rag serve`'s background
        titles pause then, so a chat has the model's slots and the cores to itself."""
        return self._asking > 0

    def _counted(self, events: Iterator[Event]) -> Iterator[Event]:
        with self._asking_lock:
            self._asking += 1
        try:
            yield from events
        finally:
            with self._asking_lock:
                self._asking -= 1

    def stream(self, question: str, history: Sequence[Turn] = (),
               stop: threading.Event | None = None) -> Iterator[Event]:
        return self._counted(self._stream(question, history, stop))

    def _stream(self, question: str, history: Sequence[Turn],
                stop: threading.Event | None) -> Iterator[Event]:
        t0 = time.perf_counter()
        yield Status("searching", "Searching the abstracts…")
        route = self.router.route(question, history)
        q = route.query
        if route.intent == "decline":
            events: Iterator[Event] = self._decline(route, t0)
        elif route.intent == "compare":
            assert route.request is not None
            events = self._compare(q.text, route.request, history, stop, t0, q.notice)
        elif route.intent == "find":
            events = self._find(route, t0)
        elif route.intent == "about":
            events = self._about(route, t0)
        else:
            events = self._answer(route, stop, t0)
        if q.language != "en" and route.reason != "empty":
            # not glossed: the 0.5B's translation of a glossed line lost the method's name
            # more often, and the line then stays in English (tests/test_route.py, es)
            events = self.translator.stream(events, q.language, stop)
        else:
            events = self._glossed(events)
        for ev in events:
            if isinstance(ev, Final):
                ev = Final(replace(ev.answer, intent=route.intent, language=q.language,
                                   seconds=time.perf_counter() - t0))
            yield ev

    def _glossed(self, events: Iterator[Event]) -> Iterator[Event]:
        """The final answer with the acronyms its cited abstracts define spelled out once
        (rag/gloss.py); English answers only."""
        for ev in events:
            yield Final(gloss(ev.answer, self.retriever.papers)) if isinstance(ev, Final) else ev

    def compare_stream(self, left: str, right: str, history: Sequence[Turn] = (),
                       stop: threading.Event | None = None) -> Iterator[Event]:
        """Compare two papers named by id, name or description (the UI's pickers)."""
        q = f"Compare {left} and {right}"
        yield from self._counted(self._compare(q, cmp.Request(left, right), history, stop,
                                               time.perf_counter()))

    @property
    def parts(self) -> cmp.Parts:
        """What a comparison reads (a described side below the off-topic gate + 0.1 is not found)."""
        return cmp.Parts(self.retriever, self.sentences,
                         self.settings.route.offtopic_threshold + 0.1)

    def generate(self, prompt: object, stop: threading.Event | None
                 ) -> Iterator[tuple[str, str, GenerationStats]]:
        """(new plain text, raw text so far, stats): markers filtered out of the stream, and
        the stream cut after MAX_SENTENCES sentences, so what is shown is what is kept."""
        filt = MarkerFilter()
        raw, shown = "", ""
        with self.generator.stream(prompt, stop=stop) as pieces:  # type: ignore[arg-type]
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

    def retrieve(self, q: str, history: Sequence[Turn] = ()
                 ) -> tuple[list[Hit], tuple[str, ...], list[str]]:
        """(hits, follow-up context paper ids, papers named in q): the answer's retrieval."""
        route = self.router.route(q, history)
        return self._hits(route), route.context, list(route.query.named)

    def turn(self, question: str, answer: str) -> Turn:
        """A history turn from plain text (eval files, pasted chats): its papers are the ones
        its question names ("Compare SSL4RL and TaRO": both), else the first one its answer
        names (every one, in order, when the question asked for papers: a list, as the chat
        keeps every paper a list cites), else the best match of its question."""
        named = self.retriever.named_papers(question)
        if not named:
            named = self.retriever.named_papers(f"{question} {answer}")
            named = named if finding_kind(question) == "many" else named[:1]
        if not named:
            hits = self.retriever.search(question, k=1, group=True) if question.strip() else []
            named = [h.chunk.paper_id for h in hits]
        return Turn(question, answer, tuple(named))

    # ---- routes ---------------------------------------------------------------------------

    def _hits(self, route: Route) -> list[Hit]:
        hits = list(route.query.hits)
        if route.context:  # the previous papers' own best chunks first
            ctx = self.retriever.search(route.query.search, k=4, paper_ids=set(route.context),
                                        vector=route.query.vector)
            hits = _merge(ctx, hits)
        return hits

    def _decline(self, route: Route, t0: float) -> Iterator[Event]:
        q = route.query
        if route.reason == "empty":
            text = ("Please type a question about the ICML 2026 papers, e.g. “Which papers use "
                    "flow policies for RL?”")
            yield Final(Answer(question="", text=text, citations=(), hits=(), abstained=True,
                               reason="empty"))
            return
        if route.reason == "empty-index":
            yield Final(Answer(question=q.text, text="The index is empty: run `rag ingest` (or "
                               "`make run`) to index the seed abstracts, then ask again.",
                               citations=(), hits=(), abstained=True, reason="empty-index",
                               notice=q.notice))
            return
        papers = _distinct_papers(list(q.hits), self.retriever.papers)
        yield Sources(q.hits, tuple(papers))
        key = messages.OFF_TOPIC_NAMES if route.missing else messages.OFF_TOPIC
        fields = (messages.names_field(route.missing),) if route.missing else ()
        yield Final(Answer(
            question=q.text, text=messages.render(key, "en", fields) or "",
            message=key, fields=fields,
            citations=(), hits=q.hits, abstained=True, reason="off-topic",
            closest=tuple(p.id for p in papers[:3]), notice=q.notice,
            seconds=time.perf_counter() - t0))

    def _about(self, route: Route, t0: float) -> Iterator[Event]:
        """Questions about the assistant or the collection, answered without the model."""
        q = route.query
        small = route.reason == "small talk"
        text = self._small_talk(q.search) if small else self._collection()
        yield Final(Answer(question=q.text, text=text, citations=(), hits=(), abstained=False,
                           reason="small-talk" if small else "collection", notice=q.notice,
                           seconds=time.perf_counter() - t0))

    def _collection(self) -> str:
        """How many abstracts, from how many files, and the map's topic groups."""
        from rag.atlas import load_atlas

        papers = self.retriever.papers
        files = len({p.source for p in papers.values()})
        text = (f"The collection holds {len(papers)} ICML 2026 abstracts from {files} "
                f"file{'s' if files != 1 else ''}.")
        atlas = load_atlas(self.settings)
        if atlas is not None and atlas.clusters:
            groups = []
            for c in atlas.clusters:
                ids = sorted(p.paper_id for p in atlas.points if p.cluster == c.id
                             and p.paper_id in papers)
                named = [papers[i].label for i in ids if len(papers[i].label.split()) == 1]
                if ids:  # the papers with a name of their own (a phrase label reads badly here)
                    shown = ", ".join(named[:6]) or f"{len(ids)} papers"
                    more = f" and {len(ids) - len(named[:6])} more" if named and \
                        len(ids) > len(named[:6]) else ""
                    groups.append(f"- {', '.join(c.words[:4])} ({len(ids)}): {shown}{more}")
            if groups:
                text += " By their words they fall into these groups:\n" + "\n".join(groups)
        return text + "\nThe Papers tab lists them all, and the Map tab shows them by topic."

    def _small_talk(self, text: str) -> str:
        """The reply to a greeting, thanks or a request for help: what the assistant does, with
        example questions about papers the collection has."""
        if re.search(r"\b(?:" + THANKS + r")\b", text, re.IGNORECASE):
            return "You're welcome. Ask another question about the papers whenever you like."
        if re.search(r"\b(?:" + FAREWELL + r")\b", text, re.IGNORECASE):
            return "Goodbye."
        papers = self.retriever.papers
        named = sorted({p.label for p in papers.values() if len(p.label.split()) == 1})
        tries = [f"“What does {named[0]} propose?”"] if named else []
        tries += [f"“Compare {named[1]} and {named[2]}”"] if len(named) >= 3 else []
        return (f"Hello! I answer questions about the {len(papers)} ICML 2026 abstracts in this "
                "collection, and every claim cites the abstract sentence it comes from. Ask which "
                "papers work on a topic, ask about one paper's method or results, or compare two"
                + (": try " + " or ".join(tries) if tries else "") + ".")

    def _find(self, route: Route, t0: float) -> Iterator[Event]:
        """Answer 'which paper(s) ...?' from the index: the papers and their matching
        sentences, with no model call."""
        q, papers = route.query, self.retriever.papers
        hits = self._hits(route)
        yield Sources(tuple(hits), tuple(_distinct_papers(hits, papers)))
        if route.link_topic is not None:
            yield from self._find_links(route, hits, t0)
            return
        wide = list(q.pool) if route.find == "many" else []  # the same search, further down
        order = _distinct_papers(hits + wide, papers)[:10]
        own = names.own_names(q.search, names.common_names(papers)) \
            if route.find == "many" and not q.named else []
        # "Which papers involve GRPO?": the ones whose abstracts write it, each of them (dev:
        # the retrieved papers that write the question's coined name were its gold list every
        # time, and the sentence-score knee cut one of two)
        writers = names.writing(order, own) if own else []
        ranked, topic = extract.paper_scores(writers or order, q.search, self.sentences,
                                             q.vector, (1.0,), extract.TOPIC_WEIGHTS)
        a = self.settings.answer
        chosen = [p for p, _ in ranked][:a.list_most] if writers else extract.choose(
            order, ranked, route.find or "one", list(route.context) + list(q.named),
            a.list_floor, a.list_gap, a.list_most, topic, a.list_topic_floor, a.list_topic_gap,
            a.list_topic_relative)
        text, citations, sentences = extract.compose(q.search, chosen, self.sentences, q.vector,
                                                     self.settings.answer.complement)
        yield Token(strip_markers(text))
        yield Final(Answer(question=q.text, text=text, citations=citations, hits=tuple(hits),
                           abstained=False, sentences=sentences,
                           closest=tuple(p.id for p in order[:3]), notice=q.notice,
                           seconds=time.perf_counter() - t0,
                           first_token_seconds=time.perf_counter() - t0))

    def _find_links(self, route: Route, hits: list[Hit], t0: float) -> Iterator[Event]:
        """"Which papers (on X) have public code?": the papers whose abstracts give a link,
        each with the sentence holding it; on a topic, those of them its list would name; after
        a list ("Which of them share code?"), those of its papers; with none, "not stated" for
        the best of them."""
        q, papers, a = route.query, self.retriever.papers, self.settings.answer
        listed = [papers[p] for p in route.context if p in papers] if route.context else \
            list(papers.values())
        if route.link_topic and not route.context:  # the topic's own list, then those with code
            order = _distinct_papers(hits + list(q.pool), papers)[:10]
            ranked, topic = extract.paper_scores(order, route.link_topic, self.sentences,
                                                 q.vector, (1.0,), extract.TOPIC_WEIGHTS)
            # "the paper on X" keeps the one paper of that topic, "papers on X" its list
            listed = extract.choose(order, ranked, route.find or "many", [], a.list_floor,
                                    a.list_gap, a.list_most, topic, a.list_topic_floor,
                                    a.list_topic_gap, a.list_topic_relative)
        linked = [p for p in listed if links.link_sentences(p)]
        closest = tuple(p.id for p in (listed or _distinct_papers(hits, papers))[:3])
        if not linked:
            case = Case(q.search, papers, tuple(hits), closest, q.notice)
            yield Final(replace(self.finisher.not_stated(case, "not-stated",
                                                         first=closest[0] if closest else None,
                                                         key=messages.NO_LINK),
                                seconds=time.perf_counter() - t0))
            return
        text, citations, sentences = links.listing(linked)
        yield Token(strip_markers(text))
        yield Final(Answer(question=q.text, text=text, citations=citations, hits=tuple(hits),
                           abstained=False, sentences=sentences, closest=closest,
                           notice=q.notice, seconds=time.perf_counter() - t0,
                           first_token_seconds=time.perf_counter() - t0))

    def _answer(self, route: Route, stop: threading.Event | None, t0: float) -> Iterator[Event]:
        q, papers, a = route.query, self.retriever.papers, self.settings.answer
        hits, context, named = self._hits(route), route.context, list(route.query.named)
        if context and asks_for_more(q.search):  # "tell me more": what it proposes and shows
            q_model = more_about([papers[p].label for p in context if p in papers])
        else:
            q_model = resolve_reference(q.search, [papers[p] for p in context]) if context \
                else q.search
        qvec = q.vector if q_model == q.search else self.embedder.embed_one(q_model)

        def rank(paper: Paper) -> list[tuple[int, int]]:
            return [(e.start, e.end) for e in self.sentences.rank(paper, q_model, qvec)]

        passages = select_passages([h for h in hits if h.chunk.paper_id in context] if context
                                   else hits, papers, models.context_tokens(self.settings), a.max_passages,
                                   first=context or tuple(named[:2]), rank=rank)
        yield Sources(tuple(hits), tuple(_distinct_papers(hits, papers)))
        target = (context or tuple(named[:1]) or ("",))[0]
        case = Case(q_model, papers, tuple(hits), tuple(p.paper_id for p in passages[:3]),
                    q.notice, names.noun_words(q.text, q.language))  # a translation may keep its nouns
        direct = self.finisher.direct(case, target)
        if direct is not None:
            yield Token(strip_markers(direct.text))
            yield Final(direct)
            return
        drafted: list[tuple[str, GenerationStats, float]] = []
        yield from self._draft(SYSTEM, q_model, passages, stop, drafted)
        raw_text, stats, t_gen = drafted[0]
        answer = self.finisher.finish(case, raw_text, passages, target or None)
        answer, extra = self.finisher.complete(case, answer, target or None)
        if extra:
            yield Token(extra)
        if not context:  # a paper described, not named: the answer says which one it is
            answer = extract.name_first(answer, papers, q_model)
        yield Final(_timed(replace(answer, question=q.text), stats, t_gen, t0))

    def _redraft(self, q: str, passages: list[Passage]) -> str:
        """The model's whole draft over `passages`, not streamed (the second look's)."""
        raw = ""
        for _piece, raw, _stats in self.generate(
                self.generator.format_chat(SYSTEM, user_message(q, passages)), None):
            pass
        return raw

    def _draft(self, system: str, q: str, passages: list[Passage],
               stop: threading.Event | None, out: list[tuple[str, GenerationStats, float]]
               ) -> Iterator[Event]:
        """Stream the model's draft over `passages` as Tokens; `out` receives (raw text,
        stats, generation start). Answers and comparison syntheses share it."""
        yield Status("writing", "Writing the answer…" if system == SYSTEM
                     else "Writing a short synthesis…")
        prompt = self.generator.format_chat(system, user_message(q, passages))
        raw, stats, t_gen = "", None, time.perf_counter()
        for piece, raw, stats in self.generate(prompt, stop):
            if piece:
                yield Token(piece)
        assert stats is not None
        out.append((raw, stats, t_gen))

    def _compare(self, q: str, request: cmp.Request, history: Sequence[Turn],
                 stop: threading.Event | None, t0: float, notice: str = "") -> Iterator[Event]:
        """The table first (no model), then a synthesis drafted and verified like any answer;
        one no sentence of the two abstracts supports is replaced by a note."""
        yield Status("searching", "Finding both papers…")
        comp = cmp.compare(self.parts, request.left, request.right, history)
        cited = [s.paper for s in (comp.left, comp.right) if s.paper]
        yield Sources((), tuple(dict.fromkeys(cited)))
        yield Compared(comp)
        if not comp.rows:
            bad = next((s.status for s in (comp.left, comp.right) if s.status != "resolved"),
                       "same")
            yield Final(Answer(question=q, text=comp.message, citations=(), hits=(),
                               abstained=True, reason=f"compare-{bad}",
                               closest=tuple(p.id for p in cited), notice=notice,
                               comparison=comp))
            return
        left, right = comp.left.paper, comp.right.paper
        assert left and right
        passages = cmp.passages(comp)
        drafted: list[tuple[str, GenerationStats, float]] = []
        yield from self._draft(COMPARE_SYSTEM, q, passages, stop, drafted)
        raw, stats, t_gen = drafted[0]
        a = self.settings.answer
        text, cites, sents = attach(raw, passages, {left.id: left, right.id: right},
                                    self.sentences, a.support_threshold,
                                    a.unsupported == "drop", fixed={left.id: 1, right.id: 2},
                                    allowed=names.allowed_names(q, self.retriever.papers))
        if not any(x.supported for x in sents):  # nothing the abstracts back: the table only
            text, cites, sents = (cmp.UNVERIFIED, (), ())
        cells = tuple(c.citation for row in comp.rows for c in (row.left, row.right)
                      if c.citation)
        yield Final(_timed(Answer(question=q, text=text, citations=cells + cites, hits=(),
                                  abstained=False, sentences=sents, closest=(left.id, right.id),
                                  notice=notice, comparison=comp), stats, t_gen, t0))

def _timed(answer: Answer, stats: GenerationStats, t_gen: float, t0: float) -> Answer:
    """The answer with its generation's counters; first token measured from the question."""
    first = stats.first_token_seconds
    return replace(answer, first_token_seconds=None if first is None else t_gen - t0 + first,
                   prompt_tokens=stats.prompt_tokens, generated_tokens=stats.generated_tokens,
                   cached_prompt_tokens=stats.cached_prompt_tokens)


def _merge(first: list[Hit], rest: list[Hit]) -> list[Hit]:
    seen = {h.chunk.id for h in first}
    merged = list(first) + [h for h in rest if h.chunk.id not in seen]
    top = merged[0].score if merged else 0.0
    return [replace(h, rank=i + 1, score=max(h.score, top) if i < len(first) else h.score)
            for i, h in enumerate(merged)]


def _distinct_papers(hits: list[Hit], papers: dict[str, Paper]) -> list[Paper]:
    ids = list(dict.fromkeys(h.chunk.paper_id for h in hits))
    return [papers[i] for i in ids if i in papers]
