"""Questions the abstracts cannot answer, caught before the model runs.

Abstracts rarely state training details (learning rate, GPUs, batch size, license...). When
a question asks for such a detail about a paper and no word of that detail occurs in the
paper's abstract, the answer is "not stated" without spending ~2-20 s of CPU on a model
that, at 0.5B parameters, tends to copy a passage instead of declining.
"""

from __future__ import annotations

import re

from rag.types import Paper

# detail asked for -> word stems whose presence in an abstract could state it
DETAILS: dict[str, tuple[str, ...]] = {
    r"learning[- ]rates?": ("learning rate", "learning-rate", "step size"),
    r"batch[- ]sizes?": ("batch size", "batch-size"),
    r"gpus?|tpus?|hardware|accelerators?": ("gpu", "tpu", "a100", "h100", "v100", "hardware"),
    r"epochs?": ("epoch",),
    r"optimi[sz]ers?": ("optimizer", "optimiser", "adam", "sgd"),
    r"hyper-?parameters?": ("hyperparameter", "hyper-parameter"),
    r"licen[cs]e[sd]?": ("license", "licence", "mit", "apache", "cc-by"),
    r"authors?|affiliations?|universit(?:y|ies)|institutions?": ("university", "institute"),
    r"fund(?:ed|ing)|grants?": ("fund", "grant"),
    r"training time|how long .* train|wall[- ]clock|gpu[- ]hours?": ("hour", "day", "minute"),
    r"random seeds?|seeds?": ("seed",),
    r"milliseconds?|\bms\b|latency": ("millisecond", " ms", "latency"),
    r"backbones?": ("backbone", "resnet", "vit", "swin"),
    r"parameters? count|number of parameters|how many parameters": ("parameter",),
}


def missing_detail(question: str, paper: Paper) -> str | None:
    """The detail `question` asks for that `paper`'s abstract never mentions, if any."""
    q = question.lower()
    text = paper.clean.lower()
    for pattern, evidence in DETAILS.items():
        m = re.search(r"\b(?:" + pattern + r")\b", q)
        if not m:
            continue
        said = any(re.search(r"(?<!\w)" + re.escape(e.strip()), text) for e in evidence)
        if not said and not re.search(r"\b" + re.escape(m.group(0)) + r"\b", text):
            return m.group(0)
    return None
