"""The router: one typed Query in, one Route (intent + a reason a user can read) out.

Everything a later stage needs is computed here once: the cleaned text, its language, an
English search text (translated by the generator when the question is not English, typos
corrected against the corpus vocabulary when it is), one embedding, the papers it names
(exactly or fuzzily), and the fused hits. The intent is then decided by evidence:

- compare: an explicit comparison whose sides resolve to papers;
- follow-up: the question alone finds no paper confidently (or finds the previous one)
  while the previous turn's papers do match it; no pronoun list is involved;
- decline: no named paper, no follow-up, and nothing in the index is close, neither to the
  question nor to the search terms the generator writes for it (rag/rewrite.py);
- find: "which paper(s) ...", "is there work on ...", "what work is there on X here?";
- about: a greeting, thanks or "what can you do?", and the collection itself ("How many
  papers are in the collection?", "What topics does it cover?"): answered without the model;
- ask: everything else.

Every threshold lives in `RouteSettings` (config), fitted on the eval's dev split.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from rag import compare as cmp
from rag import cover, language, links, names, spelling
from rag import phrases as ph
from rag.config import RouteSettings
from rag.errors import RagError
from rag.evidence import SentenceIndex
from rag.phrases import clean_question, finding_kind, ordinal_papers
from rag.retrieve import Retriever, tokenize
from rag.types import Hit, Turn

log = logging.getLogger(__name__)

Intent = Literal["ask", "find", "compare", "followup", "decline", "about"]

@dataclass(frozen=True)
class Query:
    """A question as every later stage needs it, computed once."""

    text: str  # cleaned, as the user wrote it
    language: str  # ISO 639-1
    search: str  # English text used for search and for the model
    vector: np.ndarray  # embedding of `search`
    named: tuple[str, ...]  # papers named in it, in order of appearance
    hits: tuple[Hit, ...]  # the best fused hits of `search` (what the sources panel shows)
    pool: tuple[Hit, ...]  # the longer fused list they head, for paper-finding questions
    best: float  # best dense cosine among the top fused hits: the off-topic signal
    notice: str = ""
    corrected: tuple[tuple[str, str], ...] = ()  # (typo, correction) pairs applied to `search`
    # the search terms the generator wrote when `search` itself matched no abstract
    # (rag/rewrite.py); `vector`, `hits`, `pool` and `best` are then theirs
    expanded: str = ""


@dataclass(frozen=True)
class Route:
    intent: Intent
    reason: str  # for the user and the logs: why this route
    query: Query
    context: tuple[str, ...] = ()  # follow-up: the previous turn's papers
    find: Literal["one", "many"] | None = None
    request: cmp.Request | None = None
    evidence: dict[str, float] = field(default_factory=dict)  # the numbers behind the choice
    missing: tuple[str, ...] = ()  # decline: the names the question asks about that no abstract has
    # find: papers that give a code link, on this topic ("" = all of them); None: no such ask
    link_topic: str | None = None


class Router:
    """Builds Queries and decides Routes over one retriever's papers."""

    def __init__(self, settings: RouteSettings, retriever: Retriever, sentences: SentenceIndex,
                 translate: Callable[[str, str], str], max_chars: int = 2000,
                 expand: Callable[[str], str] | None = None) -> None:
        self.settings = settings
        self.retriever = retriever
        self.sentences = sentences
        self.translate = translate  # (text, language code) -> English text
        self.expand = expand  # English question -> search terms (rag/rewrite.py), or None
        self.max_chars = max_chars
        self._vocab: dict[str, int] | None = None
        self._vocab_key = 0
        self._mentions: names.Mentions | None = None
        self._mentions_key = 0

    def warm_up(self) -> None:
        """Load what the first question would: lingua's models, wordfreq's list, the vocabulary,
        what the abstracts mention."""
        language.warm_up()
        self.correct("warm up the tpyo list")
        spelling.warm_up(self.settings.typo_english_zipf)
        self.mentions()

    # ---- the query --------------------------------------------------------------------------

    def query(self, question: str) -> Query:
        text, notice = clean_question(question, self.max_chars)
        r = self.settings
        lang = (language.detect(text, r.language_confidence, r.language_sure, r.language_candidates)
                if text else "en")
        corrected: tuple[tuple[str, str], ...] = ()
        if lang != "en":
            try:
                search = self.translate(text, lang).strip() or text
            except RagError as e:  # no model: search with the question as written
                log.warning("could not translate a %s question: %s", lang, e)
                search = text
                notice = (notice + " " if notice else "") + (
                    "The question could not be translated for searching; results may be weaker.")
        else:
            search, corrected = self.correct(text)
        named = self.named(f"{text} {search}" if search != text else text)
        vector, pool, best = self._search(search)
        return Query(text, lang, search, vector, tuple(named), tuple(pool[:8]), tuple(pool),
                     best, notice, corrected)

    def _search(self, text: str) -> tuple[np.ndarray, list[Hit], float]:
        """(embedding, 30 fused hits, off-topic signal) of `text`. The signal is the best
        cosine among the top 8 fused hits (where BM25 and the embedding agree); over all 30
        dense hits it separated dev's off-topic rows worse."""
        vector = self.retriever.embedder.embed_one(text)
        pool = self.retriever.search(text, k=30, vector=vector) if text.strip() else []
        best = max((h.dense_score for h in pool[:8] if h.dense_score is not None), default=0.0)
        return vector, pool, best

    def named(self, text: str) -> list[str]:
        """Papers named in `text`: exact names and numbers first, then fuzzy matches of
        name-like words (a typo in "SSL4LR" still names SSL4RL)."""
        papers = self.retriever.papers
        found = [i for i in dict.fromkeys(re.findall(r"\b\d{3}-\d{2}\b", text)) if i in papers]
        found += [p for p in self.retriever.named_papers(text) if p not in found]
        names = self.retriever.names
        from rapidfuzz import fuzz, process

        for tok in re.findall(r"[\w@.-]{4,}", text):
            low = tok.lower().strip(".-")
            if low in names or low in self.vocabulary() or not ph.namelike(tok):
                continue
            hit = process.extractOne(low, list(names), scorer=fuzz.ratio,
                                     score_cutoff=self.settings.fuzzy_name)
            if hit and ph.shared_word_only(low, hit[0]):
                continue  # "KL-regularized" is not "PDE-regularized"
            if hit and names[hit[0]] not in found:
                found.append(names[hit[0]])
        return found

    def refresh(self) -> None:
        """Forget the corpus vocabulary; the next question rebuilds it from the index."""
        self._vocab = None
        self._mentions = None

    def mentions(self) -> names.Mentions:
        """What the indexed abstracts mention, for the name check (rag/names.py)."""
        papers = self.retriever.papers
        if self._mentions is None or self._mentions_key != len(papers):
            self._mentions = names.mentions((p.clean for p in papers.values()),
                                            (p.label for p in papers.values()))
            self._mentions_key = len(papers)
        return self._mentions

    def vocabulary(self) -> dict[str, int]:
        """Word counts of the indexed abstracts: what a typo is corrected towards."""
        papers = self.retriever.papers
        if self._vocab is None or self._vocab_key != len(papers):
            self._vocab = spelling.vocabulary(p.clean for p in papers.values())
            self._vocab_key = len(papers)
        return self._vocab

    def correct(self, text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Typos corrected towards the corpus vocabulary (rag/spelling.py)."""
        r = self.settings
        return spelling.correct(text, self.vocabulary(), r.typo_ratio, r.typo_zipf,
                                r.typo_english_zipf)

    # ---- the route --------------------------------------------------------------------------

    def route(self, question: str, history: Sequence[Turn] = ()) -> Route:
        q = self.query(question)
        return self.decide(q, history)

    def decide(self, q: Query, history: Sequence[Turn] = ()) -> Route:
        s = self.settings
        if not q.text:
            return Route("decline", "empty", q)
        if not self.retriever.papers:
            return Route("decline", "empty-index", q)
        if ph.SMALL_TALK.match(q.search) or ph.SMALL_TALK.match(q.text):
            # "thanks!" after an answer is no follow-up question, "hi" no off-topic one
            return Route("about", "small talk", q)
        if ph.COLLECTION.search(q.search):  # "How many papers are there?": the index answers
            return Route("about", "asks about the collection itself", q)
        request = self._comparison(q, history)
        if request is not None:
            return Route("compare", "asks to compare two papers", q, request=request)
        prev = tuple(p for p in (history[-1].paper_ids if history else ())
                     if p in self.retriever.papers)
        top = q.hits[0].chunk.paper_id if q.hits else ""
        evidence = {"best": round(q.best, 3)}
        kind = finding_kind(q.search)
        picked = ordinal_papers(q.search, prev)
        if picked and not (set(q.named) - set(prev)) and not ph.NEW_TOPIC.search(q.search):
            # "What does the second one evaluate on?" after a list: that paper, by its place
            return Route("followup", "refers to the previous answer's papers by their place", q,
                         context=tuple(picked), evidence=evidence)
        if prev and not (set(q.named) - set(prev)) and kind is None and \
                not ph.NEW_TOPIC.search(q.search) and \
                not self._describes_another(q, prev, evidence):
            # "Different question: ...": the user says so; "the paper about X": X names another
            prev_sim = self._similarity(q, prev)
            evidence["previous"] = round(prev_sim, 3)
            alone_confident = q.best >= s.followup_confident and top not in prev
            # a short question in plain words that finds nothing alone ("What does it prove?")
            # leans on the previous turn even when its words match no sentence of that paper
            generic = len(q.search.split()) <= 6 and ph.plain_words(q.search)
            if (prev_sim >= s.followup_min or generic) and \
                    (not alone_confident or set(q.named) & set(prev)):
                # naming one of them ("How does TaRO do it?" after comparing two) narrows the
                # follow-up to the ones it names
                named = tuple(p for p in prev if p in q.named) or prev
                if len(named) > 1 and links.asks_link(q.search):  # "Which of them share code?"
                    return Route("find", "asks which of the previous answer's papers give a "
                                 "code link", q, find="many", context=named, evidence=evidence,
                                 link_topic="")
                return Route("followup", "refers to the previous answer's papers", q,
                             context=named, evidence=evidence)
        link_topic = None
        plural = kind == "many" or bool(ph.PAPERS.search(q.search) or ph.YESNO.match(q.search))
        if not q.named and links.asks_link(q.search) and (
                kind is not None or plural or links.names_code(q.search)):
            # "Which (RL) papers on video have public code?": the code link filters the list,
            # and the rest of the question is its topic, searched and gated on its own; "Does
            # the paper on early-exit actors have public code?": the one paper of that topic
            # (the model had answered with its method sentence)
            kind = kind or ("many" if plural else "one")
            topic = links.link_topic(q.search)
            if not cover.topic_words(topic, s.link_topic_zipf):  # "Which papers have made ?"
                return Route("find", "asks which papers give a code link", q, find="many",
                             evidence=evidence, link_topic="")  # "Where is the code?": all
            link_topic = topic
            vector, pool, best = self._search(link_topic)
            evidence["topic"] = round(best, 3)
            q = replace(q, vector=vector, hits=tuple(pool[:8]), pool=tuple(pool), best=best)
        if not q.named and q.best < s.offtopic_threshold and not self._covered(q, evidence) \
                and not self._written(q, evidence):
            wider = self._expanded(q, evidence)
            if wider is None:
                return Route("decline", "off-topic: no abstract is close to this question", q,
                             evidence=evidence)
            q = wider  # "bounding what an algorithm reveals about one person": privacy;
            # its search text stays the user's question (the names below are checked on it)
        if not q.named and (q.language == "en" or q.search != q.text):  # English text only:
            # "... a new optimizer that replaces Adam?": no abstract says Adam
            missing = names.absent_names(q.search, self.mentions(),
                                         names.common_names(self.retriever.papers), s.fuzzy_name,
                                         foreign=names.noun_words(q.text, q.language))
            if missing:
                return Route("decline", f"off-topic: no abstract mentions {missing[0]}", q,
                             evidence=evidence, missing=tuple(missing))
        identify = (ph.IDENTIFY.search(q.search) or (ph.NAME_OF.search(q.search)
                                                    if not ph.IN_PAPER.search(q.search) else None)) \
            if kind is None and not q.named else None
        if identify:  # "which detector treats ...?": asks which paper's method it is
            kind = "many" if identify.group("plural") else "one"
        elif kind is None and not q.named and ph.YESNO.match(q.search):
            kind = "one"  # "Is infrared also used like that for dark videos?": yes, in this paper
        via = f" (searched as: {q.expanded})" if q.expanded else ""
        if kind is not None:
            return Route("find", f"asks which {'paper' if kind == 'one' else 'papers'} match{via}"
                         + (" and give a code link" if link_topic else ""),
                         q, find=kind, evidence=evidence, link_topic=link_topic)
        return Route("ask", f"a question about the papers' content{via}", q, evidence=evidence)

    def _expanded(self, q: Query, evidence: dict[str, float]) -> Query | None:
        """`q` searched by the terms the generator writes for it, when `q` is at least
        `route.expand_floor` close and those terms find an abstract at least
        `route.expand_threshold` close; else None (no generator, the rewrite off or failed, a
        question too far to try, or still nothing close)."""
        if self.expand is None or self.settings.expand_threshold <= 0 or not q.search.strip() \
                or q.best < self.settings.expand_floor:
            return None
        try:
            terms = self.expand(q.search)
        except RagError as e:  # no model: the question is declined as before
            log.warning("could not write search terms: %s", e)
            return None
        if not terms or terms.lower() == q.search.lower():
            return None
        vector, pool, best = self._search(terms)
        evidence["expanded"] = round(best, 3)
        if best < self.settings.expand_threshold:
            return None
        notice = (q.notice + " " if q.notice else "") + \
            f"No abstract matched the question's own words; searched for: {terms}."
        return replace(q, vector=vector, hits=tuple(pool[:8]), pool=tuple(pool), best=best,
                       expanded=terms, notice=notice)

    def _covered(self, q: Query, evidence: dict[str, float]) -> bool:
        """One of the top hits' abstracts has (nearly) every content word of the question:
        it is about that abstract's subject, however low the embedding scores it."""
        papers = self.retriever.papers
        ids = dict.fromkeys(h.chunk.paper_id for h in q.hits if h.chunk.paper_id in papers)
        share = max((cover.coverage(q.search, papers[p]) for p in ids), default=0.0)
        evidence["covered"] = round(share, 3)
        return share >= self.settings.offtopic_covered

    def _written(self, q: Query, evidence: dict[str, float]) -> bool:
        """One of the retrieved abstracts writes a coined name the question writes ("Which
        other papers use GRPO like that?": two abstracts write GRPO, however low the embedding
        scores the question); a field-wide one (LLM, RL) does not count (names.own_names)."""
        papers = self.retriever.papers
        own = names.own_names(q.search, names.common_names(papers))
        ids = list(dict.fromkeys(h.chunk.paper_id for h in q.hits + q.pool
                                 if h.chunk.paper_id in papers))[:10]  # as the list reads them
        found = bool(own) and bool(names.writing([papers[p] for p in ids], own))
        if found:
            evidence["written"] = 1.0
        return found

    def _describes_another(self, q: Query, prev: tuple[str, ...],
                           evidence: dict[str, float]) -> bool:
        """Whether `q` names a paper by its topic ("the paper about privacy auditing") that is
        not one of `prev`: that topic, searched alone, finds another paper first, at least as
        close as the off-topic gate asks of any question."""
        description = ph.described(q.search)
        if not description:
            return False
        _, pool, best = self._search(description)
        evidence["described"] = round(best, 3)
        return bool(pool) and pool[0].chunk.paper_id not in prev and \
            best >= self.settings.offtopic_threshold

    def _similarity(self, q: Query, papers: tuple[str, ...]) -> float:
        """Best cosine of the question against any sentence of `papers` (in memory)."""
        best = 0.0
        for pid in papers:
            _, vecs = self.sentences.get(self.retriever.papers[pid])
            if len(vecs):
                best = max(best, float(np.max(vecs @ q.vector)))
        return best

    def _comparison(self, q: Query, history: Sequence[Turn]) -> cmp.Request | None:
        """A comparison request whose sides are papers. An imperative "compare A and B" is
        always one; "A vs B", "how does A differ from B" and "difference between A and B"
        need at least one side to name a paper, and "A vs B" inside a paper-finding
        question ("which papers study exploration vs exploitation?") is not one."""
        prev = [p for p in (history[-1].paper_ids if history else ()) if p in self.retriever.papers]
        picked = ordinal_papers(q.search, prev)
        if len(picked) == 2 and (ph.COMPARATIVE.search(q.search) or ph.COMPARE_THEM.search(q.search)):
            return cmp.Request(picked[0], picked[1])  # "compare the first and the last"
        for text in dict.fromkeys((q.text, q.search)):
            tail = re.match(r"^\s*(?:and|so|but|what about)?\s*(?:vs\.?|versus|compared (?:to|with))"
                            r"\s+([^,;:]+?)[?.!]*$", text, re.IGNORECASE)
            # (a side, not a clause: "Compared with vanilla SC, how many fewer samples does
            # Blend-ASC draw?" asks a detail)
            if tail and history and history[-1].paper_ids and self._resolves(tail.group(1), history):
                return cmp.Request("that", tail.group(1))  # "and versus PQL?" after a turn
            request = cmp.parse_request(text)
            if request is None:
                continue
            if re.match(r"^\s*(?:and |so |ok,? )?(?:please )?(?:compare|contrast)\b", text,
                        re.IGNORECASE):
                return request
            if finding_kind(text) is not None:
                continue
            describes = bool(ph.DESCRIBES_PAPER.search(text))
            sides = [self._resolves(x, history, describes) for x in (request.left, request.right)]
            if all(sides) and len(set(sides)) == 2:
                return request
            if any(sides) and any(not found and ph.proper_name(x) for found, x in
                                  zip(sides, (request.left, request.right), strict=True)):
                return request  # "PaperGuard vs Llama Guard": the other side is not in the corpus
        if len(q.named) >= 2 and ph.COMPARATIVE.search(q.search) and finding_kind(q.search) is None:
            return cmp.Request(q.named[0], q.named[1])  # "which is faster, A or B?"
        if len(prev) == 2 and not set(q.named) - set(prev) and (ph.WHICH_OF_TWO.search(q.search) or (
                ph.BOTH.search(q.search) and (ph.COMPARATIVE.search(q.search) or
                                            ph.COMPARE_THEM.search(q.search)))):
            # "how do they differ?", "compare the two" after an answer about exactly two papers
            return cmp.Request(prev[0], prev[1])
        return None

    def _resolves(self, side: str, history: Sequence[Turn], describes: bool = False) -> str:
        """The paper id a comparison side names (by pronoun, id, name or label), or ""."""
        if cmp.is_pronoun(side):
            return history[-1].paper_ids[0] if history and history[-1].paper_ids else ""
        named = self.named(side)
        if named:
            return named[0]
        low = side.strip().lower()
        label = next((p.id for p in self.retriever.papers.values() if p.label.lower() == low), "")
        bare = re.sub(r"^(?:the|a|an)\s+", "", side.strip(), flags=re.IGNORECASE)
        if not label and ph.proper_name(bare) and len(bare) > 2:  # "the AV Filter": a name one
            pat = re.compile(r"(?<!\w)" + re.escape(bare) + r"(?!\w)")  # abstract uses
            users = [p.id for p in self.retriever.papers.values() if pat.search(p.clean)]
            label = users[0] if len(users) == 1 else ""
        if label or len(side.split()) < 3 or not describes:
            return label  # "the 3B GRPO baseline" describes no paper; "the ... paper" may
        found = cmp.resolve_side(cmp.Parts(self.retriever, self.sentences,
                                           self.settings.offtopic_threshold + 0.1), side, history)
        return found.paper.id if found.status == "resolved" and found.paper else ""


__all__ = ["Intent", "Query", "Route", "Router", "clean_question", "finding_kind", "ordinal_papers",
           "tokenize"]
