"""What a translation must keep (rag/translate.py): coined names and numbers, never the
ordinary words it is there to translate."""

from __future__ import annotations

import pytest

from rag.config import load_settings
from rag.translate import anchors, looping, lost, translation_settings


def test_anchors_are_coined_names_and_numbers_not_paper_ids_or_words():
    got = anchors("TaRO (003-14) uses leak@k on 1,168 examples with two-player games.")
    assert got == {"taro", "leak@k", "1168"}


def test_words_in_curly_quotes_are_kept_as_written():
    en = "TaRO stands for \u201cTemporal-Aware Reasoning Optimization\u201d (TaRO, 003-14)."
    assert "temporal-aware reasoning optimization" in anchors(en)
    kept = "TaRO significa \u201cTemporal-Aware Reasoning Optimization\u201d (TaRO, 003-14)."
    assert lost(en, kept) == set()
    assert lost(en, "TaRO significa ottimizzazione del ragionamento temporale (TaRO, 003-14).") == \
        {"temporal-aware reasoning optimization"}


def test_a_translation_that_drops_a_number_or_name_is_caught():
    en = "SVOO keeps PSNR above 29 dB on Wan2.1 with a 1.5x speedup."
    assert lost(en, "SVOOはWan2.1でPSNR 29 dBを維持し、1.5倍高速です。") == set()
    assert lost(en, "SVOOはWan2.1でPSNR 29 dBを維持します。") == {"1.5"}
    assert lost(en, "SVOO mantiene el PSNR por encima de 29 dB en Wan 2.1.") == {"1.5"}  # spacing ignored
    assert lost("Self-RedTeam uses a zero-sum game.", "Self-RedTeam usa un juego de suma cero.") == set()


def test_a_translation_caught_in_a_loop_is_told_from_a_plain_one():
    english = "SigLIP aligns images and captions with a pairwise sigmoid loss."
    looped = "SigLIP는 이미지와 캡션을 정렬하는" + " 데 도움이 되는" * 5
    assert looping(english, looped)
    assert looping(english, "Alinea " + "la la la la " * 3)
    assert not looping(english, "SigLIP는 쌍별 시그모이드 손실로 이미지와 캡션을 정렬합니다.")
    assert not looping("Scores of 0.90, 0.90, 0.90 and 0.90.", "Punteggi di 0.90, 0.90, 0.90 e 0.90.")
    assert not looping("It reads ... then ....", "Si legge ... poi ....")  # no word repeated


def test_a_cited_papers_one_word_name_must_survive_whole():
    """The 0.5B model rendered "Self-RedTeam" as "RedTeam Self-Play": the coined part alone
    survived. A cited paper's one-word name is an anchor where the English line has it."""
    en = "Self-RedTeam co-evolves attackers and defenders."
    es = "RedTeam Self-Play coevoluciona atacantes y defensores."
    assert lost(en, es) == set()  # the coined-name rule alone misses it
    assert lost(en, es, frozenset({"Self-RedTeam"})) == {"self-redteam"}
    assert lost(en, "Self-RedTeam coevoluciona atacantes.", frozenset({"Self-RedTeam"})) == set()
    # a name the line does not use is not required
    assert lost("It co-evolves attackers.", "Coevoluciona atacantes.",
                frozenset({"Bi-NAC"})) == set()


def test_a_name_the_translation_split_or_recased_is_written_as_in_english():
    from rag.translate import restore

    assert restore("CapImagine imagines.", "Cap imagine 想象。", frozenset({"CapImagine"})) == \
        "CapImagine 想象。"
    assert restore("It runs on Wan2.1.", "它在Wan 2.1上运行。") == "它在Wan2.1上运行。"
    assert restore("It runs on Wan2.1.", "Es läuft auf Wan2.1.") == "Es läuft auf Wan2.1."
    # an ordinary word that happens to spell a name's letters apart is not a name
    assert restore("SSL4RL helps.", "SSL4RL hilft.") == "SSL4RL hilft."


def test_a_quotes_header_is_kept_in_front_of_the_translated_sentence():
    from rag.extract import LEAD as _LINE

    assert _LINE.match("SVOO (003-03): Extensive experiments show").group(0) == "SVOO (003-03): "
    assert _LINE.match("- leak@k (004-09): We introduce").group(0) == "- leak@k (004-09): "
    assert _LINE.match("It reaches 29 dB (on Wan2.1): good.").group(0) == ""


def test_a_line_handed_back_in_english_is_told_from_a_short_translation():
    from rag.translate import _untranslated

    en = "The abstract of Blend-ASC (004-03) does not state this."
    assert _untranslated(en, en)
    assert _untranslated(en, "The abstract of Blend-ASC (004-03) does not state this!")
    assert not _untranslated(en, "L'abstracto di Blend-ASC (004-03) non dice questo.")
    assert not _untranslated(en, "Blend-ASC (004-03) 的摘要没有说明这一点。")
    assert _untranslated(en, "")


def test_the_translation_model_runs_on_llamacpp_unless_the_answer_model_is_the_one():
    def settings(translate: str, preset: str = "qwen2.5-0.5b", engine: str = "transformers"):
        return load_settings(translate={"preset": translate},
                             generate={"preset": preset, "engine": engine})

    t = translation_settings(settings("qwen2.5-1.5b"))
    assert t is not None and (t.generate.preset, t.generate.engine) == ("qwen2.5-1.5b", "llama.cpp")
    assert t.generate.draft_preset == ""  # the answer model's speculation is not carried over
    assert translation_settings(settings("")) is None  # the answer model translates
    assert translation_settings(settings("qwen2.5-0.5b")) is None  # the same model
    assert translation_settings(settings("qwen2.5-1.5b", engine="openai")) is None  # remote


@pytest.mark.model
def test_a_missing_translation_model_hands_over_to_the_answer_model(settings, embedder,
                                                                    retriever, assistant,
                                                                    tmp_path):
    """Not prepared, deleted or corrupt: the question is still translated and answered, by
    the answer model, and the reason is kept (and logged once)."""
    from rag.assistant import Assistant
    from rag.generate import Generator

    gone = tmp_path / "gone.gguf"
    s = settings.model_copy(update={"translate": settings.translate.model_copy(
        update={"preset": str(gone)})})
    translation = translation_settings(s)
    assert translation is not None
    a = Assistant(s, retriever.store, embedder, retriever, assistant.generator,
                  Generator(translation))
    ans = a.ask("¿De dónde saca SSL4RL sus recompensas?")
    assert "gone.gguf" in a.translator.failed
    assert not ans.abstained and ans.language == "es", ans.text
    assert "000-01" in {c.paper_id for c in ans.citations if c.supported}


def test_every_fixed_message_is_written_in_every_language_with_its_fields():
    from rag import messages

    fields = (("name", "DeltaStack"), ("id", "003-17"), messages.names_field(["Adam", "SGD"]))
    for key, by_lang in messages.TEMPLATES.items():
        assert set(by_lang) == set(messages.TEMPLATES[messages.OFF_TOPIC])  # no language missing
        for lang in by_lang:
            text = messages.render(key, lang, fields)
            assert text and "{" not in text
            if "{name}" in by_lang[lang]:
                assert "DeltaStack" in text and "003-17" in text and "[1]" in text
            if "{names}" in by_lang[lang]:
                assert "Adam" in text and "SGD" in text
    assert messages.render(messages.NOT_STATED, "sw", fields) is None  # left to the translator
    assert messages.either(["Adam", "SGD", "Lion"], "de") == "Adam, SGD oder Lion"


@pytest.mark.model
def test_a_decline_in_another_language_is_the_written_message_not_a_translation(assistant):
    from rag import messages

    a = assistant.ask("Welche Lernrate verwendet DeltaStack beim Training?")
    assert a.language == "de" and a.abstained and a.reason == "not-stated"
    assert a.text == messages.render(a.message, "de", a.fields)
    assert a.text.startswith("Der Abstract von DeltaStack (003-17) nennt das nicht")
    assert a.citations and a.citations[0].paper_id == "003-17"
