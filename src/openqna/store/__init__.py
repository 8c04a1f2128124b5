"""Stores: the source of truth behind one protocol (see base.Store)."""

import re

from openqna.records import InvalidArgument
from openqna.store.base import ApiKey, Deployment, Job, LoggedQuery, Project, Source, Store, StoredFile, StoredQnA, Unit


def open_store(location: str, cache_dir: str | None = None) -> Store:
    """Open the store at ``location``: a directory (embedded SQLite), or PostgreSQL given as a
    ``postgresql://`` URL or a libpq ``key=value`` string naming a ``dbname``; PostgreSQL keeps
    its saved indexes in ``cache_dir`` (none when it is None)."""
    check_location(location)
    if is_postgres(location):
        from openqna import settings
        from openqna.store.postgres import PostgresStore

        return PostgresStore(location, pool_size=settings.pg_pool_size(), cache_dir=cache_dir)
    from openqna.store.sqlite import SQLiteStore

    return SQLiteStore(location)


def is_postgres(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a data directory."""
    return location.startswith(POSTGRES_SCHEMES) or "dbname=" in location


POSTGRES_SCHEMES = ("postgres://", "postgresql://")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def check_location(location: str, name: str = "the store location") -> None:
    """Refuse a URL of a scheme no store has (``postgresq://``, ``mysql://``): opened as a data directory it would
    quietly make an empty SQLite store in a folder named after it.  The message names the scheme only, as the rest
    of a URL may hold a password; ``name`` says where the value came from (``OPENQNA_STORE``, ``--to``)."""
    scheme = _URL_SCHEME.match(location)
    if scheme and not location.startswith(POSTGRES_SCHEMES):
        raise InvalidArgument(f"{name} must be a postgresql:// (or postgres://) URL or a data directory, not a "
                              f"{scheme.group()} URL")


__all__ = ["ApiKey", "Deployment", "Job", "LoggedQuery", "Project", "Source", "Store", "StoredFile", "StoredQnA", "Unit", "check_location", "is_postgres", "open_store"]
