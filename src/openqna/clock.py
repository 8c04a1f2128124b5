"""The wall clock as every layer writes it: UTC, to the second, ISO 8601 with a ``Z``.

Keys, jobs and stores all stamp times; they share this one function so a timestamp
written by core and one written by a store compare as strings.
"""

from __future__ import annotations

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
