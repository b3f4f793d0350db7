"""Seed files -> Papers: stable ids, readable labels, cleaned text, code links.

A seed file is a header line, then one abstract per blank-line-separated paragraph.
Ids are "<file prefix>-<position>", position counting accepted abstracts only, so a stray
fragment or a repeated abstract never renumbers the papers after it.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from rag.clean import clean_abstract, clean_text
from rag.errors import CorpusError
from rag.types import Paper

log = logging.getLogger(__name__)

MIN_WORDS = 25  # shorter paragraphs are stray fragments, not abstracts (seeds: 110-270 words)
MAX_LABEL_WORDS = 8

_URL = re.compile(r"https?://[^\s)\]}>,;\"'<]+")


@dataclass(frozen=True)
class Corpus:
    papers: tuple[Paper, ...]
    warnings: tuple[str, ...] = ()

    def by_id(self) -> dict[str, Paper]:
        return {p.id: p for p in self.papers}


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
