"""Question vectors times a knowledge base's unit vectors: concurrent questions share one matrix product.

The exhaustive path (knowledge bases up to ``OPENQNA_EXACT_SEARCH_MAX`` vectors) scores a question
against every question and answer vector.  One question at a time that is a matrix-vector product,
which reads both matrices from memory for every question (two 15 MB matrices at 10,000 QnAs, about
1 ms); questions that arrive together are multiplied in one matrix-matrix product, which reads them
once (``bench/batching.py``: 0.2 ms a question in a batch of 16).  A question alone, or the only
one on its index, is multiplied exactly as before, so its scores are bit for bit the same; in a
batch they may differ in the last float bit (a cosine by ~1e-7).
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from .. import settings
from ..models.batching import MicroBatcher

Item = tuple[np.ndarray, np.ndarray, np.ndarray]  # question matrix, answer matrix, question vector
Products = tuple[np.ndarray, np.ndarray]  # cosines with every question unit and every answer unit

_batcher: MicroBatcher[Item, Products] | None = None
_lock = threading.Lock()


@functools.lru_cache(maxsize=8)
def no_units(dim: int) -> np.ndarray:
    """An empty matrix of ``dim`` columns, one object per ``dim`` (so the products that use it batch together)."""
    return np.zeros((0, dim), np.float32)


def multiply(items: list[Item]) -> list[Products]:
    """Each item's products, one matrix product per pair of matrices for the items that share it."""
    out: list[Products | None] = [None] * len(items)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (questions, answers, _) in enumerate(items):
        groups.setdefault((id(questions), id(answers)), []).append(i)
    for members in groups.values():
        questions, answers, _ = items[members[0]]
        if len(members) == 1:
            vector = items[members[0]][2]
            out[members[0]] = (questions @ vector, answers @ vector)
            continue
        vectors = np.stack([items[i][2] for i in members])
        q_sims, a_sims = vectors @ questions.T, vectors @ answers.T
        for j, i in enumerate(members):
            out[i] = (q_sims[j], a_sims[j])
    return [p for p in out if p is not None]


def set_batcher(batcher: MicroBatcher[Item, Products] | None) -> None:
    """Use ``batcher`` from now on (None: a new one from the settings on the next call); for benchmarks."""
    global _batcher
    with _lock:
        _batcher = batcher


def unit_products(questions: np.ndarray, answers: np.ndarray, vector: np.ndarray) -> Products:
    """``(questions @ vector, answers @ vector)``, computed with the products of questions asked at the same time."""
    global _batcher
    if _batcher is None:
        with _lock:
            if _batcher is None:
                _batcher = MicroBatcher(multiply, max_batch=settings.query_batch(), name="openqna-products")
    if _batcher.max_batch == 1:
        return questions @ vector, answers @ vector
    return _batcher.submit((questions, answers, vector))
