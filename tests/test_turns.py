"""Threads that take turns at their Python work (``openqna.turns``) and give the turn up while they wait.

A busy server's query threads take turns so that they do not all contend for the interpreter with the embedding
worker and the event loop (bench/throughput.py).  What must hold: at most ``n`` threads in turns at once; a
thread waiting for a batch, the model or the network lets another run; a turn not had within ``patience`` is
run without, so nothing can deadlock on turns; and a Service on a local store asks in turns.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import CHITCHAT
from openqna.models.batching import MicroBatcher
from openqna.turns import Turns, paused


class Overlap:
    """How many threads were inside ``during()`` at once, at most."""

    def __init__(self) -> None:
        self.inside = self.most = 0
        self._lock = threading.Lock()

    def during(self, seconds: float) -> None:
        with self._lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        time.sleep(seconds)
        with self._lock:
            self.inside -= 1


def at_once(fn, threads: int) -> list:
    start = threading.Barrier(threads)

    def one(i):
        start.wait()
        return fn(i)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(one, range(threads)))


@pytest.mark.parametrize("n", [1, 2])
def test_at_most_n_threads_are_in_turns_at_once(n):
    turns, overlap = Turns(n, patience=30), Overlap()

    def work(_):
        with turns.held():
            overlap.during(0.02)

    at_once(work, 8)
    assert overlap.most == n
    assert turns.late == 0


def test_without_turns_the_same_threads_overlap():
    """The control of the test above: the same work outside turns runs side by side."""
    overlap = Overlap()
    at_once(lambda _: overlap.during(0.02), 8)
    assert overlap.most > 2


def test_a_waiting_thread_gives_its_turn_up_and_gets_it_back():
    turns, order = Turns(1, patience=30), []
    other_ran = threading.Event()

    def waits():
        with turns.held():
            order.append("first before its wait")
            with paused():
                assert other_ran.wait(10), "the other thread never got the turn"
            order.append("first after its wait")

    def other():
        with turns.held():
            order.append("other")
            other_ran.set()
            time.sleep(0.05)  # still in its turn: the first must wait for it to end
            order.append("other done")

    first = threading.Thread(target=waits)
    first.start()
    while not order:
        time.sleep(0.001)
    second = threading.Thread(target=other)
    second.start()
    first.join(10)
    second.join(10)
    assert order == ["first before its wait", "other", "other done", "first after its wait"]
    assert turns.late == 0


def test_callers_waiting_for_a_batch_let_each_other_in():
    """Two threads in turns submit to a batcher that holds a call for company: they share one batch, which they
    could not if the first kept its turn while it waited (the second would reach the batcher after the first's
    batch had run alone)."""
    turns = Turns(1, patience=30)
    batcher = MicroBatcher(lambda items: [x * 10 for x in items], max_batch=2, wait=5.0)

    def ask(x):
        with turns.held():
            return batcher.submit(x)

    t = time.perf_counter()
    assert sorted(at_once(ask, 2)) == [0, 10]
    assert batcher.batches == 1
    assert time.perf_counter() - t < 4.0  # the batch filled up: nobody waited out the window
    batcher.close()


def test_a_turn_not_had_within_patience_is_run_without():
    turns = Turns(1, patience=0.05)
    release = threading.Event()

    def holder():
        with turns.held():
            release.wait(10)

    held = threading.Thread(target=holder)
    held.start()
    time.sleep(0.02)
    t = time.perf_counter()
    with turns.held():
        waited = time.perf_counter() - t
    release.set()
    held.join(10)
    assert 0.04 <= waited < 2.0
    assert turns.late == 1
    with turns.held():  # the holder's turn came back: had at once
        pass
    assert turns.late == 1


def test_a_nested_turn_is_the_one_the_thread_holds():
    turns = Turns(1, patience=30)
    t = time.perf_counter()
    with turns.held():
        with turns.held():
            with paused():
                pass
    assert time.perf_counter() - t < 1.0 and turns.late == 0
    with turns.held():  # and it was given back once, not twice: one turn, not two
        other = threading.Thread(target=lambda: turns.held().__enter__())
        other.start()
        other.join(0.2)
        assert other.is_alive()  # waiting for the turn this thread holds
    other.join(30)
    assert not other.is_alive()


def test_a_service_asks_in_turns_and_its_questions_still_share_batches(tmp_path, monkeypatch):
    """Threads asking a Service on SQLite at once rank one at a time (the turns of ``Service.turns``), wait for the
    model outside their turn (their questions still meet in the embedder's batches), and get the answers they get
    asked one by one."""
    from openqna.formats import read_file
    from openqna.kb.service import AskRequest, Service
    from openqna.models.embedder import LocalMiniLM
    from openqna.ranking import ranker
    from openqna.store.sqlite import SQLiteStore

    service = Service(SQLiteStore(tmp_path / "data"), LocalMiniLM(cache_size=0))  # no cache: each ask embeds
    assert isinstance(service.turns, Turns)
    service.turns = Turns(1, patience=30)
    service.import_content("chitchat", read_file(CHITCHAT))
    questions = ["hi there", "are you a robot", "tell me a joke", "what is your name", "thank you so much",
                 "you are boring", "good night", "how old are you"]
    alone = [service.ask("chitchat", "test", AskRequest(question=q, top=3)) for q in questions]
    overlap, rank = Overlap(), ranker.rank

    def slow_rank(*args, **kwargs):
        overlap.during(0.01)
        return rank(*args, **kwargs)

    monkeypatch.setattr(ranker, "rank", slow_rank)
    before = service.embedder.batcher.batches
    together = at_once(lambda i: service.ask("chitchat", "test", AskRequest(question=questions[i], top=3)),
                       len(questions))
    assert overlap.most == 1
    assert service.embedder.batcher.batches - before < len(questions)
    assert service.turns.late == 0
    for want, have in zip(alone, together):
        assert [a.qna.id for a in have] == [a.qna.id for a in want]
    service.turns = None  # the control: without turns the same threads rank side by side
    overlap.most = 0
    at_once(lambda i: service.ask("chitchat", "test", AskRequest(question=questions[i], top=3)),
            len(questions))
    assert overlap.most > 1
    service.store.close()
