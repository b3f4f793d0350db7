"""Frozen records that flow between the pipeline stages. No logic lives here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Paper:
    """One abstract from a seed file."""

    id: str  # "000-01": file prefix + 1-based position, stable for unchanged files
    label: str  # short readable name: the method name where the abstract gives one
    text: str  # the abstract as written (markup kept, for quoting)
    clean: str  # markup removed, for display and embedding
    source: str  # seed file name
    position: int  # 1-based paragraph index within the file
    line: int  # 1-based line number of the paragraph in the file
    collection: str  # the file's header line
    links: tuple[str, ...] = ()  # code/model URLs found in the abstract
    content_hash: str = ""  # sha256 of `text`, drives incremental ingest
    title: str = ""  # a 4-10 word title the generator wrote at ingest (rag/titles.py); "" if none
    title_generated: bool = False  # True when `title` is the model's (show it as generated)


@dataclass(frozen=True)
class Chunk:
    """A window of sentences from one paper's cleaned text; offsets index `Paper.clean`."""

    id: str  # "000-01#2"
    paper_id: str
    ordinal: int  # 0 is the whole-abstract chunk, 1.. the sentence windows
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with its fused score and 1-based rank."""

    chunk: Chunk
    score: float
    rank: int
    label: str = ""
    dense_score: float | None = None  # cosine similarity, when the dense side found it
    bm25_rank: int | None = None


@dataclass(frozen=True)
class Citation:
    """A link from one answer sentence to the abstract sentence that supports it."""

    marker: int  # the [n] shown to the user, 1-based over distinct cited papers
    paper_id: str
    label: str
    chunk_id: str
    quote: str  # exact supporting sentence from the paper's cleaned abstract
    start: int  # offsets of `quote` within Paper.clean
    end: int
    supported: bool
    score: float = 0.0


@dataclass(frozen=True)
class AnswerSentence:
    """One sentence of the answer with the markers that back it (empty when unsupported)."""

    text: str
    markers: tuple[int, ...]
    supported: bool


@dataclass(frozen=True)
class Answer:
    question: str
    text: str  # final answer text, with verified [n] markers
    citations: tuple[Citation, ...]
    hits: tuple[Hit, ...]
    abstained: bool
    sentences: tuple[AnswerSentence, ...] = ()
    reason: str = ""  # why it abstained: "off-topic", "not-stated", "empty", ...
    closest: tuple[str, ...] = ()  # paper ids of the closest papers, for abstentions
    notice: str = ""  # e.g. "question truncated to 2,000 characters"
    seconds: float = 0.0
    first_token_seconds: float | None = None
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of those, restored from the engine's cache, not prefilled
    generated_tokens: int = 0
    comparison: Comparison | None = None  # set when the question was a comparison request
    intent: str = ""  # the router's intent: ask, find, compare, followup, decline, about
    language: str = "en"  # ISO 639-1 code of the question, and of the answer text
    message: str = ""  # a fixed message's key (rag/messages.py), written per language, not translated
    fields: tuple[tuple[str, str], ...] = ()  # that message's fields: name, id, names


@dataclass(frozen=True)
class Cell:
    """One cell of a comparison table: a short extract from that column's paper, or None."""

    text: str  # "not stated in the abstract" when citation is None
    citation: Citation | None


@dataclass(frozen=True)
class Side:
    """One side of a comparison as the user named it, and what it resolved to."""

    query: str  # what the user wrote: "SSL4RL", "000-01", "the paper on unlearning leakage"
    status: Literal["resolved", "ambiguous", "unknown"]
    paper: Paper | None = None
    candidates: tuple[Paper, ...] = ()  # for "ambiguous": the top few to choose from


@dataclass(frozen=True)
class ComparisonRow:
    aspect: str  # "Problem", "Approach", "Evaluation", "Key results", "Code"
    left: Cell
    right: Cell


@dataclass(frozen=True)
class Comparison:
    left: Side
    right: Side
    rows: tuple[ComparisonRow, ...] = ()  # empty when the sides did not both resolve
    message: str = ""  # what went wrong, when rows is empty ("'XYZ' is not in the corpus")


Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Turn:
    """A past exchange; `paper_ids` are the papers that turn was about (cited or compared)."""

    question: str
    answer: str
    paper_ids: tuple[str, ...] = field(default_factory=tuple)


# Events yielded by Assistant.stream, in this order: Status*, Sources, [Compared], Token*, Final.
@dataclass(frozen=True)
class Status:
    stage: str  # "searching", "writing", ...
    message: str = ""


@dataclass(frozen=True)
class Sources:
    hits: tuple[Hit, ...]
    papers: tuple[Paper, ...]


@dataclass(frozen=True)
class Token:
    text: str


@dataclass(frozen=True)
class Compared:
    """A comparison table, ready before the model writes its synthesis."""

    comparison: Comparison


@dataclass(frozen=True)
class Final:
    answer: Answer


Event = Status | Sources | Compared | Token | Final


# The map of the papers (rag/atlas.py), computed at ingest and cached.
@dataclass(frozen=True)
class MapPoint:
    paper_id: str
    x: float  # 2-D projection of the whole-abstract embedding, scaled to [-1, 1]
    y: float
    cluster: int  # Cluster.id


@dataclass(frozen=True)
class Cluster:
    id: int
    name: str  # its most characteristic words, joined: "reinforcement learning, reward, policy"
    words: tuple[str, ...]


@dataclass(frozen=True)
class Atlas:
    points: tuple[MapPoint, ...]
    clusters: tuple[Cluster, ...]
    related: Mapping[str, tuple[str, ...]]  # paper id -> its nearest papers by cosine, nearest first
