"""The stores' clock: timestamps as Azure writes them (ISO 8601 UTC, whole seconds, ``Z``)."""

from __future__ import annotations

from datetime import datetime, timezone


def now_iso() -> str:
    """Now, as every store stamps created, modified and deployed times."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
