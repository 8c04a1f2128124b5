"""The server store: PostgreSQL with pgvector, for several API processes on one database.

Same data model and semantics as the embedded SQLite store (``store/sqlite.py``):
records, analysed terms and float32 vectors (pgvector ``vector``, one unconstrained
column since dimensions differ per embedder) live in PostgreSQL; every write moves
the knowledge base's version (a value of one global SEQUENCE), so every process's
index cache (``index/index_cache.py``) sees the others' writes on its next query.
Deployments are copies of the live rows (INSERT ... SELECT).

Every write is one transaction.  Writes that move a version or allocate ids lock
the project's row first (``FOR NO KEY UPDATE``), so writes to one project are
serialised across processes: ids never collide and each project's version only grows.

Schema creation and migrations run on open, under an advisory lock, recorded as
``schema_version`` in the ``meta`` table.  The ``vector`` extension is created if
missing (that needs a role allowed to create it; otherwise an administrator runs
``CREATE EXTENSION vector`` once).

Text columns that are ordered or compared use the "C" collation, so orderings are
bytewise and project names are case-insensitive for ASCII letters only, as with
SQLite's NOCASE.

``vector_search_sql`` and ``nearest_rows`` (from ``postgres_vector.VectorSearch``) search
inside PostgreSQL: HNSW, cosine distance, iterative scans so filters still fill k.  The
schema and its migrations are in ``postgres_schema.py``, the column codecs and the reader of
index rows in ``postgres_rows.py``.

The statements written as SQLite's are in ``statements.py``; what is here is PostgreSQL's own: ids and
versions under row locks and a sequence, records and units (``COPY``, arrays), deployments, the job queue's
claims and leases (``SKIP LOCKED``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Json
from psycopg_pool import ConnectionPool, PoolTimeout

from openqna.clock import now_iso
from openqna.records import Dialog, NotFound, ProjectNotFound, QnA, StoreFull, StoreUnavailable
from openqna.store.attached_files import AttachedFileStatements
from openqna.store.base import LIVE, RUNNING_JOB, Job, LeaseLost, Project, StoredQnA, fresh_ids
from openqna.store.postgres_rows import (
    PostgresIndexRows,
    dialog_from_json,
    dialog_json,
    json_value,
    register_vector_types,
)
from openqna.store.postgres_schema import SCHEMA_VERSION, migrate
from openqna.store.postgres_vector import VectorSearch, filter_to_sql
from openqna.store.statements import SharedStatements, percent_marks, record_ids
from openqna.turns import paused

log = logging.getLogger("openqna.store")


_JOB_LOCK_KEY = 0x6A6F6273  # pg_advisory_xact_lock(key, hash of kind/project) serialising ``put_job_alone`` ("jobs")


def _not_found(name: str) -> ProjectNotFound:
    return ProjectNotFound(f"The specified project was not found: {name}.")


# Whether the deployment named by the second parameter exists in project ``p`` (the first parameter: it is the
# live state, which always does), selected first by every read that checks it (``PostgresStore._checked``).
_DEPLOYED = "%s OR EXISTS(SELECT 1 FROM deployments d WHERE d.project_id=p.id AND d.name=%s)"


# How long a use waits for a connection while the server is known to be gone, and how long the pool keeps retrying
# one reconnection before it gives up and lets the next use start another (seconds).
OUTAGE_WAIT = 2.0
RECONNECT_SECONDS = 10.0
# SQLSTATE classes and codes of a server that is gone or going: connection exceptions, shutdowns, too many clients
_LOST_STATES = ("08", "57P01", "57P02", "57P03", "53300")


def _lost(exc: psycopg.OperationalError) -> bool:
    """Whether ``exc`` means the server cannot be used (rather than that it refused one statement)."""
    if isinstance(exc, PoolTimeout):
        return True
    state = exc.sqlstate
    return state is None or state.startswith(_LOST_STATES)  # no SQLSTATE: the client lost the connection itself


def _unreachable(dsn: str, exc: psycopg.Error) -> str:
    """Where and why, without the password: the host, port and database, and the driver's first line."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
        where = f" at {parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"
    except psycopg.Error:
        # a DSN the driver cannot read: its message quotes the DSN (or the password's bad escape), so none of it
        return ("cannot connect to the PostgreSQL store: OPENQNA_STORE is not a PostgreSQL URI or key=value string "
                "that libpq can read (check its brackets, and %-escape special characters in the password)")
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"cannot connect to the PostgreSQL store{where}: {reason}"


class PostgresStore(SharedStatements, AttachedFileStatements, VectorSearch):
    """Store protocol on PostgreSQL + pgvector; safe to share across threads and processes.

    ``dsn`` is a libpq URI or key=value string (``postgresql://user:pw@host/db``;
    ``?options=-csearch_path%3Dname`` selects a schema).  ``pool_size`` is the
    largest number of connections this store holds open at once.
    """

    remote = True  # every read is a round trip to the server, which a lock or the network can hold up

    def __init__(self, dsn: str, *, pool_size: int = 5, cache_dir: str | Path | None = None):
        """``cache_dir``: where this process's index cache saves the indexes of large knowledge bases, so that a
        restart loads them instead of reading every record again; None: never saved."""
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self.dsn = dsn
        self._hnsw_ready: set[str] = set()
        self._hnsw_checked: dict[str, float] = {}
        self._hnsw_building: set[str] = set()
        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(_unreachable(dsn, exc)) from None
        with conn:
            try:
                self.instance = migrate(conn)
            except psycopg.Error as exc:  # a search_path naming no schema, a user who may not create tables, ...
                reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise StoreUnavailable(f"cannot set up openqna's tables in the PostgreSQL store: {reason}") from None
        self.index_dir = None if cache_dir is None else Path(cache_dir) / "indexes" / f"pg-{self.instance[:16]}"
        self._lost_since: float | None = None  # when a use last found the server gone (None: it answers)
        # reconnect_timeout: the pool gives up a reconnection that keeps failing after this long, and the next use
        # starts a new one at once; its default (300 s, the delay doubling from 1 s) could leave a process answering
        # 503 for minutes after the server came back
        # the pool says "error connecting" at each reconnection attempt of an outage (40 lines in 30 s); ``_reachable``
        # says once that the server is lost and once that it is back
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        self._pool = ConnectionPool(dsn, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                                    configure=register_vector_types, open=True, name="openqna",
                                    reconnect_timeout=RECONNECT_SECONDS)

    # -- plumbing ------------------------------------------------------------------
    # Every use of a connection gives the thread's turn up (``openqna.turns.paused``): it waits for a pooled
    # connection and for the server's answers, and a query thread that held its turn meanwhile would keep the
    # other query threads from their Python work (``Service.turns``).  Every use also goes through
    # ``_reachable``, which turns a lost server into ``StoreUnavailable`` (a 503 in each caller's dialect).
    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        """A pooled connection in autocommit mode: each statement is its own transaction."""
        with self._reachable(), paused(), self._pool.connection(self._wait()) as conn:
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection]:
        """One transaction: committed when the block ends, rolled back if it raises; in a job's handler, only while
        the job is still this worker's (``RUNNING_JOB``)."""
        with self._reachable(), paused(), self._pool.connection(self._wait()) as conn, conn.transaction():
            yield conn
            lease = RUNNING_JOB.get()
            if lease is not None and conn.execute(
                    "UPDATE jobs SET lease_until=clock_timestamp() + make_interval(secs => %s) WHERE id=%s AND owner=%s"
                    " AND status='running' AND lease_until > clock_timestamp()",
                    (lease.seconds, lease.job_id, lease.owner)).rowcount == 0:
                raise LeaseLost(f"job {lease.job_id} lost its lease before this write: nothing of it was applied")

    @contextmanager
    def _read_tx(self) -> Iterator[psycopg.Connection]:
        """A read-only transaction whose reads all see the database as of its first one (REPEATABLE READ)."""
        with self._reachable(), paused(), self._pool.connection(self._wait()) as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    def _wait(self) -> float | None:
        """How long a use waits for a pooled connection: the pool's timeout, or only ``OUTAGE_WAIT`` seconds while
        the server is known to be lost, so that callers hear so at once instead of each waiting 30 s."""
        return OUTAGE_WAIT if self._lost_since is not None else None

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Run a use of the server; a connection lost or refused (a restart, a failover, the network) raises
        ``StoreUnavailable`` and drops every pooled connection that died with it, so that the first uses after the
        server is back get new ones instead of failing one by one.  A full disk on the server raises ``StoreFull``,
        as the embedded store's does (a 507, not a 500; a question's query-log entry is dropped)."""
        try:
            yield
        except psycopg.errors.DiskFull as exc:  # 53100: the server could not extend a file; it wrote none of this
            reason = (str(exc).strip().splitlines() or ["disk full"])[0]
            raise StoreFull(f"the disk of the PostgreSQL store is full ({reason}); nothing of this write was stored. "
                            "Free space on the database server and try again.") from None
        except psycopg.OperationalError as exc:
            if not _lost(exc):
                raise  # the server answered: a statement's own error (a deadlock, a timeout) is not an outage
            if self._lost_since is None:  # the first use to find it gone says so, once
                self._lost_since = time.monotonic()
                log.warning("%s; answering 503 until it is back", _unreachable(self.dsn, exc))
            if not isinstance(exc, PoolTimeout):
                self._pool.check()  # throws the dead idle connections away; the pool reconnects in the background
            raise StoreUnavailable(_unreachable(self.dsn, exc) + "; try again shortly") from None
        if self._lost_since is not None:
            log.warning("the PostgreSQL store is reachable again after %.1f s", time.monotonic() - self._lost_since)
            self._lost_since = None

    _EMPTY_BLOB = "''::bytea"

    def _writer(self, db: psycopg.Connection, project: str) -> int:
        return self._project_id(db, project, lock=True)  # FOR NO KEY UPDATE: one writer per project at a time

    @staticmethod
    def _sql(sql: str) -> str:
        return percent_marks(sql)

    def _reading(self) -> AbstractContextManager[psycopg.Connection]:
        return self._conn()

    @staticmethod
    def _many(db: psycopg.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with db.cursor() as cur:
            cur.executemany(sql, rows)

    @staticmethod
    def _json(value: Any) -> Json:
        return json_value(value)

    @staticmethod
    def _from_json(value: Any) -> Any:
        return value  # psycopg decodes json and jsonb columns

    def close(self) -> None:
        self._pool.close()

    @staticmethod
    def _bump(conn: psycopg.Connection, project_id: int, deployment: str) -> None:
        conn.execute("INSERT INTO versions VALUES(%s, %s, nextval('change_seq'))"
                     " ON CONFLICT (project_id, deployment) DO UPDATE SET seq=EXCLUDED.seq", (project_id, deployment))

    @staticmethod
    def _project_id(conn: psycopg.Connection, name: str, *, lock: bool = False) -> int:
        """The project's id; ``lock`` holds its row until the transaction ends (serialising writers)."""
        row = conn.execute('SELECT id FROM projects WHERE lower(name)=lower(%s COLLATE "C")'
                           + (" FOR NO KEY UPDATE" if lock else ""), (name,)).fetchone()
        if row is None:
            raise _not_found(name)
        project_id: int = row[0]
        return project_id

    # -- projects ----------------------------------------------------------------------
    _PROJECT_COLS = "name, description, language, multilingual, settings, embedder, created, modified, last_deployed"

    @staticmethod
    def _project_row(row: tuple[Any, ...]) -> Project:
        name, desc, lang, multi, settings, embedder, created, modified, deployed = row
        return Project(name, desc, lang, bool(multi), settings, embedder, created, modified, deployed)

    def create_project(self, project: Project) -> Project:
        stamp = now_iso()
        project.created = project.created or stamp
        project.modified = stamp
        with self._tx() as db:
            inserted = db.execute(
                "INSERT INTO projects(name, description, language, multilingual, settings, embedder, created, modified)"
                " VALUES(%s,%s,%s,%s,%s,%s,%s,%s) RETURNING id",
                (project.name, project.description, project.language, bool(project.multilingual),
                 json_value(project.settings), project.embedder, project.created, project.modified),
            ).fetchone()
            assert inserted is not None  # INSERT ... RETURNING returns its row (or raises)
            pid = inserted[0]
            self._bump(db, pid, LIVE)
        return project

    def get_project(self, name: str) -> Project:
        with self._conn() as db:
            row = db.execute(f'SELECT {self._PROJECT_COLS} FROM projects WHERE lower(name)=lower(%s COLLATE "C")',
                             (name,)).fetchone()
        if row is None:
            raise _not_found(name)
        return self._project_row(row)

    def list_projects(self) -> list[Project]:
        with self._conn() as db:
            rows = db.execute(f"SELECT {self._PROJECT_COLS} FROM projects ORDER BY lower(name)").fetchall()
        return [self._project_row(r) for r in rows]

    def update_project(self, project: Project) -> Project:
        project.modified = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project.name, lock=True)
            db.execute(
                "UPDATE projects SET description=%s, language=%s, multilingual=%s, settings=%s, embedder=%s,"
                " modified=%s WHERE id=%s",
                (project.description, project.language, bool(project.multilingual), json_value(project.settings),
                 project.embedder, project.modified, pid),
            )
            self._bump(db, pid, LIVE)
        return project

    def update_settings(self, name: str, expected: dict[str, Any], settings: dict[str, Any]) -> bool:
        with self._tx() as db:
            pid = self._project_id(db, name, lock=True)  # FOR UPDATE: no other writer until this commits
            row = db.execute("SELECT settings FROM projects WHERE id=%s", (pid,)).fetchone()
            assert row is not None  # _project_id found and locked the row
            current = row[0]
            if current != expected:
                return False
            db.execute("UPDATE projects SET settings=%s, modified=%s WHERE id=%s", (json_value(settings), now_iso(), pid))
            self._bump(db, pid, LIVE)
        return True

    def delete_project(self, name: str) -> None:
        with self._tx() as db:
            row = db.execute('SELECT id FROM projects WHERE lower(name)=lower(%s COLLATE "C") FOR UPDATE',
                             (name,)).fetchone()
            if row is None:
                raise _not_found(name)
            pid = row[0]
            for table in ("records", "units", "synonyms", "versions", "sources", "feedback", "queries", "deployments",
                          "deploy_versions", "deploy_events", "test_sets", "test_runs", "source_refresh",
                          "accepted_questions", "trained", "vector_store_files"):
                db.execute(f"DELETE FROM {table} WHERE project_id=%s", (pid,))
            db.execute("DELETE FROM projects WHERE id=%s", (pid,))

    # -- records -------------------------------------------------------------------------
    def _write_qnas(self, db: psycopg.Connection, pid: int, items: list[StoredQnA]) -> list[int]:
        stamp = now_iso()
        ids: list[int] = []
        row = db.execute("SELECT next_id FROM projects WHERE id=%s", (pid,)).fetchone()
        assert row is not None  # the caller found and locked the project's row in this transaction
        next_id = row[0]
        # a record given no id gets a free id that no record of this write names (it was given one that a later
        # record of the write then took over)
        named = {item.qna.id for item in items if item.qna.id is not None}
        latest: dict[int, StoredQnA] = {}  # an id given twice: the later item replaces the earlier, as in SQLite
        for item in items:
            q = item.qna
            if q.id is None:
                while next_id in named:
                    next_id += 1
                q.id = fresh_ids(next_id, 1)[0]
            next_id = max(next_id, q.id + 1)
            ids.append(q.id)
            latest.pop(q.id, None)
            latest[q.id] = item
        if latest:
            db.execute("DELETE FROM units WHERE project_id=%s AND deployment=%s AND record_id=ANY(%s)",
                       (pid, LIVE, list(latest)))
            with db.cursor() as cur:
                cur.executemany(
                    "INSERT INTO records VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                    " ON CONFLICT (project_id, deployment, id) DO UPDATE SET kind=EXCLUDED.kind,"
                    " questions=EXCLUDED.questions, answer=EXCLUDED.answer, source=EXCLUDED.source,"
                    " metadata=EXCLUDED.metadata, dialog=EXCLUDED.dialog, suggestions=EXCLUDED.suggestions,"
                    " content_hash=EXCLUDED.content_hash, modified=EXCLUDED.modified, fields=EXCLUDED.fields",
                    [(pid, LIVE, rid, it.qna.kind, json_value(it.qna.questions), it.qna.answer, it.qna.source,
                      json_value(it.qna.metadata), json_value(dialog_json(it.qna.dialog)),
                      json_value(it.qna.suggested_questions), it.content_hash, stamp, json_value(it.qna.fields))
                     for rid, it in latest.items()],
                )
                with cur.copy("COPY units(project_id, deployment, record_id, field, ord, terms, embedding)"
                              " FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "text", "int8", "text", "int4", "text[]", "vector"])
                    for rid, it in latest.items():
                        for u in it.units:
                            copy.write_row((pid, LIVE, rid, u.field, u.ord, list(u.terms),
                                            np.asarray(u.vector, dtype=np.float32)))
        db.execute("UPDATE projects SET next_id=%s, modified=%s WHERE id=%s", (next_id, stamp, pid))
        return ids

    def reserve_ids(self, project: str, count: int) -> list[int]:
        """Ids no record has or will get; for records that must point at each other before they exist."""
        with self._tx() as db:
            pid = self._project_id(db, project, lock=True)
            row = db.execute("UPDATE projects SET next_id=next_id+%s WHERE id=%s RETURNING next_id-%s",
                             (count, pid, count)).fetchone()
            assert row is not None  # _project_id found and locked the row
            return fresh_ids(row[0], count)  # refused: the transaction, and so the UPDATE, is rolled back

    def get_vectors(self, project: str, ids: list[int],
                    deployment: str = LIVE) -> dict[int, dict[tuple[str, int], np.ndarray]]:
        """The stored vectors of records, by (field, ord), so unchanged text is never re-embedded."""
        out: dict[int, dict[tuple[str, int], np.ndarray]] = {}
        with self._conn() as db:
            pid = self._project_id(db, project)
            with db.cursor(binary=True) as cur:
                cur.execute("SELECT record_id, field, ord, embedding FROM units WHERE project_id=%s AND deployment=%s"
                            " AND record_id=ANY(%s)", (pid, deployment, [int(i) for i in ids]))
                for rid, field, ord_, vector in cur:
                    out.setdefault(rid, {})[(field, ord_)] = vector
        return out

    @staticmethod
    def _delete_records(db: psycopg.Connection, pid: int, ids: list[int]) -> int:
        if not ids:
            return 0
        deleted = db.execute("DELETE FROM records WHERE project_id=%s AND deployment=%s AND id=ANY(%s)",
                             (pid, LIVE, [int(i) for i in ids])).rowcount
        db.execute("DELETE FROM units WHERE project_id=%s AND deployment=%s AND record_id=ANY(%s)",
                   (pid, LIVE, [int(i) for i in ids]))
        return deleted

    _PROMPT_TARGETS = "json_array_elements(r.dialog->'prompts') p WHERE (p.value->>1)::bigint"
    @staticmethod
    def _dialog_of(value: Any) -> Dialog:
        return dialog_from_json(value)

    @staticmethod
    def _dialog_param(dialog: Dialog) -> Json:
        return json_value(dialog_json(dialog))

    @staticmethod
    def _qna_row(row: tuple[Any, ...]) -> QnA:
        rid, kind, questions, answer, source, metadata, dialog, suggestions, fields, modified = row
        return QnA(questions, answer, rid, source, metadata, dialog_from_json(dialog), kind, suggestions, fields, modified)

    @staticmethod
    def _deployment_pid(db: psycopg.Connection, project: str, deployment: str) -> int:
        rows = db.execute(f'SELECT {_DEPLOYED}, p.id FROM projects p WHERE lower(p.name)=lower(%s COLLATE "C")',
                          (deployment == LIVE, deployment, project)).fetchall()
        project_id: int = PostgresStore._checked(rows, project, deployment)[0][0]
        return project_id

    # A question's reads (``get_qnas``, ``get_synonyms``) check the project and the deployment in the same statement
    # as their rows: one round trip each instead of two (bench/throughput_pg.py).
    _CHECKED = (f'SELECT {_DEPLOYED}, {{cols}} FROM projects p LEFT JOIN {{table}} ON {{table_key}}.project_id=p.id'
                ' AND {table_key}.deployment=%s{more} WHERE lower(p.name)=lower(%s COLLATE "C")')

    @staticmethod
    def _checked(rows: list[tuple[Any, ...]], project: str, deployment: str) -> list[tuple[Any, ...]]:
        """The rows of a statement that selects ``_DEPLOYED`` first from the named project, past that column: raises
        if the project (no row) or the deployment does not exist."""
        if not rows:
            raise _not_found(project)
        if not rows[0][0]:
            raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found.")
        return [row[1:] for row in rows]

    _QNAS_CHECKED = _CHECKED.format(cols=", ".join(f"r.{c}" for c in SharedStatements._QNA_COLS.split(", ")),
                                    table="records r", table_key="r", more=" AND r.id=ANY(%s)")
    _SYNONYMS_CHECKED = _CHECKED.format(cols="s.groups", table="synonyms s", table_key="s", more="")

    def get_qnas(self, project: str, ids: list[int], deployment: str = LIVE) -> dict[int, QnA]:
        with self._conn() as db:
            rows = db.execute(self._QNAS_CHECKED, (deployment == LIVE, deployment, deployment, record_ids(ids),
                                    project)).fetchall()
        return {r[0]: self._qna_row(r) for r in self._checked(rows, project, deployment) if r[0] is not None}

    def list_qnas(self, project: str, deployment: str = LIVE, offset: int = 0, limit: int | None = None, *,
                  kinds: Sequence[str] | None = None) -> list[QnA]:
        wanted = None if kinds is None else list(kinds)
        with self._conn() as db:
            pid = self._deployment_pid(db, project, deployment)
            rows = db.execute(f"SELECT {self._QNA_COLS} FROM records WHERE project_id=%s AND deployment=%s"
                              " AND (%s::text[] IS NULL OR kind = ANY(%s::text[])) ORDER BY id LIMIT %s OFFSET %s",
                              (pid, deployment, wanted, wanted, limit, offset)).fetchall()
        return [self._qna_row(r) for r in rows]

    def get_synonyms(self, project: str, deployment: str = LIVE) -> list[list[str]]:
        with self._conn() as db:
            rows = db.execute(self._SYNONYMS_CHECKED, (deployment == LIVE, deployment, deployment, project)).fetchall()
        groups: list[list[str]] | None = self._checked(rows, project, deployment)[0][0]
        return groups or []

    @staticmethod
    def _write_synonyms(db: psycopg.Connection, pid: int, groups: list[list[str]]) -> None:
        db.execute("INSERT INTO synonyms VALUES(%s,%s,%s) ON CONFLICT (project_id, deployment)"
                   " DO UPDATE SET groups=EXCLUDED.groups", (pid, LIVE, json_value(groups)))

    # -- deployments -------------------------------------------------------------------------
    def _copy_deployment(self, db: psycopg.Connection, pid: int, source: str, target: str) -> None:
        for table in ("records", "units", "synonyms", "trained"):
            db.execute(f"DELETE FROM {table} WHERE project_id=%s AND deployment=%s", (pid, target))
        db.execute("INSERT INTO records SELECT project_id, %s::text, id, kind, questions, answer, source, metadata,"
                   " dialog, suggestions, content_hash, modified, fields FROM records"
                   " WHERE project_id=%s AND deployment=%s", (target, pid, source))
        db.execute("INSERT INTO units SELECT project_id, %s::text, record_id, field, ord, terms, embedding"
                   " FROM units WHERE project_id=%s AND deployment=%s", (target, pid, source))
        db.execute("INSERT INTO synonyms SELECT project_id, %s::text, groups FROM synonyms"
                   " WHERE project_id=%s AND deployment=%s", (target, pid, source))
        db.execute("INSERT INTO trained SELECT project_id, %s::text, created, meta, hash, data FROM trained"
                   " WHERE project_id=%s AND deployment=%s", (target, pid, source))

    def has_deployment(self, project: str, deployment: str) -> bool:
        try:
            self.current(project, deployment)
        except ProjectNotFound:
            raise
        except NotFound:
            return False
        return True

    # -- versions and index rows --------------------------------------------------------------
    def version(self, project: str, deployment: str = LIVE) -> int:
        with self._conn() as db:
            row = db.execute('SELECT (SELECT seq FROM versions v WHERE v.project_id=p.id AND v.deployment=%s)'
                             ' FROM projects p WHERE lower(name)=lower(%s COLLATE "C")', (deployment, project)).fetchone()
        if row is None:
            raise _not_found(project)
        return row[0] or 0

    def current(self, project: str, deployment: str = LIVE) -> tuple[int, int]:
        """(project id, version) in one round trip; raises if the project or deployment does not exist."""
        with self._conn() as db:
            rows = db.execute(
                f'SELECT {_DEPLOYED}, p.id, (SELECT seq FROM versions v WHERE v.project_id=p.id AND v.deployment=%s)'
                ' FROM projects p WHERE lower(p.name)=lower(%s COLLATE "C")',
                (deployment == LIVE, deployment, deployment, project)).fetchall()
        pid, seq = self._checked(rows, project, deployment)[0]
        return pid, seq or 0

    @contextmanager
    def read_index_rows(self, project_id: int, deployment: str) -> Iterator[PostgresIndexRows]:
        """One read-only REPEATABLE READ transaction for every read of an index build."""
        with self._read_tx() as db:
            yield PostgresIndexRows(db, project_id, deployment)

    # -- jobs (their reads are in statements.py) ---------------------------------------------------
    _JOB_COLS = ("id, kind, project, status, created, updated, expires, errors, params, owner, result, result_name,"
                 " result_media, extract(epoch FROM lease_until)::float8")

    def put_job(self, job: Job) -> None:
        job.updated = now_iso()
        with self._tx() as db:
            self._insert_job(db, job)

    def put_job_alone(self, job: Job) -> Job | None:
        job.updated = now_iso()
        with self._tx() as db:
            # the kind and project's lock, held to the commit: a second submitter (of any process) looks only once
            # the first has inserted, and READ COMMITTED's next statement sees that insert
            db.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s || '/' || lower(%s)))",
                       (_JOB_LOCK_KEY, job.kind, job.project))
            row = db.execute(f"SELECT {self._JOB_COLS} FROM jobs WHERE kind=%s AND lower(project)=lower(%s)"
                             " AND status IN ('notStarted', 'running') ORDER BY seq LIMIT 1",
                             (job.kind, job.project)).fetchone()
            if row is not None:
                return self._job_row(row)
            self._insert_job(db, job)
        return None

    @staticmethod
    def _insert_job(db: psycopg.Connection, job: Job) -> None:
        db.execute("INSERT INTO jobs(id, kind, project, status, created, updated, expires, errors, params, owner,"
                   " result, result_name, result_media, lease_until)"
                   " VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,to_timestamp(%s)) ON CONFLICT (id) DO UPDATE SET"
                   " kind=EXCLUDED.kind, project=EXCLUDED.project, status=EXCLUDED.status,"
                   " created=EXCLUDED.created, updated=EXCLUDED.updated, expires=EXCLUDED.expires,"
                   " errors=EXCLUDED.errors, params=EXCLUDED.params, owner=EXCLUDED.owner, result=EXCLUDED.result,"
                   " result_name=EXCLUDED.result_name, result_media=EXCLUDED.result_media,"
                   " lease_until=EXCLUDED.lease_until",
                   (job.id, job.kind, job.project, job.status, job.created or job.updated, job.updated,
                    job.expires, json_value(job.errors), json_value(job.params), job.owner, job.result,
                    job.result_name, job.result_media, job.lease_until))

    def claim_job(self, owner: str, kinds: list[str], lease_seconds: float, after: Sequence[str] = ()) -> Job | None:
        # SKIP LOCKED: claimers racing for the queue head each lock a different row instead of waiting on one;
        # the outer status test re-checks the row once it is locked.  A job ``behind`` another lane's stays so
        # until that job is finished, a state it never leaves, so no race lets it start early.
        turns = self.FAIR_TURNS.format(mine="kind = ANY(%s)", after="kind = ANY(%s)")
        with self._conn() as db:
            row = db.execute(
                "UPDATE jobs SET status='running', owner=%s, updated=%s,"
                " lease_until=now() + make_interval(secs => %s)"
                " WHERE status='notStarted' AND id=(SELECT j.id FROM jobs j"
                f"   JOIN ({turns}) t ON t.job = j.id WHERE t.waiting AND t.behind = 0"
                "   ORDER BY t.turn, t.served, j.seq FOR UPDATE OF j SKIP LOCKED LIMIT 1)"
                f" RETURNING {self._JOB_COLS}",
                (owner, now_iso(), lease_seconds, list(kinds), list(kinds), list(after), list(kinds))).fetchone()
        return None if row is None else self._job_row(row)

    def renew_job(self, job_id: str, owner: str, lease_seconds: float) -> bool:
        with self._conn() as db:
            return db.execute("UPDATE jobs SET lease_until=now() + make_interval(secs => %s)"
                              " WHERE id=%s AND owner=%s AND status='running'",
                              (lease_seconds, job_id, owner)).rowcount > 0

    def finish_job(self, job: Job) -> bool:
        job.updated, job.lease_until = now_iso(), None
        with self._conn() as db:
            return db.execute("UPDATE jobs SET status=%s, updated=%s, errors=%s, result=%s, result_name=%s,"
                              " result_media=%s, lease_until=NULL WHERE id=%s AND owner=%s AND status='running'",
                              (job.status, job.updated, json_value(job.errors), job.result, job.result_name,
                               job.result_media, job.id, job.owner)).rowcount > 0

    def fail_expired_jobs(self, errors: list[dict[str, Any]]) -> list[str]:
        with self._conn() as db:
            rows = db.execute("UPDATE jobs SET status='failed', errors=%s, updated=%s, lease_until=NULL"
                              " WHERE status='running' AND (lease_until IS NULL OR lease_until < now()) RETURNING id",
                              (json_value(errors), now_iso())).fetchall()
        return [r[0] for r in rows]

    def delete_finished_jobs(self, before: str) -> int:
        with self._conn() as db:
            return db.execute("DELETE FROM jobs WHERE status IN ('succeeded', 'failed') AND expires != '' AND expires < %s",
                              (before,)).rowcount


__all__ = ["SCHEMA_VERSION", "PostgresStore", "filter_to_sql"]
