"""Stores: the source of truth behind one protocol (see base.Store)."""

from .base import ApiKey, Deployment, Job, Project, Source, Store, StoredFile, StoredQnA, Unit


def open_store(location: str) -> Store:
    """Open the store at ``location``: a directory for the embedded SQLite store."""
    if location.startswith(("postgres://", "postgresql://")):
        raise NotImplementedError("the PostgreSQL store is not available yet; use a data directory")
    from .sqlite import SQLiteStore

    return SQLiteStore(location)


__all__ = ["ApiKey", "Deployment", "Job", "Project", "Source", "Store", "StoredFile", "StoredQnA", "Unit", "open_store"]
