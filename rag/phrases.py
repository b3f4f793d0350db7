"""The wording the router reads (English patterns, each written for a class of question):
asking for papers, comparing, pointing at a place in the previous list, small talk, questions
about the collection, a new topic. Pure functions and patterns, no model and no index;
rag/route.py decides with them and with the evidence of retrieval."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")

FINDING = re.compile(
    r"\b(?:which|what)\s+(?:other\s+)?(?P<n1>papers?|works?|stud(?:y|ies)|articles?)\b|"
    r"\b(?:is|are|does|do)\s+there\s+(?:also\s+)?(?:be\s+|exist\s+)?(?:a|an|any)?\s*(?:other\s+)?(?:recent\s+)?"
    r"(?P<n2>papers?|articles?|publications?|works?|stud(?:y|ies)|research|something|anything)\b|"
    r"\b(?:find|list|show)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?P<n3>papers?|articles?|works?)\b|"
    r"\b(?:what|which)\s+(?:was|is)\s+(?:the|that)\s+(?P<n4>paper|article|work|study)\b|"
    r"\bwhich (?:one )?(?:is|was) (?P<n5>it|that)\b|\bwhich (?P<n9>one)\s*\??\s*$|"
    r"^(?:i|we) (?:remember|recall|once read|read) (?:a|an|some|the) (?P<n6>\w+)|"
    r"\bwhat (?P<n7>work|research|papers)\s+(?:is|are|exists?)\s+(?:there\s+)?(?:on|about|in)\b|"
    # the collection asked what it holds: "What's here on X?", "Anything here on X?", "What
    # do you have on X?"
    r"(?P<n13>\bwhat(?:'s|\s+is)\s+(?:here|there|in\s+(?:this|the)\s+collection)|"
    r"\bwhat\s+do\s+you\s+have|^(?:and\s+)?anything(?:\s+here)?)\s+(?:on|about|regarding)\b|"
    # ... or a verb in -ing: "Any papers digging into what attention heads learn?"
    # ("Any papers here dealing with sparse vs dense rewards?": the collection named between)
    r"\b(?:any|some) (?P<n8>papers?|articles?|works?|research)\s+"
    r"(?:(?:here|in\s+(?:this|the)\s+collection)\s+)?(?:on|about|that|which|in|"
    r"[a-z]{2,}ing)\b|"
    r"\b(?:looking|searching) for (?:a |an |any |some )?(?P<n10>papers?|works?|something|anything)"
    r"\s+(?:on|about|that|which|using|in)\b|"
    # a bare noun phrase: "papers on defending against backdoors?", "research about X"
    r"^(?:(?:and|also|more|other)\s+)?(?P<n11>papers?|articles?|works?|research|stud(?:y|ies))"
    r"\s+(?:on|about|that|which|in|for|[a-z]{2,}ing)\b|"
    # "Are there methods where I can set a compute budget?", "Is there a training-free approach
    # for X?": the papers (or the paper) proposing them
    r"\b(?:is|are)\s+there\s+(?:also\s+)?(?:a|an|any|some)?\s*(?:other\s+)?"
    r"(?:(?!(?:in|of|on|the|this|that|its|their)\b)[\w-]+,?\s+){0,2}?"
    r"(?P<n14>methods?|approach(?:es)?|techniques?|frameworks?|algorithms?|benchmarks?|"
    r"datasets?|models?|systems?|tools?)\s+(?:that|which|where|whose|for|on|to|using|with|in|"
    r"[a-z]{2,}ing)\b|"
    # "how many papers use RL?": the list answers it (the collection's size is COLLECTION's)
    # (not "how many papers are in PaperGuard's dataset?": a number asked of one paper)
    r"\bhow many (?P<n12>papers|works|studies|articles)\s+(?:(?:here|there|in (?:this|the) "
    r"collection)\s+)?(?:(?:are|is)\s+(?:there\s+)?(?:on|about)\b|use|propose|stud(?:y|ies)|"
    r"address|tackle|apply|deal|focus|work|evaluate|discuss|investigate|explore|train|employ|"
    r"rely|build|consider|mention)",
    re.IGNORECASE)


# HTML pasted into the box ("<img src=x onerror=alert(1)> github??" was read as German and
# answered about a made-up "BEXA-Image"): the tags of common elements go, their text stays;
# "k < 5 and n > 3" or "a <b> c" of no known element stay as written
_TAG_NAMES = (r"a|abbr|audio|b|body|br|button|code|div|em|embed|form|h[1-6]|head|hr|html|i|"
              r"iframe|img|input|link|li|math|meta|object|ol|p|pre|script|select|small|source|"
              r"span|strong|style|sub|sup|svg|table|td|textarea|th|tr|u|ul|video")
MARKUP = re.compile(rf"<\s*/?\s*(?:{_TAG_NAMES})(?:\s[^<>]*)?/?\s*>", re.IGNORECASE)


def clean_question(question: str, limit: int) -> tuple[str, str]:
    """(question, notice): HTML tags, control characters removed, whitespace folded, length
    capped."""
    raw = CONTROL.sub(" ", question or "")
    stripped = MARKUP.sub(" ", raw)
    q = " ".join(stripped.split())
    if stripped != raw:
        text, notice = clean_question(q, limit)
        return text, " ".join(n for n in ("HTML tags were removed from your question.", notice)
                              if n)
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
    m = FINDING.search(question)
    if not m:
        return None
    noun = next(g for g in m.groups() if g).lower()
    if m.group("n5") or m.group("n6") or m.group("n9"):
        return "one"
    if noun in ("something", "anything") or m.group("n13"):
        return "many"
    if m.group("n10") and not noun.endswith("s"):
        return "one"
    if noun in ("work", "research") and not m.group(0).lower().startswith("which"):
        return "many"  # "is there work on X", "what work is there on X": all of it
    return "many" if noun.endswith(("s", "ies")) and not noun.endswith("ss") else "one"


ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3,
             "4th": 3, "fifth": 4, "5th": 4, "sixth": 5, "6th": 5, "seventh": 6, "7th": 6,
             "last": -1}
# "the second one", "the third paper", "the first and the last", "the first two": a place in
# the previous answer's list (not "the first to ...", "the first large-scale study")
ORDINAL = re.compile(r"\b(?:the\s+|(?<=\band\s)(?:the\s+)?|(?<=\bor\s)(?:the\s+)?)(" +
                      "|".join(ORDINALS) + r")(?:\s+(two|three|2|3))?"
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
    for m in ORDINAL.finditer(text):
        word, count = m.group(1).lower(), (m.group(2) or "").lower()
        i = ORDINALS[word]
        if count:
            n = 2 if count in ("two", "2") else 3
            ids = list(prev[:n]) if i == 0 else list(prev[-n:]) if i == -1 else []
        else:
            ids = [prev[i]] if -len(prev) <= i < len(prev) else []
        out += [p for p in ids if p not in out]
    return out


def shared_word_only(token: str, name: str) -> bool:
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


COMPARATIVE = re.compile(r"\bcompar(?:e|ed|ing|ison)\b|\bcontrast\b|\bvs\.?\s|\bversus\b|"
                          r"\b(?:which|who) (?:is|was|does|do|has|one)\b.*\b(?:better|worse|faster|"
                          r"slower|more|less|larger|smaller|higher|lower)\b|\b(?:more|less|"
                          r"better|faster) \w+ than\b|\bcompared? (?:to|with)\b|\bdiffer",
                          re.IGNORECASE)
# the two papers of the previous answer, referred to together: "how do they differ?", "compare
# the two", "which of them is faster?"
BOTH = re.compile(r"\b(?:they|them|these|those|both|(?:the|these|those) (?:two|2)\b|each other|"
                   r"one another)\b", re.IGNORECASE)
COMPARE_THEM = re.compile(r"\b(?:differen(?:ce|ces|t)|similar|similarities|alike|in common|the same)\b",
                           re.IGNORECASE)
# "which of them is faster / reports the bigger speedup / needs fewest samples": English's
# comparatives and superlatives of size, speed, amount and quality
WHICH_OF_TWO = re.compile(r"\bwhich (?:one|of (?:them|the two|these|those|both))\b.*\b(?:(?:bett|"
                           r"fast|slow|larg|bigg|small|high|low|strong|weak|cheap|long|short|great|"
                           r"few)(?:er|est)|best|worse|worst|more|most|less|least)\b",
                           re.IGNORECASE)
IDENTIFY = re.compile(r"^\s*(?:which|what)\s+(?:(?!(?:two|three|four|five|six|both|\d+)\s)\w+\s+)?"
                       r"(?:method|approach|framework|detector|"
                       r"technique|algorithm|system|architecture|benchmark|model|tool)(?P<plural>s?)\b"
                       r"(?!\s+(?:does|do|did|is|are|was|were)\s+(?:it|they|this|that|its|their|"
                       r"the\s+(?:paper|work|study|authors?|method|approach|model)s?)\b)",
                       re.IGNORECASE)
# "what's the name of the approach that ...?", "name of the architecture where ...": which one
NAME_OF = re.compile(r"^\s*(?:(?:what|which)(?:'s|\s+is|\s+was|\s+are|\s+were)\s+)?(?:the\s+)?names?\s+"
                      r"of\s+(?:the|that|this|a|an)\s+(?:[\w-]+\s+){0,2}(?:method|approach|framework|"
                      r"detector|technique|algorithm|system|architecture|benchmark|model|tool|paper|"
                      r"work|dataset)(?P<plural>s?)\b", re.IGNORECASE)
# "... proposed in the paper on logistic bandits": the name asked is a detail of one paper
IN_PAPER = re.compile(r"\b(?:in|of|from|by)\s+(?:the|this|that)\s+(?:paper|article|work|study)\b",
                       re.IGNORECASE)
# papers in the plural, however qualified ("Which RL papers ...", "Do any papers ...")
PAPERS = re.compile(r"\b(?:papers|works|articles|studies)\b", re.IGNORECASE)
# a yes/no question about something other than "the paper", "it" or "this method": naming
# no paper, it asks whether the collection has such work ("Can X be done without Y?")
YESNO = re.compile(r"^\s*(?:(?:okay|ok|and|so|also|then)\b[.,]?\s+)*(?:is|are|does|do|did|can|could|has|"
                    r"have|was|were)\s+(?!(?:the|this|that|these|those|its?|their|they|he|she|you|"
                    r"we|i)\b)", re.IGNORECASE)
# the user says the question is not about the previous answer ("OK, different question: for
# the unlearning paper, which benchmarks did they use?" matched the previous paper at 0.34)
NEW_TOPIC = re.compile(r"\b(?:(?:different|new|unrelated|separate|another)\s+"
                        r"(?:question|topic|subject)|switching\s+(?:topics?|gears|subjects?)|"
                        r"chang(?:e|ing)\s+(?:the\s+)?(?:topic|subject)|on\s+another\s+note|"
                        r"something\s+(?:else|different))\b", re.IGNORECASE)
# a paper named by what it is about ("Where is the code of the paper about privacy auditing?"):
# after an answer about another paper this is a new question, as a name would be
# (rag/cover.py reads the same words inside a question: "What does the paper on X use?")
THE_PAPER = r"the\s+(?:paper|work|study|article)"
PAPER_ON = (THE_PAPER + r"\s+(?:on|about|that|which|where|proposing|introducing|showing|"
            r"studying|analy[sz]ing)\s+")
DESCRIBED = re.compile(r"\b" + PAPER_ON + r"(.+)", re.IGNORECASE)


def described(question: str) -> str:
    """What "the paper on/about/that ..." says the paper is about, or ""."""
    m = DESCRIBED.search(question)
    return m.group(1).strip() if m else ""


# a greeting, thanks or a request for help, and nothing else (filler words around one)
THANKS = (r"thanks?|thank\s+you|many\s+thanks|thx|ty|cheers|great|cool|nice|perfect|awesome|"
          r"ok(?:ay)?|got\s+it")
FAREWELL = r"bye|goodbye|see\s+you"
GREETING = (r"hi|hello|hey|hiya|howdy|good\s+(?:morning|afternoon|evening)|" + THANKS + "|" +
            FAREWELL + r"|help|what\s+can\s+you\s+do|who\s+are\s+you|how\s+does\s+this\s+work")
SMALL_TALK = re.compile(
    r"^(?=.*\b(?:" + GREETING + r")\b)\s*(?:(?:" + GREETING + r"|a\s+lot|so|much|there|again|you|"
    r"all|that|this|it|was|is|helps?|helped|helpful|very|really|indeed|appreciated)\b"
    r"[\s,.!?:;)(-]*)+$", re.IGNORECASE)
# the collection as a whole: its size, its topics ("1 1 1 [1]" was the model's answer to "How
# many papers are in the collection?"); "how many papers use RL?" is a list question instead
COLLECTION = re.compile(
    r"^\W*(?:so\W+|and\W+|ok\W+)?how many (?:papers|abstracts|articles|works|documents|entries)"
    r"(?:\W+(?:are|is|there|in|the|this|collection|corpus|here|do|does|you|have|has|index|indexed|"
    r"total|altogether|included|contains?|it|holds?|we|of|overall|currently|loaded|available))*\W*$|"
    r"\bwhat (?:topics|areas|subjects|fields|themes|research areas)\b.*\b(?:cover\w*|collection|"
    r"corpus|included|span)\b|\b(?:overview|summary) of (?:the|this) (?:collection|corpus)\b|"
    r"\bwhat(?:'s| is) in (?:the|this) (?:collection|corpus)\b", re.IGNORECASE)
DESCRIBES_PAPER = re.compile(r"\b(?:paper|work|method|approach|framework|study|one)\b", re.IGNORECASE)


def plain_words(text: str) -> bool:
    """Mostly common English words (wordfreq Zipf >= 3): a question, not pasted junk."""
    from wordfreq import zipf_frequency

    words = re.findall(r"[A-Za-z']+", text)
    return bool(words) and sum(zipf_frequency(w, "en") >= 3.0 for w in words) >= 0.6 * len(words)


def proper_name(side: str) -> bool:
    """'Llama Guard', 'AlphaFold', 'GPT-4': a name, though not one in the corpus."""
    words = side.split()
    return 0 < len(words) <= 3 and all(w[:1].isupper() or namelike(w) for w in words)


def namelike(tok: str) -> bool:
    """SSL4RL, leak@k, FIRE-Bench, DeltaStack: mixed case, digits or @ inside a word."""
    inner = tok[1:]
    return (any(c.isupper() for c in inner) or any(c.isdigit() for c in tok) or "@" in tok) \
        and not tok.replace(".", "").isdigit()


# "tell me more", "can you elaborate?", "go on": a request for more with no topic of its own
_MORE = frozenset("""elaborate explain further go details detail please else anything continue
expand info information keep""".split())


def asks_for_more(text: str) -> bool:
    """Whether `text` asks for more about the previous answer's papers and names nothing to
    look for: its content words (stop words out) are only words of asking for more."""
    from rag.retrieve import content_words

    return set(content_words(text)) <= _MORE and bool(re.search(r"[A-Za-z]", text))


def more_about(labels: Sequence[str]) -> str:
    """The question the model is asked for "tell me more" about papers `labels`."""
    names = " and ".join(labels)
    return (f"What problem does {names} address, what does it propose, and what does it show?"
            if len(labels) == 1 else
            f"What problem does each of {names} address, what does each propose, and what does "
            f"each show?")
