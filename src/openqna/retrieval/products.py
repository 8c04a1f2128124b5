"""Question vectors times a knowledge base's unit vectors: questions ranked at the same time share one product.

The exhaustive path (knowledge bases up to ``OPENQNA_EXACT_SEARCH_MAX`` vectors) scores a question
against every question and answer vector.  One question at a time that is a matrix-vector product,
which reads both matrices from memory for every question: at 10,000 QnAs two 15 MB matrices, 5 of
the 8.5 ms of CPU an in-process ``ask`` spent ranking on this AMD EPYC, the memory bus, not the
arithmetic, being the limit.  Questions that arrive together (the embedder's batches hand them over
at the same moment) are multiplied in one matrix-matrix product, which reads the matrices once.

A question alone, or the only one on its index, is multiplied exactly as before, so its scores are bit
for bit the same; in a batch they may differ in the last float bit (a cosine by ~1e-7), as the
embedder's batches do.  ``OPENQNA_EMBED_BATCH=1`` turns this off with the embedder's batching.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from .. import settings
from ..models.batching import MicroBatcher

Item = tuple[np.ndarray, np.ndarray, np.ndarray]  # question matrix, answer matrix, question vector
Products = tuple[np.ndarray, np.ndarray]  # cosines with every question unit and every answer unit

_batchers: dict[int, MicroBatcher[Item, Products]] = {}  # by OPENQNA_EMBED_BATCH, read at each call
_lock = threading.Lock()
# How long a product waits for company while questions arrive together (``MicroBatcher.busy_wait``): the vectors
# of one embedding batch reach their products over a millisecond or two, one thread after another, and a question
# multiplied alone costs as much as a batch of eight (the matrices' reading is the cost).
BUSY_WAIT = 0.002


@functools.lru_cache(maxsize=8)
def no_units(dim: int) -> np.ndarray:
    """An empty matrix of ``dim`` columns, one object per ``dim`` (so the products that use it batch together)."""
    return np.zeros((0, dim), np.float32)


def multiply(items: list[Item]) -> list[Products]:
    """Each item's products: one matrix product per pair of matrices, for the items that share it."""
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


def unit_products(questions: np.ndarray, answers: np.ndarray, vector: np.ndarray) -> Products:
    """``(questions @ vector, answers @ vector)``, computed with those of the questions ranked at the same time."""
    most = settings.embed_batch()
    if most == 1:
        return questions @ vector, answers @ vector
    return batcher(most).submit((questions, answers, vector))


def batcher(most: int) -> MicroBatcher[Item, Products]:
    """The batcher that multiplies up to ``most`` questions at once (made on first use, one per size)."""
    found = _batchers.get(most)
    if found is None:
        with _lock:
            found = _batchers.get(most)
            if found is None:
                found = _batchers[most] = MicroBatcher(multiply, max_batch=most, busy_wait=BUSY_WAIT,
                                                           name="openqna-products")
    return found
