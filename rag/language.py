"""Language identification (lingua, the only module that imports it).

Questions are short and full of English technical names ("SSL4RL vs TaRO", "and the
speedup?"), so a question counts as non-English only when lingua is confident
(route.language_confidence, fitted on the eval's dev split), or when it is written in a
script English does not use (CJK, Cyrillic, Arabic, ...), which needs no model at all.
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

_detector: Any = None
_lock = threading.Lock()


def _load() -> Any:
    global _detector
    with _lock:
        if _detector is None:
            from lingua import Language, LanguageDetectorBuilder

            langs = [getattr(Language, n) for n in LANGUAGES]
            _detector = LanguageDetectorBuilder.from_languages(*langs).build()
        return _detector


def warm_up() -> None:
    detect("Which papers study this?")
    trim_heap()  # building the models frees ~70 MB more than it keeps


def detect(text: str, min_confidence: float = 0.25) -> str:
    """ISO 639-1 code of `text`'s language; "en" unless the evidence says otherwise."""
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
    values = _load().compute_language_confidence_values(words if words.strip() else text)
    if not values:
        return script or "en"
    top = values[0]
    code = top.language.iso_code_639_1.name.lower()
    if script:  # the script decides between e.g. zh and ja only when lingua agrees
        return code if code != "en" and _script_of(code) == _script_of(script) else script
    if code != "en" and top.value >= min_confidence:
        return code
    return "en"


def _script_of(code: str) -> str:
    return {"ja": "cjk", "zh": "cjk", "ko": "cjk", "ru": "cyr", "uk": "cyr"}.get(code, code)


def name(code: str) -> str:
    """'es' -> 'Spanish' (the code itself for a language outside the list)."""
    return NAMES.get(code, code)
