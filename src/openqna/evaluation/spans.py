"""Precise answers: exact match and F1 of ``answerSpan`` on XQuAD (en, zh) and JSQuAD.

Each question is sent with its own paragraph through ``Service.answer_from_text``, the code
behind Azure's ``:query-text``: the paragraph is cut into passages of up to 400 characters,
the best passage is chosen and ``answers.span.best_spans`` picks its span, the same span
function ``:query-knowledgebases`` applies to an answer when ``answerSpanRequest`` is on.
That span is the *short span* (``answers.short_span`` inside the best sentence); the
*best sentence* it narrows is reported as the baseline, with two references from the same
sentence splitter:

* ``first sentence``: the paragraph's first sentence, the trivial baseline;
* ``gold sentence``: the sentence that holds the gold answer, the ceiling of any method that
  answers with a whole sentence (it is not a method: it reads the gold offset).

``holds answer`` is the share of predictions containing a gold answer verbatim.

The short span's confidence is measured as a threshold would use it: a short span is *right* when its F1
reaches ``RIGHT_F1``; *right at 0.5* is the share of right spans with a confidence of at least 0.5, *wrong
below 0.5* the share of wrong ones under it, and *AUROC* the chance that a right span outranks a wrong one.

``short_span``'s hand-set rules were written while looking at the first ``LOOKED_AT`` questions
of each set, so the short span is also reported on the questions after those alone.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from openqna.answers.span import best_spans, sentence_spans
from openqna.evaluation import datasets
from openqna.evaluation.metrics import exact_match, f1, mean
from openqna.kb.service import Service

SPAN_METHODS = ("short span", "best sentence", "first sentence", "gold sentence")
LOOKED_AT = 200
UNSEEN = f"short span, questions after the first {LOOKED_AT}"
RIGHT_F1 = 0.5
CONFIDENCE_FIGURES = ("right at 0.5", "wrong below 0.5", "AUROC")


@dataclass
class SpanResult:
    name: str
    lang: str
    questions: int
    total_questions: int
    em: dict[str, float]
    f1: dict[str, float]
    holds_answer: dict[str, float]
    confidence: dict[str, float]  # CONFIDENCE_FIGURES of the short span


def _sentence_at(context: str, offset: int) -> str:
    spans = sentence_spans(context)
    for s, e in spans:
        if offset < e:
            return context[s:e]
    return context[spans[-1][0]:spans[-1][1]] if spans else ""


def auroc(right: list[float], wrong: list[float]) -> float:
    """The chance that a random right span's confidence exceeds a random wrong one's (ties count half)."""
    if not right or not wrong:
        return float("nan")
    w = np.sort(np.asarray(wrong))
    r = np.asarray(right)
    below = np.searchsorted(w, r, side="left")
    ties = np.searchsorted(w, r, side="right") - below
    return float((below + 0.5 * ties).sum() / (len(r) * len(w)))


def confidence_figures(scored: list[tuple[float, float]]) -> dict[str, float]:
    """CONFIDENCE_FIGURES of (confidence, F1) pairs."""
    right = [c for c, f in scored if f >= RIGHT_F1]
    wrong = [c for c, f in scored if f < RIGHT_F1]
    return {"right at 0.5": mean([float(c >= 0.5) for c in right]),
            "wrong below 0.5": mean([float(c < 0.5) for c in wrong]), "AUROC": auroc(right, wrong)}


def predictions(service: Service, q: datasets.SpanQuestion) -> tuple[dict[str, str], float]:
    """Each method's span, and the short span's confidence (0 when there is none)."""
    answers = service.answer_from_text(q.question, [("1", q.context)])
    spans = sentence_spans(q.context)
    span = answers[0].span if answers else None
    short = span.text if span is not None else ""
    sentence = ""
    if answers:
        reader = service.reader(q.question)  # what the server reads spans with: the multilingual encoder for CJK
        vector = reader.embed([q.question])[0]
        whole = best_spans(q.question, vector, [answers[0].text], reader.embed, short=False)[0]
        sentence = whole.text if whole is not None else ""
    return {
        "short span": short,
        "best sentence": sentence,
        "first sentence": q.context[spans[0][0]:spans[0][1]] if spans else "",
        "gold sentence": _sentence_at(q.context, q.answer_start),
    }, (span.confidence if span is not None else 0.0)


def sample_by_paragraph(questions: list[datasets.SpanQuestion], limit: int | None,
                        rng: random.Random) -> list[datasets.SpanQuestion]:
    """All questions of seeded-random paragraphs until ``limit`` questions, in file order.

    Whole paragraphs, because a paragraph's passages and sentences are embedded once for
    all of its questions: a sample of questions would cost nearly as much as the full set.
    """
    if limit is None or limit >= len(questions):
        return questions
    contexts = list(dict.fromkeys(q.context for q in questions))
    rng.shuffle(contexts)
    count: dict[str, int] = {}
    for q in questions:
        count[q.context] = count.get(q.context, 0) + 1
    keep: set[str] = set()
    total = 0
    for context in contexts:
        if total >= limit:
            break
        keep.add(context)
        total += count[context]
    return [q for q in questions if q.context in keep]


def evaluate(service: Service, data_dir: Path, name: str, *, seed: int, limit: int | None = None) -> SpanResult:
    relative, lang = datasets.SPAN_SETS[name]
    questions = datasets.squad(data_dir, relative)
    chosen = sample_by_paragraph(questions, limit, random.Random(f"{seed}:{name}"))
    em: dict[str, list[float]] = {m: [] for m in SPAN_METHODS}
    f: dict[str, list[float]] = {m: [] for m in SPAN_METHODS}
    holds: dict[str, list[float]] = {m: [] for m in SPAN_METHODS}
    scored: list[tuple[float, float]] = []
    for k, q in enumerate(chosen):
        texts, confidence = predictions(service, q)
        scored.append((confidence, f1(texts["short span"], q.answers, lang)))
        for method, text in texts.items():
            for name in (method, UNSEEN) if method == "short span" and k >= LOOKED_AT else (method,):
                em.setdefault(name, []).append(exact_match(text, q.answers, lang))
                f.setdefault(name, []).append(f1(text, q.answers, lang))
                holds.setdefault(name, []).append(float(any(a in text for a in q.answers)))
    return SpanResult(name, lang, len(chosen), len(questions), {m: mean(v) for m, v in em.items()},
                      {m: mean(v) for m, v in f.items()}, {m: mean(v) for m, v in holds.items()},
                      confidence_figures(scored))
