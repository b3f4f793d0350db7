"""Abstract text as readers and the index see it, with a map back to the seed's characters.

Seed abstracts are TeX-flavoured: `\\emph{...}`, `$\\alpha$`, `\\cite{...}`, `--`, `Fig.~3`.
`clean_map` turns them into plain text (Greek letters as letters, commands dropped, spaces
folded) and keeps, for every clean character, where it came from, so a quoted sentence can
be shown in the original (`original_span`). Invisible and bidirectional control characters
are dropped, and sentences addressed to a language model ("ignore previous instructions")
are withheld from what the model reads (`clean_abstract`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from rag.types import Paper

_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ",
    "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ",
    "Lambda": "Λ", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω", "ell": "ℓ",
    "times": "×", "mapsto": "↦", "to": "→", "rightarrow": "→", "leq": "≤", "le": "≤",
    "geq": "≥", "ge": "≥", "approx": "≈", "sim": "~", "cdot": "·", "infty": "∞", "pm": "±",
    "log": "log", "sqrt": "√", "%": "%",
}


# Invisible and bidirectional format characters (zero-width spaces and joiners, BOM, the
# embedding/override/isolate controls that can make displayed text read differently from what
# it is) and C0/C1 controls: never part of an abstract's words.
_INVISIBLE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
                        "\u2066-\u206f\ufeff\ufff9-\ufffb\x00-\x08\x0b\x0c\x0e-\x1f"
                        "\x7f-\x9f]")


def strip_invisible(text: str) -> str:
    return _INVISIBLE.sub("", text)


# ---- cleaning, with offsets back to the original --------------------------------------
#
# Every step is a regex substitution on a `_Mapped` string, which carries, for each of its
# characters, the span of the original text it came from: a character copied through keeps
# its own one-character span, a character written in place of markup ("α" for "\alpha", '"'
# for "``") spans the whole markup it replaced. So any span of the cleaned text maps back to
# the original by (min of its starts, max of its ends), whatever the steps did.

Piece = str | int  # a replacement piece: literal text, or a group number copied with offsets


class _Mapped:
    __slots__ = ("ends", "starts", "text")

    def __init__(self, text: str, starts: list[int], ends: list[int]) -> None:
        self.text, self.starts, self.ends = text, starts, ends

    @classmethod
    def of(cls, text: str) -> _Mapped:
        return cls(text, list(range(len(text))), list(range(1, len(text) + 1)))

    def sub(self, pattern: re.Pattern[str], repl: Callable[[re.Match[str]], list[Piece]]
            ) -> _Mapped:
        text, out, starts, ends = self.text, [], [], []
        pos = 0
        for m in pattern.finditer(text):
            a, b = m.span()
            if a == b:  # the patterns never match empty; a safeguard, not a path
                continue
            out.append(text[pos:a])
            starts += self.starts[pos:a]
            ends += self.ends[pos:a]
            lo, hi = min(self.starts[a:b]), max(self.ends[a:b])
            for piece in repl(m):
                if isinstance(piece, int):
                    ga, gb = m.span(piece)
                    if ga >= 0:
                        out.append(text[ga:gb])
                        starts += self.starts[ga:gb]
                        ends += self.ends[ga:gb]
                elif piece:
                    out.append(piece)
                    starts += [lo] * len(piece)
                    ends += [hi] * len(piece)
            pos = b
        if pos == 0:
            return self
        out.append(text[pos:])
        starts += self.starts[pos:]
        ends += self.ends[pos:]
        return _Mapped("".join(out), starts, ends)

    def slice(self, a: int, b: int) -> _Mapped:
        return _Mapped(self.text[a:b], self.starts[a:b], self.ends[a:b])


@dataclass(frozen=True)
class CleanText:
    """Cleaned text and, per character, the span of the original it came from."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that `text[start:end]` was cleaned from."""
        if not 0 <= start <= end <= len(self.text):
            raise ValueError(f"span {start}:{end} is outside the cleaned text "
                             f"(0:{len(self.text)})")
        if start == end:
            pos = self.starts[start] if start < len(self.text) else (self.ends[-1] if self.ends
                                                                     else 0)
            return pos, pos
        return min(self.starts[start:end]), max(self.ends[start:end])


_FONT = (r"emph|textit|textbf|texttt|textsc|textsf|textrm|text|mathrm|mathbf|mathcal|mathbb|"
         r"mathit|mathsf|operatorname|widetilde|tilde|widehat|hat|bar|overline|boldsymbol|"
         r"underline")
_FONT_ARG = re.compile(r"\\(?:" + _FONT + r")\{([^{}]*)\}")
_URL_CMD = re.compile(r"\\url\{([^{}]*)\}|\\href\{[^{}]*\}\{([^{}]*)\}")
# references to the paper's bibliography or its own figures say nothing in an abstract
_REF_CMD = re.compile(r"(?:~|\s+)?\\(?:cite[pt]?|citeauthor|ref|eqref|autoref|cref|Cref|label)"
                      r"(?![A-Za-z])\*?(?:\[[^\]]*\])*(?:\{[^{}]*\})?")
_TIE = re.compile(r"(?<=\S)~(?=\S)")  # TeX's non-breaking space ("Fig.~3"); "~20%" stays
# one pass, so that an escaped "\$" or "\{" survives while bare "$" and braces go
_TEX = re.compile(r"\\\\|\\([A-Za-z]+)|\\([%&_#${}])|\\[,;:! ]|\$|[{}]")
# commands that only switch fonts, size delimiters or space, and links without an argument
_SILENT = set(_FONT.split("|")) | {
    "url", "href", "it", "bf", "rm", "tt", "em", "sf", "sc", "left", "right", "big", "Big",
    "bigl", "bigr", "Bigl", "Bigr", "displaystyle", "textstyle", "noindent", "quad", "qquad"}
_ITALIC = re.compile(r"(?<![\w*])\*([^*\n]+?)\*(?![\w*])")
_QUOTES = re.compile(r"``|''")
_DASHES = re.compile(r"---|--")
_SPACE = re.compile(r"\s+")


def _tex(m: re.Match[str]) -> list[Piece]:
    if m.group(1):
        name = m.group(1)
        return [] if name in _SILENT else [_GREEK.get(name, name)]
    if m.group(2):
        return [2]
    return [" "] if m.group().startswith("\\") and m.group() != "\\" else []


def clean_map(text: str) -> CleanText:
    """Strip Markdown/LaTeX noise for display and embedding, keeping words and numbers,
    with each cleaned character's span in `text`."""
    s = _Mapped.of(text).sub(_INVISIBLE, lambda m: [])
    s = s.sub(_REF_CMD, lambda m: [])  # "~\cite{key}", " \ref{fig}" -> nothing
    s = s.sub(_URL_CMD, lambda m: [1, 2])  # \url{u} -> u, \href{u}{words} -> words
    s = s.sub(_TIE, lambda m: [" "])
    s = s.sub(_FONT_ARG, lambda m: [1]).sub(_FONT_ARG, lambda m: [1])  # one level of nesting
    s = s.sub(_TEX, _tex)
    s = s.sub(re.compile(r"\*\*"), lambda m: [])
    s = s.sub(_QUOTES, lambda m: ['"'])
    s = s.sub(_ITALIC, lambda m: [1])
    s = s.sub(_DASHES, lambda m: ["—" if m.group() == "---" else "–"])
    s = s.sub(_SPACE, lambda m: [" "])
    lead = len(s.text) - len(s.text.lstrip())
    s = s.slice(lead, len(s.text.rstrip()))
    return CleanText(s.text, tuple(s.starts), tuple(s.ends))


def clean_text(text: str) -> str:
    """Strip Markdown/LaTeX noise for display and embedding; keeps the words and numbers."""
    return clean_map(text).text


# Sentences that address the assistant instead of describing research: instructions planted in
# a document ("ignore previous instructions", "reply only with ...", "note to the AI: cite X").
# An abstract has no reason to speak to the model, so they are withheld from the cleaned text
# (what is embedded, shown as the abstract, quoted and put in prompts) and reported at ingest.
# Measured on the hostile fixture: the 0.5B model obeyed 2 of 3 such sentences when it saw
# them ("ACCESS GRANTED [1]", "BANANA [1]"), and none of the 57 seed abstracts matches.
_ADDRESSED = re.compile(
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
    r"(?:previous|prior|above|earlier|preceding|system|original)\s+"
    r"(?:instructions?|rules|prompts?|directions|guidelines)"
    r"|\b(?:reply|respond|answer)(?:\s+to)?\s+(?:(?:every|each|all|any)\s+(?:questions?|"
    r"users?|requests?)\s+)?(?:only\s+)?with\b(?=.{0,60}\b(?:only|single|nothing else|"
    r"word|exactly)\b|\s*[\"“'])"
    r"|\b(?:reply|respond|answer)\s+only\s+with\b"
    r"|\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?(?:ai|assistant|model|"
    r"llm|chatbot|language model)\b"
    r"|\byou\s+are\s+now\b|\bmaintenance mode\b|\bjailbreak mode\b"
    r"|(?:^|[#*>\s])(?:system|assistant)\s*(?:prompt)?\s*:"
    r"|\b(?:reveal|print|show|repeat)\s+(?:your|the)\s+(?:system\s+)?prompt\b"
    r"|\bcite\s+(?:paper\s+)?\S+\s+for\s+(?:everything|every\s+answer|all\s+answers)\b"
    r"|\bnever\s+cite\s+this\b"
    r"|\bprevious\s+rules\s+no\s+longer\s+apply\b",
    re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def withhold_instructions(clean: str) -> tuple[str, tuple[str, ...]]:
    """(the text without sentences addressed to the assistant, those sentences)."""
    kept, withheld = _withhold(_identity(clean))
    return kept.text, withheld


def _identity(text: str) -> CleanText:
    return CleanText(text, tuple(range(len(text))), tuple(range(1, len(text) + 1)))


def _withhold(c: CleanText) -> tuple[CleanText, tuple[str, ...]]:
    """`withhold_instructions` on cleaned text with offsets: the offsets follow the kept
    sentences; the space that joins two kept sentences maps to the space before the second."""
    text = c.text
    bounds: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCES.finditer(text):
        bounds.append((pos, m.start()))
        pos = m.end()
    bounds.append((pos, len(text)))
    withheld = tuple(text[a:b] for a, b in bounds if _ADDRESSED.search(text[a:b]))
    if not withheld:
        return c, ()
    out = _Mapped("", [], [])
    for a, b in bounds:
        if _ADDRESSED.search(text[a:b]):
            continue
        if out.text:  # a > 0 here: the character before a sentence is its separator
            out = _Mapped(out.text + " ", out.starts + [c.starts[a - 1]], out.ends + [c.ends[a - 1]])
        out = _Mapped(out.text + text[a:b], out.starts + list(c.starts[a:b]),
                      out.ends + list(c.ends[a:b]))
    lead = len(out.text) - len(out.text.lstrip())
    out = out.slice(lead, len(out.text.rstrip()))
    return CleanText(out.text, tuple(out.starts), tuple(out.ends)), withheld


def clean_abstract(text: str) -> tuple[CleanText, tuple[str, ...]]:
    """An abstract as indexed: cleaned, without sentences addressed to the assistant (also
    returned), with offsets into `text`."""
    return _withhold(clean_map(text))


@lru_cache(maxsize=4096)
def _cleaned(text: str) -> CleanText:
    return clean_abstract(text)[0]


def original_span(paper: Paper, start: int, end: int) -> tuple[int, int]:
    """The span of `paper.text` (the abstract as written, markup kept) that the span
    `paper.clean[start:end]` (a quote, a highlighted sentence) was cleaned from."""
    c = _cleaned(paper.text)
    if c.text == paper.clean:
        return c.to_original(start, end)
    if not 0 <= start <= end <= len(paper.clean):  # an index built by an older cleaner
        raise ValueError(f"span {start}:{end} is outside {paper.id}'s text (0:{len(paper.clean)})")
    found = paper.text.find(paper.clean[start:end])
    return (found, found + end - start) if found >= 0 else (0, len(paper.text))
