"""Connected tables in ClickHouse/MyScale: ``DESCRIBE TABLE`` and a vector search with bound parameters.

Two clients run the same SQL text with the same parameters, serialised by clickhouse-connect's own
binder (``bind_query``): ``HttpClient`` (clickhouse-connect over HTTP, a ClickHouse or MyScale server)
and ``ChdbClient`` (chdb, ClickHouse embedded in the process, which has no HTTP server; the tests and
the bench drive the SQL through it).  Only ``SELECT`` and ``DESCRIBE`` statements are ever built here.

The search is ``cosineDistance`` or ``L2Distance`` over the vector column, ``ORDER BY`` distance ``LIMIT`` n:
brute force over every row, unless the table has a ``vector_similarity`` index (HNSW) built for that
distance (``system.data_skipping_indices``).  Then ClickHouse answers the same query from the index, rows and
distances both (rescoring them from the vectors, ``vector_search_with_rescoring``, read 10 scattered granules of
1.5 KB vectors and took 600 ms against 90 ms at 1M rows; the index's distances were within 2e-4 of the exact
ones).  A ``where_str`` is applied after the index (ClickHouse's post-filter) to ``POSTFILTER_MULTIPLIER`` times
``limit`` candidates; when fewer than ``limit`` rows pass (a selective filter), the query runs again
pre-filtered, which is brute force over the rows that pass: exact, and cheap when few do.  Measured on 1M rows
in ``bench/connected.py``; see bench/results.md.  The index is the engine's: chdb 4.4.0 builds it on many threads
and a build may leave rows out of the graph (0 to 18 of 500 rows sampled, over 12 builds of the same 2,000 rows),
rows no search through the index returns; no setting of the query brings them back.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Protocol

import numpy as np

from openqna.connected.engine import (
    Connection,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    Metric,
    TableChanged,
    TableColumn,
    VectorIndex,
    canonical_value,
    table_name,
)
from openqna.filters.nodes import Column, ColumnType, Filter
from openqna.filters.sql import compile_clickhouse

_INTS = {f"{s}Int{b}" for s in ("", "U") for b in (8, 16, 32, 64)}
_FLOATS = {"Float32", "Float64"}
_CODE = re.compile(r"Code: (\d+)")
_NAME = re.compile(r"\(([A-Z][A-Z_]+)\)")
_TIMEOUTS = {159, 160, 209, 210, 394}  # TIMEOUT_EXCEEDED, TOO_SLOW, SOCKET_TIMEOUT, NETWORK_ERROR, QUERY_WAS_CANCELLED
# the server's own trouble, whatever the query: LOGICAL_ERROR, CANNOT_ALLOCATE_MEMORY, TOO_MANY_SIMULTANEOUS_QUERIES,
# ABORTED, MEMORY_LIMIT_EXCEEDED, NOT_ENOUGH_SPACE, CORRUPTED_DATA, SYSTEM_ERROR, CANNOT_SCHEDULE_TASK,
# KEEPER_EXCEPTION, POCO_EXCEPTION, STD_EXCEPTION, UNKNOWN_EXCEPTION
_SERVER_SIDE = {49, 173, 202, 236, 241, 243, 246, 425, 439, 999, 1000, 1001, 1002}
_UNAVAILABLE = {192, 193, 194, 195, 516}  # unknown user, wrong password, ..., AUTHENTICATION_FAILED
_NO_SUCH_TABLE = {60, 81}  # UNKNOWN_TABLE, UNKNOWN_DATABASE
# a table that changed under its connection (a filter names only the columns it was described with):
# NOT_FOUND_COLUMN_IN_BLOCK, THERE_IS_NO_COLUMN, UNKNOWN_IDENTIFIER, the two above, ACCESS_DENIED
_CHANGED = {10, 16, 47, *_NO_SUCH_TABLE, 497}
_DISTANCES: dict[Metric, str] = {"cosine": "cosineDistance", "l2": "L2Distance"}
_METRICS: dict[str, Metric] = {v: k for k, v in _DISTANCES.items()}
_INDEX_ARGS = re.compile(r"vector_similarity\(\s*'(\w+)'\s*,\s*'(\w+)'")
# Candidates the index hands the post-filter, per row asked for: a filter that keeps 10% of rows leaves ~30
# of 300 (for limit 10); one that keeps fewer than ~3% leaves too few, and the search runs pre-filtered.
# Measured at 1M rows, 10% filter: x10 recall@10 0.86, x20 0.98, x30 1.00 at 78 ms p50, x50 1.00 at 136 ms.
POSTFILTER_MULTIPLIER = 30


class ClickHouseClient(Protocol):
    def query(self, sql: str, parameters: dict[str, object]) -> list[list[Any]]:
        """Rows of ``sql`` with ``parameters`` bound by the server (``{name:Type}`` placeholders)."""


def column_type(engine_type: str) -> ColumnType | None:
    """The where_str type a ClickHouse column reads as, or None (vectors, maps, tuples, ...)."""
    t = engine_type
    for wrapper in ("LowCardinality(", "Nullable("):
        while t.startswith(wrapper):
            t = t[len(wrapper):-1]
    if t.startswith("Array("):
        inner = column_type(t[6:-1])
        return "Array(String)" if inner == "String" else None
    if t == "String" or t.startswith(("FixedString(", "Enum8(", "Enum16(")):
        return "String"
    if t in _INTS:
        return "Int64"
    if t in _FLOATS or t.startswith("Decimal"):
        return "Float64"
    if t == "Bool":
        return "Bool"
    if t.startswith(("DateTime", "Date")):
        return "DateTime"
    return None


def _vector_type(engine_type: str) -> bool:
    return engine_type in ("Array(Float32)", "Array(Float64)", "Array(BFloat16)")


def quoted(name: str) -> str:
    return ".".join(f"`{part}`" for part in table_name(name))


class ClickHouseTable:
    dialect = "ClickHouse"

    def __init__(self, client: ClickHouseClient, timeout: float):
        self.client = client
        self.settings = f" SETTINGS max_execution_time = {max(1, round(timeout))}"

    def describe(self, table: str) -> list[TableColumn]:
        try:
            rows = self.client.query(f"DESCRIBE TABLE {quoted(table)}", {})
        except (EngineRejected, TableChanged) as exc:
            if exc.engine_code in _NO_SUCH_TABLE:
                return []  # connect_table says there is no such table, not "check where_str"
            raise
        return [TableColumn(str(r[0]), str(r[1]), column_type(str(r[1])), str(r[4] or ""),
                            0 if _vector_type(str(r[1])) else None) for r in rows]

    def vector_dim(self, table: str, column: TableColumn) -> int:
        rows = self.client.query(f"SELECT length(`{column.name}`) FROM {quoted(table)} "
                                 f"WHERE notEmpty(`{column.name}`) LIMIT 1{self.settings}", {})
        return int(rows[0][0]) if rows else 0

    def count(self, table: str) -> int:
        return int(self.client.query(f"SELECT count() FROM {quoted(table)}{self.settings}", {})[0][0])

    def vector_indexes(self, table: str, vector: str) -> list[VectorIndex]:
        parts = table_name(table)
        database = "{database:String}" if len(parts) == 2 else "currentDatabase()"
        rows = self.client.query(
            "SELECT name, type_full, expr FROM system.data_skipping_indices WHERE type = 'vector_similarity' AND "
            f"database = {database} AND table = {{table:String}}{self.settings}",
            {"database": parts[0], "table": parts[-1]})
        out = []
        for name, definition, expr in rows:
            args = _INDEX_ARGS.match(str(definition))
            if str(expr).strip("`") == vector and args:
                out.append(VectorIndex(str(name), f"vector_similarity {args.group(1)}", _METRICS.get(args.group(2)),
                                       str(definition)))
        return out

    def index_ddl(self, table: str, vector: str, metric: Metric, dim: int) -> str:
        name = f"{vector}_hnsw"
        return (f"ALTER TABLE {quoted(table)} ADD INDEX `{name}` `{vector}` TYPE vector_similarity('hnsw', "
                f"'{_DISTANCES[metric]}', {dim});\nALTER TABLE {quoted(table)} MATERIALIZE INDEX `{name}`;")

    def nearest(self, table: str, vector: str, metric: Metric, query: np.ndarray, where: Filter | None,
                columns: list[Column], limit: int,
                index: VectorIndex | None = None) -> list[tuple[dict[str, Any], float]]:
        sql, params = compile_clickhouse(where, lambda c: f"`{c.name}`") if where is not None else ("1", {})
        params = {**params, "query_vector": [float(x) for x in query], "limit": int(limit)}
        # toDateTime64(x, 0, 'UTC') reads Date, Date32, DateTime and DateTime64 columns alike (toTimeZone refuses a
        # Date: error 43); a zero date reads as ClickHouse shows it, 1970-01-01 00:00:00, and NULL stays null
        reads = ", ".join(f"toDateTime64(`{c.name}`, 0, 'UTC')" if c.type == "DateTime" else f"`{c.name}`"
                          for c in columns)
        distance = f"{_DISTANCES[metric]}(`{vector}`, {{query_vector:Array(Float32)}})"
        text = (f"SELECT {reads}, {distance} AS openqna_distance FROM {quoted(table)} WHERE {sql} "
                f"ORDER BY openqna_distance ASC LIMIT {{limit:UInt32}}{self.settings}")
        if index is None or where is None:  # with an index, ClickHouse searches it for this very query
            return self.rows(text, params, columns)
        found = self.rows(text + ", vector_search_filter_strategy = 'postfilter', "
                          f"vector_search_index_fetch_multiplier = {POSTFILTER_MULTIPLIER}", params, columns)
        if len(found) >= limit:
            return found
        return self.rows(text + ", vector_search_filter_strategy = 'prefilter'", params, columns)

    def rows(self, text: str, params: dict[str, object], columns: list[Column]) -> list[tuple[dict[str, Any], float]]:
        out = []
        for row in self.client.query(text, params):
            fields = {c.name: canonical_value(c.type, v) for c, v in zip(columns, row)}
            out.append((fields, float(row[-1])))
        return out

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            close()


def engine_error(exc: Exception) -> Exception:
    """A ClickHouse error as one of ours: its code and name, never its message (host, user, SQL)."""
    message = str(exc)
    code_match, name_match = _CODE.search(message), _NAME.search(message)
    code = int(code_match.group(1)) if code_match else None
    name = f" ({name_match.group(1)})" if name_match else ""
    if code in _TIMEOUTS or "timed out" in message.lower() or "timeout" in type(exc).__name__.lower():
        return EngineTimeout("The table's ClickHouse server did not answer in time; narrow where_str or try "
                             "again later.")
    if code in _UNAVAILABLE or code is None:
        return EngineUnavailable("The table's ClickHouse server cannot be reached or refused the connection; "
                                 "its operator should check the connection.")
    if code in _CHANGED:
        changed = TableChanged(f"The table's ClickHouse server refused the query: error {code}{name}; the table "
                               "has changed since it was connected, and its operator should connect it again.")
        changed.engine_code = code
        return changed
    if code in _SERVER_SIDE:
        failed = EngineUnavailable(f"The table's ClickHouse server could not run the query: error {code}{name}; try "
                                   "again later, and if it goes on, its operator should check the server.")
        failed.engine_code = code
        return failed
    rejected = EngineRejected(f"The table's ClickHouse server refused the query: error {code}{name}. Check "
                              "where_str against the columns in the tool description.")
    rejected.engine_code = code
    return rejected


class HttpClient:
    """clickhouse-connect over HTTP(S): server-side parameters, one client per connected table."""

    def __init__(self, connection: Connection, password: str, timeout: float):
        from urllib.parse import unquote, urlsplit

        import clickhouse_connect

        parts = urlsplit(connection.url)
        secure = parts.scheme.lower() == "clickhouses"
        try:
            self.client = clickhouse_connect.get_client(
                host=parts.hostname or "localhost", port=parts.port or (8443 if secure else 8123),
                username=unquote(parts.username or "default"), password=password,
                database=parts.path.strip("/") or "default", secure=secure,
                connect_timeout=min(timeout, 10), send_receive_timeout=timeout + 1)
        except Exception as exc:
            raise engine_error(exc) from None
        self.lock = threading.Lock()

    def query(self, sql: str, parameters: dict[str, object]) -> list[list[Any]]:
        try:
            with self.lock:  # a clickhouse-connect client runs one query at a time
                return [list(r) for r in self.client.query(sql, parameters=parameters).result_rows]
        except Exception as exc:
            raise engine_error(exc) from None

    def close(self) -> None:
        self.client.close()


def http_client(connection: Connection, password: str, timeout: float) -> HttpClient:
    return HttpClient(connection, password, timeout)


class ChdbClient:
    """chdb, ClickHouse in this process: the same SQL text and the same parameters as ``HttpClient``,
    serialised by clickhouse-connect's binder, so what runs here is what a server would be sent.  chdb locks its
    directory for the process that opens it, so one process serves a chdb table (``not_opened``).

    chdb holds one session per process, so tables in two directories take turns: a query holds the process's
    chdb lock from opening its directory's session to reading its result (closing a session under another table's
    running query aborted it, error 236, or hung it for good).  A query that cannot have the lock within
    ``timeout`` seconds is ``EngineTimeout``, as one the engine took too long over.
    """

    def __init__(self, path: str, timeout: float = 10.0):
        self.path = path
        self.timeout = timeout

    def query(self, sql: str, parameters: dict[str, object]) -> list[list[Any]]:
        from clickhouse_connect.driver.binding import bind_query

        bound, params = bind_query(sql, parameters)
        assert isinstance(bound, str)
        if not CHDB_LOCK.acquire(timeout=self.timeout):
            raise EngineTimeout("The table's embedded ClickHouse (chdb) was busy with other tables' queries for "
                                "longer than the search may take; try again later.")
        try:
            session = chdb_session(self.path)  # EngineUnavailable when chdb cannot open the directory
            try:
                result = session.query(bound, "JSONCompact",
                                       params={k.removeprefix("param_"): v for k, v in params.items()})
            except Exception as exc:
                raise engine_error(exc) from None
            data = result.data()
        finally:
            CHDB_LOCK.release()
        rows: list[list[Any]] = json.loads(data or '{"data": []}')["data"]
        return rows


_SESSIONS: dict[str, Any] = {}
# held from opening a directory's session to the end of a query on it: chdb has one session per process
CHDB_LOCK = threading.RLock()


def chdb_session(path: str) -> Any:
    """The process's chdb session on ``path``, closing the session of any other path (chdb allows one session at a
    time; tests share it).  A caller that queries it while other threads may switch paths holds ``CHDB_LOCK``
    across the query, as ``ChdbClient`` does.

    A directory chdb cannot open is ``EngineUnavailable``, never ``EngineRejected``: chdb reports every failure to
    open as error 36 (BAD_ARGUMENTS), which would read as a bad where_str.
    """
    import chdb.session

    with CHDB_LOCK:
        if path not in _SESSIONS:
            for other in list(_SESSIONS):
                _SESSIONS.pop(other).close()
            try:
                _SESSIONS[path] = chdb.session.Session(path)  # type: ignore[no-untyped-call]  # chdb ships no types
            except Exception:
                raise not_opened(path) from None
        return _SESSIONS[path]


def not_opened(path: str) -> EngineUnavailable:
    """Why chdb could not open ``path``, as far as this process can tell without chdb's message (which names the
    path and says only "Error initializing EmbeddedServer", the cause going to stderr)."""
    if locked_elsewhere(path):
        return EngineUnavailable("The table's chdb directory is open in another process: embedded ClickHouse serves "
                                 "one process at a time. Its operator should serve the table from one process only, "
                                 "or connect a ClickHouse server to serve it from several.")
    return EngineUnavailable("chdb could not open the table's directory; its operator should check the chdb:// URL "
                             "and the directory's permissions.")


def locked_elsewhere(path: str) -> bool:
    """Whether another process holds the lock a ClickHouse server (chdb's too) takes on its directory: an exclusive
    ``flock`` on ``status``, released when that process closes its session or ends."""
    import fcntl
    import os

    try:
        fd = os.open(os.path.join(path, "status"), os.O_RDONLY)
    except OSError:  # no status file: no server ever ran there, or it cannot be read
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases the shared lock taken when the file was free
    return False


def chdb_client(connection: Connection, timeout: float) -> ChdbClient:
    from urllib.parse import urlsplit

    path = urlsplit(connection.url).path
    if not path:
        raise EngineUnavailable("a chdb:// URL names a directory: chdb:///path/to/dir")
    return ChdbClient(path, timeout)


def close_chdb() -> None:
    """Close the process's chdb session (another path, or chdb's own in-memory session, may open next)."""
    with CHDB_LOCK:
        for path in list(_SESSIONS):
            _SESSIONS.pop(path).close()
