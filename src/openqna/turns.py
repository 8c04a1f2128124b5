"""Threads that take turns at their Python work, and give the turn up while they wait (``Turns``, ``paused``).

A scheduling aid, not a lock: nothing depends on it for correctness.  The service's query threads take turns
(``Service.turns``); the seams they wait on (the embedding batcher, a remote embedding service, PostgreSQL, a
connected table's engine) give the turn up meanwhile, so this sits at the foundation that every layer may import.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# How long a thread waits for a turn (``Turns``) before it runs without one.
PATIENCE = 0.05
_turn = threading.local()  # .turns: the Turns this thread takes turns in; .got: whether it holds one now


class Turns:
    """At most ``n`` threads at a time run their Python work (``held``); a thread gives its turn up while it waits
    for something else (``paused``: a batch, the model, the network).

    Python runs one thread at a time.  A busy server's query threads (sixteen on two cores) would all contend for
    it at once, and so would the embedding worker, which needs it between two runs of the model to hand out one
    batch and take the next: waiting behind the query threads, it left the model idle 9-23% of the time, and
    the batches that formed meanwhile were smaller.  Taking turns, the query threads queue on a semaphore instead,
    where they do not contend with the workers and the event loop.  A thread that gets no turn within
    ``patience`` seconds runs anyway (``late`` counts them): a turn held for long (a knowledge base's first query
    builds its index) delays the others by that much at most, and a thread that holds a turn while it waits for
    another that gave its turn up cannot deadlock them.
    """

    def __init__(self, n: int, patience: float = PATIENCE) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n = n
        self._free = threading.Semaphore(n)
        self.patience = patience
        self._late = itertools.count(1)
        self.late = 0  # turns not had within ``patience``

    def _take(self) -> bool:
        if self._free.acquire(timeout=self.patience):
            return True
        self.late = next(self._late)
        return False

    @contextmanager
    def held(self) -> Iterator[None]:
        """Run the body in a turn (nested: in the turn the thread already takes)."""
        if getattr(_turn, "turns", None) is not None:
            yield
            return
        _turn.turns, _turn.got = self, self._take()
        try:
            yield
        finally:
            if _turn.got:
                self._free.release()
            _turn.turns = _turn.got = None


@contextmanager
def paused() -> Iterator[None]:
    """Give this thread's turn (``Turns.held``), if it holds one, to another thread while the body waits."""
    turns: Turns | None = getattr(_turn, "turns", None)
    if turns is None or not _turn.got:
        yield
        return
    turns._free.release()
    _turn.got = False
    try:
        yield
    finally:
        _turn.got = turns._take()
