"""Per-knowledge-base adaptation, fitted when a deployment's index is first searched.

A knowledge base's alternate questions are training data about that knowledge base.  Two
things are fitted on them, with numpy, in about a second for a few thousand questions:

* **the KB's typical in-scope score.**  Held-out alternate questions (each asked of the index
  without itself) show what a right answer's logit looks like on this KB; the confidence is read
  relative to it (``Adaptation.offset``), so a threshold means the same on a KB of short, terse
  questions as on a KB of long, wordy ones.
* **a light classifier** (softmax regression of the query vector over the records, trained on the
  alternate questions).  Its logit is added to the ranker's with a weight chosen by k-fold
  cross-validation on held-out alternate questions, from a small grid that includes 0: a KB where
  it does not help (or that has too few alternate questions to tell) keeps the ranker alone.

With a near-topic share (``OPENQNA_NEAR_TOPIC``, or the project's own: ``kb/near_topic_setting.py``), a third: a
margin read off the same held-out questions asked without their own record (``near_margin``), which stand for
questions on the KB's subject that it holds no answer for.

Only QnA records with at least two questions give held-out questions; a KB with too few of them,
or with more than ``MAX_UNITS`` vectors, gets ``None`` (the shipped defaults).  The fit runs on the
first search of each index version (about 0.1–2 s for KBs up to a few thousand questions).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from openqna.index.memindex import MemIndex

HELD_OUT = 300  # alternate questions held out (at most)
MIN_HELD_OUT = 20  # fewer than this: not enough to estimate anything
FOLDS = 4
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)  # candidate weights of the classifier's logit
MIN_GAIN = 0.01  # held-out top-1 gain the classifier must show to be used
MAX_UNITS = 30000  # vectors (questions + answers); larger KBs keep the shipped defaults
MAX_CLASSIFIER = 250_000  # questions × records; above this the classifier is not fitted (it would take seconds)
TEMPERATURE = 20.0
L2 = 1e-3
STEPS = 100
PERCENTILE = 50  # of the held-out right answers' logits: the KB's typical score
# Questions on the KB's topic that none of its records answers: each held-out question asked again without its own
# record (``near_margin``, when ``OPENQNA_NEAR_TOPIC`` sets the share of them that may be answered at 0.5).  The
# margin is the least on a grid of ``NEAR_STEP`` up to ``NEAR_MAX`` logit units that keeps to that share.
NEAR_STEP = 0.25
NEAR_MAX = 6.0
NEAR_CANDIDATES = 32  # each held-out question's best records read by the last step (the rest add nothing to a share)


@dataclass
class Adaptation:
    offset: float  # median logit of a right top answer to a held-out alternate question
    weight: float  # of the classifier's logit (0: not used)
    W: np.ndarray | None  # (dim, n records) float32
    b: np.ndarray | None  # (n records,) float32
    has_q: np.ndarray | None  # (n records,) bool: the classifier's classes
    held_out: int  # alternate questions held out
    top1_without: float  # their top-1 accuracy without the classifier
    top1_with: float  # ... with it, at ``weight``
    right: np.ndarray  # logits of the right answers the held-out questions got first
    margin: float = 0.0  # added to ``offset`` (``near_margin``): the KB's questions without their record kept under 0.5
    near_rate: float = 0.0  # the share of those answered at 0.5 with ``offset`` alone (``near_margin``)
    near_rate_after: float = 0.0  # ... and with the margin

    def logit(self, query_vector: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """The classifier's logit term for record ``rows`` (None when it is not used)."""
        if not self.weight or self.W is None or self.b is None or self.has_q is None:
            return None  # the three are set together when the classifier is used (see ``fit``)
        scores: np.ndarray = class_scores(query_vector[None, :], self.W, self.b, self.has_q)[0, rows]
        return self.weight * scores


def class_scores(V: np.ndarray, W: np.ndarray, b: np.ndarray, has_q: np.ndarray) -> np.ndarray:
    """Log-probabilities of the classes over a uniform guess (0 for records that are no class)."""
    Z = np.zeros((len(V), len(b)), np.float32)
    z = V @ W[:, has_q] + b[has_q]
    z -= z.max(axis=1, keepdims=True)
    z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
    Z[:, has_q] = z + np.log(has_q.sum())
    return Z


def fit_classifier(X: np.ndarray, y: np.ndarray, n: int, *, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Softmax regression (logits T·x·W + b, L2 on W) with Adam; returns (T·W, b) as float32."""
    X = np.asarray(X, np.float32)
    W = np.zeros((X.shape[1], n), np.float32)  # starts as nearest-centroid: W[:, r] = mean question of r / T
    np.add.at(W.T, y, X)
    W /= np.maximum(np.bincount(y, minlength=n), 1).astype(np.float32) * TEMPERATURE
    b = np.zeros(n, np.float32)
    mW, vW, mb, vb = (np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b))
    onehot = np.zeros((len(X), n), np.float32)
    onehot[np.arange(len(X)), y] = 1.0
    lr, beta1, beta2 = 0.05, 0.9, 0.999
    for t in range(1, steps + 1):
        Z = TEMPERATURE * (X @ W) + b
        Z -= Z.max(axis=1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        P -= onehot
        P /= len(X)
        gW = TEMPERATURE * (X.T @ P) + 2 * L2 * W
        gb = P.sum(axis=0)
        for p, g, m, v in ((W, gW, mW, vW), (b, gb, mb, vb)):
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * g * g
            p -= lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + 1e-8)
    return TEMPERATURE * W, b


def canonical_units(index: MemIndex) -> np.ndarray:
    """Question units ordered by record id, then position in the record: the same whatever the row order."""
    q = index.q
    return np.lexsort((np.arange(q.n) - q.lo[q.rows], index.ids[q.rows]))


def held_out_units(index: MemIndex, limit: int = HELD_OUT, seed: int = 0) -> np.ndarray:
    """Question units of QnA records with at least two questions, a seeded sample of at most ``limit``."""
    q = index.q
    if not q.n:
        return np.zeros(0, np.int64)
    units = canonical_units(index)
    units = np.asarray(units[(q.counts[q.rows[units]] >= 2) & ~index.passage[q.rows[units]]], np.int64)
    if len(units) > limit:
        units = units[np.sort(np.random.default_rng(seed).choice(len(units), limit, replace=False))]
    return units


def unit_terms(index: MemIndex, units: np.ndarray) -> list[list[str]]:
    """The analysed unigrams of some question units, read back from the postings."""
    postings = index.q.postings
    names = [""] * len(postings.vocab)
    for term, tid in postings.vocab.items():
        names[tid] = term
    where = {int(u): i for i, u in enumerate(units)}
    out: list[list[str]] = [[] for _ in units]
    hit = np.flatnonzero(np.isin(postings.units, units))
    for tid, unit in zip(postings.tids[hit].tolist(), postings.units[hit].tolist()):
        if " " not in names[tid]:
            out[where[unit]].append(names[tid])
    return out


def held_out_features(index: MemIndex, V: np.ndarray, terms: list[list[str]], units: np.ndarray,
                      products: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The ranker's features (held-out question × every record) of questions ``units`` (vectors ``V``,
    unigrams ``terms``), each asked of the index without its own unit.  Answer BM25 (passages only) is 0.
    ``products``: ``V @ index.q.matrix.T`` when the caller has it already (it is overwritten)."""
    q, a, n = index.q, index.a, index.n
    m = len(units)
    own = q.rows[units]
    S = V @ q.matrix.T if products is None else products
    S[np.arange(m), units] = -1.0
    has = q.counts > 0
    best = np.full((m, n), -1.0, np.float32)
    total = np.zeros((m, n), np.float32)
    if q.n:
        best[:, q.seg_rows] = np.maximum.reduceat(S, q.starts, axis=1)
        S[np.arange(m), units] = 0.0
        total[:, q.seg_rows] = np.add.reduceat(S, q.starts, axis=1)
    counts = np.broadcast_to(q.counts.astype(np.float32), (m, n)).copy()
    counts[np.arange(m), own] -= 1
    norms = np.broadcast_to(q.sum_norms, (m, n)).copy()
    norms[np.arange(m), own] = np.linalg.norm(  # the centroid without the unit itself (``V`` may be mapped)
        np.add.reduceat(q.matrix, q.starts)[np.searchsorted(q.seg_rows, own)] - q.matrix[units], axis=1)
    live = has[None, :] & (counts > 0)
    qmean = np.where(live, total / np.maximum(counts, 1), 0.0)
    qcent = np.where(live, total / np.maximum(norms, 1e-9), 0.0)
    asim = np.zeros((m, n), np.float32)
    acov = np.zeros((m, n), np.float32)
    bm25 = np.zeros((m, n), np.float32)
    qcov = np.zeros((m, n), np.float32)
    if a.n:
        asim[:, a.rows] = V @ a.matrix.T
    for i, words in enumerate(terms):
        cov = q.coverage_units({t: q.idf(t) for t in set(words)})
        cov[units[i]] = 0.0
        qcov[i] = q.per_record_max(cov, 0.0)
        if a.n:
            acov[i, a.rows] = a.coverage_units({t: a.idf(t) for t in set(words)})
    passages = index.passage[None, :]
    asim = np.maximum(asim, 0.0)
    return {"qsim": np.where(passages, asim, np.maximum(best, 0.0)), "asim": asim,
            "qcov": np.where(passages, acov, qcov), "acov": acov,
            "qmean": np.where(passages, asim, np.maximum(qmean, 0.0)),
            "qcent": np.where(passages, asim, np.maximum(qcent, 0.0)), "bm25": bm25}


def select(base: np.ndarray, extra: np.ndarray | None, gold: np.ndarray) -> tuple[float, float, float]:
    """(weight, top-1 without, top-1 with) from held-out logits ``base`` and classifier logits ``extra``."""
    without = float(np.mean(base.argmax(axis=1) == gold))
    if extra is None:
        return 0.0, without, without
    best = (0.0, without)
    for w in WEIGHTS[1:]:
        acc = float(np.mean((base + w * extra).argmax(axis=1) == gold))
        if acc > best[1] + 1e-9:
            best = (w, acc)
    if best[1] < without + MIN_GAIN:
        return 0.0, without, without
    return best[0], without, best[1]


def _classifier(index: MemIndex, units: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The classifier trained on question ``units`` (their vectors as queries: ``queries[units]``), its classes in
    record-id order (so any row order of the same records trains the very same model), returned by row."""
    by_id = np.empty(index.n, np.int64)
    by_id[np.argsort(index.ids)] = np.arange(index.n)
    W, b = fit_classifier(queries[units], by_id[index.q.rows[units]], index.n)
    return W[:, by_id], b[by_id]


BaseLogits = Callable[[MemIndex, np.ndarray, list[list[str]], np.ndarray], np.ndarray]
# (logits read against the typical score, one value per candidate; which of them may answer; their rows) -> the
# logits of the confidence, as the ranker's last steps read them (``ranker.adapted_confidence``)
FinalLogits = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
QueryMap = Callable[[np.ndarray], np.ndarray]


class TrainedMap(Protocol):
    """A trained map of query vectors (``training.adapter.QueryAdapter``): ``digest`` names it in the index's cache;
    ``offset`` is added to the logits of the questions it maps (``ranker.TrainedOffset``)."""

    @property
    def digest(self) -> str: ...

    @property
    def offset(self) -> float: ...

    def apply(self, vectors: np.ndarray) -> np.ndarray: ...


def near_margin(logits: np.ndarray, gold: np.ndarray, final: FinalLogits, rate: float) -> tuple[float, float, float]:
    """(margin, share before, share after): the least margin (logit units subtracted from ``logits``, held-out
    questions × records, read against the typical score) at which at most ``rate`` of the held-out questions,
    each asked without its own record ``gold``, get an answer at 0.5 or more.

    A question about the KB's subject that none of its records answers ("how much does openqna cost?" of openqna's
    FAQ) reads like one of its own questions asked without its answer: on a KB whose records are alike, such
    questions stand as clear of the rest as right answers do, and the typical score alone answered half of them.
    The margin is bounded (``NEAR_MAX``): it costs right answers at 0.5 as it rises.
    """
    m, n = logits.shape
    if n < 2 or not m:
        return 0.0, 0.0, 0.0
    without = logits.astype(np.float64).copy()
    without[np.arange(m), gold] = -np.inf
    k = min(NEAR_CANDIDATES, n - 1)
    cols = np.argpartition(-without, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(without, cols, axis=1)

    def answered(margin: float) -> float:
        hits = 0
        for row, c in zip(top, cols):
            allowed = np.isfinite(row)
            if allowed.any() and float(final(row - margin, allowed, c)[allowed].max()) >= 0.0:
                hits += 1
        return hits / len(top)

    before = answered(0.0)
    steps = np.arange(1, int(round(NEAR_MAX / NEAR_STEP)) + 1) * NEAR_STEP
    if before <= rate or not len(steps):
        return 0.0, before, before
    lo, hi = 0, len(steps) - 1  # the rate falls as the margin rises: the least step that meets it, or the last
    while lo < hi:
        mid = (lo + hi) // 2
        if answered(float(steps[mid])) <= rate:
            hi = mid
        else:
            lo = mid + 1
    return float(steps[lo]), before, answered(float(steps[lo]))


def fit(index: MemIndex, base_logits: BaseLogits, *, classifier: bool = True,
        query_map: QueryMap | None = None, near: tuple[float, FinalLogits] | None = None) -> Adaptation | None:
    """Fit the adaptation of ``index``.

    ``base_logits(index, vectors, terms, units)`` returns the ranker's logits (held-out questions
    × records) of the questions ``units`` asked with their own unit left out.  ``query_map`` (a trained
    ``training.adapter.QueryAdapter``'s ``apply``) maps the held-out questions' vectors, and the classifier's
    training vectors, as the server maps a question's: the typical score is then read in the space questions are
    asked in.
    """
    if index.q.n + index.a.n > MAX_UNITS:
        return None
    units = held_out_units(index)
    if len(units) < MIN_HELD_OUT:
        return None
    q = index.q
    queries = q.matrix if query_map is None else query_map(q.matrix)
    gold = q.rows[units]
    terms = unit_terms(index, units)
    base = np.concatenate([base_logits(index, queries[units[i:i + 50]], terms[i:i + 50], units[i:i + 50])
                           for i in range(0, len(units), 50)])  # in slices: (held out × records) arrays
    extra = None
    W = b = None
    has_q = np.bincount(q.rows, minlength=index.n) > 0
    if classifier and q.n * index.n <= MAX_CLASSIFIER and has_q.sum() >= 2:
        extra = np.zeros_like(base)
        folds = np.arange(len(units)) % FOLDS
        order = canonical_units(index)
        for k in range(FOLDS):
            keep = np.ones(q.n, bool)
            keep[units[folds == k]] = False
            Wk, bk = _classifier(index, order[keep[order]], queries)
            extra[folds == k] = class_scores(queries[units[folds == k]], Wk, bk, has_q)
    weight, without, with_ = select(base, extra, gold)
    logits = base if not weight or extra is None else base + weight * extra
    right = logits.argmax(axis=1) == gold
    right = logits[np.arange(len(units)), gold][right]
    if not len(right):
        return None
    offset = float(np.percentile(right, PERCENTILE))
    margin, rate, rate_after = (0.0, 0.0, 0.0) if near is None else near_margin(logits - offset, gold, near[1],
                                                                                 near[0])
    if weight:
        W, b = _classifier(index, canonical_units(index), queries)
    return Adaptation(offset, weight, W, b, has_q if weight else None, len(units), without, with_, right,
                      margin, rate, rate_after)


_lock = threading.Lock()  # one fit at a time: a fit takes seconds on a large KB, and racing ones would repeat it


def of(index: MemIndex, base_logits: BaseLogits, *, classifier: bool = True,
       query_map: QueryMap | None = None, map_name: str = "",
       near: tuple[float, FinalLogits] | None = None, final_name: str = "") -> Adaptation | None:
    """The adaptation of ``index``, fitted on first use and kept as long as the index lives (one per
    ``map_name``: the query map's, such as its adapter's digest; and per share of ``near`` and ``final_name``, which
    names the last step its margin is read through: a project's fitted scale reads another margin than the shipped
    one, and ``openqna calibrate`` ranks with the logit itself)."""
    near_name = near and f".near={near[0]}{final_name and '@' + final_name}" or ""
    name = f"ranking.adapt.classifier={classifier}{map_name and '.' + map_name}{near_name}"
    with _lock:
        return index.derived(name, lambda: fit(index, base_logits, classifier=classifier, query_map=query_map,
                                               near=near))
