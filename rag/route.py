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
from rag import cover, language, names, spelling
from rag.config import RouteSettings
from rag.errors import RagError
from rag.evidence import SentenceIndex
from rag.retrieve import Retriever, tokenize
from rag.types import Hit, Turn

log = logging.getLogger(__name__)

Intent = Literal["ask", "find", "compare", "followup", "decline", "about"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")

_FINDING = re.compile(
    r"\b(?:which|what)\s+(?:other\s+)?(?P<n1>papers?|works?|stud(?:y|ies)|articles?)\b|"
    r"\b(?:is|are|does|do)\s+there\s+(?:also\s+)?(?:be\s+|exist\s+)?(?:a|an|any)?\s*(?:other\s+)?(?:recent\s+)?"
    r"(?P<n2>papers?|articles?|publications?|works?|stud(?:y|ies)|research|something|anything)\b|"
    r"\b(?:find|list|show)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?P<n3>papers?|articles?|works?)\b|"
    r"\b(?:what|which)\s+(?:was|is)\s+(?:the|that)\s+(?P<n4>paper|article|work|study)\b|"
    r"\bwhich (?:one )?(?:is|was) (?P<n5>it|that)\b|\bwhich (?P<n9>one)\s*\??\s*$|"
    r"^(?:i|we) (?:remember|recall|once read|read) (?:a|an|some|the) (?P<n6>\w+)|"
    r"\bwhat (?P<n7>work|research|papers)\s+(?:is|are|exists?)\s+(?:there\s+)?(?:on|about|in)\b|"
    r"\b(?:any|some) (?P<n8>papers?|articles?|works?|research)\s+(?:on|about|that|which|using|in)\b|"
    r"\b(?:looking|searching) for (?:a |an |any |some )?(?P<n10>papers?|works?|something|anything)"
    r"\s+(?:on|about|that|which|using|in)\b|"
    # a bare noun phrase: "papers on defending against backdoors?", "research about X"
    r"^(?:(?:and|also|more|other)\s+)?(?P<n11>papers?|articles?|works?|research|stud(?:y|ies))"
    r"\s+(?:on|about|that|which|using|in|for|addressing|tackling|studying|proposing)\b|"
    # "how many papers use RL?": the list answers it (the collection's size is _COLLECTION's)
    r"\bhow many (?P<n12>papers|works|studies|articles)\b",
    re.IGNORECASE)


def clean_question(question: str, limit: int) -> tuple[str, str]:
    """(question, notice): control characters removed, whitespace folded, length capped."""
    q = " ".join(_CONTROL.sub(" ", question or "").split())
    if len(q) <= limit:
        return q, ""
    # a pasted text with the question at its end ("<3,000 characters of notes> Which paper
    # ...?"): the last question is kept, after as much of the beginning as fits
    asks = [m for m in re.finditer(r"(?:^|(?<=[.!?:;]\s))[^.!?]*\?", q) if m.start() >= limit // 2]
    tail = q[asks[-1].start():].strip() if asks else ""
    if tail and len(tail) <= limit // 2:
        head = q[:limit - len(tail) - 3].rsplit(" ", 1)[0].strip()
        return f"{head} … {tail}" if head else tail, (f"Your question was {len(q):,} characters; the first "
                                     f"{len(head):,} and its last question were used.")
    cut = q[:limit].rsplit(" ", 1)[0] or q[:limit]
    return cut, f"Your question was {len(q):,} characters; only the first {len(cut):,} were used."


def finding_kind(question: str) -> Literal["one", "many"] | None:
    """'one' for 'which paper ...', 'many' for 'which papers ...' or 'what work is there on
    ...', None when the question does not ask to find papers."""
    m = _FINDING.search(question)
    if not m:
        return None
    noun = next(g for g in m.groups() if g).lower()
    if m.group("n5") or m.group("n6") or m.group("n9"):
        return "one"
    if noun in ("something", "anything"):
        return "many"
    if m.group("n10") and not noun.endswith("s"):
        return "one"
    if noun in ("work", "research") and not m.group(0).lower().startswith("which"):
        return "many"  # "is there work on X", "what work is there on X": all of it
    return "many" if noun.endswith(("s", "ies")) and not noun.endswith("ss") else "one"


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
            if low in names or low in self.vocabulary() or not _namelike(tok):
                continue
            hit = process.extractOne(low, list(names), scorer=fuzz.ratio,
                                     score_cutoff=self.settings.fuzzy_name)
            if hit and _shared_word_only(low, hit[0]):
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
        if _SMALL_TALK.match(q.search) or _SMALL_TALK.match(q.text):
            # "thanks!" after an answer is no follow-up question, "hi" no off-topic one
            return Route("about", "small talk", q)
        if _COLLECTION.search(q.search):  # "How many papers are there?": the index answers
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
        if picked and not (set(q.named) - set(prev)) and not _NEW_TOPIC.search(q.search):
            # "What does the second one evaluate on?" after a list: that paper, by its place
            return Route("followup", "refers to the previous answer's papers by their place", q,
                         context=tuple(picked), evidence=evidence)
        if prev and not (set(q.named) - set(prev)) and kind is None and \
                not _NEW_TOPIC.search(q.search):  # "Different question: ...": the user says so
            prev_sim = self._similarity(q, prev)
            evidence["previous"] = round(prev_sim, 3)
            alone_confident = q.best >= s.followup_confident and top not in prev
            # a short question in plain words that finds nothing alone ("What does it prove?")
            # leans on the previous turn even when its words match no sentence of that paper
            generic = len(q.search.split()) <= 6 and _plain_words(q.search)
            if (prev_sim >= s.followup_min or generic) and \
                    (not alone_confident or set(q.named) & set(prev)):
                # naming one of them ("How does TaRO do it?" after comparing two) narrows the
                # follow-up to the ones it names
                named = tuple(p for p in prev if p in q.named) or prev
                return Route("followup", "refers to the previous answer's papers", q,
                             context=named, evidence=evidence)
        if not q.named and q.best < s.offtopic_threshold and not self._covered(q, evidence):
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
        identify = (_IDENTIFY.search(q.search) or (_NAME_OF.search(q.search)
                                                    if not _IN_PAPER.search(q.search) else None)) \
            if kind is None and not q.named else None
        if identify:  # "which detector treats ...?": asks which paper's method it is
            kind = "many" if identify.group("plural") else "one"
        elif kind is None and not q.named and _YESNO.match(q.search):
            kind = "one"  # "Is infrared also used like that for dark videos?": yes, in this paper
        via = f" (searched as: {q.expanded})" if q.expanded else ""
        if kind is not None:
            return Route("find", f"asks which {'paper' if kind == 'one' else 'papers'} match{via}",
                         q, find=kind, evidence=evidence)
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
        if len(picked) == 2 and (_COMPARATIVE.search(q.search) or _COMPARE_THEM.search(q.search)):
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
            describes = bool(_DESCRIBES_PAPER.search(text))
            sides = [self._resolves(x, history, describes) for x in (request.left, request.right)]
            if all(sides) and len(set(sides)) == 2:
                return request
            if any(sides) and any(not found and _proper_name(x) for found, x in
                                  zip(sides, (request.left, request.right), strict=True)):
                return request  # "PaperGuard vs Llama Guard": the other side is not in the corpus
        if len(q.named) >= 2 and _COMPARATIVE.search(q.search) and finding_kind(q.search) is None:
            return cmp.Request(q.named[0], q.named[1])  # "which is faster, A or B?"
        if len(prev) == 2 and not set(q.named) - set(prev) and (_WHICH_OF_TWO.search(q.search) or (
                _BOTH.search(q.search) and (_COMPARATIVE.search(q.search) or
                                            _COMPARE_THEM.search(q.search)))):
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
        if not label and _proper_name(bare) and len(bare) > 2:  # "the AV Filter": a name one
            pat = re.compile(r"(?<!\w)" + re.escape(bare) + r"(?!\w)")  # abstract uses
            users = [p.id for p in self.retriever.papers.values() if pat.search(p.clean)]
            label = users[0] if len(users) == 1 else ""
        if label or len(side.split()) < 3 or not describes:
            return label  # "the 3B GRPO baseline" describes no paper; "the ... paper" may
        found = cmp.resolve_side(cmp.Parts(self.retriever, self.sentences,
                                           self.settings.offtopic_threshold + 0.1), side, history)
        return found.paper.id if found.status == "resolved" and found.paper else ""


_ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3,
             "4th": 3, "fifth": 4, "5th": 4, "sixth": 5, "6th": 5, "seventh": 6, "7th": 6,
             "last": -1}
# "the second one", "the third paper", "the first and the last", "the first two": a place in
# the previous answer's list (not "the first to ...", "the first large-scale study")
_ORDINAL = re.compile(r"\b(?:the\s+|(?<=\band\s)(?:the\s+)?|(?<=\bor\s)(?:the\s+)?)(" +
                      "|".join(_ORDINALS) + r")(?:\s+(two|three|2|3))?"
                      r"(?=\s+(?:ones?|papers?|works?|stud(?:y|ies)|methods?|approach(?:es)?|"
                      r"articles?|entr(?:y|ies)|items?)\b|\s*(?:[,.?!;:]|$)|\s+(?:and|or|vs\.?|versus|"
                      r"with|compare|differ)\b)", re.IGNORECASE)


def ordinal_papers(text: str, prev: Sequence[str]) -> list[str]:
    """The papers of the previous answer (`prev`, in its order) that `text` points to by their
    place: "the second one", "the first and the last", "the first two"; none for fewer than
    two papers."""
    if len(prev) < 2:
        return []
    out: list[str] = []
    for m in _ORDINAL.finditer(text):
        word, count = m.group(1).lower(), (m.group(2) or "").lower()
        i = _ORDINALS[word]
        if count:
            n = 2 if count in ("two", "2") else 3
            ids = list(prev[:n]) if i == 0 else list(prev[-n:]) if i == -1 else []
        else:
            ids = [prev[i]] if -len(prev) <= i < len(prev) else []
        out += [p for p in ids if p not in out]
    return out


def _shared_word_only(token: str, name: str) -> bool:
    """True when a hyphenated token resembles a hyphenated name through a shared word of 4+
    letters alone: the parts left over share less than half their letters ("kl-regularized"
    and "pde-regularized": "kl" and "pde"), where a misspelling keeps most ("bi-nca", "bi-nac";
    "blend-ask", "blend-asc")."""
    from rapidfuzz import fuzz

    a, b = token.split("-"), name.split("-")
    shared = {x for x in a if len(x) >= 4 and x in b}
    if len(a) < 2 or len(b) < 2 or not shared:
        return False
    rest_a = "-".join(x for x in a if x not in shared)
    rest_b = "-".join(x for x in b if x not in shared)
    return bool(rest_a or rest_b) and fuzz.ratio(rest_a, rest_b) < 50


_COMPARATIVE = re.compile(r"\bcompar(?:e|ed|ing|ison)\b|\bcontrast\b|\bvs\.?\s|\bversus\b|"
                          r"\b(?:which|who) (?:is|was|does|do|has|one)\b.*\b(?:better|worse|faster|"
                          r"slower|more|less|larger|smaller|higher|lower)\b|\b(?:more|less|"
                          r"better|faster) \w+ than\b|\bcompared? (?:to|with)\b|\bdiffer",
                          re.IGNORECASE)
# the two papers of the previous answer, referred to together: "how do they differ?", "compare
# the two", "which of them is faster?"
_BOTH = re.compile(r"\b(?:they|them|these|those|both|(?:the|these|those) (?:two|2)\b|each other|"
                   r"one another)\b", re.IGNORECASE)
_COMPARE_THEM = re.compile(r"\b(?:differen(?:ce|ces|t)|similar|similarities|alike|in common|the same)\b",
                           re.IGNORECASE)
# "which of them is faster / reports the bigger speedup / needs fewest samples": English's
# comparatives and superlatives of size, speed, amount and quality
_WHICH_OF_TWO = re.compile(r"\bwhich (?:one|of (?:them|the two|these|those|both))\b.*\b(?:(?:bett|"
                           r"fast|slow|larg|bigg|small|high|low|strong|weak|cheap|long|short|great|"
                           r"few)(?:er|est)|best|worse|worst|more|most|less|least)\b",
                           re.IGNORECASE)
_IDENTIFY = re.compile(r"^\s*(?:which|what)\s+(?:(?!(?:two|three|four|five|six|both|\d+)\s)\w+\s+)?"
                       r"(?:method|approach|framework|detector|"
                       r"technique|algorithm|system|architecture|benchmark|model|tool)(?P<plural>s?)\b"
                       r"(?!\s+(?:does|do|did|is|are|was|were)\s+(?:it|they|this|that|its|their|"
                       r"the\s+(?:paper|work|study|authors?|method|approach|model)s?)\b)",
                       re.IGNORECASE)
# "what's the name of the approach that ...?", "name of the architecture where ...": which one
_NAME_OF = re.compile(r"^\s*(?:(?:what|which)(?:'s|\s+is|\s+was|\s+are|\s+were)\s+)?(?:the\s+)?names?\s+"
                      r"of\s+(?:the|that|this|a|an)\s+(?:[\w-]+\s+){0,2}(?:method|approach|framework|"
                      r"detector|technique|algorithm|system|architecture|benchmark|model|tool|paper|"
                      r"work|dataset)(?P<plural>s?)\b", re.IGNORECASE)
# "... proposed in the paper on logistic bandits": the name asked is a detail of one paper
_IN_PAPER = re.compile(r"\b(?:in|of|from|by)\s+(?:the|this|that)\s+(?:paper|article|work|study)\b",
                       re.IGNORECASE)
# a yes/no question about something other than "the paper", "it" or "this method": naming
# no paper, it asks whether the collection has such work ("Can X be done without Y?")
_YESNO = re.compile(r"^\s*(?:(?:okay|ok|and|so|also|then)\b[.,]?\s+)*(?:is|are|does|do|did|can|could|has|"
                    r"have|was|were)\s+(?!(?:the|this|that|these|those|its?|their|they|he|she|you|"
                    r"we|i)\b)", re.IGNORECASE)
# the user says the question is not about the previous answer ("OK, different question: for
# the unlearning paper, which benchmarks did they use?" matched the previous paper at 0.34)
_NEW_TOPIC = re.compile(r"\b(?:(?:different|new|unrelated|separate|another)\s+"
                        r"(?:question|topic|subject)|switching\s+(?:topics?|gears|subjects?)|"
                        r"chang(?:e|ing)\s+(?:the\s+)?(?:topic|subject)|on\s+another\s+note|"
                        r"something\s+(?:else|different))\b", re.IGNORECASE)
# a greeting, thanks or a request for help, and nothing else (filler words around one)
_GREETING = (r"hi|hello|hey|hiya|howdy|good\s+(?:morning|afternoon|evening)|thanks?|thank\s+you|"
             r"many\s+thanks|thx|ty|cheers|great|cool|nice|perfect|awesome|ok(?:ay)?|got\s+it|bye|"
             r"goodbye|see\s+you|help|what\s+can\s+you\s+do|who\s+are\s+you|how\s+does\s+this\s+work")
_SMALL_TALK = re.compile(
    r"^(?=.*\b(?:" + _GREETING + r")\b)\s*(?:(?:" + _GREETING + r"|a\s+lot|so|much|there|again|you|"
    r"all|that|this|it|was|is|helps?|helped|helpful|very|really|indeed|appreciated)\b"
    r"[\s,.!?:;)(-]*)+$", re.IGNORECASE)
# the collection as a whole: its size, its topics ("1 1 1 [1]" was the model's answer to "How
# many papers are in the collection?"); "how many papers use RL?" is a list question instead
_COLLECTION = re.compile(
    r"^\W*(?:so\W+|and\W+|ok\W+)?how many (?:papers|abstracts|articles|works|documents|entries)"
    r"(?:\W+(?:are|is|there|in|the|this|collection|corpus|here|do|does|you|have|has|index|indexed|"
    r"total|altogether|included|contains?|it|holds?|we|of|overall|currently|loaded|available))*\W*$|"
    r"\bwhat (?:topics|areas|subjects|fields|themes|research areas)\b.*\b(?:cover\w*|collection|"
    r"corpus|included|span)\b|\b(?:overview|summary) of (?:the|this) (?:collection|corpus)\b|"
    r"\bwhat(?:'s| is) in (?:the|this) (?:collection|corpus)\b", re.IGNORECASE)
_DESCRIBES_PAPER = re.compile(r"\b(?:paper|work|method|approach|framework|study|one)\b", re.IGNORECASE)


def _plain_words(text: str) -> bool:
    """Mostly common English words (wordfreq Zipf >= 3): a question, not pasted junk."""
    from wordfreq import zipf_frequency

    words = re.findall(r"[A-Za-z']+", text)
    return bool(words) and sum(zipf_frequency(w, "en") >= 3.0 for w in words) >= 0.6 * len(words)


def _proper_name(side: str) -> bool:
    """'Llama Guard', 'AlphaFold', 'GPT-4': a name, though not one in the corpus."""
    words = side.split()
    return 0 < len(words) <= 3 and all(w[:1].isupper() or _namelike(w) for w in words)


def _namelike(tok: str) -> bool:
    """SSL4RL, leak@k, FIRE-Bench, DeltaStack: mixed case, digits or @ inside a word."""
    inner = tok[1:]
    return (any(c.isupper() for c in inner) or any(c.isdigit() for c in tok) or "@" in tok) \
        and not tok.replace(".", "").isdigit()


__all__ = ["Intent", "Query", "Route", "Router", "clean_question", "finding_kind", "tokenize"]
