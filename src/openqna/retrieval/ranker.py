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
from .filters import Filter
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


# In candidate mode (large indexes), how many of each kind of candidate a query scores: the
# nearest question vectors, the nearest answer/passage vectors, and the best keyword matches of each field.
CANDIDATES = 100


@dataclass
class Features:
    """What the confidence is computed from, for the record rows ``rows`` (sorted), one value per row."""

    rows: np.ndarray
    qsim: np.ndarray  # best question cosine (a passage's: its text's)
    asim: np.ndarray  # answer cosine
    qcov: np.ndarray  # idf-weighted share of the query's words in the best question
    acov: np.ndarray  # ... in the answer


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def features(index: MemIndex, terms: list[str], query_vector: np.ndarray, eligible: np.ndarray,
             must_rows: list[int], flt: Filter | None = None) -> Features:
    """Features of every eligible record (small index), or of the candidates and ``must_rows`` (large one).

    Candidates are the ``CANDIDATES`` nearest units of each field (exact or from the IVF
    index or the store's own vector index, with the filter pushed in; ``flt`` is the filter
    ``eligible`` was computed from, for the store) and the ``CANDIDATES`` units of each field that cover
    most of the query's idf mass; every candidate is then scored exactly, so a candidate gets
    the confidence it would get from the exhaustive path.
    """
    if index.exhaustive():
        rows = np.arange(index.n)
        qsim = np.maximum(index.dense(query_vector, "q", eligible), 0.0)
        qcov = index.coverage(terms, "q", eligible)
        asim = np.maximum(index.dense(query_vector, "a", eligible), 0.0)
        acov = index.coverage(terms, "a", eligible)
    else:
        allowed = None if eligible.all() else eligible
        parts = [np.asarray(must_rows, dtype=np.int64)]
        coverage = {}
        for name, fld in (("q", index.q), ("a", index.a)):
            unit_allowed = None if allowed is None else allowed[fld.rows]
            found = None
            if index.nearest_rows is not None:
                found = index.nearest_rows(name, query_vector, CANDIDATES, flt, eligible)
            if found is None:
                found = fld.rows[fld.nearest_units(query_vector, CANDIDATES, unit_allowed)]
            parts.append(found)
            cov = fld.coverage_units({t: fld.idf(t) for t in set(terms) if " " not in t})
            coverage[name] = cov
            hit = np.flatnonzero(cov)
            if unit_allowed is not None:
                hit = hit[unit_allowed[hit]]
            if len(hit) > CANDIDATES:
                hit = hit[np.argpartition(-cov[hit], CANDIDATES - 1)[:CANDIDATES]]
            parts.append(fld.rows[hit])
        rows = np.unique(np.concatenate(parts))
        rows = rows[eligible[rows]]
        qsim = np.maximum(index.q.dense_rows(query_vector, rows), 0.0)
        asim = np.maximum(index.a.dense_rows(query_vector, rows), 0.0)
        units, starts, has = index.q.units_of(rows)
        qcov = index.q.max_per_row(coverage["q"][units], starts, has, 0.0)
        units, starts, has = index.a.units_of(rows)
        acov = index.a.max_per_row(coverage["a"][units], starts, has, 0.0)
    # A passage's or row's "question" is only its title: its text is what answers, so the
    # question features read the text (SciFact training queries: nDCG@10 0.608 -> 0.708).
    passages = index.passage[rows]
    return Features(rows, np.where(passages, asim, qsim), asim, np.where(passages, acov, qcov), acov)


def _position(rows: np.ndarray, row: int | None) -> int | None:
    if row is None:
        return None
    i = int(np.searchsorted(rows, row))
    return i if i < len(rows) and rows[i] == row else None


def rank(
    index: MemIndex,
    question: str,
    query_vector: np.ndarray,
    eligible: np.ndarray,
    *,
    question_only: bool = False,
    boosted_ids: set[int] | frozenset[int] = frozenset(),
    exact_prompt_ids: set[int] | frozenset[int] = frozenset(),
    top: int = 3,
    threshold: float = 0.0,
    calibration: Calibration = CALIBRATION,
    flt: Filter | None = None,
) -> list[Ranked]:
    """The ``top`` eligible records with confidence ≥ ``threshold``, best first.

    ``eligible`` is the mask of records that may answer; ``flt``, when given, is the filter it
    came from (a store that searches vectors itself pushes it into its query).
    """
    if index.n == 0 or not eligible.any():
        return []
    c = calibration
    exact_rows = list(index.exact.get(exact_key(question), ()))
    exact_rows += [index.row_of[i] for i in exact_prompt_ids if i in index.row_of]
    boosted_rows = [index.row_of[i] for i in boosted_ids if i in index.row_of]
    f = features(index, analyze(question), query_vector, eligible, exact_rows + boosted_rows, flt)
    if not len(f.rows):
        return []
    logit = c.w_qsim * f.qsim + c.w_qcov * f.qcov
    if not question_only:
        logit += c.w_asim * f.asim + c.w_acov * f.acov
    logit = c.scale * (logit + c.bias) + c.shift
    for row in boosted_rows:
        i = _position(f.rows, row)
        if i is not None:
            logit[i] += c.scale * c.context_boost
    confidence = sigmoid(logit)
    for row in exact_rows:
        i = _position(f.rows, row)
        if i is not None:
            confidence[i] = 1.0
    allowed = eligible[f.rows]
    confidence[~allowed] = -1.0
    k = min(top, len(f.rows))
    best = np.argpartition(-confidence, k - 1)[:k]
    best = best[np.argsort(-confidence[best], kind="stable")]
    return [Ranked(int(index.ids[f.rows[i]]), float(confidence[i])) for i in best
            if confidence[i] >= threshold and confidence[i] > 0.0 and allowed[i]]
