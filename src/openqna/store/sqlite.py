"""The embedded store: one SQLite database in WAL mode (DESIGN decision 7).

Records, analysed terms and float32 vectors live in SQLite; every write moves the
knowledge base's version (a global, ever-growing change sequence), so the index
cache (``index/index_cache.py``) of a second process writing the same file
catches up on its next query.  Deployments are copies of the live rows.  The index
cache saves the indexes of large knowledge bases next to the database (``indexes/``).
The schema and its migrations are in ``sqlite_schema.py``, the column codecs and the reader
of index rows in ``sqlite_rows.py``.

Why this file is over 500 lines: it is one Store method per statement, grouped by concern like
``postgres.py``, so the two engines' SQL for each method can be read side by side; the parts with
a job of their own are in the modules above.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from openqna.clock import now_iso
from openqna.records import NotFound, ProjectNotFound, QnA
from openqna.store.base import LIVE, ApiKey, Deployment, Job, LoggedQuery, Project, Source, StoredFile, StoredQnA
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

PAGE_SIZE = 16384
class SQLiteStore:
    """Store protocol on SQLite; safe to share across threads and processes."""

    remote = False  # reads are local file reads (``KeyStore.remote``)

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "openqna.sqlite3"
        self._local = threading.local()
        self.instance = migrate(self._db)
        self.index_dir: Path | None = self.directory / "indexes"

    # -- plumbing ------------------------------------------------------------------
    @property
    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
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
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

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
            db.execute(
                "INSERT INTO projects(name, description, language, multilingual, settings, embedder, created, modified)"
                " VALUES(?,?,?,?,?,?,?,?)",
                (project.name, project.description, project.language, int(project.multilingual),
                 json.dumps(project.settings), project.embedder, project.created, project.modified),
            )
            pid = self._project_id(db, project.name)
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
                (project.description, project.language, int(project.multilingual), json.dumps(project.settings),
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
            db.execute("UPDATE projects SET settings=?, modified=? WHERE id=?", (json.dumps(settings), now_iso(), row[0]))
            self._bump(db, row[0], LIVE)
        return True

    def delete_project(self, name: str) -> None:
        with self._tx() as db:
            pid = self._project_id(db, name)
            for table in ("records", "units", "synonyms", "versions", "sources", "feedback", "queries"):
                db.execute(f"DELETE FROM {table} WHERE project_id=?", (pid,))
            db.execute("DELETE FROM deployments WHERE project_id=?", (pid,))
            db.execute("DELETE FROM projects WHERE id=?", (pid,))

    # -- records -------------------------------------------------------------------------
    def put_qnas(self, project: str, items: list[StoredQnA]) -> list[int]:
        """Insert or replace records; records without an id get the next free one."""
        with self._tx() as db:
            pid = self._project_id(db, project)
            ids = self._write_qnas(db, pid, items)
            if items:
                self._bump(db, pid, LIVE)
        return ids

    def replace_qnas(self, project: str, items: list[StoredQnA], delete: list[int],
                     synonyms: list[list[str]] | None = None) -> list[int]:
        """``put_qnas``, ``delete_qnas`` and ``set_synonyms`` (when given) in one transaction: an import."""
        with self._tx() as db:
            pid = self._project_id(db, project)
            ids = self._write_qnas(db, pid, items) if items else []
            deleted = self._delete_records(db, pid, delete)
            if synonyms is not None:
                self._write_synonyms(db, pid, synonyms)
            if items or deleted or synonyms is not None:
                db.execute("UPDATE projects SET modified=? WHERE id=?", (now_iso(), pid))
                self._bump(db, pid, LIVE)
        return ids

    def _write_qnas(self, db: sqlite3.Connection, pid: int, items: list[StoredQnA]) -> list[int]:
        stamp = now_iso()
        ids: list[int] = []
        next_id = db.execute("SELECT next_id FROM projects WHERE id=?", (pid,)).fetchone()[0]
        for item in items:
            q = item.qna
            if q.id is None:
                q.id = next_id
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
            db.execute("UPDATE projects SET next_id=? WHERE id=?", (first + count, pid))
        return list(range(first, first + count))

    def get_vectors(self, project: str, ids: list[int],
                    deployment: str = LIVE) -> dict[int, dict[tuple[str, int], np.ndarray]]:
        """The stored vectors of records, by (field, ord), so unchanged text is never re-embedded."""
        pid = self._project_id(self._db, project)
        out: dict[int, dict[tuple[str, int], np.ndarray]] = {}
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            rows = self._db.execute(
                f"SELECT record_id, field, ord, vector FROM units WHERE project_id=? AND deployment=?"
                f" AND record_id IN ({','.join('?' * len(batch))})", (pid, deployment, *batch))
            for rid, field, ord_, blob in rows:
                out.setdefault(rid, {})[(field, ord_)] = blob_vector(field, blob)
        return out

    def delete_qnas(self, project: str, ids: list[int]) -> int:
        with self._tx() as db:
            pid = self._project_id(db, project)
            deleted = self._delete_records(db, pid, ids)
            if deleted:
                self._bump(db, pid, LIVE)
        return deleted

    @staticmethod
    def _delete_records(db: sqlite3.Connection, pid: int, ids: list[int]) -> int:
        deleted = 0
        for i in ids:
            deleted += db.execute("DELETE FROM records WHERE project_id=? AND deployment=? AND id=?",
                                  (pid, LIVE, i)).rowcount
            db.execute("DELETE FROM units WHERE project_id=? AND deployment=? AND record_id=?", (pid, LIVE, i))
        return deleted

    def content_hashes(self, project: str) -> dict[int, str]:
        pid = self._project_id(self._db, project)
        rows = self._db.execute("SELECT id, content_hash FROM records WHERE project_id=? AND deployment=?", (pid, LIVE))
        return dict(rows.fetchall())

    _QNA_COLS = "id, kind, questions, answer, source, metadata, dialog, suggestions, fields, modified"

    @staticmethod
    def _qna_row(row: tuple[Any, ...]) -> QnA:
        rid, kind, questions, answer, source, metadata, dialog, suggestions, fields, modified = row
        return QnA(json.loads(questions), answer, rid, source, json_object(metadata), dialog_from_json(dialog), kind,
                   json_list(suggestions), json_object(fields), modified)

    def _deployment_pid(self, project: str, deployment: str) -> int:
        """The project's id, once its deployment is known to exist: one query (every ask makes three of these)."""
        if deployment == LIVE:
            return self._project_id(self._db, project)
        row = self._db.execute("SELECT p.id, d.name IS NOT NULL FROM projects p LEFT JOIN deployments d "
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
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            rows = self._db.execute(
                f"SELECT {self._QNA_COLS} FROM records WHERE project_id=(SELECT id FROM projects WHERE name=?)"
                f" AND deployment=? AND id IN ({marks})",
                (project, deployment, *batch),
            )
            out.update((r[0], self._qna_row(r)) for r in rows)
        if not out:
            self._deployment_pid(project, deployment)  # raises if the project or the deployment does not exist
        return out

    def list_qnas(self, project: str, deployment: str = LIVE, offset: int = 0, limit: int | None = None) -> list[QnA]:
        pid = self._deployment_pid(project, deployment)
        rows = self._db.execute(
            f"SELECT {self._QNA_COLS} FROM records WHERE project_id=? AND deployment=? ORDER BY id LIMIT ? OFFSET ?",
            (pid, deployment, -1 if limit is None else limit, offset),
        )
        return [self._qna_row(r) for r in rows]

    def count_qnas(self, project: str, deployment: str = LIVE) -> int:
        pid = self._deployment_pid(project, deployment)
        count: int = self._db.execute("SELECT count(*) FROM records WHERE project_id=? AND deployment=?",
                                      (pid, deployment)).fetchone()[0]
        return count

    def count_kinds(self, project: str, deployment: str = LIVE) -> dict[str, int]:
        pid = self._deployment_pid(project, deployment)
        rows = self._db.execute("SELECT kind, count(*) FROM records WHERE project_id=? AND deployment=? GROUP BY kind",
                                (pid, deployment)).fetchall()
        return {kind: count for kind, count in rows}

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

    def set_synonyms(self, project: str, groups: list[list[str]]) -> None:
        with self._tx() as db:
            pid = self._project_id(db, project)
            self._write_synonyms(db, pid, groups)
            self._bump(db, pid, LIVE)

    @staticmethod
    def _write_synonyms(db: sqlite3.Connection, pid: int, groups: list[list[str]]) -> None:
        db.execute("INSERT OR REPLACE INTO synonyms VALUES(?,?,?)", (pid, LIVE, json.dumps(groups, ensure_ascii=False)))

    # -- deployments -------------------------------------------------------------------------
    def deploy(self, project: str, deployment: str) -> Deployment:
        if deployment == LIVE:
            raise ValueError("'test' is the live state and cannot be a deployment target")
        stamp = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            for table in ("records", "units", "synonyms"):
                db.execute(f"DELETE FROM {table} WHERE project_id=? AND deployment=?", (pid, deployment))
            db.execute("INSERT INTO records SELECT project_id, ?, id, kind, questions, answer, source, metadata, dialog,"
                       " suggestions, content_hash, modified, fields FROM records WHERE project_id=? AND deployment=?",
                       (deployment, pid, LIVE))
            db.execute("INSERT INTO units SELECT project_id, ?, record_id, field, ord, terms, vector FROM units"
                       " WHERE project_id=? AND deployment=?", (deployment, pid, LIVE))
            db.execute("INSERT INTO synonyms SELECT project_id, ?, groups FROM synonyms"
                       " WHERE project_id=? AND deployment=?", (deployment, pid, LIVE))
            db.execute("INSERT OR REPLACE INTO deployments VALUES(?,?,?)", (pid, deployment, stamp))
            db.execute("UPDATE projects SET last_deployed=? WHERE id=?", (stamp, pid))
            self._bump(db, pid, deployment)
        return Deployment(deployment, stamp)

    def list_deployments(self, project: str) -> list[Deployment]:
        pid = self._project_id(self._db, project)
        rows = self._db.execute("SELECT name, last_deployed FROM deployments WHERE project_id=? ORDER BY name", (pid,))
        return [Deployment(*r) for r in rows]

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

    # -- sources and feedback --------------------------------------------------------------------
    def list_sources(self, project: str) -> list[Source]:
        pid = self._project_id(self._db, project)
        rows = self._db.execute(
            "SELECT source, display_name, source_uri, source_kind, content_structure_kind, content_hash, last_updated"
            " FROM sources WHERE project_id=? ORDER BY source", (pid,))
        return [Source(*r) for r in rows]

    def put_source(self, project: str, source: Source) -> None:
        source.last_updated = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            db.execute("INSERT OR REPLACE INTO sources VALUES(?,?,?,?,?,?,?,?)",
                       (pid, source.source, source.display_name, source.source_uri, source.source_kind,
                        source.content_structure_kind, source.content_hash, source.last_updated))

    def delete_source(self, project: str, source: str) -> bool:
        with self._tx() as db:
            pid = self._project_id(db, project)
            return db.execute("DELETE FROM sources WHERE project_id=? AND source=?", (pid, source)).rowcount > 0

    def add_feedback(self, project: str, records: list[tuple[int, str, str]]) -> None:
        stamp = now_iso()
        with self._tx() as db:
            pid = self._project_id(db, project)
            db.executemany("INSERT INTO feedback VALUES(?,?,?,?,?)",
                           [(pid, qna_id, question, user_id, stamp) for qna_id, question, user_id in records])

    def list_feedback(self, project: str) -> dict[int, list[tuple[str, int]]]:
        """Per QnA, each distinct user question and how often it was sent, most frequent first."""
        pid = self._project_id(self._db, project)
        out: dict[int, list[tuple[str, int]]] = {}
        for qna_id, question, count in self._db.execute(
            "SELECT qna_id, question, count(*) FROM feedback WHERE project_id=? GROUP BY qna_id, question"
            " ORDER BY qna_id, count(*) DESC, question", (pid,)):
            out.setdefault(qna_id, []).append((question, count))
        return out

    def delete_feedback(self, project: str, qna_id: int, question: str | None = None) -> int:
        with self._tx() as db:
            pid = self._project_id(db, project)
            if question is None:
                return db.execute("DELETE FROM feedback WHERE project_id=? AND qna_id=?", (pid, qna_id)).rowcount
            return db.execute("DELETE FROM feedback WHERE project_id=? AND qna_id=? AND question=?",
                              (pid, qna_id, question)).rowcount

    # -- query log ---------------------------------------------------------------------------------
    def log_queries(self, project: str, queries: list[LoggedQuery]) -> None:
        with self._tx() as db:
            pid = self._project_id(db, project)
            db.executemany("INSERT INTO queries VALUES(?,?,?,?,?,?,?)",
                           [(pid, q.created, q.deployment, q.question, q.user_hash, q.qna_id, q.confidence)
                            for q in queries])

    def list_queries(self, project: str, since: str) -> list[LoggedQuery]:
        pid = self._project_id(self._db, project)
        return [LoggedQuery(*r) for r in self._db.execute(
            "SELECT created, deployment, question, user_hash, qna_id, confidence FROM queries"
            " WHERE project_id=? AND created>=? ORDER BY created", (pid, since))]

    def delete_queries(self, project: str, before: str | None = None) -> int:
        with self._tx() as db:
            pid = self._project_id(db, project)
            if before is None:
                return db.execute("DELETE FROM queries WHERE project_id=?", (pid,)).rowcount
            return db.execute("DELETE FROM queries WHERE project_id=? AND created<?", (pid, before)).rowcount

    # -- jobs --------------------------------------------------------------------------------------
    def put_job(self, job: Job) -> None:
        job.updated = now_iso()
        with self._tx() as db:
            db.execute(f"INSERT INTO jobs({self._JOB_COLS}, seq)"
                       " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,(SELECT coalesce(max(seq), 0) + 1 FROM jobs))"
                       " ON CONFLICT (id) DO UPDATE SET kind=excluded.kind, project=excluded.project,"
                       " status=excluded.status, created=excluded.created, updated=excluded.updated,"
                       " expires=excluded.expires, errors=excluded.errors, params=excluded.params, owner=excluded.owner,"
                       " result=excluded.result, result_name=excluded.result_name, result_media=excluded.result_media,"
                       " lease_until=excluded.lease_until",
                       (job.id, job.kind, job.project, job.status, job.created or job.updated, job.updated,
                        job.expires, json.dumps(job.errors), json.dumps(job.params), job.owner, job.result,
                        job.result_name, job.result_media, job.lease_until))

    _JOB_COLS = ("id, kind, project, status, created, updated, expires, errors, params, owner, result, result_name,"
                 " result_media, lease_until")

    @staticmethod
    def _job_row(row: tuple[Any, ...]) -> Job:
        jid, kind, project, status, created, updated, expires, errors, params, owner, result, name, media, lease = row
        return Job(jid, kind, project, status, created, updated, expires, json.loads(errors), json.loads(params),
                   owner, result, name, media, lease)

    def get_job(self, job_id: str) -> Job | None:
        row = self._db.execute(f"SELECT {self._JOB_COLS} FROM jobs WHERE id=?", (job_id,)).fetchone()
        return None if row is None else self._job_row(row)

    def unfinished_jobs(self) -> list[Job]:
        rows = self._db.execute(f"SELECT {self._JOB_COLS} FROM jobs WHERE status IN ('notStarted', 'running')"
                                " ORDER BY seq")
        return [self._job_row(r) for r in rows]

    def claim_job(self, owner: str, kinds: list[str], lease_seconds: float) -> Job | None:
        queued = f"FROM jobs WHERE status='notStarted' AND kind IN ({','.join('?' * len(kinds))}) ORDER BY seq LIMIT 1"
        if self._db.execute(f"SELECT 1 {queued}", kinds).fetchone() is None:
            return None  # an idle poll takes no write lock
        # BEGIN IMMEDIATE takes the database's write lock first, so no two claimers read the same queue head.
        with self._tx() as db:
            row = db.execute(f"SELECT {self._JOB_COLS} {queued}", kinds).fetchone()
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
                              (job.status, job.updated, json.dumps(job.errors), job.result, job.result_name,
                               job.result_media, job.id, job.owner)).rowcount > 0

    def fail_expired_jobs(self, errors: list[dict[str, Any]]) -> list[str]:
        expired = "SELECT id FROM jobs WHERE status='running' AND (lease_until IS NULL OR lease_until < ?)"
        if self._db.execute(expired, (time.time(),)).fetchone() is None:
            return []  # an idle poll takes no write lock
        with self._tx() as db:
            ids = [r[0] for r in db.execute(expired, (time.time(),))]
            db.executemany("UPDATE jobs SET status='failed', errors=?, updated=?, lease_until=NULL WHERE id=?",
                           [(json.dumps(errors), now_iso(), i) for i in ids])
        return ids

    def delete_finished_jobs(self, before: str) -> int:
        expired = "FROM jobs WHERE status IN ('succeeded', 'failed') AND expires != '' AND expires < ?"
        if self._db.execute(f"SELECT 1 {expired} LIMIT 1", (before,)).fetchone() is None:
            return 0  # an idle poll takes no write lock
        with self._tx() as db:
            return db.execute(f"DELETE {expired}", (before,)).rowcount

    # -- files --------------------------------------------------------------------------------------
    def put_file(self, f: StoredFile) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO files VALUES(?,?,?,?,?,?,?,?)",
                       (f.id, f.filename, f.purpose, f.bytes, f.created_at, f.status, f.data, f.project))

    def get_file(self, file_id: str, *, with_data: bool = False) -> StoredFile | None:
        data = "data" if with_data else "x''"
        row = self._db.execute(f"SELECT id, filename, purpose, bytes, created_at, status, {data}, project FROM files"
                               " WHERE id=?", (file_id,)).fetchone()
        return None if row is None else StoredFile(*row)

    def list_files(self, purpose: str | None = None) -> list[StoredFile]:
        rows = self._db.execute(
            "SELECT id, filename, purpose, bytes, created_at, status, x'', project FROM files"
            " WHERE ? IS NULL OR purpose=? ORDER BY created_at DESC, id DESC", (purpose, purpose))
        return [StoredFile(*r) for r in rows]

    def delete_file(self, file_id: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM files WHERE id=?", (file_id,)).rowcount > 0

    # -- keys ----------------------------------------------------------------------------------
    def add_key(self, key: ApiKey, key_hash: str) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO api_keys VALUES(?,?,?,?,?,?)",
                       (key.id, key_hash, key.name, key.role,
                        None if key.projects is None else json.dumps(key.projects), key.created))

    @staticmethod
    def _key_row(row: tuple[Any, ...]) -> ApiKey:
        kid, name, role, projects, created = row
        return ApiKey(kid, name, role, None if projects is None else json.loads(projects), created)

    def find_key(self, key_hash: str) -> ApiKey | None:
        row = self._db.execute("SELECT id, name, role, projects, created FROM api_keys WHERE hash=?",
                               (key_hash,)).fetchone()
        return None if row is None else self._key_row(row)

    def key_hash(self, key_id: str) -> str | None:
        row = self._db.execute("SELECT hash FROM api_keys WHERE id=?", (key_id,)).fetchone()
        return None if row is None else row[0]

    def list_keys(self) -> list[ApiKey]:
        rows = self._db.execute("SELECT id, name, role, projects, created FROM api_keys ORDER BY created, id")
        return [self._key_row(r) for r in rows]

    def has_keys(self) -> bool:
        return bool(self._db.execute("SELECT EXISTS(SELECT 1 FROM api_keys)").fetchone()[0])

    def delete_key(self, key_id: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM api_keys WHERE id=?", (key_id,)).rowcount > 0

