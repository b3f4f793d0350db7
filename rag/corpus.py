"""Seed files -> Papers: stable ids, readable labels, cleaned text, code links.

A seed file is a header line, then one abstract per blank-line-separated paragraph.
Ids are "<file prefix>-<position>", position counting accepted abstracts only, so a stray
fragment or a repeated abstract never renumbers the papers after it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rag.errors import CorpusError
from rag.types import Paper

log = logging.getLogger(__name__)

MIN_WORDS = 25  # shorter paragraphs are stray fragments, not abstracts (seeds: 110-270 words)
MAX_LABEL_WORDS = 8

_URL = re.compile(r"https?://[^\s)\]}>,;\"'<]+")
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


@dataclass(frozen=True)
class Corpus:
    papers: tuple[Paper, ...]
    warnings: tuple[str, ...] = ()

    def by_id(self) -> dict[str, Paper]:
        return {p.id: p for p in self.papers}


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


UPLOAD_PREFIX = re.compile(r"(u\d+)_")  # uploads are saved as "u001_<name>.txt" (rag/uploads.py)


def paper_prefix(path: Path) -> str:
    """The id prefix of a seed file: its leading digits ("000_..." -> "000"), an upload's
    "u<digits>" ("u001_mine.txt" -> "u001"), else its stem."""
    m = re.match(r"(\d+)", path.name) or UPLOAD_PREFIX.match(path.name)
    return m.group(1) if m else path.stem


def read_seed_file(path: Path) -> tuple[str, list[tuple[int, str]]]:
    """Return (header, [(line number, paragraph)]); raises CorpusError naming file and line."""
    raw = path.read_bytes()
    try:
        content = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise CorpusError(
            f"{path}: line {line}: not UTF-8 (byte 0x{raw[e.start]:02x}); "
            "re-save the file as UTF-8"
        ) from None
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    paragraphs: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for i, text in enumerate(lines + [""], start=1):
        if text.strip():
            if not buf:
                start = i
            buf.append(text.strip())
        elif buf:
            paragraphs.append((start, " ".join(buf)))
            buf = []
    if not paragraphs:
        raise CorpusError(f"{path}: line 1: the file is empty; expected a header line, "
                          "then abstracts separated by blank lines")
    header = next(ln.strip() for ln in lines if ln.strip())
    (first_line, first), rest = paragraphs[0], paragraphs[1:]
    if len(first) > len(header):  # no blank line between the header and the first abstract
        rest = [(first_line + 1, first[len(header):].strip())] + rest
    if not rest:
        raise CorpusError(f"{path}: line {first_line}: header {header!r} is followed by "
                          "no abstracts; add abstracts separated by blank lines")
    return header, rest


def load_file(path: Path, seen: dict[str, str] | None = None) -> tuple[list[Paper], list[str]]:
    """Papers of one seed file, plus warnings for skipped paragraphs."""
    seen = {} if seen is None else seen
    header, paragraphs = read_seed_file(path)
    prefix = paper_prefix(path)
    papers: list[Paper] = []
    warnings: list[str] = []
    for line, text in paragraphs:
        words = len(text.split())
        if words < MIN_WORDS:
            warnings.append(f"{path.name}: line {line}: skipped a {words}-word paragraph "
                            f"(too short to be an abstract): {text[:60]!r}")
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen:
            warnings.append(f"{path.name}: line {line}: skipped a repeat of paper {seen[digest]}")
            continue
        pid = f"{prefix}-{len(papers) + 1:02d}"
        seen[digest] = pid
        cleaned, withheld = clean_abstract(text)
        clean = cleaned.text
        for sentence in withheld:
            warnings.append(f"{path.name}: line {line}: withheld a sentence addressed to an AI "
                            f"assistant from {pid}: {sentence[:80]!r}")
        papers.append(Paper(
            id=pid, label=make_label(text, clean), text=text, clean=clean, source=path.name,
            position=len(papers) + 1, line=line, collection=header,
            links=tuple(dict.fromkeys(u.rstrip(".") for u in _URL.findall(text))),
            content_hash=digest,
        ))
    return papers, warnings


def load_corpus(seeds: Path, uploads: Path | None = None) -> Corpus:
    """All papers of all `*.txt` files in `seeds`, then in `uploads` (when it exists), each
    folder sorted by file name; a repeated abstract is kept where it came first."""
    if not seeds.is_dir():
        raise CorpusError(f"{seeds}: no such folder; point --seeds (or paths.seeds) at the "
                          "folder of seed .txt files")
    files = sorted(seeds.glob("*.txt"))
    if not files:
        raise CorpusError(f"{seeds}: no .txt seed files found")
    if uploads is not None and uploads.is_dir() and uploads.resolve() != seeds.resolve():
        files += sorted(uploads.glob("*.txt"))
    seen: dict[str, str] = {}
    papers: list[Paper] = []
    warnings: list[str] = []
    prefixes: dict[str, Path] = {}
    for f in files:
        prefix = paper_prefix(f)
        if prefix in prefixes:
            raise CorpusError(f"{f}: line 1: its id prefix {prefix!r} is already used by "
                              f"{prefixes[prefix].name}; rename one of the files")
        prefixes[prefix] = f
        ps, ws = load_file(f, seen)
        papers.extend(ps)
        warnings.extend(ws)
    for w in warnings:
        log.warning(w)
    return Corpus(tuple(papers), tuple(warnings))


# ---- labels ---------------------------------------------------------------------------

_STRONG = (r"(?:propose|proposes|introduce|introduces|present|presents|develop|develops|derive|"
           r"derives|design|designs|build|builds)")
_NAMING = r"(?:term|termed|call|called|name|named|dub|dubbed)"
_NAME = r"[A-Z][\w@\-]*(?:[A-Z0-9@\-][\w@\-]*)?"


def _is_name(tok: str) -> bool:
    """A coined name: has a capital or digit after the first character (SSL4RL, PaperGuard)."""
    tok = tok.strip("*_,.;:()\"' ")
    if len(tok) < 2 or not tok[0].isalpha() or tok.isupper() and len(tok) < 2:
        return False
    return any(c.isupper() or c.isdigit() for c in tok[1:]) and not tok.endswith("s") or (
        tok.isupper() and len(tok) >= 2
    )


def _name_from(text: str) -> str | None:
    text = re.sub(r"\\textbf\{([^{}]*)\}", r"**\1**", text)
    text = re.sub(r"\\(?:emph|textit)\{([^{}]*)\}", r"*\1*", text)
    for verbs in (_STRONG, _NAMING):
        name = _name_after(text, verbs)
        if name:
            return name
    return None


def _name_after(text: str, verbs: str) -> str | None:
    for m in re.finditer(r"\b" + verbs + r"\b", text):
        tail = text[m.end(): m.end() + 260]
        tail = re.split(r"(?<=[a-z0-9])\.\s", tail)[0]
        bold = re.match(r"\s+(?:the |a |an )?(?:[\w\-, ]{0,40}?)\*\*([^*]{2,80})\*\*", tail)
        if bold:
            inner = bold.group(1).strip()
            acr = re.search(r"\(([A-Za-z0-9\-]{2,12})\)", inner)
            if acr:
                return acr.group(1)
            if len(inner.split()) <= 3:
                return inner
        # "Full Name (ACRONYM)" within the first few words after the verb
        acr = re.match(r"\s+(?:the |a |an )?((?:[\w\-&,]+ ){1,8}?)\(\**([A-Za-z][A-Za-z0-9\-]{1,11})"
                       r"\**[),]", tail.replace("*", ""))
        if acr and sum(c.isupper() for c in acr.group(2)) >= 2:
            return acr.group(2)
        ital = re.match(r"\s+(?:[\w\- ]{0,30}?)\*([A-Za-z][\w\-]{2,30})\*", tail)
        if ital and _is_name(ital.group(1)):
            return ital.group(1)
        tt = re.match(r"\s+\\texttt\{([^}]{2,30})\}", tail)
        if tt:
            return clean_text(tt.group(1))
        word = re.match(r"\s+(?:the )?([A-Z][\w@\-]+)(?=[\s,:(])", tail)
        if word and (_is_name(word.group(1)) or re.match(r"\s+[A-Z]\w+,", tail)):
            return word.group(1).rstrip(",")
    return None


def _phrase_from(clean: str) -> str:
    """A short descriptive phrase: the object of 'we propose/study/...' or the first clause."""
    m = re.search(r"\b(?:we|this (?:paper|work)) (?:propose|introduce|develop|present|study|"
                  r"prove|investigate|identify|show|revisit|analyze|analyse|characterize|establish)s? "
                  r"(?:that )?(.+?)(?:[,.;:]| that | which | to | by | where | using | for the )",
                  clean, flags=re.IGNORECASE)
    phrase = m.group(1) if m else re.split(r"[,.;:—]", clean)[0]
    phrase = re.split(r" \(|—", phrase)[0]
    phrase = re.sub(r"^(?:a|an|the|two|new|novel|simple) ", "", phrase.strip(), flags=re.I)
    phrase = re.sub(r"^(?:a|an|the|novel|new) ", "", phrase, flags=re.I)
    words = phrase.split()
    if len(words) < 2:
        words = clean.split()
    words = words[:MAX_LABEL_WORDS]
    while words and words[-1].lower() in _FILLERS:
        words.pop()
    out = " ".join(words).strip(" ,.;:")
    if not out:  # a clause of fillers only ("of the (ABC) ..."): the text's first other words
        out = " ".join(([w for w in clean.split() if w.lower() not in _FILLERS] or clean.split())
                       [:MAX_LABEL_WORDS]).strip(" ,.;:")
    if not re.search(r"\w", out):
        return "Untitled abstract"  # no word to name it by
    return out[:1].upper() + out[1:]


_FILLERS = frozenset("of the a an and for in on with to by from".split())


def _name_from_links(text: str) -> str | None:
    """A code repository's name often is the method's name (he-zh/SKCI -> SKCI)."""
    for url in _URL.findall(text):
        m = re.match(r"https?://github\.com/[^/]+/([A-Za-z][\w\-]{1,19})/?$", url.rstrip(".)"))
        if m and "-" not in m.group(1).strip("-")[1:-1] or m and m.group(1).count("-") == 1:
            return m.group(1)
    return None


def method_name(text: str) -> str | None:
    """The method or benchmark name the abstract introduces (SSL4RL, PaperGuard), if any."""
    name = _name_from(text) or _name_from_links(text)
    if name:
        name = clean_text(name).strip(" ,.;:*")
        if 1 <= len(name.split()) <= MAX_LABEL_WORDS:
            return name
    return None


def make_label(text: str, clean: str) -> str:
    """The method or benchmark name the abstract introduces, else a short phrase from it."""
    return method_name(text) or _phrase_from(clean)
