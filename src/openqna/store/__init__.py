"""Stores: the source of truth behind one protocol (see base.Store)."""

from openqna.store.base import ApiKey, Deployment, Job, LoggedQuery, Project, Source, Store, StoredFile, StoredQnA, Unit


def open_store(location: str, cache_dir: str | None = None) -> Store:
    """Open the store at ``location``: a directory (embedded SQLite), or PostgreSQL given as a
    ``postgresql://`` URL or a libpq ``key=value`` string naming a ``dbname``; PostgreSQL keeps
    its saved indexes in ``cache_dir`` (none when it is None)."""
    if is_postgres(location):
        from openqna import settings
        from openqna.store.postgres import PostgresStore

        return PostgresStore(location, pool_size=settings.pg_pool_size(), cache_dir=cache_dir)
    from openqna.store.sqlite import SQLiteStore

    return SQLiteStore(location)


def is_postgres(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a data directory."""
    return location.startswith(("postgres://", "postgresql://")) or "dbname=" in location


__all__ = ["ApiKey", "Deployment", "Job", "LoggedQuery", "Project", "Source", "Store", "StoredFile", "StoredQnA", "Unit", "is_postgres", "open_store"]
