"""Micro-batching: concurrent single calls of a batchable function, run as one call.

Serving systems for embedding models (Hugging Face text-embeddings-inference, Triton's dynamic
batcher) gather the requests that arrive together and run them as one batch: MiniLM embeds a
question in a batch of 16 for about half the CPU of a question alone (bench/batching.py), and a
worker running batches back to back keeps the requests from contending for the cores.
``MicroBatcher`` does that for any ``run(items) -> results``: callers ``submit`` one item each and
block; a worker thread takes what is queued, up to ``max_batch``, and runs it.  A caller that takes
turns with other threads (``openqna.turns``) gives its turn up while it waits.

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

import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Generic, TypeVar

from openqna.turns import paused

T = TypeVar("T")
R = TypeVar("R")


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
