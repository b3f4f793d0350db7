"""Language identification (lingua, the only module that imports it).

Questions are short and full of English technical names ("SSL4RL vs TaRO", "and the
speedup?"), so a question counts as non-English only when lingua is confident
(route.language_confidence, fitted on the eval's dev split), or when it is written in a
script English does not use (CJK, Cyrillic, Arabic, ...), which needs no model at all.

Two stages, for memory. lingua's high-accuracy models of 30 languages hold ~510 MB once
loaded, its low-accuracy (trigram) models ~55 MB, and the low-accuracy mode alone misreads
short English questions ("Which papers work on proteins?" as German at 0.98). So the
low-accuracy detector, always loaded, settles what it reads as English with confidence
>= route.language_sure (8 questions in 10 on dev); any other text is read again in
high-accuracy mode by a detector of English and the low-accuracy reading's
route.language_candidates best languages, whose models are unloaded afterwards. Its
confidences are scaled by the candidates' share of the low-accuracy confidence, so that they
stay comparable to the 30-language ones route.language_confidence was fitted on (dev): without that,
"PQL vs RFM" (" vs " once the names are set aside) read as Czech in a set of five. On dev's
363 questions and comparisons this gives the single 30-language detector's language for
every one but "Comparez ePC et DDSVM" (two French words: Spanish at 0.31 with 3 candidates,
English with 4 as with all 30; neither is French), and so on test's 93 (counts only). A
question that goes to the second stage pays ~0.4 s for loading its languages and ~140 MB
while they are loaded (3 candidates; 4: ~165 MB, which put the served 1.5B over 2.5 GB).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from rag.guard import NAME
from rag.heap import trim_heap

log = logging.getLogger(__name__)

# 30 widely written languages: loading all 75 of lingua's models takes 20 s and 1.3 GB.
LANGUAGES = ("ENGLISH SPANISH GERMAN FRENCH ITALIAN PORTUGUESE DUTCH CHINESE JAPANESE KOREAN "
             "RUSSIAN UKRAINIAN POLISH CZECH TURKISH ARABIC HEBREW HINDI VIETNAMESE INDONESIAN "
             "SWEDISH DANISH FINNISH GREEK PERSIAN THAI ROMANIAN HUNGARIAN CATALAN BOKMAL").split()

NAMES = {"en": "English", "es": "Spanish", "de": "German", "fr": "French", "it": "Italian",
         "pt": "Portuguese", "nl": "Dutch", "zh": "Chinese", "ja": "Japanese", "ko": "Korean",
         "ru": "Russian", "uk": "Ukrainian", "pl": "Polish", "cs": "Czech", "tr": "Turkish",
         "ar": "Arabic", "he": "Hebrew", "hi": "Hindi", "vi": "Vietnamese", "id": "Indonesian",
         "sv": "Swedish", "da": "Danish", "fi": "Finnish", "el": "Greek", "fa": "Persian",
         "th": "Thai", "ro": "Romanian", "hu": "Hungarian", "ca": "Catalan", "nb": "Norwegian"}

_SCRIPTS = [  # (pattern, language when lingua is unsure); scripts English never uses
    (re.compile(r"[\u3040-\u30ff]"), "ja"),
    (re.compile(r"[\uac00-\ud7af]"), "ko"),
    (re.compile(r"[\u4e00-\u9fff]"), "zh"),
    (re.compile(r"[\u0400-\u04ff]"), "ru"),
    (re.compile(r"[\u0600-\u06ff]"), "ar"),
    (re.compile(r"[\u0590-\u05ff]"), "he"),
    (re.compile(r"[\u0900-\u097f]"), "hi"),
    (re.compile(r"[\u0e00-\u0e7f]"), "th"),
    (re.compile(r"[\u0370-\u03ff]"), "el"),
]

_rough: Any = None  # the low-accuracy detector of all LANGUAGES
_lock = threading.Lock()  # one second-stage detector at a time: its models are shared and unloaded


def _load() -> Any:
    global _rough
    with _lock:
        if _rough is None:
            from lingua import Language, LanguageDetectorBuilder

            langs = [getattr(Language, n) for n in LANGUAGES]
            _rough = LanguageDetectorBuilder.from_languages(*langs).with_low_accuracy_mode().build()
        return _rough


def _precise(text: str, rough: list[Any], candidates: int) -> list[tuple[Any, float]]:
    """High-accuracy confidences over English and the rough reading's best `candidates`
    languages, scaled by their share of the rough confidence; the models are unloaded after."""
    from lingua import Language, LanguageDetectorBuilder

    chosen = {Language.ENGLISH} | {v.language for v in rough[:candidates]}
    share = sum(v.value for v in rough if v.language in chosen)
    with _lock:
        detector = LanguageDetectorBuilder.from_languages(*chosen).build()
        try:
            values = detector.compute_language_confidence_values(text)
        finally:
            detector.unload_language_models()
    trim_heap()  # the unloaded models' pages go back to the system
    return [(v.language, v.value * share) for v in values]


def warm_up() -> None:
    detect("Which papers study this?")
    trim_heap()  # building the models frees more than it keeps


_RUN = re.compile(r"[!-~]{41,}")


def detect(text: str, min_confidence: float = 0.25, sure: float = 0.5,
           candidates: int = 3) -> str:
    """ISO 639-1 code of `text`'s language; "en" unless the evidence says otherwise.
    `sure` and `candidates`: the two stages of the module docstring."""
    # a run of over 40 ASCII characters without a space is no word of any language (pasted
    # junk, a hash, base64, a URL; Chinese and Japanese write no spaces, in other characters):
    # "alert(1) xxxx…" of 1,984 characters was read as Norwegian, and the decline
    # "translated" into it
    text = _RUN.sub(" ", text)
    if not text.strip():
        return "en"
    letters = re.sub(r"[\W\d_]+", "", text)
    for pattern, code in _SCRIPTS:
        if len(pattern.findall(text)) >= max(2, len(letters) // 5):
            script = code
            break
    else:
        script = ""
    # coined names (guard.NAME) belong to no language and sway lingua: "Che cosa significa la sigla TaRO?"
    # read as Spanish, and as Italian without "TaRO"
    words = NAME.sub(" ", text)
    words = words if words.strip() else text
    rough = _load().compute_language_confidence_values(words)
    if not rough:
        return script or "en"
    if not script and rough[0].language.iso_code_639_1.name == "EN" and rough[0].value >= sure:
        return "en"
    values = _precise(words, rough, candidates)
    if not values:
        return script or "en"
    top, confidence = values[0]
    code = top.iso_code_639_1.name.lower()
    if script:  # the script decides between e.g. zh and ja only when lingua agrees
        return code if code != "en" and _script_of(code) == _script_of(script) else script
    if code != "en" and confidence >= min_confidence:
        return "en" if _english_words(words, code) else code
    return "en"


def _english_words(text: str, code: str) -> bool:
    """Whether `text` is a few words that are all everyday English (wordfreq Zipf >= 4.5): a
    second opinion on a short text lingua misreads ("tell me more" read as Italian at 0.4, then
    "translated" into a request for more information). English's list only, which the typo
    check has loaded anyway (another language's list would add ~70 MB for good). On the eval's
    113 questions read as another language it changes none; "Was ist das?", "Und PQL?", "E il
    TaRO?" and "Merci !" keep their language."""
    from wordfreq import zipf_frequency

    words = [w.lower() for w in re.findall(r"[^\W\d_]+", text)]
    return 0 < len(words) <= 5 and all(zipf_frequency(w, "en") >= 4.5 for w in words)


def _script_of(code: str) -> str:
    return {"ja": "cjk", "zh": "cjk", "ko": "cjk", "ru": "cyr", "uk": "cyr"}.get(code, code)


def name(code: str) -> str:
    """'es' -> 'Spanish' (the code itself for a language outside the list)."""
    return NAMES.get(code, code)
