"""The rankings every task compares the default ranker with, computed on the same index.

The index is the very ``MemIndex`` that ``Service.ask`` searches (``service.indexes``),
and the query vector comes from the same embedder, so a difference between a baseline and
the ranker is the ranking rule and nothing else:

* ``bm25``: the index's BM25 (best unit per record) of the analysed question;
* ``dense``: the best cosine between the question and one of a record's units;
* ``rrf``: reciprocal-rank fusion of the two (k = 60; a record BM25 does not match gets no
  BM25 term, as a retriever that did not return it);
* ``ranker``: ``Service.ask`` itself: features, calibrated confidence, exact matches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..retrieval.analyze import analyze
from ..retrieval.memindex import MemIndex
from ..service import AskRequest, Service

RRF_K = 60
METHODS = ("bm25", "dense", "rrf", "ranker")
METHOD_NAMES = {"bm25": "BM25 alone", "dense": "dense alone", "rrf": "RRF (k=60)", "ranker": "default ranker"}


@dataclass
class Ranking:
    """Record ids best first, per method, and the ranker's top-1 confidence (0 if none)."""

    ids: dict[str, list[int]]
    confidence: float


def _order(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    rows = np.flatnonzero(allowed)
    return rows[np.argsort(-scores[rows], kind="stable")]


def fused(bm25: np.ndarray, dense: np.ndarray, allowed: np.ndarray, k: int = RRF_K) -> np.ndarray:
    """RRF scores: sum of 1/(k + rank) over the rankings that retrieved the record."""
    scores = np.zeros(len(bm25), np.float64)
    by_dense = _order(dense, allowed)
    scores[by_dense] += 1.0 / (k + np.arange(1, len(by_dense) + 1))
    by_bm25 = _order(bm25, allowed & (bm25 > 0))
    scores[by_bm25] += 1.0 / (k + np.arange(1, len(by_bm25) + 1))
    return scores


def rank_all(service: Service, project: str, question: str, *, field: str, top: int,
             include_unstructured: bool = False, baselines: bool = True) -> Ranking:
    """The top ``top`` record ids of each method for one question (``baselines=False``: the ranker's only)."""
    answers = service.ask(project, "test", AskRequest(question=question, top=top,
                                                      include_unstructured=include_unstructured))
    ranked = [a.qna.id for a in answers if a.qna is not None]
    confidence = answers[0].confidence if ranked else 0.0
    if not baselines:
        return Ranking({"ranker": ranked}, confidence)
    index: MemIndex = service.indexes.get(project)
    allowed = np.ones(index.n, dtype=bool)
    vector = service.embedder.embed([question])[0]
    bm25 = index.bm25(analyze(question), field, allowed)
    dense = index.dense(vector, field, allowed)
    ids = {
        "bm25": _order(bm25, allowed)[:top],
        "dense": _order(dense, allowed)[:top],
        "rrf": _order(fused(bm25, dense, allowed), allowed)[:top],
    }
    out = {name: [int(index.ids[r]) for r in rows] for name, rows in ids.items()}
    out["ranker"] = ranked
    return Ranking(out, confidence)
