"""Connected tables in PostgreSQL with pgvector: ``information_schema`` and ``<=>`` with bound parameters.

Every session is opened ``READ ONLY`` with a ``statement_timeout``, in UTC, and sends only ``SELECT``s.
The search is ``ORDER BY vector <=> %s LIMIT n`` (``<->`` for L2), which an HNSW index on the column
serves; with a selective filter pgvector's HNSW can return fewer than ``limit`` rows unless the table's
operator sets ``hnsw.iterative_scan`` (pgvector 0.8+) for the role, which this module does not change.
"""

from __future__ import annotations

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
    TableColumn,
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

    def select(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Rows of one statement, in a READ ONLY transaction of this engine's session."""
        import psycopg

        with self.lock:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.connection.url, password=self.password or None,
                                                options=f"-c statement_timeout={self.timeout_ms} -c TimeZone=UTC",
                                                autocommit=False, connect_timeout=10)
                    self.conn.read_only = True
                with self.conn.transaction(), self.conn.cursor() as cur:
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

    def nearest(self, table: str, vector: str, metric: Metric, query: np.ndarray, where: Filter | None,
                columns: list[Column], limit: int) -> list[tuple[dict[str, Any], float]]:
        sql, params = compile_postgres(where, self._column_sql) if where is not None else ("true", [])
        literal = "[" + ",".join(repr(float(x)) for x in query) + "]"
        reads = ", ".join(f'"{c.name}"' for c in columns)
        distance = f'("{vector}" {_OPERATORS[metric]} %s::vector)'
        text = (f"SELECT {reads}, {distance} AS openqna_distance FROM {quoted(table)} WHERE {sql} "
                f"ORDER BY {distance} LIMIT %s")
        rows = self.select(text, [literal, *params, literal, int(limit)])
        return [({c.name: canonical_value(c.type, v) for c, v in zip(columns, row)}, float(row[-1])) for row in rows]

    def close(self) -> None:
        with self.lock:
            self._drop()
