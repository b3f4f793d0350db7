"""Acronyms in an answer, spelled out once the way the cited abstract defines them.

"SSL4RL turns SSL objectives into rewards" tells a reader who does not know the field less
than "... SSL (self-supervised learning) objectives ...". An acronym is glossed only when a
cited abstract defines it in so many words, "long form (ACR)", at its
first use in the answer, and only when the answer does not already spell it out.
The same finder (`acronyms.defined`) answers "what does X stand for?".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from rag.acronyms import defined
from rag.extract import LEAD
from rag.types import Answer, Paper

_ACRONYM = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*[A-Z])(s?)(?![\w-])")


def definitions(papers: Sequence[Paper]) -> dict[str, str]:
    """{acronym: long form} for the acronyms these abstracts define in parentheses."""
    out: dict[str, str] = {}
    for paper in papers:
        for acr in dict.fromkeys(m.group(1) for m in _ACRONYM.finditer(paper.clean)):
            found = None if acr in out else defined(acr, paper)
            if found and found[0].lower() != acr.lower():
                out[acr] = found[0]
    return out


def gloss_text(text: str, defined: dict[str, str], done: set[str]) -> str:
    """`text` with the first use of each defined acronym not in `done` glossed, outside the
    paper names that lead its lines ("Name (id): ..."); adds the glossed ones to `done`."""
    # a paper's name leading a line ("... in LDVLMs: A Study (004-11): ") is its title as
    # written: glossed, it read "... in LDVLMs (Large diffusion ...): A Study (004-11)"
    leads, at = [], 0
    for line in text.split("\n"):
        leads.append((at, at + LEAD.match(line).end()))  # type: ignore[union-attr]
        at += len(line) + 1
    out, pos = [], 0
    for m in _ACRONYM.finditer(text):
        acr = m.group(1)
        long_form = defined.get(acr)
        if long_form is None or acr in done or any(s <= m.start() < e for s, e in leads):
            continue
        done.add(acr)
        rest = text[m.end():]
        if re.match(r"\s*\(", rest):  # already followed by a parenthesis
            continue
        out.append(text[pos:m.end()] + f" ({long_form})")
        pos = m.end()
    return "".join(out) + text[pos:]


def gloss(answer: Answer, papers: dict[str, Paper]) -> Answer:
    """The answer with each acronym a cited abstract defines spelled out at its first use."""
    cited = [papers[i] for i in dict.fromkeys(c.paper_id for c in answer.citations)
             if i in papers]
    if answer.abstained or not cited:
        return answer
    low = answer.text.lower()
    defined = {a: f for a, f in definitions(cited).items()
               if a in answer.text and f.lower() not in low}
    if not defined:
        return answer
    if not answer.sentences:
        return replace(answer, text=gloss_text(answer.text, defined, set()))
    done: set[str] = set()
    text, pos, sentences = answer.text, 0, []
    for s in answer.sentences:
        new = gloss_text(s.text, defined, done)
        i = text.find(s.text, pos) if s.text else -1
        if i >= 0 and new != s.text:
            text = text[:i] + new + text[i + len(s.text):]
        pos = i + len(new) if i >= 0 else pos
        sentences.append(replace(s, text=new))
    return replace(answer, text=text, sentences=tuple(sentences))
