"""Precise answers: the short answer inside the sentence that best answers the question.

Answers are split into sentences (Latin and CJK terminators, line breaks, markdown
bullets); the sentence closest to the question in embedding space, nudged by word
overlap, is chosen, and ``short_span`` narrows it to the name, number, date or phrase
the question asks for.  The span's confidence is the sentence's score times how sure ``short_span.narrow``
is of its choice (less for a phrase picked by nearness alone over a close runner-up).  A question that asks
for a kind of answer (how long, when, who) takes the best sentence that holds one when it
scores within ``KIND_MARGIN`` of the best: "how long it takes to charge surface?" is closest to
"It can take longer if you're using ...", 0.018 above "It takes two to four hours ..." (the
margin was set by hand on that request, Azure's documented sample; eval/report.md measures it
on XQuAD).  A "which X" question takes one that names an X within ``THING_MARGIN`` (0.08: 0.05 to 0.15
measured alike on XQuAD).  Offsets are in Unicode code points of the answer text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from openqna.answers.short_span import holds_kind, narrow, question_kind
from openqna.index.analyze import analyze

KIND_MARGIN = 0.05
THING_MARGIN = 0.08  # "what header carries the key": the sentence naming the header is 0.066 below the best
MARKUP = "*_`#>-"  # markdown around a sentence, never part of a span
PAIRED = "`*_"  # of those, the delimiters a sentence keeps when it closes them inside
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_HEADING_LINE = re.compile(r"#{1,6}\s+\S.*|\*\*[^*\n]+\*\*|__[^_\n]+__")


@dataclass
class Span:
    text: str
    confidence: float
    offset: int
    length: int


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-empty sentence, stripped of surrounding space and markup."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        s0, e0 = s, e
        while s < e and (text[s].isspace() or text[s] in MARKUP):
            s += 1
        while e > s and (text[e - 1].isspace() or text[e - 1] in MARKUP):
            e -= 1
        if e > s:
            out.append(_keep_pairs(text, s0, s, e, e0))
    return out


def _heading(text: str, s: int, e: int) -> bool:
    """Whether the sentence ``text[s:e]`` is a whole line of heading markup ("**Power and charging**", "## Setup"):
    a document's section QnA opens its answer with its heading, which restates the question better than any
    sentence answers it ("how many hours does the battery last?" got the span "Battery life")."""
    start = text.rfind("\n", 0, s) + 1
    end = text.find("\n", e)
    return bool(_HEADING_LINE.fullmatch(text[start:len(text) if end < 0 else end].strip()))


def _keep_pairs(text: str, s0: int, s: int, e: int, e0: int) -> tuple[int, int]:
    """(s, e) given back the delimiter stripped from an edge that the sentence closes (or opened) inside.

    "`openqna deploy PROJECT production` copies ..." keeps its first backtick: without it the sentence, and any
    span cut from it, would carry an unbalanced one.
    """
    for c in PAIRED:
        run = len(text[s0:s]) - len(text[s0:s].rstrip(c))
        if run and c * run in text[s:e]:
            s -= run
        run = len(text[e:e0]) - len(text[e:e0].lstrip(c))
        if run and c * run in text[s:e]:
            e += run
    return s, e


def best_spans(
    question: str,
    query_vector: np.ndarray,
    texts: list[str],
    embed: Callable[[list[str]], np.ndarray],
    *,
    short: bool = True,
) -> list[Span | None]:
    """The answer span of each text (None for an empty text), in one embedding batch.

    ``short=False`` keeps the whole best sentence (the evaluation's baseline).
    """
    pieces: list[tuple[int, int, int]] = []
    for i, text in enumerate(texts):
        sentences = sentence_spans(text)
        said = [(s, e) for s, e in sentences if not _heading(text, s, e)]
        pieces.extend((i, s, e) for s, e in said or sentences)
    if not pieces:
        return [None] * len(texts)
    vectors = embed([texts[i][s:e] for i, s, e in pieces])
    sims = vectors @ query_vector
    q_terms = set(analyze(question, bigrams=False))
    best: list[Span | None] = [None] * len(texts)
    scored: list[list[Span]] = [[] for _ in texts]
    for (i, s, e), sim in zip(pieces, sims):
        overlap = len(q_terms & set(analyze(texts[i][s:e], bigrams=False))) / max(len(q_terms), 1)
        score = float(np.clip(0.8 * sim + 0.2 * overlap, 0.0, 1.0))
        scored[i].append(Span(texts[i][s:e], round(score, 4), s, e - s))
    margin = THING_MARGIN if question_kind(question) == "thing" else KIND_MARGIN
    for i, spans in enumerate(scored):
        if not spans:
            continue
        top = max(spans, key=lambda span: span.confidence)
        near = [span for span in sorted(spans, key=lambda span: -span.confidence)
                if span.confidence >= top.confidence - margin]
        best[i] = next((span for span in near if holds_kind(question, texts[i], span.offset,
                                                               span.offset + span.length)), top)
    if short:
        for i, span in enumerate(best):
            if span is not None:
                s, e, sure = narrow(question, texts[i], span.offset, span.offset + span.length)
                best[i] = Span(texts[i][s:e], round(span.confidence * sure, 4), s, e - s)
    return best
