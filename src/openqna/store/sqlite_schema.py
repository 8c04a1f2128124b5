"""The embedded store's schema, and the migrations of databases written by older versions."""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid

from openqna import strict_json
from openqna.records import QnA, authored_digest
from openqna.store.base import (
    JSON_COLUMNS,
    LIVE,
    SchemaTooNew,
    attached_files_of,
    default_answer_of,
    file_records_json,
)
from openqna.store.sqlite_rows import dialog_from_json

log = logging.getLogger("openqna.store")

SCHEMA_VERSION = 14
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS projects(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE COLLATE NOCASE, description TEXT NOT NULL,
  language TEXT NOT NULL, multilingual INTEGER NOT NULL, settings TEXT NOT NULL, embedder TEXT,
  created TEXT NOT NULL, modified TEXT NOT NULL, last_deployed TEXT, next_id INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS versions(
  project_id INTEGER NOT NULL, deployment TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY(project_id, deployment)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records(
  project_id INTEGER NOT NULL, deployment TEXT NOT NULL, id INTEGER NOT NULL, kind TEXT NOT NULL,
  questions TEXT NOT NULL, answer TEXT NOT NULL, source TEXT NOT NULL, metadata TEXT NOT NULL,
  dialog TEXT NOT NULL, suggestions TEXT NOT NULL, content_hash TEXT NOT NULL, modified TEXT NOT NULL,
  fields TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY(project_id, deployment, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_source ON records(project_id, deployment, source);
CREATE TABLE IF NOT EXISTS units(
  project_id INTEGER NOT NULL, deployment TEXT NOT NULL, record_id INTEGER NOT NULL, field TEXT NOT NULL,
  ord INTEGER NOT NULL, terms TEXT NOT NULL, vector BLOB NOT NULL,
  PRIMARY KEY(project_id, deployment, record_id, field, ord)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS synonyms(
  project_id INTEGER NOT NULL, deployment TEXT NOT NULL, groups TEXT NOT NULL,
  PRIMARY KEY(project_id, deployment)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deployments(
  project_id INTEGER NOT NULL, name TEXT NOT NULL, last_deployed TEXT NOT NULL,
  PRIMARY KEY(project_id, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deploy_versions(
  project_id INTEGER NOT NULL, version INTEGER NOT NULL, created TEXT NOT NULL, created_by TEXT NOT NULL,
  qnas INTEGER NOT NULL, passages INTEGER NOT NULL, hash TEXT NOT NULL, kept INTEGER NOT NULL, default_answer TEXT,
  PRIMARY KEY(project_id, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deploy_events(
  project_id INTEGER NOT NULL, seq INTEGER NOT NULL, deployment TEXT NOT NULL, version INTEGER NOT NULL,
  deployed_at TEXT NOT NULL, deployed_by TEXT NOT NULL, PRIMARY KEY(project_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS test_sets(
  project_id INTEGER NOT NULL, name TEXT NOT NULL, created TEXT NOT NULL, modified TEXT NOT NULL, items TEXT NOT NULL,
  PRIMARY KEY(project_id, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS test_runs(
  project_id INTEGER NOT NULL, id INTEGER NOT NULL, test_set TEXT NOT NULL, deployment TEXT NOT NULL,
  created TEXT NOT NULL, threshold REAL NOT NULL, summary TEXT NOT NULL, results TEXT NOT NULL,
  PRIMARY KEY(project_id, id));
CREATE TABLE IF NOT EXISTS sources(
  project_id INTEGER NOT NULL, source TEXT NOT NULL, display_name TEXT NOT NULL, source_uri TEXT NOT NULL,
  source_kind TEXT NOT NULL, content_structure_kind TEXT NOT NULL, content_hash TEXT NOT NULL,
  last_updated TEXT NOT NULL, file_records TEXT, PRIMARY KEY(project_id, source)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS source_refresh(
  project_id INTEGER NOT NULL, source TEXT NOT NULL, every_seconds INTEGER NOT NULL, next_due TEXT NOT NULL,
  checked TEXT NOT NULL, changed TEXT NOT NULL, etag TEXT NOT NULL, last_modified TEXT NOT NULL, outcome TEXT NOT NULL,
  PRIMARY KEY(project_id, source)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trained(
  project_id INTEGER NOT NULL, deployment TEXT NOT NULL, created TEXT NOT NULL, meta TEXT NOT NULL, hash TEXT NOT NULL,
  data BLOB NOT NULL, PRIMARY KEY(project_id, deployment)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS feedback(
  project_id INTEGER NOT NULL, qna_id INTEGER NOT NULL, question TEXT NOT NULL, user_id TEXT NOT NULL,
  created TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS feedback_qna ON feedback(project_id, qna_id);
CREATE TABLE IF NOT EXISTS accepted_questions(
  project_id INTEGER NOT NULL, qna_id INTEGER NOT NULL, question TEXT NOT NULL, via TEXT NOT NULL,
  created TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS accepted_questions_project ON accepted_questions(project_id, created);
CREATE TABLE IF NOT EXISTS queries(
  project_id INTEGER NOT NULL, created TEXT NOT NULL, deployment TEXT NOT NULL, question TEXT NOT NULL,
  user_hash TEXT NOT NULL, qna_id INTEGER NOT NULL, confidence REAL NOT NULL);
CREATE INDEX IF NOT EXISTS queries_time ON queries(project_id, created);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, project TEXT NOT NULL, status TEXT NOT NULL, created TEXT NOT NULL,
  updated TEXT NOT NULL, expires TEXT NOT NULL, errors TEXT NOT NULL, params TEXT NOT NULL, owner TEXT NOT NULL,
  result BLOB, result_name TEXT, result_media TEXT, lease_until REAL, seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS files(
  id TEXT PRIMARY KEY, filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL, status TEXT NOT NULL, data BLOB NOT NULL, project TEXT, scope TEXT, expires_at INTEGER);
CREATE TABLE IF NOT EXISTS vector_store_files(
  project_id INTEGER NOT NULL, file_id TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL,
  PRIMARY KEY(project_id, file_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys(
  id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, name TEXT NOT NULL, role TEXT NOT NULL,
  projects TEXT, created TEXT NOT NULL);
"""


def migrate(db: sqlite3.Connection) -> str:
    """Create the tables a new database lacks and bring an older one up to date (idempotent); returns the database's
    random instance id, which names its saved indexes: versions restart in a new database file."""
    _refuse_newer(db)  # before anything is created or written
    current = _current(db)
    if current is not None:  # nothing to write: a store on a read-only mount opens too
        return current
    db.executescript(SCHEMA)  # idempotent; executescript manages its own transaction
    db.execute("BEGIN IMMEDIATE")
    try:
        _refuse_newer(db)  # a newer openqna may have upgraded it meanwhile
        db.execute("INSERT OR IGNORE INTO meta VALUES('seq', '0')")
        # names this database in its saved indexes: versions restart in a new database file
        db.execute("INSERT OR IGNORE INTO meta VALUES('instance', ?)", (uuid.uuid4().hex,))
        instance: str = db.execute("SELECT value FROM meta WHERE key='instance'").fetchone()[0]
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else SCHEMA_VERSION
        if version < 2 and "fields" not in {c[1] for c in db.execute("PRAGMA table_info(records)")}:
            db.execute("ALTER TABLE records ADD COLUMN fields TEXT NOT NULL DEFAULT '{}'")
        if version < 3 and "seq" not in {c[1] for c in db.execute("PRAGMA table_info(jobs)")}:
            # v3: jobs are claimed from a queue (``seq`` orders it) and held under a lease
            db.execute("ALTER TABLE jobs ADD COLUMN lease_until REAL")
            db.execute("ALTER TABLE jobs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
            db.execute("UPDATE jobs SET seq=rowid")
        if version < 4:
            _repair_surrogates(db)
        if version < 5 and "scope" not in {c[1] for c in db.execute("PRAGMA table_info(files)")}:
            # v5: a file keeps the projects of the key that uploaded it; older files belong to no project in particular
            db.execute("ALTER TABLE files ADD COLUMN scope TEXT")
        if version < 10 and "expires_at" not in {c[1] for c in db.execute("PRAGMA table_info(files)")}:
            # v10: a file may expire (OpenAI's expires_after); older files never do
            db.execute("ALTER TABLE files ADD COLUMN expires_at INTEGER")
        # v6: deploys are recorded as versions (``deploy_versions``, ``deploy_events``: created above, empty); a
        # deployment made before becomes a version when it is next deployed over (``SharedStatements.deploy``)
        # v7: test sets and their runs (``test_sets``, ``test_runs``: created above, empty)
        # v8: URL sources that refresh (``source_refresh``: created above, empty)
        # v9: accepted suggestions, which test sets are made from (``accepted_questions``), and trained models
        # (``trained``): created above, empty
        # v11: records are found by source (``records_source``, created above): a vector store reads one file's
        # chunks, not every record
        if version < 12:
            # v12: a vector store's files are rows of ``vector_store_files`` (created above), not its settings
            _move_attached_files(db)
        if version < 13 and "default_answer" not in {c[1] for c in db.execute("PRAGMA table_info(deploy_versions)")}:
            # v13: a version keeps the default answer it was deployed with; those deployed before answer the one
            # their project has now, as they did
            db.execute("ALTER TABLE deploy_versions ADD COLUMN default_answer TEXT")
            for pid, settings in db.execute("SELECT id, settings FROM projects").fetchall():
                db.execute("UPDATE deploy_versions SET default_answer=? WHERE project_id=?",
                           (default_answer_of(json.loads(settings)), pid))
        if version < 14 and "file_records" not in {c[1] for c in db.execute("PRAGMA table_info(sources)")}:
            # v14: a source keeps the digest of each record as its file wrote it, which tells the author's edits
            db.execute("ALTER TABLE sources ADD COLUMN file_records TEXT")
            _record_source_files(db)
        db.execute("CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(status, seq)")
        db.execute("CREATE INDEX IF NOT EXISTS jobs_seq ON jobs(seq)")  # max(seq) on submit, however many jobs
        db.execute("INSERT OR REPLACE INTO meta VALUES('schema_version', ?)", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite has rolled back itself on a full disk (SQLITE_FULL)
            db.execute("ROLLBACK")
        raise
    return instance


def _current(db: sqlite3.Connection) -> str | None:
    """The instance id of a database whose schema is this version's, which opening it need not write to."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return None
    meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'instance', 'seq')").fetchall())
    if meta.get("schema_version") != str(SCHEMA_VERSION) or "seq" not in meta:
        return None
    return meta.get("instance")


def _refuse_newer(db: sqlite3.Connection) -> None:
    """``SchemaTooNew`` when a newer openqna has upgraded the database (a new database has no ``meta`` yet)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
        return
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise SchemaTooNew(int(row[0]), SCHEMA_VERSION)


def _move_attached_files(db: sqlite3.Connection) -> None:
    """Migration 12: each vector store's files, kept until then in its settings (``openai_vector_store.files``), moved
    to rows of ``vector_store_files``; the project's ``modified`` stays as it was (nobody changed it)."""
    for pid, text in db.execute("SELECT id, settings FROM projects").fetchall():
        settings = json.loads(text)
        files = attached_files_of(settings)
        if files is None:
            continue
        db.executemany("INSERT OR REPLACE INTO vector_store_files VALUES(?,?,?,?)",
                       [(pid, f.file_id, f.seq, strict_json.dumps(f.state)) for f in files])
        db.execute("UPDATE projects SET settings=? WHERE id=?", (strict_json.dumps(settings), pid))


def _record_source_files(db: sqlite3.Connection) -> None:
    """Migration 14: each registered source's ``file_records``, from its live records as they are (whether one was
    edited before cannot be known now; an edit from now on is: ``kb/source_edits.py``)."""
    for pid, source in db.execute("SELECT project_id, source FROM sources").fetchall():
        rows = db.execute("SELECT id, kind, questions, answer, metadata, dialog FROM records WHERE project_id=? AND"
                          " deployment=? AND source=?", (pid, LIVE, source)).fetchall()
        digests = {rid: authored_digest(QnA(json.loads(questions), answer, rid, source, json.loads(metadata),
                                            dialog_from_json(dialog), kind))
                   for rid, kind, questions, answer, metadata, dialog in rows}
        db.execute("UPDATE sources SET file_records=? WHERE project_id=? AND source=?",
                   (file_records_json(digests), pid, source))


def _repair_surrogates(db: sqlite3.Connection) -> None:
    """Migration 4: every stored JSON value that holds a lone surrogate, with each replaced by U+FFFD; the
    columns and names repaired are logged, so that their owners can check them."""
    repaired = []
    for table, column in JSON_COLUMNS:  # (the same on PostgreSQL, whose json type keeps the escapes too)
        # LIKE is case-insensitive for ASCII: this finds \uD800 as well; json.loads tells a lone one from a pair
        for (text,) in db.execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} LIKE '%\\ud%'").fetchall():
            value = json.loads(text)
            if strict_json.lone_surrogate(value) is None:
                continue
            count = db.execute(f"UPDATE {table} SET {column}=? WHERE {column}=?",
                               (strict_json.dumps(value), text)).rowcount
            repaired.append(f"{count} in {table}.{column}")
    if repaired:
        log.warning("repaired stored JSON that held lone UTF-16 surrogates (each is now U+FFFD): %s",
                    ", ".join(repaired))
