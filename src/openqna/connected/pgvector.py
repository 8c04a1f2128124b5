"""Connected tables in PostgreSQL with pgvector: ``information_schema`` and ``<=>`` with bound parameters.

Every session is opened ``READ ONLY`` with a ``statement_timeout``, in UTC, and sends only ``SELECT``s.
The search is ``ORDER BY vector <=> %s LIMIT n`` (``<->`` for L2).  Without an index built for that operator
the planner scans every row: exact.  With an HNSW or IVFFlat index (``pg_index``, its access method and
operator class) the same statement is sent with transaction-local settings (``set_config(..., true)``, a
``SELECT``): a wider search than pgvector's default (``hnsw.ef_search``, ``ivfflat.probes``) and, on pgvector
0.8+, an iterative scan (``relaxed_order``, re-sorted outside), so a filter the planner applies after the
index goes on reading it until ``limit`` rows pass; older versions read ``POSTFILTER_MULTIPLIER`` times
``limit`` rows from the index and filter them outside.  Whether the filter goes before or after the index is
the planner's choice (a selective filter with its own index is read first).  When fewer than ``limit`` rows
come back, the search runs again with index scans off: exact over the rows the filter keeps.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any

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
from openqna.filters.sql import compile_postgres

_TYPES: dict[str, ColumnType] = {
    "text": "String", "character varying": "String", "character": "String", "name": "String",
    "smallint": "Int64", "integer": "Int64", "bigint": "Int64",
    "real": "Float64", "double precision": "Float64", "numeric": "Float64",
    "boolean": "Bool", "timestamp with time zone": "DateTime", "timestamp without time zone": "DateTime",
    "date": "DateTime",
}  # fmt: skip
_CANONICAL = {"String": "text", "Int64": "bigint", "Float64": "double precision", "Bool": "boolean",
              "DateTime": "timestamptz", "Array(String)": "text[]"}
_DIM = re.compile(r"vector\((\d+)\)")
_OPERATORS = {"cosine": "<=>", "l2": "<->"}
_OPCLASSES: dict[Metric, str] = {"cosine": "vector_cosine_ops", "l2": "vector_l2_ops"}
# SQLSTATEs of a table that changed under its connection (a filter names only the columns it was described with)
_CHANGED = {"42703": "a column it reads is gone", "42P01": "the table is gone", "3F000": "its schema is gone",
            "42501": "reading it is no longer granted"}
_LISTS = re.compile(r"lists\s*=\s*'?(\d+)")
# pgvector's default is 40.  At 1M rows (bench/connected.py, an index built with m 32, ef_construction 128),
# recall@10 was 0.975 at 100 and 1.00 at 200 and 400, each a few ms.
HNSW_EF_SEARCH = 200
POSTFILTER_MULTIPLIER = 20  # pgvector before 0.8: rows read from the index per row asked for, then filtered


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _probes(definition: str) -> int:
    """IVFFlat lists to probe: the square root of the index's lists (pgvector's advice), at least 1."""
    lists = _LISTS.search(definition)
    return max(1, math.ceil(math.sqrt(int(lists.group(1))))) if lists else 10


def quoted(name: str) -> str:
    return ".".join(f'"{part}"' for part in table_name(name))


class PostgresTable:
    dialect = "PostgreSQL"

    def __init__(self, connection: Connection, password: str, timeout: float):
        self.connection = connection
        self.password = password
        self.timeout_ms = max(1, round(timeout * 1000))
        self.conn: Any = None
        self.lock = threading.Lock()
        self.engine_types: dict[str, str] = {}

    def select(self, sql: str, params: list[Any], settings: dict[str, str] | None = None) -> list[tuple[Any, ...]]:
        """Rows of one statement, in a READ ONLY transaction of this engine's session, with ``settings`` made
        for that transaction only."""
        import psycopg

        with self.lock:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.connection.url, password=self.password or None,
                                                options=f"-c statement_timeout={self.timeout_ms} -c TimeZone=UTC",
                                                autocommit=False, connect_timeout=10)
                    self.conn.read_only = True
                with self.conn.transaction(), self.conn.cursor() as cur:
                    if settings:
                        cur.execute("SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(settings)),
                                    [x for pair in settings.items() for x in pair])
                    cur.execute(sql, params)
                    return list(cur.fetchall())
            except psycopg.errors.QueryCanceled:
                raise EngineTimeout("The table's PostgreSQL server did not answer in time; narrow where_str or "
                                    "try again later.") from None
            except psycopg.OperationalError:
                self._drop()
                raise EngineUnavailable("The table's PostgreSQL server cannot be reached or refused the connection; "
                                        "its operator should check the connection.") from None
            except psycopg.Error as exc:
                state = exc.sqlstate or "unknown"
                if state in _CHANGED:
                    raise TableChanged(f"The table's PostgreSQL server refused the query: SQLSTATE {state} "
                                       f"({_CHANGED[state]}); the table has changed since it was connected, and "
                                       "its operator should connect it again.") from None
                raise EngineRejected(f"The table's PostgreSQL server refused the query: SQLSTATE {state}. Check "
                                     "where_str against the columns in the tool description.") from None

    def _drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None

    def describe(self, table: str) -> list[TableColumn]:
        parts = table_name(table)
        schema_sql = "table_schema = %s" if len(parts) == 2 else "table_schema = ANY(current_schemas(false))"
        rows = self.select(
            "SELECT c.column_name, c.data_type, c.udt_name, format_type(a.atttypid, a.atttypmod), "
            "coalesce(col_description(a.attrelid, a.attnum), '') FROM information_schema.columns c "
            "JOIN pg_attribute a ON a.attrelid = (quote_ident(c.table_schema) || '.' || "
            "quote_ident(c.table_name))::regclass AND a.attname = c.column_name "
            f"WHERE c.table_name = %s AND {schema_sql} ORDER BY c.ordinal_position",
            [parts[-1], parts[0]] if len(parts) == 2 else [parts[-1]])
        out = []
        for name, data_type, udt, formatted, comment in rows:
            kind: ColumnType | None = _TYPES.get(data_type)
            if data_type == "ARRAY" and udt in ("_text", "_varchar", "_bpchar"):
                kind = "Array(String)"
            dim = None
            if udt == "vector":
                match = _DIM.match(formatted)
                dim = int(match.group(1)) if match else 0
            self.engine_types[name] = formatted
            out.append(TableColumn(name, formatted, kind, comment, dim))
        return out

    def vector_dim(self, table: str, column: TableColumn) -> int:
        if column.dim:
            return column.dim
        rows = self.select(f'SELECT vector_dims("{column.name}") FROM {quoted(table)} '
                          f'WHERE "{column.name}" IS NOT NULL LIMIT 1', [])
        return int(rows[0][0]) if rows else 0

    def count(self, table: str) -> int:
        return int(self.select(f"SELECT count(*) FROM {quoted(table)}", [])[0][0])

    def _column_sql(self, c: Column) -> str:
        x = f'"{c.name}"'
        canonical = _CANONICAL[c.type]
        engine = self.engine_types.get(c.name, canonical)
        same = engine == canonical or (canonical == "timestamptz" and engine == "timestamp with time zone")
        return x if same else f"({x})::{canonical}"

    def vector_indexes(self, table: str, vector: str) -> list[VectorIndex]:
        rows = self.select(
            "SELECT i.relname, am.amname, opc.opcname, pg_get_indexdef(i.oid), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector') "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam "
            "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = x.indkey[0] "
            "JOIN pg_opclass opc ON opc.oid = x.indclass[0] "
            "WHERE x.indrelid = to_regclass(%s) AND a.attname = %s AND am.amname IN ('hnsw', 'ivfflat') "
            "AND x.indisvalid AND x.indpred IS NULL ORDER BY i.relname", [quoted(table), vector])
        metrics = {v: k for k, v in _OPCLASSES.items()}
        return [VectorIndex(str(name), str(method), metrics.get(str(opclass)), str(definition),
                            _version(str(version or "0")) >= (0, 8)) for name, method, opclass, definition, version in rows]

    def index_ddl(self, table: str, vector: str, metric: Metric, dim: int) -> str:
        # pgvector's defaults (m 16, ef_construction 64) reached recall@10 0.83 at best on bench/connected.py's 1M rows
        return (f'CREATE INDEX ON {quoted(table)} USING hnsw ("{vector}" {_OPCLASSES[metric]}) '
                "WITH (m = 32, ef_construction = 128);")

    def nearest(self, table: str, vector: str, metric: Metric, query: np.ndarray, where: Filter | None,
                columns: list[Column], limit: int,
                index: VectorIndex | None = None) -> list[tuple[dict[str, Any], float]]:
        sql, params = compile_postgres(where, self._column_sql) if where is not None else ("true", [])
        literal = "[" + ",".join(repr(float(x)) for x in query) + "]"
        reads = ", ".join(f'"{c.name}"' for c in columns)
        distance = f'("{vector}" {_OPERATORS[metric]} %s::vector)'
        text = (f"SELECT {reads}, {distance} AS openqna_distance FROM {quoted(table)} WHERE {sql} "
                f"ORDER BY {distance} LIMIT %s")
        values = [literal, *params, literal, int(limit)]
        if index is None:
            return self.rows(text, values, columns)
        method = index.method
        settings = {"hnsw.ef_search": str(min(1000, max(HNSW_EF_SEARCH, limit)))} if method == "hnsw" else {
            "ivfflat.probes": str(_probes(index.definition))}
        if index.iterative_scan:
            settings[f"{method}.iterative_scan"] = "relaxed_order"  # slightly out of order: sorted again outside
            # (a subquery with a LIMIT is never merged into the outer query, as a MATERIALIZED CTE is not)
            found = self.rows(f"SELECT * FROM ({text}) nearest ORDER BY openqna_distance", values, columns, settings)
        elif where is None:
            found = self.rows(text, values, columns, settings)
        else:
            wide = limit * POSTFILTER_MULTIPLIER
            if method == "hnsw":
                settings["hnsw.ef_search"] = str(min(1000, max(HNSW_EF_SEARCH, wide)))
            found = self.rows(f"SELECT {reads}, openqna_distance FROM (SELECT *, {distance} AS openqna_distance "
                              f"FROM {quoted(table)} ORDER BY {distance} LIMIT %s) nearest WHERE {sql} "
                              "ORDER BY openqna_distance LIMIT %s", [literal, literal, wide, *params, int(limit)],
                              columns, settings)
        if len(found) >= limit:
            return found
        return self.rows(text, values, columns, {"enable_indexscan": "off"})  # exact over what the filter keeps

    def rows(self, text: str, values: list[Any], columns: list[Column],
             settings: dict[str, str] | None = None) -> list[tuple[dict[str, Any], float]]:
        return [({c.name: canonical_value(c.type, v) for c, v in zip(columns, row)}, float(row[-1]))
                for row in self.select(text, values, settings)]

    def close(self) -> None:
        with self.lock:
            self._drop()
