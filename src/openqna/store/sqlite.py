"""The embedded store: one SQLite database in WAL mode (DESIGN decision 7).

Records, analysed terms and float32 vectors live in SQLite; every write moves the
knowledge base's version (a global, ever-growing change sequence), so the index
cache (``index/index_cache.py``) of a second process writing the same file
catches up on its next query.  Deployments are copies of the live rows.  The index
cache saves the indexes of large knowledge bases next to the database (``indexes/``).
The schema and its migrations are in ``sqlite_schema.py``, the column codecs and the reader
of index rows in ``sqlite_rows.py``, the statements written as PostgreSQL's are in ``statements.py``;
what is here is SQLite's own: ids and versions, records and units, deployments, the job queue's claims.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from openqna import strict_json
from openqna.clock import now_iso
from openqna.records import Dialog, NotFound, OpenQnAError, ProjectNotFound, QnA, StoreFull, StoreReadOnly
from openqna.store.attached_files import AttachedFileStatements
from openqna.store.base import LIVE, RUNNING_JOB, Job, LeaseLost, Project, StoredQnA, fresh_ids
from openqna.store.sqlite_rows import (
    TERM_SEP,
    SQLiteIndexRows,
    blob_vector,
    dialog_from_json,
    dialog_json,
    json_list,
    json_object,
    vector_blob,
)
from openqna.store.sqlite_schema import migrate
from openqna.store.statements import SharedStatements, id_batches

PAGE_SIZE = 16384


@contextmanager
def write_errors_named(folder: Path) -> Iterator[None]:
    """SQLite's "database or disk is full" (SQLITE_FULL) as ``StoreFull``, and "attempt to write a readonly database"
    (SQLITE_READONLY) as ``StoreReadOnly``, each naming ``folder``: SQLite has rolled the write back, and a 500 that
    says "see its log" (or a traceback) told no one what to do."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
            raise StoreFull(f"the disk is full: nothing more can be written to the store in {folder} ({exc}); "
                            "nothing of this write was stored. Free space there and try again.") from exc
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY:
            raise StoreReadOnly(f"the store in {folder} is read-only here ({exc}): it can be read, not written. "
                                "Give this user write permission on the folder and its files, or mount it "
                                "read-write.") from exc
        raise


def remove_database(path: Path, *, keep_file: bool = False) -> None:
    """Delete the SQLite database ``path`` with the files SQLite keeps beside it (its rollback journal, its WAL and
    the WAL's index), or only those (``keep_file``): a database file is never left with another's journal or WAL,
    which SQLite would apply to it."""
    for suffix in ("-journal", "-wal", "-shm") if keep_file else ("", "-journal", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def in_use(path: Path) -> bool:
    """Whether a process has the SQLite database ``path`` open: each connection to a database in WAL mode holds a
    shared lock on it for as long as it is open, so an exclusive one is refused (a server that was killed holds
    none, though its WAL and WAL index stay beside the file)."""
    if not path.exists():
        return False
    db = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        db.execute("BEGIN EXCLUSIVE")
        db.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    except sqlite3.DatabaseError:  # a damaged file (what a stale WAL makes of it) is nobody's to keep open
        return False
    finally:
        db.close()
    return False


def backup_file(source: Path, target: Path) -> None:
    """One consistent snapshot of the SQLite database ``source`` written to ``target`` (replaced), while other
    connections read and write it (SQLite's online backup: what a committed transaction wrote is in it, half of one
    never is), then checked with ``PRAGMA integrity_check``.  A copy that fails it, or that could not be finished (a
    full disk: ``StoreFull``), is deleted with the journal SQLite kept beside it."""
    remove_database(target)
    try:
        with write_errors_named(target.parent):
            src = sqlite3.connect(source, timeout=30)
            try:
                dst = sqlite3.connect(target)
                try:
                    src.backup(dst)
                    verdict = str(dst.execute("PRAGMA integrity_check").fetchone()[0])
                finally:
                    dst.close()
            finally:
                src.close()
    except BaseException:
        remove_database(target)
        raise
    if verdict != "ok":
        remove_database(target)
        raise OpenQnAError(f"the copy of {source} failed SQLite's integrity check ({verdict}); the store itself may "
                           "be damaged: check it with `sqlite3 FILE 'PRAGMA integrity_check'`")


class SQLiteStore(SharedStatements, AttachedFileStatements):
    """Store protocol on SQLite; safe to share across threads and processes.

    The statements it shares with PostgreSQL are in ``statements.py``; the hooks those need are under "plumbing"."""

    remote = False  # reads are local file reads (``KeyStore.remote``)

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "openqna.sqlite3"
        # a folder or file this user may not write (a read-only mount, a backup kept read-only): opened to be read,
        # its writes refused with ``StoreReadOnly``
        self.read_only = not os.access(self.directory, os.W_OK) or (
            self.path.exists() and not os.access(self.path, os.W_OK))
        self._local = threading.local()
        with write_errors_named(self.directory):
            self.instance = migrate(self._db)
        self.index_dir: Path | None = None if self.read_only else self.directory / "indexes"

    # -- plumbing ------------------------------------------------------------------
    @property
    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None and self.read_only:
            # SQLite reads a database in WAL mode through its index file (-shm) beside it, which a read-only folder
            # cannot get; without one no process has the database open (each keeps it while it has), so nobody is
            # writing it either and it is read as it is (immutable)
            shm = self.path.with_name(self.path.name + "-shm")
            immutable = "&immutable=1" if not shm.exists() and not os.access(self.directory, os.W_OK) else ""
            db = sqlite3.connect(f"{self.path.as_uri()}?mode=ro{immutable}", uri=True, timeout=30,
                                 isolation_level=None, check_same_thread=False)
            self._local.db = db
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            # Takes effect only as a new database file is created (before WAL mode): a unit row (a
            # 1.5 KB vector and its terms) then fits in its page instead of spilling into a mostly
            # empty overflow page; at 30k QnAs the file is 2.5x smaller and written 1.5x faster.
            db.execute(f"PRAGMA page_size={PAGE_SIZE}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; in a job's handler, committed only while the job is still this worker's
        (``RUNNING_JOB``: the lease renewed in the same transaction).  A full disk raises ``StoreFull``."""
        db = self._db
        with write_errors_named(self.directory):
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                lease = RUNNING_JOB.get()
                if lease is not None:
                    now = time.time()
                    if db.execute("UPDATE jobs SET lease_until=? WHERE id=? AND owner=? AND status='running' AND "
                                  "lease_until > ?", (now + lease.seconds, lease.job_id, lease.owner, now)).rowcount == 0:
                        raise LeaseLost(f"job {lease.job_id} lost its lease before this write: nothing of it was applied")
                db.execute("COMMIT")
            except BaseException:
                # SQLite ends the transaction itself on some errors (SQLITE_FULL): a ROLLBACK then raised "no
                # transaction is active" in place of the error that said what happened
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return nullcontext(self._db)

    @staticmethod
    def _many(db: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        db.executemany(sql, rows)

    @staticmethod
    def _json(value: Any) -> str:
        return strict_json.dumps(value)

    @staticmethod
    def _from_json(value: Any) -> Any:
        return json.loads(value)

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def _bump(self, db: sqlite3.Connection, project_id: int, deployment: str) -> None:
        seq = int(db.execute("SELECT value FROM meta WHERE key='seq'").fetchone()[0]) + 1
        db.execute("UPDATE meta SET value=? WHERE key='seq'", (str(seq),))
        db.execute("INSERT OR REPLACE INTO versions VALUES(?,?,?)", (project_id, deployment, seq))

    def _project_id(self, db: sqlite3.Connection, name: str) -> int:
        row = db.execute("SELECT id FROM projects WHERE name=?", (name,)).fetchone()
        if row is None:
            raise ProjectNotFound(f"The specified project was not found: {name}.")
        project_id: int = row[0]
        return project_id

    # -- projects ----------------------------------------------------------------------
    @staticmethod
    def _project_row(row: tuple[Any, ...]) -> Project:
        name, desc, lang, multi, settings, embedder, created, modified, deployed = row
        return Project(name, desc, lang, bool(multi), json.loads(settings), embedder, created, modified, deployed)

    _PROJECT_COLS = "name, description, language, multilingual, settings, embedder, created, modified, last_deployed"

    def create_project(self, project: Project) -> Project:
        stamp = now_iso()
        project.created = project.created or stamp
        project.modified = stamp
        with self._tx() as db:
            # an id no project has had (``meta.project_id``: the last given), as PostgreSQL's identity: a rowid would
            # give a deleted project's id to the next one, and a write that read the id first (a train job) would
            # then land in the new project of the same name
            given = db.execute("SELECT value FROM meta WHERE key='project_id'").fetchone()
            pid = max(int(given[0]) if given else 0,
                      db.execute("SELECT coalesce(max(id), 0) FROM projects").fetchone()[0]) + 1
            db.execute(
                "INSERT INTO projects(id, name, description, language, multilingual, settings, embedder, created,"
                " modified) VALUES(?,?,?,?,?,?,?,?,?)",
                (pid, project.name, project.description, project.language, int(project.multilingual),
                 strict_json.dumps(project.settings), project.embedder, project.created, project.modified),
            )
            db.execute("INSERT OR REPLACE INTO meta VALUES('project_id', ?)", (str(pid),))
            self._bump(db, pid, LIVE)
        return project

    def get_project(self, name: str) -> Project:
        row = self._db.execute(f"SELECT {self._PROJECT_COLS} FROM projects WHERE name=?", (name,)).fetchone()
        if row is None:
            raise ProjectNotFound(f"The specified project was not found: {name}.")
        return self._project_row(row)

    def list_projects(self) -> list[Project]:
        rows = self._db.execute(f"SELECT {self._PROJECT_COLS} FROM projects ORDER BY name").fetchall()
        return [self._project_row(r) for r in rows]

    def update_project(self, project: Project) -> Project:
        project.modified = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project.name)
            db.execute(
                "UPDATE projects SET description=?, language=?, multilingual=?, settings=?, embedder=?, modified=?"
                " WHERE id=?",
                (project.description, project.language, int(project.multilingual), strict_json.dumps(project.settings),
                 project.embedder, project.modified, pid),
            )
            self._bump(db, pid, LIVE)
        return project

    def update_settings(self, name: str, expected: dict[str, Any], settings: dict[str, Any]) -> bool:
        with self._tx() as db:  # BEGIN IMMEDIATE: no other writer between the read and the write
            row = db.execute("SELECT id, settings FROM projects WHERE name=?", (name,)).fetchone()
            if row is None:
                raise ProjectNotFound(f"The specified project was not found: {name}.")
            if json.loads(row[1]) != expected:
                return False
            db.execute("UPDATE projects SET settings=?, modified=? WHERE id=?", (strict_json.dumps(settings), now_iso(), row[0]))
            self._bump(db, row[0], LIVE)
        return True

    def delete_project(self, name: str) -> None:
        with self._tx() as db:
            pid = self._project_id(db, name)
            for table in ("records", "units", "synonyms", "versions", "sources", "feedback", "queries",
                          "deploy_versions", "deploy_events", "test_sets", "test_runs", "source_refresh",
                          "accepted_questions", "trained", "vector_store_files"):
                db.execute(f"DELETE FROM {table} WHERE project_id=?", (pid,))
            db.execute("DELETE FROM deployments WHERE project_id=?", (pid,))
            db.execute("DELETE FROM projects WHERE id=?", (pid,))

    # -- records -------------------------------------------------------------------------
    def _write_qnas(self, db: sqlite3.Connection, pid: int, items: list[StoredQnA]) -> list[int]:
        stamp = now_iso()
        ids: list[int] = []
        next_id = db.execute("SELECT next_id FROM projects WHERE id=?", (pid,)).fetchone()[0]
        # a record given no id gets a free id that no record of this write names (it was given one that a later
        # record of the write then took over)
        named = {item.qna.id for item in items if item.qna.id is not None}
        for item in items:
            q = item.qna
            if q.id is None:
                while next_id in named:
                    next_id += 1
                q.id = fresh_ids(next_id, 1)[0]
            next_id = max(next_id, q.id + 1)
            ids.append(q.id)
            db.execute("DELETE FROM units WHERE project_id=? AND deployment=? AND record_id=?", (pid, LIVE, q.id))
            db.execute(
                "INSERT OR REPLACE INTO records VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (pid, LIVE, q.id, q.kind, json.dumps(q.questions, ensure_ascii=False), q.answer, q.source,
                 json.dumps(q.metadata, ensure_ascii=False), dialog_json(q.dialog),
                 json.dumps(q.suggested_questions, ensure_ascii=False), item.content_hash, stamp,
                 json.dumps(q.fields, ensure_ascii=False)),
            )
            db.executemany(
                "INSERT INTO units VALUES(?,?,?,?,?,?,?)",
                [(pid, LIVE, q.id, u.field, u.ord, TERM_SEP.join(u.terms), vector_blob(u.field, u.vector))
                 for u in item.units],
            )
        db.execute("UPDATE projects SET next_id=?, modified=? WHERE id=?", (next_id, stamp, pid))
        return ids

    def reserve_ids(self, project: str, count: int) -> list[int]:
        """Ids no record has or will get; for records that must point at each other before they exist."""
        with self._tx() as db:
            pid = self._project_id(db, project)
            first = db.execute("SELECT next_id FROM projects WHERE id=?", (pid,)).fetchone()[0]
            ids = fresh_ids(first, count)
            db.execute("UPDATE projects SET next_id=? WHERE id=?", (first + count, pid))
        return ids

    def get_vectors(self, project: str, ids: list[int],
                    deployment: str = LIVE) -> dict[int, dict[tuple[str, int], np.ndarray]]:
        """The stored vectors of records, by (field, ord), so unchanged text is never re-embedded."""
        pid = self._project_id(self._db, project)
        out: dict[int, dict[tuple[str, int], np.ndarray]] = {}
        for batch in id_batches(ids):
            rows = self._db.execute(
                f"SELECT record_id, field, ord, vector FROM units WHERE project_id=? AND deployment=?"
                f" AND record_id IN ({','.join('?' * len(batch))})", (pid, deployment, *batch))
            for rid, field, ord_, blob in rows:
                out.setdefault(rid, {})[(field, ord_)] = blob_vector(field, blob)
        return out

    @staticmethod
    def _delete_records(db: sqlite3.Connection, pid: int, ids: list[int]) -> int:
        deleted = 0
        for i in ids:
            deleted += db.execute("DELETE FROM records WHERE project_id=? AND deployment=? AND id=?",
                                  (pid, LIVE, i)).rowcount
            db.execute("DELETE FROM units WHERE project_id=? AND deployment=? AND record_id=?", (pid, LIVE, i))
        return deleted

    _PROMPT_TARGETS = "json_each(r.dialog, '$.prompts') p WHERE json_extract(p.value, '$[1]')"
    @staticmethod
    def _dialog_param(dialog: Dialog) -> str:
        return dialog_json(dialog)

    @staticmethod
    def _dialog_of(value: Any) -> Dialog:
        return dialog_from_json(value)

    @staticmethod
    def _qna_row(row: tuple[Any, ...]) -> QnA:
        rid, kind, questions, answer, source, metadata, dialog, suggestions, fields, modified = row
        return QnA(json.loads(questions), answer, rid, source, json_object(metadata), dialog_from_json(dialog), kind,
                   json_list(suggestions), json_object(fields), modified)

    def _deployment_pid(self, db: sqlite3.Connection, project: str, deployment: str) -> int:
        """The project's id, once its deployment is known to exist: one query (every ask makes three of these)."""
        if deployment == LIVE:
            return self._project_id(db, project)
        row = db.execute("SELECT p.id, d.name IS NOT NULL FROM projects p LEFT JOIN deployments d "
                               "ON d.project_id=p.id AND d.name=? WHERE p.name=?", (deployment, project)).fetchone()
        if row is None:
            raise ProjectNotFound(f"The specified project was not found: {project}.")
        if not row[1]:
            raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found.")
        project_id: int = row[0]
        return project_id

    def get_qnas(self, project: str, ids: list[int], deployment: str = LIVE) -> dict[int, QnA]:
        """One read when a record is found (every answered question): a deployment's records exist only with it,
        so only an empty result needs the project and the deployment looked up, to say which does not exist."""
        out: dict[int, QnA] = {}
        for batch in id_batches(ids):
            marks = ",".join("?" * len(batch))
            rows = self._db.execute(
                f"SELECT {self._QNA_COLS} FROM records WHERE project_id=(SELECT id FROM projects WHERE name=?)"
                f" AND deployment=? AND id IN ({marks})",
                (project, deployment, *batch),
            )
            out.update((r[0], self._qna_row(r)) for r in rows)
        if not out:
            self._deployment_pid(self._db, project, deployment)  # raises if the project or deployment does not exist
        return out

    def list_qnas(self, project: str, deployment: str = LIVE, offset: int = 0, limit: int | None = None, *,
                  kinds: Sequence[str] | None = None) -> list[QnA]:
        pid = self._deployment_pid(self._db, project, deployment)
        of_kinds = "" if kinds is None else f" AND kind IN ({','.join('?' * len(kinds))})"
        rows = self._db.execute(
            f"SELECT {self._QNA_COLS} FROM records WHERE project_id=? AND deployment=?{of_kinds}"
            " ORDER BY id LIMIT ? OFFSET ?",
            (pid, deployment, *(kinds or ()), -1 if limit is None else limit, offset),
        )
        return [self._qna_row(r) for r in rows]

    def get_synonyms(self, project: str, deployment: str = LIVE) -> list[list[str]]:
        row = self._db.execute(
            "SELECT ? OR EXISTS(SELECT 1 FROM deployments d WHERE d.project_id=p.id AND d.name=?),"
            " (SELECT groups FROM synonyms s WHERE s.project_id=p.id AND s.deployment=?) FROM projects p WHERE name=?",
            (deployment == LIVE, deployment, deployment, project)).fetchone()  # one read: every question makes it
        if row is None:
            raise ProjectNotFound(f"The specified project was not found: {project}.")
        if not row[0]:
            raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found.")
        return json.loads(row[1]) if row[1] else []

    @staticmethod
    def _write_synonyms(db: sqlite3.Connection, pid: int, groups: list[list[str]]) -> None:
        db.execute("INSERT OR REPLACE INTO synonyms VALUES(?,?,?)", (pid, LIVE, json.dumps(groups, ensure_ascii=False)))

    # -- deployments -------------------------------------------------------------------------
    def _copy_deployment(self, db: sqlite3.Connection, pid: int, source: str, target: str) -> None:
        for table in ("records", "units", "synonyms", "trained"):
            db.execute(f"DELETE FROM {table} WHERE project_id=? AND deployment=?", (pid, target))
        db.execute("INSERT INTO records SELECT project_id, ?, id, kind, questions, answer, source, metadata, dialog,"
                   " suggestions, content_hash, modified, fields FROM records WHERE project_id=? AND deployment=?",
                   (target, pid, source))
        db.execute("INSERT INTO units SELECT project_id, ?, record_id, field, ord, terms, vector FROM units"
                   " WHERE project_id=? AND deployment=?", (target, pid, source))
        db.execute("INSERT INTO synonyms SELECT project_id, ?, groups FROM synonyms"
                   " WHERE project_id=? AND deployment=?", (target, pid, source))
        db.execute("INSERT INTO trained SELECT project_id, ?, created, meta, hash, data FROM trained"
                   " WHERE project_id=? AND deployment=?", (target, pid, source))

    def has_deployment(self, project: str, deployment: str) -> bool:
        pid = self._project_id(self._db, project)
        if deployment == LIVE:
            return True
        return self._db.execute("SELECT 1 FROM deployments WHERE project_id=? AND name=?",
                                (pid, deployment)).fetchone() is not None

    # -- versions and index rows --------------------------------------------------------------
    def version(self, project: str, deployment: str = LIVE) -> int:
        pid = self._project_id(self._db, project)
        row = self._db.execute("SELECT seq FROM versions WHERE project_id=? AND deployment=?",
                               (pid, deployment)).fetchone()
        return row[0] if row else 0

    def current(self, project: str, deployment: str = LIVE) -> tuple[int, int]:
        """(project id, version) in one read (the index cache asks on every question), as PostgreSQL's."""
        row = self._db.execute(
            "SELECT id, ? OR EXISTS(SELECT 1 FROM deployments d WHERE d.project_id=p.id AND d.name=?),"
            " (SELECT seq FROM versions v WHERE v.project_id=p.id AND v.deployment=?) FROM projects p WHERE name=?",
            (deployment == LIVE, deployment, deployment, project)).fetchone()
        if row is None:
            raise ProjectNotFound(f"The specified project was not found: {project}.")
        if not row[1]:
            raise NotFound(f"Deployment '{deployment}' of project '{project}' was not found.")
        return row[0], row[2] or 0

    @contextmanager
    def read_index_rows(self, project_id: int, deployment: str) -> Iterator[SQLiteIndexRows]:
        """One read transaction for every read of an index build: in WAL mode it sees the database as it was."""
        db = self._db
        own = not db.in_transaction
        if own:
            db.execute("BEGIN")
        try:
            yield SQLiteIndexRows(db, project_id, deployment)
        finally:
            if own:
                db.execute("COMMIT")

    # -- jobs (their reads are in statements.py) ---------------------------------------------------
    def put_job(self, job: Job) -> None:
        job.updated = now_iso()
        with self._tx() as db:
            self._insert_job(db, job)

    def put_job_alone(self, job: Job) -> Job | None:
        job.updated = now_iso()
        with self._tx() as db:  # BEGIN IMMEDIATE: no writer of any process between the look and the insert
            row = db.execute(f"SELECT {self._JOB_COLS} FROM jobs WHERE kind=? AND lower(project)=lower(?)"
                             " AND status IN ('notStarted', 'running') ORDER BY seq LIMIT 1",
                             (job.kind, job.project)).fetchone()
            if row is not None:
                return self._job_row(row)
            self._insert_job(db, job)
        return None

    def _insert_job(self, db: sqlite3.Connection, job: Job) -> None:
        db.execute(f"INSERT INTO jobs({self._JOB_COLS}, seq)"
                   " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,(SELECT coalesce(max(seq), 0) + 1 FROM jobs))"
                   " ON CONFLICT (id) DO UPDATE SET kind=excluded.kind, project=excluded.project,"
                   " status=excluded.status, created=excluded.created, updated=excluded.updated,"
                   " expires=excluded.expires, errors=excluded.errors, params=excluded.params, owner=excluded.owner,"
                   " result=excluded.result, result_name=excluded.result_name, result_media=excluded.result_media,"
                   " lease_until=excluded.lease_until",
                   (job.id, job.kind, job.project, job.status, job.created or job.updated, job.updated,
                    job.expires, strict_json.dumps(job.errors), strict_json.dumps(job.params), job.owner, job.result,
                    job.result_name, job.result_media, job.lease_until))

    def claim_job(self, owner: str, kinds: list[str], lease_seconds: float, after: Sequence[str] = ()) -> Job | None:
        marks = ','.join('?' * len(kinds))
        if self._db.execute(f"SELECT 1 FROM jobs WHERE status='notStarted' AND kind IN ({marks}) LIMIT 1",
                            kinds).fetchone() is None:
            return None  # an idle poll takes no write lock
        turns = self.FAIR_TURNS.format(mine=f"kind IN ({marks})", after=f"kind IN ({','.join('?' * len(after))})")
        # BEGIN IMMEDIATE takes the database's write lock first, so no two claimers read the same queue head.
        with self._tx() as db:
            row = db.execute(f"SELECT {self._JOB_COLS} FROM jobs JOIN ({turns}) t ON t.job = jobs.id"
                             " WHERE t.waiting AND t.behind = 0 ORDER BY t.turn, t.served, jobs.seq LIMIT 1",
                             [*kinds, *kinds, *after, *kinds]).fetchone()
            if row is None:
                return None
            job = self._job_row(row)
            job.status, job.owner, job.updated, job.lease_until = "running", owner, now_iso(), time.time() + lease_seconds
            db.execute("UPDATE jobs SET status=?, owner=?, updated=?, lease_until=? WHERE id=?",
                       (job.status, job.owner, job.updated, job.lease_until, job.id))
        return job

    def renew_job(self, job_id: str, owner: str, lease_seconds: float) -> bool:
        with self._tx() as db:
            return db.execute("UPDATE jobs SET lease_until=? WHERE id=? AND owner=? AND status='running'",
                              (time.time() + lease_seconds, job_id, owner)).rowcount > 0

    def finish_job(self, job: Job) -> bool:
        job.updated, job.lease_until = now_iso(), None
        with self._tx() as db:
            return db.execute("UPDATE jobs SET status=?, updated=?, errors=?, result=?, result_name=?, result_media=?,"
                              " lease_until=NULL WHERE id=? AND owner=? AND status='running'",
                              (job.status, job.updated, strict_json.dumps(job.errors), job.result, job.result_name,
                               job.result_media, job.id, job.owner)).rowcount > 0

    def fail_expired_jobs(self, errors: list[dict[str, Any]]) -> list[str]:
        expired = "SELECT id FROM jobs WHERE status='running' AND (lease_until IS NULL OR lease_until < ?)"
        if self._db.execute(expired, (time.time(),)).fetchone() is None:
            return []  # an idle poll takes no write lock
        with self._tx() as db:
            ids = [r[0] for r in db.execute(expired, (time.time(),))]
            db.executemany("UPDATE jobs SET status='failed', errors=?, updated=?, lease_until=NULL WHERE id=?",
                           [(strict_json.dumps(errors), now_iso(), i) for i in ids])
        return ids

    def delete_finished_jobs(self, before: str) -> int:
        expired = "FROM jobs WHERE status IN ('succeeded', 'failed') AND expires != '' AND expires < ?"
        if self._db.execute(f"SELECT 1 {expired} LIMIT 1", (before,)).fetchone() is None:
            return 0  # an idle poll takes no write lock
        with self._tx() as db:
            return db.execute(f"DELETE {expired}", (before,)).rowcount

