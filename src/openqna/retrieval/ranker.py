"""From retrieval features to a calibrated confidence (DESIGN decision 4).

Every eligible record (or candidate, on a large index) gets features: best, mean and centroid
cosine of its questions, answer cosine, idf-weighted query coverage of its best question and of
its answer, and for passages the answer BM25 over the query's largest possible BM25.  A linear
logit of them (``Calibration``, fitted by scripts/fit_ranker.py on development data only) plus,
where it helps, the KB's own classifier (``adapt``), is read against the KB's typical in-scope
logit and rescaled into a confidence in 0..1 meant to read the same on every knowledge base.
An exact question match scores 1.0, as in Azure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from .. import settings
from . import adapt
from .analyze import analyze, cjk_share, exact_key
from .filters import Filter
from .memindex import K1, MemIndex


@dataclass(frozen=True)
class Calibration:
    """Weights over the features (a logit), then a Platt rescaling of it into a confidence.

    Default weights: scripts/fit_ranker.py, a softmax over each question's records fitted on
    development questions only (banking77 training utterances not in the KB, hwu64's validation
    split, chit-chat questions the evaluation indexes); ``scale`` and ``shift`` put confidence 0.5
    where a threshold keeps ~97% of right answers on those KBs.  ``typical`` is the logit of a right
    answer on a typical KB: a KB with enough alternate questions measures its own (``adapt``) and
    its logits are shifted by the difference, so a threshold reads the same on every KB; None turns
    KB adaptation off.  ``passages``: own weights for passage records (None: these, reading the text).
    """

    w_qsim: float = 7.765
    w_asim: float = 2.379
    w_qcov: float = 1.887
    w_acov: float = 1.889
    bias: float = 0.0
    w_qmean: float = -12.307
    w_qcent: float = 21.163
    w_bm25: float = 0.0
    context_boost: float = 1.0  # logit added to follow-ups of the previous answer
    scale: float = 0.681
    shift: float = 5.037
    typical: float | None = 21.874
    passages: Calibration | None = None
    lexical: Calibration | None = None  # keyword features only, for what the embedder cannot read

    def logit(self, f, question_only: bool = False):
        """The raw logit of features ``f`` (any object with the ``Features`` arrays, any shape)."""
        out = self.w_qsim * f.qsim + self.w_qcov * f.qcov + self.w_bm25 * f.bm25 + self.bias
        if self.w_qmean or self.w_qcent:
            out = out + self.w_qmean * f.qmean + self.w_qcent * f.qcent
        if not question_only:
            out = out + self.w_asim * f.asim + self.w_acov * f.acov
        return out


# Passages (SciFact train claims): text cosine, text coverage and text BM25.
PASSAGES = Calibration(w_qsim=0.0, w_asim=13.634, w_qcov=0.0, w_acov=5.211, w_qmean=0.0, w_qcent=0.0, w_bm25=6.932,
                       scale=0.566, shift=-8.649, typical=None)
# For the share of a question the embedder cannot read (``rank``'s ``reads_cjk``): the same fits
# with the keyword features alone (``scripts/fit_ranker.py --lexical``, the same development data).
LEXICAL = Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=10.74, w_acov=8.055, w_qmean=0.0, w_qcent=0.0, w_bm25=0.0,
                      scale=0.851, shift=-2.383, typical=None,
                      passages=Calibration(w_qsim=0.0, w_asim=0.0, w_qcov=0.0, w_acov=7.252, w_qmean=0.0, w_qcent=0.0,
                                           w_bm25=14.345, scale=0.62, shift=-6.908, typical=None))
CALIBRATION = Calibration(passages=PASSAGES, lexical=LEXICAL)
# The fits above read all-MiniLM-L6-v2's vectors.  Another model's cosines are spread differently (its KBs'
# typical right-answer logit is 16.3 against MiniLM's 21.9), so the accurate model, all-mpnet-base-v2, has the
# same fits of its own, made by ``OPENQNA_EMBEDDER=mpnet python scripts/fit_ranker.py`` on the same development
# data.  The lexical part reads keywords only and is shared.
MPNET_CALIBRATION = Calibration(
    w_qsim=8.292, w_asim=3.121, w_qcov=2.338, w_acov=1.932, w_qmean=-13.466, w_qcent=21.327, scale=0.798,
    shift=5.907, typical=16.279, lexical=LEXICAL,
    passages=Calibration(w_qsim=0.0, w_asim=13.891, w_qcov=0.0, w_acov=4.937, w_qmean=0.0, w_qcent=0.0,
                         w_bm25=7.079, scale=0.577, shift=-9.186, typical=None))
# OPENQNA_EMBEDDER=accurate (mpnet beside the universal sentence encoder, ``embedder.HybridEncoder``): its own
# fits, by ``OPENQNA_EMBEDDER=accurate python scripts/fit_ranker.py`` on the same development data.
ACCURATE_CALIBRATION = Calibration(
    w_qsim=7.964, w_asim=3.667, w_qcov=1.649, w_acov=1.53, w_qmean=-13.704, w_qcent=23.431, scale=0.778,
    shift=5.91, typical=18.337, lexical=LEXICAL,
    passages=Calibration(w_qsim=0.0, w_asim=17.586, w_qcov=0.0, w_acov=5.398, w_qmean=0.0, w_qcent=0.0,
                         w_bm25=5.545, scale=0.562, shift=-9.176, typical=None))
_FITTED = {"minilm-l6-v2/onnx-fp32": CALIBRATION, "mpnet-base-v2/onnx-fp32": MPNET_CALIBRATION,
           "mpnet-base-v2/onnx-fp32+use-multilingual-v3/numpy@0.4": ACCURATE_CALIBRATION}


def calibration_for(embedder: str) -> Calibration:
    """The shipped calibration for vectors of the embedder named ``embedder`` (MiniLM's for any model not fitted)."""
    return _FITTED.get(embedder, CALIBRATION)


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
    qmean: np.ndarray  # mean question cosine (a passage's: its text's)
    qcent: np.ndarray  # cosine with the centroid of the questions (a passage's: its text's)
    bm25: np.ndarray  # answer BM25 over the query's largest possible BM25 (0..1)


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
    q_units = None  # index.q.units_of(rows), when the candidate path needs it anyway
    # A passage's or row's "question" is only its title: its text is what answers, so the
    # question features read the text (SciFact training queries: nDCG@10 0.608 -> 0.708); in a KB
    # of passages only (a vector store) the question fields are not scored at all.
    all_passages = index.only_passages
    if index.exhaustive():
        rows = np.arange(index.n)
        qcov = None if all_passages else index.coverage(terms, "q", eligible)
        asim = np.maximum(index.dense(query_vector, "a", eligible), 0.0)
        acov = index.coverage(terms, "a", eligible)
    else:
        allowed = None if eligible.all() else eligible
        parts = [np.asarray(must_rows, dtype=np.int64)]
        coverage = {}
        for name, fld in (("q", index.q), ("a", index.a)):
            unit_allowed = None if allowed is None else fld.unit_mask(allowed)
            found = None
            if index.nearest_rows is not None:
                found = index.nearest_rows(name, query_vector, CANDIDATES, flt, eligible)
            if found is None:
                found = fld.rows[fld.nearest_units(query_vector, CANDIDATES, unit_allowed)]
            parts.append(found)
            mass, total, hit = fld.coverage_top({t: fld.idf(t) for t in set(terms) if " " not in t},
                                                CANDIDATES, unit_allowed)
            coverage[name] = (mass, total if total > 0 else 1.0)
            parts.append(fld.rows[hit])
        rows = np.unique(np.concatenate(parts))
        rows = rows[eligible[rows]]
        a_units = index.a.units_of(rows)
        asim = np.maximum(index.a.dense_rows(query_vector, rows, a_units), 0.0)
        units, starts, has = q_units = index.q.units_of(rows)
        mass, total = coverage["q"]  # divided as coverage_units divides: the same confidence as exhaustive
        qcov = index.q.max_per_row(mass[units] / total, starts, has, 0.0)
        units, starts, has = a_units
        mass, total = coverage["a"]
        acov = index.a.max_per_row(mass[units] / total, starts, has, 0.0)
    bm25 = np.zeros(len(rows), np.float32)
    passages = index.passage[rows]
    if passages.any() and index.a.n:
        bm25 = bm25_share(index, terms, rows)
    if all_passages:
        return Features(rows, asim, asim, acov, acov, asim, asim, bm25)
    qsim, qmean, qcent = (np.maximum(x, 0.0) for x in index.q.similarities(query_vector, rows, q_units))
    return Features(rows, np.where(passages, asim, qsim), asim, np.where(passages, acov, qcov), acov,
                    np.where(passages, asim, qmean), np.where(passages, asim, qcent), bm25)


def bm25_share(index: MemIndex, terms: list[str], rows: np.ndarray) -> np.ndarray:
    """Answer BM25 of ``rows`` over the query's largest possible BM25 (every term at idf·(k1+1))."""
    fld = index.a
    most = sum(fld.idf(t) * (K1 + 1.0) for t in terms if fld.postings.get(t) is not None)
    if most <= 0:
        return np.zeros(len(rows), np.float32)
    units, starts, has = fld.units_of(rows)
    return fld.max_per_row(fld.bm25_at(terms, units), starts, has, 0.0) / np.float32(most)


def kb_adaptation(index: MemIndex, calibration: Calibration = CALIBRATION) -> adapt.Adaptation | None:
    """The adaptation ``calibration`` uses on ``index`` (None: none fitted or turned off)."""
    return _adaptation(index, calibration)


def _adaptation(index: MemIndex, c: Calibration) -> adapt.Adaptation | None:
    """The KB's own adaptation (held-out alternate questions), when ``c`` and the settings allow it."""
    if c.typical is None or not settings.kb_adapt():
        return None
    return adapt.of(index, lambda *a: _held_out_logits(c, *a))


def _held_out_logits(c: Calibration, index: MemIndex, V, terms, units) -> np.ndarray:
    f = SimpleNamespace(**adapt.held_out_features(index, V, terms, units))
    return np.where(index.passage[None, :], -np.inf, c.logit(f))


def question_gain(index: MemIndex, query_vector: np.ndarray, rows: np.ndarray, vectors: np.ndarray,
                  calibration: Calibration = CALIBRATION) -> np.ndarray:
    """The logit ``rank`` would gain on records ``rows`` if ``vectors`` (one each) were one more question of each.

    The best, mean and centroid question cosines are recomputed with the extra question and read
    through the calibration's own weights, so the gain is in the units of ``rank``'s logit whatever
    the fitted weights are.  Passages gain nothing: their question features read their text.
    """
    q, c = index.q, calibration
    best, mean, centroid = q.similarities(query_vector, rows)
    units, starts, has = q.units_of(rows)
    sums = np.zeros((len(rows), q.dim), np.float32)
    if len(units):
        sums[has] = np.add.reduceat(q.matrix[units], starts)
    sims = vectors @ query_vector
    counts = q.counts[rows]
    grown = sums + vectors
    zero = np.zeros(len(rows), np.float32)
    before = SimpleNamespace(qsim=np.maximum(best, 0.0), qmean=np.maximum(mean, 0.0),
                             qcent=np.maximum(centroid, 0.0), qcov=zero, bm25=zero)
    after = SimpleNamespace(qsim=np.maximum(np.maximum(best, sims), 0.0),
                            qmean=np.maximum((np.maximum(mean, 0.0) * counts + sims) / (counts + 1), 0.0),
                            qcent=np.maximum(grown @ query_vector / np.maximum(np.linalg.norm(grown, axis=1), 1e-9),
                                             0.0),
                            qcov=zero, bm25=zero)
    gain = c.scale * (c.logit(after, question_only=True) - c.logit(before, question_only=True))
    return np.where(index.passage[rows], 0.0, gain)


def rescaled(c: Calibration, scale: float, shift: float) -> Calibration:
    """``c`` with the Platt rescaling ``scale``, ``shift`` (``openqna calibrate``'s fit), its lexical part alike.

    A new rescaling is an affine map of the old calibrated logit (a·z + b); the lexical logit a question's
    CJK share is ranked by gets the same map, so a fit of ``scale`` and ``shift`` predicts the served
    confidence of a Chinese question as it does an English one's.  Passages keep their own calibration.
    """
    a = scale / c.scale
    b = shift - a * c.shift
    lexical = c.lexical
    if lexical is not None:
        lexical = replace(lexical, scale=a * lexical.scale, shift=a * lexical.shift + b)
    return replace(c, scale=scale, shift=shift, lexical=lexical)


def _calibrated(c: Calibration, logit: np.ndarray, f: Features, passages: np.ndarray) -> np.ndarray:
    """``logit`` (records) with the passage rows' replaced by ``c.passages``' calibrated logit, if it has one."""
    if c.passages is None or not passages.any():
        return logit
    p = c.passages
    return np.where(passages, p.scale * p.logit(f) + p.shift, logit)


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
    logit_offsets: dict[int, float] | None = None,
    top: int = 3,
    threshold: float = 0.0,
    calibration: Calibration = CALIBRATION,
    flt: Filter | None = None,
    reads_cjk: bool = True,
) -> list[Ranked]:
    """The ``top`` eligible records with confidence ≥ ``threshold``, best first.

    ``eligible`` is the mask of records that may answer; ``flt``, when given, is the filter it
    came from (a store that searches vectors itself pushes it into its query).
    ``logit_offsets`` (record id → logit) carries evidence found outside the index, such as
    a follow-up's sentence match (``followup.sentence_offsets``).
    ``reads_cjk=False`` says the embedder cannot read Chinese, Japanese or Korean: the share of the
    question written in them (``cjk_share``) is then ranked by ``calibration.lexical``, the
    keyword features alone, and the rest by the full calibration (the two calibrated logits are
    mixed in that proportion).
    """
    if index.n == 0 or not eligible.any():
        return []
    c = calibration
    exact_rows = list(index.exact.get(exact_key(question), ()))
    exact_rows += [index.row_of[i] for i in exact_prompt_ids if i in index.row_of]
    boosted_rows = [index.row_of[i] for i in boosted_ids if i in index.row_of]
    offsets = {index.row_of[i]: v for i, v in (logit_offsets or {}).items() if i in index.row_of}
    f = features(index, analyze(question), query_vector, eligible, exact_rows + boosted_rows + list(offsets), flt)
    if not len(f.rows):
        return []
    logit = c.logit(f, question_only)
    adaptation = _adaptation(index, c)
    if adaptation is not None:  # read relative to this KB's typical right answer
        extra = adaptation.logit(query_vector, f.rows)
        if extra is not None:
            logit += extra
        logit -= adaptation.offset
    elif c.typical is not None:
        logit -= c.typical
    logit = c.scale * logit + c.shift
    passages = index.passage[f.rows]
    logit = _calibrated(c, logit, f, passages)
    unread = 0.0 if reads_cjk or c.lexical is None else cjk_share(question)
    if unread:
        lex = c.lexical
        lexical = _calibrated(lex, lex.scale * lex.logit(f, question_only) + lex.shift, f, passages)
        logit = (1.0 - unread) * logit + unread * lexical
    for row in boosted_rows:
        i = _position(f.rows, row)
        if i is not None:
            logit[i] += c.scale * c.context_boost
    for row, offset in offsets.items():
        i = _position(f.rows, row)
        if i is not None:
            logit[i] += offset
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
