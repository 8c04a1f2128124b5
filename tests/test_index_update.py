"""What an index update copies (``index/field.py``'s ``kept_then``): the kept rows of an array and the new ones, as
``np.concatenate((array[keep], extra))`` gives them, with one copy of the kept rows instead of two."""

from __future__ import annotations

import numpy as np
import pytest

from openqna.index import field
from openqna.index.field import kept_then


@pytest.mark.parametrize("dropped", [[], [0], [9], [3, 4, 5], [0, 2, 4, 6, 8], list(range(10))])
@pytest.mark.parametrize("shape", [(10,), (10, 4)])
@pytest.mark.parametrize("extra_rows", [0, 3])
def test_kept_rows_then_the_new_ones_as_a_boolean_selection_gives_them(dropped, shape, extra_rows):
    rng = np.random.default_rng(len(dropped) * 7 + extra_rows)
    array = rng.standard_normal(shape).astype(np.float32)
    extra = rng.standard_normal((extra_rows, *shape[1:])).astype(np.float32)
    keep = np.ones(shape[0], bool)
    keep[dropped] = False
    got = kept_then(array, keep, extra)
    expected = np.concatenate((array[keep], extra))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got, expected)


def test_many_dropped_rows_take_one_boolean_selection(monkeypatch):
    monkeypatch.setattr(field, "FEW_DROPPED", 2)
    array = np.arange(40, dtype=np.float32).reshape(20, 2)
    keep = np.arange(20) % 3 != 0
    extra = np.full((1, 2), -1.0, np.float32)
    assert np.array_equal(kept_then(array, keep, extra), np.concatenate((array[keep], extra)))
