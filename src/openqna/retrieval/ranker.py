"""From retrieval features to a calibrated confidence (DESIGN decision 4).

Every eligible record gets features (best question cosine, answer cosine,
idf-weighted query coverage of its best question and of its answer); a logistic
model turns them into a confidence in 0..1 meant to read the same on every
knowledge base.  An exact question match scores 1.0, as in Azure.  The weights
live in ``Calibration`` so ``openqna calibrate`` can re-fit them on development
data; the shipped values were fitted on banking77/hwu64/chit-chat training data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .analyze import analyze, exact_key
from .memindex import MemIndex


@dataclass(frozen=True)
class Calibration:
    """Logistic weights over the features, then a Platt rescaling of the whole logit.

    The weights are fitted by scripts/fit_calibration.py on training splits (each right answer
    against its hardest wrong ones).  That pairwise fit ranks well but reads low, so ``scale`` and
    ``shift`` re-fit the logit on whether the top answer is right — one point per question,
    in-scope and off-topic balanced — on banking77 and hwu64 training and validation
    utterances (never their test splits).  Rescaling keeps the ranking; it moves the confidence.
    """

    w_qsim: float = 8.492
    w_asim: float = 1.0
    w_qcov: float = 1.09
    w_acov: float = 0.5
    bias: float = -7.665
    context_boost: float = 1.0  # logit added to follow-ups of the previous answer
    scale: float = 1.075
    shift: float = 1.884


CALIBRATION = Calibration()


@dataclass
class Ranked:
    record_id: int
    confidence: float


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def rank(
    index: MemIndex,
    question: str,
    query_vector: np.ndarray,
    eligible: np.ndarray,
    *,
    question_only: bool = False,
    boosted_ids: set[int] | frozenset[int] = frozenset(),
    exact_prompt_ids: set[int] | frozenset[int] = frozenset(),
    logit_offsets: dict[int, float] | None = None,
    top: int = 3,
    threshold: float = 0.0,
    calibration: Calibration = CALIBRATION,
) -> list[Ranked]:
    """The ``top`` eligible records with confidence ≥ ``threshold``, best first.

    ``logit_offsets`` (record id → logit) carries evidence found outside the index, such as
    a follow-up's sentence match (``followup.sentence_offsets``).
    """
    if index.n == 0 or not eligible.any():
        return []
    c = calibration
    terms = analyze(question)
    qsim = np.maximum(index.dense(query_vector, "q", eligible), 0.0)
    qcov = index.coverage(terms, "q", eligible)
    asim = np.maximum(index.dense(query_vector, "a", eligible), 0.0)
    acov = index.coverage(terms, "a", eligible)
    # A passage's or row's "question" is only its title: its text is what answers, so the
    # question features read the text (SciFact training queries: nDCG@10 0.608 -> 0.708).
    passages = index.passage
    qsim = np.where(passages, asim, qsim)
    qcov = np.where(passages, acov, qcov)
    logit = c.w_qsim * qsim + c.w_qcov * qcov
    if not question_only:
        logit += c.w_asim * asim + c.w_acov * acov
    logit = c.scale * (logit + c.bias) + c.shift
    for rid in boosted_ids:
        row = index.row_of.get(rid)
        if row is not None:
            logit[row] += c.scale * c.context_boost
    for rid, offset in (logit_offsets or {}).items():
        row = index.row_of.get(rid)
        if row is not None:
            logit[row] += offset
    confidence = sigmoid(logit)
    exact_rows = list(index.exact.get(exact_key(question), ()))
    exact_rows += [index.row_of[i] for i in exact_prompt_ids if i in index.row_of]
    for row in exact_rows:
        confidence[row] = 1.0
    confidence[~eligible] = -1.0
    k = min(top, index.n)
    best = np.argpartition(-confidence, k - 1)[:k]
    best = best[np.argsort(-confidence[best], kind="stable")]
    return [Ranked(int(index.ids[r]), float(confidence[r])) for r in best
            if confidence[r] >= threshold and confidence[r] > 0.0 and eligible[r]]
