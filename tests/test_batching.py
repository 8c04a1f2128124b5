"""Micro-batching (issue 29): concurrent questions embedded in one model call, with the same vectors and
the same answers as one at a time.

The real model, a real SQLite store and real threads; no timing asserts (bench/throughput.py and
bench/batching.py measure what batching buys).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import CHITCHAT
from openqna import settings
from openqna.index import products
from openqna.index.field import Field
from openqna.models.batching import BatcherClosed, MicroBatcher
from openqna.models.embedder import LocalMiniLM, length_groups

# Mixed lengths, so a batch pads its short questions to its longest: masked mean pooling must ignore the padding.
QUESTIONS = [
    "hi",
    "How do I reset my password after my account was locked for too many failed sign-in attempts?",
    "card declined",
    "What is the exchange rate from euros to dollars today, and do you charge a fee for converting?",
    "thanks",
    "Can I get a refund for an item I bought with my card last week if the shop has closed down?",
    "are you a robot",
    "where is my money",
    "Why was I charged twice for the same cash withdrawal at an ATM abroad yesterday evening?",
    "tell me a joke",
    "change PIN",
    "I lost my phone with the banking app on it; how do I stop someone from using my account?",
]


def together(submit, items, threads: int = 12):
    """``submit(item)`` for every item from ``threads`` threads released at once, results in item order."""
    start = threading.Barrier(min(threads, len(items)))

    def one(item):
        start.wait()
        return submit(item)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(one, items))


# -- the batcher -----------------------------------------------------------------------------------
def until(condition, seconds: float = 10.0) -> None:
    """Wait for ``condition()`` (another thread's progress), failing after ``seconds``."""
    deadline = threading.Event()
    for _ in range(int(seconds / 0.005)):
        if condition():
            return
        deadline.wait(0.005)
    raise AssertionError("timed out")


def test_concurrent_calls_share_batches_and_get_their_own_results():
    release = threading.Event()
    sizes: list[int] = []

    def run(items: list[int]) -> list[int]:
        sizes.append(len(items))
        release.wait(10)  # the first batch holds the worker while the other calls queue behind it
        return [i * i for i in items]

    batcher = MicroBatcher(run, max_batch=4)
    with ThreadPoolExecutor(max_workers=9) as pool:
        futures = [pool.submit(batcher.submit, i) for i in range(9)]
        until(lambda: bool(sizes) and sizes[0] + batcher.queued == 9)
        release.set()
        results = [f.result(10) for f in futures]
    assert results == [i * i for i in range(9)]
    assert sum(sizes) == 9 and max(sizes) == 4 and len(sizes) <= 4  # batched, never above max_batch
    batcher.close()


def test_an_error_reaches_every_caller_of_its_batch_and_the_worker_lives_on():
    def run(items: list[str]) -> list[str]:
        if "bad" in items:
            raise ValueError("refused: bad")
        return [s.upper() for s in items]

    batcher = MicroBatcher(run, max_batch=8)
    outcomes = together(lambda s: _outcome(batcher.submit, s), ["ok", "bad", "fine", "also"] * 3)
    errors = [o for o in outcomes if isinstance(o, ValueError)]
    assert any(isinstance(o, ValueError) and str(o) == "refused: bad" for o in outcomes)
    assert len(errors) >= 3  # each caller with "bad" failed, and so did whoever shared its batch
    assert all(o in ("OK", "FINE", "ALSO") for o in outcomes if not isinstance(o, ValueError))
    assert batcher.submit("after") == "AFTER"
    batcher.close()


def _outcome(submit, item):
    try:
        return submit(item)
    except ValueError as exc:
        return exc


def test_a_wrong_number_of_results_is_an_error_not_a_hang():
    batcher = MicroBatcher(lambda items: items[:-1], max_batch=4)
    with pytest.raises(RuntimeError, match="gave 0 results"):
        batcher.submit("x")
    batcher.close()


def test_a_lone_call_runs_alone_within_the_window():
    batcher = MicroBatcher(lambda items: [len(items)] * len(items), max_batch=16, wait=0.05)
    assert batcher.submit("alone") == 1  # nobody joined in 50 ms: it ran as a batch of one
    batcher.close()


def test_a_busy_batcher_holds_a_call_for_company_and_a_quiet_one_does_not():
    gate, running = threading.Event(), threading.Event()

    def run(items):
        running.set()
        gate.wait(10)
        return [len(items)] * len(items)

    batcher = MicroBatcher(run, max_batch=2, busy_wait=30.0)
    with ThreadPoolExecutor(max_workers=4) as pool:
        first = pool.submit(batcher.submit, "a")  # a quiet batcher runs a lone call at once
        running.wait(10)
        pair = [pool.submit(batcher.submit, x) for x in "bc"]
        until(lambda: batcher.queued == 2)
        gate.set()
        assert first.result(10) == 1 and [f.result(10) for f in pair] == [2, 2]
        # busy now (its last batch had company): a lone call waits (up to 30 s) for a second one
        lone = pool.submit(batcher.submit, "d")
        until(lambda: batcher.queued == 1)
        assert not lone.done()
        assert batcher.submit("e") == 2 and lone.result(10) == 2
    batcher.close()


def test_two_workers_run_batches_side_by_side():
    both = threading.Barrier(2, timeout=10)  # each batch waits for the other: one worker alone would time out

    def run(items: list[int]) -> list[int]:
        both.wait()
        return items

    batcher = MicroBatcher(run, max_batch=1, workers=2)
    assert together(batcher.submit, [1, 2], threads=2) == [1, 2]
    batcher.close()


def test_close_stops_the_worker_and_refuses_new_calls():
    batcher = MicroBatcher(lambda items: items, max_batch=4, name="test-batcher")
    assert batcher.submit(1) == 1
    workers = [t for t in threading.enumerate() if t.name == "test-batcher"]
    batcher.close()
    assert len(workers) == 1 and not workers[0].is_alive()
    with pytest.raises(BatcherClosed):
        batcher.submit(2)


def test_close_fails_the_calls_still_queued():
    release, started = threading.Event(), threading.Event()

    def run(items: list[int]) -> list[int]:
        started.set()
        release.wait(10)
        return items

    batcher = MicroBatcher(run, max_batch=1)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(batcher.submit, 1)
        assert started.wait(10)
        second = pool.submit(batcher.submit, 2)
        until(lambda: batcher.queued == 1)
        closer = threading.Thread(target=batcher.close)
        closer.start()
        with pytest.raises(BatcherClosed):
            second.result(10)
        release.set()
        assert first.result(10) == 1  # the batch that was running finishes
        closer.join(10)
        assert not closer.is_alive()


# -- runs of similar lengths ------------------------------------------------------------------------------
def cost(lengths, runs, run_tokens):
    return sum(run_tokens + (end - start) * lengths[end - 1] for start, end in runs)


def test_texts_of_one_length_fill_runs_of_the_most_allowed():
    runs = length_groups([12] * 20, 8)
    assert len(runs) == 3 and sorted(end - start for start, end in runs) == [4, 8, 8]


def test_a_long_text_gets_a_run_of_its_own_instead_of_padding_the_others():
    # eight 10-token questions padded to 60 would cost 13 + 480 tokens; apart, 13 + 70 and 13 + 60
    assert length_groups([10] * 7 + [60], 16) == [(0, 7), (7, 8)]
    # a few tokens of padding cost less than another run of the model
    assert length_groups([10, 11, 12, 14], 16) == [(0, 4)]


def test_the_runs_cost_least_of_every_split():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, most = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        lengths = sorted(int(x) for x in rng.integers(2, 60, n))
        runs = length_groups(lengths, most)
        assert runs[0][0] == 0 and runs[-1][1] == n and all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
        assert all(0 < end - start <= most for start, end in runs)
        cheapest = min(cost(lengths, split, 13) for split in splits(n, most))
        assert cost(lengths, runs, 13) == cheapest


def splits(n, most, start=0):
    """Every split of range(start, n) into consecutive runs of at most ``most``."""
    if start == n:
        yield []
        return
    for end in range(start + 1, min(n, start + most) + 1):
        for rest in splits(n, most, end):
            yield [(start, end), *rest]


# -- question vectors scored in one product ----------------------------------------------------------------
def unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_questions_on_one_index_share_a_product_and_get_the_cosines_they_get_alone():
    rng = np.random.default_rng(1)
    q, a, other, vectors = (unit(rng.standard_normal((n, 384))) for n in (300, 120, 50, 6))
    columns = {id(m): np.ascontiguousarray(m.T) for m in (q, a, other)}  # as Field.columns lays them out
    items = [(columns[id(q)], columns[id(a)], v) for v in vectors[:5]] + [(columns[id(other)], columns[id(a)],
                                                                         vectors[5])]
    got = products.multiply(items)
    for (qm, am, v), (q_sims, a_sims) in zip([(q, a, v) for v in vectors[:5]] + [(other, a, vectors[5])], got):
        np.testing.assert_allclose(q_sims, qm @ v, atol=1e-6, rtol=0)
        np.testing.assert_allclose(a_sims, am @ v, atol=1e-6, rtol=0)
    # the one question on its own matrices is multiplied as it would be alone: the same floats
    assert np.array_equal(got[5][0], vectors[5] @ columns[id(other)])
    alone = products.multiply([(columns[id(q)], columns[id(a)], vectors[0])])[0]
    assert alone[0].tobytes() == (vectors[0] @ columns[id(q)]).tobytes()
    assert alone[0].shape == (300,) and alone[1].shape == (120,)
    # two or three questions on one index are multiplied one by one (cheaper than a product of so few rows): each
    # gets the floats it gets alone
    for n in (2, products.ALONE_UP_TO):
        few = products.multiply([(columns[id(q)], columns[id(a)], v) for v in vectors[:n]])
        for v, (q_sims, a_sims) in zip(vectors[:n], few):
            assert q_sims.tobytes() == (v @ columns[id(q)]).tobytes()
            assert a_sims.tobytes() == (v @ columns[id(a)]).tobytes()


def test_field_columns_are_its_unit_matrix_transposed():
    rng = np.random.default_rng(2)
    vectors = unit(rng.standard_normal((7, 384)))
    fld = Field([0, 0, 1, 2, 2, 2, 3], vectors, [["a"]] * 7, 4, 384)
    assert fld.columns.shape == (384, 7) and fld.columns.flags.c_contiguous
    assert np.array_equal(fld.columns, vectors.T)
    assert fld.columns is fld.columns  # made once per field (a field is never changed: updates make a new one)


# -- the real model -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model() -> LocalMiniLM:
    return LocalMiniLM(cache_size=0)


def test_batched_questions_get_the_vectors_they_get_alone(model):
    alone = LocalMiniLM(cache_size=0, max_batch=1)
    assert alone.batcher is None
    expected = np.concatenate([alone.embed([q]) for q in QUESTIONS])
    before = model.batcher.batches
    got = np.concatenate(together(lambda q: model.embed([q]), QUESTIONS))
    assert model.batcher.batches - before < len(QUESTIONS)  # some questions shared a model call
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    # and a padded batch straight through the one-thread session
    np.testing.assert_allclose(model.embed_questions(QUESTIONS), expected, atol=1e-6, rtol=0)


def test_a_model_error_reaches_every_waiting_question():
    def broken(texts):
        raise RuntimeError(f"model failed on {len(texts)} texts")

    batcher = MicroBatcher(broken, max_batch=16)
    outcomes = together(lambda q: _any_outcome(batcher.submit, q), QUESTIONS)
    assert all(isinstance(o, RuntimeError) and "model failed" in str(o) for o in outcomes)
    batcher.close()


def _any_outcome(submit, item):
    try:
        return submit(item)
    except Exception as exc:  # noqa: BLE001 (the test collects every outcome)
        return exc


# -- answers --------------------------------------------------------------------------------------------
def test_questions_asked_together_get_the_answers_they_get_alone(tmp_path, monkeypatch):
    """The same answers and confidences (to the 4 decimals the API returns; a padded batch may differ from a lone
    question in a vector's last float bit, which must never move a confidence by more than its last digit)."""
    from openqna.formats import read_file
    from openqna.kb.service import AskRequest, Service
    from openqna.store.sqlite import SQLiteStore

    monkeypatch.setenv("OPENQNA_EMBED_BATCH", "1")
    alone = Service(SQLiteStore(tmp_path / "data"), LocalMiniLM(cache_size=0))
    alone.import_content("chitchat", read_file(CHITCHAT))
    expected = [alone.ask("chitchat", "test", AskRequest(question=q, top=3)) for q in QUESTIONS]
    monkeypatch.delenv("OPENQNA_EMBED_BATCH")
    batched = Service(alone.store, LocalMiniLM(cache_size=0))
    shared = products.batcher(settings.embed_batch())  # one per process: count this test's batches only
    before = shared.batches
    got = together(lambda q: batched.ask("chitchat", "test", AskRequest(question=q, top=3)), QUESTIONS)
    assert batched.embedder.batcher.batches < len(QUESTIONS)
    # scored through the shared products; whether two of them met in one product depends on timing (a product is
    # held for company only while the last one was shared), so that is test_questions_on_one_index_share_a_product's
    assert shared.batches - before >= 1
    for question, want, have in zip(QUESTIONS, expected, got):
        assert [a.qna.id if a.qna else None for a in have] == [a.qna.id if a.qna else None for a in want], question
        assert np.allclose([a.confidence for a in have], [a.confidence for a in want], atol=1e-4, rtol=0), question
    alone.store.close()
