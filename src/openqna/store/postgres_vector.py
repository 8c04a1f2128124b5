"""Search inside PostgreSQL: pgvector HNSW indexes and k-nearest queries (a mixin of PostgresStore).

The in-memory ``MemIndex`` (built by ``index/index_cache.py``) stays the search path; this
is the step after it, handed to the index cache as its nearest-neighbour provider
(``nearest_rows``).  The ``units.embedding`` column has no fixed dimension, so each
dimension in use gets one partial expression HNSW index (cosine), shared by every
project, deployment and field of that dimension, made on first use: a store whose
queries all search in memory pays no index upkeep on writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import psycopg

from openqna import settings
from openqna.filters.nodes import Column, Filter
from openqna.filters.sql import RecordSQL, compile_postgres
from openqna.store.base import RowsById

_VECTOR_MAX_DIM, _HALFVEC_MAX_DIM = 2000, 4000  # the most dimensions an HNSW index takes, per type
_QUERY = object()  # where the query vector goes among a search's parameters
_LOCK_KEY = 0x6F70656E  # pg_advisory_lock(key, dim) serialising index builds ("open")
_BUILD_MEMORY = "1GB"  # maintenance_work_mem while the HNSW index is built (then reset)
_RECHECK_SECONDS = 30.0  # how often a process looks again for an HNSW index it found missing
log = logging.getLogger("openqna.store.postgres")


_RECORD = RecordSQL(metadata="r.metadata", source="r.source", kind="r.kind", id="r.id")
_CASTS = {"String": "", "Int64": "::bigint", "Float64": "::double precision", "Bool": "::boolean",
          "DateTime": "::timestamptz"}


def record_column(column: Column) -> str:
    """A ``where_str`` column of a ``records r`` row, typed for ``compile_postgres``.

    It reads what the index's rows hold under that name (``MemIndex``): the typed ``fields`` of a table
    row, else a metadata value, else (for ``source``) the record's source.  Column names are identifiers,
    so they are safe inside the JSON path.
    """
    name = column.name
    value = f"coalesce(r.fields->'{name}', r.metadata->'{name}'{', to_json(r.source)' if name == 'source' else ''})"
    if column.type == "Array(String)":
        return f"ARRAY(SELECT json_array_elements_text(CASE WHEN json_typeof({value}) = 'array' THEN {value} END))"
    return f"(({value} #>> '{{}}'){_CASTS[column.type]})"


def filter_to_sql(f: Filter | None) -> tuple[str | None, list[Any]]:
    """A retrieval filter as an SQL condition on ``records r`` (for ``vector_search_sql``) and its parameters."""
    if f is None:
        return None, []
    return compile_postgres(f, record_column, _RECORD)


class VectorSearch:
    """Search in the database: a mixin of PostgresStore (uses its _conn, _read_tx, current, _hnsw_ready)."""

    # What PostgresStore provides, declared so the checker knows the mixin's host.
    _hnsw_ready: set[str]
    _hnsw_checked: dict[str, float]
    _hnsw_building: set[str]
    _conn: Callable[[], AbstractContextManager[psycopg.Connection]]
    _read_tx: Callable[[], AbstractContextManager[psycopg.Connection]]
    current: Callable[[str, str], tuple[int, int]]

    @staticmethod
    def _hnsw_name(dim: int) -> str:
        return f"units_hnsw_{int(dim)}"

    @staticmethod
    def _hnsw_type(dim: int) -> str:
        """What the index holds: HNSW takes ``vector`` up to 2,000 dimensions, ``halfvec`` up to 4,000."""
        if dim > _HALFVEC_MAX_DIM:
            raise ValueError(f"HNSW indexes hold at most {_HALFVEC_MAX_DIM} dimensions, not {dim}")
        return "vector" if dim <= _VECTOR_MAX_DIM else "halfvec"

    def ensure_vector_index(self, dim: int) -> str:
        """Create (once, without blocking writers) the HNSW index of all ``dim``-dimensional vectors.

        The ``embedding`` column has no fixed dimension, so each dimension in use gets a
        partial expression index: ``(embedding::vector(dim)) vector_cosine_ops WHERE
        vector_dims(embedding) = dim``, shared by every project, deployment and field of that
        dimension (queries filter those while the scan iterates); above 2,000 dimensions it holds
        ``halfvec`` (the most HNSW takes; scores are still computed from the full vectors).  Made on first use by
        ``vector_search_sql``; from then on every write of such vectors maintains it.
        """
        dim = int(dim)
        name = self._hnsw_name(dim)
        if name in self._hnsw_ready:
            return name
        with self._conn() as db:
            # A session lock: CREATE INDEX CONCURRENTLY cannot run inside a transaction.
            db.execute("SELECT pg_advisory_lock(%s, %s)", (_LOCK_KEY, dim))
            try:
                row = db.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                                 (name,)).fetchone()
                if row is not None and not row[0]:  # left invalid by a build that failed
                    db.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    row = None
                if row is None:
                    kind = self._hnsw_type(dim)
                    # pgvector builds the graph in memory while it fits in maintenance_work_mem (64 MB by
                    # default, ~100k vectors of 384 dimensions need ~250 MB), far faster than on disk.
                    db.execute(f"SET maintenance_work_mem = '{_BUILD_MEMORY}'")
                    db.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON units USING hnsw"
                               f" ((embedding::{kind}({dim})) {kind}_cosine_ops) WHERE vector_dims(embedding) = {dim}")
                    db.execute("RESET maintenance_work_mem")
                    # Fresh statistics, so the planner weighs the new index against the B-trees now
                    # rather than after autovacuum's next pass.
                    db.execute("ANALYZE units, records")
            finally:
                db.execute("SELECT pg_advisory_unlock(%s, %s)", (_LOCK_KEY, dim))
        self._hnsw_ready.add(name)
        return name

    def _vector_search_query(self, pid: int, deployment: str, dim: int, field: str, limit: int,
                             filter_sql: str | None, params: tuple[Any, ...] | list[Any]) -> tuple[str, list[Any]]:
        dim = int(dim)
        kind = self._hnsw_type(dim)
        cast = f"::vector({dim})" + (f"::{kind}({dim})" if kind != "vector" else "")
        indexed = f"u.embedding::{kind}({dim}) <=> %s{cast}"  # the index's expression, so the planner can use it
        join, where = "", ""
        if filter_sql:
            join = " JOIN records r ON r.project_id=u.project_id AND r.deployment=u.deployment AND r.id=u.record_id"
            where = f" AND ({filter_sql})"
        sql = (f"WITH hits AS MATERIALIZED (SELECT u.record_id, u.embedding <=> %s::vector AS distance FROM units u{join}"
               f" WHERE vector_dims(u.embedding) = {dim} AND u.project_id=%s AND u.deployment=%s AND u.field=%s{where}"
               f" ORDER BY {indexed} LIMIT %s)"
               " SELECT record_id, 1 - min(distance), (SELECT count(*) FROM hits) FROM hits GROUP BY record_id"
               " ORDER BY min(distance), record_id")
        return sql, [_QUERY, pid, deployment, field, *params, _QUERY, limit]

    def vector_search_sql(self, project: str, deployment: str, vector: np.ndarray, k: int,
                          filter_sql: str | None = None, params: tuple[Any, ...] | list[Any] = (), *,
                          field: str = "q") -> list[tuple[int, float]]:
        """The ``k`` records nearest ``vector``, searched by PostgreSQL: [(record id, cosine similarity)], best first.

        A record scores by its best unit of ``field`` ("q": its questions, "a": its answer), as
        ``MemIndex.dense`` does.  ``filter_sql`` is an SQL condition on the record (``r``, a row of
        ``records``) and its unit (``u``) with ``%s`` placeholders bound from ``params``, e.g.
        ``filter_to_sql(MetaEq("category", "power"))``; it is trusted SQL, never user text.  The
        HNSW index is scanned iteratively (``hnsw.iterative_scan = relaxed_order``), so a selective
        filter still yields ``k`` records when that many match; the order is made exact afterwards.
        """
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if k <= 0 or query.shape[0] == 0:
            return []
        self.ensure_vector_index(query.shape[0])
        pid, _ = self.current(project, deployment)
        return self._vector_search(pid, deployment, query, k, filter_sql, params, field)

    def _vector_search(self, pid: int, deployment: str, query: np.ndarray, k: int, filter_sql: str | None,
                       params: tuple[Any, ...] | list[Any], field: str) -> list[tuple[int, float]]:
        dim = query.shape[0]
        limit = k if field == "a" else 2 * k
        while True:
            sql, args = self._vector_search_query(pid, deployment, dim, field, limit, filter_sql, params)
            with self._read_tx() as db:
                db.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                db.execute(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, limit))}")
                rows = db.execute(sql, [query if a is _QUERY else a for a in args]).fetchall()
            units = rows[0][2] if rows else 0
            # Several questions of one record can fill the unit limit: widen it until k records come back
            # or every matching unit has been seen.
            if len(rows) >= k or units < limit:
                break
            limit *= 4
        return [(int(rid), float(sim)) for rid, sim, _ in rows[:k]]

    # -- candidates for the ranker ------------------------------------------------------------
    def vector_index_ready(self, dim: int) -> bool:
        """Whether the HNSW index of ``dim``-dimensional vectors exists; starts building it (in the background) if not.

        Building an HNSW index over a large table takes minutes, so no query waits for it: until
        it is valid, the ranker searches its in-memory index instead.
        """
        name = self._hnsw_name(dim)
        if name in self._hnsw_ready:
            return True
        now = time.monotonic()
        if now < self._hnsw_checked.get(name, 0.0):
            return False
        self._hnsw_checked[name] = now + _RECHECK_SECONDS
        with self._conn() as db:
            row = db.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                             (name,)).fetchone()
        if row is not None and row[0]:
            self._hnsw_ready.add(name)
            return True
        if row is None and name not in self._hnsw_building:
            self._hnsw_building.add(name)

            def build() -> None:
                try:
                    self.ensure_vector_index(dim)
                except Exception:  # noqa: BLE001 - a failed build leaves the in-memory search in place
                    log.exception("building %s failed; vector candidates come from memory", name)
                finally:
                    self._hnsw_building.discard(name)

            threading.Thread(target=build, name=f"openqna-{name}", daemon=True).start()
        return False

    def nearest_rows(self, project_id: int, deployment: str, index: RowsById, field: str, query: np.ndarray, k: int,
                     flt: Filter | None, eligible: np.ndarray) -> np.ndarray | None:
        """Candidate rows of ``index`` from pgvector's HNSW (``MemIndex.nearest_rows``); None: search in memory.

        By default (OPENQNA_PG_VECTOR_SEARCH=memory) every question searches in memory: the
        index already holds the vectors for rescoring, and its IVF search answers in well under a
        millisecond (100k QnAs, bench/stores.py, one run: p50 6.3 ms a question in memory against
        16.6 ms with pgvector).  Questions whose filter
        leaves out any record always do: the index holds the filter's mask and the IVF search takes
        it as a selector, where pgvector's iterative scan tested the filter row by row as it
        visited them (10% filter: p50 82 ms against 9 ms; where_str filters compiled by
        ``filters.sql`` lose the same way, see ``bench/pg_filters.py``).  A filter that keeps
        every record still goes into the SQL (``filter_to_sql``): pgvector reads the database as it
        is now, which may hold records the index has not seen yet.
        """
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        if (settings.pg_vector_search() != "pgvector" or not eligible.all()
                or not self.vector_index_ready(query.shape[0])):
            return None
        filter_sql, params = filter_to_sql(flt)
        hits = self._vector_search(project_id, deployment, query, k, filter_sql, params, field)
        rows = np.asarray([index.row_of[rid] for rid, _ in hits if rid in index.row_of], dtype=np.int64)
        kept: np.ndarray = rows[eligible[rows]]
        return kept
