"""Typos in an English question, corrected towards the words of the indexed abstracts.

"wich papres use flow polcies?" searches as "which papers use flow policies?". A word is
corrected only when it looks like a misspelling of a corpus word: 4+ lower-case letters,
absent from the corpus, rare in English (wordfreq's Zipf frequency below `rare_zipf`) and
within `ratio` (rapidfuzz) of a corpus word. A word English does list, however rarely, is also
left alone when a common English word the corpus lacks (Zipf >= `english_zipf`) is nearer to
it than any corpus word: it is that word or itself, not a typo of the corpus's. "decompile" is
not the corpus's "decouple", nor "experienc" its "experiments" (on dev: "chokepoints" was read
as "keypoints" and "seperating" as "repeating", and so the wrong thing searched for). A word
English does not list ("polcies", "reinforcment") is corrected as before.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")

# question cue words a typo can hit ("wich", "papres"): corrected first, whatever the corpus has
_CUES = ("which", "what", "papers", "paper", "there", "compare", "work")

_KEEP = frozenset("""about above after again against also although among another anything
because before being below between both cannot could does doing during each either enough
every everything from have having here however into itself just many might more most much
must neither never nothing often other otherwise over quite rather really same several should
since some something such than that their theirs them then there these they thing things this
those though through under until very want what whats when where whether which while whom
whose will with within without would your yours""".split())


def vocabulary(texts: Iterable[str]) -> dict[str, int]:
    """Lower-cased word counts of `texts`: what a typo is corrected towards."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w.lower() for w in WORD.findall(text))
    return dict(counts)


@lru_cache(maxsize=4)
def _english(min_zipf: float) -> tuple[str, ...]:
    """English words of 3+ letters at least `min_zipf` common (wordfreq), most common first."""
    from wordfreq import top_n_list, zipf_frequency

    out = []
    for w in top_n_list("en", 100_000):
        if not w.isalpha() or len(w) < 3:
            continue
        if zipf_frequency(w, "en") < min_zipf:
            break  # the list is ordered by frequency
        out.append(w)
    return tuple(out)


def warm_up(english_zipf: float = 3.0) -> None:
    """Build the English word list `correct` compares rare words with (0.4 s, once)."""
    if english_zipf > 0:
        _english(english_zipf)


def correct(text: str, vocab: dict[str, int], ratio: float = 80.0, rare_zipf: float = 2.0,
            english_zipf: float = 3.0) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`text` with its typos replaced by corpus words, and the (typo, correction) pairs.
    Names (a capital inside the word) and short words are left alone."""
    from rapidfuzz import fuzz, process
    from wordfreq import zipf_frequency

    common = [w for w in vocab if len(w) >= 3]
    fixes: list[tuple[str, str]] = []

    def fix(m: re.Match[str]) -> str:
        word = m.group(0)
        low = word.lower()
        if len(low) < 4 or low in vocab or not word[1:].islower() or low in _KEEP:
            return word
        freq = zipf_frequency(low, "en")
        cue = process.extractOne(low, _CUES, scorer=fuzz.ratio, score_cutoff=85)
        if cue and freq < 3.0:  # "wich" (2.8) is a name in wordfreq
            fixes.append((word, cue[0]))
            return str(cue[0])
        if freq >= rare_zipf:
            return word
        hit = process.extractOne(low, common, scorer=fuzz.ratio, score_cutoff=ratio)
        if hit is None:
            return word
        if english_zipf > 0 and freq > 0:  # a word English has, if rarely ("chokepoints")
            rival = process.extractOne(low, _english(english_zipf), scorer=fuzz.ratio,
                                       score_cutoff=hit[1])
            if rival is not None and rival[1] > hit[1] and rival[0] not in vocab:
                return word  # ... nearer to an English word the abstracts do not use
        fixes.append((word, hit[0]))
        return str(hit[0])

    return WORD.sub(fix, text), tuple(fixes)


__all__ = ["WORD", "correct", "vocabulary", "warm_up"]
