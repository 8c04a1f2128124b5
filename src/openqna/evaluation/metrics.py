"""Metric functions, each the standard definition so figures compare with published ones.

* ``reciprocal_rank`` / MRR@k: 1/rank of the first relevant item within the top k, else 0.
* ``ndcg_at_k``: binary-relevance nDCG as BEIR computes it (gain 1, discount log2(rank+1),
  ideal = all relevant items first).
* ``exact_match`` / ``f1``: SQuAD v1.1 for English (lower-case, ASCII punctuation and the
  articles a/an/the removed, whitespace tokens); for Chinese and Japanese the MLQA "mixed
  segmentation": every CJK character is a token and other runs are split on whitespace, after
  lower-casing and removing Unicode punctuation, so F1 is character-level there.  As in
  SQuAD 2.0's script, a prediction and a gold answer that both normalise to nothing match.
* ``calibration`` / ``reliability``: what a confidence threshold does to top answers (issue 22's
  precision and recall at the threshold, off-topic rejection) and the bins of a reliability diagram.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK_CHAR = re.compile(
    "[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]"
)
_ASCII_PUNCT = frozenset(string.punctuation)
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})


def reciprocal_rank(ranked: Sequence[object], relevant: object | set, k: int) -> float:
    """1/rank of the first relevant item among the first ``k`` of ``ranked`` (0 if none)."""
    wanted = relevant if isinstance(relevant, (set, frozenset)) else {relevant}
    for rank, item in enumerate(ranked[:k], start=1):
        if item in wanted:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[object], relevant: set, k: int = 10) -> float:
    """Binary-relevance nDCG@k; duplicates in ``ranked`` count once, at their first position."""
    if not relevant:
        return 0.0
    seen: set = set()
    dcg = 0.0
    for rank, item in enumerate(ranked[:k], start=1):
        if item in relevant and item not in seen:
            dcg += 1.0 / math.log2(rank + 1)
        seen.add(item)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return dcg / ideal


def answer_tokens(text: str, lang: str) -> list[str]:
    """Normalised tokens of an answer (see the module docstring for the two schemes)."""
    text = text.lower()
    if lang not in CJK_LANGUAGES:
        text = "".join(ch for ch in text if ch not in _ASCII_PUNCT)
        return _ARTICLES.sub(" ", text).split()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    tokens: list[str] = []
    for word in text.split():
        run = ""
        for ch in word:
            if _CJK_CHAR.match(ch):
                if run:
                    tokens.append(run)
                    run = ""
                tokens.append(ch)
            else:
                run += ch
        if run:
            tokens.append(run)
    return tokens


def exact_match(prediction: str, gold: str | Iterable[str], lang: str = "en") -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    golds = [gold] if isinstance(gold, str) else list(gold)
    pred = answer_tokens(prediction, lang)
    return float(any(pred == answer_tokens(g, lang) for g in golds))


def f1(prediction: str, gold: str | Iterable[str], lang: str = "en") -> float:
    """Token-overlap F1 against the best-matching gold answer."""
    golds = [gold] if isinstance(gold, str) else list(gold)
    pred = answer_tokens(prediction, lang)
    best = 0.0
    for g in golds:
        ref = answer_tokens(g, lang)
        if not pred or not ref:
            best = max(best, float(pred == ref))
            continue
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            precision, recall = common / len(pred), common / len(ref)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


@dataclass
class Calibration:
    """What a confidence threshold does to a set of top answers (see ``calibration``)."""

    precision: float | None
    recall: float | None
    offtopic_rejected: float | None
    answered: float


def calibration(confidence: Sequence[float], right: Sequence[bool], answerable: Sequence[bool],
                threshold: float) -> Calibration:
    """The two calibration figures of issue 22 at ``threshold``, and off-topic rejection.

    * precision: of top answers with confidence >= threshold, the share that are right (a question
      the KB cannot answer that is answered counts as wrong); None when nothing is answered;
    * recall: of right top answers, the share with confidence >= threshold; None when none is right;
    * off-topic rejected: of the questions the KB cannot answer, the share below the threshold;
    * answered: of all questions, the share at or above the threshold.
    """
    answered = [c >= threshold for c in confidence]
    picked = [r for r, a in zip(right, answered) if a]
    kept = [a for r, a in zip(right, answered) if r]
    off = [not a for a, ok in zip(answered, answerable) if not ok]
    return Calibration(precision=mean(picked) if picked else None, recall=mean(kept) if kept else None,
                       offtopic_rejected=mean(off) if off else None,
                       answered=mean(answered) if answered else 0.0)


RELIABILITY_BINS = 10


def reliability(confidence: Sequence[float], right: Sequence[bool], bins: int = RELIABILITY_BINS) -> list[dict]:
    """Top-1 confidence in ``bins`` equal bins of [0, 1] (1.0 in the last): per bin the number of
    questions, their mean confidence and the share whose top answer is right (None when empty)."""
    counts, conf_sum, right_sum = [0] * bins, [0.0] * bins, [0] * bins
    for c, r in zip(confidence, right):
        b = min(int(c * bins), bins - 1)
        counts[b] += 1
        conf_sum[b] += c
        right_sum[b] += bool(r)
    return [{"low": i / bins, "high": (i + 1) / bins, "questions": n,
             "confidence": conf_sum[i] / n if n else None, "right": right_sum[i] / n if n else None}
            for i, n in enumerate(counts)]
