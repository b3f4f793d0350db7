"""Acronyms and the long forms an abstract gives them.

`defined` finds a definition in so many words: "self-supervised learning (SSL)", "FIRE-BENCH
(Full-cycle Insight Rediscovery Evaluation)", or Schwartz & Hearst's rule for long forms no
initials rule spells ("Bilevel Natural Language Actor-Critic (Bi-NAC)"). `expansion` falls
back on a run of capitalised words that spell the acronym ("Budgeted EXit Actor" for BEXA).
One finder serves "what does X stand for?" (rag/finish.py), the glossed answers
(rag/gloss.py), and the abbreviations the evidence scorer and the index treat as one word
(rag/evidence.py, rag/retrieve.py).
"""

from __future__ import annotations

import re

from rag.types import Paper

__all__ = ["GLUE", "defined", "expansion"]

# small words a long form may hold that give its acronym no letter ("Learning *for* RL")
GLUE = frozenset("of for and the with via to in on by a an from followed using based".split())


def expansion(acronym: str, paper: Paper) -> tuple[str, int, int] | None:
    """'BEXA' -> ('Budgeted EXit Actor', start, end): the run of the abstract's words whose
    capitals (or initials) spell the acronym, small glue words allowed between them, as in
    'Patch-level Inference followed by Adaptive Aggregation' for PIAA. A definition in so
    many words, "long form (ACRONYM)", comes first."""
    found = defined(acronym, paper)
    if found:
        return found
    core = acronym[:-1] if acronym.endswith("s") and acronym[:-1].isupper() else acronym  # LLMs
    target = [c.lower() for c in core if c.isalpha()]
    if len(target) < 2:
        return None
    words = list(re.finditer(r"[A-Za-z][\w'-]*", paper.clean))
    for i, first in enumerate(words):
        if first.group()[0].lower() != target[0] or not first.group()[0].isupper() or \
                first.group().lower().startswith(core.lower()):
            continue
        need, j, last = list(target), i, None
        while need and j < len(words):
            w = words[j].group()
            caps = [c.lower() for c in w if c.isupper()]
            letters = caps if len(caps) > 1 else [w[0].lower()]
            if j > i and w.lower() in GLUE:
                j += 1
                continue
            if letters != need[:len(letters)] or (j > i and not w[0].isupper()):
                break
            need, last, j = need[len(letters):], words[j], j + 1
        if not need and last is not None and words[i].group() != acronym:
            return paper.clean[first.start():last.end()], first.start(), last.end()
    return None


def _initials(word: str) -> list[list[str]]:
    """The letters a word may give an acronym: its first letter, the first letter of each
    hyphenated part ("self-supervised" -> s, s), or its capitals ("EXit" -> e, x)."""
    parts = [x for x in word.split("-") if x]
    caps = [c.lower() for c in word if c.isupper()]
    options = [[word[0].lower()], [x[0].lower() for x in parts]]
    if len(caps) > 1:
        options.append(caps)
    return [list(o) for o in dict.fromkeys(tuple(o) for o in options)]


def _spells(words: list[str], target: list[str]) -> bool:
    """Whether these words, glue words optional, spell `target` with their initials."""
    if not words:
        return not target
    head, rest = words[0], words[1:]
    if head.lower() in GLUE and _spells(rest, target):
        return True
    return any(o == target[:len(o)] and _spells(rest, target[len(o):])
               for o in _initials(head))


def defined(acronym: str, paper: Paper) -> tuple[str, int, int] | None:
    """The long form the abstract writes just before "(ACRONYM)", as in "self-supervised
    learning (SSL)" or "Multi-modal Large Language Models (MLLMs)", or in parentheses just
    after it, as in "FIRE-BENCH (Full-cycle Insight Rediscovery Evaluation)", whose initials
    spell the acronym or its part before a hyphen, when the abstract has no definition of the
    first kind ("ePC (error-based PC)" must not replace "Predictive Coding (PC)")."""
    core = acronym[:-1] if acronym.endswith("s") and acronym[:-1].isupper() else acronym
    target = [c.lower() for c in core if c.isalpha()]
    if len(target) < 2:
        return None
    for m in re.finditer(r"\(\s*" + re.escape(core) + r"s?\s*[),;]", paper.clean):
        before = list(re.finditer(r"[A-Za-z][\w'-]*", paper.clean[:m.start()]))[-(len(target) + 3):]
        if before and paper.clean[before[-1].end():m.start()].strip():
            continue  # something other than space between the words and "("
        for k in range(len(before) - 1, -1, -1):
            run = [w.group() for w in before[k:]]
            if run[0].lower() not in GLUE and _spells(run, target):
                return paper.clean[before[k].start():before[-1].end()], before[k].start(), \
                    before[-1].end()
    for m in re.finditer(r"\(\s*" + re.escape(core) + r"s?\s*[),;]", paper.clean):
        found = _schwartz_hearst(core, paper.clean, m.start())
        if found:
            return found
    # only when no "long form (ACR)" does: that one is the definition
    first = [c.lower() for c in core.split("-")[0] if c.isalpha()]
    for m in re.finditer(r"(?<![\w-])" + re.escape(core) + r"s?\s*\(([^()]{3,160})\)", paper.clean):
        words = re.findall(r"[A-Za-z][\w'-]*", m.group(1))
        if words and words[0].lower() not in GLUE and (
                _spells(words, target) or (len(first) >= 2 and _spells(words, first))):
            return m.group(1).strip(), m.start(1), m.end(1)
    return None


def _schwartz_hearst(short: str, text: str, paren: int) -> tuple[str, int, int] | None:
    """The long form before "(SHORT)" by Schwartz & Hearst's rule (PSB 2003): the shortest
    run of at most min(|SHORT| + 5, 2|SHORT|) words ending at the parenthesis in which the
    short form's letters and digits occur in order, right to left, its first one at the
    start of a word. It reads "Bilevel Natural Language Actor-Critic (Bi-NAC)", whose
    syllable and skipped word no initials rule spells."""
    chars = [c.lower() for c in short if c.isalnum()]
    if len(chars) < 2 or not chars[0].isalpha():
        return None
    words = list(re.finditer(r"[^\s]+", text[:paren]))
    limit = min(len(chars) + 5, 2 * len(chars))
    if not words or text[words[-1].end():paren].strip():
        return None
    for k in range(len(words) - 1, max(-1, len(words) - 1 - limit), -1):
        start = words[k].start()
        long_form = text[start:words[-1].end()]
        first = long_form.split()[0].lower()
        if first[0] != chars[0]:
            continue  # the long form starts with the short form's first letter
        if _sh_match(chars, long_form.lower()):
            if first in GLUE or re.search(r"(?<![\w-])" + re.escape(short) + r"(?![\w-])",
                                           long_form):
                return None  # "the GPU budget (GPU)": the name itself is no long form of it
            return long_form, start, words[-1].end()
    return None


def _sh_match(chars: list[str], long_form: str) -> bool:
    """Whether `chars` occur in `long_form` right to left, the first at a word start."""
    i = len(long_form) - 1
    for n in range(len(chars) - 1, -1, -1):
        c = chars[n]
        while i >= 0 and (long_form[i] != c or (
                n == 0 and i > 0 and long_form[i - 1].isalnum())):
            i -= 1
        if i < 0:
            return False
        i -= 1
    return True
