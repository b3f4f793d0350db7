"""Names a question asks about, or an answer states, that an abstract does not write.

A detail question naming something the asked paper's abstract never mentions ("What Elo
rating does it reach on Go?" when it never says Elo) cannot be answered from it; an answer
sentence naming something none of its sources writes ("the KCA similarity measure") is made
up, whatever its wording. Names are compared with their spacing, hyphens and case removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rag.guard import NAME
from rag.types import Paper

# a capitalised word of the question (not its first word): "on Go", "LLaVA", "BioModels"
_ENTITY = re.compile(r"(?<=[\s(,/\"'])([A-Z][\w@.+-]*[\w@+])")


def _flat(text: str) -> str:
    return re.sub(r"[\W_]", "", text.lower())


@dataclass(frozen=True)
class Mentions:
    """What a text (one abstract, or the whole corpus) mentions, for the name checks: its
    words, its hyphenated and spaced runs written as one ("Wan 2.1" -> wan21), plurals and
    singulars, and the initials of its runs of capitalised words ("Kullback-Leibler" -> kl),
    all flattened; and its coined names, which a misspelling may mean."""

    have: frozenset[str]
    names: tuple[str, ...]


def mentions(texts: Iterable[str], labels: Iterable[str] = ()) -> Mentions:
    have: set[str] = set()
    names: set[str] = {_flat(x) for x in labels if _flat(x)}
    for text in texts:
        have |= {w.lower() for w in re.findall(r"\w+", text)}
        have |= {w.lower() for w in re.findall(r"[^\W_]+", text)}  # "AP_r" says AP too
        # runs with a capital or digit only ("Wan 2.1", "Kullback-Leibler"): every word pair
        # of a 100k-abstract corpus would be tens of millions of strings
        have |= {_flat(m.group(0)) for m in re.finditer(r"[\w@.+]+(?:[-/ ][\w@.+]+)?", text)
                 if re.search(r"[A-Z0-9]", m.group(0))}
        names |= {_flat(m.group(0)) for m in NAME.finditer(text)}
        for run in re.finditer(r"[A-Z][\w]*(?:[- ][A-Z][\w]*)+", text):
            have.add("".join(w[0].lower() for w in re.split(r"[- ]", run.group(0))))
    have |= names
    have |= {w[:-1] for w in have if w.endswith("s")} | {w + "s" for w in have}
    return Mentions(frozenset(have), tuple(sorted(names)))


def paper_mentions(paper: Paper) -> Mentions:
    return mentions([paper.clean], [paper.label])


# languages that write every noun capitalised (German): a capitalised word copied from a
# question in one of them is no sign of a name; in any other language it is ("Lean" in a
# Japanese question is the prover)
_NOUNS_CAPITALISED = frozenset({"de"})


def noun_words(text: str, language: str) -> str:
    """`text` when it is written in a language that capitalises every noun, else "": what
    `absent_names` takes as `foreign` for a question translated from `text`."""
    return text if language in _NOUNS_CAPITALISED else ""


def absent_names(question: str, where: Mentions, common: frozenset[str] = frozenset(),
                 fuzzy: float = 80, foreign: str = "") -> list[str]:
    """Names the question asks about that `where` (an abstract, or the corpus) never
    mentions ("What Elo rating does it reach on Go?" -> Elo): then it cannot state the
    answer. Names offered as options ("(e.g. ResNet-50 or Swin-L)", "CLIP or LLaVA") count
    only when it has none of them. A name written in other spacing or hyphenation, a
    hyphenated name whose parts it has ("RDP-to-f-DP"), the initials of its capitalised
    words ("KL"), a misspelling of one of its names (rapidfuzz ratio >= `fuzzy`) and a
    field-wide acronym (`common`) count as mentioned; a sentence's first word is no name.
    `foreign` is the user's own words when they wrote in a language that capitalises every
    noun (`noun_words`) and `question` is its English translation: a plain capitalised word
    copied from them is a noun of that language ("Trajektorienvorhersage"), not a name."""
    from rapidfuzz import fuzz, process
    from wordfreq import zipf_frequency

    have = where.have
    options = [(m.start(), m.end()) for m in _OPTIONS.finditer(question)]
    absent: list[str] = []
    offered: list[str] = []
    offered_present = False
    last: tuple[int, list[str]] | None = None  # (end, the list it went to) of the last name
    for m in _ENTITY.finditer(" " + question):
        at = m.start() - 1
        if re.search(r"(?:^|[.?!:;]['\"\u201d]?)\s*[(\"'\u201c]?$", question[:max(0, at)]):
            continue  # a sentence's first word: capitalised as any first word is
        word = m.group(1).rstrip(".")
        if foreign and word.isalpha() and word[1:].islower() and \
                re.search(rf"(?<!\w){re.escape(word)}(?!\w)", foreign):
            last = None
            continue
        flat = _flat(word)
        option = any(s <= at < e for s, e in options)
        follows = last is not None and question[last[0]:at] == " "
        prev, last = last, (at + len(word), [])
        if follows and word[1:].islower() and zipf_frequency(word.lower(), "en") >= 3.0:
            # a plain word after a name is part of it ("DeepMind Control"): the name decides
            if prev is not None and prev[1]:
                prev[1][-1] += " " + word
            last = (at + len(word), prev[1] if prev else [])
            continue
        if len(flat) < 2 or flat in common:
            continue
        # Zipf 3.0 is the common-word line route.py's cue check uses; not fitted
        single = word[:-1] if word.endswith("s") and word[:-1].isupper() else word  # "GPUs"
        if single.isupper() and zipf_frequency(single.lower(), "en") >= 3.0:
            continue  # shouting ("SYSTEM OVERRIDE", "HACKED") or an everyday acronym ("a VR
            # headset", "GPUs"): a description in the user's words, not a work's name
        # a compound of the question's own ("RDP-to-f-DP", "Hodge-theoretic") names what its
        # parts name, but a lower-case everyday word beside a name is no part of it
        # ("Chinchilla-style": "style" is in some abstract, Chinchilla in none; "SWE-bench")
        parts = [_flat(x) for x in re.split(r"[-/]", word) if len(_flat(x)) >= 3 and not (
            x[:1].islower() and zipf_frequency(_flat(x), "en") >= 3.0)]
        if flat in have or ("-" in word and (any(x in have for x in parts) or not parts)) or (
                len(flat) >= 4 and process.extractOne(flat, where.names, scorer=fuzz.ratio,
                                                      score_cutoff=fuzzy) is not None):
            offered_present |= option
            continue
        (offered if option else absent).append(word)
        last = (at + len(word), offered if option else absent)
    if not offered_present:
        absent += offered
    # a run of capitalised words whose initials it mentions: "Mean Absolute Error" is its MAE
    return [n for n in dict.fromkeys(absent)
            if " " not in n or "".join(w[0] for w in n.lower().split()) not in have]


# where a question offers candidate names: "(e.g. A or B)", "such as A", "A or B"
_OPTIONS = re.compile(r"\([^()]*\)|\b(?:e\.g\.|i\.e\.|such as|like|including|for example)[^.?;:]*|"
                      r"[\w@.+-]+(?:\s*,\s*[\w@.+-]+)*\s+or\s+(?:[\w@.+-]+\s+){0,2}[\w@.+-]+",
                      re.IGNORECASE)


def own_names(question: str, common: frozenset[str]) -> list[str]:
    """The coined names `question` writes (guard.NAME: "GRPO", "MuJoCo", "RGB-D") that are not
    field-wide words (`common`: LLM, RL, VLM), flattened; three characters at least ("3D" and
    "KV" describe, they name no one work)."""
    return list(dict.fromkeys(f for m in NAME.finditer(question)
                              if len(f := _flat(m.group(0))) >= 3 and f not in common))


def writing(papers: Iterable[Paper], flat_names: list[str]) -> list[Paper]:
    """Of `papers`, in their order, those whose abstract writes one of `flat_names`."""
    return [p for p in papers if any(n in paper_mentions(p).have for n in flat_names)]


_COMMON: dict[tuple[int, str, str], frozenset[str]] = {}


def common_names(papers: dict[str, Paper]) -> frozenset[str]:
    """Names that 3 or more abstracts use (LLM, RL, MLLMs): field-wide words, not names of a
    thing one abstract would have to mention; lowercased, letters and digits only, with
    their plurals. Cached per corpus (its size and first and last ids)."""
    key = (len(papers), min(papers, default=""), max(papers, default=""))
    if key not in _COMMON:
        counts: dict[str, int] = {}
        for p in papers.values():
            for n in {_flat(m.group(0)) for m in NAME.finditer(p.clean)}:
                counts[n] = counts.get(n, 0) + 1
        for n in list(counts):  # "LLMs" counts for "LLM"
            if n.endswith("s") and n[:-1] in counts:
                counts[n[:-1]] += counts[n]
        # 3 is not fitted: on the seed corpus (the dev split's papers) it leaves ai, llm(s),
        # mllms, rl, vla, vlm, names of a field rather than of one work
        common = frozenset(n for n, c in counts.items() if c >= 3)
        _COMMON.clear()
        _COMMON[key] = common | frozenset(n + "s" for n in common)
    return _COMMON[key]


def invented_names(text: str, sources: list[Paper], allowed: frozenset[str]) -> list[str]:
    """Coined names in an answer sentence ("KCA") that none of its source abstracts writes
    (in any spacing or hyphenation) and that are not `allowed` (flattened: field-wide
    acronyms, the question's own names): made up, so the sentence cannot be supported
    whatever its wording."""
    have = mentions(p.clean for p in sources).have | {
        _flat(w) for p in sources for w in re.findall(r"[\w@.+-]+", p.clean)}
    out = []
    for m in NAME.finditer(re.sub(r"\[\d+\]|\b\d{3}-\d{2}\b", " ", text)):
        flat = _flat(m.group(0).rstrip("-"))
        if len(flat) < 2 or flat in allowed or flat in have or flat.rstrip("s") in have:
            continue
        if any(flat in h for h in have if len(flat) >= 4):  # "Wan2.1" inside "Wan2.1-T2V"
            continue
        out.append(m.group(0))
    return out


def allowed_names(question: str, papers: dict[str, Paper]) -> frozenset[str]:
    """What an answer to `question` may name without its sources writing it: the question's
    own words (a user's "Bi-NCA", copied back) and the field-wide acronyms of `papers`."""
    return common_names(papers) | flat_words(question)


def flat_words(text: str) -> frozenset[str]:
    """The words of `text` as the name checks compare them (lowercased, no spacing or
    hyphenation)."""
    return frozenset(_flat(w) for w in re.findall(r"[\w@.+-]+", text))
