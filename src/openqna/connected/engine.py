"""Tables that live in a user's own database, searched where they are: the engine seam.

A *connected* table (``openqna table connect``) is never copied: each search sends the query vector and
the compiled ``where_str`` to the engine that holds the rows (ClickHouse/MyScale, or PostgreSQL with
pgvector) and reads back the nearest rows.  This module is the seam in front of those engines:

* ``Connection`` is where a table lives, parsed from a URL; its password is kept apart from it (the
  caller stores it encrypted) and ``masked_url`` is the only form that is ever shown;
* ``TableEngine`` is what openqna asks of an engine: the table's columns (``DESCRIBE TABLE``,
  ``information_schema``), the vector indexes on its vector column, and its nearest rows under a Filter.
  Filters compile with ``filters.sql`` to bound parameters, never spliced;
* ``VectorIndex`` is an index the engine searches instead of scanning every row (ClickHouse's
  ``vector_similarity``, pgvector's HNSW and IVFFlat): with one built for the connection's metric, the search
  is written so that the engine uses it; without one it stays an exact scan, and ``index_ddl`` says how
  to build one;
* the errors say what went wrong in words fit for a caller (the tools dialect turns them into 4xx or
  504) and never carry the engine's raw message, which may name the host or the user.

Read-only by construction: the engines here only ever send ``SELECT``/``DESCRIBE`` statements (the
tests record every statement), and PostgreSQL sessions are opened ``READ ONLY`` as well.  The
connection should still use a read-only database user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import numpy as np

from openqna.filters.nodes import Column, ColumnType, Filter
from openqna.records import InvalidArgument, OpenQnAError

EngineName = Literal["clickhouse", "chdb", "postgresql"]
Metric = Literal["cosine", "l2"]
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?\Z")


class EngineRejected(OpenQnAError):
    """The engine refused the query (a filter its types do not allow, a table that went away)."""

    code = "EngineRejected"
    status = 400
    engine_code: int | None = None  # the engine's own error number, when it gave one


class EngineTimeout(OpenQnAError):
    code = "EngineTimeout"
    status = 504


class EngineUnavailable(OpenQnAError):
    """The engine could not be reached or refused the connection's credentials."""

    code = "EngineUnavailable"
    status = 503
    engine_code: int | None = None


class TableChanged(EngineUnavailable):
    """The table no longer has what it was connected with (a column renamed or dropped, the table dropped, reading
    it no longer granted): the operator's to fix, not the caller's, whatever filter the caller sent."""

    code = "TableChanged"


@dataclass(frozen=True)
class Connection:
    """Where a connected table lives: an engine and its URL without the password.

    ``clickhouse://user@host:8123/db`` (``clickhouses://`` for TLS) goes through clickhouse-connect's
    HTTP client; ``chdb:///path/to/dir`` opens embedded ClickHouse (chdb) on that directory;
    ``postgresql://user@host:5432/db?sslmode=require`` goes through psycopg.
    """

    engine: EngineName
    url: str  # the URL without its password

    @property
    def masked_url(self) -> str:
        parts = urlsplit(self.url)
        if parts.username is None:
            return self.url
        netloc = parts.netloc.replace(f"{parts.username}@", f"{parts.username}:***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))


def parse_url(url: str) -> tuple[Connection, str]:
    """(the connection without its password, the password) from a connection URL."""
    parts = urlsplit(url.strip())
    schemes: dict[str, EngineName] = {"clickhouse": "clickhouse", "clickhouses": "clickhouse", "chdb": "chdb",
                                      "postgresql": "postgresql", "postgres": "postgresql"}
    engine = schemes.get(parts.scheme.lower())
    if engine is None:
        raise InvalidArgument("the connection URL must start with clickhouse://, clickhouses://, chdb:// or "
                           "postgresql://", target="url")
    if not parts.netloc:  # chdb:///path: nothing to mask
        return Connection(engine, url.strip()), ""
    password = unquote(parts.password or "")
    host = parts.hostname or ""
    netloc = (quote(unquote(parts.username), safe="") + "@" if parts.username else "") + host
    if parts.port:
        netloc += f":{parts.port}"
    return Connection(engine, urlunsplit(parts._replace(netloc=netloc))), password


def table_name(name: str) -> list[str]:
    """``table`` or ``database.table`` as its identifier parts (refused unless plain identifiers)."""
    if not _TABLE.match(name):
        raise InvalidArgument(f"table must be NAME or DATABASE.NAME of letters, digits and _; got {name!r}",
                           target="table")
    return name.split(".")


@dataclass(frozen=True)
class TableColumn:
    """A column as the engine describes it: its type there, the where_str type it reads as (None when
    where_str cannot filter it), its comment, and for a vector column its dimension (0 when the engine's
    type does not fix it)."""

    name: str
    engine_type: str
    type: ColumnType | None
    comment: str = ""
    dim: int | None = None


@dataclass(frozen=True)
class VectorIndex:
    """An approximate nearest-neighbour index on a vector column, as the engine reports it.

    ``method`` is ``vector_similarity`` (ClickHouse's HNSW), ``hnsw`` or ``ivfflat`` (pgvector); ``metric`` the
    distance it was built for (None when it is one openqna does not search by, such as an inner product);
    ``definition`` the engine's own text of it; ``iterative_scan``, on pgvector 0.8 and later, that a filtered
    scan can go on reading the index until enough rows pass.
    """

    name: str
    method: str
    metric: Metric | None
    definition: str
    iterative_scan: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def usable_index(indexes: list[VectorIndex], metric: Metric) -> VectorIndex | None:
    """The index a search by ``metric`` can use: the first built for that distance (HNSW before IVFFlat)."""
    fitting = [i for i in indexes if i.metric == metric]
    fitting.sort(key=lambda i: i.method == "ivfflat")
    return fitting[0] if fitting else None


class TableEngine(Protocol):
    dialect: str  # "ClickHouse" or "PostgreSQL": the SQL the tool description shows

    def describe(self, table: str) -> list[TableColumn]:
        """The table's columns, in order."""

    def vector_dim(self, table: str, column: TableColumn) -> int:
        """The dimension of ``column``'s vectors: its type's, else its first non-empty row's (0 if none)."""

    def count(self, table: str) -> int: ...

    def vector_indexes(self, table: str, vector: str) -> list[VectorIndex]:
        """The approximate nearest-neighbour indexes on ``table``'s column ``vector`` (empty when none)."""

    def index_ddl(self, table: str, vector: str, metric: Metric, dim: int) -> str:
        """The statements that would build an index a search by ``metric`` uses (shown, never run)."""

    def nearest(self, table: str, vector: str, metric: Metric, query: np.ndarray, where: Filter | None,
                columns: list[Column], limit: int,
                index: VectorIndex | None = None) -> list[tuple[dict[str, Any], float]]:
        """The ``limit`` rows nearest to ``query`` inside ``where``, nearest first: each row's ``columns``
        (DateTime as ISO 8601 UTC text) and its distance.  With ``index`` the engine searches that index
        (approximate, and exact again when a filter leaves the index too few rows); without, every row."""

    def close(self) -> None: ...


def canonical_value(kind: ColumnType, value: Any) -> Any:
    """A value read from an engine as a loaded table's field holds it: DateTime as ISO 8601 UTC text."""
    from datetime import date, datetime, timezone

    if value is None:
        return [] if kind == "Array(String)" else None
    if kind == "DateTime":
        if isinstance(value, str):
            value = datetime.fromisoformat(value.replace(" ", "T"))
        elif isinstance(value, date) and not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day)
        assert isinstance(value, datetime)
        value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).replace(microsecond=0).isoformat()
    if kind == "Int64":
        return int(value)
    if kind == "Float64":
        return float(value)
    if kind == "Bool":
        return bool(value)
    if kind == "Array(String)":
        return [str(v) for v in value]
    return str(value)
