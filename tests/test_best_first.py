"""``ranker.best_first``: the best few by passes of argmax are exactly what argpartition and a stable sort give."""

from __future__ import annotations

import numpy as np
import pytest

from openqna.ranking.ranker import FEW, best_first


def reference(confidence: np.ndarray, k: int) -> np.ndarray:
    best = np.argpartition(-confidence, k - 1)[:k]
    return best[np.argsort(-confidence[best], kind="stable")]


def arrays(rng: np.random.Generator):
    for n in (1, 2, 3, 4, 5, 9, 10, 50, 10_000):
        yield rng.random(n)  # all distinct
        yield np.round(rng.random(n), 1)  # many ties
        ties = rng.random(n)
        ties[rng.integers(0, n, max(1, n // 3))] = ties.max()  # ties at the top
        yield ties
        allowed = rng.random(n)
        allowed[rng.random(n) < 0.9] = -1.0  # ranker.rank's not-allowed rows
        yield allowed
        odd = rng.random(n)
        odd[rng.integers(0, n, max(1, n // 5))] = rng.choice([np.nan, -np.inf, 0.0, 1.0])
        yield odd
        yield np.full(n, 0.5)


@pytest.mark.parametrize("seed", range(5))
def test_the_same_positions_in_the_same_order_as_argpartition(seed):
    rng = np.random.default_rng(seed)
    for confidence in arrays(rng):
        for k in range(1, min(len(confidence), FEW + 2) + 1):
            before = confidence.copy()
            got = best_first(confidence, k)
            assert got.tolist() == reference(confidence, k).tolist(), (len(confidence), k)
            assert np.array_equal(confidence, before, equal_nan=True)  # what it set aside is put back
