"""Questions in other languages: the generator translates the question into English for
search and for the model, and the verified English answer back into the user's language.

The answer is checked against the abstracts in English (MiniLM is English-only), so every
citation is decided before translation; the translation keeps each sentence's markers,
which are re-attached sentence by sentence, so the citations are exactly the English ones.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import replace

from rag import language, messages
from rag.config import Settings
from rag.errors import ModelError
from rag.evaluate import numbers
from rag.extract import LEAD
from rag.generate import Generator
from rag.prompt import markers_in, strip_markers
from rag.types import Answer, AnswerSentence, Event, Final, Status, Token

log = logging.getLogger(__name__)

TO_ENGLISH = ("You translate questions into English. You never answer them. Keep names, "
              "acronyms, numbers and paper ids exactly as written. Reply with the English "
              "question only.")
# Two worked examples: without them the 0.5B model answers the question instead of
# translating it (3 of 4 dev questions); with them it translated 7 of 7.
SHOTS = (("¿Qué método propone el artículo sobre robots?",
          "Which method does the paper on robots propose?"),
         ("这篇论文使用了哪些数据集？", "Which datasets does this paper use?"))
FROM_ENGLISH = ("Translate the user's message from English into {language}. Keep names, "
                "acronyms, numbers and paper ids like 000-01 exactly as written. Reply with the "
                "translation only, one line for each line of the message.")
# One worked example per language: without one the 0.5B model often hands the English line
# back unchanged (a quoted abstract sentence full of names and numbers, most of all).
_SHOT_EN = "GraphMix raises accuracy by 12% on GPQA with two auxiliary tasks."
SHOT_INTO = {
    "es": "GraphMix aumenta la precisión en un 12% en GPQA con dos tareas auxiliares.",
    "de": "GraphMix steigert die Genauigkeit auf GPQA mit zwei Hilfsaufgaben um 12%.",
    "fr": "GraphMix augmente la précision de 12% sur GPQA avec deux tâches auxiliaires.",
    "it": "GraphMix aumenta l'accuratezza del 12% su GPQA con due compiti ausiliari.",
    "pt": "GraphMix aumenta a precisão em 12% no GPQA com duas tarefas auxiliares.",
    "zh": "GraphMix 借助两个辅助任务，将 GPQA 上的准确率提高了 12%。",
    "ja": "GraphMix は 2 つの補助タスクにより、GPQA での精度を 12% 向上させます。",
    "ko": "GraphMix는 두 개의 보조 과제로 GPQA에서 정확도를 12% 높입니다.",
    "ru": "GraphMix повышает точность на GPQA на 12% с помощью двух вспомогательных задач.",
}


# Coined names: a digit or '@' among letters (SSL4RL, Wan2.1, leak@k), or a capital after a
# lowercase letter (DeltaNet, PaperGuard, RedTeam). All-capital acronyms (AI, RL, LLM) are
# left out: languages translate them ("IA", "LLM" -> "grandes modelos de lenguaje").
_CODED = re.compile(r"\b(?=[\w.@]*[A-Za-z])(?=[\w.@]*(?:\d|@|[a-z][A-Z]))[A-Za-z][\w.@]*[\w@]\b")


_QUOTED = re.compile(r"\u201c([^\u201d\n]{2,120})\u201d")  # “words kept as written”


def anchors(text: str) -> set[str]:
    """What a translation must keep: coined names, numbers (not paper ids) and words in
    curly quotes (an acronym's long form), case-folded; ordinary words and acronyms are the
    translator's to translate."""
    return {m.group().lower() for m in _CODED.finditer(text)} | numbers(text) | \
        {m.group(1).lower() for m in _QUOTED.finditer(text)}


def lost(english: str, translated: str, names: frozenset[str] = frozenset()) -> set[str]:
    """Anchors of the English line missing from its translation; `names` (the cited papers'
    one-word names: Self-RedTeam, Bi-NAC, VIA-SD) count as anchors where the line has them."""
    have = translated.lower().replace(" ", "")
    low = english.lower()
    wanted = anchors(english) | {n.lower() for n in names if n.lower() in low}
    return {a for a in wanted if a.replace(" ", "") not in have}


_LOOP = re.compile(r"(.{3,40}?)(?:\s*\1){3,}", re.DOTALL)  # one piece said 4+ times in a row


def looping(english: str, translated: str) -> bool:
    """Whether the translation fell into a loop the English line does not have: a small
    model's "데 도움이 되는 데 도움이 되는 데 도움이 되는 ..." until its token limit."""
    def runs(text: str) -> set[str]:
        return {m.group(1).strip() for m in _LOOP.finditer(text) if re.search(r"\w", m.group(1))}
    return bool(runs(translated) - runs(english))


def restore(english: str, translated: str, names: frozenset[str] = frozenset()) -> str:
    """`translated` with each coined name of `english` (and each of `names` it has) written as
    in English where the translation split or re-cased it ("Cap imagine" -> "CapImagine")."""
    wanted = {m.group() for m in _CODED.finditer(english)} | {n for n in names if n in english}
    for name in sorted(wanted, key=len, reverse=True):
        if name in translated or len(name) < 4:
            continue
        loose = r"\s?".join(re.escape(c) for c in name)
        spelt = re.compile(r"(?<![0-9A-Za-z])" + loose + r"(?![0-9A-Za-z])", re.IGNORECASE)
        translated = spelt.sub(name.replace("\\", "\\\\"), translated)
    return translated


def _untranslated(english: str, out: str) -> bool:
    """Whether `out` is the English text handed back: 80 % or more of its word characters
    are in words of the English line (counted in characters, so an unspaced Chinese run
    weighs what it says; lingua is no judge of a short line: "L'abstracto di Blend-ASC
    (004-03) non dice questo." reads as English to it)."""
    said = re.findall(r"\w+", out.lower())
    given = set(re.findall(r"\w+", english.lower()))
    total = sum(map(len, said))
    return not total or sum(len(w) for w in said if w in given) >= 0.8 * total


def translation_settings(settings: Settings) -> Settings | None:
    """The settings of the model that translates questions into English (`translate.preset`
    on llama.cpp), or None when the answer model does: no preset set, the same preset, or a
    remote (openai) engine."""
    preset = settings.translate.preset
    if not preset or preset == settings.generate.preset or settings.generate.engine == "openai":
        return None
    return settings.model_copy(update={"generate": settings.generate.model_copy(update={
        "preset": preset, "engine": "llama.cpp", "draft_preset": "", "ngram_draft_tokens": None})})


class Translator:
    """Questions into English with `english` (the translation model, when one is configured
    apart), answers back with `generator` (the answer model). When `english` cannot load (its
    model is not prepared, say) the answer model translates questions too, from then on; the
    reason is kept in `failed` and logged once."""

    def __init__(self, generator: Generator, english: Generator | None = None) -> None:
        self.generator = generator
        self.english = english
        self.failed = ""  # why `english` could not be used, once it failed

    def to_english(self, text: str, lang: str) -> str:
        limit = min(160, 40 + 2 * len(text))
        gen = self.generator
        if self.english is not None and not self.failed:
            try:
                out = self.english.generate(self.english.format_chat(TO_ENGLISH, text, SHOTS), limit)
                return " ".join(out.split())
            except ModelError as e:
                self.failed = str(e)
                log.warning("the translation model is unavailable (%s); the answer model "
                            "translates instead", e)
        out = gen.generate(gen.format_chat(TO_ENGLISH, text, history=SHOTS), limit)
        return " ".join(out.split())

    def from_english(self, text: str, lang: str) -> str:
        """`text` in `lang`, line by line (markers are not part of `text`): with the
        language's worked example first; when that comes back still in English, without it."""
        system = FROM_ENGLISH.format(language=language.name(lang))
        shots = ((_SHOT_EN, SHOT_INTO[lang]),) if lang in SHOT_INTO else ()
        out = ""
        for history in dict.fromkeys((shots, ())):
            prompt = self.generator.format_chat(system, text, history=history)
            out = self.generator.generate(prompt, max_new_tokens=min(400, 40 + len(text))).strip()
            if not _untranslated(text, out):
                break
        return out

    def answer(self, answer: Answer, lang: str) -> Answer:
        """The answer in `lang` with the same citations: each line is translated, and the
        markers that closed it in English close it again."""
        if not answer.text.strip():
            return answer
        fixed = messages.render(answer.message, lang, answer.fields) if answer.message else None
        if fixed is not None:  # a decline: written in the language, not translated
            return replace(answer, text=fixed, sentences=tuple(
                AnswerSentence(strip_markers(fixed).strip(), s.markers, s.supported)
                for s in answer.sentences[:1]))
        lines = answer.text.split("\n")
        bodies, tails, leads = [], [], []
        for line in lines:
            tail = "".join(f" [{m}]" for m in dict.fromkeys(markers_in(line)))
            # kept untranslated in front: a bullet and a quote's "Label (id): " header (the
            # 0.5B hands a line that starts with one back in English)
            lead = LEAD.match(line).group(0) if line.strip() else ""  # type: ignore[union-attr]
            bodies.append(strip_markers(line[len(lead):]).strip())
            tails.append(tail)
            leads.append(lead)
        wanted = [i for i, b in enumerate(bodies) if b]
        translated = self.from_english("\n".join(bodies[i] for i in wanted), lang).split("\n")
        translated = [t for t in translated if t.strip()]
        if len(translated) != len(wanted):  # the model merged or split lines: one at a time
            translated = [self.from_english(bodies[i], lang) for i in wanted]
        kept = 0
        names = frozenset(c.label for c in answer.citations if c.label and " " not in c.label)
        def bad(english: str, out: str) -> bool:
            return bool(lost(english, out, names)) or looping(english, out)

        for j, i in enumerate(wanted):  # a line that lost a name or number, or looped: once
            if bad(bodies[i], translated[j]):  # more alone, then the verified English line
                again = self.from_english(bodies[i], lang)
                translated[j] = bodies[i] if bad(bodies[i], again) else again
            kept += _untranslated(bodies[i], translated[j])
            translated[j] = restore(bodies[i], translated[j], names)
        if kept:
            answer = replace(answer, notice=(answer.notice + " " if answer.notice else "")
                             + f"{kept} sentence(s) kept in English: their translation lost a "
                             "name or a number, or repeated itself.")
        out = list(lines)
        for i, t in zip(wanted, translated, strict=True):
            out[i] = f"{leads[i]}{' '.join(t.split())}{tails[i]}"
        text = "\n".join(out)
        sentences = tuple(AnswerSentence(t, s.markers, s.supported) for t, s in
                          zip((strip_markers(x).strip() for x in out if x.strip()),
                              answer.sentences, strict=False)) or answer.sentences
        return replace(answer, text=text, sentences=sentences)

    def stream(self, events: Iterator[Event], lang: str,
               stop: threading.Event | None = None) -> Iterator[Event]:
        """Pass `events` through, holding the English tokens back; the final answer is
        translated and streamed as one piece, so the streamed text equals the final text."""
        for ev in events:
            if isinstance(ev, Token):
                continue
            if isinstance(ev, Final):
                if stop is not None and stop.is_set():
                    yield Token(strip_markers(ev.answer.text))
                    yield ev
                    return
                yield Status("translating", f"Translating the answer into {language.name(lang)}…")
                try:
                    answer = self.answer(ev.answer, lang)
                except Exception as e:  # keep the verified English answer rather than nothing
                    log.warning("translation into %s failed: %s", lang, e)
                    answer = replace(ev.answer, notice=(ev.answer.notice + " " if ev.answer.notice
                                                        else "") + "The translation failed; "
                                     "the answer is in English.")
                yield Token(strip_markers(answer.text))
                yield Final(answer)
                return
            yield ev
