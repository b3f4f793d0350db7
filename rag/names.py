"""Names a question asks about, or an answer states, that an abstract does not write.

A detail question naming something the asked paper's abstract never mentions ("What Elo
rating does it reach on Go?" when it never says Elo) cannot be answered from it; an answer
sentence naming something none of its sources writes ("the KCA similarity measure") is made
up, whatever its wording. Names are compared with their spacing, hyphens and case removed.
"""

from __future__ import annotations

import re

from rag.guard import NAME
from rag.types import Paper

# a capitalised word of the question (not its first word): "on Go", "LLaVA", "BioModels"
_ENTITY = re.compile(r"(?<=[\s(,/\"'])([A-Z][\w@.+-]*[\w@+])")


def _flat(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def absent_names(question: str, paper: Paper, common: frozenset[str] = frozenset(),
                 fuzzy: float = 80) -> list[str]:
    """Names the question asks about that the named paper's abstract never mentions ("What
    Elo rating does it reach on Go?" -> Elo): then the abstract cannot state the answer.
    Names offered as options ("(e.g. ResNet-50 or Swin-L)", "CLIP or LLaVA") count only
    when the abstract has none of them. A name the abstract writes in other spacing or
    hyphenation, a hyphenated name whose parts it has ("RDP-to-f-DP"), a misspelling of
    one of its names (rapidfuzz ratio >= `fuzzy`) and a field-wide acronym (`common`,
    lowercased) count as mentioned; a sentence's first word is no name."""
    from rapidfuzz import fuzz
    from wordfreq import zipf_frequency

    own = {_flat(n.group(0)) for n in NAME.finditer(paper.clean)} | {_flat(paper.label)}
    # the abstract's words, and its hyphenated or spaced runs written as one ("Wan 2.1")
    words = re.findall(r"[A-Za-z0-9]+", paper.clean)
    have = {w.lower() for w in words} | own | {_flat(m.group(0)) for m in re.finditer(
        r"[\w@.+]+(?:[-/ ][\w@.+]+)?", paper.clean)}
    have |= {w[:-1] for w in have if w.endswith("s")} | {w + "s" for w in have}
    options = [(m.start(), m.end()) for m in _OPTIONS.finditer(question)]
    absent: list[str] = []
    offered: list[str] = []
    offered_present = False
    for m in _ENTITY.finditer(" " + question):
        at = m.start() - 1
        if re.search(r"(?:^|[.?!:;]['\"\u201d]?)\s*[(\"'\u201c]?$", question[:max(0, at)]):
            continue  # a sentence's first word: capitalised as any first word is
        word = m.group(1).rstrip(".")
        flat = _flat(word)
        option = any(s <= at < e for s, e in options)
        if len(flat) < 2 or flat in common:
            continue
        if word.isupper() and len(word) >= 5 and zipf_frequency(word.lower(), "en") >= 3.0:
            continue  # shouting ("SYSTEM OVERRIDE", "HACKED"), not a name
        # a compound of the question's own ("RDP-to-f-DP") names what its parts name
        parts = [_flat(x) for x in re.split(r"[-/]", word) if len(_flat(x)) >= 3]
        if flat in have or ("-" in word and any(x in have for x in parts)) or \
                any(fuzz.ratio(flat, o) >= fuzzy for o in own):
            offered_present |= option
            continue
        (offered if option else absent).append(word)
    if not offered_present:
        absent += offered
    return list(dict.fromkeys(absent))


# where a question offers candidate names: "(e.g. A or B)", "such as A", "A or B"
_OPTIONS = re.compile(r"\([^()]*\)|\b(?:e\.g\.|i\.e\.|such as|like|including|for example)[^.?;:]*|"
                      r"[\w@.+-]+(?:\s*,\s*[\w@.+-]+)*\s+or\s+(?:[\w@.+-]+\s+){0,2}[\w@.+-]+",
                      re.IGNORECASE)


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
        common = frozenset(n for n, c in counts.items() if c >= 3)
        _COMMON.clear()
        _COMMON[key] = common | frozenset(n + "s" for n in common)
    return _COMMON[key]


def invented_names(text: str, sources: list[Paper], common: frozenset[str]) -> list[str]:
    """Coined names in an answer sentence ("KCA") that none of its source abstracts writes
    (in any spacing or hyphenation) and that are no field-wide acronym: made up, so the
    sentence cannot be supported whatever its wording."""
    have = {_flat(m.group(0)) for p in sources for m in re.finditer(
        r"[\w@.+]+(?:[-/ ][\w@.+]+)?", p.clean)}
    have |= {_flat(w) for p in sources for w in re.findall(r"[\w@.+-]+", p.clean)}
    out = []
    for m in NAME.finditer(re.sub(r"\[\d+\]|\b\d{3}-\d{2}\b", " ", text)):
        flat = _flat(m.group(0).rstrip("-"))
        if len(flat) < 2 or flat in common or flat in have or flat.rstrip("s") in have:
            continue
        if any(flat in h for h in have if len(flat) >= 4):  # "Wan2.1" inside "Wan2.1-T2V"
            continue
        out.append(m.group(0))
    return out
