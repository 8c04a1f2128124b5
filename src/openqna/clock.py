"""The wall clock as every layer writes it: UTC, to the second, ISO 8601 with a ``Z``.

Keys, jobs and stores all stamp times; they share this one function so a timestamp
written by core and one written by a store compare as strings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone

_STAMP: ContextVar[str | None] = ContextVar("openqna_clock_stamp", default=None)


def now_iso() -> str:
    """Now, as ``2026-01-31T12:00:00Z`` (or the time ``stamped`` holds)."""
    return _STAMP.get() or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def stamped(stamp: str | None) -> Iterator[None]:
    """Within the block (in this thread or task), every ``now_iso`` is ``stamp`` (None or empty: the real time).

    How ``openqna migrate`` writes a copy whose times are the original's: each write it replays (a QnA, a deploy, a
    test set) is stamped when it was first made, by the same code that stamps it in service.
    """
    token = _STAMP.set(stamp or None)
    try:
        yield
    finally:
        _STAMP.reset(token)


def later_than(stamp: str) -> None:
    """Wait, a second at most, until ``now_iso`` is later than ``stamp`` (at once when it is, or under ``stamped``).

    A record's ``lastUpdatedDateTime`` is what an edit names as the state it started from (``ifLastUpdated``); written
    twice within one second, a record kept one stamp, so an edit started from the first state passed the check
    against the second, and undid it.  A writer that waits here first never gives a record the stamp it had.
    """
    if _STAMP.get() is not None:
        return
    deadline = time.monotonic() + 1.1
    while now_iso() <= stamp and time.monotonic() < deadline:
        time.sleep(0.02)
