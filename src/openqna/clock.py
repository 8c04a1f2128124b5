"""The wall clock as every layer writes it: UTC, to the second, ISO 8601 with a ``Z``.

Keys, jobs and stores all stamp times; they share this one function so a timestamp
written by core and one written by a store compare as strings.
"""

from __future__ import annotations

from datetime import datetime, timezone


def now_iso() -> str:
    """Now, as ``2026-01-31T12:00:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
