"""The assistant's fixed messages (declines, "not stated"), written once per language.

A decline is the same sentence every time, so it is not handed to the small model to
translate: the 0.5B turned "The abstract of SLIM does not state this" into "Die Abstraktion
von SLIM hat nicht diese" and spent seconds on it. A message is a key and its fields (the
paper's name and id, names the abstracts never mention); `render` writes it in any language
below, and a language not below goes through the translator as before. Paper names, ids and
the [1] marker stay as they are in every language.
"""

from __future__ import annotations

from collections.abc import Sequence

NOT_STATED = "not-stated"
NOT_STATED_NAMES = "not-stated-names"
NO_LINK = "no-link"
UNSUPPORTED = "unsupported"
OFF_TOPIC = "off-topic"
OFF_TOPIC_NAMES = "off-topic-names"

_OR = {"en": " or ", "es": " o ", "de": " oder ", "fr": " ou ", "it": " o ", "pt": " ou ",
       "ru": " или ", "zh": "或", "ja": "や", "ko": " 또는 "}

_ONLY = {
    "en": "I can only answer questions about the ICML 2026 abstracts in this collection, and ",
    "es": "Solo puedo responder preguntas sobre los resúmenes de ICML 2026 de esta colección, y ",
    "de": "Ich kann nur Fragen zu den ICML-2026-Abstracts dieser Sammlung beantworten, und ",
    "fr": "Je ne peux répondre qu'aux questions sur les résumés ICML 2026 de cette collection, et ",
    "it": "Posso rispondere solo a domande sugli abstract di ICML 2026 di questa raccolta, e ",
    "pt": "Só posso responder a perguntas sobre os resumos do ICML 2026 desta coleção, e ",
    "ru": "Я могу отвечать только на вопросы об аннотациях ICML 2026 из этой коллекции, и ",
    "zh": "我只能回答关于本合集中 ICML 2026 论文摘要的问题，",
    "ja": "このコレクションの ICML 2026 論文の要旨に関する質問にのみ答えられますが、",
    "ko": "이 컬렉션의 ICML 2026 초록에 관한 질문에만 답할 수 있으며, ",
}

TEMPLATES: dict[str, dict[str, str]] = {
    NOT_STATED: {
        "en": "The abstract of {name} ({id}) does not state this [1].",
        "es": "El resumen de {name} ({id}) no indica esto [1].",
        "de": "Der Abstract von {name} ({id}) nennt das nicht [1].",
        "fr": "Le résumé de {name} ({id}) ne le précise pas [1].",
        "it": "L'abstract di {name} ({id}) non lo indica [1].",
        "pt": "O resumo de {name} ({id}) não informa isso [1].",
        "ru": "В аннотации {name} ({id}) это не указано [1].",
        "zh": "{name}（{id}）的摘要没有说明这一点 [1]。",
        "ja": "{name}（{id}）の要旨にはこの点の記載がありません [1]。",
        "ko": "{name}({id})의 초록에는 이 내용이 나와 있지 않습니다 [1].",
    },
    NOT_STATED_NAMES: {
        "en": "The abstract of {name} ({id}) does not state this: it never mentions {names} [1].",
        "es": "El resumen de {name} ({id}) no indica esto: nunca menciona {names} [1].",
        "de": "Der Abstract von {name} ({id}) nennt das nicht: {names} kommt darin nicht vor [1].",
        "fr": "Le résumé de {name} ({id}) ne le précise pas : il ne mentionne jamais {names} [1].",
        "it": "L'abstract di {name} ({id}) non lo indica: non menziona mai {names} [1].",
        "pt": "O resumo de {name} ({id}) não informa isso: nunca menciona {names} [1].",
        "ru": "В аннотации {name} ({id}) это не указано: {names} в ней не упоминается [1].",
        "zh": "{name}（{id}）的摘要没有说明这一点：其中从未提到 {names} [1]。",
        "ja": "{name}（{id}）の要旨にはこの点の記載がなく、{names} にも触れていません [1]。",
        "ko": "{name}({id})의 초록에는 이 내용이 나와 있지 않으며, {names}도 언급되지 않습니다 [1].",
    },
    NO_LINK: {
        "en": "The abstract of {name} ({id}) gives no link to its code or project page [1].",
        "es": "El resumen de {name} ({id}) no da ningún enlace a su código ni a su página de proyecto [1].",
        "de": "Der Abstract von {name} ({id}) nennt keinen Link zu Code oder Projektseite [1].",
        "fr": "Le résumé de {name} ({id}) ne donne aucun lien vers son code ou sa page de projet [1].",
        "it": "L'abstract di {name} ({id}) non dà alcun link al codice o alla pagina del progetto [1].",
        "pt": "O resumo de {name} ({id}) não dá nenhum link para o código ou a página do projeto [1].",
        "ru": "В аннотации {name} ({id}) нет ссылки на код или страницу проекта [1].",
        "zh": "{name}（{id}）的摘要没有给出代码或项目主页的链接 [1]。",
        "ja": "{name}（{id}）の要旨には、コードやプロジェクトページへのリンクがありません [1]。",
        "ko": "{name}({id})의 초록에는 코드나 프로젝트 페이지 링크가 없습니다 [1].",
    },
    UNSUPPORTED: {
        "en": "I could not find this in the abstracts; the closest is {name} ({id}) [1].",
        "es": "No encontré esto en los resúmenes; el más cercano es {name} ({id}) [1].",
        "de": "Das habe ich in den Abstracts nicht gefunden; am nächsten kommt {name} ({id}) [1].",
        "fr": "Je n'ai pas trouvé cela dans les résumés ; le plus proche est {name} ({id}) [1].",
        "it": "Non ho trovato questo negli abstract; il più vicino è {name} ({id}) [1].",
        "pt": "Não encontrei isso nos resumos; o mais próximo é {name} ({id}) [1].",
        "ru": "Я не нашёл этого в аннотациях; ближе всего {name} ({id}) [1].",
        "zh": "我在摘要中没有找到这一点；最接近的是 {name}（{id}）[1]。",
        "ja": "要旨の中には見つかりませんでした。最も近いのは {name}（{id}）です [1]。",
        "ko": "초록에서 이 내용을 찾지 못했습니다. 가장 가까운 것은 {name}({id})입니다 [1].",
    },
    OFF_TOPIC: {
        "en": _ONLY["en"] + "none of them is close to this question.",
        "es": _ONLY["es"] + "ninguno se acerca a esta pregunta.",
        "de": _ONLY["de"] + "keiner davon passt zu dieser Frage.",
        "fr": _ONLY["fr"] + "aucun n'est proche de cette question.",
        "it": _ONLY["it"] + "nessuno è vicino a questa domanda.",
        "pt": _ONLY["pt"] + "nenhum está próximo desta pergunta.",
        "ru": _ONLY["ru"] + "ни одна из них не близка к этому вопросу.",
        "zh": _ONLY["zh"] + "而没有一篇与这个问题相近。",
        "ja": _ONLY["ja"] + "この質問に近いものはありません。",
        "ko": _ONLY["ko"] + "이 질문과 가까운 초록은 없습니다.",
    },
    OFF_TOPIC_NAMES: {
        "en": _ONLY["en"] + "none of them mentions {names}.",
        "es": _ONLY["es"] + "ninguno menciona {names}.",
        "de": _ONLY["de"] + "keiner davon erwähnt {names}.",
        "fr": _ONLY["fr"] + "aucun ne mentionne {names}.",
        "it": _ONLY["it"] + "nessuno menziona {names}.",
        "pt": _ONLY["pt"] + "nenhum menciona {names}.",
        "ru": _ONLY["ru"] + "ни в одной из них не упоминается {names}.",
        "zh": _ONLY["zh"] + "而其中没有一篇提到 {names}。",
        "ja": _ONLY["ja"] + "{names} に触れた要旨はありません。",
        "ko": _ONLY["ko"] + "{names}을(를) 언급한 초록은 없습니다.",
    },
}


def either(names: Sequence[str], lang: str = "en") -> str:
    """'A', 'A or B', 'A, B or C' in `lang`: at most three names."""
    shown = list(names[:3])
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + _OR.get(lang, " / ") + shown[-1]


def render(key: str, lang: str, fields: Sequence[tuple[str, str]] = ()) -> str | None:
    """The message `key` in `lang` with its fields filled in, or None when this module has
    no such message in that language (the translator then translates the English one).
    The field "names" holds names joined by a tab; they are joined for the language."""
    template = TEMPLATES.get(key, {}).get(lang)
    if template is None:
        return None
    values = dict(fields)
    if "names" in values:
        values["names"] = either(values["names"].split("\t"), lang)
    return template.format(**values)


def names_field(names: Sequence[str]) -> tuple[str, str]:
    return ("names", "\t".join(names))
