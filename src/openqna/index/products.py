"""Question vectors times a knowledge base's unit vectors: questions ranked at the same time share one product.

The exhaustive path (knowledge bases up to ``OPENQNA_EXACT_SEARCH_MAX`` vectors) scores a question
against every question and answer vector.  Questions that arrive together (the embedder's batches
hand them over at the same moment) are multiplied in one matrix-matrix product, which reads the
matrices once.

The matrices are multiplied in their column layout (``Field.columns``: one row per dimension, a
copy of the unit matrix transposed), not as the unit matrix itself.  OpenBLAS multiplies
``vectors @ columns`` 2-3x faster than ``units @ vector`` or ``vectors @ units.T`` on the AMD EPYC
(one thread, a 10,000 x 384 matrix: one question 0.8 against 2.6 ms, eight 2.6 against 5.7 ms;
bench/batching.py on the shared machine: 0.45-0.55x the time at every batch size): one question's
product then adds each dimension's row of the columns into the result, which stays in cache,
instead of a dot product per unit.  The price is a copy of the matrices per field of an exhaustive
index (15 MB per 10,000 units).  A batch gets the same floats either way; a question alone gets
cosines within ~1e-7 of ``units @ vector`` (the order of the additions differs), as a batch always did.
``OPENQNA_EMBED_BATCH=1`` turns the batching off with the embedder's.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from openqna import settings
from openqna.models.batching import MicroBatcher

Item = tuple[np.ndarray, np.ndarray, np.ndarray]  # question columns, answer columns (dim x units), question vector
Products = tuple[np.ndarray, np.ndarray]  # cosines with every question unit and every answer unit

_batchers: dict[int, MicroBatcher[Item, Products]] = {}  # by OPENQNA_EMBED_BATCH, read at each call
_lock = threading.Lock()
# How long a product waits for company while questions arrive together (``MicroBatcher.busy_wait``): the vectors
# of one embedding batch reach their products over a millisecond or two, one thread after another, and a question
# multiplied alone costs as much as a batch of eight (the matrices' reading is the cost).
BUSY_WAIT = 0.002
# Up to this many questions on the same matrices are multiplied one by one: OpenBLAS's matrix product of 2 or 3
# rows costs about twice as much a question as the vector product of one row (AMD EPYC, one thread, 10,000 x 384
# columns: 1.28-1.30 ms a question for 2 rows, 1.18-1.22 for 3, 0.62-0.68 for 1), while from 4 rows on it costs
# less (0.52 for 4, 0.35 for 8).
ALONE_UP_TO = 3


@functools.lru_cache(maxsize=8)
def no_units(dim: int) -> np.ndarray:
    """The columns of no unit of ``dim`` dimensions, one object per ``dim`` (so the products that use it batch
    together)."""
    return np.zeros((dim, 0), np.float32)


def multiply(items: list[Item]) -> list[Products]:
    """Each item's products: one matrix product per pair of column matrices, for the items that share it (one
    vector product each when they are at most ``ALONE_UP_TO``)."""
    out: list[Products | None] = [None] * len(items)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (questions, answers, _) in enumerate(items):
        groups.setdefault((id(questions), id(answers)), []).append(i)
    for members in groups.values():
        questions, answers, _ = items[members[0]]
        if len(members) <= ALONE_UP_TO:
            for i in members:
                vector = items[i][2]
                out[i] = (vector @ questions, vector @ answers)
            continue
        vectors = np.stack([items[i][2] for i in members])
        q_sims, a_sims = vectors @ questions, vectors @ answers
        for j, i in enumerate(members):
            out[i] = (q_sims[j], a_sims[j])
    return [p for p in out if p is not None]


def unit_products(questions: np.ndarray, answers: np.ndarray, vector: np.ndarray) -> Products:
    """``(vector @ questions, vector @ answers)`` (``Field.columns``: every unit's cosine), computed with those of the
    questions ranked at the same time."""
    most = settings.embed_batch()
    if most == 1:
        return vector @ questions, vector @ answers
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
