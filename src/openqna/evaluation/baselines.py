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

from openqna.filters.nodes import KindIn
from openqna.index.analyze import analyze
from openqna.index.memindex import MemIndex
from openqna.kb.service import AskRequest, Service

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


# The single signals every regime KB's ranker is held against (``make eval``'s guard): BM25 alone and dense alone,
# each reading a record's questions ("q"), its answer or passage text ("a"), or all of its units ("all": a record
# takes its best unit over both fields).  The guard's floor is the best of all six on each set, so the ranker is
# held against whichever single signal reads that kind of KB best, chosen after the fact.
SIGNALS = ("bm25-q", "bm25-a", "bm25-all", "dense-q", "dense-a", "dense-all")


def single_signal_tops(service: Service, project: str, question: str, *,
                       include_unstructured: bool = False) -> dict[str, int | None]:
    """The first record id of each of ``SIGNALS`` for one question (None: BM25 matched nothing).

    The records that may answer are those ``Service.ask`` lets answer (QnAs, and passages when
    ``include_unstructured``; no context-only record), and a question with Chinese, Japanese or Korean text
    asked of a KB with the multilingual space is read there, with that space's encoder, as the ranker reads it.
    """
    index: MemIndex = service.indexes.get(project)
    view = service.multilingual.index_for(index, question)
    embedder = service.embedder if view is None else service.multilingual.embedder
    index = index if view is None else view
    return signal_tops(index, question, embedder.embed([question])[0], include_unstructured=include_unstructured)


def signal_tops(index: MemIndex, question: str, vector: np.ndarray, *,
                include_unstructured: bool = False) -> dict[str, int | None]:
    """``single_signal_tops`` on ``index`` (a KB's index or its multilingual view) with the question's ``vector``."""
    kinds = ("qna", "passage") if include_unstructured else ("qna",)
    allowed = index.mask(KindIn(kinds)) & ~index.context_only
    if not allowed.any():
        return dict.fromkeys(SIGNALS)
    terms = analyze(question)
    scores = {}
    for name, per_field in (("bm25", lambda f: index.bm25(terms, f, allowed)),
                            ("dense", lambda f: index.dense(vector, f, allowed))):
        q, a = per_field("q"), per_field("a")  # dense: -1 where a record has no unit in the field
        scores.update({f"{name}-q": q, f"{name}-a": a, f"{name}-all": np.maximum(q, a)})
    out: dict[str, int | None] = {}
    for name, s in scores.items():
        order = _order(s, allowed)
        best = int(order[0])
        out[name] = None if name.startswith("bm25") and s[best] <= 0 else int(index.ids[best])
    return out
