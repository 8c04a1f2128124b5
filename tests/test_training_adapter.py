"""The per-project query adapter (``training.adapter``): bytes, identity when there is nothing to learn, and a real
lift on a slice of banking77 read by the real embedder."""

from __future__ import annotations

import random

import numpy as np
import pytest

from conftest import SHARED_DATA
from openqna.training import adapter


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def test_bytes_round_trip():
    rng = np.random.default_rng(0)
    model = adapter.QueryAdapter(rng.normal(size=(8, 8)).astype(np.float32), "minilm")
    back = adapter.QueryAdapter.from_bytes(model.to_bytes())
    assert back.space == "minilm"
    assert np.array_equal(back.matrix, model.matrix)
    v = unit(rng.normal(size=(3, 8)))
    assert np.allclose(back.apply(v), model.apply(v))
    assert np.allclose(np.linalg.norm(model.apply(v), axis=1), 1.0, atol=1e-5)
    assert model.nbytes == 8 * 8 * 4


def test_no_examples_is_the_identity():
    units = unit(np.random.default_rng(1).normal(size=(6, 16)))
    empty = adapter.Examples(np.zeros((0, 16), np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64))
    model = adapter.fit(empty, units, np.arange(6) // 2, 3, "s")
    assert not model.matrix.any()
    assert np.allclose(model.apply(units), units, atol=1e-6)


def test_nothing_to_learn_stays_near_the_identity():
    """Random queries with random targets: the L2 keeps the map close to where the ranker was calibrated."""
    rng = np.random.default_rng(2)
    units = unit(rng.normal(size=(200, 64)))
    queries = unit(rng.normal(size=(300, 64)))
    examples = adapter.Examples(queries, rng.integers(0, 100, 300), np.full(300, -1, np.int64))
    model = adapter.fit(examples, units, np.arange(200) // 2, 100, "s")
    probe = unit(rng.normal(size=(50, 64)))
    assert np.mean(np.sum(model.apply(probe) * probe, axis=1)) > 0.97


def record_top1(model: adapter.QueryAdapter | None, queries: np.ndarray, units: np.ndarray, records: np.ndarray,
                gold: np.ndarray) -> float:
    """Top-1 of the record of the nearest unit."""
    mapped = queries if model is None else model.apply(queries)
    return float(np.mean(records[(mapped @ units.T).argmax(axis=1)] == gold))


@pytest.mark.skipif(not (SHARED_DATA / "banking77").exists(), reason="needs the shared banking77 data")
def test_lifts_held_out_questions_on_banking77(embedder):
    """40 banking77 intents, 3 training utterances each stored (with the intent's name as the answer), 12 others
    as accepted feedback and the test utterances held out: the adapter must lift their top-1 (0.852 -> 0.860 with
    the shipped L2; a weak one, 0.01, lifts it to 0.910, and lost on make eval's dev KBs, see the module)."""
    from openqna.evaluation import datasets

    data = datasets.banking77(SHARED_DATA)
    labels = list(data.train)[:40]
    rng = random.Random(0)
    stored, feedback = [], []
    for i, label in enumerate(labels):
        utterances = rng.sample(data.train[label], 15)
        stored += [(u, i) for u in utterances[:3]] + [(datasets.humanise(label), i)]
        feedback += [(u, i) for u in utterances[3:]]
    held = [(t, labels.index(label)) for t, label in data.test if label in labels][:600]
    units = embedder.embed([t for t, _ in stored])
    records = np.array([r for _, r in stored])
    fb = embedder.embed([t for t, _ in feedback])
    examples = adapter.Examples(fb, np.array([r for _, r in feedback]), np.full(len(feedback), -1, np.int64))
    model = adapter.fit(examples, units, records, len(labels), embedder.name)
    queries, gold = embedder.embed([t for t, _ in held]), np.array([r for _, r in held])
    before = record_top1(None, queries, units, records, gold)
    after = record_top1(model, queries, units, records, gold)
    assert after >= before + 0.005, (before, after)
    weak = adapter.fit(examples, units, records, len(labels), embedder.name, l2=0.01)
    assert record_top1(weak, queries, units, records, gold) >= before + 0.03


def test_a_gain_is_kept_only_when_it_is_unlikely_to_be_chance():
    from openqna.training.project import Figures, chance, wins

    def figures(hits: list[bool], right: float = 0.5) -> Figures:
        return Figures(len(hits), sum(hits) / len(hits), right, tuple(hits))

    same = [True] * 50 + [False] * 42
    four_for_two = figures([True] * 52 + [False] * 40)  # 4 gained among the first failures, 2 lost
    before = figures(same)
    after = figures([False, False] + same[2:50] + [True] * 4 + same[54:])
    assert sum(after.hits) == sum(four_for_two.hits) and chance(before, after) == 22 / 64
    assert not wins(before, after)
    many = figures([True] * 50 + [True] * 12 + [False] * 30)
    assert chance(before, many) == 1 / 2**12 and wins(before, many)
    assert not wins(before, figures(many.hits, right=0.4))  # right at the threshold fell
    assert chance(Figures(3, 1.0, 1.0), Figures(3, 1.0, 1.0)) == 1.0  # no per-question outcomes: nothing to tell
