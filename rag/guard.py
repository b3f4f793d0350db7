"""What a question asks for, and whether an abstract could state it.

`asked()` reads the kind of answer a question wants (a number, an acronym's expansion, or
something else) and its head noun ("learning rate", "GPUs", "license"): the words right
after the wh-word. A detail question about one paper is declined before the model runs
only when that head noun occurs nowhere in the paper's abstract AND no sentence of it is
semantically close to the question (answer.guard_similarity, fitted on the dev split): no
list of "details abstracts never state" is involved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rag.acronyms import GLUE as _GLUE
from rag.chunk import sentence_spans
from rag.types import Paper

Kind = Literal["number", "expansion", "other"]

_QUANTITY = re.compile(r"^(?:speed-?ups?|percentages?|accuracy|improvements?|reductions?|gains?|"
                       r"performance|results?|scores?|factor|rates?|boosts?|increases?|"
                       r"decreases?|drops?)$")
# a setting, unlike a result ("which improvement"), is named as such when an abstract states it
_SETTING_WORDS = r"(?:learning|dropout) rates?"
_NUMBER = re.compile(
    r"\bhow (?:many|much|large|big|fast|long|often|far)\b|\bby how much\b|\b(?:what|which) (?:is |was |are )?"
    r"(?:the )?(?:[\w-]+ ){0,2}(?:speed-?ups?|percentages?|accuracy|improvements?|reductions?|gains?|"
    r"error rates?|number|sizes?|fraction|ratios?|scores?|factor|win rates?|success rates?|"
    r"increases?|decreases?|boosts?|drops?|"  # "what is the speed increase"
    # a setting's value: "what learning rate", "what hidden-layer width", "what rank" (not a
    # bare "rate": "what convergence rate" is answered "linear")
    + _SETTING_WORDS + r"|widths?|depths?|dimensionality|lengths?|budgets?|"
    r"temperatures?|ranks?|counts?)\b|"
    r"\bin (?:milli)?seconds\b|\bin (?:hours|minutes|days|gb|mb|percent)\b",
    re.IGNORECASE)
_SETTING = re.compile(r"\b" + _SETTING_WORDS + r"\b")
_EXPANSION = re.compile(r"\bstands? for\b|\bshort for\b|\babbreviat|\bacronym\b|\bexpan(?:d|sion)\b|"
                        r"\bfull (?:name|form)\b", re.IGNORECASE)
# "what does RULE mean?", "what is the R in RULE?": an acronym's meaning is its expansion
_MEANS = re.compile(r"\bwhat (?:does|do|did) (?:the (?:name |acronym |abbreviation )?)?"
                    r"[\"'\u201c]?[A-Za-z]*[A-Z][\w-]*[A-Z][\w-]*[\"'\u201d]? (?:mean|denote|refer to|"
                    r"represent)\b|\bwhat is the [A-Za-z] in\b|\bwhat (?:does|do) the [A-Za-z] "
                    r"(?:in [\w-]+ )?(?:mean|stand)")
# "how big a MAE reduction": the noun after "how <adjective> a" is the head, as after "what"
_WH = re.compile(r"\b(?:how many|how much|how (?:big|large|small|high|low|long|strong|wide|deep) an?|"
                 r"what|which|who|whose)\s+(.+)", re.IGNORECASE)
_SKIP = frozenset("""is are was were the a an kind kinds type types sort sorts of exact specific
main two three four did does do has have had its their exactly precisely""".split())
_STOP = frozenset("""did does do is are was were used use uses using of for in on to by with has
have had that this it they from at as be been when where which what achieve achieves report
reports get gets give gives train trained propose proposed introduce introduced evaluate
evaluated run let lets allow allows enable enables make makes help helps need needs cause
causes and or how why who whom whose here there over than against across versus vs
compared relative per between among under within without into onto through during after
before""".split())  # verbs end the head: "what kind
# of inference algorithm | lets it scale", and so do a conjunction, a second wh-word,
# "here": "how many datasets | and how many attack types", "which papers | here study ...",
# and a preposition: "how big a speedup | over earlier schemes"


# heads that name no detail of their own ("which value", "what result"): nothing to look for
_GENERIC = frozenset("""value values result results thing things aspect aspects part parts
number amount way ways kind property properties characteristic characteristics trait
traits""".split())  # "what property of LLMs does SLIM exploit?": "their iterative structure"
_MEANS_WORDS = frozenset("""trick tricks technique techniques strategy strategies approach
approaches method methods idea ideas mechanism mechanisms solution solutions remedy fix""".split())
# a ratio said in words: "runs orders of magnitude faster", "a two-fold speedup", "twice as fast"
_MAGNITUDE = re.compile(r"\b(?:an? |several |many |two |three )?orders? of magnitude\b|"
                        r"\b(?:two|three|four|five|six|seven|eight|nine|ten|hundred|thousand|many|\d+)-?fold\b|"
                        r"\b(?:twice|thrice)\b",
                        re.IGNORECASE)
_QUANTITY_WORD = re.compile(
    r"\d\s*(?:%|x\b|×)|\d+(?:\.\d+)?|" + _MAGNITUDE.pattern + r"|\b(?:two|three|four|five|six|"
    r"seven|eight|nine|ten|eleven|twelve|dozens?|hundreds?|thousands?|millions?|billions?|half|"
    r"double)\b", re.IGNORECASE)  # not "manifold"


def states_magnitude(text: str) -> bool:
    """Whether `text` states a ratio in words ("orders of magnitude faster", "two-fold"): the
    answer to "how much quicker?" that has no digit."""
    return bool(_MAGNITUDE.search(text))


def states_quantity(text: str) -> bool:
    """Whether `text` states a quantity: any digit ("1%", "3x", "2B") or a number word
    ("three or more", "twice"). A number question's answer must."""
    return bool(_QUANTITY_WORD.search(_unnumbered(text)))


def _unnumbered(text: str) -> str:
    """`text` without the digits that state no quantity: markers, paper ids, URLs and digits
    inside a name ("SSL4RL", ".../PKU-ML/ssl4rl")."""
    return re.sub(r"\[\d+\]|\b\d{3}-\d{2}\b|https?://\S+|(?<=[A-Za-z])\d+(?=[A-Za-z])", " ", text)


def _quantities(text: str) -> set[str]:
    # "1,000" and "1000+" are one quantity: thousands separators go before matching
    flat = re.sub(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)", "", _unnumbered(text))
    return {m.group(0).lower().replace(" ", "") for m in _QUANTITY_WORD.finditer(flat)}


def new_quantity(text: str, question: str) -> bool:
    """Whether `text` states a quantity the question does not already have: "a stack depth
    of 760M parameters" does not answer "what maximum stack depth does its 760M-parameter
    model use?"."""
    return bool(_quantities(text) - _quantities(question))


def number_elsewhere(head: str, source: str) -> bool:
    """Whether a number that is not beside the asked head noun may still answer it: a question
    with no head ("how much faster is it?"), or a result the abstract states in other words
    ("what accuracy" -> "46.6% on MATH-500"), or a head the abstract does say. Not a setting
    the abstract never names: "what learning rate" is not answered by "46.6%"."""
    if not head or says(source, head):
        return True
    return bool(_QUANTITY.search(head.split()[-1])) and not _SETTING.search(head)


def quantity_near(text: str, head: str, window: int = 4) -> bool:
    """Whether `text` states a quantity within `window` words of the asked head noun ("1%
    accuracy drop" for "how much accuracy", "three or more outcomes" for "how many outcomes"),
    so that a number word elsewhere ("three pillars") does not answer "how many papers"."""
    if not head:
        return False
    stem = _root(head.split()[-1])
    words = re.findall(r"[^\s]+", re.sub(r"\[\d+\]", " ", text))
    at_head = [i for i, w in enumerate(words) if w.lower().lstrip("(\"'").startswith(stem)]
    at_qty = [i for i, w in enumerate(words) if _QUANTITY_WORD.search(w)]
    return any(abs(i - j) <= window for i in at_head for j in at_qty)


# "how much faster": the word after the wh-word is no noun, so there is no head to look for
_COMPARATIVES = frozenset("""faster slower better worse larger smaller bigger higher lower fewer
more less greater quicker cheaper longer shorter stronger weaker accurate efficient""".split())


_PAIR = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:%|×|x\b)?\s*(?:-\s*)?([A-Za-z][\w-]{2,})")
_NOT_NOUN = frozenset("""and or but at on of in for with while than from to by as the a an is are was
were over across per that which when who times percent points fewer more less lower higher
examples""".split()) | _COMPARATIVES


def _content(word: str) -> bool:
    w = word.strip("*_()[]\"',.;:%×").lower()
    return bool(re.fullmatch(r"[a-z][\w-]{2,}", w)) and w not in _NOT_NOUN


def swapped_quantity(text: str, source: str) -> str | None:
    """A number `text` pairs with a noun ("99.3% fidelity") that the abstract `source` states
    with another one ("at 99.3% security but only 71.0% fidelity"): the pair as written, or
    None. Only when the abstract has both the number and the noun, never within three words
    of each other, and every time it states the number, a noun follows it."""
    src_words = re.findall(r"[^\s]+", _unnumbered(source).replace("--", " - "))
    at: dict[str, list[int]] = {}
    for i, w in enumerate(src_words):
        for n in re.findall(r"\d+(?:\.\d+)?", w):
            at.setdefault(n, []).append(i)
    for m in _PAIR.finditer(_unnumbered(text)):
        number, noun = m.group(1), m.group(2)
        if noun.lower() in _NOT_NOUN or number not in at or not says(source, noun):
            continue
        stem = _stem(noun.lower())[:max(4, len(noun) - 1)]
        near = any(src_words[j].lower().lstrip("(*\"'").startswith(stem)
                   for i in at[number] for j in range(max(0, i - 3), i + 4) if j < len(src_words))
        # and the abstract pairs the number with a noun of its own: "96.5% on AntMaze" pairs
        # it with none, so "a 96.5% state-of-the-art result" may well say what it says
        other = all(i + 1 < len(src_words) and _content(src_words[i + 1]) for i in at[number])
        if not near and other:
            return m.group(0)
    return None


@dataclass(frozen=True)
class Asked:
    kind: Kind
    head: str  # the head noun phrase after the wh-word ("learning rate"), or ""
    # asked as a category ("what kind of reward signal"): the answer names a member of it,
    # which an abstract describes in its own words ("SSL tasks as a source of rewards")
    category: bool = False


_CATEGORY = frozenset("kind kinds type types sort sorts".split())


def asked(question: str, names: tuple[str, ...] = ()) -> Asked:
    """What `question` (English) asks for; `names` are paper labels to skip over."""
    kind: Kind = "expansion" if _EXPANSION.search(question) or _MEANS.search(question) else \
        "number" if _NUMBER.search(question) else "other"
    m = _WH.search(question)
    head: list[str] = []
    category = False
    if m:
        skip = {n.lower() for n in names}
        # an aside in brackets is no part of the noun phrase: "the MAE (Mean Absolute Error)"
        for word in re.findall(r"[\w@.-]+", re.sub(r"\s+\([^()]*\)", " ", m.group(1))):
            low = word.lower().strip(".")
            if not head and low in _SKIP:
                category = category or low in _CATEGORY
                continue
            if low in _STOP or low in skip or low in _COMPARATIVES or \
                    not re.fullmatch(r"[a-z][a-z-]*", low) or (head and low.endswith("ed")):
                break  # a verb ends the noun phrase: "factors | turned out to matter"
            head.append(low)
            if len(head) == 3:
                break
    return Asked(kind, " ".join(head), category)


def _stem(word: str) -> str:
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _root(word: str) -> str:
    """What a word's forms start with: its stem less a last letter, at least four letters
    ("benchmarks" -> "benchmar", matching "benchmark" and "benchmarks")."""
    stem = _stem(word)
    return stem[:max(4, len(stem) - 1)]


def mentions(paper: Paper, phrase: str) -> bool:
    """Whether the abstract mentions the phrase's head word (plural or singular)."""
    return says(paper.clean, phrase)


def says_asked(text: str, a: Asked) -> bool:
    """Whether `text` speaks of what `a` asks for: its head word, or for a category of two or
    more words its modifier ("what kind of reward signal": "rewards"), since a category's
    last word is often only its class ("signal", "mechanism") and its member is named in
    other words. A plain "what learning rate" still needs "rate"."""
    words = a.head.split()
    return says(text, a.head) or (a.category and len(words) > 1 and
                                  says(text, " ".join(words[:-1])))


def category_members(question: str, source: str, names: tuple[str, ...] = ()) -> set[str]:
    """For a category question ("what kind of concentration inequality"), the words the
    abstract `source` writes in the two before the category's noun that the question lacks
    ("Bernstein-type" of "a novel Bernstein-type inequality"): how it names the member."""
    a = asked(question, names)
    if not a.category or not _names_detail(a.head) or not source:
        return set()
    stem = re.escape(_root(a.head.split()[-1]))
    given = {w.lower() for w in re.findall(r"[\w-]+", question)}
    found: set[str] = set()
    for m in re.finditer(r"((?:[A-Za-z][\w-]*\s+){1,2})" + stem, source, re.IGNORECASE):
        for w in m.group(1).split():
            low = w.lower()
            if len(low) >= 4 and low not in given and low not in _GLUE and low not in _STOP \
                    and low not in _PLAIN and low not in _SKIP:
                found.add(w)
    return found


# words before a noun that name no member of its kind: "a novel inequality"
_PLAIN = frozenset("""novel proposed simple first second single general standard existing
these those such their this that other several various""".split())


def names_member(question: str, answer: str, source: str, names: tuple[str, ...] = ()) -> bool:
    """Whether `answer` names the member a category question asks for, as the abstract
    `source` names it before the category's noun (category_members), when it names one:
    "a concentration inequality for martingales" does not say "Bernstein-type"."""
    members = category_members(question, source, names)
    said = answer.lower()
    return not members or any(m.lower().split("-")[0] in said for m in members)


def answers_quantity(question: str, answer: str, source: str = "",
                     names: tuple[str, ...] = ()) -> bool:
    """Whether `answer` states the quantity a number question asks for: any quantity the
    question does not already state, and
    one next to the asked noun when the abstract `source` puts one there ("eight games" for
    "how many games", not the "276" of "276 model pairs")."""
    if not new_quantity(answer, question):
        return False
    head = asked(question, names).head
    return not (head and source and quantity_near(source, head)) or quantity_near(answer, head)


def says(text: str, phrase: str) -> bool:
    """Whether `text` has the phrase's head word (plural or singular); True for no phrase."""
    if not phrase:
        return True
    return bool(re.search(r"(?<!\w)" + re.escape(_root(phrase.split()[-1])), text.lower()))


def answers_head(question: str, answer: str, names: tuple[str, ...] = (),
                 source: str = "") -> bool:
    """Whether `answer` speaks of what `question` asks for: its head noun ("which robot arm"
    -> "arm"), unless the head names no detail ("which value"). A head whose answer is a name
    ("which two models") is also answered by a name the question lacks and the abstract
    `source` has ("LLaMA-7B")."""
    if source and asks_person(question):  # "whose conjecture": the person, not "a conjecture"
        return bool(person_names(answer, question, source))
    a = asked(question, names)
    if not _names_detail(a.head):
        return True
    last = _stem(a.head.split()[-1])
    if source and last in _NAMED_ONLY:  # "which benchmarks": a coined name the abstract has
        # ("the NUS-WIDE benchmark", "a sequence of XOR-cluster datasets", "D4RL datasets"),
        # not a field's bare abbreviation before the plural ("VTG benchmarks", "NLP datasets")
        # nor one the abstract spells out ("video temporal grounding (VTG)")
        plural = re.escape(last[:max(4, len(last) - 1)]) + r"\w*s\b"
        return any(not (re.fullmatch(r"[A-Z]{2,6}s?", n) and
                        re.search(re.escape(n) + r"\s+" + plural, answer, re.IGNORECASE)) and
                   not re.search(r"\(\s*" + re.escape(n) + r"s?(?:\s+[A-Z][\w-]*)*\s*[),;]",
                                 source)  # nor "(AV Filter)": the method's own short name
                   for n in new_names(answer, question, source))
    if source and a.category and not names_member(question, answer, source, names):
        return False  # "what kind of inequality": "Bernstein-type", as the abstract says
    listed_words = listed_members(question, source, names)
    if listed_words:  # "which two auxiliary modalities": "event streams", as the abstract lists
        return any(says(answer, w) for w in listed_words)
    if source and last in _NAMED_BY:
        listed = [found for x in _sentences_with(source, last)
                  if (found := _instances(question, x, source, names))]
        if listed:  # "five board games: Animal Shogi, ..., Othello": "board games" is no answer
            said = new_names(answer, question, source) | person_names(answer, question, source)
            return any(said & found for found in listed)
    return says_asked(answer, a) or (bool(source) and last in _NAMED_BY and
                                    bool(new_names(answer, question, source)))


def lists_members(question: str, source: str, names: tuple[str, ...] = ()) -> bool:
    """Whether the abstract `source` names members of what `question` asks for: the kind a
    category question asks ("Bernstein-type" inequality), or the names listed beside a head
    a name answers ("board games: Go, Hex, ...")."""
    a = asked(question, names)
    if not _names_detail(a.head):
        return False
    last = _stem(a.head.split()[-1])
    return bool(category_members(question, source, names) or
                listed_members(question, source, names)) or (
        last in _NAMED_BY and any(_instances(question, x, source, names)
                                  for x in _sentences_with(source, last)))


# what introduces the members of a kind the abstract lists: "auxiliary modalities, such as
# event streams and infrared images", "two tasks (e.g., retrieval and captioning)"
_LISTING = r"\s*,?\s*\(?\s*(?:such as|e\.g\.,?|including|namely|like|:)\s+"


def listed_members(question: str, source: str, names: tuple[str, ...] = ()) -> set[str]:
    """The words of the members the abstract `source` lists right after the noun phrase a
    question asks for ("which two auxiliary modalities" -> {"event", "streams", "infrared",
    "images"} of "auxiliary modalities, such as event streams and infrared images"): the
    phrase as asked, two words or more, so that "methods, such as" (other work) is not read
    as the answer to "which method". Words the question has are left out."""
    a = asked(question, names)
    words = a.head.split()
    if len(words) < 2 or not _names_detail(a.head) or not source:
        return set()
    phrase = r"\s+".join(r"(?<![\w-])" + re.escape(_root(w)) + r"[\w-]*" for w in words)
    given = {_stem(w.lower()) for w in re.findall(r"[\w-]+", question)}
    found: set[str] = set()
    for m in re.finditer(phrase + _LISTING + r"([^.;:()]+)", source, re.IGNORECASE):
        # the members: up to six, split at commas and "and"/"or", three words each, before
        # a clause that goes on about them ("... advantages | to mitigate ...")
        items = re.split(r"\s+(?:to|which|that|for|across|in|with|on|from|by|as|where|while)\s",
                         m.group(1))[0]
        # the item after the first "and"/"or" is the last: "A and B, and stay robust"
        parts = re.split(r"(,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)", items)
        members = parts[:1]
        for sep, member in zip(parts[1::2], parts[2::2], strict=True):
            members.append(member)
            if re.search(r"\b(?:and|or)\b", sep):
                break
        for member in members[:6]:
            for w in member.split()[:3]:
                low = w.lower().strip("'\"")
                if len(low) >= 3 and low not in _GLUE and low not in _STOP and \
                        low not in _PLAIN and _stem(low) not in given and \
                        re.fullmatch(r"[a-z][a-z-]*[a-z]", low):
                    found.add(low)
    return found


def _sentences_with(source: str, word: str) -> list[str]:
    """The sentences of `source` that have `word` (its stem, as `says` reads it)."""
    return [source[s:e] for s, e in sentence_spans(source) if says(source[s:e], word)]


def _instances(question: str, sentence: str, source: str, names: tuple[str, ...] = ()) -> set[str]:
    """Names `sentence` (of the abstract `source`) gives that `question` and the paper's own
    `names` lack: coined ones ("ResNet-50") and capitalised words in mid-sentence ("Go, Hex,
    and Othello"); not an abbreviation the abstract spells out ("large language models
    (LLMs)") or its words, nor a two-capital one ("AI")."""
    found = new_names(sentence, question, sentence) | person_names(sentence, question, source)
    own = {w.lower() for n in names for w in re.findall(r"[\w-]+", n)}
    return {n for n in found if not (len(n) <= 2 and n.isupper()) and n.lower() not in own and
            not re.search(r"\(\s*" + re.escape(n) + r"s?\s*[),;]", source)}


# heads only a name answers: "which benchmarks" is not answered by "VTG benchmarks" (dev: every
# answerable row with such a head is answered by coined names, every unanswerable one is not)
_NAMED_ONLY = frozenset(_stem(w) for w in """dataset datasets benchmark benchmarks llm llms backbone
backbones baseline baselines suite suites""".split())
# heads a name also answers: "which two models" -> "LLaMA-7B and Swin Transformer"
_NAMED_BY = _NAMED_ONLY | frozenset(_stem(w) for w in """model models architecture architectures
family families environment environments language languages metric metrics network networks
task tasks domain domains game games""".split())
# a coined name (language identification sets these aside too): letters with digits
# ("ResNet-50", "Wan2.1"), a capital after a lowercase letter ("LLaMA", "DeltaNet"), or two
# capitals running ("GPQA", "TOFU")
NAME = re.compile(r"(?<![\w-])(?=[\w-]*(?:[a-z][A-Z]|[A-Z]{2}|[A-Za-z]\d|\d[A-Za-z]))[A-Za-z0-9][\w-]*")


_LIST = NAME.pattern + r"(?:(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)" + NAME.pattern + ")*"
_LIST_AFTER = re.compile(r"\s*[,:]?\s*(?:\(?\s*(?:such as|including|e\.g\.,?|namely|like)\s+)?(" +
                         _LIST + ")")
_LIST_BEFORE = re.compile("(" + _LIST + r")\s+(?:[\w-]+\s+)?$")


def names_listed(text: str, head: str) -> int:
    """How many coined names `text` lists side by side right after or right before the head
    word of `head`: 3 for "benchmarks, TOFU, MUSE, and WMDP" and for "TOFU, MUSE and WMDP
    benchmarks", 1 for "On the MUSE benchmark, RULE outperforms ...". (The most at any one
    place the head word stands.)"""
    if not head:
        return 0
    best = 0
    for m in re.finditer(r"(?<![\w-])" + re.escape(_root(head.split()[-1])) + r"[\w-]*", text,
                         re.IGNORECASE):
        for found in (_LIST_AFTER.match(text, m.end()), _LIST_BEFORE.search(text[:m.start()])):
            if found:
                best = max(best, len(NAME.findall(found.group(1))))
    return best


_COUNT_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
# "which two models", "into which three groups", "what are the two components": the question
# says how many things it asks for
_COUNTED = re.compile(r"\b(?:which|what)\s+(?:(?:are|were)\s+(?:the\s+)?)?(?:[a-z]+\s+)?"
                      r"(two|three|four|five|six|[2-6])\b(?!\s*(?:%|x\b|times|-fold))",
                      re.IGNORECASE)
# a capitalized or coined item: "Swin Transformer", "LLaMA-7B", "Mask Prior Suppression"
_ITEM = r"(?:[A-Z][\w-]*|" + NAME.pattern + r")(?:\s+(?:[A-Z][\w-]*|" + NAME.pattern + r"))*"
_SERIES = re.compile(_ITEM + r"(?:\s*,\s*" + _ITEM + r")*\s*,?\s+(?:and|or)\s+" + _ITEM)


def counted(question: str) -> int:
    """How many things `question` asks for, when it says ("which two models" -> 2), else 0."""
    m = _COUNTED.search(question)
    if m is None:
        return 0
    word = m.group(1).lower()
    return _COUNT_WORDS.get(word) or int(word)


def states_count(sentence: str, n: int, head: str) -> bool:
    """Whether `sentence` says the count beside the asked noun: "two seemingly distinct
    families of methods" for "which two families" (it goes on to name them, in any case)."""
    if not head:
        return False
    words = [w for w, k in _COUNT_WORDS.items() if k == n] + [str(n)]
    return bool(re.search(r"(?<![\w-])(?:" + "|".join(words) + r")\s+(?:[\w-]+\s+){0,3}?" +
                          re.escape(_root(head.split()[-1])), sentence, re.IGNORECASE))


def lists_count(sentence: str, n: int, question: str) -> bool:
    """Whether `sentence` lists exactly `n` capitalized or coined items the question does not
    name, joined by commas and "and"/"or": "Experiments on LLaMA-7B and Swin Transformer"
    answers "which two models"; "introducing Mask Prior Suppression and Monotonic RoPE
    Scaling" answers "what two techniques"."""
    asked_words = question.lower()
    for m in _SERIES.finditer(sentence):
        items = [x.strip() for x in re.split(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+",
                                             m.group(0)) if x.strip()]
        if m.start() == 0 and items:  # a sentence's first word is capitalized anyway
            first = items[0].split()
            items[0] = " ".join(first[1:]) if len(first) > 1 else (
                items[0] if NAME.fullmatch(first[0]) else "")
        items = [x for x in items if x]
        if len(items) == n and not any(x.lower() in asked_words for x in items):
            return True
    return False


def new_names(answer: str, question: str, source: str) -> set[str]:
    """Coined names in `answer` that `question` lacks and the abstract `source` has."""
    asked_words = question.lower()
    plain = re.sub(r"\[\d+\]|\b(?:https?://|www\.)\S+", " ", answer)  # a link names nothing
    found = {m.group(0).rstrip("-") for m in NAME.finditer(plain)}
    return {n for n in found if n.lower() not in asked_words and n in source}


# words an answer may add without saying anything: "The paper states that ..."
_FILLER = frozenset("""paper papers abstract abstracts study studies work authors author state
states stated say says said mention mentions mentioned describe describes described answer""".split())


def restates(question: str, answer: str, names: tuple[str, ...] = ()) -> bool:
    """Whether `answer` adds no word of its own to `question` and the papers' `names`: it
    repeats the question ("The study where ... is [1].") instead of answering it."""
    from rag.cover import stem_set  # Snowball stems: "analyzes" is "analyze" said again
    from rag.retrieve import tokenize  # the index's tokenizer: one notion of a word

    given = stem_set(tokenize(" ".join((question,) + names)))
    said = stem_set(tokenize(re.sub(r"\[\d+\]", " ", answer)))
    return bool(said) and not (said - given - stem_set(sorted(_FILLER)))


def needs_name(question: str, names: tuple[str, ...] = ()) -> bool:
    """Whether only a name answers `question` ("which benchmarks", "which LLMs", "who")."""
    head = asked(question, names).head
    return asks_person(question) or bool(head) and _stem(head.split()[-1]) in _NAMED_ONLY


def asks_detail(question: str, names: tuple[str, ...] = ()) -> str:
    """The detail `question` asks for ("auxiliary modalities", "person" for "who"), or ""
    when it asks for none (no head noun, "which paper", "which value") or for an acronym's
    expansion."""
    if asks_person(question):  # "who first stated it": a verb follows, no head noun
        return "person"
    a = asked(question, names)
    return a.head if a.kind != "expansion" and _names_detail(a.head) else ""


# "who proved ...", "whose conjecture ...", "by whom", "which authors": a person is asked
_PERSON = re.compile(r"^\W*(?:who|whose|whom)\b|\b(?:by|from|to|of) whom\b|\b(?:which|what) "
                     r"(?:authors?|researchers?|people|persons?|scientists?|mathematicians?)\b",
                     re.IGNORECASE)


def asks_person(question: str) -> bool:
    """Whether `question` (English) asks who: only a person's name answers it."""
    return bool(_PERSON.search(question))


def person_names(answer: str, question: str, source: str) -> set[str]:
    """Capitalised words of `answer` that `question` lacks and the abstract `source` has in
    mid-sentence ("Zhu" of "a conjecture of Zhu et al."), where a capital marks a name
    rather than a sentence's start."""
    asked_words = {w.lower() for w in re.findall(r"\w+", question)}
    mid = {m.group(0) for m in re.finditer(r"(?<=[\w,;:()]\s)[A-Z][\w-]*", source)}
    # not a name: the words of a spelled-out abbreviation ("Rényi Differential Privacy
    # (RDP)") or of a pointer into the paper ("Appendix F.3")
    for m in re.finditer(r"((?:[A-Z][\w-]*\s+){1,5})\(\s*[A-Z][\w-]*\s*\)", source):
        mid -= set(m.group(1).split())
    mid -= {"Appendix", "Section", "Figure", "Table", "Theorem", "Lemma", "Algorithm",
            "Equation", "Eq", "Fig", "Sec"}
    said = {w.split("'")[0] for w in re.findall(r"[A-Z][\w'-]*", re.sub(r"\[\d+\]", " ", answer))}
    return {w for w in said if w in mid and w.lower() not in asked_words and
            re.fullmatch(r"[A-Z][^\W\d_]+", w)}  # "Zhu", not "F" (of "F.3") nor "GPT-4"


def _names_detail(head: str) -> bool:
    """Whether a head noun phrase names a detail to look for ("robot arm"), not the paper
    itself, a generic word ("which value") or a bare word for a means ("what trick does it
    use": how it does it, in whatever words the abstract says; "what sampling strategy" does
    name one)."""
    words = head.split()
    return bool(words) and words[0] not in _PAPER and words[-1] not in _GENERIC and \
        not (len(words) == 1 and words[0] in _MEANS_WORDS)


# "which paper proposes X": the paper itself, no detail of it
_PAPER = frozenset("paper papers work works study studies article articles".split())


def missing_detail(question: str, paper: Paper, similarity: float, threshold: float) -> str | None:
    """The detail `question` asks that `paper`'s abstract never states, or None: its head
    noun occurs nowhere in the abstract and no sentence is semantically close to the
    question (`similarity`, the best cosine, below `threshold`)."""
    a = asked(question, (paper.label,))
    if a.kind == "expansion" or not _names_detail(a.head) or says_asked(paper.clean, a):
        return None
    if a.kind == "number" and _QUANTITY.search(a.head.split()[-1]) and \
            not _SETTING.search(a.head):
        return None  # "which improvement": abstracts state results in other words (speedup, x)
    return a.head if similarity < threshold else None
