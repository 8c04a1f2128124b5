"""Writes a question makes on the side (its query-log row, a vector store's time of last use), dropped when the store
cannot take writes.

A question is a read: a full disk (``StoreFull``) or a read-only store (``StoreReadOnly``) must not turn its answer
into a 507 or a 503 because the bookkeeping beside it could not be stored.  ``SideWrites.attempt`` runs such a write;
when the store refuses it, the write is dropped and the log says so in one warning line, then at most one line every
``WARN_EVERY`` seconds with how many were dropped meanwhile: a busy server asks thousands of questions a minute, and
a line for each would fill the log (and, on a full disk, the disk) with one fact.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from openqna.records import StoreFull, StoreReadOnly

log = logging.getLogger("openqna")

WARN_EVERY = 600.0  # seconds between two warnings of one kind of dropped write


class SideWrites:
    """The dropped writes of one kind (``what``: "questions were not logged"), counted for the warning."""

    def __init__(self, what: str):
        self.what = what
        self._lock = threading.Lock()  # query threads attempt at once
        self._dropped = 0
        self._warned_at: float | None = None

    def attempt(self, write: Callable[[], None]) -> bool:
        """Run ``write``; False when the store could not take it (it is dropped, and counted for the warning)."""
        try:
            write()
            return True
        except (StoreFull, StoreReadOnly) as exc:
            with self._lock:
                self._dropped += 1
                now = time.monotonic()
                if self._warned_at is not None and now - self._warned_at < WARN_EVERY:
                    return False
                dropped, self._dropped, self._warned_at = self._dropped, 0, now
            log.warning("%d %s, as the store cannot be written (said at most every %d s): %s", dropped, self.what,
                        int(WARN_EVERY), exc.message)
            return False
