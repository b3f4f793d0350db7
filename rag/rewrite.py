"""Search terms for a question whose own words match no abstract.

A user who never read the abstracts describes a topic in plain words ("bounding how much a
randomized algorithm can reveal about any single individual"), and the abstract names it in
the field's words ("differential privacy"): the question's embedding then sits under the
off-topic gate. Before such a question is declined, the generator writes the technical terms
a paper on its topic would use (query rewriting in the manner of HyDE: Gao et al., "Precise
Zero-Shot Dense Retrieval without Relevance Labels", 2022), and the router searches with
those. The rewrite is only a search key: the model still answers the user's own question.

The worked examples are topics no seed abstract and no eval question is about, so that they
teach the form of the reply and lend no search words to any question.
"""

from __future__ import annotations

import re

from rag.generate import Generator

SYSTEM = ("You rewrite a user's question about machine learning research as a search query. "
          "Reply with one short line of the technical terms a paper abstract on this topic "
          "would use. Do not answer the question.")
SHOTS = (("Which papers help computers read handwritten sheet music?",
          "optical music recognition, handwritten score transcription, symbol detection"),
         ("Any work on telling which ancient script an inscription is written in?",
          "script identification, historical document analysis, epigraphy, OCR"))
MAX_TOKENS = 40
MAX_CHARS = 200


def search_terms(generator: Generator, question: str) -> str:
    """The generator's search line for `question` ("" when it wrote none): its first line,
    without quotes or a "Search query:" lead, at most MAX_CHARS."""
    raw = generator.generate(generator.format_chat(SYSTEM, question, SHOTS), MAX_TOKENS)
    line = next((x for x in raw.strip().splitlines() if x.strip()), "")
    line = re.sub(r"^\s*(?:search\s+)?(?:query|terms)\s*:\s*", "", line, flags=re.IGNORECASE)
    return line.strip().strip("\"'\u201c\u201d`").strip()[:MAX_CHARS]
