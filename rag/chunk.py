"""Paper -> Chunks: sentence-aware windows with overlap, plus one whole-abstract chunk.

Abstracts run 110-270 words; MiniLM reads 256 word pieces (~180 words), so a window of
~80 words keeps every chunk inside the encoder's view while the whole-abstract chunk
(truncated by the encoder) gives the topic-level match. Offsets index `Paper.clean`.
"""

from __future__ import annotations

import re

from rag.types import Chunk, Paper

_ABBREV = {"al", "e.g", "i.e", "etc", "vs", "fig", "figs", "eq", "eqs", "sec", "cf", "approx",
           "resp", "no", "dr", "mr", "ms", "st", "ref", "refs", "appx", "tab"}
_BOUNDARY = re.compile(r"[.!?][\"'”)\]]*\s+(?=[\"“(\[]?[A-Z0-9])")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of `text`, whitespace trimmed."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        before = text[start: m.start()]
        last = re.split(r"\s", before)[-1].lower().rstrip(".")
        if last in _ABBREV or re.fullmatch(r"[a-z]", last) or last.endswith(("e.g", "i.e")):
            continue
        end = m.start() + 1
        while end < len(text) and text[end] in "\"'”)]":
            end += 1
        spans.append((start, end))
        start = m.end()
    if start < len(text) and text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


def chunk_paper(paper: Paper, max_words: int = 80, overlap: int = 1,
                whole: bool = True) -> list[Chunk]:
    """Greedy windows of whole sentences up to `max_words`, each repeating the last
    `overlap` sentences of the previous window. Ids are stable: "<paper id>#<ordinal>"."""
    if max_words <= 0 or overlap < 0:
        raise ValueError(f"max_words must be > 0 and overlap >= 0, got {max_words}, {overlap}")
    text = paper.clean
    spans = sentence_spans(text)
    chunks: list[Chunk] = []
    if whole:
        chunks.append(Chunk(f"{paper.id}#0", paper.id, 0, text, 0, len(text)))
    i = 0
    while i < len(spans):
        j, words = i, 0
        while j < len(spans) and (j == i or words + _words(text, spans[j]) <= max_words):
            words += _words(text, spans[j])
            j += 1
        s, e = spans[i][0], spans[j - 1][1]
        ordinal = len(chunks) + (0 if whole else 1)
        chunks.append(Chunk(f"{paper.id}#{ordinal}", paper.id, ordinal, text[s:e], s, e))
        if j >= len(spans):
            break
        i = max(j - overlap, i + 1)
    return chunks


def _words(text: str, span: tuple[int, int]) -> int:
    return len(text[span[0]: span[1]].split())
