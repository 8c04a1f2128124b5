"""Micro-batching: concurrent single calls of a batchable function, run as one call.

Serving systems for embedding models (Hugging Face text-embeddings-inference, Triton's dynamic
batcher) gather the requests that arrive together and run them as one batch: MiniLM embeds a
question in a batch of 16 for about half the CPU of a question alone (bench/batching.py), and a
worker running batches back to back keeps the requests from contending for the cores.
``MicroBatcher`` does that for any ``run(items) -> results``: callers ``submit`` one item each and
block; a worker thread takes what is queued, up to ``max_batch``, and runs it.  A caller that takes
turns with other threads (``Turns``) gives its turn up while it waits.

A lone call is never held back for company: when the worker is idle it runs a call at once
(``wait`` 0, the default), and calls that arrive while a batch runs form the next batch.  With
``wait`` > 0 the worker holds the first call of a batch up to that long for others to join, so
a lone call waits at most ``wait`` seconds more.  ``busy_wait`` does the same only while the
batcher is busy (its last batch had company): calls that come in a burst but not at one instant
(the questions of one embedding batch, each reaching its ranking after some Python of its own)
then share a batch instead of the first running alone, and a lone caller of a quiet server waits
for nobody.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


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


class BatcherClosed(RuntimeError):
    """The batcher was closed before it ran this call."""


class MicroBatcher(Generic[T, R]):
    """``submit(item)`` returns ``run([... item ...])``'s result for it; concurrent submits share one ``run``.

    ``run`` gets a list of items and returns one result per item, in order.  An exception
    raised by ``run`` is raised in every caller of that batch.  ``workers`` threads take batches
    (``run`` must then be safe to call from several threads): one runs batches back to back; more
    run them side by side on more cores, each taking what has queued when it comes free.  The
    workers start on the first call and are daemons, so an unclosed batcher never keeps a process
    alive; ``close`` stops them and fails the calls still queued.
    """

    def __init__(self, run: Callable[[list[T]], Collection[R]], *, max_batch: int = 16, wait: float = 0.0,
                 busy_wait: float = 0.0, workers: int = 1, name: str = "openqna-batcher") -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if wait < 0 or busy_wait < 0:
            raise ValueError(f"wait and busy_wait must be >= 0 seconds, got {wait} and {busy_wait}")
        self.max_batch = max_batch
        self.wait = wait
        self.busy_wait = busy_wait
        self._busy = False  # the last batch had more than one call
        self.batches = 0  # batches run so far (how the tests see that calls were batched)
        self._run = run
        self._name = name
        self._queue: deque[tuple[T, Future[R]]] = deque()
        self._ready = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._n_workers = workers
        self._closed = False

    @property
    def queued(self) -> int:
        """Calls waiting for the worker, not counting the batch it is running."""
        with self._ready:
            return len(self._queue)

    def submit(self, item: T) -> R:
        """The result for ``item``, run alone or with whatever other items are queued with it."""
        future: Future[R] = Future()
        with self._ready:
            if self._closed:
                raise BatcherClosed("the batcher is closed")
            if not self._workers:
                self._workers = [threading.Thread(target=self._serve, name=self._name, daemon=True)
                                 for _ in range(self._n_workers)]
                for worker in self._workers:
                    worker.start()
            self._queue.append((item, future))
            self._ready.notify()
        with paused():
            return future.result()

    def close(self) -> None:
        """Stop the workers after the batches they are running; queued calls raise ``BatcherClosed``."""
        with self._ready:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
            workers = list(self._workers)
        for _, future in pending:
            future.set_exception(BatcherClosed("the batcher was closed before this call ran"))
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join()

    def _take(self) -> list[tuple[T, Future[R]]] | None:
        """The next batch (None once closed): what is queued, after up to ``wait`` for more to arrive."""
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            wait = max(self.wait, self.busy_wait if self._busy else 0.0)
            if wait > 0:
                deadline = time.monotonic() + wait
                while len(self._queue) < self.max_batch and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._ready.wait(left)
            n = min(self.max_batch, len(self._queue))
            self._busy = n > 1
            return [self._queue.popleft() for _ in range(n)]

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            if not batch:  # closed while waiting for company: close() failed the queued calls
                continue
            try:
                results = self._run([item for item, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"a batch of {len(batch)} items gave {len(results)} results")
            except BaseException as exc:  # every caller of the batch gets the error, the worker lives on
                for _, future in batch:
                    future.set_exception(exc)
                continue
            with self._ready:
                self.batches += 1
            for (_, future), result in zip(batch, results):
                future.set_result(result)
